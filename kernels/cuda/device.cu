/*
 * device.cu - the CUDA device of this process and what the collectives
 * need of it (sigma_cuda.h): device discovery; the one place that makes a
 * device current (sigma_ops_cuda's init through cuda_device_own, or
 * sigma_cuda_device_claim in a program without the ops); the ops' stream;
 * and the side streams, events and memory of trainer/comm/comm_nccl.c,
 * which makes no CUDA call of its own.
 *
 * A failed call returns -EIO (-EAGAIN: a stream still busy) and leaves
 * the runtime's message for sigma_cuda_error(). The runtime's last error
 * is left as the failed call set it, so that the ops' next launch check
 * reports it too.
 */
#include <cerrno>
#include <cstdio>

#include "cuda_internal.h"

#define HAVE_CUDA 1
#include "sigma_cuda.h"

static int cuda_owned = -1; /* the device made current here, -1: none */
static const char *cuda_err = "no error";

/* e's message for sigma_cuda_error, and -EIO */
static int cuda_failed(cudaError_t e)
{
	cuda_err = cudaGetErrorString(e);
	return -EIO;
}

extern "C" int sigma_cuda_device_count(char *why, unsigned long whylen)
{
	int n = 0;
	cudaError_t rc = cudaGetDeviceCount(&n);

	if (rc != cudaSuccess) {
		if (why && whylen)
			snprintf(why, whylen, "%s", cudaGetErrorString(rc));
		return 0;
	}
	return n;
}

int cuda_device_own(int dev)
{
	if (cudaSetDevice(dev) != cudaSuccess) {
		(void)cudaGetLastError();
		return -ENODEV;
	}
	cuda_owned = dev;
	return 0;
}

extern "C" int sigma_cuda_device_claim(int want, int local_rank, char *why,
				       size_t len)
{
	cudaError_t e;
	int n = 0, dev;

	e = cudaGetDeviceCount(&n);
	if (e != cudaSuccess || n < 1) {
		snprintf(why, len, "no CUDA device (%s)",
			 e != cudaSuccess ? cudaGetErrorString(e)
					  : "0 devices");
		return -ENODEV;
	}
	if (cuda_owned >= 0) {
		if (want >= 0 && want != cuda_owned) {
			snprintf(why, len,
				 "device %d asked for, this process computes on device %d",
				 want, cuda_owned);
			return -EINVAL;
		}
		return cuda_owned;
	}
	dev = want >= 0 ? want : local_rank % n;
	if (dev >= n) {
		snprintf(why, len, "device %d asked for, %d visible", dev, n);
		return -ENODEV;
	}
	e = cudaSetDevice(dev);
	if (e != cudaSuccess) {
		snprintf(why, len, "cudaSetDevice(%d): %s", dev,
			 cudaGetErrorString(e));
		return -EIO;
	}
	cuda_owned = dev;
	return dev;
}

extern "C" void *sigma_cuda_stream(void)
{
	return (void *)CUDA_STREAM;
}

extern "C" const char *sigma_cuda_error(void)
{
	return cuda_err;
}

extern "C" int sigma_cuda_side_create(void **stream, void **event)
{
	cudaStream_t s;
	cudaEvent_t ev;
	cudaError_t e;

	e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
	if (e != cudaSuccess)
		return cuda_failed(e);
	e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
	if (e != cudaSuccess) {
		cudaStreamDestroy(s);
		return cuda_failed(e);
	}
	*stream = (void *)s;
	*event = (void *)ev;
	return 0;
}

extern "C" void sigma_cuda_side_destroy(void *stream, void *event)
{
	cudaEventDestroy((cudaEvent_t)event);
	cudaStreamDestroy((cudaStream_t)stream);
}

extern "C" int sigma_cuda_side_after(void *stream, void *event, void *after)
{
	cudaError_t e = cudaEventRecord((cudaEvent_t)event,
					(cudaStream_t)after);

	if (e == cudaSuccess)
		e = cudaStreamWaitEvent((cudaStream_t)stream,
					(cudaEvent_t)event, 0);
	return e == cudaSuccess ? 0 : cuda_failed(e);
}

extern "C" int sigma_cuda_side_query(void *stream)
{
	cudaError_t e = cudaStreamQuery((cudaStream_t)stream);

	if (e == cudaSuccess)
		return 0;
	if (e == cudaErrorNotReady)
		return -EAGAIN;
	return cuda_failed(e);
}

extern "C" void *sigma_cuda_malloc(size_t n)
{
	void *p = NULL;

	if (cudaMalloc(&p, n) != cudaSuccess)
		return NULL;
	return p;
}

extern "C" void *sigma_cuda_zalloc(size_t n)
{
	void *p = sigma_cuda_malloc(n);

	if (p && cudaMemset(p, 0, n) != cudaSuccess) {
		cudaFree(p);
		return NULL;
	}
	return p;
}

extern "C" void sigma_cuda_release(void *p)
{
	cudaFree(p);
}

extern "C" int sigma_cuda_to_host(void *host, const void *src, size_t n)
{
	cudaError_t e = cudaMemcpy(host, src, n, cudaMemcpyDeviceToHost);

	return e == cudaSuccess ? 0 : cuda_failed(e);
}

extern "C" int sigma_cuda_from_host(void *dst, const void *host, size_t n)
{
	cudaError_t e = cudaMemcpy(dst, host, n, cudaMemcpyHostToDevice);

	return e == cudaSuccess ? 0 : cuda_failed(e);
}
