/*
 * attention.cu - fused causal attention on the GPU, memory-efficient in the
 * manner of FlashAttention: keys and values stream through shared memory
 * in tiles of ATT_BK, each query row keeps a running maximum and sum
 * (online softmax), and no T x T matrix is needed by either pass.
 *
 * Layout: q, k, v, out [B, T, H*Dh]; one warp owns one row (a query row in
 * the forward and dq passes, a key row in the dk/dv pass); a block holds
 * ATT_ROWS rows of one (batch, head). Lane j of a warp scores key (or
 * query) j of the tile; the Dh outputs of a row are spread over the lanes
 * (d = lane + 32 r), so Dh may be at most 32 * ATT_DPL.
 *
 * ops.h asks the forward to also write att[B,H,T,T], the probabilities the
 * CPU backward reads: a second sweep writes them from the final maximum and
 * sum when att is not NULL. The backward here never reads att or scratch:
 * it recomputes the row statistics (maximum, 1/sum, and D = sum_j p dp)
 * into a workspace of 3 B H T floats, then dq per query row and dk, dv per
 * key row, each summed in a fixed order without atomics.
 *
 * Arithmetic is fp32 with the CPU's formulas: s = scale (q . k),
 * p = exp(s - max) * (1 / sum), out = sum_j p v_j (computed as
 * (sum_j exp(s - max) v_j) / sum), dp = dout . v, ds = p (dp - D),
 * dq = scale ds k, dk = scale ds^T q, dv = p^T dout.
 *
 * The op table's entries (cuda_attention_forward_op, _backward_op, at the
 * end) run these kernels, or, when the plan for the sizes (cuda_plan.h:
 * the mode sigma_cuda_set_attention chose, the precision, the limits)
 * says cuBLAS and ops.h's att and scratch are given, the CPU algorithm
 * through cuBLAS batched products. attention_plan tells the model which,
 * so that it allocates the T x T buffers only for the cuBLAS path.
 */
#include <cerrno>
#include <cmath>
#include <cstdio>

#define HAVE_CUDA 1
#include "sigma_cuda.h"
#include "cuda_internal.h"
#include "cuda_blas.h"
#include "cuda_plan.h"

#define ATT_ROWS 8  /* warps (rows) per block */
#define ATT_BK	 32 /* keys or queries per shared tile */
#define ATT_DPL	 8  /* outputs per lane: Dh <= 256 */
#define ATT_DMAX (32 * ATT_DPL)
static_assert(ATT_DMAX == CUDA_PLAN_FUSED_DH_MAX, "cuda_plan.h's Dh limit");

struct att_dims {
	int T, H, Dh, D; /* D = H * Dh, the row stride */
	float scale;
};

/* offset of row t of (batch b, head h) in a [B, T, H*Dh] tensor */
__device__ __forceinline__ size_t att_row(const att_dims &a, int b, int h,
					  int t)
{
	return ((size_t)b * a.T + t) * a.D + (size_t)h * a.Dh;
}

/* dot of a warp-shared row (smem, stride 1) with tile row lane (stride Dh+1) */
__device__ __forceinline__ float att_dot(const float *row, const float *tile,
					 int lane, int Dh)
{
	const float *t = tile + (size_t)lane * (Dh + 1);
	float s = 0.0f;

	for (int d = 0; d < Dh; d++)
		s += row[d] * t[d];
	return s;
}

/* load rows j0..j0+ATT_BK-1 of x (zeros past T) into a padded tile */
__device__ __forceinline__ void att_load_tile(float *tile, const float *x,
					      const att_dims &a, int b, int h,
					      int j0)
{
	int n = ATT_BK * a.Dh;

	for (int t = threadIdx.x; t < n; t += blockDim.x) {
		int jj = t / a.Dh, d = t % a.Dh, j = j0 + jj;

		tile[jj * (a.Dh + 1) + d] =
		    j < a.T ? x[att_row(a, b, h, j) + d] : 0.0f;
	}
}

