/*
 * ckpt_dir.c - what a checkpoint directory holds (ckpt.h): the names of
 * full and differential checkpoints, their listing in (attempt, step)
 * order, and retention (pruning, and the
 * differentials an abandoned run left).
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sigma.h"
#include "ckpt.h"
#include "ckpt_internal.h"
#include "run.h"
#include "seal.h"

int ckpt_remove_published(const char *path)
{
	int rc = unlink(path);

	seal_remove(path);
	return rc;
}

bool ckpt_of_dir_run(const char *dir, const char *path,
		     const struct ckpt_state *st)
{
	struct run_manifest rm;
	char why[512];

	if (run_read(dir, &rm, why, sizeof(why)) || !strcmp(rm.id, st->run))
		return true;
	sigma_warn("checkpoint %s refused: it belongs to run %s, and %s holds run %s",
		   path, *st->run ? st->run : "(none named)", dir, rm.id);
	return false;
}

/* ---- full checkpoints' names ---------------------------------------------- */

int ckpt_path(char *buf, size_t len, const char *dir, long step, int attempt)
{
	if (step < 0 || step > 99999999L || attempt < 0 ||
	    attempt > CKPT_ATTEMPT_MAX)
		return -EINVAL;
	if (attempt == 0)
		return sigma_snprintf(buf, len, "%s/ckpt-%08ld.h5", dir, step);
	return sigma_snprintf(buf, len, "%s/ckpt-%08ld-a%d.h5", dir, step,
			      attempt);
}

/* ckpt-SSSSSSSS.h5 (attempt 0) or ckpt-SSSSSSSS-aN.h5 (N > 0, no
 * leading zero): exactly the names ckpt_path makes */
static bool parse_name(const char *name, struct ckpt_entry *e)
{
	const char *p = name + 5;
	long step = 0, attempt = 0;
	int digits = 0;

	if (strncmp(name, "ckpt-", 5))
		return false;
	for (int i = 0; i < 8; i++, p++) {
		if (*p < '0' || *p > '9')
			return false;
		step = step * 10 + (*p - '0');
	}
	if (p[0] == '-' && p[1] == 'a') {
		for (p += 2; *p >= '0' && *p <= '9' && digits < 8; p++) {
			if (digits == 0 && *p == '0')
				return false;
			attempt = attempt * 10 + (*p - '0');
			digits++;
		}
		if (digits == 0 || attempt > CKPT_ATTEMPT_MAX)
			return false;
	}
	if (strcmp(p, ".h5"))
		return false;
	e->step = step;
	e->attempt = (int)attempt;
	return true;
}

static int cmp_entry(const void *a, const void *b)
{
	const struct ckpt_entry *x = a, *y = b;

	if (x->attempt != y->attempt)
		return x->attempt < y->attempt ? 1 : -1;
	return x->step < y->step ? 1 : x->step > y->step ? -1 : 0;
}

int ckpt_list_all(const char *dir, struct ckpt_entry **out)
{
	struct ckpt_entry *e = malloc(sizeof(*e) * CKPT_MAX_LISTED);
	DIR *d;
	struct dirent *de;
	int n = 0;

	*out = NULL;
	if (!e)
		return -ENOMEM;
	d = opendir(dir);
	if (!d) {
		int rc = -errno;

		free(e);
		return rc;
	}
	while ((de = readdir(d)) && n < CKPT_MAX_LISTED)
		if (parse_name(de->d_name, &e[n]))
			n++;
	closedir(d);
	qsort(e, n, sizeof(*e), cmp_entry);
	*out = e;
	return n;
}

int ckpt_list(const char *dir, struct ckpt_entry *out, int max)
{
	struct ckpt_entry *e;
	int n = ckpt_list_all(dir, &e);

	if (n < 0)
		return n;
	if (n > max)
		n = max;
	memcpy(out, e, sizeof(*e) * n);
	free(e);
	return n;
}

long ckpt_newest(const char *dir, int *attempt)
{
	struct ckpt_entry *e;
	int n = ckpt_list_all(dir, &e);
	long step = n > 0 ? e[0].step : -1;

	if (attempt)
		*attempt = n > 0 ? e[0].attempt : -1;
	free(e);
	return step;
}

/* ---- differentials' names ------------------------------------------------- */

