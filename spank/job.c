/*
 * job.c - pure helpers about one job: the AdminComment block that tells the
 * controller this is a sigma job, and the checkpoint path.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "sigma.h"
#include "sigma_spank.h"

#define SIGMA_BLOCK_PREFIX "sigma["

int sigma_admin_block_format(const struct sigma_job_opts *opts,
			     const struct sigma_spank_conf *conf, char *buf,
			     size_t size)
{
	int level = sigma_job_probe_level(opts, conf);

	return sigma_snprintf(
	    buf, size,
	    "sigma[probe=%s,spares=%ld,max_restarts=%ld,ckpt_every=%ld]",
	    sigma_probe_level_names[level],
	    opts->spares >= 0 ? opts->spares : 0,
	    opts->max_restarts >= 0 ? opts->max_restarts : 0,
	    opts->ckpt_every >= 0 ? opts->ckpt_every
				  : SIGMA_CKPT_EVERY_DEFAULT);
}

int sigma_admin_comment_merge(const char *cur, const char *block, char *out,
			      size_t size)
{
	int rc;

	if (cur &&
	    !strncmp(cur, SIGMA_BLOCK_PREFIX, strlen(SIGMA_BLOCK_PREFIX)))
		return 0;
	/* the block goes first; an admin's earlier text is kept after it */
	if (cur && cur[0])
		rc = sigma_snprintf(out, size, "%s %s", block, cur);
	else
		rc = sigma_snprintf(out, size, "%s", block);
	return rc < 0 ? rc : 1;
}

void sigma_path_component(const char *in, char *out, size_t size)
{
	size_t n = 0;

	if (!size)
		return;
	for (; in && *in && n + 1 < size; in++) {
		unsigned char c = (unsigned char)*in;
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			  (c >= '0' && c <= '9') || c == '.' || c == '_' ||
			  c == '-';

		out[n++] = ok ? (char)c : '_';
	}
	out[n] = '\0';
	if (n == 0)
		sigma_strlcpy(out, "job", size);
	else if (out[0] == '.')
		out[0] = '_';
}

int sigma_ckpt_path(const struct sigma_job_opts *opts,
		    const struct sigma_spank_conf *conf, const char *user,
		    const char *job_name, char *out, size_t size, char *err,
		    size_t errlen)
{
	char u[128], j[128];
	int rc;

	if (opts->ckpt_dir[0]) {
		if (opts->ckpt_dir[0] != '/')
			return sigma_set_err(
			    err, errlen, EINVAL,
			    "checkpoint directory %s is not absolute",
			    opts->ckpt_dir);
		if (sigma_strlcpy(out, opts->ckpt_dir, size) >= size)
			return sigma_set_err(err, errlen, ENAMETOOLONG,
					     "checkpoint directory too long");
		return 0;
	}
	if (!conf->ckpt_root[0])
		return sigma_set_err(
		    err, errlen, ENOENT,
		    "no --sigma-ckpt-dir and no ckpt_root in plugstack.conf");
	if (!user || !user[0])
		return sigma_set_err(err, errlen, EINVAL, "unknown user name");
	sigma_path_component(user, u, sizeof(u));
	sigma_path_component(job_name, j, sizeof(j));
	rc = sigma_snprintf(out, size, "%s/%s/%s", conf->ckpt_root, u, j);
	if (rc < 0)
		return sigma_set_err(err, errlen, -rc,
				     "checkpoint path under %s too long",
				     conf->ckpt_root);
	return 0;
}
