/*
 * select.c - the op table for a device name.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "ops.h"
#include "bf16.h"
#include "select.h"
#include "cuda/sigma_cuda.h"

const struct sigma_ops *sigma_ops_select(const char *device, char *err,
					 size_t errlen)
{
	enum sigma_cuda_precision prec = SIGMA_CUDA_FP32;
	char why[256] = "", none[1];
	const char *p;

	if (!err || !errlen) { /* the caller wants no message */
		err = none;
		errlen = sizeof(none);
	}
	if (!device || !strcmp(device, "cpu"))
		return &sigma_ops_cpu;
	if (strncmp(device, "cuda", 4) != 0 ||
	    (device[4] != '\0' && device[4] != ':')) {
		snprintf(
		    err, errlen,
		    "unknown device '%s': expected cpu, cuda, cuda:fp32 or cuda:bf16",
		    device);
		return NULL;
	}
	p = device[4] == ':' ? device + 5 : NULL;
	if (!sigma_cuda_ops()) {
		snprintf(
		    err, errlen,
		    "device '%s': this build has no CUDA path (configure found no CUDA toolkit)",
		    device);
		return NULL;
	}
	if (p && sigma_cuda_parse_precision(p, &prec)) {
		snprintf(err, errlen,
			 "device '%s': unknown precision '%s' (fp32 or bf16)",
			 device, p);
		return NULL;
	}
	if (sigma_cuda_device_count(why, sizeof(why)) < 1) {
		snprintf(err, errlen, "device '%s': no CUDA device: %s", device,
			 why[0] ? why : "none visible");
		return NULL;
	}
	sigma_cuda_set_precision(prec);
	return sigma_cuda_ops();
}

void sigma_ops_set_local_rank(int local_rank)
{
	sigma_cuda_set_local_rank(local_rank);
}

const struct sigma_bf16 *sigma_bf16_select(const struct sigma_ops *ops)
{
	if (ops && ops == &sigma_ops_cpu)
		return &sigma_bf16_cpu;
	if (ops && ops == sigma_cuda_ops())
		return sigma_cuda_bf16();
	return NULL;
}

int sigma_ops_device(const struct sigma_ops *ops)
{
	if (ops && ops == sigma_cuda_ops())
		return sigma_cuda_device();
	return -1;
}

int sigma_ops_device_id(const struct sigma_ops *ops, char *buf, size_t len)
{
	if (ops && ops == sigma_cuda_ops())
		return sigma_cuda_device_pci(buf, len);
	return -ENODEV;
}