static int cmp_diff_desc(const void *a, const void *b)
{
	const struct ckpt_diff_name *x = a, *y = b;

	if (x->attempt != y->attempt)
		return x->attempt < y->attempt ? 1 : -1;
	return x->step < y->step ? 1 : x->step > y->step ? -1 : 0;
}

/* 8 decimal digits at s */
static bool digits8(const char *s, long *v)
{
	*v = 0;
	for (int i = 0; i < 8; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		*v = *v * 10 + (s[i] - '0');
	}
	return true;
}

static bool parse_diff_name(const char *name, struct ckpt_diff_name *dn)
{
	const char *t = name + 27;
	long a = 0;

	if (strlen(name) < 30 || strncmp(name, "diff-", 5) ||
	    !digits8(name + 5, &dn->step) || strncmp(name + 13, "-base-", 6) ||
	    !digits8(name + 19, &dn->base) || dn->base >= dn->step)
		return false;
	if (!strcmp(t, ".h5")) {
		dn->attempt = 0;
		return true;
	}
	if (strncmp(t, "-a", 2) || t[2] < '1' || t[2] > '9')
		return false;
	for (t += 2; *t >= '0' && *t <= '9'; t++) {
		a = a * 10 + (*t - '0');
		if (a > CKPT_ATTEMPT_MAX)
			return false;
	}
	dn->attempt = (int)a;
	return !strcmp(t, ".h5");
}

int ckpt_list_diffs(const char *dir, struct ckpt_diff_name *out, int max)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	if (!d)
		return -errno;
	while ((e = readdir(d)) && n < max)
		if (parse_diff_name(e->d_name, &out[n]))
			n++;
	closedir(d);
	qsort(out, n, sizeof(*out), cmp_diff_desc);
	return n;
}

int ckpt_diff_path(char *buf, size_t len, const char *dir,
		   const struct ckpt_diff_name *dn)
{
	if (dn->attempt == 0)
		return sigma_snprintf(buf, len, "%s/diff-%08ld-base-%08ld.h5",
				      dir, dn->step, dn->base);
	return sigma_snprintf(buf, len, "%s/diff-%08ld-base-%08ld-a%d.h5",
			      dir, dn->step, dn->base, dn->attempt);
}

bool ckpt_is_published_name(const char *name)
{
	char base[NAME_MAX + 1];
	size_t n = strlen(name), sl = strlen(SEAL_SUFFIX);
	struct ckpt_entry e;
	struct ckpt_diff_name dn;

	if (n > sl && !strcmp(name + n - sl, SEAL_SUFFIX))
		n -= sl;
	if (n >= sizeof(base))
		return false;
	memcpy(base, name, n);
	base[n] = '\0';
	return parse_name(base, &e) || parse_diff_name(base, &dn);
}

bool ckpt_is_diff(const char *path)
{
	const char *slash = strrchr(path, '/');

	return !strncmp(slash ? slash + 1 : path, "diff-", 5);
}

long ckpt_diff_newest(const char *dir, int *attempt)
{
	struct ckpt_diff_name *dn = malloc(sizeof(*dn) * CKPT_MAX_LISTED);
	int n = dn ? ckpt_list_diffs(dir, dn, CKPT_MAX_LISTED) : -ENOMEM;
	long step = n > 0 ? dn[0].step : -1;

	if (attempt)
		*attempt = n > 0 ? dn[0].attempt : -1;
	free(dn);
	return step;
}

long ckpt_diff_newest_step(const char *dir)
{
	return ckpt_diff_newest(dir, NULL);
}

/* ---- retention ------------------------------------------------------------ */

/* whether a differential of dir names base step s */
static bool diff_pins(const struct ckpt_diff_name *dn, int nd, long s)
{
	for (int i = 0; i < nd; i++)
		if (dn[i].base == s)
			return true;
	return false;
}

/*
 * Keep the newest keep differentials of dir, and none whose base (one of
 * the full checkpoints steps[0..ns)) is gone or whose step has a full
 * checkpoint too; dn[0..*kept) receives those kept, whose bases
 * ckpt_prune must keep too.
 */
