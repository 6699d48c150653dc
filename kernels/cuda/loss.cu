/*
 * loss.cu - the end of a step on the GPU, beside its CPU reference
 * (kernels/cpu/loss.c): cross-entropy, the ordered reductions (sum and
 * sum of squares, each to a double in host memory; scale), and the AdamW
 * update.
 */
#include <cmath>
#include <cstdint>

#include "cuda_internal.h"

/* ---- cross-entropy ------------------------------------------------------- */

#define CE_THREADS 256

/* sum or max over a block of CE_THREADS: warps, then warp 0; all get it */
__device__ float block_reduce(float v, int is_max)
{
	__shared__ float sh[CE_THREADS / 32];
	int lane = threadIdx.x % 32, w = threadIdx.x / 32;

	v = is_max ? warp_max(v) : warp_sum(v);
	__syncthreads(); /* sh may still be read from the previous call */
	if (lane == 0)
		sh[w] = v;
	__syncthreads();
	v = lane < CE_THREADS / 32 ? sh[lane] : (is_max ? -INFINITY : 0.0f);
	v = is_max ? warp_max(v) : warp_sum(v);
	return v;
}

/* one block per row */
__global__ void k_crossentropy_forward(float *losses, float *probs,
				       const float *logits,
				       const int32_t *targets, int V)
{
	int n = blockIdx.x;
	const float *l = logits + (size_t)n * V;
	float *p = probs + (size_t)n * V;
	float mx = -INFINITY, s = 0.0f, inv;

	for (int v = threadIdx.x; v < V; v += CE_THREADS)
		mx = fmaxf(mx, l[v]);
	mx = block_reduce(mx, 1);
	for (int v = threadIdx.x; v < V; v += CE_THREADS) {
		float e = expf(l[v] - mx);

		p[v] = e;
		s += e;
	}
	s = block_reduce(s, 0);
	inv = 1.0f / s;
	for (int v = threadIdx.x; v < V; v += CE_THREADS)
		p[v] *= inv;
	/* log-sum-exp form: exact even when the probability underflows */
	if (threadIdx.x == 0)
		losses[n] = logf(s) + mx - l[targets[n]];
}

void cuda_crossentropy_forward(float *losses, float *probs, const float *logits,
			       const int32_t *targets, int N, int V)
{
	if (N <= 0)
		return;
	k_crossentropy_forward<<<N, CE_THREADS, 0, CUDA_STREAM>>>(
	    losses, probs, logits, targets, V);
	CUDA_LAUNCHED();
}

__global__ void k_crossentropy_backward(float *dlogits, const float *probs,
					const int32_t *targets, float scale,
					int N, int V)
{
	size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (t >= (size_t)N * V)
		return;
	size_t n = t / V;
	int v = (int)(t % V);
	float d = scale * probs[t];

	if (v == targets[n])
		d -= scale;
	dlogits[t] = d;
}

void cuda_crossentropy_backward(float *dlogits, const float *probs,
				const int32_t *targets, float scale, int N,
				int V)
{
	size_t n = (size_t)N * V;

	if (!n)
		return;
	k_crossentropy_backward<<<cuda_blocks(n, 256), 256, 0, CUDA_STREAM>>>(
	    dlogits, probs, targets, scale, N, V);
	CUDA_LAUNCHED();
}

/* ---- reductions ---------------------------------------------------------- */

#define RED_THREADS    256
#define RED_MAX_BLOCKS 1024
#define RED_PER_BLOCK  8192

/*
 * Stage 1: block b sums a fixed range of x in double (strided over its
 * threads, then a fixed tree); stage 2: one block sums the block results
 * the same way. The block count depends only on n: same bits on any GPU.
 */
