/*
 * ops_cuda.cu - the CUDA op table: every op of kernels/ops.h on one GPU.
 *
 * Matrix products go through cuBLAS (fp32, or bf16 inputs with fp32
 * accumulation: sigma_cuda_set_precision); the per-expert products are one
 * cuBLAS call per expert over its expert-sorted rows. Everything else is a
 * CUDA C kernel written beside its CPU reference (kernels/cpu/) and compared
 * with it by tests/unit/test_kernels_cuda.c. Attention is in attention.cu.
 *
 * Determinism: no floating-point atomics. Every reduction runs in a fixed
 * order that depends only on the sizes (warp butterflies, fixed block
 * counts, per-column loops in row order), and the sorts (routing,
 * embedding gradient) are CUB's stable radix sort. cuBLAS gives the same
 * bits run to run on one GPU model and toolkit version (its documented
 * guarantee; atomics mode stays off). Results differ from the CPU path in
 * the last bits: other summation orders, fused multiply-adds.
 *
 * Memory-space notes beyond ops.h: sum() and sumsq() write their double to
 * host memory (as the trainer uses them); the grouped products read the
 * E+1 offsets back to the host to size one cuBLAS call per expert.
 */
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cublas_v2.h>
#include <cub/device/device_radix_sort.cuh>
#include <cuda_bf16.h>

#define HAVE_CUDA 1
#include "sigma_cuda.h"
#include "cuda_internal.h"

#define RMS_EPS 1e-5f

/* ---- state, errors, workspace ----------------------------------------- */

static cublasHandle_t cuda_blas;
static int cuda_ready;
static enum sigma_cuda_precision cuda_precision = SIGMA_CUDA_FP32;
static enum sigma_cuda_attention cuda_att_mode = SIGMA_CUDA_ATT_FUSED;
static void *cuda_ws;
static size_t cuda_ws_bytes;
static int *cuda_host_offs;
static size_t cuda_host_offs_n;
static double *cuda_red_out; /* device double of sum/sumsq */

void cuda_fatal(const char *file, int line, const char *what, const char *msg)
{
	fprintf(stderr, "sigma-cuda: fatal: %s:%d: %s: %s\n", file, line, what,
		msg);
	exit(1);
}

static const char *cublas_msg(cublasStatus_t s)
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

void *cuda_workspace(size_t bytes)
{
	if (bytes <= cuda_ws_bytes)
		return cuda_ws;
	if (cuda_ws)
		CUDA_CHECK(cudaFree(cuda_ws));
	cuda_ws = NULL;
	cuda_ws_bytes = 0;
	bytes = (bytes + 0xfffff) & ~(size_t)0xfffff; /* whole MiB */
	CUDA_CHECK(cudaMalloc(&cuda_ws, bytes));
	cuda_ws_bytes = bytes;
	return cuda_ws;
}

/* the E+1 offsets of a grouped product, on the host */
static const int *host_offs(const int *offs, int G)
{
	if ((size_t)G + 1 > cuda_host_offs_n) {
		int *p = (int *)realloc(cuda_host_offs,
					sizeof(int) * ((size_t)G + 1));

		if (!p)
			cuda_fatal(__FILE__, __LINE__, "realloc",
				   "out of host memory");
		cuda_host_offs = p;
		cuda_host_offs_n = (size_t)G + 1;
	}
	CUDA_CHECK(cudaMemcpy(cuda_host_offs, offs, sizeof(int) * (G + 1),
			      cudaMemcpyDeviceToHost));
	return cuda_host_offs;
}

extern "C" int sigma_cuda_parse_precision(const char *s,
					  enum sigma_cuda_precision *p)
{
	if (!s)
		return -EINVAL;
	if (!strcmp(s, "fp32"))
		*p = SIGMA_CUDA_FP32;
	else if (!strcmp(s, "bf16"))
		*p = SIGMA_CUDA_BF16;
	else
		return -EINVAL;
	return 0;
}

extern "C" int sigma_cuda_set_precision(enum sigma_cuda_precision p)
{
	if (p != SIGMA_CUDA_FP32 && p != SIGMA_CUDA_BF16)
		return -EINVAL;
	cuda_precision = p;
	return 0;
}