static int diff_prune(const char *dir, int keep, const long *steps, int ns,
		      struct ckpt_diff_name *dn, int *kept)
{
	int nd = ckpt_list_diffs(dir, dn, CKPT_MAX_LISTED), k = 0;

	for (int i = 0; i < nd; i++) {
		bool has_base = false, has_full = false;
		char p[PATH_MAX];

		/* a full checkpoint of the same step supersedes it */
		for (int j = 0; j < ns; j++) {
			has_base |= steps[j] == dn[i].base;
			has_full |= steps[j] == dn[i].step;
		}
		if (k < keep && has_base && !has_full) {
			dn[k++] = dn[i];
			continue;
		}
		if (!ckpt_diff_path(p, sizeof(p), dir, &dn[i]))
			ckpt_remove_published(p);
	}
	*kept = k;
	return nd < 0 ? nd : 0;
}

/* shard-SSSSSSSS[-aN]-RRRRR.h5: its step and attempt */
static bool parse_shard(const char *name, long *step, int *attempt)
{
	char tail[16];
	int n = 0;

	*attempt = 0;
	if (sscanf(name, "shard-%8ld-a%d-%*5d%n", step, attempt, &n) == 2 &&
	    n && !strcmp(name + n, ".h5"))
		return *attempt > 0;
	*attempt = 0;
	n = 0;
	return sscanf(name, "shard-%8ld-%*5d%n", step, &n) == 1 && n &&
	       sscanf(name + n, "%15s", tail) == 1 && !strcmp(tail, ".h5");
}

/*
 * The parts of sharded steps whose index is gone (pruned, or never
 * written) and that are older than the newest index: a part of a step
 * still being written is newer than every index, and stays.
 */
static void prune_shards(const char *dir, const struct ckpt_entry *newest)
{
	DIR *dp = opendir(dir);
	struct dirent *de;

	if (!dp)
		return;
	while ((de = readdir(dp))) {
		char p[PATH_MAX];
		struct stat sb;
		long step;
		int att;

		if (!parse_shard(de->d_name, &step, &att) ||
		    att > newest->attempt ||
		    (att == newest->attempt && step >= newest->step))
			continue;
		if (!ckpt_path(p, sizeof(p), dir, step, att) &&
		    stat(p, &sb) == 0)
			continue; /* its index is kept */
		if (!sigma_snprintf(p, sizeof(p), "%s/%s", dir, de->d_name))
			ckpt_remove_published(p);
	}
	closedir(dp);
}

int ckpt_prune(const char *dir, int keep)
{
	struct ckpt_entry *e;
	struct ckpt_diff_name *dn = malloc(sizeof(*dn) * CKPT_MAX_LISTED);
	long *steps = NULL;
	int n = ckpt_list_all(dir, &e), nd = 0;

	if (n >= 0)
		steps = malloc(sizeof(long) * (n > 0 ? n : 1));
	if (!dn || (n >= 0 && !steps)) {
		free(e), free(dn), free(steps);
		return -ENOMEM;
	}
	for (int i = 0; i < n; i++)
		steps[i] = e[i].step;
	/* differentials first: the bases of those kept stay */
	if (n >= 0)
		diff_prune(dir, keep, steps, n, dn, &nd);
	for (int i = keep; i < n; i++) {
		char p[PATH_MAX];

		if (diff_pins(dn, nd, e[i].step))
			continue;
		if (!ckpt_path(p, sizeof(p), dir, e[i].step, e[i].attempt))
			ckpt_remove_published(p);
	}
	if (n > 0)
		prune_shards(dir, &e[0]);
	free(e);
	free(steps);
	free(dn);
	return n < 0 ? n : 0;
}

int ckpt_diff_discard_after(const char *dir, long step)
{
	struct ckpt_diff_name *dn = malloc(sizeof(*dn) * CKPT_MAX_LISTED);
	int nd, removed = 0;

	if (!dn)
		return -ENOMEM;
	nd = ckpt_list_diffs(dir, dn, CKPT_MAX_LISTED);
	for (int i = 0; i < nd; i++) {
		char p[PATH_MAX];

		if (dn[i].step > step &&
		    !ckpt_diff_path(p, sizeof(p), dir, &dn[i]) &&
		    ckpt_remove_published(p) == 0)
			removed++;
	}
	free(dn);
	return nd < 0 ? nd : removed;
}
