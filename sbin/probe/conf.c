/*
 * conf.c - the probe's keys of sigma.conf. Every key is checked strictly
 * (an unknown key or bad value is an error naming file and line); keys
 * starting with "sigmad_" belong to the controller and are skipped without
 * judging them.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "sigma.h"
#include "probe.h"

#ifndef SIGMA_STATEDIR
#define SIGMA_STATEDIR "/var/lib/sigma"
#endif

void probe_conf_init(struct probe_conf *conf)
{
	memset(conf, 0, sizeof(*conf));
	sigma_strlcpy(conf->sysfs, "/sys", sizeof(conf->sysfs));
	sigma_strlcpy(conf->procfs, "/proc", sizeof(conf->procfs));
	sigma_strlcpy(conf->nvml_library, "libnvidia-ml.so.1",
		      sizeof(conf->nvml_library));
	sigma_strlcpy(conf->state_dir, SIGMA_STATEDIR, sizeof(conf->state_dir));
	conf->gpus = true;
	conf->drain_resume = false;
	conf->temp_warn_c = 85;
	conf->temp_fail_c = 95;
	conf->ecc_uncorrected_fail = 1;
	conf->ecc_corrected_rate_warn = 20;
	conf->retired_pages_warn = 1;
	conf->retired_pages_fail = 60;
	conf->power_spike_ratio = 1.10;
	conf->power_spike_warn_w = 750;
	conf->mem_avail_warn_mb = 512;
	conf->mem_avail_fail_mb = 128;
	conf->disk_free_warn_gb = 10;
	conf->disk_free_fail_gb = 1;
	conf->quick_gemm_n = 64;
	conf->full_gemm_n = 384;
	conf->full_mem_mb = 256;
	conf->gpu_mem_mb = 1024;
	conf->power_samples = 5;
	conf->warn_confirm = 2;
}

enum conf_type {
	CONF_PATH,
	CONF_PATH_OR_EMPTY,
	CONF_DOUBLE,
	CONF_LONG,
	CONF_BOOL
};

struct conf_key {
	const char *name;
	int type;
	size_t off;
	double min, max;
};

#define K(name, type, field, min, max)                                         \
	{                                                                      \
		name, type, offsetof(struct probe_conf, field), min, max       \
	}

static const struct conf_key conf_keys[] = {
    K("inject_dir", CONF_PATH_OR_EMPTY, inject_dir, 0, 0),
    K("sysfs", CONF_PATH, sysfs, 0, 0),
    K("procfs", CONF_PATH, procfs, 0, 0),
    K("nvml_library", CONF_PATH, nvml_library, 0, 0),
    K("state_dir", CONF_PATH_OR_EMPTY, state_dir, 0, 0),
    K("ckpt_root", CONF_PATH_OR_EMPTY, ckpt_root, 0, 0),
    K("slurm_conf", CONF_PATH_OR_EMPTY, slurm_conf, 0, 0),
    K("gpus", CONF_BOOL, gpus, 0, 0),
    K("drain_resume", CONF_BOOL, drain_resume, 0, 0),
    K("temp_warn_c", CONF_DOUBLE, temp_warn_c, 0, 200),
    K("temp_fail_c", CONF_DOUBLE, temp_fail_c, 0, 200),
    K("ecc_uncorrected_fail", CONF_DOUBLE, ecc_uncorrected_fail, 1, 1e12),
    K("ecc_corrected_rate_warn", CONF_DOUBLE, ecc_corrected_rate_warn, 0, 1e12),
    K("retired_pages_warn", CONF_DOUBLE, retired_pages_warn, 1, 1e6),
    K("retired_pages_fail", CONF_DOUBLE, retired_pages_fail, 1, 1e6),
    K("power_spike_ratio", CONF_DOUBLE, power_spike_ratio, 1, 10),
    K("power_spike_warn_w", CONF_DOUBLE, power_spike_warn_w, 1, 1e5),
    K("mem_avail_warn_mb", CONF_DOUBLE, mem_avail_warn_mb, 0, 1e9),
    K("mem_avail_fail_mb", CONF_DOUBLE, mem_avail_fail_mb, 0, 1e9),
    K("disk_free_warn_gb", CONF_DOUBLE, disk_free_warn_gb, 0, 1e9),
    K("disk_free_fail_gb", CONF_DOUBLE, disk_free_fail_gb, 0, 1e9),
    K("quick_gemm_n", CONF_LONG, quick_gemm_n, 8, 1024),
    K("full_gemm_n", CONF_LONG, full_gemm_n, 8, 4096),
    K("full_mem_mb", CONF_LONG, full_mem_mb, 0, 1 << 20),
    K("gpu_mem_mb", CONF_LONG, gpu_mem_mb, 0, 1 << 20),
    K("power_samples", CONF_LONG, power_samples, 1, 1000),
    K("warn_confirm", CONF_LONG, warn_confirm, 1, 100),
};

#define CONF_NKEYS (sizeof(conf_keys) / sizeof(conf_keys[0]))

static int conf_kv(const char *key, const char *value, void *arg, char *err,
		   size_t errlen)
{
	struct probe_conf *conf = arg;
	const struct conf_key *k = NULL;
	char *field;
	int rc;

	if (!strncmp(key, "sigmad_", 7))
		return 0; /* the controller's key */
	for (size_t i = 0; i < CONF_NKEYS; i++)
		if (!strcmp(conf_keys[i].name, key))
			k = &conf_keys[i];
	if (!k)
		return sigma_set_err(
		    err, errlen, EINVAL,
		    "unknown key '%s' (sigma-probe(8) lists the probe's keys)",
		    key);
	field = (char *)conf + k->off;
	switch (k->type) {
	case CONF_PATH:
	case CONF_PATH_OR_EMPTY:
		if (!value[0] && k->type == CONF_PATH_OR_EMPTY) {
			field[0] = '\0';
			return 0;
		}
		/* nvml_library may be a bare soname, looked up by dlopen */
		/* even nvml_library: dlopen("") would open the probe itself */
		if (value[0] != '/' && (!value[0] || strcmp(key, "nvml_library")))
			return sigma_set_err(err, errlen, EINVAL,
					     "%s=%s: expected an absolute path",
					     key, value);
		if (sigma_strlcpy(field, value, PATH_MAX) >= PATH_MAX)
			return sigma_set_err(err, errlen, ENAMETOOLONG,
					     "%s: path too long", key);
		return 0;
	case CONF_DOUBLE:
		rc = sigma_parse_double(value, k->min, k->max, (double *)field);
		if (rc < 0)
			return sigma_set_err(
			    err, errlen, EINVAL,
			    "%s=%s: expected a number from %g to %g", key,
			    value, k->min, k->max);
		return 0;
	case CONF_LONG:
		rc = sigma_parse_long(value, (long)k->min, (long)k->max,
				      (long *)field);
		if (rc < 0)
			return sigma_set_err(
			    err, errlen, EINVAL,
			    "%s=%s: expected a whole number from %ld to %ld",
			    key, value, (long)k->min, (long)k->max);
		return 0;
	case CONF_BOOL:
		if (sigma_parse_bool(value, (bool *)field) < 0)
			return sigma_set_err(err, errlen, EINVAL,
					     "%s=%s: expected yes or no", key,
					     value);
		return 0;
	}
	return sigma_set_err(err, errlen, EINVAL, "%s: bad key type", key);
}

