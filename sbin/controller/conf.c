/*
 * conf.c - sigmad settings, the AdminComment options block, node reasons.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"
#include "sigma.h"

void sigmad_config_init(struct sigmad_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	sigma_strlcpy(cfg->socket_path, SIGMAD_DEFAULT_SOCKET,
		      sizeof(cfg->socket_path));
	sigma_strlcpy(cfg->state_dir, SIGMAD_DEFAULT_STATE_DIR,
		      sizeof(cfg->state_dir));
	sigma_strlcpy(cfg->reservation, SIGMAD_DEFAULT_RESERVATION,
		      sizeof(cfg->reservation));
	cfg->poll_interval_s = 5;
	cfg->metrics_interval_s = 60;
	cfg->restart_delay_s = 5;
	cfg->down_on_no_respond = true;
	cfg->suspect_crashes = SIGMAD_DEFAULT_SUSPECT;
	cfg->event_log_max = (int64_t)SIGMAD_DEFAULT_LOG_MAX_MB << 20;
	cfg->log_level = SIGMA_LOG_INFO;
	sigma_site_caps_init(&cfg->caps);
	policy_config_init(&cfg->policy);
}

static int config_copy(char *dst, size_t size, const char *key,
		       const char *value, char *err, size_t errlen)
{
	if (sigma_strlcpy(dst, value, size) >= size)
		return sigma_set_err(err, errlen, ENAMETOOLONG,
				     "%s: value longer than %zu characters",
				     key, size - 1);
	return 0;
}

static int config_seconds(const char *key, const char *value, long min,
			  long max, int64_t *out, char *err, size_t errlen)
{
	long v;
	int rc = sigma_parse_long(value, min, max, &v);

	if (rc)
		return sigma_set_err(
		    err, errlen, -rc,
		    "%s: '%s' is not a number of seconds in [%ld, %ld]", key,
		    value, min, max);
	*out = v;
	return 0;
}

/* Slurm names: reservation, feature; no list separators or spaces. */
static bool config_is_name(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && *s != '_' && *s != '-' &&
		    *s != '.')
			return false;
	return true;
}

/* A node list: names, ',' and Slurm ranges ("n[5-6]"). */
static bool config_is_nodelist(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && !strchr("_-.,[]", *s))
			return false;
	return true;
}

