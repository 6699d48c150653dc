/*
 * sigma_cuda.h - the C view of the CUDA path. Every function exists only when
 * configure found the CUDA toolkit (HAVE_CUDA); callers include this header
 * and get no-op stubs otherwise.
 */
#ifndef SIGMA_CUDA_H
#define SIGMA_CUDA_H

#include <errno.h>
#include <stddef.h>

#include "ops.h"
#include "bf16.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Precision of the CUDA path's matrix products (every other op is fp32):
 *   SIGMA_CUDA_FP32  fp32 inputs, fp32 arithmetic (no TF32): the reference
 *   SIGMA_CUDA_BF16  inputs rounded to bf16 on the tensor cores, fp32
 *                    accumulation and fp32 outputs
 */
enum sigma_cuda_precision {
	SIGMA_CUDA_FP32 = 0,
	SIGMA_CUDA_BF16 = 1,
};

/*
 * The CUDA path's attention:
 *   SIGMA_CUDA_ATT_FUSED   the fused memory-efficient kernels (attention.cu):
 *                          fp32 on the CUDA cores, no T x T working set
 *   SIGMA_CUDA_ATT_CUBLAS  the CPU algorithm with cuBLAS batched products
 *                          (tensor cores, the matmul precision) over the
 *                          T x T att and scratch buffers of ops.h
 */
enum sigma_cuda_attention {
	SIGMA_CUDA_ATT_FUSED = 0,
	SIGMA_CUDA_ATT_CUBLAS = 1,
};

#ifdef HAVE_CUDA
/*
 * Number of CUDA devices, 0 when there is no driver or no device (never an
 * error: a CPU node simply has none). name receives the runtime's message
 * when it cannot tell.
 */
int sigma_cuda_device_count(char *why, unsigned long whylen);

/*
 * The CUDA op table (kernels/cuda/ops_cuda.cu): device memory, cuBLAS for
 * the matrix products, CUDA C kernels for the rest. Call its init before
 * any other op. init picks one of the visible devices: SIGMA_CUDA_DEVICE,
 * else the node-local rank (SLURM_LOCALID, LOCAL_RANK,
 * OMPI_COMM_WORLD_LOCAL_RANK) modulo their number,
 * else the first.
 */
extern const struct sigma_ops sigma_ops_cuda;

/* The device sigma_ops_cuda.init chose, -1 before it ran. */
int sigma_cuda_device(void);
/* Its PCI address ("0000:3b:00.0"), which names the physical GPU whatever
 * CUDA_VISIBLE_DEVICES renumbers; 0 or -ENODEV. */
int sigma_cuda_device_pci(char *buf, size_t len);

/* The CUDA table, or NULL in a build without the CUDA path. */
static inline const struct sigma_ops *sigma_cuda_ops(void)
{
	return &sigma_ops_cuda;
}

/*
 * The CUDA table with bf16 forward products, for the guardrails'
 * --precision=bf16 (the semantics of sigma_bf16_cpu, kernels/bf16.h:
 * inputs and weights rounded to bf16, fp32 accumulation, outputs rounded
 * to bf16, non-finite outputs counted). begin() must precede each product
 * whose overflows are to be counted; the count is read back to the host.
 */
extern const struct sigma_bf16 sigma_bf16_cuda;

/* sigma_bf16_cuda, or NULL in a build without the CUDA path. */
static inline const struct sigma_bf16 *sigma_cuda_bf16(void)
{
	return &sigma_bf16_cuda;
}

/*
 * Select the precision of later matrix products (default fp32; the
 * environment variable SIGMA_CUDA_PRECISION=fp32|bf16 sets it at init).
 * 0, or -EINVAL for an unknown value.
 */
int sigma_cuda_set_precision(enum sigma_cuda_precision p);
enum sigma_cuda_precision sigma_cuda_get_precision(void);
/*
 * Select the attention kernels (default fused; the environment variable
 * SIGMA_CUDA_ATTENTION=fused|cublas sets it at init). 0 or -EINVAL.
 */
int sigma_cuda_set_attention(enum sigma_cuda_attention a);
enum sigma_cuda_attention sigma_cuda_get_attention(void);
/* Parse "fp32" or "bf16"; 0 or -EINVAL. */
int sigma_cuda_parse_precision(const char *s, enum sigma_cuda_precision *p);
#else
static inline const struct sigma_ops *sigma_cuda_ops(void)
{
	return NULL;
}

static inline const struct sigma_bf16 *sigma_cuda_bf16(void)
{
	return NULL;
}

static inline int sigma_cuda_set_precision(enum sigma_cuda_precision p)
{
	(void)p;
	return -ENOSYS;
}

static inline enum sigma_cuda_precision sigma_cuda_get_precision(void)
{
	return SIGMA_CUDA_FP32;
}

static inline int sigma_cuda_set_attention(enum sigma_cuda_attention a)
{
	(void)a;
	return -ENOSYS;
}

static inline enum sigma_cuda_attention sigma_cuda_get_attention(void)
{
	return SIGMA_CUDA_ATT_FUSED;
}

static inline int sigma_cuda_parse_precision(const char *s,
					     enum sigma_cuda_precision *p)
{
	(void)s;
	(void)p;
	return -ENOSYS;
}

static inline int sigma_cuda_device(void)
{
	return -1;
}

static inline int sigma_cuda_device_pci(char *buf, size_t len)
{
	(void)buf;
	(void)len;
	return -ENODEV;
}

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
