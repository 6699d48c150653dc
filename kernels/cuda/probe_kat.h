/*
 * probe_kat.h - the known-answer checks shared by the CPU (compute.c) and
 * the GPU (kernels/cuda/probe_kat.cu): the same matrices and pattern, and
 * the C view of the CUDA check with a stub when CUDA is not built.
 */
#ifndef SIGMA_PROBE_KAT_H
#define SIGMA_PROBE_KAT_H

#ifdef __cplusplus
extern "C" {
#endif

/* small integers: every partial sum stays exact in float (n <= 4096) */
#define SIGMA_KAT_A(i, k) ((int)(((i)*7 + (k)*3) % 11) - 5)
#define SIGMA_KAT_B(k, j) ((int)(((k)*5 + (j)*2) % 13) - 6)
/* a pattern that differs in every bit position between neighbours */
#define SIGMA_KAT_PATTERN(i)                                                   \
	(((unsigned long long)(i)*0x9E3779B97F4A7C15ULL) ^                     \
	 0x5555AAAA3333CCCCULL)

#define SIGMA_KAT_GEMM_BAD    1
#define SIGMA_KAT_MEM_BAD     2
#define SIGMA_KAT_UNAVAILABLE (-1000)
/* the device is held by someone else: out of memory, or exclusive and busy */
#define SIGMA_KAT_BUSY (-1001)

#ifdef HAVE_CUDA
/*
 * On CUDA device dev: an n x n GEMM against the exact answer, and (mem_mb
 * > 0) a pattern test over mem_mb MiB. Returns a mask of SIGMA_KAT_*_BAD
 * (0 = healthy), SIGMA_KAT_UNAVAILABLE when there is no such device,
 * SIGMA_KAT_BUSY when another process holds it (its memory, or the device
 * in exclusive mode), or another negative value when the check could not
 * run (why says why).
 */
int sigma_probe_kat_gpu(int dev, int n, long mem_mb, char *why,
			unsigned long whylen);
#else
static inline int sigma_probe_kat_gpu(int dev, int n, long mem_mb, char *why,
				      unsigned long whylen)
{
	(void)dev;
	(void)n;
	(void)mem_mb;
	(void)why;
	(void)whylen;
	return SIGMA_KAT_UNAVAILABLE;
}
#endif

#ifdef __cplusplus
}
#endif
#endif /* SIGMA_PROBE_KAT_H */
