/*
 * spank_opts.c - the job's --sigma-* option values (spank/options.c
 * sigma_job_opts_set), the checkpoint path rules (spank/job.c
 * sigma_ckpt_path, sigma_ckpt_path_allowed, sigma_path_component) and the
 * AdminComment block the plugin writes from the options.
 *
 * FUZZ_SOURCES: spank/options.c spank/job.c spank/plugstack.c lib/contract.c lib/kv.c lib/str.c lib/log.c lib/file.c
 *
 * The input is lines:
 *   1  option: its first byte the option ('1' probe, '2' ckpt-dir,
 *      '3' ckpt-every, '4' spares, '5' max-restarts, '6' and up later
 *      ones or none; '0' none; any other byte its value mod 8), the rest
 *      its value
 *   2  ckpt_root (a plugstack.conf value)
 *   3  the user name
 *   4  the job name, also the AdminComment already there
 *   5  a second option, as line 1
 *   6  one more plugstack.conf word (default_probe=..., epilog_probe=...)
 *
 * Invariants:
 * - an accepted value is within the documented limits: probe off|quick|
 *   full, ckpt_every 1..SIGMA_CKPT_EVERY_MAX, spares 0..SIGMA_SPARES_MAX,
 *   max_restarts 0..SIGMA_RESTARTS_MAX; a checkpoint directory is
 *   absolute, shorter than PATH_MAX, without control bytes, and none of
 *   its components is empty, "." or ".." (only "/" has none);
 * - a refused value leaves the options as they were, with a terminated
 *   message; setting a value twice is the same as once (Slurm may);
 * - sigma_path_component always gives one clean component;
 * - the default checkpoint path (ckpt_root/USER/JOB) is made of clean
 *   components, and root's own check (sigma_ckpt_path_allowed, run again
 *   in the prolog) accepts it;
 * - sigma_ckpt_path_allowed accepts an accepted directory exactly when it
 *   is outside ckpt_root or inside ckpt_root/USER, compared component by
 *   component;
 * - the block of any accepted options fits SIGMA_BLOCK_MAX and the
 *   controller's parser (sigma_block_parse) reads it back equal, also
 *   when merged in front of an AdminComment.
 */
#include "fuzz.h"

#include <limits.h>

#include "sigma_spank.h"

static struct sigma_job_opts opts, before, again;
static struct sigma_spank_conf conf;

static int opt_id(const char *line)
{
	unsigned char c = (unsigned char)line[0];

	if (c >= '0' && c <= '9')
		return c - '0';
	return (int)(c % 8);
}

static void check_opts(const struct sigma_job_opts *o)
{
	CHECK(o->probe >= -1 && o->probe <= SIGMA_LEVEL_FULL);
	CHECK(o->ckpt_every == -1 ||
	      (o->ckpt_every >= 1 && o->ckpt_every <= SIGMA_CKPT_EVERY_MAX));
	CHECK(o->spares == -1 || (o->spares >= 0 && o->spares <= SIGMA_SPARES_MAX));
	CHECK(o->max_restarts == -1 ||
	      (o->max_restarts >= 0 && o->max_restarts <= SIGMA_RESTARTS_MAX));
	CHECK_TERMINATED(o->ckpt_dir);
	if (o->ckpt_dir[0]) {
		CHECK(fuzz_path_clean(o->ckpt_dir));
		for (const char *p = o->ckpt_dir; *p; p++)
			CHECK((unsigned char)*p >= 0x20 && *p != 0x7f);
	}
}

/* set one option from a line; checks the result */
static void set_one(const char *line)
{
	int id = opt_id(line), rc, rc2;
	const char *value = line[0] ? line + 1 : line;
	char err[128];

	before = opts;
	memset(err, 0x55, sizeof(err));
	rc = sigma_job_opts_set(&opts, id, value, err, sizeof(err));
	CHECK(rc == 0 || rc == -EINVAL || rc == -ERANGE ||
	      rc == -ENAMETOOLONG);
	check_opts(&opts);
	if (rc) {
		CHECK_ERR(err, sizeof(err));
		CHECK(!memcmp(&opts, &before, sizeof(opts)));
		return;
	}
	CHECK(id >= SIGMA_OPT_PROBE); /* 0 and unknown ids are refused */
	if (id == SIGMA_OPT_CKPT_DIR)
		CHECK(!strcmp(opts.ckpt_dir, value));
	again = opts;
	rc2 = sigma_job_opts_set(&again, id, value, err, sizeof(err));
	CHECK(rc2 == 0);
	CHECK(!memcmp(&opts, &again, sizeof(opts)));
}

/* root with its trailing slashes cut, "/" kept; false when it has an
 * empty, "." or ".." component inside (not what this model covers) */
static bool model_root(const char *root, char *out, size_t size)
{
	size_t n = strlen(root);

	while (n > 1 && root[n - 1] == '/')
		n--;
	if (n >= size)
		return false;
	memcpy(out, root, n);
	out[n] = '\0';
	return fuzz_path_clean(out);
}

/* sigma_ckpt_path_allowed of a clean path, component by component */
static bool model_allowed(const char *path, const char *root,
			  const char *user)
{
	char r[PATH_MAX], u[128];
	const char *rest;
	size_t n;

	if (!root[0])
		return true;
	if (!model_root(root, r, sizeof(r)))
		return true; /* not modelled: not asked */
	n = strlen(r);
	if (n == 1)
		rest = path + 1;
	else if (!strncmp(path, r, n) && (path[n] == '/' || !path[n]))
		rest = path[n] ? path + n + 1 : path + n;
	else
		return true; /* outside: made whole as the user */
	if (!user[0])
		return false;
	sigma_path_component(user, u, sizeof(u));
	n = strlen(u);
	return !strncmp(rest, u, n) && (rest[n] == '/' || !rest[n]);
}

