/*
 * moe.cu - the mixture of experts on the GPU, beside its CPU reference
 * (kernels/cpu/moe.c): top-k routing and the expert-sorted order of the
 * assignments (a stable sort, ops_cuda.cu), the load-balancing loss,
 * gather and combine and their backward, the router's backward. One
 * thread per token or one warp per assignment; no atomics.
 */
#include <cstddef>

#include "cuda_internal.h"

/* ---- mixture of experts -------------------------------------------------- */

/* one thread per token: the CPU's selection loop, ties to the lower index */
__global__ void k_moe_topk(int *idx, float *gate, const float *p, int N, int E,
			   int K)
{
	int n = blockIdx.x * blockDim.x + threadIdx.x;

	if (n >= N)
		return;
	const float *pr = p + (size_t)n * E;
	int *ix = idx + (size_t)n * K;
	float *gt = gate + (size_t)n * K;
	float sum = 0.0f;

	for (int j = 0; j < K; j++) {
		int best = -1;

		for (int e = 0; e < E; e++) {
			int taken = 0;

			for (int i = 0; i < j; i++)
				taken |= ix[i] == e;
			if (!taken && (best < 0 || pr[e] > pr[best]))
				best = e;
		}
		ix[j] = best;
		gt[j] = pr[best];
		sum += pr[best];
	}
	for (int j = 0; j < K; j++)
		gt[j] /= sum;
}

/* offs[e] = first sorted row of expert e (binary search), counts */
__global__ void k_moe_offsets(int *counts, int *offs, const int *skey, int NK,
			      int E)
{
	int e = blockIdx.x * blockDim.x + threadIdx.x;

	if (e > E)
		return;
	int lo = 0, hi = NK;

	while (lo < hi) {
		int mid = (lo + hi) / 2;

		if (skey[mid] < e)
			lo = mid + 1;
		else
			hi = mid;
	}
	offs[e] = lo;
	if (e < E) {
		int lo2 = lo, hi2 = NK;

		while (lo2 < hi2) {
			int mid = (lo2 + hi2) / 2;

			if (skey[mid] < e + 1)
				lo2 = mid + 1;
			else
				hi2 = mid;
		}
		counts[e] = lo2 - lo;
	}
}

__global__ void k_invert(int *pos, const int *perm, int n)
{
	int r = blockIdx.x * blockDim.x + threadIdx.x;

	if (r < n)
		pos[perm[r]] = r;
}

void cuda_moe_route(int *idx, float *gate, int *counts, int *offs, int *perm,
		    int *pos, const float *p, int N, int E, int K)
{
	int NK = N * K;
	size_t keys_b = (((size_t)NK * sizeof(int) + 255) & ~(size_t)255);
	size_t sort_b;
	char *ws;

	if (N <= 0) {
		CUDA_CHECK(
		    cudaMemsetAsync(counts, 0, sizeof(int) * E, CUDA_STREAM));
		CUDA_CHECK(cudaMemsetAsync(offs, 0, sizeof(int) * (E + 1),
					   CUDA_STREAM));
		return;
	}
	k_moe_topk<<<cuda_blocks((size_t)N, 128), 128, 0, CUDA_STREAM>>>(
	    idx, gate, p, N, E, K);
	CUDA_LAUNCHED();
	/* stable counting sort of the assignments by expert */
	sort_b = sort_ws_bytes(NK, E);
	ws = (char *)cuda_workspace(keys_b + sort_b);
	stable_sort_index((int *)ws, perm, idx, NK, E, ws + keys_b, sort_b);
	k_moe_offsets<<<cuda_blocks((size_t)E + 1, 128), 128, 0, CUDA_STREAM>>>(
	    counts, offs, (const int *)ws, NK, E);
	CUDA_LAUNCHED();
	k_invert<<<cuda_blocks((size_t)NK, 256), 256, 0, CUDA_STREAM>>>(
	    pos, perm, NK);
	CUDA_LAUNCHED();
}

/*
 * One block: for each expert in order, P_e = sum_n p[n,e] in double (fixed
 * strided partial sums, fixed tree), then the total in expert order.
 */
__global__ void k_moe_aux_loss(float *aux, const float *p, const int *counts,
			       int N, int E, int K)
{
	__shared__ double part[256];
	double total = 0.0;

	for (int e = 0; e < E; e++) {
		double s = 0.0;

		for (int n = threadIdx.x; n < N; n += blockDim.x)
			s += (double)p[(size_t)n * E + e];
		part[threadIdx.x] = s;
		__syncthreads();
		for (int w = blockDim.x / 2; w > 0; w >>= 1) {
			if ((int)threadIdx.x < w)
				part[threadIdx.x] += part[threadIdx.x + w];
			__syncthreads();
		}
		if (threadIdx.x == 0) {
			double fe = (double)counts[e] / ((double)N * K);

			total += fe * (part[0] / N);
		}
		__syncthreads();
	}
	if (threadIdx.x == 0)
		*aux = (float)(E * total);
}

void cuda_moe_aux_loss(float *aux, const float *p, const int *counts, int N,
		       int E, int K)
{
	k_moe_aux_loss<<<1, 256, 0, CUDA_STREAM>>>(aux, p, counts, N, E, K);
	CUDA_LAUNCHED();
}

