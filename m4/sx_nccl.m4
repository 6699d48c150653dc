# SX_NCCL: NCCL collectives for GPU memory. Looked for only with CUDA.
#   --with-nccl[=DIR]   default: the CUDA toolkit's tree, then /usr
AC_DEFUN([SX_NCCL], [
	AC_ARG_WITH([nccl],
		AS_HELP_STRING([--with-nccl@<:@=DIR@:>@], [NCCL prefix (GPU collectives; needs CUDA)]),
		[], [with_nccl=check])
	have_nccl=no
	NCCL_CFLAGS=""
	NCCL_LDFLAGS=""
	NCCL_LIBS=""
	AS_IF([test "x$with_nccl" != xno && test "x$have_cuda" != xyes && test "x$with_nccl" != xcheck],
		[AC_MSG_ERROR([--with-nccl needs the CUDA toolkit (--with-cuda)])])
	AS_IF([test "x$with_nccl" != xno && test "x$have_cuda" = xyes], [
		AS_CASE([$with_nccl], [yes|check], [sx_nccl_dirs="$CUDA_HOME /usr"], [sx_nccl_dirs="$with_nccl"])
		AC_MSG_CHECKING([for NCCL])
		for sx_d in $sx_nccl_dirs; do
			AS_IF([test -f "$sx_d/include/nccl.h"], [
				for sx_l in "$sx_d/lib64" "$sx_d/lib" "$sx_d/lib/x86_64-linux-gnu"; do
					AS_IF([test -e "$sx_l/libnccl.so"], [
						NCCL_CFLAGS="-I$sx_d/include"
						NCCL_LDFLAGS="-L$sx_l -Wl,-rpath,$sx_l"
						NCCL_LIBS="-lnccl"
						have_nccl=yes
						break 2
					])
				done
			])
		done
		AC_MSG_RESULT([$have_nccl])
		AS_IF([test "x$have_nccl" = xyes], [
			sx_save_CPPFLAGS=$CPPFLAGS; sx_save_LDFLAGS=$LDFLAGS; sx_save_LIBS=$LIBS
			CPPFLAGS="$CPPFLAGS $CUDA_CFLAGS $NCCL_CFLAGS"; LDFLAGS="$LDFLAGS $CUDA_LDFLAGS $NCCL_LDFLAGS"
			LIBS="$NCCL_LIBS $CUDA_LIBS $LIBS"
			AC_CHECK_FUNC([ncclCommInitRank], [], [have_nccl=no])
			CPPFLAGS=$sx_save_CPPFLAGS; LDFLAGS=$sx_save_LDFLAGS; LIBS=$sx_save_LIBS
		])
		AS_IF([test "x$have_nccl" = xno && test "x$with_nccl" != xcheck],
			[AC_MSG_ERROR([--with-nccl was given but nccl.h or libnccl was not found in: $sx_nccl_dirs])])
	])
	AS_IF([test "x$have_nccl" = xyes], [AC_DEFINE([HAVE_NCCL], [1], [NCCL library])])
	AC_SUBST([NCCL_CFLAGS])
	AC_SUBST([NCCL_LDFLAGS])
	AC_SUBST([NCCL_LIBS])
	AM_CONDITIONAL([HAVE_NCCL], [test "x$have_nccl" = xyes])
])
