/*
 * ops_cuda.cu - the CUDA op table, sigma_ops_cuda: every op of
 * kernels/ops.h on one GPU. This file holds the table and what its ops
 * share: the state, the choice of the device and init, the fatal error,
 * the workspace, device memory, and the stable sort of the embedding
 * gradient and the routing. The ops sit one file per family, as their CPU
 * references do in kernels/cpu/ (cuda_internal.h lists them):
 *
 *   matmul.cu     matrix products through cuBLAS; sigma_bf16_cuda
 *   layers.cu     embedding, RMSNorm, rotary, softmax, SwiGLU
 *   attention.cu  causal attention, fused or through cuBLAS
 *   moe.cu        routing, the load-balancing loss, gather and combine
 *   loss.cu       cross-entropy, reductions, AdamW
 *
 * Each is compared with the CPU op by tests/unit/test_kernels_cuda.c.
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
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cub/device/device_radix_sort.cuh>

#define HAVE_CUDA 1
#include "sigma_cuda.h"
#include "cuda_internal.h"
#include "cuda_blas.h"
#include "cuda_plan.h"
#include "cuda_defer.h"

/* ---- state, errors, workspace ----------------------------------------- */

cublasHandle_t cuda_blas;
static int cuda_ready;
static void *cuda_ws;
static size_t cuda_ws_bytes;
/* what free() and the workspace's growth put off until release() */
static struct cuda_defer cuda_retired;

static void cuda_free_now(void *p)
{
	CUDA_CHECK(cudaFree(p));
}

/* ops.h free: after the step (release), never inside it */
static void cuda_free(void *p)
{
	if (p && cuda_defer_push(&cuda_retired, p))
		cuda_free_now(p); /* no host memory to remember it */
}

/* ops.h release: where no collective is in flight */
static void cuda_release(void)
{
	cuda_defer_drain(&cuda_retired, cuda_free_now);
}
double *cuda_red_out; /* device double of sum/sumsq */

void cuda_fatal(const char *file, int line, const char *what, const char *msg)
{
	fprintf(stderr, "sigma-cuda: fatal: %s:%d: %s: %s\n", file, line, what,
		msg);
	exit(1);
}

void *cuda_workspace(size_t bytes)
{
	if (bytes <= cuda_ws_bytes)
		return cuda_ws;
	/* grows inside a step: the old one is freed after it */
	cuda_free(cuda_ws);
	cuda_ws = NULL;
	cuda_ws_bytes = 0;
	bytes = (bytes + 0xfffff) & ~(size_t)0xfffff; /* whole MiB */
	CUDA_CHECK(cudaMalloc(&cuda_ws, bytes));
	cuda_ws_bytes = bytes;
	return cuda_ws;
}

/* the bootstrap's node-local rank, -1 while none is known */
static int cuda_local_rank = -1;

extern "C" void sigma_cuda_set_local_rank(int local_rank)
{
	cuda_local_rank = local_rank >= 0 ? local_rank : -1;
}

/* cuda_plan_device: the choice without a GPU, so that tests can make it */
extern "C" int sigma_cuda_pick_device(int n, char *err, size_t len)
{
	return cuda_plan_device(n, cuda_local_rank, err, len);
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
	char why[256];
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
		sigma_cuda_set_precision(p);
	}
	env = getenv("SIGMA_CUDA_ATTENTION");
	if (env && *env) {
		if (!strcmp(env, "fused"))
			sigma_cuda_set_attention(SIGMA_CUDA_ATT_FUSED);
		else if (!strcmp(env, "cublas"))
			sigma_cuda_set_attention(SIGMA_CUDA_ATT_CUBLAS);
		else if (!strcmp(env, "auto"))
			sigma_cuda_set_attention(SIGMA_CUDA_ATT_AUTO);
		else {
			fprintf(
			    stderr,
			    "sigma-cuda: SIGMA_CUDA_ATTENTION=%s: expected fused, cublas or auto\n",
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
	dev = sigma_cuda_pick_device(n, why, sizeof(why));
	if (dev < 0) {
		fprintf(stderr, "sigma-cuda: %s\n", why);
		return -EINVAL;
	}
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
	    sigma_cuda_get_precision() == SIGMA_CUDA_BF16
		? "bf16 in, fp32 accumulate"
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

/* the GPU's memory, for the trainer's budget (membudget.c) */
static int cuda_mem_info(uint64_t *free_bytes, uint64_t *total_bytes)
{
	size_t f = 0, t = 0;

	if (cudaMemGetInfo(&f, &t) != cudaSuccess)
		return -EIO;
	*free_bytes = f;
	*total_bytes = t;
	return 0;
}

/* ---- a stable sort: the embedding gradient, the routing ------------------ */

__global__ void k_iota(int *x, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		x[i] = i;
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
void stable_sort_index(int *skey, int *sidx, const int *keys, int n, int nkeys,
		       char *ws, size_t ws_len)
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

size_t sort_ws_bytes(int n, int nkeys)
{
	size_t temp = 0;

	CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
	    NULL, temp, (const int *)NULL, (int *)NULL, (const int *)NULL,
	    (int *)NULL, n, 0, key_bits(nkeys), CUDA_STREAM));
	return (((size_t)n * sizeof(int) + 255) & ~(size_t)255) + temp;
}

/* ---- the table ------------------------------------------------------------
 */

const struct sigma_ops sigma_ops_cuda = {
    .name = "cuda",
    .init = cuda_init,
    .describe = cuda_describe,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .release = cuda_release,
    .zero = cuda_zero,
    .copy = cuda_copy,
    .to_host = cuda_to_host,
    .from_host = cuda_from_host,
    .mem_info = cuda_mem_info,
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
    .attention_plan = cuda_attention_plan_op,
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
