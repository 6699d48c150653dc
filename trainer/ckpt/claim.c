/*
 * claim.c - the run a start continues, and its directories (claim.h).
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sigma.h"
#include "attempt.h"
#include "ckpt.h"
#include "claim.h"

/* what dir holds: whether any checkpoint, the newest (attempt, step) */
struct holding {
	bool any;
	long step;
	int attempt;
};

static struct holding dir_holding(const char *dir)
{
	struct holding h = { false, -1, -1 };
	int fa = -1, da = -1;
	long fs = ckpt_newest(dir, &fa), ds = ckpt_diff_newest(dir, &da);

	if (fs >= 0 || ds >= 0)
		h.any = true;
	if (fs >= 0)
		h.step = fs, h.attempt = fa;
	if (ds >= 0 && (da > h.attempt || (da == h.attempt && ds > h.step)))
		h.step = ds, h.attempt = da;
	return h;
}

/* dir/run-ID, or dir/run-ID.N when taken; made, empty */
static int make_aside(const char *dir, const char *id, char *to, size_t tlen)
{
	for (int i = 0; i < 100; i++) {
		int rc = i == 0 ? sigma_snprintf(to, tlen, "%s/" RUN_ASIDE "%s",
						 dir, id)
				: sigma_snprintf(to, tlen,
						 "%s/" RUN_ASIDE "%s.%d", dir,
						 id, i);

		if (rc)
			return rc;
		if (mkdir(to, 0755) == 0)
			return 0;
		if (errno != EEXIST)
			return -errno;
	}
	return -EEXIST;
}

/* every checkpoint, seal and the manifest of dir into a new dir/run-ID */
static int move_aside(const char *dir, const char *id, char *to, size_t tlen,
		      char *err, size_t len)
{
	DIR *dh;
	struct dirent *de;
	int rc = make_aside(dir, id, to, tlen);

	if (rc)
		return sigma_set_err(err, len, -rc,
				     "%s: cannot make a directory for run %s: %s",
				     dir, id, strerror(-rc));
	dh = opendir(dir);
	if (!dh)
		return sigma_set_err(err, len, errno, "%s: %s", dir,
				     strerror(errno));
	while ((de = readdir(dh))) {
		char from[PATH_MAX], dst[PATH_MAX];

		if (strcmp(de->d_name, RUN_FILE) &&
		    !ckpt_is_published_name(de->d_name))
			continue;
		if (sigma_snprintf(from, sizeof(from), "%s/%s", dir,
				   de->d_name) ||
		    sigma_snprintf(dst, sizeof(dst), "%s/%s", to, de->d_name)) {
			rc = -ENAMETOOLONG;
			break;
		}
		if (rename(from, dst) < 0) {
			rc = -errno;
			sigma_set_err(err, len, errno,
				      "cannot move %s to %s: %s", from, to,
				      strerror(errno));
			break;
		}
	}
	closedir(dh);
	if (rc == -ENAMETOOLONG)
		sigma_set_err(err, len, ENAMETOOLONG, "%s: path too long", to);
	return rc;
}

/* the run of dir's newest checkpoint, for a directory without dir/run */
static int adopt(const char *dir, char *id, size_t idlen, char *err,
		 size_t len)
{
	struct ckpt_entry e;
	struct ckpt_state st;
	char p[PATH_MAX], why[1024];

	if (ckpt_list(dir, &e, 1) != 1 ||
	    ckpt_path(p, sizeof(p), dir, e.step, e.attempt))
		return sigma_set_err(err, len, EBADMSG,
				     "%s holds differential checkpoints only and no run manifest (%s/%s)",
				     dir, dir, RUN_FILE);
	if (ckpt_peek(p, &st, why, sizeof(why)))
		return sigma_set_err(err, len, EBADMSG,
				     "%s has no run manifest (%s/%s) and its newest checkpoint cannot say its run: %s",
				     dir, dir, RUN_FILE, why);
	if (!run_id_valid(st.run))
		return sigma_set_err(err, len, EBADMSG,
				     "%s has no run manifest (%s/%s) and its newest checkpoint %s names no run",
				     dir, dir, RUN_FILE, p);
	sigma_strlcpy(id, st.run, idlen);
	return 0;
}

static void say(struct claim *c, const char *fmt, ...) SIGMA_PRINTF(2, 3);
static void say(struct claim *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->note, sizeof(c->note), fmt, ap);
	va_end(ap);
}

/* a new run in dir: CLAIM_FRESH refuses over another run's files */
static int claim_new(const char *dir, enum claim_how how, const char *job,
		     const struct run_manifest *old, const struct holding *h,
		     struct claim *c, char *err, size_t len)
{
	const char *other = *old->id ? old->id : "with no manifest";
	int rc;

