/*
 * straggler.h - which ranks are slow (docs/tuner.md, "detection"): the
 * test sigma-train's auto-tuner applies to its ranks' compute times and
 * link probes, and libsigma-runtime (sigma_rt_straggler_*) to any
 * training loop's step times. Pure: no clock, no I/O.
 *
 * Each rank has a window of measures; its median and MAD (its noise) are
 * judged against the median over the ranks, M. A rank is slow when its
 * median is above slow x M and above M by more than 3 of its MADs and by
 * more than a floor; confirmed after `confirm` judgements in a row. It is
 * cleared after as many in a row below the middle of 1 and slow (and
 * within half the floor): a band, so that a rank near the line does not
 * flap.
 */
#ifndef SIGMA_STRAGGLER_H
#define SIGMA_STRAGGLER_H

#include <stdbool.h>
#include <stddef.h>

/* the longest window of measures a rank keeps */
#define STRAGGLER_MAX_WINDOW 64

struct straggler_band {
	double slow;	/* a rank is slow above this ratio to the median */
	int confirm;	/* judgements in a row to confirm or clear */
	double floor;	/* the least excess over the median that counts */
};

/* the median of v[0, n), sorted in place; 0 when n is 0 */
double straggler_median(double *v, size_t n);

/* the median and MAD of column r of win[nwin][stride] (nwin at most
 * STRAGGLER_MAX_WINDOW) */
void straggler_column(const double *win, int nwin, int stride, int r,
		      double *med, double *mad);

/*
 * Judge one rank from its median med and MAD mad against the ranks'
 * median M; *slow and *streak (> 0: judgements in a row slow, < 0: not)
 * are its state. +1: now confirmed slow, -1: now cleared, 0: no change.
 */
int straggler_judge(const struct straggler_band *b, double med, double mad,
		    double M, bool *slow, int *streak);

#endif /* SIGMA_STRAGGLER_H */