extern "C" enum sigma_cuda_precision sigma_cuda_get_precision(void)
{
	return cuda_precision;
}

/* a non-negative decimal below limit, or -1 */
static long cuda_env_index(const char *name, long limit)
{
	const char *s = getenv(name);
	char *end;
	long v;

	if (!s || !*s)
		return -1;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < 0 || v >= limit)
		return -2;
	return v;
}

/*
 * The device of this process among the n visible: SIGMA_CUDA_DEVICE when
 * set; else, with several visible, the node-local rank (SLURM_LOCALID,
 * LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK) modulo n, so that the tasks of a
 * node spread over its GPUs when Slurm did not bind them (with
 * --gpus-per-task each sees one); else 0. -1 for a SIGMA_CUDA_DEVICE out
 * of range.
 */
static int cuda_pick_device(int n)
{
	long v = cuda_env_index("SIGMA_CUDA_DEVICE", n);

	if (v == -2) {
		fprintf(
		    stderr,
		    "sigma-cuda: SIGMA_CUDA_DEVICE=%s: expected 0..%d (visible devices)\n",
		    getenv("SIGMA_CUDA_DEVICE"), n - 1);
		return -1;
	}
	if (v >= 0)
		return (int)v;
	if (n > 1) {
		v = cuda_env_index("SLURM_LOCALID", 1L << 20);
		if (v < 0)
			v = cuda_env_index("LOCAL_RANK", 1L << 20);
		if (v < 0) /* mpirun */
			v = cuda_env_index("OMPI_COMM_WORLD_LOCAL_RANK",
					   1L << 20);
		if (v >= 0)
			return (int)(v % n);
	}
	return 0;
}

static int cuda_dev = -1; /* the device cuda_init chose */

extern "C" int sigma_cuda_device(void)
{
	return cuda_ready ? cuda_dev : -1;
}

extern "C" int sigma_cuda_device_pci(char *buf, size_t len)
{
	if (!cuda_ready || len < 13 || len > INT_MAX ||
	    cudaDeviceGetPCIBusId(buf, (int)len, cuda_dev) != cudaSuccess) {
		(void)cudaGetLastError();
		return -ENODEV;
	}
	return 0;
}

static int cuda_init(int threads)
{
	const char *env = getenv("SIGMA_CUDA_PRECISION");
	enum sigma_cuda_precision p;
	int n = 0, dev;

	if (threads < 0)
		return -EINVAL;
	if (env && *env) {
		if (sigma_cuda_parse_precision(env, &p)) {
			fprintf(
			    stderr,
			    "sigma-cuda: SIGMA_CUDA_PRECISION=%s: expected fp32 or bf16\n",
			    env);
			return -EINVAL;
		}
		cuda_precision = p;
	}
	env = getenv("SIGMA_CUDA_ATTENTION");
	if (env && *env) {
		if (!strcmp(env, "fused"))
			cuda_att_mode = SIGMA_CUDA_ATT_FUSED;
		else if (!strcmp(env, "cublas"))
			cuda_att_mode = SIGMA_CUDA_ATT_CUBLAS;
		else {
			fprintf(
			    stderr,
			    "sigma-cuda: SIGMA_CUDA_ATTENTION=%s: expected fused or cublas\n",
			    env);
			return -EINVAL;
		}
	}
	if (cuda_ready)
		return 0;
	if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
		(void)cudaGetLastError();
		return -ENODEV;
	}
	dev = cuda_pick_device(n);
	if (dev < 0)
		return -EINVAL;
	if (cuda_device_own(dev))
		return -ENODEV;
	cuda_dev = dev;
	if (cublasCreate(&cuda_blas) != CUBLAS_STATUS_SUCCESS)
		return -ENODEV;
	/* default math mode: no TF32 for fp32; no atomics (determinism) */
	CUBLAS_CHECK(cublasSetMathMode(cuda_blas, CUBLAS_DEFAULT_MATH));
	CUBLAS_CHECK(
	    cublasSetAtomicsMode(cuda_blas, CUBLAS_ATOMICS_NOT_ALLOWED));
	CUBLAS_CHECK(cublasSetPointerMode(cuda_blas, CUBLAS_POINTER_MODE_HOST));
	CUBLAS_CHECK(cublasSetStream(cuda_blas, CUDA_STREAM));
	CUDA_CHECK(cudaMalloc(&cuda_red_out, sizeof(double)));
	cuda_ready = 1;
	return 0;
}

