/*
 * layers.cu - the per-token layers on the GPU, beside their CPU reference
 * (kernels/cpu/layers.c): embedding, RMSNorm, rotary embedding, the
 * router's softmax, SwiGLU. The embedding gradient adds each token's rows
 * in token order after a stable sort of the tokens (ops_cuda.cu), and the
 * RMSNorm gain's gradient sums fixed chunks of rows, then the chunks in
 * order: no atomics.
 */
#include <cmath>
#include <cstdint>

#include "cuda_internal.h"

#define RMS_EPS 1e-5f

/* ---- embedding ------------------------------------------------------------
 */

__global__ void k_embedding_forward(float *out, const int32_t *tok,
				    const float *emb, int N, int D)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= (size_t)N * D)
		return;
	size_t n = i / D, d = i % D;
	out[i] = emb[(size_t)tok[n] * D + d];
}

void cuda_embedding_forward(float *out, const int32_t *tok, const float *emb,
			    int N, int D)
{
	size_t n = (size_t)N * D;

	if (!n)
		return;
	k_embedding_forward<<<cuda_blocks(n, 256), 256, 0, CUDA_STREAM>>>(
	    out, tok, emb, N, D);
	CUDA_LAUNCHED();
}

/*
 * After a stable sort of the tokens: the thread of (sorted row i, column d)
 * where i starts a run of equal tokens adds the run's gradient rows, in
 * token order (the CPU's order), to that token's row.
 */
__global__ void k_embedding_backward(float *demb, const float *dout,
				     const int32_t *skey, const int *sidx,
				     int N, int D)
{
	size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (t >= (size_t)N * D)
		return;
	int i = (int)(t / D), d = (int)(t % D);
	int32_t key = skey[i];

	if (i > 0 && skey[i - 1] == key)
		return;
	float acc = demb[(size_t)key * D + d];

	for (int j = i; j < N && skey[j] == key; j++)
		acc += dout[(size_t)sidx[j] * D + d];
	demb[(size_t)key * D + d] = acc;
}

void cuda_embedding_backward(float *demb, const float *dout, const int32_t *tok,
			     int N, int V, int D)
{
	size_t keys_b = (((size_t)N * sizeof(int) + 255) & ~(size_t)255);
	size_t sort_b, t = (size_t)N * D;
	char *ws;

	if (!t)
		return;
	sort_b = sort_ws_bytes(N, V);
	ws = (char *)cuda_workspace(2 * keys_b + sort_b);
	stable_sort_index((int *)ws, (int *)(ws + keys_b), (const int *)tok, N,
			  V, ws + 2 * keys_b, sort_b);
	k_embedding_backward<<<cuda_blocks(t, 256), 256, 0, CUDA_STREAM>>>(
	    demb, dout, (const int32_t *)ws, (const int *)(ws + keys_b), N, D);
	CUDA_LAUNCHED();
}

/* ---- RMSNorm ------------------------------------------------------------- */

/* one warp per row */
__global__ void k_rmsnorm_forward(float *out, float *rstd, const float *x,
				  const float *g, int N, int D)
{
	int n = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
	int lane = threadIdx.x % 32;

	if (n >= N)
		return;
	const float *xr = x + (size_t)n * D;
	float *o = out + (size_t)n * D;
	float ss = 0.0f;

	for (int d = lane; d < D; d += 32)
		ss += xr[d] * xr[d];
	ss = warp_sum(ss);
	float r = 1.0f / sqrtf(ss / (float)D + RMS_EPS);

	if (lane == 0)
		rstd[n] = r;
	for (int d = lane; d < D; d += 32)
		o[d] = xr[d] * r * g[d];
}

void cuda_rmsnorm_forward(float *out, float *rstd, const float *x,
			  const float *g, int N, int D)
{
	if (N <= 0)
		return;
	k_rmsnorm_forward<<<cuda_blocks((size_t)N, 8), 256, 0, CUDA_STREAM>>>(
	    out, rstd, x, g, N, D);
	CUDA_LAUNCHED();
}