/* a warp copies one row of x into its own shared row */
__device__ __forceinline__ void att_load_row(float *row, const float *x,
					     const att_dims &a, int b, int h,
					     int t, int lane)
{
	for (int d = lane; d < a.Dh; d += 32)
		row[d] = t < a.T ? x[att_row(a, b, h, t) + d] : 0.0f;
}

/*
 * Forward: grid (ceil(T / ATT_ROWS), B*H). Shared: K and V tiles, then one
 * q row per warp.
 */
__global__ void k_att_forward(float *out, float *att, const float *q,
			      const float *k, const float *v, att_dims a)
{
	extern __shared__ float sm[];
	float *Ks = sm, *Vs = Ks + ATT_BK * (a.Dh + 1);
	int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	float *Qr = Vs + ATT_BK * (a.Dh + 1) + warp * a.Dh;
	int bh = blockIdx.y, b = bh / a.H, h = bh % a.H;
	int i = blockIdx.x * ATT_ROWS + warp;
	int ilast = min(a.T - 1, (int)blockIdx.x * ATT_ROWS + ATT_ROWS - 1);
	float acc[ATT_DPL], m = -INFINITY, l = 0.0f;

#pragma unroll
	for (int r = 0; r < ATT_DPL; r++)
		acc[r] = 0.0f;
	att_load_row(Qr, q, a, b, h, i, lane);
	for (int j0 = 0; j0 <= ilast; j0 += ATT_BK) {
		__syncthreads(); /* the previous tile is no longer read */
		att_load_tile(Ks, k, a, b, h, j0);
		att_load_tile(Vs, v, a, b, h, j0);
		__syncthreads();
		if (i >= a.T || j0 > i)
			continue;
		int j = j0 + lane;
		float s =
		    j <= i ? a.scale * att_dot(Qr, Ks, lane, a.Dh) : -INFINITY;
		float mn = fmaxf(m, warp_max(s)); /* finite: key j0 <= i */
		float p = j <= i ? expf(s - mn) : 0.0f;
		float corr = expf(m - mn); /* 0 on the first tile */
		int jn = min(ATT_BK, i - j0 + 1);

		l = l * corr + warp_sum(p);
		m = mn;
#pragma unroll
		for (int r = 0; r < ATT_DPL; r++)
			acc[r] *= corr;
		for (int jj = 0; jj < jn; jj++) {
			float pj = __shfl_sync(0xffffffffu, p, jj);
			const float *vr = Vs + jj * (a.Dh + 1);

#pragma unroll
			for (int r = 0; r < ATT_DPL; r++) {
				int d = lane + 32 * r;

				if (d < a.Dh)
					acc[r] += pj * vr[d];
			}
		}
	}
	if (i < a.T) {
#pragma unroll
		for (int r = 0; r < ATT_DPL; r++) {
			int d = lane + 32 * r;

			if (d < a.Dh)
				out[att_row(a, b, h, i) + d] = acc[r] / l;
		}
	}
	if (!att)
		return;
	/* the probabilities ops.h keeps for a backward that reads them */
	float inv = 1.0f / l;

	for (int j0 = 0; j0 < a.T; j0 += ATT_BK) {
		if (j0 <= ilast) {
			__syncthreads();
			att_load_tile(Ks, k, a, b, h, j0);
			__syncthreads();
		}
		int j = j0 + lane;

		if (i >= a.T || j >= a.T)
			continue;
		float pv = 0.0f;

		if (j <= i)
			pv = expf(a.scale * att_dot(Qr, Ks, lane, a.Dh) - m) *
			     inv;
		att[((size_t)bh * a.T + i) * a.T + j] = pv;
	}
}

/*
 * Backward, pass 1: per query row, the statistics (max m, 1/sum, D) and
 * dq. Shared: K and V tiles, then a q row and a dout row per warp.
 */
