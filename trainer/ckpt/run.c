/*
 * run.c - run ids and the run manifest of a checkpoint directory (run.h).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "sigma.h"
#include "run.h"
#include "seal.h"

#define RUN_JOB_DIGITS 20

static bool digits(const char *s, size_t n)
{
	if (n == 0 || n > RUN_JOB_DIGITS)
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return true;
}

bool run_job_valid(const char *job)
{
	return job && digits(job, strlen(job));
}

const char *run_slurm_job(void)
{
	const char *j = getenv("SLURM_JOB_ID");

	return run_job_valid(j) ? j : NULL;
}

bool run_id_valid(const char *id)
{
	const char *dash = id ? strrchr(id, '-') : NULL;
	size_t pre;

	if (!dash || strlen(dash + 1) != 16)
		return false;
	pre = (size_t)(dash - id);
	if (!(pre == 5 && !strncmp(id, "local", 5)) && !digits(id, pre))
		return false;
	for (const char *p = dash + 1; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return false;
	return true;
}

int run_new_id(char *id, size_t len, const char *job)
{
	uint64_t r;
	ssize_t n;

	if (job && *job && !run_job_valid(job))
		return -EINVAL;
	do
		n = getrandom(&r, sizeof(r), 0);
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof(r))
		return n < 0 ? -errno : -EIO;
	return sigma_snprintf(id, len, "%s-%016" PRIx64,
			      job && *job ? job : "local", r);
}

static int manifest_path(char *buf, size_t n, const char *dir)
{
	return sigma_snprintf(buf, n, "%s/%s", dir, RUN_FILE);
}

/* "sigma-run 1 ID JOB\n" exactly, nothing after it */
static bool parse_line(char *line, size_t n, struct run_manifest *rm)
{
	static const char head[] = RUN_MAGIC " 1 ";
	const size_t hl = sizeof(head) - 1;
	char *id, *job, *sp;

	_Static_assert(RUN_VERSION == 1, "the head names version 1");
	if (n < hl + 2 || n >= RUN_LINE_MAX || line[n - 1] != '\n' ||
	    memchr(line, '\0', n) || memcmp(line, head, hl))
		return false;
	line[n - 1] = '\0';
	id = line + hl;
	sp = strchr(id, ' ');
	if (!sp)
		return false;
	*sp = '\0';
	job = sp + 1;
	if (strchr(job, ' ') || strchr(job, '\n') || !run_id_valid(id) ||
	    (strcmp(job, "-") && !run_job_valid(job)))
		return false;
	sigma_strlcpy(rm->id, id, sizeof(rm->id));
	sigma_strlcpy(rm->job, job, sizeof(rm->job));
	return true;
}

int run_read(const char *dir, struct run_manifest *rm, char *err, size_t len)
{
	char path[PATH_MAX], line[RUN_LINE_MAX];
	size_t n = 0;
	int rc;

	if (manifest_path(path, sizeof(path), dir))
		return sigma_set_err(err, len, EBADMSG, "%s: path too long",
				     dir);
	rc = seal_read_small(path, line, sizeof(line), &n, err, len);
	if (rc)
		return rc;
	if (!parse_line(line, n, rm))
		return sigma_set_err(err, len, EBADMSG,
				     "%s: not a run manifest of version %d (one line: %s %d RUN-ID JOB-ID)",
				     path, RUN_VERSION, RUN_MAGIC, RUN_VERSION);
	return 0;
}

int run_write(const char *dir, const struct run_manifest *rm, char *err,
	      size_t len)
{
	char path[PATH_MAX], line[RUN_LINE_MAX];
	int rc, n;

	if (!run_id_valid(rm->id) ||
	    (strcmp(rm->job, "-") && !run_job_valid(rm->job)))
		return sigma_set_err(err, len, EINVAL,
				     "run id %s of job %s is not well formed",
				     rm->id, rm->job);
	if (manifest_path(path, sizeof(path), dir))
		return sigma_set_err(err, len, ENAMETOOLONG,
				     "%s: path too long", dir);
	rc = sigma_mkdir_p(dir, 0755);
	if (rc)
		return sigma_set_err(err, len, -rc, "%s: cannot create: %s",
				     dir, strerror(-rc));
	n = snprintf(line, sizeof(line), "%s %d %s %s\n", RUN_MAGIC,
		     RUN_VERSION, rm->id, rm->job);
	rc = sigma_file_write_atomic(path, line, (size_t)n, 0644);
	if (rc)
		return sigma_set_err(err, len, -rc, "%s: cannot write: %s",
				     path, strerror(-rc));
	return 0;
}