__global__ void k_rmsnorm_backward_dx(float *dx, const float *dout,
				      const float *x, const float *g,
				      const float *rstd, int N, int D)
{
	int n = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
	int lane = threadIdx.x % 32;

	if (n >= N)
		return;
	const float *xr = x + (size_t)n * D;
	const float *dr = dout + (size_t)n * D;
	float *dxr = dx + (size_t)n * D;
	float r = rstd[n], dot = 0.0f;

	for (int d = lane; d < D; d += 32)
		dot += dr[d] * g[d] * xr[d];
	dot = warp_sum(dot);
	float c = r * r * r * dot / (float)D;

	for (int d = lane; d < D; d += 32)
		dxr[d] += r * dr[d] * g[d] - c * xr[d];
}

#define COL_CHUNK 256 /* rows per partial column sum */

/* part[c, d] = sum over the rows of chunk c, in row order; the nc
 * chunks strided over grid.y, which stops at 65535 */
__global__ void k_rmsnorm_dg_part(float *part, const float *dout,
				  const float *x, const float *rstd, int N,
				  int D, int nc)
{
	int d = blockIdx.x * blockDim.x + threadIdx.x;

	if (d >= D)
		return;
	for (int c = blockIdx.y; c < nc; c += gridDim.y) {
		long r0 = (long)c * COL_CHUNK;
		long r1 = r0 + COL_CHUNK < N ? r0 + COL_CHUNK : N;
		float s = 0.0f;

		for (long n = r0; n < r1; n++)
			s += dout[(size_t)n * D + d] * x[(size_t)n * D + d] *
			     rstd[n];
		part[(size_t)c * D + d] = s;
	}
}

/* dst[d] += sum over c of part[c, d], in chunk order */
__global__ void k_col_finish(float *dst, const float *part, int nc, int D)
{
	int d = blockIdx.x * blockDim.x + threadIdx.x;

	if (d >= D)
		return;
	float s = 0.0f;

	for (int c = 0; c < nc; c++)
		s += part[(size_t)c * D + d];
	dst[d] += s;
}

void cuda_rmsnorm_backward(float *dx, float *dg, const float *dout,
			   const float *x, const float *g, const float *rstd,
			   int N, int D)
{
	int nc = (N + COL_CHUNK - 1) / COL_CHUNK;
	float *part;

	if (N <= 0 || D <= 0)
		return;
	k_rmsnorm_backward_dx<<<cuda_blocks((size_t)N, 8), 256, 0,
				CUDA_STREAM>>>(dx, dout, x, g, rstd, N, D);
	CUDA_LAUNCHED();
	part = (float *)cuda_workspace(sizeof(float) * (size_t)nc * D);
	k_rmsnorm_dg_part<<<dim3(cuda_blocks((size_t)D, 128),
				 nc < CUDA_GRID_Y_MAX ? nc : CUDA_GRID_Y_MAX),
			    128, 0, CUDA_STREAM>>>(part, dout, x, rstd, N, D,
						   nc);
	CUDA_LAUNCHED();
	k_col_finish<<<cuda_blocks((size_t)D, 128), 128, 0, CUDA_STREAM>>>(
	    dg, part, nc, D);
	CUDA_LAUNCHED();
}

/* ---- rotary embedding -----------------------------------------------------
 */

/*
 * One thread per (row, head, i < Dh/2). The angle is computed in double as
 * the CPU table does, so both paths rotate by the same float cos and sin.
 * Each thread reads and writes only its own pair: out may equal in.
 */
__global__ void k_rope(float *out, const float *in, int BT, int T, int H,
		       int Dh, int dir)
{
	int half = Dh / 2;
	size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (t >= (size_t)BT * H * half)
		return;
	int i = (int)(t % half);
	size_t bh = t / half;
	int h = (int)(bh % H), bt = (int)(bh / H);
	double theta = pow(10000.0, -2.0 * i / (double)Dh);
	double a = (double)(bt % T) * theta;
	float c = (float)cos(a), s = (float)(dir >= 0 ? sin(a) : -sin(a));
	size_t base = (size_t)bt * H * Dh + (size_t)h * Dh;
	float x0 = in[base + i], x1 = in[base + i + half];

	out[base + i] = x0 * c - x1 * s;
	out[base + i + half] = x1 * c + x0 * s;
}