__global__ void k_att_backward_q(float *dq, float *stats, const float *dout,
				 const float *q, const float *k, const float *v,
				 att_dims a)
{
	extern __shared__ float sm[];
	float *Ks = sm, *Vs = Ks + ATT_BK * (a.Dh + 1);
	int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	float *Qr = Vs + ATT_BK * (a.Dh + 1) + warp * 2 * a.Dh;
	float *Gr = Qr + a.Dh;
	int bh = blockIdx.y, b = bh / a.H, h = bh % a.H;
	int i = blockIdx.x * ATT_ROWS + warp;
	int ilast = min(a.T - 1, (int)blockIdx.x * ATT_ROWS + ATT_ROWS - 1);
	float acc[ATT_DPL], m = -INFINITY, l = 0.0f, dacc = 0.0f;

#pragma unroll
	for (int r = 0; r < ATT_DPL; r++)
		acc[r] = 0.0f;
	att_load_row(Qr, q, a, b, h, i, lane);
	att_load_row(Gr, dout, a, b, h, i, lane);
	/* sweep 1: m, l and the unnormalised D, online */
	for (int j0 = 0; j0 <= ilast; j0 += ATT_BK) {
		__syncthreads();
		att_load_tile(Ks, k, a, b, h, j0);
		att_load_tile(Vs, v, a, b, h, j0);
		__syncthreads();
		if (i >= a.T || j0 > i)
			continue;
		int j = j0 + lane;
		float s =
		    j <= i ? a.scale * att_dot(Qr, Ks, lane, a.Dh) : -INFINITY;
		float dp = j <= i ? att_dot(Gr, Vs, lane, a.Dh) : 0.0f;
		float mn = fmaxf(m, warp_max(s));
		float p = j <= i ? expf(s - mn) : 0.0f;
		float corr = expf(m - mn);

		l = l * corr + warp_sum(p);
		dacc = dacc * corr + warp_sum(p * dp);
		m = mn;
	}
	float inv = 1.0f / l, Dn = dacc * inv;

	if (i < a.T && lane == 0) {
		size_t st = ((size_t)bh * a.T + i) * 3;

		stats[st] = m;
		stats[st + 1] = inv;
		stats[st + 2] = Dn;
	}
	/* sweep 2: ds = p (dp - D); dq = scale ds k */
	for (int j0 = 0; j0 <= ilast; j0 += ATT_BK) {
		__syncthreads();
		att_load_tile(Ks, k, a, b, h, j0);
		att_load_tile(Vs, v, a, b, h, j0);
		__syncthreads();
		if (i >= a.T || j0 > i)
			continue;
		int j = j0 + lane;
		float ds = 0.0f;
		int jn = min(ATT_BK, i - j0 + 1);

		if (j <= i) {
			float p =
			    expf(a.scale * att_dot(Qr, Ks, lane, a.Dh) - m) *
			    inv;

			ds = p * (att_dot(Gr, Vs, lane, a.Dh) - Dn);
		}
		for (int jj = 0; jj < jn; jj++) {
			float dsj = __shfl_sync(0xffffffffu, ds, jj);
			const float *kr = Ks + jj * (a.Dh + 1);

#pragma unroll
			for (int r = 0; r < ATT_DPL; r++) {
				int d = lane + 32 * r;

				if (d < a.Dh)
					acc[r] += dsj * kr[d];
			}
		}
	}
	if (i < a.T) {
#pragma unroll
		for (int r = 0; r < ATT_DPL; r++) {
			int d = lane + 32 * r;

			if (d < a.Dh)
				dq[att_row(a, b, h, i) + d] = a.scale * acc[r];
		}
	}
}

/*
 * Backward, pass 2: per key row j, dk and dv over the queries i >= j in
 * increasing order. Shared: q and dout tiles, their statistics, then a k
 * row and a v row per warp.
 */
