# SX_DNNL: oneDNN (libdnnl), optional; only bench/gemm-shapes uses it, to
# compare its fp32 and bf16 matrix products with OpenBLAS's (docs/cpu-blas.md).
#   --with-dnnl[=DIR]   default: look in the default paths, report if absent
AC_DEFUN([SX_DNNL], [
	AC_ARG_WITH([dnnl],
		AS_HELP_STRING([--with-dnnl@<:@=DIR@:>@], [oneDNN prefix (bench/gemm-shapes only)]),
		[], [with_dnnl=check])
	have_dnnl=no
	DNNL_CFLAGS=""
	DNNL_LIBS=""
	DNNL_VERSION_STR=""
	AS_CASE([$with_dnnl],
	[no], [],
	[yes|check], [DNNL_LIBS="-ldnnl"],
	[DNNL_CFLAGS="-I$with_dnnl/include"; DNNL_LIBS="-L$with_dnnl/lib -ldnnl"])
	AS_IF([test "x$with_dnnl" != xno], [
		sx_save_CPPFLAGS=$CPPFLAGS; sx_save_LIBS=$LIBS
		CPPFLAGS="$CPPFLAGS $DNNL_CFLAGS"; LIBS="$DNNL_LIBS $LIBS"
		AC_CHECK_HEADERS([oneapi/dnnl/dnnl.h], [have_dnnl=yes], [have_dnnl=no])
		AS_IF([test "x$have_dnnl" = xyes], [
			AC_CHECK_LIB([dnnl], [dnnl_sgemm], [], [have_dnnl=no])])
		AS_IF([test "x$have_dnnl" = xyes], [
			AC_COMPUTE_INT([sx_dnnl_major], [DNNL_VERSION_MAJOR],
				[[#include <oneapi/dnnl/dnnl_version.h>]], [sx_dnnl_major=0])
			AC_COMPUTE_INT([sx_dnnl_minor], [DNNL_VERSION_MINOR],
				[[#include <oneapi/dnnl/dnnl_version.h>]], [sx_dnnl_minor=0])
			DNNL_VERSION_STR="oneDNN $sx_dnnl_major.$sx_dnnl_minor"])
		CPPFLAGS=$sx_save_CPPFLAGS; LIBS=$sx_save_LIBS
	])
	AS_IF([test "x$have_dnnl" = xno && test "x$with_dnnl" != xcheck && test "x$with_dnnl" != xno],
		[AC_MSG_ERROR([--with-dnnl was given but oneapi/dnnl/dnnl.h or dnnl_sgemm was not found (Debian: apt-get install libdnnl-dev)])])
	AS_IF([test "x$have_dnnl" = xyes],
		[AC_DEFINE([HAVE_DNNL], [1], [oneDNN (libdnnl)])],
		[DNNL_CFLAGS=""; DNNL_LIBS=""])
	AC_SUBST([DNNL_CFLAGS])
	AC_SUBST([DNNL_LIBS])
	AM_CONDITIONAL([HAVE_DNNL], [test "x$have_dnnl" = xyes])
])
