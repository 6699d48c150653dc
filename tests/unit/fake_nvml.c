/*
 * fake_nvml.c - a stand-in for libnvidia-ml.so.1 for the probe's NVML
 * backend tests. It exports the NVML calls the probe loads and answers
 * from the file named by $FAKE_NVML (key=value lines):
 *
 *   init=0            nvmlInit_v2's return code (9 = driver not loaded)
 *   count=2           number of GPUs
 *   gpuN.temp_c=..    gpuN.power_w=..  gpuN.power_peak_w=..  gpuN.limit_w=..
 *   gpuN.ecc_corrected=..  gpuN.ecc_uncorrected=..  gpuN.retired=..
 *   gpuN.retired_pending=0|1  gpuN.remap_pending=0|1  gpuN.remap_failed=0|1
 *   gpuN.throttle=0x..    gpuN.no_ecc=1 (ECC calls say "not supported")
 *   gpuN.bad_handle=1 (the GPU cannot be opened)
 *
 * Power readings alternate: the first sample of each GPU is its peak.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAKE_MAX 8

struct fake_gpu {
	unsigned int temp, power_mw, peak_mw, limit_mw, retired, rpending;
	unsigned int remap_pending, remap_failed, no_ecc, samples, bad_handle;
	unsigned long long ce, ue, throttle;
};

static struct fake_gpu gpus[FAKE_MAX];
static int fake_init_rc, fake_count;
static int fake_loaded;

static void fake_load(void)
{
	const char *path = getenv("FAKE_NVML");
	char line[256];
	FILE *f;

	if (fake_loaded)
		return;
	fake_loaded = 1;
	memset(gpus, 0, sizeof(gpus));
	if (!path || !(f = fopen(path, "r")))
		return;
	while (fgets(line, sizeof(line), f)) {
		char key[64];
		unsigned long long v;
		int g;

		if (sscanf(line, "init=%d", &fake_init_rc) == 1 ||
		    sscanf(line, "count=%d", &fake_count) == 1)
			continue;
		if (sscanf(line, "gpu%d.%63[a-z_]=%lli", &g, key,
			   (long long *)&v) != 3 ||
		    g < 0 || g >= FAKE_MAX)
			continue;
		if (!strcmp(key, "temp_c"))
			gpus[g].temp = (unsigned)v;
		else if (!strcmp(key, "power_w"))
			gpus[g].power_mw = (unsigned)v * 1000;
		else if (!strcmp(key, "power_peak_w"))
			gpus[g].peak_mw = (unsigned)v * 1000;
		else if (!strcmp(key, "limit_w"))
			gpus[g].limit_mw = (unsigned)v * 1000;
		else if (!strcmp(key, "ecc_corrected"))
			gpus[g].ce = v;
		else if (!strcmp(key, "ecc_uncorrected"))
			gpus[g].ue = v;
		else if (!strcmp(key, "retired"))
			gpus[g].retired = (unsigned)v;
		else if (!strcmp(key, "retired_pending"))
			gpus[g].rpending = (unsigned)v;
		else if (!strcmp(key, "remap_pending"))
			gpus[g].remap_pending = (unsigned)v;
		else if (!strcmp(key, "remap_failed"))
			gpus[g].remap_failed = (unsigned)v;
		else if (!strcmp(key, "throttle"))
			gpus[g].throttle = v;
		else if (!strcmp(key, "no_ecc"))
			gpus[g].no_ecc = (unsigned)v;
		else if (!strcmp(key, "bad_handle"))
			gpus[g].bad_handle = (unsigned)v;
	}
	fclose(f);
}

typedef struct fake_gpu *nvmlDevice_t;

/* the NVML ABI: every call returns an int code, 0 = success */
int nvmlInit_v2(void);
int nvmlShutdown(void);
const char *nvmlErrorString(int rc);
int nvmlDeviceGetCount_v2(unsigned int *n);
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *dev);
int nvmlDeviceGetTemperature(nvmlDevice_t dev, int sensor, unsigned int *t);
int nvmlDeviceGetPowerUsage(nvmlDevice_t dev, unsigned int *mw);
int nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t dev, unsigned int *mw);
int nvmlDeviceGetTotalEccErrors(nvmlDevice_t dev, int type, int counter,
				unsigned long long *n);
int nvmlDeviceGetRetiredPages(nvmlDevice_t dev, int cause, unsigned int *n,
			      unsigned long long *addrs);
int nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t dev, int *pending);
int nvmlDeviceGetRemappedRows(nvmlDevice_t dev, unsigned int *corr,
			      unsigned int *unc, unsigned int *pending,
			      unsigned int *failed);
int nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t dev,
					      unsigned long long *reasons);

int nvmlInit_v2(void)
{
	fake_loaded = 0;
	fake_load();
	return fake_init_rc;
}

int nvmlShutdown(void)
{
	return 0;
}

const char *nvmlErrorString(int rc)
{
	return rc == 9 ? "Driver Not Loaded" : "Unknown Error";
}

int nvmlDeviceGetCount_v2(unsigned int *n)
{
	*n = (unsigned)fake_count;
	return 0;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *dev)
{
	if (i >= FAKE_MAX || (int)i >= fake_count || gpus[i].bad_handle)
		return 2; /* invalid argument */
	*dev = &gpus[i];
	return 0;
}

int nvmlDeviceGetTemperature(nvmlDevice_t dev, int sensor, unsigned int *t)
{
	*t = dev->temp;
	return sensor == 0 ? 0 : 2;
}

int nvmlDeviceGetPowerUsage(nvmlDevice_t dev, unsigned int *mw)
{
	*mw = (dev->samples++ == 0 && dev->peak_mw) ? dev->peak_mw
						    : dev->power_mw;
	return 0;
}

int nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t dev, unsigned int *mw)
{
	*mw = dev->limit_mw;
	return dev->limit_mw ? 0 : 3;
}

int nvmlDeviceGetTotalEccErrors(nvmlDevice_t dev, int type, int counter,
				unsigned long long *n)
{
	if (dev->no_ecc)
		return 3; /* not supported */
	*n = type == 0 ? dev->ce : dev->ue;
	return 0;
}

int nvmlDeviceGetRetiredPages(nvmlDevice_t dev, int cause, unsigned int *n,
			      unsigned long long *addrs)
{
	unsigned int have = cause == 1 ? dev->retired : 0;

	(void)addrs;
	if (*n < have) {
		*n = have;
		return 7; /* insufficient size */
	}
	*n = have;
	return 0;
}

int nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t dev, int *pending)
{
	*pending = (int)dev->rpending;
	return 0;
}

int nvmlDeviceGetRemappedRows(nvmlDevice_t dev, unsigned int *corr,
			      unsigned int *unc, unsigned int *pending,
			      unsigned int *failed)
{
	*corr = 0;
	*unc = 0;
	*pending = dev->remap_pending;
	*failed = dev->remap_failed;
	return 0;
}

int nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t dev,
					      unsigned long long *reasons)
{
	*reasons = dev->throttle;
	return 0;
}
