# SX_CMOCKA: the cmocka unit-test library (make check).
#   --with-cmocka[=DIR]   default: pkg-config cmocka, report if absent
AC_DEFUN([SX_CMOCKA], [
	AC_ARG_WITH([cmocka],
		AS_HELP_STRING([--with-cmocka@<:@=DIR@:>@], [cmocka prefix (unit tests)]),
		[], [with_cmocka=check])
	have_cmocka=no
	CMOCKA_CFLAGS=""
	CMOCKA_LIBS=""
	AS_CASE([$with_cmocka],
	[no], [],
	[yes|check], [
		PKG_CHECK_MODULES([CMOCKA], [cmocka >= 1.1], [have_cmocka=yes], [have_cmocka=no])
	], [
		CMOCKA_CFLAGS="-I$with_cmocka/include"
		CMOCKA_LIBS="-L$with_cmocka/lib -lcmocka"
		have_cmocka=yes
	])
	AS_IF([test "x$have_cmocka" = xno && test "x$with_cmocka" != xcheck && test "x$with_cmocka" != xno],
		[AC_MSG_ERROR([--with-cmocka was given but cmocka was not found (Debian: apt-get install libcmocka-dev)])])
	AC_SUBST([CMOCKA_CFLAGS])
	AC_SUBST([CMOCKA_LIBS])
	AM_CONDITIONAL([HAVE_CMOCKA], [test "x$have_cmocka" = xyes])
])