	if (h->any && how == CLAIM_FRESH)
		return sigma_set_err(err, len, EEXIST,
				     "%s holds the checkpoints of run %s (newest step %ld, attempt %d). "
				     "--resume continues that run; --new-run starts a new run here and moves run %s's files to %s/%s%s",
				     dir, other, h->step, h->attempt, other, dir,
				     RUN_ASIDE, *old->id ? old->id : "unnamed-TIME");
	rc = run_new_id(c->id, sizeof(c->id), job);
	if (rc)
		return sigma_set_err(err, len, -rc, "cannot make a run id: %s",
				     strerror(-rc));
	if (h->any) {
		char tag[RUN_ID_MAX];

		if (*old->id)
			sigma_strlcpy(tag, old->id, sizeof(tag));
		else
			snprintf(tag, sizeof(tag), "unnamed-%lld",
				 (long long)time(NULL));
		rc = move_aside(dir, tag, c->aside, sizeof(c->aside), err, len);
		if (rc)
			return rc;
		say(c, "run %s: new; run %s's checkpoints moved to %s", c->id,
		    other, c->aside);
	} else if (*old->id) {
		say(c, "run %s: new, in place of run %s, which left no checkpoint",
		    c->id, old->id);
	} else {
		say(c, "run %s: new", c->id);
	}
	return 0;
}

static int decide(const char *dir, enum claim_how how, const char *job,
		  int attempt, struct claim *c, char *err, size_t len)
{
	struct run_manifest old = { "", "" }, now;
	struct holding h = dir_holding(dir);
	const char *me = job && *job ? job : "-";
	int rc = run_read(dir, &old, err, len);

	memset(c, 0, sizeof(*c));
	c->attempt = attempt;
	if (rc && rc != -ENOENT)
		return rc;
	if (how == CLAIM_FRESH || how == CLAIM_BESIDE || (!h.any && !*old.id)) {
		rc = claim_new(dir, how, job, &old, &h, c, err, len);
	} else if (!*old.id) {
		rc = adopt(dir, c->id, sizeof(c->id), err, len);
		if (rc == 0)
			say(c, "run %s: continued (named by its newest checkpoint; %s had no manifest)",
			    c->id, dir);
	} else if (how == CLAIM_RESTART && run_job_valid(job) &&
		   strcmp(old.job, "-") && strcmp(old.job, job)) {
		return sigma_set_err(err, len, ESTALE,
				     "%s now holds run %s for job %s; this restart of job %s does not continue it (start a new job with --resume to do so)",
				     dir, old.id, old.job, job);
	} else {
		sigma_strlcpy(c->id, old.id, sizeof(c->id));
		say(c, "run %s: continued%s%s", c->id,
		    strcmp(old.job, me) ? " by job " : "",
		    strcmp(old.job, me) ? me : "");
	}
	if (rc)
		return rc;
	/*
	 * The attempt orders after everything this run wrote here: h, as
	 * read before, unless another run's files were just moved aside
	 */
	if (!*c->aside && h.any)
		c->attempt = sigma_attempt_past(c->attempt, h.attempt);
	sigma_strlcpy(now.id, c->id, sizeof(now.id));
	sigma_strlcpy(now.job, me, sizeof(now.job));
	if (strcmp(now.id, old.id) || strcmp(now.job, old.job))
		return run_write(dir, &now, err, len);
	return 0;
}

bool claim_holds(const char *dir, const char *id)
{
	struct run_manifest rm;
	char err[512];

	return run_read(dir, &rm, err, sizeof(err)) == 0 &&
	       !strcmp(rm.id, id);
}

int claim_local(const char *dir, const char *id, const char *job, char *err,
		size_t len)
{
	struct run_manifest rm = { "", "-" };
	bool removed = false;
	int rc;

	if (claim_holds(dir, id))
		return 0;
	if (dir_holding(dir).any) {
		removed = true;
		rc = ckpt_prune(dir, 0);
		if (rc)
			return sigma_set_err(err, len, -rc,
					     "%s: cannot remove another run's copies: %s",
					     dir, strerror(-rc));
	}
	sigma_strlcpy(rm.id, id, sizeof(rm.id));
	if (job && *job)
		sigma_strlcpy(rm.job, job, sizeof(rm.job));
	rc = run_write(dir, &rm, err, len);
	return rc ? rc : removed;
}

/*
 * Two starts in one directory at the same moment (two jobs of one name)
 * decide one after the other: an exclusive flock(2) on the directory,
 * waited for up to CLAIM_LOCK_S. A file system that does not lock
 * directories (some NFS) decides unlocked. The descriptor, or -1.
 */
#define CLAIM_LOCK_S 60

static int lock_dir(const char *dir)
{
	int fd;

	if (sigma_mkdir_p(dir, 0755))
		return -1; /* decide() says why */
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	for (int i = 0; i < CLAIM_LOCK_S * 10; i++) {
		if (flock(fd, LOCK_EX | LOCK_NB) == 0)
			return fd;
		if (errno != EWOULDBLOCK && errno != EINTR)
			break;
		usleep(100 * 1000);
	}
	if (errno == EWOULDBLOCK)
		sigma_warn("%s: another start has held its lock for %d s; deciding without it",
			   dir, CLAIM_LOCK_S);
	close(fd);
	return -1;
}

int claim_shared(const char *dir, enum claim_how how, const char *job,
		 int attempt, struct claim *c, char *err, size_t len)
{
	int fd = lock_dir(dir);
	int rc = decide(dir, how, job, attempt, c, err, len);

	if (fd >= 0)
		close(fd); /* and with it the lock */
	return rc;
}