static int conf_check(const struct probe_conf *conf, const char *name,
		      char *err, size_t errlen)
{
	if (conf->temp_warn_c > conf->temp_fail_c)
		return sigma_set_err(
		    err, errlen, EINVAL,
		    "%s: temp_warn_c (%g) above temp_fail_c (%g)", name,
		    conf->temp_warn_c, conf->temp_fail_c);
	if (conf->retired_pages_warn > conf->retired_pages_fail)
		return sigma_set_err(
		    err, errlen, EINVAL,
		    "%s: retired_pages_warn above retired_pages_fail", name);
	if (conf->mem_avail_warn_mb < conf->mem_avail_fail_mb)
		return sigma_set_err(
		    err, errlen, EINVAL,
		    "%s: mem_avail_warn_mb below mem_avail_fail_mb", name);
	if (conf->disk_free_warn_gb < conf->disk_free_fail_gb)
		return sigma_set_err(
		    err, errlen, EINVAL,
		    "%s: disk_free_warn_gb below disk_free_fail_gb", name);
	return 0;
}

int probe_conf_parse_buf(struct probe_conf *conf, const char *buf, size_t len,
			 const char *name, char *err, size_t errlen)
{
	int rc = sigma_kv_parse_buf(buf, len, name, conf_kv, conf, err, errlen);

	return rc < 0 ? rc : conf_check(conf, name, err, errlen);
}

int probe_conf_load(struct probe_conf *conf, const char *path, char *err,
		    size_t errlen)
{
	int rc = sigma_kv_parse_file(path, conf_kv, conf, err, errlen);

	return rc < 0 ? rc : conf_check(conf, path, err, errlen);
}

const char *probe_level_name(int level)
{
	return sigma_level_name(level == PROBE_FULL ? SIGMA_LEVEL_FULL
						    : SIGMA_LEVEL_QUICK);
}