void cuda_rope(float *out, const float *in, int B, int T, int H, int Dh,
	       int dir)
{
	size_t n = (size_t)B * T * H * (Dh / 2);

	if (!n)
		return;
	k_rope<<<cuda_blocks(n, 256), 256, 0, CUDA_STREAM>>>(out, in, B * T, T,
							     H, Dh, dir);
	CUDA_LAUNCHED();
}

/* ---- softmax (router) ------------------------------------------------------
 */

/* one warp per row; p may equal logits (each lane reads before it writes) */
__global__ void k_softmax_forward(float *p, const float *logits, int N, int C)
{
	int n = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
	int lane = threadIdx.x % 32;

	if (n >= N)
		return;
	const float *l = logits + (size_t)n * C;
	float *o = p + (size_t)n * C;
	float mx = -INFINITY, s = 0.0f;

	for (int c = lane; c < C; c += 32)
		mx = fmaxf(mx, l[c]);
	mx = warp_max(mx);
	for (int c = lane; c < C; c += 32) {
		float e = expf(l[c] - mx);

		o[c] = e;
		s += e;
	}
	s = warp_sum(s);
	for (int c = lane; c < C; c += 32)
		o[c] /= s;
}

void cuda_softmax_forward(float *p, const float *logits, int N, int C)
{
	if (N <= 0)
		return;
	k_softmax_forward<<<cuda_blocks((size_t)N, 8), 256, 0, CUDA_STREAM>>>(
	    p, logits, N, C);
	CUDA_LAUNCHED();
}

__global__ void k_softmax_backward(float *dlogits, const float *dp,
				   const float *p, int N, int C)
{
	int n = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
	int lane = threadIdx.x % 32;

	if (n >= N)
		return;
	const float *pr = p + (size_t)n * C;
	const float *g = dp + (size_t)n * C;
	float *o = dlogits + (size_t)n * C;
	float dot = 0.0f;

	for (int c = lane; c < C; c += 32)
		dot += pr[c] * g[c];
	dot = warp_sum(dot);
	for (int c = lane; c < C; c += 32)
		o[c] = pr[c] * (g[c] - dot);
}

void cuda_softmax_backward(float *dlogits, const float *dp, const float *p,
			   int N, int C)
{
	if (N <= 0)
		return;
	k_softmax_backward<<<cuda_blocks((size_t)N, 8), 256, 0, CUDA_STREAM>>>(
	    dlogits, dp, p, N, C);
	CUDA_LAUNCHED();
}

/* ---- SwiGLU -------------------------------------------------------------- */

__global__ void k_swiglu_forward(float *h, const float *a, const float *b,
				 size_t n)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= n)
		return;
	float s = 1.0f / (1.0f + expf(-a[i]));

	h[i] = a[i] * s * b[i];
}

void cuda_swiglu_forward(float *h, const float *a, const float *b, size_t n)
{
	if (!n)
		return;
	k_swiglu_forward<<<cuda_blocks(n, 256), 256, 0, CUDA_STREAM>>>(h, a, b,
								       n);
	CUDA_LAUNCHED();
}

__global__ void k_swiglu_backward(float *da, float *db, const float *dh,
				  const float *a, const float *b, size_t n)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= n)
		return;
	float s = 1.0f / (1.0f + expf(-a[i]));
	float silu = a[i] * s;
	float g = dh[i], bi = b[i], ai = a[i];

	db[i] = g * silu;
	da[i] = g * bi * s * (1.0f + ai * (1.0f - s));
}

void cuda_swiglu_backward(float *da, float *db, const float *dh, const float *a,
			  const float *b, size_t n)
{
	if (!n)
		return;
	k_swiglu_backward<<<cuda_blocks(n, 256), 256, 0, CUDA_STREAM>>>(
	    da, db, dh, a, b, n);
	CUDA_LAUNCHED();
}