__global__ void k_att_backward_kv(float *dk, float *dv, const float *stats,
				  const float *dout, const float *q,
				  const float *k, const float *v, att_dims a)
{
	extern __shared__ float sm[];
	float *Qs = sm, *Gs = Qs + ATT_BK * (a.Dh + 1);
	float *St = Gs + ATT_BK * (a.Dh + 1); /* [ATT_BK][3] */
	int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	float *Kr = St + ATT_BK * 3 + warp * 2 * a.Dh;
	float *Vr = Kr + a.Dh;
	int bh = blockIdx.y, b = bh / a.H, h = bh % a.H;
	int jfirst = blockIdx.x * ATT_ROWS;
	int j = jfirst + warp;
	float ak[ATT_DPL], av[ATT_DPL];

#pragma unroll
	for (int r = 0; r < ATT_DPL; r++) {
		ak[r] = 0.0f;
		av[r] = 0.0f;
	}
	att_load_row(Kr, k, a, b, h, j, lane);
	att_load_row(Vr, v, a, b, h, j, lane);
	for (int i0 = jfirst - jfirst % ATT_BK; i0 < a.T; i0 += ATT_BK) {
		__syncthreads();
		att_load_tile(Qs, q, a, b, h, i0);
		att_load_tile(Gs, dout, a, b, h, i0);
		for (int t = threadIdx.x; t < ATT_BK * 3; t += blockDim.x) {
			int ii = i0 + t / 3;

			St[t] = ii < a.T ? stats[((size_t)bh * a.T) * 3 +
						 (size_t)i0 * 3 + t]
					 : 0.0f;
		}
		__syncthreads();
		if (j >= a.T || i0 + ATT_BK - 1 < j)
			continue;
		int i = i0 + lane;
		float p = 0.0f, ds = 0.0f;

		if (i >= j && i < a.T) {
			float s = a.scale * att_dot(Kr, Qs, lane, a.Dh);

			p = expf(s - St[lane * 3]) * St[lane * 3 + 1];
			ds = p *
			     (att_dot(Vr, Gs, lane, a.Dh) - St[lane * 3 + 2]);
		}
		int ii0 = j > i0 ? j - i0 : 0; /* queries before j give 0 */

		for (int ii = ii0; ii < ATT_BK && i0 + ii < a.T; ii++) {
			float pi = __shfl_sync(0xffffffffu, p, ii);
			float dsi = __shfl_sync(0xffffffffu, ds, ii);
			const float *qr = Qs + ii * (a.Dh + 1);
			const float *gr = Gs + ii * (a.Dh + 1);

#pragma unroll
			for (int r = 0; r < ATT_DPL; r++) {
				int d = lane + 32 * r;

				if (d < a.Dh) {
					av[r] += pi * gr[d];
					ak[r] += dsi * qr[d];
				}
			}
		}
	}
	if (j < a.T) {
#pragma unroll
		for (int r = 0; r < ATT_DPL; r++) {
			int d = lane + 32 * r;

			if (d < a.Dh) {
				dv[att_row(a, b, h, j) + d] = av[r];
				dk[att_row(a, b, h, j) + d] = a.scale * ak[r];
			}
		}
	}
}

static att_dims att_make(int B, int T, int H, int Dh)
{
	att_dims a;

	char why[192];

	/* attention_plan refuses these at configuration time; a caller that
	 * did not ask stops here */
	if (cuda_plan_fused_fits(B, H, Dh, why, sizeof(why)))
		cuda_fatal(__FILE__, __LINE__, "attention", why);
	a.T = T;
	a.H = H;
	a.Dh = Dh;
	a.D = H * Dh;
	a.scale = 1.0f / sqrtf((float)Dh);
	return a;
}

/* dynamic shared memory above the 48 KiB default must be opted into */
template <typename K> static void att_smem(K kernel, size_t bytes)
{
	if (bytes > 48 * 1024)
		CUDA_CHECK(cudaFuncSetAttribute(
		    kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
		    (int)bytes));
}

