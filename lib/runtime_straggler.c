/*
 * runtime_straggler.c - libsigma-runtime's straggler detection
 * (sigma_runtime.h): sigma-train's test of a slow rank (straggler.c) over
 * a window of the ranks' busy time per step, and the report of this
 * rank's node to sigmad when it stays slow (slow_report.c).
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sigma.h"
#include "slow_report.h"
#include "straggler.h"
#include "sigma_runtime.h"

struct settings {
	int window;
	struct straggler_band band;
	double escalate; /* seconds; < 0 never */
};

struct sigma_rt_straggler {
	int n, rank;
	struct settings set;
	double *win; /* [window][n] busy seconds, a ring */
	int head, nwin;
	bool *slow;
	int *streak;
	double *ratio;
	double slow_since; /* this rank: monotonic seconds, 0 not slow */
	bool reported;	   /* this rank's slow spell was reported */
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- settings ------------------------------------------------------------ */

static int set_one(const char *key, const char *val, void *arg, char *err,
		   size_t len)
{
	struct settings *c = arg;
	long n;

	if (!strcmp(key, "window")) {
		if (sigma_parse_long_named(key, val, 3, STRAGGLER_MAX_WINDOW, &n,
					   err, len))
			return -EINVAL;
		c->window = (int)n;
	} else if (!strcmp(key, "confirm")) {
		if (sigma_parse_long_named(key, val, 1, 1000, &n, err, len))
			return -EINVAL;
		c->band.confirm = (int)n;
	} else if (!strcmp(key, "slow")) {
		if (sigma_parse_double(val, 1.01, 100, &c->band.slow))
			return sigma_set_err(err, len, EINVAL,
					     "straggler setting slow=%s: want a "
					     "ratio in [1.01, 100]",
					     val);
	} else if (!strcmp(key, "floor")) {
		if (sigma_parse_double(val, 0, 3600, &c->band.floor))
			return sigma_set_err(err, len, EINVAL,
					     "straggler setting floor=%s: want "
					     "seconds in [0, 3600]",
					     val);
	} else if (!strcmp(key, "escalate")) {
		if (!strcmp(val, "off"))
			c->escalate = -1;
		else if (sigma_parse_double(val, 0, 86400.0 * 30, &c->escalate))
			return sigma_set_err(err, len, EINVAL,
					     "straggler setting escalate=%s: "
					     "want seconds or off",
					     val);
	} else {
		return sigma_set_err(err, len, EINVAL,
				     "unknown straggler setting \"%s\"", key);
	}
	return 0;
}

/* ---- the verbs ----------------------------------------------------------- */

int sigma_rt_straggler_open(struct sigma_rt_straggler **s, int nranks,
			    int rank, const char *settings, char *err,
			    size_t len)
{
	struct settings set = {.window = 10,
			       .band = {.slow = 1.25, .confirm = 3, .floor = 0},
			       .escalate = 60};
	struct sigma_rt_straggler *n;
	size_t rn;

	*s = NULL;
	if (nranks < 1 || nranks > 1 << 20)
		return sigma_set_err(err, len, EINVAL,
				     "%d ranks: want 1 to %d", nranks, 1 << 20);
	if (rank < 0 || rank >= nranks)
		return sigma_set_err(err, len, EINVAL,
				     "rank %d: want 0 to %d", rank, nranks - 1);
	if (sigma_kv_parse_words(settings, set_one, &set, err, len))
		return -EINVAL;
	rn = (size_t)nranks;
	n = calloc(1, sizeof(*n));
	if (n) {
		n->win = calloc(rn * (size_t)set.window, sizeof(double));
		n->slow = calloc(rn, sizeof(bool));
		n->streak = calloc(rn, sizeof(int));
		n->ratio = calloc(rn, sizeof(double));
	}
	if (!n || !n->win || !n->slow || !n->streak || !n->ratio) {
		sigma_rt_straggler_close(n);
		return sigma_set_err(err, len, ENOMEM, "out of memory");
	}
	n->n = nranks;
	n->rank = rank;
	n->set = set;
	*s = n;
	return 0;
}

/* the window's medians, the ranks' median, and the judgement of each */
static int judge(struct sigma_rt_straggler *s, long step,
		 struct sigma_rt_straggler_event *ev)
{
	double *med = malloc(sizeof(double) * 3 * (size_t)s->n);
	double *mad = med + s->n, *v = mad + s->n, M;
	int nev = 0;

	if (!med)
		return -ENOMEM;
	for (int r = 0; r < s->n; r++)
		straggler_column(s->win, s->nwin, s->n, r, &med[r], &mad[r]);
	memcpy(v, med, sizeof(double) * (size_t)s->n);
	M = straggler_median(v, (size_t)s->n);
	for (int r = 0; r < s->n; r++) {
		int now = straggler_judge(&s->set.band, med[r], mad[r], M,
					  &s->slow[r], &s->streak[r]);

		s->ratio[r] = M > 0 ? med[r] / M : 0.0;
		if (!now)
			continue;
		if (r == s->rank) {
			s->slow_since = now > 0 ? now_s() : 0.0;
			s->reported = false;
		}
		if (ev)
			ev[nev] = (struct sigma_rt_straggler_event){
			    .rank = r, .slow = now > 0, .ratio = s->ratio[r],
			    .step = step};
		nev++;
	}
	free(med);
	return nev;
}

int sigma_rt_straggler_record(struct sigma_rt_straggler *s, long step,
			      const double *busy, int nranks,
			      struct sigma_rt_straggler_event *ev)
{
	double *row;

	slow_report_reap();
	if (nranks != s->n)
		return -EINVAL;
	for (int r = 0; r < nranks; r++)
		if (!isfinite(busy[r]) || busy[r] < 0)
			return -EINVAL;
	row = &s->win[(size_t)s->head * (size_t)s->n];
	memcpy(row, busy, sizeof(double) * (size_t)s->n);
	s->head = (s->head + 1) % s->set.window;
	if (s->nwin < s->set.window)
		s->nwin++;
	if (s->nwin < s->set.window)
		return 0; /* a full window first */
	return judge(s, step, ev);
}

int sigma_rt_straggler_slow(const struct sigma_rt_straggler *s, int rank)
{
	return rank >= 0 && rank < s->n && s->slow[rank];
}

double sigma_rt_straggler_ratio(const struct sigma_rt_straggler *s, int rank)
{
	return rank >= 0 && rank < s->n ? s->ratio[rank] : 0.0;
}

int sigma_rt_straggler_escalate(struct sigma_rt_straggler *s, long step)
{
	char why[160];
	int rc;

	if (!s->slow[s->rank] || s->reported || s->set.escalate < 0 ||
	    now_s() - s->slow_since < s->set.escalate)
		return 0;
	snprintf(why, sizeof(why),
		 "rank %d still slow %.0f s after it was found slow (%.2fx the "
		 "median step time)",
		 s->rank, s->set.escalate, s->ratio[s->rank]);
	rc = slow_report_node("sigma", step, why);
	if (rc == -EBUSY)
		return rc; /* asked again at a later step */
	s->reported = true; /* once a spell, reported or not */
	return rc ? rc : 1;
}

void sigma_rt_straggler_close(struct sigma_rt_straggler *s)
{
	if (!s)
		return;
	free(s->win);
	free(s->slow);
	free(s->streak);
	free(s->ratio);
	free(s);
}