static void check_paths(const char *root, const char *user, const char *job)
{
	char out[PATH_MAX], err[256], u[128], j[128], r[PATH_MAX];
	int rc;

	/* the components the plugin makes of names */
	sigma_path_component(user, u, sizeof(u));
	sigma_path_component(job, j, sizeof(j));
	CHECK(fuzz_component_clean(u) && fuzz_component_clean(j));
	sigma_path_component(job, j, 2);
	CHECK(strlen(j) == 1 && fuzz_component_clean(j));

	memset(err, 0x55, sizeof(err));
	rc = sigma_ckpt_path(&opts, &conf, user, job, out, sizeof(out), err,
			     sizeof(err));
	if (opts.ckpt_dir[0]) {
		CHECK(rc == 0 && !strcmp(out, opts.ckpt_dir));
		/* the submit-time check and the prolog's, on the same path */
		rc = sigma_ckpt_path_allowed(out, conf.ckpt_root, user, err,
					     sizeof(err));
		CHECK(rc == 0 || rc == -EPERM);
		if (rc)
			CHECK_ERR(err, sizeof(err));
		CHECK((rc == 0) == model_allowed(out, conf.ckpt_root, user));
		return;
	}
	if (!conf.ckpt_root[0]) {
		CHECK(rc == -ENOENT);
		return;
	}
	if (!user[0]) {
		CHECK(rc == -EINVAL);
		return;
	}
	CHECK(rc == 0 || rc == -ENAMETOOLONG);
	if (rc) {
		CHECK_ERR(err, sizeof(err));
		return;
	}
	/* ckpt_root, then exactly the two clean components */
	sigma_path_component(user, u, sizeof(u));
	sigma_path_component(job, j, sizeof(j));
	{
		/* ckpt_root without its trailing '/' ("/" counts as "") */
		size_t rl = strlen(conf.ckpt_root), ul = strlen(u);

		while (rl > 0 && conf.ckpt_root[rl - 1] == '/')
			rl--;
		CHECK(!strncmp(out, conf.ckpt_root, rl));
		CHECK(out[rl] == '/' && !strncmp(out + rl + 1, u, ul));
		CHECK(out[rl + 1 + ul] == '/' &&
		      !strcmp(out + rl + 2 + ul, j));
	}
	if (model_root(conf.ckpt_root, r, sizeof(r)) &&
	    !strcmp(r, conf.ckpt_root) && strcmp(r, "/"))
		CHECK(fuzz_path_clean(out));
	/* the prolog hands this path to sigma_ckpt_create, which checks it
	 * again: the plugin's own default must pass its own rule */
	rc = sigma_ckpt_path_allowed(out, conf.ckpt_root, user, err,
				     sizeof(err));
	CHECK(rc == 0);
}

static void check_block(const char *comment)
{
	char block[SIGMA_BLOCK_MAX], merged[SIGMA_BLOCK_MAX + 512];
	struct sigma_block b;
	size_t end = 0;
	int rc;

	rc = sigma_admin_block_format(&opts, &conf, block, sizeof(block));
	CHECK(rc == 0);
	memset(&b, 0, sizeof(b)); /* padding too: compared whole below */
	CHECK(sigma_block_parse(block, &b, &end) == 0);
	CHECK(end == strlen(block));
	CHECK(b.probe == sigma_job_probe_level(&opts, &conf));
	CHECK(b.spares == (opts.spares >= 0 ? opts.spares : 0));
	CHECK(b.max_restarts == (opts.max_restarts >= 0 ? opts.max_restarts : 0));
	CHECK(b.ckpt_every == (opts.ckpt_every >= 0 ? opts.ckpt_every
						     : SIGMA_CKPT_EVERY_DEFAULT));
	CHECK(sigma_job_epilog_level(&opts, &conf) >= SIGMA_LEVEL_OFF &&
	      sigma_job_epilog_level(&opts, &conf) <= SIGMA_LEVEL_FULL);

	if (strlen(comment) > 500)
		return;
	rc = sigma_admin_comment_merge(comment, block, merged, sizeof(merged));
	if (!strncmp(comment, SIGMA_BLOCK_PREFIX, strlen(SIGMA_BLOCK_PREFIX))) {
		CHECK(rc == 0);
		return;
	}
	CHECK(rc == 1);
	{
		struct sigma_block m;
		size_t mend = 0;

		memset(&m, 0, sizeof(m));
		CHECK(sigma_block_parse(merged, &m, &mend) == 0);
		CHECK(mend == end && !memcmp(&m, &b, sizeof(m)));
	}
}

FUZZ_INITIALIZE_QUIET

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf, *f[6], word[PATH_MAX + 32], err[256];
	char *words[2];
	int nwords = 0;

	fuzz_fields(data, size, &buf, f, 6);
	sigma_job_opts_init(&opts);
	set_one(f[0]);
	if (f[4])
		set_one(f[4]);

	snprintf(word, sizeof(word), "ckpt_root=%s", f[1] ? f[1] : "");
	words[nwords++] = word;
	if (f[5])
		words[nwords++] = f[5];
	if (sigma_spank_conf_parse(&conf, nwords, words, err, sizeof(err)) == 0) {
		check_paths(conf.ckpt_root, f[2] ? f[2] : "", f[3] ? f[3] : "");
		check_block(f[3] ? f[3] : "");
	}
	free(buf);
	return 0;
}
