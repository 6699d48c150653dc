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
 *   SIGMA_CUDA_ATT_AUTO    the default: cuBLAS under bf16 while one
 *                          layer's T x T buffer is at most 4 GiB, else
 *                          fused; cuBLAS where the fused kernels cannot go
 *                          (cuda_plan.h has the limits)
 */
enum sigma_cuda_attention {
	SIGMA_CUDA_ATT_FUSED = 0,
	SIGMA_CUDA_ATT_CUBLAS = 1,
	SIGMA_CUDA_ATT_AUTO = 2,
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
 * else the node-local rank modulo their number (the bootstrap's, given
 * by sigma_cuda_set_local_rank; else the launcher's variables, in the
 * order of cuda_plan.h), else the first.
 */
extern const struct sigma_ops sigma_ops_cuda;

/*
 * The node-local rank that init is to place this process by (the PMIx
 * bootstrap's, trainer/comm/boot.h); -1 (the default) for none known.
 * Call before init; later calls do not move a device already chosen.
 */
void sigma_cuda_set_local_rank(int local_rank);
/*
 * The device init would take among n visible, from the settings above
 * and the environment; -1 with err (len bytes) for a SIGMA_CUDA_DEVICE
 * out of range. Makes no CUDA call.
 */
int sigma_cuda_pick_device(int n, char *err, size_t len);

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
 * Select the attention kernels (default auto; the environment variable
 * SIGMA_CUDA_ATTENTION=fused|cublas|auto sets it at init). 0 or -EINVAL.
 * The model asks which one a shape gets when it allocates
 * (attention_plan of ops.h): select before that.
 */
int sigma_cuda_set_attention(enum sigma_cuda_attention a);
enum sigma_cuda_attention sigma_cuda_get_attention(void);
/* Parse "fp32" or "bf16"; 0 or -EINVAL. */
int sigma_cuda_parse_precision(const char *s, enum sigma_cuda_precision *p);

/*
 * The device and streams of the collectives (trainer/comm/comm_nccl.c),
 * which make no CUDA call of their own (kernels/cuda/device.cu). The
 * device is made current once, on the calling thread: by sigma_ops_cuda's
 * init, or here in a program without the ops (sigma-comm-test).
 * Streams and events are opaque pointers to cudaStream_t and cudaEvent_t
 * values; NULL is the legacy default stream. A call that fails returns
 * -EIO and leaves the runtime's message for sigma_cuda_error().
 */

/*
 * This process's device: the one the ops' init made current; else want
 * (>= 0) or local_rank modulo the visible devices, made current now.
 * Returns the device, or -ENODEV (no device, or want beyond the visible
 * ones), -EINVAL (want is not the ops' device), -EIO; why (len bytes)
 * says which.
 */
int sigma_cuda_device_claim(int want, int local_rank, char *why,
			    size_t len);
/* The stream every op of sigma_ops_cuda runs on. */
void *sigma_cuda_stream(void);
/* The runtime's message of the last failed call here. */
const char *sigma_cuda_error(void);
/* A stream that does not wait for the legacy default one
 * (cudaStreamNonBlocking) and an event without timing to order it. */
int sigma_cuda_side_create(void **stream, void **event);
void sigma_cuda_side_destroy(void *stream, void *event);
/* Make stream wait for what is queued on after now (through event),
 * without stopping the host. */
int sigma_cuda_side_after(void *stream, void *event, void *after);
/* 0 when everything queued on stream is done, -EAGAIN while not, or
 * -EIO. */
int sigma_cuda_side_query(void *stream);
/* n bytes of device memory (NULL on failure), zeroed with zalloc; and
 * its release. */
void *sigma_cuda_malloc(size_t n);
void *sigma_cuda_zalloc(size_t n);
void sigma_cuda_release(void *p);
/* Copies between device and host memory, done when they return. */
int sigma_cuda_to_host(void *host, const void *src, size_t n);
int sigma_cuda_from_host(void *dst, const void *host, size_t n);
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
	return SIGMA_CUDA_ATT_AUTO;
}

static inline void sigma_cuda_set_local_rank(int local_rank)
{
	(void)local_rank;
}

static inline int sigma_cuda_pick_device(int n, char *err, size_t len)
{
	(void)n;
	(void)err;
	(void)len;
	return -1;
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
