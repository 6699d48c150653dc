/*
 * device.cu - device discovery for the CUDA path.
 */
#include <cstdio>
#include <cuda_runtime.h>

#define HAVE_CUDA 1
#include "sigma_cuda.h"

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
