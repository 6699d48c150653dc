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
#include "tuner_impl.h"

/* the backward pass's share of a step's compute: twice the forward's
 * work (the gradients of the activations and of the weights) */
#define BACKWARD_SHARE (2.0 / 3.0)

/* the bucket sizes tried stop at this many buckets a step */
#define MAX_BUCKETS 4096.0

/* ---- the cost model ------------------------------------------------------- */

double tuner_comm_exposed(const struct tuner_comm_in *in, long b)
{
	double S = in->grad_floats, Tb = in->backward_ns;
	double left = S, end = 0.0;

	if (S <= 0)
		return 0.0;
	if (b < 1 || (double)b > S)
		b = (long)S;
	/* the pass frees the gradient from its end; a bucket leaves when b
	 * floats are free and the one before has arrived; the rest leaves
	 * when the pass is over */
	while (left > 0) {
		double x = left < (double)b ? left : (double)b;
		double ready = Tb * (S - left + x) / S;

		left -= x;
		end = fmax(end, ready) + in->lat_ns + 4.0 * x * in->byte_ns;
	}
	return end - Tb;
}

long tuner_comm_best(const struct tuner_comm_in *in, double *wait)
{
	long S = (long)in->grad_floats, b, top = 0;
	double least = tuner_comm_exposed(in, S);

	/* the powers of two below S, at most MAX_BUCKETS a step: the least
	 * wait of all, and the largest of them */
	for (b = TUNER_COMM_MIN; b < S; b *= 2)
		if ((double)S / (double)b <= MAX_BUCKETS) {
			least = fmin(least, tuner_comm_exposed(in, b));
			top = b;
		}
	/* the largest bucket (the fewest messages) near the least: S, top,
	 * top / 2, ... (the least is among them) */
	for (b = S;; b = b == S ? top : b / 2) {
		long next = b == S ? top : b / 2;

		*wait = tuner_comm_exposed(in, b);
		if (*wait <= least * (1.0 + TUNER_COMM_NEAR) ||
		    next < TUNER_COMM_MIN ||
		    (double)S / (double)next > MAX_BUCKETS)
			return b;
	}
}

/* ---- the tuner's side ----------------------------------------------------- */

void tuner_comm_init(struct tuner *tu, long bucket, long span)
{
	tu->bucket = tu->bucket0 = bucket;
	tu->span = span;
	tu->cwait = tu->cfg.window - 1; /* the first once the window is full */
}

bool tuner_comm_due(struct tuner *tu)
{
	tu->cprobe = false;
	if (tu->cfg.mode != TUNER_ON || tu->cfg.replay[0] || tu->span <= 0 ||
	    tu->dp < 2)
		return false;
	if (tu->cwait > 0) {
		tu->cwait--;
		return false;
	}
	/* one trial at a time: none of its own, of the shares' or the
	 * experts' (a step time that moves is not put down to the buckets) */
	tu->cprobe = tu->ctrial.before_ns <= 0 && tu->ccool == 0 &&
		     tu->strial.before_ns <= 0 && tu->ntried == 0;
	tu->cwait = tu->cfg.window - 1;
	return tu->cprobe;
}

long tuner_comm_probe_floats(const struct tuner *tu)
{
	/* enough to see the bandwidth, no more than the gradient */
	return tu->span < TUNER_PROBE_FLOATS ? tu->span : TUNER_PROBE_FLOATS;
}

/* the bucket size in force from the step after done, logged; printed
 * (rank 0) with why */
static void comm_apply(struct tuner *tu, long b, long done, bool print,
		       const char *why)
{
	tu->bucket = b;
	tu->decisions++;
	if (print) {
		printf(
		    "tuner: step %ld: gradient buckets %ld floats (%.2f MiB, overlap %s; %s)\n",
		    done, b, 4.0 * (double)b / (1 << 20),
		    b < tu->span ? "on" : "off", why);
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
	m = tuner_median_of(v, n);
	free(v);
	return m;
}

/* what the choice is made from: the probe's medians over the ranks, and
 * the backward pass of the slowest rank */
static void comm_inputs(const struct tuner *tu, const struct tuner_sample *all,
			size_t n, struct tuner_comm_in *in)
{
	double comp = 0.0;

	for (size_t i = 0; i < n; i++)
		if (all[i].steps > 0)
			comp = fmax(comp, all[i].compute_ns / all[i].steps);
	in->grad_floats = (double)tu->span;
	in->backward_ns = BACKWARD_SHARE * comp;
	in->lat_ns =
	    ranks_median(all, n, offsetof(struct tuner_sample, ar_lat_ns));
	in->byte_ns =
	    ranks_median(all, n, offsetof(struct tuner_sample, ar_byte_ns));
}

/* the decision on trial: reverted when the job got 5% slower */
static bool comm_judge(struct tuner *tu, long done, bool print)
{
	double after, before;
	char why[128];

	if (tuner_trial_judge(&tu->ctrial, tu->cfg.window, &after, &before) <=
	    0)
		return false;
	snprintf(why, sizeof(why),
		 "reverted: %.1f ms a step with them, %.1f ms before",
		 after / 1e6, before / 1e6);
	comm_apply(tu, tu->cprev, done, print, why);
	tu->ccool = 4 * tu->cfg.window;
	return true;
}

bool tuner_comm_exchange(struct tuner *tu, const struct tuner_sample *all,
			 size_t n, long done, bool print, bool busy)
{
	struct tuner_comm_in in;
	double now, best_w;
	long best, cur;
	char why[160];

	tuner_trial_push(&tu->ctrial, tu->cfg.window, tu->step_ns);
	if (comm_judge(tu, done, print))
		return true;
	if (tu->ccool > 0)
		tu->ccool--;
	if (!tu->cprobe || busy)
		return false; /* one change an exchange: the shares moved */
	comm_inputs(tu, all, n, &in);
	if (!(in.lat_ns > 0) || !(in.backward_ns > 0))
		return false;
	cur = tu->bucket < tu->span ? tu->bucket : tu->span;
	best = tuner_comm_best(&in, &best_w);
	now = tuner_comm_exposed(&in, cur);
	if (best == cur || now - best_w <= TUNER_COMM_GAIN * tu->step_ns)
		return false;
	snprintf(
	    why, sizeof(why),
	    "all-reduce %.2f ms + %.2f ms/MiB, backward %.1f ms: %.1f ms waited, was %.1f ms",
	    in.lat_ns / 1e6, in.byte_ns * (1 << 20) / 1e6, in.backward_ns / 1e6,
	    best_w / 1e6, now / 1e6);
	tu->cprev = tu->bucket;
	tuner_trial_begin(&tu->ctrial);
	comm_apply(tu, best, done, print, why);
	return true;
}

bool tuner_comm_replay(struct tuner *tu, long b, long done, bool print)
{
	if (b == tu->bucket)
		return false;
	comm_apply(tu, b, done, print, "replayed");
	return true;
}
