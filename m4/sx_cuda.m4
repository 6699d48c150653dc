# SX_CUDA: the CUDA toolkit (nvcc, cudart, cuBLAS) for the GPU path.
#   --with-cuda[=DIR]          default: /usr/local/cuda if it has nvcc, report
#   --with-nvcc-gencode=FLAGS  default: Hopper SASS (sm_90) and its PTX
#                              (compute_90), which newer GPUs compile at load
# Links against the toolkit's libraries only (cudart loads the driver at run
# time), with the stubs directory on the search path, so everything builds on
# a machine without a GPU or driver.
AC_DEFUN([SX_CUDA], [
	AC_ARG_WITH([cuda],
		AS_HELP_STRING([--with-cuda@<:@=DIR@:>@], [CUDA toolkit prefix (GPU kernels), default /usr/local/cuda]),
		[], [with_cuda=check])
	AC_ARG_WITH([nvcc-gencode],
		AS_HELP_STRING([--with-nvcc-gencode=FLAGS], [nvcc -gencode flags (default: Hopper sm_90 and PTX compute_90)]),
		[CUDA_GENCODE=$withval], [CUDA_GENCODE="-gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90"])
	have_cuda=no
	CUDA_HOME=""
	CUDA_CFLAGS=""
	CUDA_LDFLAGS=""
	CUDA_LIBS=""
	NVCC=""
	AS_CASE([$with_cuda],
	[no], [],
	[yes|check], [sx_cuda_dirs="${CUDA_HOME_ENV:-} /usr/local/cuda /usr/lib/cuda"],
	[sx_cuda_dirs="$with_cuda"])
	AS_IF([test "x$with_cuda" != xno], [
		AC_MSG_CHECKING([for the CUDA toolkit])
		for sx_d in $sx_cuda_dirs; do
			AS_IF([test -x "$sx_d/bin/nvcc" && test -f "$sx_d/include/cuda_runtime.h"], [CUDA_HOME=$sx_d; break])
		done
		AS_IF([test -n "$CUDA_HOME"], [
			NVCC="$CUDA_HOME/bin/nvcc"
			sx_cuda_lib=$CUDA_HOME/lib64
			AS_IF([test -d "$sx_cuda_lib"], [], [sx_cuda_lib=$CUDA_HOME/lib])
			CUDA_CFLAGS="-I$CUDA_HOME/include"
			CUDA_LDFLAGS="-L$sx_cuda_lib -L$sx_cuda_lib/stubs -Wl,-rpath,$sx_cuda_lib"
			CUDA_LIBS="-lcublasLt -lcublas -lcudart"
			AC_MSG_RESULT([$CUDA_HOME])
			sx_save_CPPFLAGS=$CPPFLAGS; sx_save_LDFLAGS=$LDFLAGS; sx_save_LIBS=$LIBS
			CPPFLAGS="$CPPFLAGS $CUDA_CFLAGS"; LDFLAGS="$LDFLAGS $CUDA_LDFLAGS"; LIBS="$CUDA_LIBS $LIBS"
			AC_MSG_CHECKING([whether cudart and cuBLAS link])
			AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <cuda_runtime.h>
#include <cublas_v2.h>]], [[int n; cublasHandle_t h; cudaGetDeviceCount(&n); cublasCreate(&h);]])],
				[have_cuda=yes], [have_cuda=no])
			AC_MSG_RESULT([$have_cuda])
			CPPFLAGS=$sx_save_CPPFLAGS; LDFLAGS=$sx_save_LDFLAGS; LIBS=$sx_save_LIBS
			AS_IF([test "x$have_cuda" = xyes], [
				AC_MSG_CHECKING([nvcc version])
				sx_nvcc_ver=$($NVCC --version 2>/dev/null | sed -n 's/.*release \([[0-9.]]*\).*/\1/p')
				AC_MSG_RESULT([${sx_nvcc_ver:-unknown}])
			])
		], [AC_MSG_RESULT([no])])
		AS_IF([test "x$have_cuda" = xno && test "x$with_cuda" != xcheck],
			[AC_MSG_ERROR([--with-cuda was given but no usable CUDA toolkit (bin/nvcc, include/cuda_runtime.h, cudart, cuBLAS) was found in: $sx_cuda_dirs])])
	])
	AS_IF([test "x$have_cuda" = xyes], [AC_DEFINE([HAVE_CUDA], [1], [CUDA toolkit])], [CUDA_GENCODE=""])
	AC_SUBST([CUDA_HOME])
	AC_SUBST([CUDA_CFLAGS])
	AC_SUBST([CUDA_LDFLAGS])
	AC_SUBST([CUDA_LIBS])
	AC_SUBST([CUDA_GENCODE])
	AC_SUBST([NVCC])
	AM_CONDITIONAL([HAVE_CUDA], [test "x$have_cuda" = xyes])
])