static void cuda_attention_forward(float *out, float *att, const float *q,
				   const float *k, const float *v, int B, int T,
				   int H, int Dh)
{
	att_dims a;
	size_t sm;
	dim3 grid;

	if (B <= 0 || T <= 0 || H <= 0)
		return;
	a = att_make(B, T, H, Dh);
	sm = sizeof(float) * (2 * ATT_BK * (Dh + 1) + ATT_ROWS * Dh);
	grid = dim3((T + ATT_ROWS - 1) / ATT_ROWS, B * H);
	att_smem(k_att_forward, sm);
	k_att_forward<<<grid, 32 * ATT_ROWS, sm, CUDA_STREAM>>>(out, att, q, k,
								v, a);
	CUDA_LAUNCHED();
}

static void cuda_attention_backward(float *dq, float *dk, float *dv,
				    float *scratch, const float *dout,
				    const float *q, const float *k,
				    const float *v, const float *att, int B,
				    int T, int H, int Dh)
{
	att_dims a;
	size_t smq, smkv;
	float *stats;
	dim3 grid;

	(void)scratch; /* recomputed instead: see the top of this file */
	(void)att;
	if (B <= 0 || T <= 0 || H <= 0)
		return;
	a = att_make(B, T, H, Dh);
	stats = (float *)cuda_workspace(sizeof(float) * 3 * (size_t)B * H * T);
	grid = dim3((T + ATT_ROWS - 1) / ATT_ROWS, B * H);
	smq = sizeof(float) * (2 * ATT_BK * (Dh + 1) + ATT_ROWS * 2 * Dh);
	att_smem(k_att_backward_q, smq);
	k_att_backward_q<<<grid, 32 * ATT_ROWS, smq, CUDA_STREAM>>>(
	    dq, stats, dout, q, k, v, a);
	CUDA_LAUNCHED();
	smkv = sizeof(float) *
	       (2 * ATT_BK * (Dh + 1) + ATT_BK * 3 + ATT_ROWS * 2 * Dh);
	att_smem(k_att_backward_kv, smkv);
	k_att_backward_kv<<<grid, 32 * ATT_ROWS, smkv, CUDA_STREAM>>>(
	    dk, dv, stats, dout, q, k, v, a);
	CUDA_LAUNCHED();
}

/* ---- attention through cuBLAS ----------------------------------------------
 */

/*
 * The CPU algorithm on the tensor cores: per batch, the H heads as one
 * strided-batched GEMM (a head's rows are Dh apart within a D-wide row),
 * with the T x T matrices in att and scratch that ops.h provides; the
 * causal softmax and its backward are warp-per-row kernels. The products
 * follow the precision setting (bf16 inputs with fp32 accumulation, or
 * fp32); the softmax is fp32.
 */
static enum sigma_cuda_attention cuda_att_mode = SIGMA_CUDA_ATT_AUTO;

extern "C" int sigma_cuda_set_attention(enum sigma_cuda_attention a)
{
	if (a != SIGMA_CUDA_ATT_FUSED && a != SIGMA_CUDA_ATT_CUBLAS &&
	    a != SIGMA_CUDA_ATT_AUTO)
		return -EINVAL;
	cuda_att_mode = a;
	return 0;
}

extern "C" enum sigma_cuda_attention sigma_cuda_get_attention(void)
{
	return cuda_att_mode;
}

/* column-major C_i = alpha op(A_i) op(B_i) for batch i, fixed strides */
static void gemm_batched(cublasOperation_t ta, cublasOperation_t tb, int m,
			 int n, int k, float alpha, const float *A, int lda,
			 long long sa, const float *B, int ldb, long long sb,
			 float *C, int ldc, long long sc, int batch)
{
	const float beta = 0.0f;

	if (sigma_cuda_get_precision() == SIGMA_CUDA_BF16)
		CUBLAS_CHECK(cublasGemmStridedBatchedEx(
		    cuda_blas, ta, tb, m, n, k, &alpha, A, CUDA_R_32F, lda, sa,
		    B, CUDA_R_32F, ldb, sb, &beta, C, CUDA_R_32F, ldc, sc,
		    batch, CUBLAS_COMPUTE_32F_FAST_16BF, CUBLAS_GEMM_DEFAULT));
	else
		CUBLAS_CHECK(cublasSgemmStridedBatched(
		    cuda_blas, ta, tb, m, n, k, &alpha, A, lda, sa, B, ldb, sb,
		    &beta, C, ldc, sc, batch));
}

