/*
 * tuner_comm.c - the gradient buckets (tuner_comm.h): the cost model, the
 * choice, and the tuner's side of it (tuner.h): when to probe, the
 * decision and its trial, the log and the replay.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sigma.h"
#include "straggler.h"
#include "tuner_impl.h"

/* the backward pass's share of a step's compute: twice the forward's
 * work (the gradients of the activations and of the weights) */
#define BACKWARD_SHARE (2.0 / 3.0)

/* the bucket sizes tried stop at this many buckets a step */
#define MAX_BUCKETS 4096.0

/* ---- the cost model ------------------------------------------------------ */

double tuner_comm_exposed(const struct tuner_comm_in *in, long b)
{
	double S = in->grad_floats, Tb = in->backward_ns, bg = in->overlap;
	double left = S, held = 0.0, start = -1.0, c_prev = 0.0;

	if (S <= 0)
		return 0.0;
	if (b < 1 || (double)b > S)
		b = (long)S;
	/* the pass frees the gradient from its end. Each bucket is due
	 * once b more floats are free (the rest when the pass is over);
	 * the rank first waits for the bucket before it, of whose time the
	 * back end moved the part bg while the rank computed and moves the
	 * rest in the wait; then starts it. The rest is sent and waited
	 * for at once. */
	while (left > 0) {
		double x = left < (double)b ? left : (double)b, now, c;

		left -= x;
		now = (left > 0 ? Tb * (S - left) / S : Tb) + held;
		if (start >= 0) {
			double arrive = fmax(now, start + bg * c_prev) +
					(1.0 - bg) * c_prev;

			held += arrive - now;
			now = arrive;
		}
		c = in->lat_ns + 4.0 * x * in->byte_ns;
		if (left <= 0)
			return now + c - Tb;
		start = now;
		c_prev = c;
	}
	return 0.0;
}

/* the sizes it chooses from, largest first: S, then the powers of two
 * below it from TUNER_COMM_MIN, at most MAX_BUCKETS a step; those in
 * (lo, hi) into c[64]; how many */
static int candidates(const struct tuner_comm_in *in, long *c)
{
	long S = (long)in->grad_floats, all[64];
	int na = 0, n = 0;

	for (long b = TUNER_COMM_MIN; b < S && na < 63; b *= 2)
		if ((double)S / (double)b <= MAX_BUCKETS)
			all[na++] = b;
	all[na++] = S;
	for (int i = na - 1; i >= 0; i--)
		if (all[i] > in->lo && (in->hi <= 0 || all[i] < in->hi))
			c[n++] = all[i];
	return n;
}

long tuner_comm_best(const struct tuner_comm_in *in, double *wait)
{
	long c[64];
	int n = candidates(in, c);
	double least = INFINITY;

	for (int i = 0; i < n; i++)
		least = fmin(least, tuner_comm_exposed(in, c[i]));
	/* the largest (the fewest messages) near the least */
	for (int i = 0; i < n; i++) {
		*wait = tuner_comm_exposed(in, c[i]);
		if (*wait <= least * (1.0 + TUNER_COMM_NEAR))
			return c[i];
	}
	return 0;
}

/* ---- the tuner's side ---------------------------------------------------- */

void tuner_comm_init(struct tuner *tu, long bucket, long span)
{
	struct tuner_buckets *bk = &tu->buckets;

	bk->now = bk->opts = bucket;
	bk->span = span;
	bk->wait = tu->cfg.window - 1; /* the first once the window is full */
}

bool tuner_comm_due(struct tuner *tu)
{
	struct tuner_buckets *bk = &tu->buckets;

	bk->probe = false;
	if (tu->cfg.mode != TUNER_ON || tu->cfg.replay[0] || bk->span <= 0 ||
	    tu->dp < 2)
		return false;
	if (bk->wait > 0) {
		bk->wait--;
		return false;
	}
	/* one trial at a time: none of its own, of the shares' or the
	 * experts' (a step time that moves is not put down to the buckets) */
	bk->probe = bk->trial.before_ns <= 0 && bk->cool == 0 &&
		    tu->shares.trial.before_ns <= 0 && tu->experts.ntried == 0;
	bk->wait = tu->cfg.window - 1;
	return bk->probe;
}

long tuner_comm_probe_floats(const struct tuner *tu)
{
	const struct tuner_buckets *bk = &tu->buckets;

	/* enough to see the bandwidth, no more than the gradient */
	return bk->span < TUNER_PROBE_FLOATS ? bk->span : TUNER_PROBE_FLOATS;
}

/* the bucket size in force from the step after done, logged; printed
 * (rank 0) with why */
static void comm_apply(struct tuner *tu, long b, long done, bool print,
		       const char *why)
{
	struct tuner_buckets *bk = &tu->buckets;

	bk->now = b;
	tu->decisions++;
	if (print) {
		printf(
		    "tuner: step %ld: gradient buckets %ld floats (%.2f MiB, overlap %s; %s)\n",
		    done, b, 4.0 * (double)b / (1 << 20),
		    b < bk->span ? "on" : "off", why);
		fflush(stdout);
	}
}

