/*
 * nvml.c - NVIDIA GPUs through NVML, loaded with dlopen at run time so that
 * one binary runs on GPU and CPU nodes alike: no library, no driver or no
 * device all mean "no GPUs", said in the summary, never an error.
 *
 * Per GPU: temperature; power draw sampled power_samples times (mean and
 * peak, the peak judged against power_spike_ratio x the enforced limit);
 * volatile ECC corrected and uncorrected counts; retired pages (and
 * pending retirement); remapped rows (pending, failed); hardware throttle
 * reasons. A reading the GPU does not support is left out.
 */
#include "config.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "sigma.h"
#include "probe.h"

/* the few NVML types used, as nvml.h defines them */
typedef int nvml_return_t;
typedef struct nvml_device *nvml_device_t;
#define NVML_SUCCESS						  0
#define NVML_ERROR_INSUFFICIENT_SIZE				  7
#define NVML_TEMPERATURE_GPU					  0
#define NVML_MEMORY_ERROR_TYPE_CORRECTED			  0
#define NVML_MEMORY_ERROR_TYPE_UNCORRECTED			  1
#define NVML_VOLATILE_ECC					  0
#define NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS 0
#define NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR		  1
/* HwSlowdown | SwThermalSlowdown | HwThermalSlowdown | HwPowerBrakeSlowdown */
#define NVML_THROTTLE_HW_MASK 0xe8ULL

struct nvml_api {
	void *dl;
	nvml_return_t (*init)(void);
	nvml_return_t (*shutdown)(void);
	const char *(*error_string)(nvml_return_t);
	nvml_return_t (*count)(unsigned int *);
	nvml_return_t (*handle)(unsigned int, nvml_device_t *);
	nvml_return_t (*temperature)(nvml_device_t, int, unsigned int *);
	nvml_return_t (*power)(nvml_device_t, unsigned int *);
	nvml_return_t (*power_limit)(nvml_device_t, unsigned int *);
	nvml_return_t (*ecc)(nvml_device_t, int, int, unsigned long long *);
	nvml_return_t (*retired)(nvml_device_t, int, unsigned int *,
				 unsigned long long *);
	nvml_return_t (*retired_pending)(nvml_device_t, int *);
	nvml_return_t (*remapped)(nvml_device_t, unsigned int *, unsigned int *,
				  unsigned int *, unsigned int *);
	nvml_return_t (*throttle)(nvml_device_t, unsigned long long *);
};

/* required symbols fail the load; optional ones may be NULL */
static int nvml_load(struct nvml_api *api, const char *lib, char *why,
		     size_t whylen)
{
	memset(api, 0, sizeof(*api));
	api->dl = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (!api->dl) {
		snprintf(why, whylen, "no NVML: %s", dlerror());
		return -1;
	}
#define SYM(field, name) (*(void **)&api->field = dlsym(api->dl, name))
	SYM(init, "nvmlInit_v2");
	SYM(shutdown, "nvmlShutdown");
	SYM(error_string, "nvmlErrorString");
	SYM(count, "nvmlDeviceGetCount_v2");
	SYM(handle, "nvmlDeviceGetHandleByIndex_v2");
	SYM(temperature, "nvmlDeviceGetTemperature");
	SYM(power, "nvmlDeviceGetPowerUsage");
	SYM(power_limit, "nvmlDeviceGetEnforcedPowerLimit");
	SYM(ecc, "nvmlDeviceGetTotalEccErrors");
	SYM(retired, "nvmlDeviceGetRetiredPages");
	SYM(retired_pending, "nvmlDeviceGetRetiredPagesPendingStatus");
	SYM(remapped, "nvmlDeviceGetRemappedRows");
	SYM(throttle, "nvmlDeviceGetCurrentClocksThrottleReasons");
#undef SYM
	if (!api->init || !api->shutdown || !api->count || !api->handle) {
		snprintf(why, whylen,
			 "%.100s lacks nvmlInit_v2 or device calls", lib);
		dlclose(api->dl);
		api->dl = NULL;
		return -1;
	}
	return 0;
}

static const char *nvml_err(const struct nvml_api *api, nvml_return_t rc)
{
	const char *s = api->error_string ? api->error_string(rc) : NULL;

	return s ? s : "NVML error";
}

static void gpu_add(const struct probe_conf *conf, struct probe_report *rep,
		    const char *comp, const char *key, double value)
{
	double warn, fail;
	const char *unit;
	int sense;

	probe_thresholds(conf, key, &sense, &warn, &fail, &unit);
	probe_add(rep, comp, key, value, sense, warn, fail, unit);
}