static void cuda_describe(char *buf, size_t len)
{
	cudaDeviceProp prop;
	int dev = 0, rt = 0;

	if (!len)
		return;
	if (cudaGetDevice(&dev) != cudaSuccess ||
	    cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
		(void)cudaGetLastError();
		snprintf(buf, len, "cuda: no device");
		return;
	}
	(void)cudaRuntimeGetVersion(&rt);
	snprintf(
	    buf, len,
	    "cuda: %s (sm_%d%d, %d SMs, %.1f GiB), CUDA runtime %d.%d, matmul %s",
	    prop.name, prop.major, prop.minor, prop.multiProcessorCount,
	    (double)prop.totalGlobalMem / (1024.0 * 1024.0 * 1024.0), rt / 1000,
	    (rt % 1000) / 10,
	    cuda_precision == SIGMA_CUDA_BF16 ? "bf16 in, fp32 accumulate"
					      : "fp32");
}

/* ---- memory -------------------------------------------------------------- */

static void *cuda_alloc(size_t n)
{
	size_t sz = (n + 63) & ~(size_t)63;
	void *p = NULL;

	if (sz == 0)
		sz = 64;
	if (cudaMalloc(&p, sz) != cudaSuccess) {
		(void)cudaGetLastError();
		return NULL;
	}
	/* cudaMalloc returns 256-byte aligned memory; zero it as ops.h says */
	if (cudaMemset(p, 0, sz) != cudaSuccess) {
		(void)cudaGetLastError();
		cudaFree(p);
		return NULL;
	}
	return p;
}

static void cuda_free(void *p)
{
	if (p)
		CUDA_CHECK(cudaFree(p));
}

static void cuda_zero(float *dst, size_t n)
{
	if (n)
		CUDA_CHECK(
		    cudaMemsetAsync(dst, 0, sizeof(float) * n, CUDA_STREAM));
}

static void cuda_copy(float *dst, const float *src, size_t n)
{
	/* cudaMemcpy does not allow overlap; the model never overlaps */
	if (n && dst != src)
		CUDA_CHECK(cudaMemcpyAsync(dst, src, sizeof(float) * n,
					   cudaMemcpyDeviceToDevice,
					   CUDA_STREAM));
}

static void cuda_to_host(void *host, const void *src, size_t bytes)
{
	if (bytes)
		CUDA_CHECK(
		    cudaMemcpy(host, src, bytes, cudaMemcpyDeviceToHost));
}

static void cuda_from_host(void *dst, const void *host, size_t bytes)
{
	if (bytes)
		CUDA_CHECK(
		    cudaMemcpy(dst, host, bytes, cudaMemcpyHostToDevice));
}

/* ---- matrix products -------------------------------------------------- */

/*
 * Column-major C[m,n] = alpha op(A) op(B) + beta C, the one cuBLAS entry
 * of this file. A row-major [r, c] matrix is a column-major [c, r] one, so
 * each row-major product below is written as its transpose.
 * BF16: cublasGemmEx with fp32 storage and CUBLAS_COMPUTE_32F_FAST_16BF:
 * cuBLAS rounds the inputs to bf16 for the tensor cores and accumulates
 * and stores in fp32.
 */
static void gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n,
		 int k, const float *A, int lda, const float *B, int ldb,
		 float beta, float *C, int ldc)
{
	const float alpha = 1.0f;

	if (m <= 0 || n <= 0)
		return;
	if (k <= 0) {
		/* an empty sum: C = beta C, which is "keep" or "zero" here */
		if (beta == 0.0f)
			for (int j = 0; j < n; j++)
				CUDA_CHECK(cudaMemsetAsync(C + (size_t)j * ldc,
							   0, sizeof(float) * m,
							   CUDA_STREAM));
		return;
	}
	if (cuda_precision == SIGMA_CUDA_BF16)
		CUBLAS_CHECK(cublasGemmEx(
		    cuda_blas, ta, tb, m, n, k, &alpha, A, CUDA_R_32F, lda, B,
		    CUDA_R_32F, ldb, &beta, C, CUDA_R_32F, ldc,
		    CUBLAS_COMPUTE_32F_FAST_16BF, CUBLAS_GEMM_DEFAULT));
	else
		CUBLAS_CHECK(cublasSgemm(cuda_blas, ta, tb, m, n, k, &alpha, A,
					 lda, B, ldb, &beta, C, ldc));
}

