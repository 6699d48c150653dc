/*
 * tuner_impl.h - what the auto-tuner's files share behind tuner.h:
 * tuner.c (the shares, the replay, the checkpoint), tuner_watch.c (the
 * measurements, detection and decisions) and tuner_place.c (the experts).
 */
#ifndef SIGMA_TRAIN_TUNER_IMPL_H
#define SIGMA_TRAIN_TUNER_IMPL_H

#include <stdbool.h>
#include <stddef.h>

#include "tuner.h"

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

/* the median of the first n of v (copied; 0 when n is 0) */
double tuner_median(const double *v, int n);

#endif /* SIGMA_TRAIN_TUNER_IMPL_H */
