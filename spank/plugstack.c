/*
 * plugstack.c - the plugstack.conf arguments of sigma.so, parsed by one pure
 * function: defaults first, then "key=value" words only; an unknown key, a
 * bad value or a relative path fails closed with a message naming it.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "sigma.h"
#include "sigma_spank.h"

const char *const sigma_epilog_level_names[] = {"off", "quick", "full", "job",
						NULL};

void sigma_spank_conf_init(struct sigma_spank_conf *conf)
{
	memset(conf, 0, sizeof(*conf));
	sigma_strlcpy(conf->probe, SIGMA_PROBE_PATH, sizeof(conf->probe));
	conf->probe_timeout = 60;
	conf->ckpt_timeout = 30;
	conf->default_probe = SIGMA_PROBE_QUICK;
	conf->epilog_probe = SIGMA_PROBE_JOB;
	conf->drain = true;
}

static int conf_path(const char *key, const char *value, char *dst, size_t size,
		     bool may_be_empty, char *err, size_t errlen)
{
	if (!value[0] && may_be_empty) {
		dst[0] = '\0';
		return 0;
	}
	if (value[0] != '/')
		return sigma_set_err(err, errlen, EINVAL,
				     "%s=%s: must be an absolute path", key,
				     value);
	if (sigma_strlcpy(dst, value, size) >= size)
		return sigma_set_err(err, errlen, ENAMETOOLONG,
				     "%s: path longer than %zu characters", key,
				     size - 1);
	return 0;
}

static int conf_level(const char *key, const char *value,
		      const char *const names[], int *out, char *err,
		      size_t errlen)
{
	char list[64];
	int v = sigma_parse_enum(value, names);

	if (v < 0)
		return sigma_set_err(
		    err, errlen, EINVAL, "%s=%s: expected one of %s", key,
		    value, sigma_enum_list(names, list, sizeof(list)));
	*out = v;
	return 0;
}

static int conf_seconds(const char *key, const char *value, long *out,
			char *err, size_t errlen)
{
	if (sigma_parse_long(value, 1, SIGMA_PROBE_TIMEOUT_MAX, out) < 0)
		return sigma_set_err(err, errlen, EINVAL,
				     "%s=%s: expected seconds from 1 to %d", key,
				     value, SIGMA_PROBE_TIMEOUT_MAX);
	return 0;
}

static int conf_kv(const char *key, const char *value, void *arg, char *err,
		   size_t errlen)
{
	struct sigma_spank_conf *conf = arg;

	if (!strcmp(key, "probe"))
		return conf_path(key, value, conf->probe, sizeof(conf->probe),
				 false, err, errlen);
	if (!strcmp(key, "probe_timeout"))
		return conf_seconds(key, value, &conf->probe_timeout, err,
				    errlen);
	if (!strcmp(key, "ckpt_timeout"))
		return conf_seconds(key, value, &conf->ckpt_timeout, err,
				    errlen);
	if (!strcmp(key, "default_probe"))
		return conf_level(key, value, sigma_level_names,
				  &conf->default_probe, err, errlen);
	if (!strcmp(key, "epilog_probe"))
		return conf_level(key, value, sigma_epilog_level_names,
				  &conf->epilog_probe, err, errlen);
	if (!strcmp(key, "drain")) {
		if (sigma_parse_bool(value, &conf->drain) < 0)
			return sigma_set_err(err, errlen, EINVAL,
					     "drain=%s: expected yes or no",
					     value);
		return 0;
	}
	if (!strcmp(key, "ckpt_root"))
		return conf_path(key, value, conf->ckpt_root,
				 sizeof(conf->ckpt_root), true, err, errlen);
	if (!strcmp(key, "config"))
		return conf_path(key, value, conf->config, sizeof(conf->config),
				 true, err, errlen);
	return sigma_set_err(
	    err, errlen, EINVAL,
	    "unknown argument '%s' (known: probe, probe_timeout, default_probe, epilog_probe, drain, ckpt_root, ckpt_timeout, config)",
	    key);
}

int sigma_spank_conf_parse(struct sigma_spank_conf *conf, int ac,
			   char *const av[], char *err, size_t errlen)
{
	sigma_spank_conf_init(conf);
	if (ac < 0 || (ac > 0 && !av))
		return sigma_set_err(err, errlen, EINVAL, "no arguments");
	return sigma_kv_parse_argv(ac, av, conf_kv, conf, err, errlen);
}