/* out[N,OC] = in[N,C] w[C,OC]  <=>  out^T = w^T in^T (column-major) */
static void mm_forward(float *out, const float *in, const float *w, int N,
		       int C, int OC, float beta)
{
	gemm(CUBLAS_OP_N, CUBLAS_OP_N, OC, N, C, w, OC, in, C, beta, out, OC);
}

/* din[N,C] = dout[N,OC] w^T  <=>  din^T = w dout^T */
static void mm_backward_in(float *din, const float *dout, const float *w, int N,
			   int C, int OC, float beta)
{
	gemm(CUBLAS_OP_T, CUBLAS_OP_N, C, N, OC, w, OC, dout, OC, beta, din, C);
}

/* dw[C,OC] += in[N,C]^T dout[N,OC]  <=>  dw^T += dout^T in */
static void mm_backward_w(float *dw, const float *dout, const float *in, int N,
			  int C, int OC)
{
	gemm(CUBLAS_OP_N, CUBLAS_OP_T, OC, C, N, dout, OC, in, C, 1.0f, dw, OC);
}

static void cuda_matmul_forward(float *out, const float *in, const float *w,
				int N, int C, int OC, int accumulate)
{
	mm_forward(out, in, w, N, C, OC, accumulate ? 1.0f : 0.0f);
}

static void cuda_matmul_backward(float *din, float *dw, const float *dout,
				 const float *in, const float *w, int N, int C,
				 int OC, int accumulate)
{
	if (din)
		mm_backward_in(din, dout, w, N, C, OC,
			       accumulate ? 1.0f : 0.0f);
	if (dw && N > 0)
		mm_backward_w(dw, dout, in, N, C, OC);
}

static void cuda_grouped_matmul_forward(float *out, const float *in,
					const float *w, const int *offs, int G,
					int C, int OC)
{
	const int *ho = host_offs(offs, G);

	for (int g = 0; g < G; g++) {
		int r0 = ho[g], n = ho[g + 1] - ho[g];

		if (n > 0)
			mm_forward(out + (size_t)r0 * OC, in + (size_t)r0 * C,
				   w + (size_t)g * C * OC, n, C, OC, 0.0f);
	}
}

static void cuda_grouped_matmul_backward(float *din, float *dw,
					 const float *dout, const float *in,
					 const float *w, const int *offs, int G,
					 int C, int OC, int accumulate)
{
	const int *ho = host_offs(offs, G);

	for (int g = 0; g < G; g++) {
		int r0 = ho[g], n = ho[g + 1] - ho[g];

		if (n <= 0)
			continue;
		if (din)
			mm_backward_in(din + (size_t)r0 * C,
				       dout + (size_t)r0 * OC,
				       w + (size_t)g * C * OC, n, C, OC,
				       accumulate ? 1.0f : 0.0f);
		if (dw)
			mm_backward_w(dw + (size_t)g * C * OC,
				      dout + (size_t)r0 * OC,
				      in + (size_t)r0 * C, n, C, OC);
	}
}

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

static void cuda_embedding_forward(float *out, const int32_t *tok,
				   const float *emb, int N, int D)
{
	size_t n = (size_t)N * D;

	if (!n)
		return;
	k_embedding_forward<<<cuda_blocks(n, 256), 256, 0, CUDA_STREAM>>>(
	    out, tok, emb, N, D);
	CUDA_LAUNCHED();
}

