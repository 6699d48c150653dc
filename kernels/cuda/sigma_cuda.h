/*
 * sigma_cuda.h - the C view of the CUDA path. Every function exists only when
 * configure found the CUDA toolkit (HAVE_CUDA); callers include this header
 * and get no-op stubs otherwise.
 */
#ifndef SIGMA_CUDA_H
#define SIGMA_CUDA_H

#ifdef __cplusplus
extern "C" {
#endif

#ifdef HAVE_CUDA
/*
 * Number of CUDA devices, 0 when there is no driver or no device (never an
 * error: a CPU node simply has none). name receives the runtime's message
 * when it cannot tell.
 */
int sigma_cuda_device_count(char *why, unsigned long whylen);
#else
static inline int sigma_cuda_device_count(char *why, unsigned long whylen)
{
	(void)why;
	(void)whylen;
	return 0;
}
#endif

#ifdef __cplusplus
}
#endif
#endif /* SIGMA_CUDA_H */
