/*
 * cuda_internal.h - what the .cu files of the CUDA path share: the CUDA
 * runtime (the one header of the tree that includes cuda_runtime.h; the
 * .cu files include this one instead), error checks, the stream, the
 * device's owner, scratch workspace, warp reductions. Not part of the C
 * view (sigma_cuda.h); included only by the .cu files here.
 *
 * Every op runs on one stream (the legacy default stream), in issue order,
 * so a scratch buffer handed out by cuda_workspace() may be reused by the
 * next op without synchronisation.
 */
#ifndef SIGMA_CUDA_INTERNAL_H
#define SIGMA_CUDA_INTERNAL_H

#include <cstddef>
#include <cuda_runtime.h>

/*
 * The ops return void: a CUDA error is fatal to the process (a leaf: the
 * trainer or a test), reported with file, line and the runtime's message.
 */
void cuda_fatal(const char *file, int line, const char *what, const char *msg);

#define CUDA_CHECK(call)                                                       \
	do {                                                                   \
		cudaError_t cuda_check_rc_ = (call);                           \
		if (cuda_check_rc_ != cudaSuccess)                             \
			cuda_fatal(__FILE__, __LINE__, #call,                  \
				   cudaGetErrorString(cuda_check_rc_));        \
	} while (0)

/* after a kernel launch: a bad configuration shows up here */
#define CUDA_LAUNCHED() CUDA_CHECK(cudaGetLastError())

/* the stream every op uses (sigma_cuda_stream() hands it to the
 * collectives) */
#define CUDA_STREAM ((cudaStream_t)0)

/*
 * Make dev this process's device (device.cu), for sigma_ops_cuda's init:
 * the only cudaSetDevice of the ops; sigma_cuda_device_claim then hands
 * the collectives the same device. 0, or -ENODEV (the runtime's error
 * cleared).
 */
int cuda_device_own(int dev);

/*
 * Scratch device memory of at least bytes, valid until the next call
 * (grow-only; freeing the old buffer synchronises the device).
 */
void *cuda_workspace(size_t bytes);

static inline unsigned cuda_blocks(size_t n, unsigned threads)
{
	size_t b = (n + threads - 1) / threads;

	return b ? (unsigned)b : 1u;
}

/* sums and maxima over a warp: a fixed butterfly, the same order always */
__device__ __forceinline__ float warp_sum(float v)
{
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

__device__ __forceinline__ double warp_sum_d(double v)
{
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

__device__ __forceinline__ float warp_max(float v)
{
	for (int o = 16; o > 0; o >>= 1)
		v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	return v;
}

/* attention.cu */
void cuda_attention_forward(float *out, float *att, const float *q,
			    const float *k, const float *v, int B, int T, int H,
			    int Dh);
void cuda_attention_backward(float *dq, float *dk, float *dv, float *scratch,
			     const float *dout, const float *q, const float *k,
			     const float *v, const float *att, int B, int T,
			     int H, int Dh);

#endif /* SIGMA_CUDA_INTERNAL_H */
