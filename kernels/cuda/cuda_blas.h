/*
 * cuda_blas.h - cuBLAS for the .cu files that call it: ops_cuda.cu creates
 * the handle in init, matmul.cu and attention.cu multiply through it. The
 * one header of the tree that includes cublas_v2.h (the other .cu files
 * do without it); the handle, and the check of a cuBLAS call.
 */
#ifndef SIGMA_CUDA_BLAS_H
#define SIGMA_CUDA_BLAS_H

#include <cublas_v2.h>

#include "cuda_internal.h"

/*
 * The handle of every product, made by sigma_ops_cuda's init
 * (ops_cuda.cu): on CUDA_STREAM, the default math mode (no TF32 for
 * fp32), no atomics, host pointers for alpha and beta.
 */
extern cublasHandle_t cuda_blas;

static inline const char *cublas_msg(cublasStatus_t s)
{
	switch (s) {
	case CUBLAS_STATUS_NOT_INITIALIZED:
		return "cuBLAS not initialised";
	case CUBLAS_STATUS_ALLOC_FAILED:
		return "cuBLAS allocation failed";
	case CUBLAS_STATUS_INVALID_VALUE:
		return "cuBLAS invalid value";
	case CUBLAS_STATUS_ARCH_MISMATCH:
		return "cuBLAS architecture mismatch";
	case CUBLAS_STATUS_EXECUTION_FAILED:
		return "cuBLAS execution failed";
	case CUBLAS_STATUS_INTERNAL_ERROR:
		return "cuBLAS internal error";
	case CUBLAS_STATUS_NOT_SUPPORTED:
		return "cuBLAS: not supported";
	default:
		return "cuBLAS error";
	}
}

#define CUBLAS_CHECK(call)                                                     \
	do {                                                                   \
		cublasStatus_t cublas_check_rc_ = (call);                      \
		if (cublas_check_rc_ != CUBLAS_STATUS_SUCCESS)                 \
			cuda_fatal(__FILE__, __LINE__, #call,                  \
				   cublas_msg(cublas_check_rc_));              \
	} while (0)

#endif /* SIGMA_CUDA_BLAS_H */