static void nvml_gpu(const struct nvml_api *api, const struct probe_conf *conf,
		     struct probe_report *rep, nvml_device_t dev,
		     const char *comp)
{
	unsigned long long ull;
	unsigned int u, corr, unc, pend, failed;
	int pending;

	if (api->temperature &&
	    api->temperature(dev, NVML_TEMPERATURE_GPU, &u) == NVML_SUCCESS)
		gpu_add(conf, rep, comp, "temp_c", u);
	if (api->ecc) {
		if (api->ecc(dev, NVML_MEMORY_ERROR_TYPE_CORRECTED,
			     NVML_VOLATILE_ECC, &ull) == NVML_SUCCESS)
			gpu_add(conf, rep, comp, "ecc_corrected", (double)ull);
		if (api->ecc(dev, NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
			     NVML_VOLATILE_ECC, &ull) == NVML_SUCCESS)
			gpu_add(conf, rep, comp, "ecc_uncorrected",
				(double)ull);
	}
	if (api->retired) {
		unsigned int total = 0, n;
		bool ok = true;

		for (int cause = 0; cause < 2 && ok; cause++) {
			nvml_return_t rc;

			n = 0;
			rc = api->retired(dev, cause, &n, NULL);
			ok = rc == NVML_SUCCESS ||
			     rc == NVML_ERROR_INSUFFICIENT_SIZE;
			total += n;
		}
		if (ok)
			gpu_add(conf, rep, comp, "retired_pages", total);
	}
	if (api->retired_pending &&
	    api->retired_pending(dev, &pending) == NVML_SUCCESS)
		gpu_add(conf, rep, comp, "retired_pending", pending ? 1 : 0);
	if (api->remapped &&
	    api->remapped(dev, &corr, &unc, &pend, &failed) == NVML_SUCCESS) {
		gpu_add(conf, rep, comp, "remap_pending", pend ? 1 : 0);
		gpu_add(conf, rep, comp, "remap_failed", failed ? 1 : 0);
	}
	if (api->throttle && api->throttle(dev, &ull) == NVML_SUCCESS)
		gpu_add(conf, rep, comp, "throttle_hw",
			(ull & NVML_THROTTLE_HW_MASK) ? 1 : 0);
}

/* sample every GPU's power together: mean and peak per GPU */
static void nvml_power(const struct nvml_api *api,
		       const struct probe_conf *conf, struct probe_report *rep,
		       nvml_device_t *devs, int n)
{
	double sum[PROBE_MAX_GPUS] = {0}, peak[PROBE_MAX_GPUS] = {0};
	int got[PROBE_MAX_GPUS] = {0};
	long samples = rep->level == PROBE_FULL ? conf->power_samples * 4
						: conf->power_samples;
	struct timespec gap = {0, 20 * 1000 * 1000};

	if (!api->power)
		return;
	for (long s = 0; s < samples; s++) {
		if (s)
			nanosleep(&gap, NULL);
		for (int g = 0; g < n; g++) {
			unsigned int mw;

			if (!devs[g] ||
			    api->power(devs[g], &mw) != NVML_SUCCESS)
				continue;
			sum[g] += mw / 1000.0;
			if (mw / 1000.0 > peak[g])
				peak[g] = mw / 1000.0;
			got[g]++;
		}
	}
	for (int g = 0; g < n; g++) {
		char comp[16];
		unsigned int limit_mw;
		struct probe_reading *r;

		if (!got[g] || !devs[g])
			continue;
		snprintf(comp, sizeof(comp), "gpu%d", g);
		gpu_add(conf, rep, comp, "power_w", sum[g] / got[g]);
		r = probe_add(rep, comp, "power_spike_w", peak[g],
			      PROBE_HIGH_BAD, conf->power_spike_warn_w, NAN,
			      "W");
		if (api->power_limit &&
		    api->power_limit(devs[g], &limit_mw) == NVML_SUCCESS &&
		    limit_mw > 0) {
			gpu_add(conf, rep, comp, "power_limit_w",
				limit_mw / 1000.0);
			if (r)
				r->warn =
				    limit_mw / 1000.0 * conf->power_spike_ratio;
		}
	}
}

int probe_nvml(const struct probe_conf *conf, struct probe_report *rep)
{
	nvml_device_t devs[PROBE_MAX_GPUS];
	struct nvml_api api;
	unsigned int count = 0;
	nvml_return_t rc;
	int n = 0;

	rep->ngpus = 0;
	if (!conf->gpus) {
		snprintf(rep->gpu_note, sizeof(rep->gpu_note),
			 "gpus=no in sigma.conf");
		return 0;
	}
	if (nvml_load(&api, conf->nvml_library, rep->gpu_note,
		      sizeof(rep->gpu_note)) < 0)
		return 0;
	rc = api.init();
	if (rc != NVML_SUCCESS) {
		snprintf(rep->gpu_note, sizeof(rep->gpu_note), "NVML: %s",
			 nvml_err(&api, rc));
		goto out_close;
	}
	rc = api.count(&count);
	if (rc != NVML_SUCCESS || count == 0) {
		snprintf(rep->gpu_note, sizeof(rep->gpu_note), "NVML: %s",
			 rc != NVML_SUCCESS ? nvml_err(&api, rc)
					    : "no devices");
		goto out_shutdown;
	}
	if (count > PROBE_MAX_GPUS)
		count = PROBE_MAX_GPUS;
	for (unsigned int i = 0; i < count; i++) {
		char comp[16];

		snprintf(comp, sizeof(comp), "gpu%u", i);
		if (!probe_gpu_wanted(conf, (int)i)) {
			devs[i] = NULL; /* not the job's: not probed */
			n++;
			continue;
		}
		rc = api.handle(i, &devs[i]);
		if (rc != NVML_SUCCESS) {
			/* a GPU NVML cannot even open is a failing GPU */
			sigma_error("%s: %s", comp, nvml_err(&api, rc));
			probe_add(rep, comp, "compute", 0, PROBE_LOW_BAD, NAN,
				  1, "");
			devs[i] = NULL;
			n++;
			continue;
		}
		nvml_gpu(&api, conf, rep, devs[i], comp);
		n++;
	}
	nvml_power(&api, conf, rep, devs, n);
	rep->ngpus = (int)count;
out_shutdown:
	api.shutdown();
out_close:
	dlclose(api.dl);
	return 0;
}
