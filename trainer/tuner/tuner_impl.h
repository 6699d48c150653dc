/*
 * tuner_impl.h - what the auto-tuner's files share behind tuner.h:
 * tuner_step.c (the call after each step, which runs the rest in order),
 * tuner.c (the shares, the replay, the checkpoint), tuner_watch.c (the
 * measurements, detection and decisions), tuner_place.c (the experts),
 * tuner_comm.c (the buckets) and tuner_trial.c (a decision on trial).
 * The rungs' steps below are pure, each testable on its own numbers.
 */
#ifndef SIGMA_TRAIN_TUNER_IMPL_H
#define SIGMA_TRAIN_TUNER_IMPL_H

#include <stdbool.h>
#include <stddef.h>

#include "tuner.h"
#include "tuner_comm.h"

/* "a,b,c" of shares[n] into buf */
void tuner_shares_str(const int *shares, int n, char *buf, size_t len);
/* the shares in force from the step after done, and the decision in the
 * log; printed (rank 0) with why */
void tuner_apply(struct tuner *tu, const int *shares, long done, bool print,
		 const char *why);

/* a decision on trial is taken back when the job's median step time
 * after it is above this many times the one before (5% slower): the
 * shares (tuner_watch.c) and the experts (tuner_place.c) alike */
#define TUNER_TRIAL_SLOWER 1.05

/* a decision on trial (struct tuner_trial, over windows of W exchanges):
 * the job's step time at an exchange; the start of a trial; its end, once
 * a window has measured it: 1 when the median step is TUNER_TRIAL_SLOWER
 * times the one before or more (take the decision back), 0 when it is
 * kept, -1 while none is judged (after and before: the two medians) */
void tuner_trial_push(struct tuner_trial *t, int W, double step_ns);
void tuner_trial_begin(struct tuner_trial *t);
int tuner_trial_judge(struct tuner_trial *t, int W, double *after,
		      double *before);

/* ---- the steps tuner_after_step takes, in its order ----------------------- */

/* a replayed decision of the shares or buckets after step done */
bool tuner_replay_due(struct tuner *tu, long done, bool print);
/* the replayed expert moves due after step done, applied to the
 * placement: how many */
int tuner_place_replay(struct tuner *tu, long done, bool print);
/* an exchange is due after step done */
bool tuner_due(const struct tuner *tu, long done);
/* the link probe's rounds each way at this exchange: 3 while the window
 * fills or a rank's link reads other than it is judged (slow or not), 1
 * once every link is settled (every rank answers alike) */
int tuner_probe_rounds(const struct tuner *tu);
/* this exchange runs the bucket probe (every rank answers alike; call
 * once an exchange, before the summaries are gathered) */
bool tuner_comm_due(struct tuner *tu);
/* the floats of the probe's large all-reduce */
long tuner_comm_probe_floats(const struct tuner *tu);
/* before the summary is shared: its steps' wall time, up to now */
void tuner_clock_seal(struct tuner *tu);
/*
 * The ranks' summaries all[n] of the exchange after step done: detect,
 * and (--tuner on) decide the shares and the buckets. Returns true when
 * the shares changed (they hold from step done + 1); a line "tuner: step
 * N: ..." tells it. Every rank calls it with the same numbers and takes
 * the same decision.
 */
bool tuner_exchange(struct tuner *tu, const struct tuner_sample *all,
		    size_t n, long done, bool print);
/*
 * After the exchange of step done: load[L][E] the tokens routed to each
 * expert over steps steps, the job's. Decides, and returns the swaps made
 * (the placement is the new one; logged, printed when print), 0 none.
 */
int tuner_place_exchange(struct tuner *tu, const float *load, int steps,
			 long done, bool print);
/*
 * After an exchange: the data-parallel rank that stayed slow (compute or
 * link) --tuner-escalate seconds after its shares moved, once per
 * slowdown, or -1; *world the rank of the job that is its slowest stage,
 * why[len] what was measured. Each rank keeps its own clock: only *world
 * acts on it.
 */
int tuner_escalate_due(struct tuner *tu, int *world, char *why, size_t len);

/*
 * At the exchange of step done (from tuner_exchange, --tuner on): judge
 * the bucket size on trial, and after a probe choose it again, unless
 * busy (the shares changed at this exchange). True when the bucket size
 * changed (it holds from step done + 1; logged, printed when print).
 */
bool tuner_comm_exchange(struct tuner *tu, const struct tuner_sample *all,
			 size_t n, long done, bool print, bool busy);
/* a replayed bucket size b from step done + 1: true when it changed */
bool tuner_comm_replay(struct tuner *tu, long b, long done, bool print);

/*
 * The shares from speeds v[dp] (sequences per unit of time, > 0) and
 * fixed times fix[dp] (NULL: none), rank r taking shares[r] / v[r] +
 * fix[r]: S = dp * B sequences, each share in [1, Bmax], so that the
 * slowest rank's time is least. Pure.
 */
void tuner_split(int dp, int B, int Bmax, const double *v, const double *fix,
		 int *shares);

#endif /* SIGMA_TRAIN_TUNER_IMPL_H */
