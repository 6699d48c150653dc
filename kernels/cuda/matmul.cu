/*
 * matmul.cu - the matrix products on the GPU, through cuBLAS (the CPU
 * reference: kernels/cpu/matmul.c): fp32, or bf16 inputs with fp32
 * accumulation, as sigma_cuda_set_precision (here) chose; the per-expert
 * products are one cuBLAS call per expert over its expert-sorted rows,
 * their E+1 offsets read back to the host to size the calls. Then
 * sigma_bf16_cuda, the table with bf16 forward products for the
 * guardrails (the CPU's: kernels/cpu/bf16.c).
 */
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <cuda_bf16.h>

#define HAVE_CUDA 1
#include "sigma_cuda.h"
#include "cuda_internal.h"
#include "cuda_blas.h"

/* ---- state: the precision, the offsets on the host ----------------------- */

static enum sigma_cuda_precision cuda_precision = SIGMA_CUDA_FP32;
static int *cuda_host_offs;
static size_t cuda_host_offs_n;

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

void cuda_matmul_forward(float *out, const float *in, const float *w, int N,
			 int C, int OC, int accumulate)
{
	mm_forward(out, in, w, N, C, OC, accumulate ? 1.0f : 0.0f);
}

void cuda_matmul_backward(float *din, float *dw, const float *dout,
			  const float *in, const float *w, int N, int C, int OC,
			  int accumulate)
{
	if (din)
		mm_backward_in(din, dout, w, N, C, OC,
			       accumulate ? 1.0f : 0.0f);
	if (dw && N > 0)
		mm_backward_w(dw, dout, in, N, C, OC);
}

void cuda_grouped_matmul_forward(float *out, const float *in, const float *w,
				 const int *offs, int G, int C, int OC)
{
	const int *ho = host_offs(offs, G);

	for (int g = 0; g < G; g++) {
		int r0 = ho[g], n = ho[g + 1] - ho[g];

		if (n > 0)
			mm_forward(out + (size_t)r0 * OC, in + (size_t)r0 * C,
				   w + (size_t)g * C * OC, n, C, OC, 0.0f);
	}
}

void cuda_grouped_matmul_backward(float *din, float *dw, const float *dout,
				  const float *in, const float *w,
				  const int *offs, int G, int C, int OC,
				  int accumulate)
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
