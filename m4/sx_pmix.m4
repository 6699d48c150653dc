# SX_PMIX: PMIx client library (trainer bootstrap under srun --mpi=pmix).
#   --with-pmix[=DIR]   default: pkg-config pmix, report if absent
AC_DEFUN([SX_PMIX], [
	AC_ARG_WITH([pmix],
		AS_HELP_STRING([--with-pmix@<:@=DIR@:>@], [PMIx prefix (trainer bootstrap)]),
		[], [with_pmix=check])
	have_pmix=no
	PMIX_CFLAGS=""
	PMIX_LIBS=""
	PMIX_VERSION_STR=""
	AS_CASE([$with_pmix],
	[no], [],
	[yes|check], [
		PKG_CHECK_MODULES([PMIX], [pmix >= 3], [have_pmix=yes; PMIX_VERSION_STR=$($PKG_CONFIG --modversion pmix)], [have_pmix=no])
	], [
		PMIX_CFLAGS="-I$with_pmix/include"
		PMIX_LIBS="-L$with_pmix/lib -lpmix"
		have_pmix=yes
	])
	AS_IF([test "x$have_pmix" = xyes], [
		sx_save_CPPFLAGS=$CPPFLAGS; sx_save_LIBS=$LIBS
		CPPFLAGS="$CPPFLAGS $PMIX_CFLAGS"; LIBS="$PMIX_LIBS $LIBS"
		AC_CHECK_HEADER([pmix.h], [], [have_pmix=no])
		AS_IF([test "x$have_pmix" = xyes], [AC_CHECK_FUNC([PMIx_Init], [], [have_pmix=no])])
		CPPFLAGS=$sx_save_CPPFLAGS; LIBS=$sx_save_LIBS
	])
	AS_IF([test "x$have_pmix" = xno && test "x$with_pmix" != xcheck && test "x$with_pmix" != xno],
		[AC_MSG_ERROR([--with-pmix was given but pmix.h or libpmix was not found (Debian: apt-get install libpmix-dev)])])
	AS_IF([test "x$have_pmix" = xyes], [AC_DEFINE([HAVE_PMIX], [1], [PMIx client library])])
	AC_SUBST([PMIX_CFLAGS])
	AC_SUBST([PMIX_LIBS])
	AM_CONDITIONAL([HAVE_PMIX], [test "x$have_pmix" = xyes])
])
