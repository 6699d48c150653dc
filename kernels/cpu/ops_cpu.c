/*
 * ops_cpu.c - the CPU op table: host memory, single-threaded OpenBLAS under
 * the program's own OpenMP (a threaded BLAS inside an OpenMP region
 * oversubscribes the cores, see docs/sigma-train.md).
 */
#include "config.h"

#include <cblas.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "ops.h"
#include "cpu.h"

/* OpenBLAS extensions, declared by its cblas.h */
#ifdef HAVE_OPENBLAS_SET_NUM_THREADS
#define BLAS_ONE_THREAD() openblas_set_num_threads(1)
#define BLAS_PARALLEL() openblas_get_parallel()
#else
#define BLAS_ONE_THREAD() ((void)0)
#define BLAS_PARALLEL() (-1)
#endif

static int cpu_init(int threads)
{
	if (threads < 0)
		return -EINVAL;
	BLAS_ONE_THREAD();
#ifdef _OPENMP
	if (threads > 0)
		omp_set_num_threads(threads);
#endif
	return 0;
}

static void cpu_describe(char *buf, size_t len)
{
	int nt = 1;

#ifdef _OPENMP
	nt = omp_get_max_threads();
#endif
	snprintf(buf, len,
		 "cpu: %d OpenMP thread%s, BLAS single-threaded (openblas_get_parallel=%d)",
		 nt, nt == 1 ? "" : "s", BLAS_PARALLEL());
}

static void *cpu_alloc(size_t n)
{
	size_t sz = (n + 63) & ~(size_t)63;
	void *p;

	if (sz == 0)
		sz = 64;
	p = aligned_alloc(64, sz);
	if (p)
		memset(p, 0, sz);
	return p;
}

static void cpu_free(void *p)
{
	free(p);
}

static void cpu_zero(float *dst, size_t n)
{
	memset(dst, 0, sizeof(float) * n);
}

static void cpu_copy(float *dst, const float *src, size_t n)
{
	memmove(dst, src, sizeof(float) * n);
}

static void cpu_to_host(void *host, const void *src, size_t bytes)
{
	memmove(host, src, bytes);
}

static void cpu_from_host(void *dst, const void *host, size_t bytes)
{
	memmove(dst, host, bytes);
}

/* the CPU backward reads the probabilities the forward kept */
static int cpu_attention_plan(int B, int T, int H, int Dh, int nbuf,
			      char *err, size_t len)
{
	(void)B, (void)T, (void)H, (void)Dh, (void)nbuf, (void)err, (void)len;
	return 1;
}

const struct sigma_ops sigma_ops_cpu = {
	.name = "cpu",
	.init = cpu_init,
	.describe = cpu_describe,
	.alloc = cpu_alloc,
	.free = cpu_free,
	.zero = cpu_zero,
	.copy = cpu_copy,
	.to_host = cpu_to_host,
	.from_host = cpu_from_host,
	.matmul_forward = cpu_matmul_forward,
	.matmul_backward = cpu_matmul_backward,
	.grouped_matmul_forward = cpu_grouped_matmul_forward,
	.grouped_matmul_backward = cpu_grouped_matmul_backward,
	.embedding_forward = cpu_embedding_forward,
	.embedding_backward = cpu_embedding_backward,
	.rmsnorm_forward = cpu_rmsnorm_forward,
	.rmsnorm_backward = cpu_rmsnorm_backward,
	.rope = cpu_rope,
	.attention_forward = cpu_attention_forward,
	.attention_backward = cpu_attention_backward,
	.attention_plan = cpu_attention_plan,
	.softmax_forward = cpu_softmax_forward,
	.softmax_backward = cpu_softmax_backward,
	.moe_route = cpu_moe_route,
	.moe_aux_loss = cpu_moe_aux_loss,
	.moe_gather = cpu_moe_gather,
	.moe_gather_backward = cpu_moe_gather_backward,
	.moe_combine = cpu_moe_combine,
	.moe_combine_backward = cpu_moe_combine_backward,
	.moe_router_backward = cpu_moe_router_backward,
	.swiglu_forward = cpu_swiglu_forward,
	.swiglu_backward = cpu_swiglu_backward,
	.crossentropy_forward = cpu_crossentropy_forward,
	.crossentropy_backward = cpu_crossentropy_backward,
	.sum = cpu_sum,
	.sumsq = cpu_sumsq,
	.scale = cpu_scale,
	.adamw = cpu_adamw,
};
