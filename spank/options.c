/*
 * options.c - the job's --sigma-* options: validation and storage, with no
 * Slurm dependency (register.c hands Slurm the table and the callbacks).
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "sigma.h"
#include "sigma_spank.h"

void sigma_job_opts_init(struct sigma_job_opts *opts)
{
	memset(opts, 0, sizeof(*opts));
	opts->probe = -1;
	opts->ckpt_every = -1;
	opts->spares = -1;
	opts->max_restarts = -1;
	opts->on_warning = -1;
	opts->restart = -1;
	opts->job_spares = -1;
}

const char *sigma_opt_name(int id)
{
	switch (id) {
	case SIGMA_OPT_PROBE:
		return "sigma-probe";
	case SIGMA_OPT_CKPT_DIR:
		return "sigma-ckpt-dir";
	case SIGMA_OPT_CKPT_EVERY:
		return "sigma-ckpt-every";
	case SIGMA_OPT_SPARES:
		return "sigma-spares";
	case SIGMA_OPT_MAX_RESTARTS:
		return "sigma-max-restarts";
	case SIGMA_OPT_ON_WARNING:
		return "sigma-on-warning";
	case SIGMA_OPT_RESTART:
		return "sigma-restart";
	case SIGMA_OPT_JOB_SPARES:
		return "sigma-job-spares";
	}
	return "sigma-?";
}

static int opts_number(int id, const char *value, long min, long max, long *out,
		       char *err, size_t errlen)
{
	if (sigma_parse_long(value, min, max, out) < 0)
		return sigma_set_err(
		    err, errlen, EINVAL,
		    "--%s=%s: expected a whole number from %ld to %ld",
		    sigma_opt_name(id), value, min, max);
	return 0;
}

/*
 * The rule for every component of a checkpoint path: not empty ("//" or a
 * trailing "/"), not "." and not "..". Root creates the path's top
 * directory under ckpt_root, so the path must mean what it says.
 */
static int opts_dir_components(const char *value, char *err, size_t errlen)
{
	const char *p = value + 1;

	for (;;) {
		size_t n = strcspn(p, "/");

		if (n == 0)
			return sigma_set_err(err, errlen, EINVAL,
					     "--sigma-ckpt-dir=%s: an empty component (\"//\" or a trailing \"/\") is not allowed",
					     value);
		if ((n == 1 && p[0] == '.') ||
		    (n == 2 && p[0] == '.' && p[1] == '.'))
			return sigma_set_err(err, errlen, EINVAL,
					     "--sigma-ckpt-dir=%s: a '%.*s' component is not allowed",
					     value, (int)n, p);
		if (!p[n])
			return 0;
		p += n + 1;
	}
}

static int opts_dir(const char *value, char *dst, size_t size, char *err,
		    size_t errlen)
{
	const char *p;

	if (value[0] != '/')
		return sigma_set_err(
		    err, errlen, EINVAL,
		    "--sigma-ckpt-dir=%s: expected an absolute path", value);
	if (strlen(value) >= size)
		return sigma_set_err(
		    err, errlen, ENAMETOOLONG,
		    "--sigma-ckpt-dir: path longer than %zu characters",
		    size - 1);
	for (p = value; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return sigma_set_err(
			    err, errlen, EINVAL,
			    "--sigma-ckpt-dir: control character in path");
	if (value[1] && opts_dir_components(value, err, errlen) < 0)
		return -EINVAL;
	sigma_strlcpy(dst, value, size);
	return 0;
}

static int opts_enum(int id, const char *value, const char *const names[],
		     int *out, char *err, size_t errlen)
{
	char list[64];
	int v = sigma_parse_enum(value, names);

	if (v < 0)
		return sigma_set_err(err, errlen, EINVAL,
				     "--%s=%s: expected one of %s",
				     sigma_opt_name(id), value,
				     sigma_enum_list(names, list, sizeof(list)));
	*out = v;
	return 0;
}

int sigma_job_opts_set(struct sigma_job_opts *opts, int id, const char *value,
		       char *err, size_t errlen)
{
	if (!value || !value[0])
		return sigma_set_err(err, errlen, EINVAL, "--%s: missing value",
				     sigma_opt_name(id));
	switch (id) {
	case SIGMA_OPT_PROBE:
		return opts_enum(id, value, sigma_level_names, &opts->probe,
				 err, errlen);
	case SIGMA_OPT_CKPT_DIR:
		return opts_dir(value, opts->ckpt_dir, sizeof(opts->ckpt_dir),
				err, errlen);
	case SIGMA_OPT_CKPT_EVERY:
		return opts_number(id, value, 1, SIGMA_CKPT_EVERY_MAX,
				   &opts->ckpt_every, err, errlen);
	case SIGMA_OPT_SPARES:
		return opts_number(id, value, 0, SIGMA_SPARES_MAX,
				   &opts->spares, err, errlen);
	case SIGMA_OPT_MAX_RESTARTS:
		return opts_number(id, value, 0, SIGMA_RESTARTS_MAX,
				   &opts->max_restarts, err, errlen);
	case SIGMA_OPT_ON_WARNING:
		return opts_enum(id, value, sigma_on_warning_names,
				 &opts->on_warning, err, errlen);
	case SIGMA_OPT_RESTART:
		return opts_enum(id, value, sigma_restart_names,
				 &opts->restart, err, errlen);
	case SIGMA_OPT_JOB_SPARES:
		return opts_number(id, value, 0, SIGMA_SPARES_MAX,
				   &opts->job_spares, err, errlen);
	}
	return sigma_set_err(err, errlen, EINVAL, "unknown option id %d", id);
}

bool sigma_job_opts_any(const struct sigma_job_opts *opts)
{
	return opts->probe >= 0 || opts->ckpt_dir[0] || opts->ckpt_every >= 0 ||
	       opts->spares >= 0 || opts->max_restarts >= 0 ||
	       opts->on_warning >= 0 || opts->restart >= 0 ||
	       opts->job_spares >= 0;
}

int sigma_job_opts_check(const struct sigma_job_opts *opts, char *err,
			 size_t errlen)
{
	if (opts->job_spares > 0 && opts->restart != SIGMA_RESTART_IN_JOB)
		return sigma_set_err(
		    err, errlen, EINVAL,
		    "--sigma-job-spares=%ld: in-allocation spares are for --sigma-restart=in-job",
		    opts->job_spares);
	return 0;
}

int sigma_job_probe_level(const struct sigma_job_opts *opts,
			  const struct sigma_spank_conf *conf)
{
	return opts->probe >= 0 ? opts->probe : conf->default_probe;
}

int sigma_job_epilog_level(const struct sigma_job_opts *opts,
			   const struct sigma_spank_conf *conf)
{
	int job = sigma_job_probe_level(opts, conf);

	/* a job that asked for no probing is not probed after it either */
	if (job == SIGMA_PROBE_OFF)
		return SIGMA_PROBE_OFF;
	return conf->epilog_probe == SIGMA_PROBE_JOB ? job : conf->epilog_probe;
}
