/*
 * register.c - hand Slurm the --sigma-* options. They are registered with
 * spank_option_register() from slurm_spank_init (an exported table reaches
 * srun only, not sbatch or salloc). The callbacks validate through
 * options.c; in slurmd/slurmstepd the values are read back with
 * spank_option_getopt().
 */
#include "config.h"

#include <errno.h>
#include <pwd.h>
#include <string.h>
#include <unistd.h>

#include <slurm/spank.h>

#include "sigma.h"
#include "sigma_spank.h"
#include "sigma_spank_slurm.h"

static int register_cb(int val, const char *optarg, int remote);

static struct spank_option register_table[] = {
    {"sigma-probe", "off|quick|full",
     "sigma: health probe level of this job's prolog (default from plugstack.conf)",
     1, SIGMA_OPT_PROBE, register_cb},
    {"sigma-ckpt-dir", "DIR",
     "sigma: checkpoint directory (default: ckpt_root/USER/JOBNAME)", 1,
     SIGMA_OPT_CKPT_DIR, register_cb},
    {"sigma-ckpt-every", "STEPS",
     "sigma: checkpoint interval in training steps", 1, SIGMA_OPT_CKPT_EVERY,
     register_cb},
    {"sigma-spares", "N",
     "sigma: hot spare nodes to hold ready for this job (0 = none)", 1,
     SIGMA_OPT_SPARES, register_cb},
    {"sigma-max-restarts", "N",
     "sigma: how many times the job may be requeued after a failure", 1,
     SIGMA_OPT_MAX_RESTARTS, register_cb},
    {"sigma-on-warning", "checkpoint|drain-after|ignore",
     "sigma: on an early warning of the job's node: checkpoint (the job handles SIGUSR1 and is moved), drain-after (default: it finishes, the node drains after it) or ignore",
     1, SIGMA_OPT_ON_WARNING, register_cb},
    {"sigma-restart", "requeue|in-job",
     "sigma: who restarts the job after a failure: requeue (default: sigmad requeues it onto a pool spare) or in-job (sigma-launch relaunches it inside the allocation, onto its own spare nodes)",
     1, SIGMA_OPT_RESTART, register_cb},
    {"sigma-job-spares", "N",
     "sigma: with --sigma-restart=in-job, how many of the job's nodes are in-allocation spares (default 1)",
     1, SIGMA_OPT_JOB_SPARES, register_cb},
};

#define REGISTER_N (sizeof(register_table) / sizeof(register_table[0]))

/* the submitting user's name, for the checkpoint path rule */
static const char *register_user(char *buf, size_t size)
{
	struct passwd pw, *res = NULL;
	char pwbuf[4096];

	buf[0] = '\0';
	if (!getpwuid_r(getuid(), &pw, pwbuf, sizeof(pwbuf), &res) && res)
		sigma_strlcpy(buf, pw.pw_name, size);
	return buf;
}

/*
 * The site's caps (sigma.conf, the plugin's config=): a value above one is
 * refused at submit. A sigma.conf the user cannot read is skipped here;
 * sigmad applies the same caps when it decides.
 */
static int register_caps(int val, char *err, size_t errlen)
{
	struct sigma_site_caps caps;
	char why[256];

	if (!sigma_conf.config[0] ||
	    sigma_site_caps_load(&caps, sigma_conf.config, why, sizeof(why)))
		return 0;
	if (val == SIGMA_OPT_SPARES && sigma_opts.spares > caps.spares_per_job)
		return sigma_set_err(
		    err, errlen, EPERM,
		    "--sigma-spares=%ld: this site allows at most %ld spares a job (sigmad_max_spares_per_job in %s)",
		    sigma_opts.spares, caps.spares_per_job, sigma_conf.config);
	if (val == SIGMA_OPT_SPARES && sigma_opts.spares > caps.spares_per_user)
		return sigma_set_err(
		    err, errlen, EPERM,
		    "--sigma-spares=%ld: this site lets one user hold at most %ld spares at once (sigmad_max_spares_per_user in %s)",
		    sigma_opts.spares, caps.spares_per_user, sigma_conf.config);
	if (val == SIGMA_OPT_MAX_RESTARTS &&
	    sigma_opts.max_restarts > caps.max_restarts)
		return sigma_set_err(
		    err, errlen, EPERM,
		    "--sigma-max-restarts=%ld: this site allows at most %ld (sigmad_max_restarts in %s)",
		    sigma_opts.max_restarts, caps.max_restarts,
		    sigma_conf.config);
	return 0;
}

static int register_cb(int val, const char *optarg, int remote)
{
	char err[512], user[128], shown[4 * sizeof(err)];

	if (sigma_job_opts_set(&sigma_opts, val, optarg, err, sizeof(err)) <
	    0)
		goto out_refuse;
	/* at submit, so a job that root would refuse is never queued */
	if (!remote && val == SIGMA_OPT_CKPT_DIR &&
	    sigma_ckpt_path_allowed(sigma_opts.ckpt_dir, sigma_conf.ckpt_root,
				    register_user(user, sizeof(user)), err,
				    sizeof(err)) < 0)
		goto out_refuse;
	if (!remote && register_caps(val, err, sizeof(err)) < 0)
		goto out_refuse;
	return 0;
out_refuse:
	/* the user must see why the job was refused; what they typed, escaped */
	slurm_error("sigma: %s", sigma_escape(err, shown, sizeof(shown)));
	return -1;
}

int sigma_register_options(spank_t sp)
{
	for (size_t i = 0; i < REGISTER_N; i++) {
		spank_err_t rc = spank_option_register(sp, &register_table[i]);

		if (rc != ESPANK_SUCCESS) {
			slurm_error("sigma: cannot register --%s: %s",
				    register_table[i].name, spank_strerror(rc));
			return -1;
		}
	}
	return 0;
}

int sigma_load_options(spank_t sp)
{
	char err[512];

	sigma_job_opts_init(&sigma_opts);
	for (size_t i = 0; i < REGISTER_N; i++) {
		char *optarg = NULL;
		spank_err_t rc;

		rc = spank_option_getopt(sp, &register_table[i], &optarg);
		if (rc != ESPANK_SUCCESS || !optarg)
			continue;
		if (sigma_job_opts_set(&sigma_opts, register_table[i].val,
				       optarg, err, sizeof(err)) < 0) {
			char shown[4 * sizeof(err)];

			/* into slurmd's log: a user's bytes, escaped */
			slurm_error("sigma: %s",
				    sigma_escape(err, shown, sizeof(shown)));
			return -EINVAL;
		}
	}
	return 0;
}