__global__ void k_moe_gather(float *xe, const float *m, const int *perm, int NK,
			     int K, int D)
{
	size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (t >= (size_t)NK * D)
		return;
	size_t r = t / D, d = t % D;
	xe[t] = m[(size_t)(perm[r] / K) * D + d];
}

void cuda_moe_gather(float *xe, const float *m, const int *perm, int N, int K,
		     int D)
{
	size_t n = (size_t)N * K * D;

	if (!n)
		return;
	k_moe_gather<<<cuda_blocks(n, 256), 256, 0, CUDA_STREAM>>>(xe, m, perm,
								   N * K, K, D);
	CUDA_LAUNCHED();
}

__global__ void k_moe_gather_backward(float *dm, const float *dxe,
				      const int *pos, int N, int K, int D)
{
	size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (t >= (size_t)N * D)
		return;
	size_t n = t / D, d = t % D;
	float o = dxe[(size_t)pos[n * K] * D + d];

	for (int j = 1; j < K; j++)
		o += dxe[(size_t)pos[n * K + j] * D + d];
	dm[t] = o;
}

void cuda_moe_gather_backward(float *dm, const float *dxe, const int *pos,
			      int N, int K, int D)
{
	size_t n = (size_t)N * D;

	if (!n)
		return;
	k_moe_gather_backward<<<cuda_blocks(n, 256), 256, 0, CUDA_STREAM>>>(
	    dm, dxe, pos, N, K, D);
	CUDA_LAUNCHED();
}

__global__ void k_moe_combine(float *x, const float *eout, const float *gate,
			      const int *pos, int N, int K, int D)
{
	size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (t >= (size_t)N * D)
		return;
	size_t n = t / D, d = t % D;
	float o = x[t];

	for (int j = 0; j < K; j++)
		o += gate[n * K + j] * eout[(size_t)pos[n * K + j] * D + d];
	x[t] = o;
}

void cuda_moe_combine(float *x, const float *eout, const float *gate,
		      const int *pos, int N, int K, int D)
{
	size_t n = (size_t)N * D;

	if (!n)
		return;
	k_moe_combine<<<cuda_blocks(n, 256), 256, 0, CUDA_STREAM>>>(
	    x, eout, gate, pos, N, K, D);
	CUDA_LAUNCHED();
}

/* one warp per assignment (n, j) */
__global__ void k_moe_combine_backward(float *deout, float *dgate,
				       const float *dx, const float *eout,
				       const float *gate, const int *pos,
				       int NK, int K, int D)
{
	int a = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
	int lane = threadIdx.x % 32;

	if (a >= NK)
		return;
	int n = a / K, r = pos[a];
	const float *g = dx + (size_t)n * D;
	const float *e = eout + (size_t)r * D;
	float *de = deout + (size_t)r * D;
	float gt = gate[a], dot = 0.0f;

	for (int d = lane; d < D; d += 32) {
		dot += g[d] * e[d];
		de[d] = gt * g[d];
	}
	dot = warp_sum(dot);
	if (lane == 0)
		dgate[a] = dot;
}

void cuda_moe_combine_backward(float *deout, float *dgate, const float *dx,
			       const float *eout, const float *gate,
			       const int *pos, int N, int K, int D)
{
	if (N * K <= 0)
		return;
	k_moe_combine_backward<<<cuda_blocks((size_t)N * K, 8), 256, 0,
				 CUDA_STREAM>>>(deout, dgate, dx, eout, gate,
						pos, N * K, K, D);
	CUDA_LAUNCHED();
}

/* one thread per token; the CPU's formulas in the same float order */
__global__ void k_moe_router_backward(float *dp, const float *dgate,
				      const float *p, const int *idx,
				      const float *gate, const int *counts,
				      float aux_scale, int N, int E, int K)
{
	int n = blockIdx.x * blockDim.x + threadIdx.x;

	if (n >= N)
		return;
	const float *pr = p + (size_t)n * E;
	const float *dg = dgate + (size_t)n * K;
	const float *gt = gate + (size_t)n * K;
	const int *ix = idx + (size_t)n * K;
	float *o = dp + (size_t)n * E;
	float s = 0.0f, dot = 0.0f;

	for (int e = 0; e < E; e++)
		o[e] = aux_scale * (float)E *
		       ((float)counts[e] / ((float)N * (float)K)) / (float)N;
	for (int j = 0; j < K; j++) {
		s += pr[ix[j]];
		dot += dg[j] * gt[j];
	}
	for (int j = 0; j < K; j++)
		o[ix[j]] += (dg[j] - dot) / s;
}

void cuda_moe_router_backward(float *dp, const float *dgate, const float *p,
			      const int *idx, const float *gate,
			      const int *counts, float aux_scale, int N, int E,
			      int K)
{
	if (N <= 0)
		return;
	k_moe_router_backward<<<cuda_blocks((size_t)N, 128), 128, 0,
				CUDA_STREAM>>>(dp, dgate, p, idx, gate, counts,
					       aux_scale, N, E, K);
	CUDA_LAUNCHED();
}
