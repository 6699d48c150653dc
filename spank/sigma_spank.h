/*
 * sigma_spank.h - internals of sigma.so, the SPANK plugin.
 *
 * The plugin is split by SPANK context (see dispatch.c): the clients
 * (srun, sbatch, salloc: client.c), the job script context on every node
 * (job prolog and epilog as root: prolog.c, epilog.c) and the remote
 * context (slurmstepd, task_init: task.c). Pure parts (plugstack.conf
 * arguments, option values, the AdminComment block, the checkpoint path)
 * have no Slurm dependency and are unit-tested; the only file that calls
 * libslurm is slurm_api.c.
 */
#ifndef SIGMA_SPANK_H
#define SIGMA_SPANK_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "contract.h"

#define SIGMA_PLUGIN_NAME "sigma"

/* the installed probe; plugstack.conf probe= overrides it */
#ifndef SIGMA_PROBE_PATH
#define SIGMA_PROBE_PATH "/usr/sbin/sigma-probe"
#endif

/* probe levels: the contract's, and one of plugstack.conf's own */
enum sigma_probe_level {
	SIGMA_PROBE_OFF = SIGMA_LEVEL_OFF,
	SIGMA_PROBE_QUICK = SIGMA_LEVEL_QUICK,
	SIGMA_PROBE_FULL = SIGMA_LEVEL_FULL,
	/* epilog_probe only: the level the job ran its prolog probe at */
	SIGMA_PROBE_JOB = 3,
};

extern const char *const sigma_epilog_level_names[]; /* ... and job */

/* ---- plugstack.conf arguments (plugstack.c) -------------------------------
 */

#define SIGMA_PROBE_TIMEOUT_MAX 3600

struct sigma_spank_conf {
	char probe[PATH_MAX];	  /* sigma-probe binary */
	long probe_timeout;	  /* seconds, 1..SIGMA_PROBE_TIMEOUT_MAX */
	int default_probe;	  /* enum sigma_probe_level, not JOB */
	int epilog_probe;	  /* enum sigma_probe_level */
	bool drain;		  /* drain (and fail the job) on failure */
	char ckpt_root[PATH_MAX]; /* "" = no default checkpoint dir */
	long ckpt_timeout;	  /* seconds to create the directory */
	char config[PATH_MAX];	  /* sigma.conf, "" = probe's default */
};

/* Defaults, with probe = the installed sigma-probe. */
void sigma_spank_conf_init(struct sigma_spank_conf *conf);
/*
 * Parse plugstack.conf arguments (each "key=value") over the defaults.
 * Fails closed: an unknown key, a bad value or a relative path is an error
 * written to err. Returns 0 or -errno. No side effects besides conf.
 */
int sigma_spank_conf_parse(struct sigma_spank_conf *conf, int ac,
			   char *const av[], char *err, size_t errlen);

/* ---- job options (options.c) ----------------------------------------------
 */

/* the limits of the values are the contract's (contract.h) */

/* The job's --sigma-* values; -1 (or "") means unset. */
struct sigma_job_opts {
	int probe; /* enum sigma_probe_level or -1 */
	char ckpt_dir[PATH_MAX];
	long ckpt_every;
	long spares;
	long max_restarts;
	int on_warning; /* enum sigma_on_warning or -1 */
	int restart;	/* enum sigma_restart or -1 */
	long job_spares; /* in-allocation spares, or -1 */
};

enum sigma_opt_id {
	SIGMA_OPT_PROBE = 1,
	SIGMA_OPT_CKPT_DIR,
	SIGMA_OPT_CKPT_EVERY,
	SIGMA_OPT_SPARES,
	SIGMA_OPT_MAX_RESTARTS,
	SIGMA_OPT_ON_WARNING,
	SIGMA_OPT_RESTART,
	SIGMA_OPT_JOB_SPARES,
};

void sigma_job_opts_init(struct sigma_job_opts *opts);
/*
 * Validate and store one option value. Idempotent: Slurm may call an
 * option's callback twice (environment, then command line). err names the
 * option and the accepted values. Returns 0 or -EINVAL/-ERANGE.
 */
int sigma_job_opts_set(struct sigma_job_opts *opts, int id, const char *value,
		       char *err, size_t errlen);
/* true when the job passed at least one --sigma-* option */
bool sigma_job_opts_any(const struct sigma_job_opts *opts);
/* what no single option can check: 0, or -EINVAL with err */
int sigma_job_opts_check(const struct sigma_job_opts *opts, char *err,
			 size_t errlen);
/* the option's name without dashes, for messages */
const char *sigma_opt_name(int id);
/* The level the job's prolog probes at. */
int sigma_job_probe_level(const struct sigma_job_opts *opts,
			  const struct sigma_spank_conf *conf);
/* The level of the epilog probe (off when the job's level is off). */
int sigma_job_epilog_level(const struct sigma_job_opts *opts,
			   const struct sigma_spank_conf *conf);

