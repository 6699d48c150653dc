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

int sigma_admin_block_format(const struct sigma_job_opts *opts,
			     const struct sigma_spank_conf *conf, char *buf,
			     size_t size)
{
	struct sigma_block b;

	sigma_block_init(&b);
	b.probe = sigma_job_probe_level(opts, conf);
	if (opts->spares >= 0)
		b.spares = opts->spares;
	if (opts->max_restarts >= 0)
		b.max_restarts = opts->max_restarts;
	if (opts->ckpt_every >= 0)
		b.ckpt_every = opts->ckpt_every;
	if (opts->on_warning >= 0)
		b.on_warning = opts->on_warning;
	if (opts->restart >= 0)
		b.restart = opts->restart;
	if (opts->restart == SIGMA_RESTART_IN_JOB)
		b.job_spares = opts->job_spares >= 0 ? opts->job_spares : 1;
	return sigma_block_format(&b, buf, size);
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

/* the length of ckpt_root without trailing slashes ("/" stays 1) */
static size_t job_root_len(const char *ckpt_root)
{
	size_t n = strlen(ckpt_root);

	while (n > 1 && ckpt_root[n - 1] == '/')
		n--;
	return n;
}

int sigma_ckpt_path(const struct sigma_job_opts *opts,
		    const struct sigma_spank_conf *conf, const char *user,
		    const char *job_name, char *out, size_t size, char *err,
		    size_t errlen)
{
	char u[128], j[128];
	size_t n;
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
	/* ckpt_root as the rule sees it: no trailing '/' ("/" is "") */
	n = job_root_len(conf->ckpt_root);
	rc = sigma_snprintf(out, size, "%.*s/%s/%s",
			    n == 1 ? 0 : (int)n, conf->ckpt_root, u, j);
	if (rc < 0)
		return sigma_set_err(err, errlen, -rc,
				     "checkpoint path under %s too long",
				     conf->ckpt_root);
	return 0;
}

const char *sigma_ckpt_under_root(const char *path, const char *ckpt_root)
{
	size_t n;

	if (!ckpt_root || !ckpt_root[0])
		return NULL;
	n = job_root_len(ckpt_root);
	if (n == 1)
		return path[0] == '/' ? path + 1 : NULL;
	if (strncmp(path, ckpt_root, n))
		return NULL;
	if (path[n] == '\0')
		return path + n;
	return path[n] == '/' ? path + n + 1 : NULL;
}

int sigma_ckpt_path_allowed(const char *path, const char *ckpt_root,
			    const char *user, char *err, size_t errlen)
{
	const char *rest = sigma_ckpt_under_root(path, ckpt_root);
	char u[128];
	size_t n;

	if (!rest)
		return 0; /* outside ckpt_root: made whole as the user */
	sigma_path_component(user ? user : "", u, sizeof(u));
	n = strlen(u);
	if (user && user[0] && !strncmp(rest, u, n) &&
	    (rest[n] == '\0' || rest[n] == '/'))
		return 0;
	return sigma_set_err(
	    err, errlen, EPERM,
	    "--sigma-ckpt-dir=%s: under ckpt_root a job may use only its user's own directory %.*s/%s",
	    path, (int)job_root_len(ckpt_root), ckpt_root, u);
}
