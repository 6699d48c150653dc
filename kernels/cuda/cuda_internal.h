/*
 * cuda_internal.h - what the .cu files of the CUDA path share: the CUDA
 * runtime (the one header of the tree that includes cuda_runtime.h; the
 * .cu files include this one instead), error checks, the stream, the
 * device's owner, scratch workspace, warp reductions, the stable sort, and
 * the ops each file gives the table of ops_cuda.cu. Not part of the C
 * view (sigma_cuda.h); included only by the .cu files here. cuBLAS is in
 * cuda_blas.h, for the files that multiply through it.
 *
 * Every op runs on one stream (the legacy default stream), in issue order,
 * so a scratch buffer handed out by cuda_workspace() may be reused by the
 * next op without synchronisation.
 */
#ifndef SIGMA_CUDA_INTERNAL_H
#define SIGMA_CUDA_INTERNAL_H

#include <cstddef>
#include <cstdint>
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
 * (grow-only; the old buffer is freed at the next release, ops.h).
 */
void *cuda_workspace(size_t bytes);

/* the most blocks a grid may have along y (and z) */
#define CUDA_GRID_Y_MAX 65535

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

/*
 * Stable sort of n int keys in [0, nkeys) carrying their original index:
 * skey, sidx (device, n each), with ws[ws_len] as scratch; sort_ws_bytes
 * is the scratch it needs (ops_cuda.cu). For the embedding gradient and
 * the routing.
 */
void stable_sort_index(int *skey, int *sidx, const int *keys, int n, int nkeys,
		       char *ws, size_t ws_len);
size_t sort_ws_bytes(int n, int nkeys);

/* the device double sum() and sumsq() reduce into (made by init) */
extern double *cuda_red_out;

/*
 * The ops of sigma_ops_cuda (ops_cuda.cu) by the file that holds them,
 * each with the signature and meaning of its member of struct sigma_ops
 * (kernels/ops.h); device pointers throughout.
 */

/* matmul.cu */
void cuda_matmul_forward(float *out, const float *in, const float *w, int N,
			 int C, int OC, int accumulate);
void cuda_matmul_backward(float *din, float *dw, const float *dout,
			  const float *in, const float *w, int N, int C, int OC,
			  int accumulate);
void cuda_grouped_matmul_forward(float *out, const float *in, const float *w,
				 const int *offs, int G, int C, int OC);
void cuda_grouped_matmul_backward(float *din, float *dw, const float *dout,
				  const float *in, const float *w,
				  const int *offs, int G, int C, int OC,
				  int accumulate);

/* layers.cu */
void cuda_embedding_forward(float *out, const int32_t *tok, const float *emb,
			    int N, int D);
void cuda_embedding_backward(float *demb, const float *dout, const int32_t *tok,
			     int N, int V, int D);
void cuda_rmsnorm_forward(float *out, float *rstd, const float *x,
			  const float *g, int N, int D);
void cuda_rmsnorm_backward(float *dx, float *dg, const float *dout,
			   const float *x, const float *g, const float *rstd,
			   int N, int D);
void cuda_rope(float *out, const float *in, int B, int T, int H, int Dh,
	       int dir);
void cuda_softmax_forward(float *p, const float *logits, int N, int C);
void cuda_softmax_backward(float *dlogits, const float *dp, const float *p,
			   int N, int C);
void cuda_swiglu_forward(float *h, const float *a, const float *b, size_t n);
void cuda_swiglu_backward(float *da, float *db, const float *dh, const float *a,
			  const float *b, size_t n);

/* attention.cu */
void cuda_attention_forward_op(float *out, float *att, const float *q,
			       const float *k, const float *v, int B, int T,
			       int H, int Dh);
void cuda_attention_backward_op(float *dq, float *dk, float *dv, float *scratch,
				const float *dout, const float *q,
				const float *k, const float *v,
				const float *att, int B, int T, int H, int Dh);
int cuda_attention_plan_op(int B, int T, int H, int Dh, int nbuf, char *err,
			   size_t len);

/* moe.cu */
void cuda_moe_route(int *idx, float *gate, int *counts, int *offs, int *perm,
		    int *pos, const float *p, int N, int E, int K);
void cuda_moe_aux_loss(float *aux, const float *p, const int *counts, int N,
		       int E, int K);
void cuda_moe_gather(float *xe, const float *m, const int *perm, int N, int K,
		     int D);
void cuda_moe_gather_backward(float *dm, const float *dxe, const int *pos,
			      int N, int K, int D);
void cuda_moe_combine(float *x, const float *eout, const float *gate,
		      const int *pos, int N, int K, int D);
void cuda_moe_combine_backward(float *deout, float *dgate, const float *dx,
			       const float *eout, const float *gate,
			       const int *pos, int N, int K, int D);
void cuda_moe_router_backward(float *dp, const float *dgate, const float *p,
			      const int *idx, const float *gate,
			      const int *counts, float aux_scale, int N, int E,
			      int K);

/* loss.cu */
void cuda_crossentropy_forward(float *losses, float *probs, const float *logits,
			       const int32_t *targets, int N, int V);
void cuda_crossentropy_backward(float *dlogits, const float *probs,
				const int32_t *targets, float scale, int N,
				int V);
void cuda_sum(double *out, const float *x, size_t n);
void cuda_sumsq(double *out, const float *x, size_t n);
void cuda_scale(float *x, float s, size_t n);
void cuda_adamw(float *param, float *m, float *v, const float *g, size_t n,
		float lr, float beta1, float beta2, float eps, float wd,
		float gscale, long t);

#endif /* SIGMA_CUDA_INTERNAL_H */