/* one warp per row of s[BH*T, T]: causal softmax in place, 0 above */
__global__ void k_att_softmax(float *s, int rows, int T)
{
	int r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
	int lane = threadIdx.x % 32;

	if (r >= rows)
		return;
	int i = r % T;
	float *row = s + (size_t)r * T;
	float mx = -INFINITY, sum = 0.0f;

	for (int j = lane; j <= i; j += 32)
		mx = fmaxf(mx, row[j]);
	mx = warp_max(mx);
	for (int j = lane; j <= i; j += 32) {
		float e = expf(row[j] - mx);

		row[j] = e;
		sum += e;
	}
	sum = warp_sum(sum);
	float inv = 1.0f / sum;

	for (int j = lane; j < T; j += 32)
		row[j] = j <= i ? row[j] * inv : 0.0f;
}

/* one warp per row: ds = p (dp - sum_j p dp) in place over dp, 0 above */
__global__ void k_att_softmax_backward(float *ds, const float *p, int rows,
				       int T)
{
	int r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
	int lane = threadIdx.x % 32;

	if (r >= rows)
		return;
	int i = r % T;
	const float *pr = p + (size_t)r * T;
	float *dr = ds + (size_t)r * T;
	float dot = 0.0f;

	for (int j = lane; j <= i; j += 32)
		dot += pr[j] * dr[j];
	dot = warp_sum(dot);
	for (int j = lane; j < T; j += 32)
		dr[j] = j <= i ? pr[j] * (dr[j] - dot) : 0.0f;
}

static void att_blas_forward(float *out, float *att, const float *q,
			     const float *k, const float *v, int B, int T,
			     int H, int Dh)
{
	int D = H * Dh, rows = B * H * T;
	float scale = 1.0f / sqrtf((float)Dh);
	long long tt = (long long)T * T;

	for (int b = 0; b < B; b++) {
		size_t base = (size_t)b * T * D;
		float *s = att + (size_t)b * H * tt;

		/* s = scale q k^T  <=>  s^T = scale k q^T */
		gemm_batched(CUBLAS_OP_T, CUBLAS_OP_N, T, T, Dh, scale,
			     k + base, D, Dh, q + base, D, Dh, s, T, tt, H);
	}
	k_att_softmax<<<cuda_blocks((size_t)rows, 8), 256, 0, CUDA_STREAM>>>(
	    att, rows, T);
	CUDA_LAUNCHED();
	for (int b = 0; b < B; b++) {
		size_t base = (size_t)b * T * D;

		/* out = p v  <=>  out^T = v^T p^T */
		gemm_batched(CUBLAS_OP_N, CUBLAS_OP_N, Dh, T, T, 1.0f, v + base,
			     D, Dh, att + (size_t)b * H * tt, T, tt, out + base,
			     D, Dh, H);
	}
}

