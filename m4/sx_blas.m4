# SX_BLAS: a CBLAS (OpenBLAS) for the CPU matrix products of the trainer.
#   --with-blas[=DIR]   default: pkg-config openblas, report if absent
AC_DEFUN([SX_BLAS], [
	AC_ARG_WITH([blas],
		AS_HELP_STRING([--with-blas@<:@=DIR@:>@], [OpenBLAS prefix (CPU matrix products)]),
		[], [with_blas=check])
	have_blas=no
	BLAS_CFLAGS=""
	BLAS_LIBS=""
	BLAS_VERSION_STR=""
	AS_CASE([$with_blas],
	[no], [],
	[yes|check], [
		PKG_CHECK_MODULES([BLAS], [openblas], [have_blas=yes; BLAS_VERSION_STR="OpenBLAS $($PKG_CONFIG --modversion openblas)"], [have_blas=no])
	], [
		BLAS_CFLAGS="-I$with_blas/include"
		BLAS_LIBS="-L$with_blas/lib -lopenblas"
		have_blas=yes
	])
	AS_IF([test "x$have_blas" = xyes], [
		sx_save_CPPFLAGS=$CPPFLAGS; sx_save_LIBS=$LIBS
		CPPFLAGS="$CPPFLAGS $BLAS_CFLAGS"; LIBS="$BLAS_LIBS $LIBS"
		AC_CHECK_HEADER([cblas.h], [], [have_blas=no])
		AS_IF([test "x$have_blas" = xyes], [AC_CHECK_FUNC([cblas_sgemm], [], [have_blas=no])])
		AS_IF([test "x$have_blas" = xyes], [AC_CHECK_FUNCS([openblas_set_num_threads])])
		CPPFLAGS=$sx_save_CPPFLAGS; LIBS=$sx_save_LIBS
	])
	AS_IF([test "x$have_blas" = xno && test "x$with_blas" != xcheck && test "x$with_blas" != xno],
		[AC_MSG_ERROR([--with-blas was given but cblas.h or cblas_sgemm was not found (Debian: apt-get install libopenblas-dev)])])
	AS_IF([test "x$have_blas" = xyes], [AC_DEFINE([HAVE_BLAS], [1], [CBLAS library])])
	AC_SUBST([BLAS_CFLAGS])
	AC_SUBST([BLAS_LIBS])
	AM_CONDITIONAL([HAVE_BLAS], [test "x$have_blas" = xyes])
])