/* the median over the ranks of one probe figure (offset in the sample);
 * -1 when out of memory */
static double ranks_median(const struct tuner_sample *all, size_t n, size_t off)
{
	double *v = malloc(sizeof(double) * (n ? n : 1)), m;

	if (!v)
		return -1.0;
	for (size_t i = 0; i < n; i++)
		memcpy(&v[i], (const char *)&all[i] + off, sizeof(double));
	m = straggler_median(v, n);
	free(v);
	return m;
}

/*
 * The part of a bucket's time the back end moved while the rank computed,
 * from the buckets the ranks waited for since the last exchange: 1 - the
 * time waited over their time by the probe's figures. 0 where no bucket
 * was left to move during the pass (one bucket: nothing seen, none
 * counted on).
 */
static double seen_overlap(const struct tuner_sample *all, size_t n,
			   const struct tuner_comm_in *in)
{
	double cost = 0.0, waited = 0.0;

	for (size_t i = 0; i < n; i++) {
		cost += all[i].ovl_waits * in->lat_ns +
			4.0 * all[i].ovl_floats * in->byte_ns;
		waited += all[i].ovl_ns;
	}
	if (!(cost > 0))
		return 0.0;
	return waited >= cost ? 0.0 : 1.0 - waited / cost;
}

/* what the choice is made from: the probe's medians over the ranks, the
 * backward pass of the slowest rank, what the buckets in force moved in
 * the background */
static void comm_inputs(const struct tuner *tu, const struct tuner_sample *all,
			size_t n, struct tuner_comm_in *in)
{
	const struct tuner_buckets *bk = &tu->buckets;
	double comp = 0.0;

	for (size_t i = 0; i < n; i++)
		if (all[i].steps > 0)
			comp = fmax(comp, all[i].compute_ns / all[i].steps);
	in->grad_floats = (double)bk->span;
	in->backward_ns = BACKWARD_SHARE * comp;
	in->lat_ns =
	    ranks_median(all, n, offsetof(struct tuner_sample, ar.lat_ns));
	in->byte_ns =
	    ranks_median(all, n, offsetof(struct tuner_sample, ar.byte_ns));
	in->overlap = seen_overlap(all, n, in);
	in->lo = bk->lo;
	in->hi = bk->hi;
}

/* the decision on trial: reverted when the job got 5% slower */
static bool comm_judge(struct tuner *tu, long done, bool print)
{
	struct tuner_buckets *bk = &tu->buckets;
	double after, before;
	char why[128];

	if (tuner_trial_judge(&bk->trial, tu->cfg.window, &after, &before) <= 0)
		return false;
	/* not tried again: no bucket as small (or as large) as this one */
	if (bk->now < bk->prev)
		bk->lo = bk->now;
	else
		bk->hi = bk->now;
	snprintf(why, sizeof(why),
		 "reverted: %.1f ms a step with them, %.1f ms before",
		 after / 1e6, before / 1e6);
	comm_apply(tu, bk->prev, done, print, why);
	bk->cool = 4 * tu->cfg.window;
	return true;
}

bool tuner_comm_exchange(struct tuner *tu, const struct tuner_sample *all,
			 size_t n, long done, bool print, bool busy)
{
	struct tuner_buckets *bk = &tu->buckets;
	struct tuner_comm_in in;
	double now, best_w;
	long best, cur;
	char why[224];

	tuner_trial_push(&bk->trial, tu->cfg.window, tu->step_ns);
	if (comm_judge(tu, done, print))
		return true;
	if (bk->cool > 0)
		bk->cool--;
	if (!bk->probe || busy)
		return false; /* one change an exchange: the shares moved */
	comm_inputs(tu, all, n, &in);
	if (!(in.lat_ns > 0) || !(in.backward_ns > 0))
		return false;
	cur = bk->now < bk->span ? bk->now : bk->span;
	best = tuner_comm_best(&in, &best_w);
	now = tuner_comm_exposed(&in, cur);
	if (best == 0 || best == cur ||
	    now - best_w <= TUNER_COMM_GAIN * tu->step_ns)
		return false;
	snprintf(
	    why, sizeof(why),
	    "all-reduce %.2f ms + %.2f ms/MiB, %.0f%% of it in the background, backward %.1f ms: %.1f ms waited, was %.1f ms",
	    in.lat_ns / 1e6, in.byte_ns * (1 << 20) / 1e6, 100.0 * in.overlap,
	    in.backward_ns / 1e6, best_w / 1e6, now / 1e6);
	bk->prev = bk->now;
	tuner_trial_begin(&bk->trial);
	comm_apply(tu, best, done, print, why);
	return true;
}

bool tuner_comm_replay(struct tuner *tu, long b, long done, bool print)
{
	if (b == tu->buckets.now)
		return false;
	comm_apply(tu, b, done, print, "replayed");
	return true;
}