__global__ void k_iota(int *x, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		x[i] = i;
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

static int key_bits(int nkeys)
{
	int b = 1;

	while (b < 31 && (1 << b) < nkeys)
		b++;
	return b;
}

/*
 * Stable sort of n int keys in [0, nkeys) carrying their original index:
 * skey, sidx (device, n each). Scratch from the workspace after `used`.
 */
static void stable_sort_index(int *skey, int *sidx, const int *keys, int n,
			      int nkeys, char *ws, size_t ws_len)
{
	size_t temp = 0;
	int *iota = (int *)ws;
	char *temp_p = ws + (((size_t)n * sizeof(int) + 255) & ~(size_t)255);

	CUDA_CHECK(cub::DeviceRadixSort::SortPairs(NULL, temp, keys, skey, iota,
						   sidx, n, 0, key_bits(nkeys),
						   CUDA_STREAM));
	if ((size_t)(temp_p - ws) + temp > ws_len)
		cuda_fatal(__FILE__, __LINE__, "stable_sort_index",
			   "workspace too small");
	k_iota<<<cuda_blocks(n, 256), 256, 0, CUDA_STREAM>>>(iota, n);
	CUDA_LAUNCHED();
	CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
	    temp_p, temp, keys, skey, iota, sidx, n, 0, key_bits(nkeys),
	    CUDA_STREAM));
}

static size_t sort_ws_bytes(int n, int nkeys)
{
	size_t temp = 0;

	CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
	    NULL, temp, (const int *)NULL, (int *)NULL, (const int *)NULL,
	    (int *)NULL, n, 0, key_bits(nkeys), CUDA_STREAM));
	return (((size_t)n * sizeof(int) + 255) & ~(size_t)255) + temp;
}

static void cuda_embedding_backward(float *demb, const float *dout,
				    const int32_t *tok, int N, int V, int D)
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

