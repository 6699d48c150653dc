/*
 * cuda_plan.h - the choices of the CUDA path that need no GPU: which of the
 * visible devices a process takes, and which attention kernels a shape
 * gets (with whether they need the T x T buffers of ops.h). Pure functions
 * of their arguments and the environment, shared by ops_cuda.cu,
 * attention.cu and the unit tests, which run them on any machine
 * (tests/unit/test_kernels_select.c). Plain C that nvcc compiles too.
 */
#ifndef SIGMA_CUDA_PLAN_H
#define SIGMA_CUDA_PLAN_H

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

/* the fused kernels (attention.cu): Dh <= 32 lanes x 8 outputs each */
#define CUDA_PLAN_FUSED_DH_MAX 256
/* the fused kernels' grid: B x H blocks along y */
#define CUDA_PLAN_FUSED_BH_MAX 65535
/*
 * Under bf16 the default attention is the cuBLAS one (tensor cores)
 * while the T x T buffers the model keeps, one per layer and one for
 * the gradient, stay within this all together. Above it the fused
 * kernels, which need none.
 */
#define CUDA_PLAN_TT_BYTES_MAX ((size_t)4 << 30)

/* the attention kinds, as enum sigma_cuda_attention numbers them */
#define CUDA_PLAN_ATT_FUSED  0
#define CUDA_PLAN_ATT_CUBLAS 1
#define CUDA_PLAN_ATT_AUTO   2

/* a non-negative decimal below limit; -1 unset or empty, -2 malformed */
static inline long cuda_plan_env_index(const char *name, long limit)
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
 * The device of a process among n visible (n >= 1):
 *   1. SIGMA_CUDA_DEVICE when set (0..n-1, else -1 and err says why);
 *   2. with several visible, local_rank modulo n when local_rank >= 0
 *      (the node-local rank from the PMIx bootstrap, trainer/comm/boot.h:
 *      what the job really is, whatever variables the launcher left);
 *   3. else the launcher's node-local rank modulo n: mpirun's
 *      OMPI_COMM_WORLD_LOCAL_RANK, then LOCAL_RANK, then SLURM_LOCALID
 *      last, because ranks that mpirun starts inside a Slurm step inherit
 *      the step's SLURM_LOCALID (0 for all of them);
 *   4. else 0.
 */
static inline int cuda_plan_device(int n, int local_rank, char *err, size_t len)
{
	static const char *const vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK",
					   "LOCAL_RANK", "SLURM_LOCALID"};
	long v = cuda_plan_env_index("SIGMA_CUDA_DEVICE", n);

	if (v == -2) {
		snprintf(
		    err, len,
		    "SIGMA_CUDA_DEVICE=%s: expected 0..%d (visible devices)",
		    getenv("SIGMA_CUDA_DEVICE"), n - 1);
		return -1;
	}
	if (v >= 0)
		return (int)v;
	if (n <= 1)
		return 0;
	if (local_rank >= 0)
		return local_rank % n;
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		v = cuda_plan_env_index(vars[i], 1L << 20);
		if (v >= 0)
			return (int)(v % n);
	}
	return 0;
}

/* 0 when the fused kernels take these sizes, else -EINVAL and why */
static inline int cuda_plan_fused_fits(int B, int H, int Dh, char *err,
				       size_t len)
{
	if (Dh < 1 || Dh > CUDA_PLAN_FUSED_DH_MAX) {
		snprintf(
		    err, len,
		    "fused attention: head dimension Dh = %d is outside its limit 1..%d",
		    Dh, CUDA_PLAN_FUSED_DH_MAX);
		return -EINVAL;
	}
	if ((long)B * H > CUDA_PLAN_FUSED_BH_MAX) {
		snprintf(
		    err, len,
		    "fused attention: batch x heads = %d x %d = %ld is above its limit %d",
		    B, H, (long)B * H, CUDA_PLAN_FUSED_BH_MAX);
		return -EINVAL;
	}
	return 0;
}

/* 0 when the cuBLAS path takes these sizes (its softmax counts rows in
 * an int), else -EINVAL and why */
static inline int cuda_plan_cublas_fits(int B, int T, int H, char *err,
					size_t len)
{
	if ((long long)B * H * T > INT_MAX) {
		snprintf(
		    err, len,
		    "cuBLAS attention: batch x heads x T = %lld rows is above its limit %d",
		    (long long)B * H * T, INT_MAX);
		return -EINVAL;
	}
	return 0;
}

/*
 * The attention kernels for these sizes (B sequences of T positions, H
 * heads of Dh): CUDA_PLAN_ATT_FUSED or CUDA_PLAN_ATT_CUBLAS, or -EINVAL
 * with err naming the limit. mode is the one asked for: FUSED or CUBLAS
 * (set by SIGMA_CUDA_ATTENTION or sigma_cuda_set_attention) is kept or
 * refused; AUTO takes the cuBLAS path under bf16 while nbuf T x T
 * buffers (the model's layers plus one; 1 for a single call) are within
 * CUDA_PLAN_TT_BYTES_MAX (the tensor cores; the fused kernels are fp32
 * on the CUDA cores), else the fused kernels, and the cuBLAS path where
 * the fused ones cannot go.
 */
static inline int cuda_plan_attention(int mode, int bf16, int B, int T, int H,
				      int Dh, int nbuf, char *err, size_t len)
{
	char why[192], why2[192];
	size_t tt = sizeof(float) * (size_t)B * H * T * T;
	size_t n = nbuf > 1 ? (size_t)nbuf : 1;

	if (mode == CUDA_PLAN_ATT_FUSED)
		return cuda_plan_fused_fits(B, H, Dh, err, len)
			   ?: CUDA_PLAN_ATT_FUSED;
	if (mode == CUDA_PLAN_ATT_CUBLAS)
		return cuda_plan_cublas_fits(B, T, H, err, len)
			   ?: CUDA_PLAN_ATT_CUBLAS;
	if (bf16 && tt <= CUDA_PLAN_TT_BYTES_MAX / n &&
	    cuda_plan_cublas_fits(B, T, H, why, sizeof(why)) == 0)
		return CUDA_PLAN_ATT_CUBLAS;
	if (cuda_plan_fused_fits(B, H, Dh, why, sizeof(why)) == 0)
		return CUDA_PLAN_ATT_FUSED;
	if (cuda_plan_cublas_fits(B, T, H, why2, sizeof(why2)) == 0)
		return CUDA_PLAN_ATT_CUBLAS;
	snprintf(err, len, "no CUDA attention takes these sizes: %.90s; %.90s",
		 why, why2);
	return -EINVAL;
}

#endif /* SIGMA_CUDA_PLAN_H */
