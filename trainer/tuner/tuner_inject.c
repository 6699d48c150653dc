/*
 * tuner_inject.c - fail-slow injection for the auto-tuner's tests
 * (tuner_inject.h).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sigma.h"
#include "tuner_inject.h"

/* one "slow:RANK:FACTOR[@FROM-TO]" or "link:RANK:USEC[@FROM-TO]" into f */
static int parse_one(const char *tok, struct tuner_fault *f, char *err,
		     size_t len)
{
	char tail[64] = "";
	int used = 0;

	f->from = 1;
	f->to = LONG_MAX;
	f->kind = strncmp(tok, "link:", 5) ? TUNER_F_SLOW : TUNER_F_LINK;
	if (sscanf(tok, f->kind == TUNER_F_LINK ? "link:%d:%lf%n" : "slow:%d:%lf%n",
		   &f->rank, &f->factor, &used) < 2)
		return sigma_set_err(
		    err, len, EINVAL,
		    "\"%s\": want slow:RANK:FACTOR or link:RANK:USEC, then [@FROM-TO]",
		    tok);
	if (tok[used] == '@' &&
	    (sscanf(tok + used, "@%ld-%ld%63s", &f->from, &f->to, tail) != 2 ||
	     f->from < 1 || f->to < f->from))
		return sigma_set_err(err, len, EINVAL,
				     "\"%s\": bad step range (want @FROM-TO, 1 <= FROM <= TO)",
				     tok);
	if (tok[used] && tok[used] != '@')
		return sigma_set_err(err, len, EINVAL,
				     "\"%s\": unexpected \"%s\"", tok,
				     tok + used);
	if (f->rank < 0)
		return sigma_set_err(err, len, EINVAL, "\"%s\": want a rank >= 0",
				     tok);
	if (f->kind == TUNER_F_SLOW && !(f->factor >= 1.0 && f->factor <= 100.0))
		return sigma_set_err(err, len, EINVAL,
				     "\"%s\": want a factor in [1, 100]", tok);
	if (f->kind == TUNER_F_LINK && !(f->factor >= 0 && f->factor <= 1e6))
		return sigma_set_err(err, len, EINVAL,
				     "\"%s\": want a delay in [0, 1000000] microseconds",
				     tok);
	return 0;
}

int tuner_inject_parse(struct tuner_inject *in, const char *spec, char *err,
		       size_t len)
{
	char buf[1024], *save = NULL, *tok;

	in->n = 0;
	if (sigma_strlcpy(buf, spec, sizeof(buf)) >= sizeof(buf))
		return sigma_set_err(err, len, EINVAL, "too long");
	for (tok = strtok_r(buf, ", \t\n", &save); tok;
	     tok = strtok_r(NULL, ", \t\n", &save)) {
		if (in->n == TUNER_INJECT_MAX)
			return sigma_set_err(err, len, EINVAL,
					     "more than %d faults",
					     TUNER_INJECT_MAX);
		if (parse_one(tok, &in->f[in->n], err, len))
			return -EINVAL;
		in->n++;
	}
	return 0;
}

int tuner_inject_init(struct tuner_inject *in, char *err, size_t len)
{
	const char *spec = getenv("SIGMA_TUNER_INJECT");
	const char *path = getenv("SIGMA_TUNER_INJECT_FILE");
	char e[256];

	memset(in, 0, sizeof(*in));
	if (path && sigma_strlcpy(in->path, path, sizeof(in->path)) >=
			    sizeof(in->path))
		return sigma_set_err(err, len, EINVAL,
				     "SIGMA_TUNER_INJECT_FILE is too long");
	if (spec && tuner_inject_parse(in, spec, e, sizeof(e)))
		return sigma_set_err(err, len, EINVAL, "SIGMA_TUNER_INJECT: %s",
				     e);
	return 0;
}

/* the file, when it changed since the last look */
static void reread(struct tuner_inject *in)
{
	struct stat sb;
	char buf[1024], e[256];
	size_t n;
	FILE *f;

	if (stat(in->path, &sb) != 0) {
		in->n = 0;
		in->size = -1;
		return;
	}
	if (sb.st_mtim.tv_sec == in->mtime.tv_sec &&
	    sb.st_mtim.tv_nsec == in->mtime.tv_nsec &&
	    (long long)sb.st_size == in->size)
		return;
	in->mtime = sb.st_mtim;
	in->size = (long long)sb.st_size;
	in->n = 0;
	f = fopen(in->path, "r");
	if (!f)
		return;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	if (tuner_inject_parse(in, buf, e, sizeof(e))) {
		sigma_warn("SIGMA_TUNER_INJECT_FILE %s: %s: nothing injected",
			   in->path, e);
		in->n = 0;
	}
}

void tuner_inject_at(struct tuner_inject *in, int rank, long step,
		     double *factor, uint64_t *link_ns)
{
	double us = 0.0;

	*factor = 1.0;
	if (in->path[0])
		reread(in);
	for (int i = 0; i < in->n; i++) {
		const struct tuner_fault *f = &in->f[i];

		if (f->rank != rank || step < f->from || step > f->to)
			continue;
		if (f->kind == TUNER_F_SLOW && f->factor > *factor)
			*factor = f->factor;
		if (f->kind == TUNER_F_LINK && f->factor > us)
			us = f->factor;
	}
	*link_ns = (uint64_t)(us * 1000.0);
}

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t tuner_inject_cpu_ns(void)
{
	return clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

uint64_t tuner_inject_work(double factor, uint64_t cpu_ns)
{
	uint64_t want = factor > 1.0 ? (uint64_t)((factor - 1.0) * (double)cpu_ns) : 0;
	uint64_t t0 = clock_ns(CLOCK_MONOTONIC), end = tuner_inject_cpu_ns() + want;

	if (!want)
		return 0;
	while (tuner_inject_cpu_ns() < end)
		;
	return clock_ns(CLOCK_MONOTONIC) - t0;
}