/* ---- the AdminComment block and checkpoint paths (job.c) ------------------
 */

/*
 * "sigma[probe=quick,spares=1,max_restarts=3,ckpt_every=50,
 * on_warning=checkpoint]" (lib/contract.h). Returns 0 or
 * -ENAMETOOLONG.
 */
int sigma_admin_block_format(const struct sigma_job_opts *opts,
			     const struct sigma_spank_conf *conf, char *buf,
			     size_t size);
/*
 * The AdminComment to write given the current one: NULL-safe. Returns 1
 * and fills out when an update is due, 0 when cur already starts with a
 * sigma block, or -ENAMETOOLONG.
 */
int sigma_admin_comment_merge(const char *cur, const char *block, char *out,
			      size_t size);
/*
 * Make a job name usable as one path component: [A-Za-z0-9._-] kept, other
 * bytes become '_', a leading '.' becomes '_', empty becomes "job".
 */
void sigma_path_component(const char *in, char *out, size_t size);
/*
 * The job's checkpoint directory: opts->ckpt_dir when given (must be
 * absolute), else ckpt_root/USER/JOBNAME. Returns 0, -ENOENT when there is
 * none (no option and no ckpt_root), -EINVAL or -ENAMETOOLONG.
 */
int sigma_ckpt_path(const struct sigma_job_opts *opts,
		    const struct sigma_spank_conf *conf, const char *user,
		    const char *job_name, char *out, size_t size, char *err,
		    size_t errlen);

/*
 * What follows ckpt_root/ in path ("" for ckpt_root itself), or NULL when
 * path is not under ckpt_root (or there is no ckpt_root).
 */
const char *sigma_ckpt_under_root(const char *path, const char *ckpt_root);
/*
 * The rule for the directory a user names: anywhere outside ckpt_root (it
 * is made whole as the user), and under ckpt_root only inside
 * ckpt_root/USER, USER as sigma_path_component makes it. Checked at submit
 * and again by root in the prolog. Returns 0 or -EPERM, the rule in err.
 */
int sigma_ckpt_path_allowed(const char *path, const char *ckpt_root,
			    const char *user, char *err, size_t errlen);

/* ---- creating the checkpoint directory as the user (ckpt.c) ----------------
 */

/*
 * Create path for the job's user (name, uid, gid), in a child that is
 * killed after timeout_s (a hung NFS or FUSE mount fails the job, never the
 * prolog). Under ckpt_root root creates at most ckpt_root/USER and chowns
 * it only when its own mkdirat just made it (device and inode checked);
 * everything else is created after the child has dropped to the user. The
 * last component must be a real directory owned by uid: a symbolic link
 * there is refused. Returns 0 or -errno with the reason in err.
 */
int sigma_ckpt_create(const char *path, const char *ckpt_root,
		      const char *user, uid_t uid, gid_t gid, long timeout_s,
		      char *err, size_t errlen);
/*
 * Check, as the user, that path is a directory owned by uid, not a link,
 * in a child killed after timeout_s.
 */
int sigma_ckpt_check(const char *path, uid_t uid, long timeout_s, char *err,
		     size_t errlen);

/* ---- running the probe (probe_run.c) --------------------------------------
 */

struct sigma_probe_result {
	int status; /* probe exit code 0..3, or -1 (did not run) */
	bool timed_out;
	char line[512]; /* first line of its output, the summary */
};

/*
 * fork + execve argv[0] (absolute path, no shell) with env, stdin from
 * /dev/null, stdout and stderr captured; killed (whole process group) after
 * timeout_s. Returns 0 when it ran to an exit code (in res->status), or
 * -errno (-ETIMEDOUT on timeout) with res->line saying why.
 */
int sigma_probe_run(char *const argv[], char *const envp[], long timeout_s,
		    struct sigma_probe_result *res);

/* ---- libslurm (slurm_api.c, the only file that includes slurm.h) ----------
 */

/*
 * Read the job's AdminComment and name; caller frees both (may be NULL).
 * *unprotected (may be NULL) gets why sigma cannot requeue the job (a
 * static string), or NULL when it can.
 */
int sigma_slurm_job_info(uint32_t job_id, char **admin_comment, char **name,
			 const char **unprotected);
int sigma_slurm_set_admin_comment(uint32_t job_id, const char *text);
/* drain node with reason (used only when the probe could not run) */
int sigma_slurm_drain(const char *node, const char *reason);
/* node's state and reason as slurmctld has them now: 0 or -errno */
int sigma_slurm_node_now(const char *node, bool *drained, bool *down,
			 char *reason, size_t size);
/* true when node is the first host of the hostlist expression list */
bool sigma_slurm_is_first_node(const char *list, const char *node);

/* ---- plugin-wide state and helpers (dispatch.c) ---------------------------
 */

extern struct sigma_spank_conf sigma_conf;
extern struct sigma_job_opts sigma_opts;

#endif /* SIGMA_SPANK_H */
