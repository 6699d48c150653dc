/*
 * probe_kat.cu - sigma-probe's known-answer checks on a GPU: a tiled GEMM
 * of small-integer matrices compared with the exact integer answer
 * computed on the CPU, and a pattern test over a slice of device memory.
 * The matrices and the pattern are those of the CPU check (probe_kat.h).
 */
#include <cstdio>
#include <cstdlib>

#include "cuda_internal.h"

#define HAVE_CUDA 1
#include "probe_kat.h"

#define KAT_TILE 16

__global__ void kat_fill(float *a, float *b, int n)
{
	long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;

	if (idx >= (long)n * n)
		return;
	long i = idx / n, k = idx % n;
	a[idx] = (float)SIGMA_KAT_A(i, k);
	b[idx] = (float)SIGMA_KAT_B(i, k);
}

// c = a * b, (n, n) row-major, shared-memory tiles
__global__ void kat_gemm(const float *a, const float *b, float *c, int n)
{
	__shared__ float ta[KAT_TILE][KAT_TILE], tb[KAT_TILE][KAT_TILE];
	int row = blockIdx.y * KAT_TILE + threadIdx.y;
	int col = blockIdx.x * KAT_TILE + threadIdx.x;
	float acc = 0.0f;

	for (int t = 0; t < n; t += KAT_TILE) {
		int ak = t + threadIdx.x, bk = t + threadIdx.y;

		ta[threadIdx.y][threadIdx.x] =
		    (row < n && ak < n) ? a[(long)row * n + ak] : 0.0f;
		tb[threadIdx.y][threadIdx.x] =
		    (bk < n && col < n) ? b[(long)bk * n + col] : 0.0f;
		__syncthreads();
		for (int k = 0; k < KAT_TILE; k++)
			acc += ta[threadIdx.y][k] * tb[k][threadIdx.x];
		__syncthreads();
	}
	if (row < n && col < n)
		c[(long)row * n + col] = acc;
}

__global__ void kat_pattern_write(unsigned long long *m, size_t words,
				  unsigned long long flip)
{
	size_t stride = (size_t)gridDim.x * blockDim.x;

	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	     i < words; i += stride)
		m[i] = SIGMA_KAT_PATTERN(i) ^ flip;
}

__global__ void kat_pattern_check(const unsigned long long *m, size_t words,
				  unsigned long long flip,
				  unsigned long long *bad)
{
	size_t stride = (size_t)gridDim.x * blockDim.x;

	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	     i < words; i += stride)
		if (m[i] != (SIGMA_KAT_PATTERN(i) ^ flip))
			atomicAdd(bad, 1ULL);
}

/* errors that say someone else holds the device, not that it computes wrong */
static bool kat_busy(cudaError_t e)
{
	return e == cudaErrorMemoryAllocation ||
	       e == cudaErrorDevicesUnavailable;
}

#define KAT_CHECK(call)                                                        \
	do {                                                                   \
		cudaError_t e_ = (call);                                       \
		if (e_ != cudaSuccess) {                                       \
			snprintf(why, whylen, "gpu%d: %s: %s", dev, #call,     \
				 cudaGetErrorString(e_));                      \
			rc = kat_busy(e_) ? SIGMA_KAT_BUSY : -1;               \
			goto out;                                              \
		}                                                              \
	} while (0)

static int kat_memtest(int dev, long mem_mb, char *why, unsigned long whylen)
{
	size_t words = (size_t)mem_mb * (1 << 20) / sizeof(unsigned long long);
	unsigned long long *m = NULL, *d_bad = NULL, bad = 0;
	int rc = 0;

	KAT_CHECK(cudaMalloc(&m, words * sizeof(unsigned long long)));
	KAT_CHECK(cudaMalloc(&d_bad, sizeof(unsigned long long)));
	for (int pass = 0; pass < 2 && !bad; pass++) {
		unsigned long long flip = pass ? ~0ULL : 0ULL;

		KAT_CHECK(cudaMemset(d_bad, 0, sizeof(unsigned long long)));
		kat_pattern_write<<<1024, 256>>>(m, words, flip);
		KAT_CHECK(cudaGetLastError());
		kat_pattern_check<<<1024, 256>>>(m, words, flip, d_bad);
		KAT_CHECK(cudaGetLastError());
		KAT_CHECK(cudaMemcpy(&bad, d_bad, sizeof(bad),
				     cudaMemcpyDeviceToHost));
	}
	if (bad) {
		snprintf(why, whylen,
			 "gpu%d memory test: %llu of %zu words differ", dev,
			 bad, words);
		rc = SIGMA_KAT_MEM_BAD;
	}
out:
	cudaFree(m);
	cudaFree(d_bad);
	return rc;
}

extern "C" int sigma_probe_kat_gpu(int dev, int n, long mem_mb, char *why,
				   unsigned long whylen)
{
	float *a = NULL, *b = NULL, *c = NULL, *host = NULL;
	size_t bytes = sizeof(float) * (size_t)n * n;
	int count = 0, rc = 0, mem;

	if (cudaGetDeviceCount(&count) != cudaSuccess || dev >= count) {
		cudaGetLastError(); /* clear the sticky "no device" */
		return SIGMA_KAT_UNAVAILABLE;
	}
	if (n < 1 || n > 4096) {
		snprintf(why, whylen, "gemm size %d", n);
		return -1;
	}
	KAT_CHECK(cudaSetDevice(dev));
	host = (float *)malloc(bytes);
	if (!host) {
		snprintf(why, whylen, "no host memory");
		return -1;
	}
	KAT_CHECK(cudaMalloc(&a, bytes));
	KAT_CHECK(cudaMalloc(&b, bytes));
	KAT_CHECK(cudaMalloc(&c, bytes));
	kat_fill<<<(unsigned)(((long)n * n + 255) / 256), 256>>>(a, b, n);
	KAT_CHECK(cudaGetLastError());
	{
		dim3 block(KAT_TILE, KAT_TILE);
		dim3 grid((n + KAT_TILE - 1) / KAT_TILE,
			  (n + KAT_TILE - 1) / KAT_TILE);

		kat_gemm<<<grid, block>>>(a, b, c, n);
	}
	KAT_CHECK(cudaGetLastError());
	KAT_CHECK(cudaMemcpy(host, c, bytes, cudaMemcpyDeviceToHost));
	for (long i = 0; i < n && !rc; i++)
		for (long j = 0; j < n; j++) {
			long long want = 0;

			for (long k = 0; k < n; k++)
				want += (long long)SIGMA_KAT_A(i, k) *
					SIGMA_KAT_B(k, j);
			if (host[i * n + j] != (float)want) {
				snprintf(
				    why, whylen,
				    "gpu%d gemm %dx%d: c[%ld][%ld]=%g, expected %lld",
				    dev, n, n, i, j, (double)host[i * n + j],
				    want);
				rc = SIGMA_KAT_GEMM_BAD;
				break;
			}
		}
	if (mem_mb > 0) {
		char mwhy[160] = "";

		mem = kat_memtest(dev, mem_mb, mwhy, sizeof(mwhy));
		if (mem < 0) {
			snprintf(why, whylen, "%s", mwhy);
			rc = mem == SIGMA_KAT_BUSY ? SIGMA_KAT_BUSY : -1;
			goto out;
		}
		if (mem && !rc)
			snprintf(why, whylen, "%s", mwhy);
		rc |= mem;
	}
out:
	cudaFree(a);
	cudaFree(b);
	cudaFree(c);
	free(host);
	return rc;
}
