/*
 * guard_state.h - the guard's saved state: what a checkpoint keeps of the
 * numerical guardrails (its /guard group, docs/checkpoint-format.md), so
 * that a resumed run judges its next steps as the run that never stopped.
 *
 * A plain struct of values: the guard (guard.h) fills it and takes it
 * back (guard_state_export, guard_state_import); the checkpoint writes
 * and reads it under the names below without knowing the guard.
 */
#ifndef SIGMA_TRAIN_GUARD_STATE_H
#define SIGMA_TRAIN_GUARD_STATE_H

#include <stdint.h>

/* the longest running window a guard holds (--guard-window) */
#define GUARD_MAX_WINDOW 1024

/* a running window: ring storage v[0, n) and the next slot head */
struct guard_ring {
	double v[GUARD_MAX_WINDOW];
	int n, head;
};

/*
 * The counters: lr_until, skip_lo, skip_hi, rollbacks, overflow_outputs,
 * last_trouble, then one per cause (enum guard_cause order) and one per
 * action (bit order); guard.c checks the count against its enums.
 */
#define GUARD_STATE_N 23
/* the windows: loss, gradient norm, expert imbalance */
#define GUARD_STATE_WINDOWS 3

struct guard_state {
	int n; /* counters held: GUARD_STATE_N, 0 none (a file without) */
	int64_t v[GUARD_STATE_N];
	/* the windows as the guard holds them; n 0 when absent */
	struct guard_ring win[GUARD_STATE_WINDOWS];
};

/* the name of counter i under /guard, e.g. "skip_lo"; "?" out of range */
const char *guard_state_name(int i);
/* the name of window i under /guard, e.g. "window_loss"; "?" likewise */
const char *guard_state_window_name(int i);

#endif /* SIGMA_TRAIN_GUARD_STATE_H */
