# SX_XXHASH: libxxhash (the whole-file seal of trainer checkpoints, XXH3).
#   pkg-config libxxhash, else -lxxhash with xxhash.h; report if absent
AC_DEFUN([SX_XXHASH], [
	have_xxhash=no
	PKG_CHECK_MODULES([XXHASH], [libxxhash >= 0.8], [have_xxhash=yes],
		[XXHASH_CFLAGS=""; XXHASH_LIBS="-lxxhash"; have_xxhash=check])
	sx_save_CPPFLAGS=$CPPFLAGS; sx_save_LIBS=$LIBS
	CPPFLAGS="$CPPFLAGS $XXHASH_CFLAGS"; LIBS="$XXHASH_LIBS $LIBS"
	AC_CHECK_HEADER([xxhash.h], [
		AC_MSG_CHECKING([for XXH3_64bits_update in libxxhash])
		AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <xxhash.h>]],
			[[XXH3_state_t *s = XXH3_createState();
			  XXH3_64bits_reset(s); XXH3_64bits_update(s, "", 0);
			  return (int)XXH3_64bits_digest(s);]])],
			[have_xxhash=yes], [have_xxhash=no])
		AC_MSG_RESULT([$have_xxhash])
	], [have_xxhash=no])
	CPPFLAGS=$sx_save_CPPFLAGS; LIBS=$sx_save_LIBS
	AS_IF([test "x$have_xxhash" = xyes],
		[AC_DEFINE([HAVE_XXHASH], [1], [libxxhash with XXH3])],
		[XXHASH_CFLAGS=""; XXHASH_LIBS=""])
	AC_SUBST([XXHASH_CFLAGS])
	AC_SUBST([XXHASH_LIBS])
])