static int config_key(const char *key, const char *value, void *arg, char *err,
		      size_t errlen)
{
	static const char *const levels[] = {"error", "warn", "info", "debug",
					     NULL};
	struct sigmad_config *cfg = arg;
	char list[64];
	long v;
	int rc;

	if (strncmp(key, "sigmad_", 7) != 0)
		return 0; /* the probe's key: not ours to judge */
	rc = sigma_site_caps_key(&cfg->caps, key, value, err, errlen);
	if (rc)
		return rc < 0 ? rc : 0;
	if (!strcmp(key, "sigmad_socket")) {
		if (value[0] != '/')
			return sigma_set_err(err, errlen, EINVAL,
					     "%s: '%s' is not an absolute path",
					     key, value);
		return config_copy(cfg->socket_path, sizeof(cfg->socket_path),
				   key, value, err, errlen);
	}
	if (!strcmp(key, "sigmad_state_dir")) {
		if (value[0] != '/')
			return sigma_set_err(err, errlen, EINVAL,
					     "%s: '%s' is not an absolute path",
					     key, value);
		return config_copy(cfg->state_dir, sizeof(cfg->state_dir), key,
				   value, err, errlen);
	}
	if (!strcmp(key, "sigmad_metrics_dir")) {
		if (value[0] && value[0] != '/')
			return sigma_set_err(err, errlen, EINVAL,
					     "%s: '%s' is not an absolute path",
					     key, value);
		return config_copy(cfg->metrics_dir, sizeof(cfg->metrics_dir),
				   key, value, err, errlen);
	}
	if (!strcmp(key, "sigmad_metrics_interval"))
		return config_seconds(key, value, 1, 3600,
				      &cfg->metrics_interval_s, err, errlen);
	if (!strcmp(key, "sigmad_spares")) {
		if (*value && !config_is_nodelist(value))
			return sigma_set_err(err, errlen, EINVAL,
					     "%s: '%s' is not a node list", key,
					     value);
		return config_copy(cfg->spares, sizeof(cfg->spares), key, value,
				   err, errlen);
	}
	if (!strcmp(key, "sigmad_spare_feature")) {
		if (*value && !config_is_name(value))
			return sigma_set_err(err, errlen, EINVAL,
					     "%s: '%s' is not a feature name",
					     key, value);
		return config_copy(cfg->spare_feature,
				   sizeof(cfg->spare_feature), key, value, err,
				   errlen);
	}
	if (!strcmp(key, "sigmad_reservation")) {
		if (!config_is_name(value))
			return sigma_set_err(
			    err, errlen, EINVAL,
			    "%s: '%s' is not a reservation name", key, value);
		return config_copy(cfg->reservation, sizeof(cfg->reservation),
				   key, value, err, errlen);
	}
	if (!strcmp(key, "sigmad_probe_command"))
		return config_copy(cfg->probe_command,
				   sizeof(cfg->probe_command), key, value, err,
				   errlen);
	if (!strcmp(key, "sigmad_poll_interval"))
		return config_seconds(key, value, 1, 3600,
				      &cfg->poll_interval_s, err, errlen);
	if (!strcmp(key, "sigmad_restart_delay"))
		return config_seconds(key, value, 1, 600,
				      &cfg->restart_delay_s, err, errlen);
	if (!strcmp(key, "sigmad_cooldown"))
		return config_seconds(key, value, 0, 7 * 86400,
				      &cfg->policy.cooldown_s, err, errlen);
	if (!strcmp(key, "sigmad_warn_grace"))
		return config_seconds(key, value, 1, 86400,
				      &cfg->policy.warn_grace_s, err, errlen);
	if (!strcmp(key, "sigmad_probe_retries")) {
		rc = sigma_parse_long(value, 0, 100, &v);
		if (rc)
			return sigma_set_err(
			    err, errlen, -rc,
			    "%s: '%s' is not a count in [0, 100]", key, value);
		cfg->policy.probe_retries = (int)v;
		return 0;
	}
	if (!strcmp(key, "sigmad_event_log_max")) {
		rc = sigma_parse_long(value, 1, 65536, &v);
		if (rc)
			return sigma_set_err(
			    err, errlen, -rc,
			    "%s: '%s' is not a size in MiB in [1, 65536]", key,
			    value);
		cfg->event_log_max = (int64_t)v << 20;
		return 0;
	}
	if (!strcmp(key, "sigmad_suspect_crashes")) {
		rc = sigma_parse_long(value, 1, 100, &v);
		if (rc)
			return sigma_set_err(
			    err, errlen, -rc,
			    "%s: '%s' is not a count in [1, 100]", key, value);
		cfg->suspect_crashes = (int)v;
		return 0;
	}
	if (!strcmp(key, "sigmad_proactive") ||
	    !strcmp(key, "sigmad_down_on_no_respond")) {
		bool *b = key[7] == 'p' ? &cfg->policy.proactive
					: &cfg->down_on_no_respond;
		if (sigma_parse_bool(value, b))
			return sigma_set_err(err, errlen, EINVAL,
					     "%s: '%s' is not yes or no", key,
					     value);
		return 0;
	}
	if (!strcmp(key, "sigmad_log_level")) {
		rc = sigma_parse_enum(value, levels);
		if (rc < 0)
			return sigma_set_err(
			    err, errlen, EINVAL, "%s: '%s' is not one of %s",
			    key, value,
			    sigma_enum_list(levels, list, sizeof(list)));
		cfg->log_level = rc;
		return 0;
	}
	return sigma_set_err(err, errlen, EINVAL, "unknown key '%s'", key);
}

static int config_check(const struct sigmad_config *cfg, const char *name,
			char *err, size_t errlen)
{
	if (cfg->spares[0] && cfg->spare_feature[0])
		return sigma_set_err(
		    err, errlen, EINVAL,
		    "%s: set sigmad_spares or sigmad_spare_feature, not both",
		    name);
	return 0;
}

int sigmad_config_parse(struct sigmad_config *cfg, const char *buf, size_t len,
			const char *name, char *err, size_t errlen)
{
	struct sigmad_config *tmp;
	int rc;

	tmp = malloc(sizeof(*tmp));
	if (!tmp)
		return sigma_set_err(err, errlen, ENOMEM, "out of memory");
	sigmad_config_init(tmp);
	rc = sigma_kv_parse_buf(buf, len, name, config_key, tmp, err, errlen);
	if (!rc)
		rc = config_check(tmp, name, err, errlen);
	if (!rc)
		*cfg = *tmp;
	free(tmp);
	return rc;
}

int sigmad_config_load(struct sigmad_config *cfg, const char *path, char *err,
		       size_t errlen)
{
	char *buf = NULL;
	size_t len = 0;
	int rc;

	rc = sigma_file_read(path, 1 << 20, &buf, &len);
	if (rc)
		return sigma_set_err(err, errlen, -rc, "%s: %s", path,
				     strerror(-rc));
	rc = sigmad_config_parse(cfg, buf, len, path, err, errlen);
	free(buf);
	return rc;
}

int sigmad_config_event_log(const struct sigmad_config *cfg, char *buf,
			    size_t size)
{
	return sigma_snprintf(buf, size, "%s/%s", cfg->state_dir,
			      SIGMAD_EVENT_LOG_NAME);
}

