/*
 * tuner_impl.h - what the auto-tuner's files share behind tuner.h:
 * tuner.c (the shares, the replay, the checkpoint), tuner_watch.c (the
 * measurements, detection and decisions), tuner_place.c (the experts),
 * tuner_comm.c (the buckets) and tuner_trial.c (a decision on trial).
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

#endif /* SIGMA_TRAIN_TUNER_IMPL_H */