__global__ void k_reduce_part(double *part, const float *x, size_t n,
			      size_t per, int square)
{
	__shared__ double sh[RED_THREADS];
	size_t i0 = (size_t)blockIdx.x * per;
	size_t i1 = i0 + per < n ? i0 + per : n;
	double s = 0.0;

	for (size_t i = i0 + threadIdx.x; i < i1; i += RED_THREADS) {
		double v = (double)x[i];

		s += square ? v * v : v;
	}
	sh[threadIdx.x] = s;
	__syncthreads();
	for (int w = RED_THREADS / 2; w > 0; w >>= 1) {
		if ((int)threadIdx.x < w)
			sh[threadIdx.x] += sh[threadIdx.x + w];
		__syncthreads();
	}
	if (threadIdx.x == 0)
		part[blockIdx.x] = sh[0];
}

__global__ void k_reduce_final(double *out, const double *part, int nb)
{
	__shared__ double sh[RED_THREADS];
	double s = 0.0;

	for (int i = threadIdx.x; i < nb; i += RED_THREADS)
		s += part[i];
	sh[threadIdx.x] = s;
	__syncthreads();
	for (int w = RED_THREADS / 2; w > 0; w >>= 1) {
		if ((int)threadIdx.x < w)
			sh[threadIdx.x] += sh[threadIdx.x + w];
		__syncthreads();
	}
	if (threadIdx.x == 0)
		*out = sh[0];
}

static void reduce(double *out, const float *x, size_t n, int square)
{
	size_t nb = (n + RED_PER_BLOCK - 1) / RED_PER_BLOCK, per;
	double *part;

	if (n == 0) {
		*out = 0.0;
		return;
	}
	if (nb > RED_MAX_BLOCKS)
		nb = RED_MAX_BLOCKS;
	per = (n + nb - 1) / nb;
	part = (double *)cuda_workspace(sizeof(double) * nb);
	k_reduce_part<<<(unsigned)nb, RED_THREADS, 0, CUDA_STREAM>>>(
	    part, x, n, per, square);
	CUDA_LAUNCHED();
	k_reduce_final<<<1, RED_THREADS, 0, CUDA_STREAM>>>(cuda_red_out, part,
							   (int)nb);
	CUDA_LAUNCHED();
	CUDA_CHECK(cudaMemcpy(out, cuda_red_out, sizeof(double),
			      cudaMemcpyDeviceToHost));
}

void cuda_sum(double *out, const float *x, size_t n)
{
	reduce(out, x, n, 0);
}

void cuda_sumsq(double *out, const float *x, size_t n)
{
	reduce(out, x, n, 1);
}

__global__ void k_scale(float *x, float s, size_t n)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		x[i] *= s;
}

void cuda_scale(float *x, float s, size_t n)
{
	if (!n)
		return;
	k_scale<<<cuda_blocks(n, 256), 256, 0, CUDA_STREAM>>>(x, s, n);
	CUDA_LAUNCHED();
}

/* ---- AdamW --------------------------------------------------------------- */

__global__ void k_adamw(float *param, float *m, float *v, const float *g,
			size_t n, float lr, float beta1, float beta2, float eps,
			float wd, float gscale, float c1, float c2)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= n)
		return;
	float gi = g[i] * gscale;
	float mi = beta1 * m[i] + (1.0f - beta1) * gi;
	float vi = beta2 * v[i] + (1.0f - beta2) * gi * gi;
	float pi = param[i];

	m[i] = mi;
	v[i] = vi;
	param[i] = pi - lr * (mi * c1 / (sqrtf(vi * c2) + eps) + wd * pi);
}

void cuda_adamw(float *param, float *m, float *v, const float *g, size_t n,
		float lr, float beta1, float beta2, float eps, float wd,
		float gscale, long t)
{
	/* bias corrections on the host, as the CPU computes them */
	float c1 = 1.0f / (1.0f - powf(beta1, (float)t));
	float c2 = 1.0f / (1.0f - powf(beta2, (float)t));

	if (!n)
		return;
	k_adamw<<<cuda_blocks(n, 256), 256, 0, CUDA_STREAM>>>(
	    param, m, v, g, n, lr, beta1, beta2, eps, wd, gscale, c1, c2);
	CUDA_LAUNCHED();
}
