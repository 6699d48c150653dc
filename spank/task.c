/*
 * task.c - slurm_spank_task_init (remote context, in each task just before
 * it execs, as the user): export the job's sigma settings so the trainer
 * needs no flags under Slurm, and refuse a checkpoint directory that is not
 * the user's own real directory (a planted symbolic link, for example).
 */
#include "config.h"

#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>

#include <slurm/spank.h>

#include "sigma.h"
#include "sigma_spank.h"
#include "sigma_spank_slurm.h"

static int task_setenv(spank_t sp, const char *var, const char *val)
{
	spank_err_t rc = spank_setenv(sp, var, val, 1);

	if (rc != ESPANK_SUCCESS) {
		slurm_error("sigma: cannot set %s: %s", var,
			    spank_strerror(rc));
		return -1;
	}
	return 0;
}

static int task_setenv_long(spank_t sp, const char *var, long v)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%ld", v);
	return task_setenv(sp, var, buf);
}

int sigma_task_init(spank_t sp)
{
	char name[256] = "", user[128] = "", path[PATH_MAX], err[512];
	struct passwd pw, *pwres = NULL;
	char pwbuf[4096];
	uint32_t restarts = 0;
	uid_t uid;
	int rc;

	if (sigma_load_options(sp) < 0)
		return -1;
	if (!sigma_job_opts_any(&sigma_opts))
		return 0; /* not a sigma job */
	if (spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS) {
		slurm_error("sigma: cannot tell the job's user");
		return -1;
	}
	if (!getpwuid_r(uid, &pw, pwbuf, sizeof(pwbuf), &pwres) && pwres)
		sigma_strlcpy(user, pw.pw_name, sizeof(user));
	if (spank_getenv(sp, "SLURM_JOB_NAME", name, sizeof(name)) !=
	    ESPANK_SUCCESS)
		name[0] = '\0';
	/*
	 * The restart count: Slurm sets SLURM_RESTART_COUNT in a requeued
	 * batch job's environment (steps inherit it); the SPANK item is not
	 * filled in for every step, so the larger of the two wins.
	 */
	if (spank_get_item(sp, S_SLURM_RESTART_COUNT, &restarts) !=
	    ESPANK_SUCCESS)
		restarts = 0;
	{
		char buf[32];
		long v;

		if (spank_getenv(sp, "SLURM_RESTART_COUNT", buf, sizeof(buf)) ==
			ESPANK_SUCCESS &&
		    !sigma_parse_long(buf, 0, 0x7fffffffL, &v) &&
		    (uint32_t)v > restarts)
			restarts = (uint32_t)v;
	}

	rc = sigma_ckpt_path(&sigma_opts, &sigma_conf, user, name, path,
			     sizeof(path), err, sizeof(err));
	if (rc == 0) {
		if (sigma_ckpt_check(path, uid, sigma_conf.ckpt_timeout, err,
				     sizeof(err)) < 0) {
			slurm_error("sigma: checkpoint directory refused: %s",
				    err);
			return -1;
		}
		if (task_setenv(sp, SIGMA_ENV_CKPT_DIR, path) < 0)
			return -1;
	} else if (rc != -ENOENT) {
		slurm_error("sigma: %s", err);
		return -1;
	}
	/* what sigma-train reads (docs/interfaces.md) */
	if (task_setenv_long(sp, SIGMA_ENV_CKPT_EVERY,
			     sigma_opts.ckpt_every >= 0
				 ? sigma_opts.ckpt_every
				 : SIGMA_CKPT_EVERY_DEFAULT) < 0 ||
	    task_setenv_long(sp, SIGMA_ENV_ATTEMPT, (long)restarts) < 0)
		return -1;
	/* and what sigma-launch reads, for a job that restarts itself */
	if (sigma_opts.restart == SIGMA_RESTART_IN_JOB &&
	    (task_setenv(sp, SIGMA_ENV_RESTART,
			 sigma_restart_names[SIGMA_RESTART_IN_JOB]) < 0 ||
	     task_setenv_long(sp, SIGMA_ENV_JOB_SPARES,
			      sigma_opts.job_spares >= 0 ? sigma_opts.job_spares
							 : 1) < 0 ||
	     task_setenv_long(sp, SIGMA_ENV_MAX_RESTARTS,
			      sigma_opts.max_restarts >= 0
				  ? sigma_opts.max_restarts
				  : 0) < 0))
		return -1;
	return 0;
}
