/*
 * attempt.c - which attempt of a job's run this start is (attempt.h).
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "sigma.h"
#include "attempt.h"

/* name's value in [lo, hi]: 1 set, 0 unset, or -errno with err saying
 * so in the words sigma-train's settings use */
static int env_long(const char *name, long lo, long hi, long *out,
		    char *err, size_t len)
{
	const char *s = getenv(name);
	int rc;

	if (!s || !*s)
		return 0;
	rc = sigma_parse_long_named(name, s, lo, hi, out, err, len);
	return rc ? rc : 1;
}

int sigma_attempt_from_env(struct sigma_attempt *a, char *err, size_t len)
{
	const char *rq = getenv("SLURM_RESTART_COUNT");
	long v;
	int rc;

	memset(a, 0, sizeof(*a));
	if (rq && *rq && sigma_parse_long(rq, 1, LONG_MAX, &v) == 0) {
		a->requeues = v;
		a->resume = true;
		a->attempt = v > SIGMA_ATTEMPT_MAX ? SIGMA_ATTEMPT_MAX : (int)v;
	}
	/* the plugin's count wins over Slurm's own */
	rc = env_long(SIGMA_ENV_ATTEMPT, 0, SIGMA_ATTEMPT_MAX, &v, err, len);
	if (rc < 0)
		return rc;
	if (rc) {
		a->resume |= v > 0;
		a->attempt = (int)v;
	}
	/*
	 * A relaunch inside the allocation continues this job's run, as a
	 * requeue does, in an attempt of its own: sigma-launch counts its
	 * launches over the job's life, so attempt + launch only grows.
	 */
	rc = env_long(SIGMA_ENV_LAUNCH, 0, SIGMA_ATTEMPT_MAX / 2, &v, err, len);
	if (rc < 0)
		return rc;
	if (rc) {
		a->launch = (int)v;
		a->resume |= v > 0;
		v += a->attempt;
		a->attempt = v > SIGMA_ATTEMPT_MAX ? SIGMA_ATTEMPT_MAX : (int)v;
	}
	return 0;
}

int sigma_attempt_past(int attempt, int seen)
{
	if (seen <= attempt)
		return attempt;
	return seen >= SIGMA_ATTEMPT_MAX ? SIGMA_ATTEMPT_MAX : seen + 1;
}