static void cuda_rmsnorm_forward(float *out, float *rstd, const float *x,
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

/* part[c, d] = sum over the rows of chunk c, in row order */
__global__ void k_rmsnorm_dg_part(float *part, const float *dout,
				  const float *x, const float *rstd, int N,
				  int D)
{
	int d = blockIdx.x * blockDim.x + threadIdx.x;
	int c = blockIdx.y;

	if (d >= D)
		return;
	int r1 = (c + 1) * COL_CHUNK < N ? (c + 1) * COL_CHUNK : N;
	float s = 0.0f;

	for (int n = c * COL_CHUNK; n < r1; n++)
		s += dout[(size_t)n * D + d] * x[(size_t)n * D + d] * rstd[n];
	part[(size_t)c * D + d] = s;
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

static void cuda_rmsnorm_backward(float *dx, float *dg, const float *dout,
				  const float *x, const float *g,
				  const float *rstd, int N, int D)
{
	int nc = (N + COL_CHUNK - 1) / COL_CHUNK;
	float *part;

	if (N <= 0 || D <= 0)
		return;
	k_rmsnorm_backward_dx<<<cuda_blocks((size_t)N, 8), 256, 0,
				CUDA_STREAM>>>(dx, dout, x, g, rstd, N, D);
	CUDA_LAUNCHED();
	part = (float *)cuda_workspace(sizeof(float) * (size_t)nc * D);
	k_rmsnorm_dg_part<<<dim3(cuda_blocks((size_t)D, 128), nc), 128, 0,
			    CUDA_STREAM>>>(part, dout, x, rstd, N, D);
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

static void cuda_rope(float *out, const float *in, int B, int T, int H, int Dh,
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

static void cuda_softmax_forward(float *p, const float *logits, int N, int C)
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

static void cuda_softmax_backward(float *dlogits, const float *dp,
				  const float *p, int N, int C)
{
	if (N <= 0)
		return;
	k_softmax_backward<<<cuda_blocks((size_t)N, 8), 256, 0, CUDA_STREAM>>>(
	    dlogits, dp, p, N, C);
	CUDA_LAUNCHED();
}

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

static void cuda_moe_route(int *idx, float *gate, int *counts, int *offs,
			   int *perm, int *pos, const float *p, int N, int E,
			   int K)
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

static void cuda_moe_aux_loss(float *aux, const float *p, const int *counts,
			      int N, int E, int K)
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

static void cuda_moe_gather(float *xe, const float *m, const int *perm, int N,
			    int K, int D)
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

static void cuda_moe_gather_backward(float *dm, const float *dxe,
				     const int *pos, int N, int K, int D)
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

static void cuda_moe_combine(float *x, const float *eout, const float *gate,
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

static void cuda_moe_combine_backward(float *deout, float *dgate,
				      const float *dx, const float *eout,
				      const float *gate, const int *pos, int N,
				      int K, int D)
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

static void cuda_moe_router_backward(float *dp, const float *dgate,
				     const float *p, const int *idx,
				     const float *gate, const int *counts,
				     float aux_scale, int N, int E, int K)
{
	if (N <= 0)
		return;
	k_moe_router_backward<<<cuda_blocks((size_t)N, 128), 128, 0,
				CUDA_STREAM>>>(dp, dgate, p, idx, gate, counts,
					       aux_scale, N, E, K);
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

static void cuda_swiglu_forward(float *h, const float *a, const float *b,
				size_t n)
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

static void cuda_swiglu_backward(float *da, float *db, const float *dh,
				 const float *a, const float *b, size_t n)
{
	if (!n)
		return;
	k_swiglu_backward<<<cuda_blocks(n, 256), 256, 0, CUDA_STREAM>>>(
	    da, db, dh, a, b, n);
	CUDA_LAUNCHED();
}

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

static void cuda_crossentropy_forward(float *losses, float *probs,
				      const float *logits,
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

static void cuda_crossentropy_backward(float *dlogits, const float *probs,
				       const int32_t *targets, float scale,
				       int N, int V)
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

static void cuda_sum(double *out, const float *x, size_t n)
{
	reduce(out, x, n, 0);
}

static void cuda_sumsq(double *out, const float *x, size_t n)
{
	reduce(out, x, n, 1);
}

__global__ void k_scale(float *x, float s, size_t n)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		x[i] *= s;
}

static void cuda_scale(float *x, float s, size_t n)
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

static void cuda_adamw(float *param, float *m, float *v, const float *g,
		       size_t n, float lr, float beta1, float beta2, float eps,
		       float wd, float gscale, long t)
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
extern "C" int sigma_cuda_set_attention(enum sigma_cuda_attention a)
{
	if (a != SIGMA_CUDA_ATT_FUSED && a != SIGMA_CUDA_ATT_CUBLAS)
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

	if (cuda_precision == SIGMA_CUDA_BF16)
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

static void cuda_attention_forward_op(float *out, float *att, const float *q,
				      const float *k, const float *v, int B,
				      int T, int H, int Dh)
{
	if (B <= 0 || T <= 0 || H <= 0 || Dh <= 0)
		return;
	if (cuda_att_mode == SIGMA_CUDA_ATT_CUBLAS && att)
		att_blas_forward(out, att, q, k, v, B, T, H, Dh);
	else
		cuda_attention_forward(out, att, q, k, v, B, T, H, Dh);
}

static void cuda_attention_backward_op(float *dq, float *dk, float *dv,
				       float *scratch, const float *dout,
				       const float *q, const float *k,
				       const float *v, const float *att, int B,
				       int T, int H, int Dh)
{
	if (B <= 0 || T <= 0 || H <= 0 || Dh <= 0)
		return;
	if (cuda_att_mode == SIGMA_CUDA_ATT_CUBLAS && att && scratch)
		att_blas_backward(dq, dk, dv, scratch, dout, q, k, v, att, B, T,
				  H, Dh);
	else
		cuda_attention_backward(dq, dk, dv, scratch, dout, q, k, v, att,
					B, T, H, Dh);
}

/* ---- the table ------------------------------------------------------------
 */

const struct sigma_ops sigma_ops_cuda = {
    .name = "cuda",
    .init = cuda_init,
    .describe = cuda_describe,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .zero = cuda_zero,
    .copy = cuda_copy,
    .to_host = cuda_to_host,
    .from_host = cuda_from_host,
    .matmul_forward = cuda_matmul_forward,
    .matmul_backward = cuda_matmul_backward,
    .grouped_matmul_forward = cuda_grouped_matmul_forward,
    .grouped_matmul_backward = cuda_grouped_matmul_backward,
    .embedding_forward = cuda_embedding_forward,
    .embedding_backward = cuda_embedding_backward,
    .rmsnorm_forward = cuda_rmsnorm_forward,
    .rmsnorm_backward = cuda_rmsnorm_backward,
    .rope = cuda_rope,
    .attention_forward = cuda_attention_forward_op,
    .attention_backward = cuda_attention_backward_op,
    .softmax_forward = cuda_softmax_forward,
    .softmax_backward = cuda_softmax_backward,
    .moe_route = cuda_moe_route,
    .moe_aux_loss = cuda_moe_aux_loss,
    .moe_gather = cuda_moe_gather,
    .moe_gather_backward = cuda_moe_gather_backward,
    .moe_combine = cuda_moe_combine,
    .moe_combine_backward = cuda_moe_combine_backward,
    .moe_router_backward = cuda_moe_router_backward,
    .swiglu_forward = cuda_swiglu_forward,
    .swiglu_backward = cuda_swiglu_backward,
    .crossentropy_forward = cuda_crossentropy_forward,
    .crossentropy_backward = cuda_crossentropy_backward,
    .sum = cuda_sum,
    .sumsq = cuda_sumsq,
    .scale = cuda_scale,
    .adamw = cuda_adamw,
};

/* ---- bf16 forward products for the guardrails (kernels/bf16.h) ----------- */

/*
 * The semantics of sigma_bf16_cpu: inputs and weights rounded to bf16
 * (nearest even), products accumulated in fp32, each output rounded to
 * bf16 and written or added; a non-finite output counts as an overflow.
 * Here: two rounding kernels into the workspace, one cublasGemmEx on bf16
 * operands with fp32 accumulation into an fp32 scratch, then a kernel that
 * rounds, writes and counts (an integer count: any order gives the same
 * number).
 */
static uint64_t *cuda_bf16_counter;
static int cuda_bf16_inject;
static unsigned long long *cuda_bf16_bad; /* device counter */

__global__ void k_to_bf16(__nv_bfloat16 *y, const float *x, size_t n)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		y[i] = __float2bfloat16_rn(x[i]);
}

__global__ void k_bf16_finish(float *out, const float *r, size_t n,
			      int accumulate, unsigned long long *bad)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= n)
		return;
	float y = __bfloat162float(__float2bfloat16_rn(r[i]));

	if (!isfinite(y))
		atomicAdd(bad, 1ull);
	out[i] = accumulate ? out[i] + y : y;
}

static void cuda_bf16_begin(uint64_t *overflow, int inject)
{
	cuda_bf16_counter = overflow;
	cuda_bf16_inject = inject != 0;
}

/* r[N,OC] (fp32, writes) = bf16(in)[N,C] bf16(w)[C,OC] */
static void bf16_product(float *r, const float *in, const float *w, int N,
			 int C, int OC, char *ws)
{
	size_t na = (size_t)N * C, nb = (size_t)C * OC;
	__nv_bfloat16 *a = (__nv_bfloat16 *)ws;
	__nv_bfloat16 *b =
	    (__nv_bfloat16 *)(ws + ((na * 2 + 255) & ~(size_t)255));
	const float alpha = 1.0f, beta = 0.0f;

	if (N <= 0 || OC <= 0)
		return;
	if (C <= 0) {
		CUDA_CHECK(
		    cudaMemsetAsync(r, 0, sizeof(float) * N * OC, CUDA_STREAM));
		return;
	}
	k_to_bf16<<<cuda_blocks(na, 256), 256, 0, CUDA_STREAM>>>(a, in, na);
	CUDA_LAUNCHED();
	k_to_bf16<<<cuda_blocks(nb, 256), 256, 0, CUDA_STREAM>>>(b, w, nb);
	CUDA_LAUNCHED();
	CUBLAS_CHECK(cublasGemmEx(cuda_blas, CUBLAS_OP_N, CUBLAS_OP_N, OC, N, C,
				  &alpha, b, CUDA_R_16BF, OC, a, CUDA_R_16BF, C,
				  &beta, r, CUDA_R_32F, OC, CUBLAS_COMPUTE_32F,
				  CUBLAS_GEMM_DEFAULT));
}

static size_t bf16_ws_bytes(size_t rows, int C, int OC)
{
	return (rows * C * 2 + 255) / 256 * 256 +
	       ((size_t)C * OC * 2 + 255) / 256 * 256 +
	       (rows * OC * 4 + 255) / 256 * 256;
}

/* round r into out, count, then the test hook and the caller's counter */
static void bf16_finish(float *out, const float *r, int N, int OC,
			int accumulate)
{
	size_t n = (size_t)N * OC;
	unsigned long long bad = 0;

	if (!cuda_bf16_bad)
		CUDA_CHECK(cudaMalloc(&cuda_bf16_bad, sizeof(*cuda_bf16_bad)));
	CUDA_CHECK(cudaMemsetAsync(cuda_bf16_bad, 0, sizeof(*cuda_bf16_bad),
				   CUDA_STREAM));
	if (n) {
		k_bf16_finish<<<cuda_blocks(n, 256), 256, 0, CUDA_STREAM>>>(
		    out, r, n, accumulate, cuda_bf16_bad);
		CUDA_LAUNCHED();
	}
	if (cuda_bf16_inject && N > 0) {
		const float inf = INFINITY;

		CUDA_CHECK(
		    cudaMemcpy(out, &inf, sizeof(inf), cudaMemcpyHostToDevice));
		bad++;
		cuda_bf16_inject = 0;
	}
	if (cuda_bf16_counter) {
		unsigned long long dev = 0;

		CUDA_CHECK(cudaMemcpy(&dev, cuda_bf16_bad, sizeof(dev),
				      cudaMemcpyDeviceToHost));
		*cuda_bf16_counter += bad + dev;
	}
}

static void cuda_bf16_matmul_forward(float *out, const float *in,
				     const float *w, int N, int C, int OC,
				     int accumulate)
{
	size_t ra = ((size_t)N * C * 2 + 255) / 256 * 256 +
		    ((size_t)C * OC * 2 + 255) / 256 * 256;
	char *ws;

	if (N <= 0)
		return;
	ws = (char *)cuda_workspace(bf16_ws_bytes((size_t)N, C, OC));
	bf16_product((float *)(ws + ra), in, w, N, C, OC, ws);
	bf16_finish(out, (const float *)(ws + ra), N, OC, accumulate);
}

static void cuda_bf16_grouped_matmul_forward(float *out, const float *in,
					     const float *w, const int *offs,
					     int G, int C, int OC)
{
	const int *ho = host_offs(offs, G);
	int R = ho[G], maxrows = 0;
	size_t ra;
	char *ws;
	float *r;

	for (int g = 0; g < G; g++)
		if (ho[g + 1] - ho[g] > maxrows)
			maxrows = ho[g + 1] - ho[g];
	/* operands of the largest group, then the fp32 result of all rows */
	ra = ((size_t)maxrows * C * 2 + 255) / 256 * 256 +
	     ((size_t)C * OC * 2 + 255) / 256 * 256;
	ws = (char *)cuda_workspace(ra + (size_t)R * OC * 4 + 256);
	r = (float *)(ws + ra);
	for (int g = 0; g < G; g++) {
		int r0 = ho[g], rows = ho[g + 1] - ho[g];

		if (rows > 0)
			bf16_product(r + (size_t)r0 * OC, in + (size_t)r0 * C,
				     w + (size_t)g * C * OC, rows, C, OC, ws);
	}
	bf16_finish(out, r, R, OC, 0);
}

/* sigma_ops_cuda with the two forward products replaced */
static struct sigma_ops cuda_bf16_fill(void)
{
	struct sigma_ops t = sigma_ops_cuda;

	t.name = "cuda-bf16";
	t.matmul_forward = cuda_bf16_matmul_forward;
	t.grouped_matmul_forward = cuda_bf16_grouped_matmul_forward;
	return t;
}

static const struct sigma_ops cuda_bf16_ops = cuda_bf16_fill();

const struct sigma_bf16 sigma_bf16_cuda = {
    .name = "cuda-bf16",
    .ops = &cuda_bf16_ops,
    .begin = cuda_bf16_begin,
};