static void att_blas_backward(float *dq, float *dk, float *dv, float *scratch,
			      const float *dout, const float *q, const float *k,
			      const float *v, const float *att, int B, int T,
			      int H, int Dh)
{
	int D = H * Dh, rows = B * H * T;
	float scale = 1.0f / sqrtf((float)Dh);
	long long tt = (long long)T * T;

	for (int b = 0; b < B; b++) {
		size_t base = (size_t)b * T * D;
		const float *p = att + (size_t)b * H * tt;
		float *ds = scratch + (size_t)b * H * tt;

		/* dp = dout v^T  <=>  dp^T = v dout^T */
		gemm_batched(CUBLAS_OP_T, CUBLAS_OP_N, T, T, Dh, 1.0f, v + base,
			     D, Dh, dout + base, D, Dh, ds, T, tt, H);
		/* dv = p^T dout  <=>  dv^T = dout^T p */
		gemm_batched(CUBLAS_OP_N, CUBLAS_OP_T, Dh, T, T, 1.0f,
			     dout + base, D, Dh, p, T, tt, dv + base, D, Dh, H);
	}
	k_att_softmax_backward<<<cuda_blocks((size_t)rows, 8), 256, 0,
				 CUDA_STREAM>>>(scratch, att, rows, T);
	CUDA_LAUNCHED();
	for (int b = 0; b < B; b++) {
		size_t base = (size_t)b * T * D;
		const float *ds = scratch + (size_t)b * H * tt;

		/* dq = scale ds k  <=>  dq^T = scale k^T ds^T */
		gemm_batched(CUBLAS_OP_N, CUBLAS_OP_N, Dh, T, T, scale,
			     k + base, D, Dh, ds, T, tt, dq + base, D, Dh, H);
		/* dk = scale ds^T q  <=>  dk^T = scale q^T ds */
		gemm_batched(CUBLAS_OP_N, CUBLAS_OP_T, Dh, T, T, scale,
			     q + base, D, Dh, ds, T, tt, dk + base, D, Dh, H);
	}
}

static_assert(SIGMA_CUDA_ATT_FUSED == CUDA_PLAN_ATT_FUSED &&
		  SIGMA_CUDA_ATT_CUBLAS == CUDA_PLAN_ATT_CUBLAS &&
		  SIGMA_CUDA_ATT_AUTO == CUDA_PLAN_ATT_AUTO,
	      "cuda_plan.h numbers the attention kinds as sigma_cuda.h");

/* the kernels these sizes get now, with nbuf T x T buffers kept: fused,
 * cublas, or -EINVAL */
static int att_plan(int B, int T, int H, int Dh, int nbuf, char *err,
		    size_t len)
{
	return cuda_plan_attention(
	    (int)cuda_att_mode, sigma_cuda_get_precision() == SIGMA_CUDA_BF16,
	    B, T, H, Dh, nbuf, err, len);
}

int cuda_attention_plan_op(int B, int T, int H, int Dh, int nbuf, char *err,
			   size_t len)
{
	int rc = att_plan(B, T, H, Dh, nbuf, err, len);

	return rc < 0 ? rc : rc == CUDA_PLAN_ATT_CUBLAS;
}

/* the cuBLAS path where the plan says so and the caller gave its
 * buffers (which the plan of the whole model allowed); the fused kernels
 * otherwise (they refuse what they cannot do) */
static bool att_use_blas(int B, int T, int H, int Dh, bool buffers)
{
	char why[256];

	return buffers && att_plan(B, T, H, Dh, 1, why, sizeof(why)) ==
			      CUDA_PLAN_ATT_CUBLAS;
}

void cuda_attention_forward_op(float *out, float *att, const float *q,
			       const float *k, const float *v, int B, int T,
			       int H, int Dh)
{
	if (B <= 0 || T <= 0 || H <= 0 || Dh <= 0)
		return;
	if (att_use_blas(B, T, H, Dh, att))
		att_blas_forward(out, att, q, k, v, B, T, H, Dh);
	else
		cuda_attention_forward(out, att, q, k, v, B, T, H, Dh);
}

void cuda_attention_backward_op(float *dq, float *dk, float *dv, float *scratch,
				const float *dout, const float *q,
				const float *k, const float *v,
				const float *att, int B, int T, int H, int Dh)
{
	if (B <= 0 || T <= 0 || H <= 0 || Dh <= 0)
		return;
	if (att_use_blas(B, T, H, Dh, att && scratch))
		att_blas_backward(dq, dk, dv, scratch, dout, q, k, v, att, B, T,
				  H, Dh);
	else
		cuda_attention_backward(dq, dk, dv, scratch, dout, q, k, v, att,
					B, T, H, Dh);
}
