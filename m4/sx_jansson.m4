# SX_JANSSON: the jansson JSON library (sigmad's event log, sigmactl --json,
# sigma-probe --json, sigma-sim --json). Required: every program that reads
# or writes JSON uses it, so configure stops without it.
#   pkg-config jansson >= 2.13 (Debian 12: libjansson-dev 2.14)
AC_DEFUN([SX_JANSSON], [
	PKG_CHECK_MODULES([JANSSON], [jansson >= 2.13], [have_jansson=yes],
		[AC_MSG_ERROR([jansson >= 2.13 not found by pkg-config: $JANSSON_PKG_ERRORS
sigma reads and writes JSON through jansson (Debian: apt-get install libjansson-dev)])])
	sx_save_CPPFLAGS=$CPPFLAGS; sx_save_LIBS=$LIBS
	CPPFLAGS="$CPPFLAGS $JANSSON_CFLAGS"; LIBS="$JANSSON_LIBS $LIBS"
	AC_MSG_CHECKING([for json_dumpb in jansson])
	AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <jansson.h>]],
		[[char b[8]; json_t *o = json_object();
		  return (int)json_dumpb(o, b, sizeof(b), JSON_COMPACT);]])],
		[AC_MSG_RESULT([yes])],
		[AC_MSG_RESULT([no])
		 AC_MSG_ERROR([jansson was found but a program cannot link with it (JANSSON_LIBS=$JANSSON_LIBS)])])
	CPPFLAGS=$sx_save_CPPFLAGS; LIBS=$sx_save_LIBS
	JANSSON_VERSION_STR=$($PKG_CONFIG --modversion jansson 2>/dev/null)
	AC_SUBST([JANSSON_CFLAGS])
	AC_SUBST([JANSSON_LIBS])
])
