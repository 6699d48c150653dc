/*
 * jobrec.c - the job protocol's records (jobrec.h).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sigma.h"
#include "attempt.h"
#include "jobrec.h"

/* a node name as Slurm gives it: letters, digits, '.', '_' and '-' */
static bool node_name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > SIGMA_JOBREC_NODE_MAX)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '.' || *s == '_' ||
		      *s == '-'))
			return false;
	return true;
}

/* the directory: absolute, a directory (not a link to one), ours */
static int dir_ok(const char *dir, char *err, size_t len)
{
	struct stat sb;

	if (dir[0] != '/')
		return sigma_set_err(err, len, EINVAL,
				     "SIGMA_JOB_RECORDS=%s: want an absolute path",
				     dir);
	if (lstat(dir, &sb) < 0)
		return sigma_set_err(err, len, errno,
				     "SIGMA_JOB_RECORDS=%s: %s", dir,
				     strerror(errno));
	if (!S_ISDIR(sb.st_mode))
		return sigma_set_err(err, len, ENOTDIR,
				     "SIGMA_JOB_RECORDS=%s: not a directory",
				     dir);
	if (sb.st_uid != geteuid())
		return sigma_set_err(err, len, EPERM,
				     "SIGMA_JOB_RECORDS=%s: owned by uid %u, not by this user",
				     dir, (unsigned)sb.st_uid);
	return 0;
}

/* the record's line, written over the old one (not synced: a record is
 * progress, worth nothing after a crash of its node) */
static void put(struct sigma_jobrec *r, long step, const char *state,
		int code)
{
	char line[256];
	int n = snprintf(line, sizeof(line),
			 "sigma-job %d rank=%d node=%s launch=%d step=%ld state=%s code=%d\n",
			 SIGMA_JOBREC_VERSION, r->rank, r->node, r->launch,
			 step, state, code);
	int fd = open(r->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW |
				      O_CLOEXEC,
		      0644);
	bool ok = fd >= 0 && n > 0 && (size_t)n < sizeof(line) &&
		  write(fd, line, (size_t)n) == n;

	if (fd >= 0 && close(fd) < 0)
		ok = false;
	if (ok && rename(r->tmp, r->path) < 0)
		ok = false;
	if (!ok && !r->warned) {
		sigma_warn("job record %s: %s (the launcher will not see this rank's progress)",
			   r->path, strerror(errno));
		r->warned = true;
	}
}

int sigma_jobrec_open(struct sigma_jobrec *r, int rank, char *err, size_t len)
{
	const char *dir = getenv("SIGMA_JOB_RECORDS");
	const char *node = getenv("SLURMD_NODENAME");
	struct sigma_attempt a;
	char host[256];
	int rc;

	memset(r, 0, sizeof(*r));
	if (!dir || !*dir)
		return 0;
	if ((rc = dir_ok(dir, err, len)))
		return rc;
	if ((rc = sigma_attempt_from_env(&a, err, len)))
		return rc;
	if (!node || !*node) {
		if (gethostname(host, sizeof(host)) < 0)
			host[0] = '\0';
		host[sizeof(host) - 1] = '\0';
		node = host;
	}
	if (!node_name_ok(node))
		return sigma_set_err(err, len, EINVAL,
				     "node name \"%.64s\": want up to %d letters, digits, '.', '_' or '-'",
				     node, SIGMA_JOBREC_NODE_MAX);
	if (sigma_snprintf(r->path, sizeof(r->path), "%s/rank-%d", dir, rank) ||
	    sigma_snprintf(r->tmp, sizeof(r->tmp), "%s/.rank-%d.tmp", dir,
			   rank))
		return sigma_set_err(err, len, ENAMETOOLONG,
				     "SIGMA_JOB_RECORDS=%s: path too long", dir);
	sigma_strlcpy(r->node, node, sizeof(r->node));
	r->rank = rank;
	r->launch = a.launch;
	r->on = true;
	put(r, 0, "start", -1);
	return 0;
}

void sigma_jobrec_step(struct sigma_jobrec *r, long step)
{
	uint64_t now;

	if (!r->on)
		return;
	now = sigma_now_ms();
	if (r->last_ms && now - r->last_ms < SIGMA_JOBREC_EVERY_MS)
		return;
	r->last_ms = now;
	put(r, step, "run", -1);
}

void sigma_jobrec_exit(struct sigma_jobrec *r, long step, int code)
{
	if (!r->on)
		return;
	put(r, step, "exit", code);
}
