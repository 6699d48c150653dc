/*
 * prolog.c - slurm_spank_job_prolog, as root on every node of the
 * allocation (PrologFlags=Alloc): probe the node at the job's level; for a
 * sigma job also write the AdminComment block (first node only) and create
 * the checkpoint directory as the job's user.
 *
 * Only a failing probe fails the prolog (Slurm then requeues the batch job
 * elsewhere). A user's mistake, such as a symbolic link at the checkpoint
 * path, must never drain a node: it is logged here and refused in
 * task_init, which fails the job's tasks instead.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <slurm/spank.h>

#include "sigma.h"
#include "sigma_spank.h"
#include "sigma_spank_slurm.h"

/*
 * The job's sigma block first in its AdminComment; when it asks sigma to
 * recover it and Slurm cannot requeue it, the block says so where users
 * look (sacct -o admincomment).
 */
static void prolog_admin_comment(uint32_t job_id, const char *cur,
				 const char *unprotected)
{
	char block[512], merged[1024];
	int rc;

	if (sigma_admin_block_format(&sigma_opts, &sigma_conf, block,
				     sizeof(block)) < 0)
		return;
	if (unprotected && (sigma_opts.spares > 0 || sigma_opts.max_restarts > 0)) {
		size_t n = strlen(block);

		snprintf(block + n, sizeof(block) - n,
			 " sigma: cannot protect: %s; --sigma-spares and --sigma-max-restarts have no effect",
			 unprotected);
		slurm_error("sigma: job %u: cannot protect: %s", job_id,
			    unprotected);
	}
	rc = sigma_admin_comment_merge(cur, block, merged, sizeof(merged));
	if (rc <= 0) {
		if (rc < 0)
			slurm_error(
			    "sigma: job %u: AdminComment too long to add %s",
			    job_id, block);
		return;
	}
	rc = sigma_slurm_set_admin_comment(job_id, merged);
	if (rc < 0)
		slurm_error("sigma: job %u: cannot set AdminComment: %s",
			    job_id, strerror(-rc));
	else
		slurm_info("sigma: job %u: AdminComment %s", job_id, block);
}

static void prolog_ckpt_dir(spank_t sp, uint32_t job_id, const char *name)
{
	char user[128], path[PATH_MAX], err[512];
	uid_t uid;
	gid_t gid;
	int rc;

	if (sigma_job_user(sp, &uid, &gid, user, sizeof(user)) < 0) {
		slurm_error("sigma: job %u: cannot tell the job's user",
			    job_id);
		return;
	}
	rc = sigma_ckpt_path(&sigma_opts, &sigma_conf, user, name, path,
			     sizeof(path), err, sizeof(err));
	if (rc == -ENOENT)
		return; /* no checkpoint directory asked for or configured */
	if (rc < 0) {
		slurm_error("sigma: job %u: %s", job_id, err);
		return;
	}
	rc = sigma_ckpt_create(path, sigma_conf.ckpt_root, user, uid, gid,
			       sigma_conf.ckpt_timeout, err, sizeof(err));
	if (rc < 0)
		slurm_error("sigma: job %u: checkpoint directory: %s", job_id,
			    err);
	else
		slurm_info("sigma: job %u: checkpoint directory %s (uid %u)",
			   job_id, path, (unsigned)uid);
}

int sigma_prolog(spank_t sp)
{
	const char *node = getenv("SLURMD_NODENAME"), *nodes;
	char *comment = NULL, *name = NULL;
	uint32_t job_id = 0;
	bool first;
	int level, rc;

	spank_get_item(sp, S_JOB_ID, &job_id);
	if (sigma_load_options(sp) < 0)
		sigma_job_opts_init(&sigma_opts); /* refused at submit anyway */
	level = sigma_job_probe_level(&sigma_opts, &sigma_conf);
	if (level != SIGMA_PROBE_OFF) {
		rc = sigma_job_probe(sp, level, "prolog", job_id);
		if ((rc < 0 || rc == SIGMA_PROBE_EXIT_FAIL ||
	     rc == SIGMA_PROBE_EXIT_ERROR) &&
	    sigma_conf.drain)
			return -1; /* requeue the job elsewhere */
	}
	if (!sigma_job_opts_any(&sigma_opts))
		return 0;

	/* Slurm 22.05 gives the prolog SLURM_NODELIST, later ones both */
	nodes = getenv("SLURM_JOB_NODELIST");
	if (!nodes)
		nodes = getenv("SLURM_NODELIST");
	first = sigma_slurm_is_first_node(nodes, node);
	name =
	    getenv("SLURM_JOB_NAME") ? strdup(getenv("SLURM_JOB_NAME")) : NULL;
	if (first || (!name && !sigma_opts.ckpt_dir[0])) {
		const char *unprotected = NULL;
		char *loaded = NULL;

		rc = sigma_slurm_job_info(job_id, &comment, &loaded,
					  &unprotected);
		if (rc < 0)
			slurm_error("sigma: job %u: cannot load the job: %s",
				    job_id, strerror(-rc));
		if (!name)
			name = loaded;
		else
			free(loaded);
		if (rc == 0 && first)
			prolog_admin_comment(job_id, comment, unprotected);
	}
	prolog_ckpt_dir(sp, job_id, name);
	free(comment);
	free(name);
	return 0;
}
