/*
 * tuner_trial.c - a tuner decision on trial (tuner_impl.h): the job's step
 * times in a ring, the median before the decision and after it, and the
 * verdict. The shares (tuner_watch.c), the experts (tuner_place.c) and the
 * buckets (tuner_comm.c) each keep one trial; this file is below them all.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "straggler.h"
#include "tuner_impl.h"

/* the median of the ring's n values (copied) */
static double trial_median(const struct tuner_trial *t)
{
	double c[64];
	size_t n = (size_t)t->n < 64 ? (size_t)t->n : 64;

	memcpy(c, t->win, sizeof(double) * n);
	return straggler_median(c, n);
}

void tuner_trial_push(struct tuner_trial *t, int W, double step_ns)
{
	if (!t->win)
		return;
	t->win[t->head] = step_ns;
	t->head = (t->head + 1) % W;
	if (t->n < W)
		t->n++;
}

void tuner_trial_begin(struct tuner_trial *t)
{
	t->before_ns = trial_median(t);
	t->n = t->head = 0;
}

int tuner_trial_judge(struct tuner_trial *t, int W, double *after,
		      double *before)
{
	if (!(t->before_ns > 0) || t->n < W)
		return -1;
	*before = t->before_ns;
	*after = trial_median(t);
	t->before_ns = 0.0;
	return *after > TUNER_TRIAL_SLOWER * *before ? 1 : 0;
}
