/*
 * guard.h - numerical guardrails (docs/guardrails.md): the decisions,
 * shared by sigma-train (trainer/guard_run.h attaches them to its model)
 * and libsigma-runtime (sigma_rt_guard_*, for any training loop).
 *
 * Detection, every step and cheap: a loss or gradient norm that is not
 * finite; a loss or gradient-norm spike (z-score of its logarithm against
 * a running window of the accepted steps); bf16 outputs that overflowed, per
 * layer; router collapse (expert load far from balance, averaged over a
 * window).
 *
 * Actions, escalating: recompute the step (the hardware check); skip the
 * update; run the overflowing layers in fp32 for a window, then bf16
 * again; lower the learning rate for a window; after repeated trouble,
 * roll back to the newest valid checkpoint and skip the offending data
 * window; when a recomputed step differs from the first computation, stop
 * with TRAIN_EXIT_HARDWARE so the controller requeues elsewhere.
 *
 * guard_check is a pure state machine over the observations of a step:
 * no I/O, no model, so that it is tested on synthetic series. The guard
 * reads no checkpoint either: a rollback is the caller's (rollback.h),
 * which then tells the guard (guard_rolled_back); what a checkpoint keeps
 * of the guard is guard_state.h.
 */
#ifndef SIGMA_GUARD_H
#define SIGMA_GUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "guard_state.h" /* GUARD_MAX_WINDOW, struct guard_ring */

struct guard_config {
	bool enabled;
	int window;	  /* running window of the z-scores and collapse (50) */
	int min_samples;  /* accepted steps before spikes are judged (20) */
	double loss_z;	  /* loss spike threshold, in standard deviations (6) */
	double gnorm_z;	  /* gradient-norm spike threshold (6) */
	double rel_floor; /* sd of the logarithms is at least this (0.02) */
	double collapse;  /* router imbalance that is collapse (0.8) */
	long fp32_steps;  /* steps an overflowing layer stays fp32 (50) */
	long lr_steps;	  /* steps the learning rate stays lowered (50) */
	double lr_factor; /* its factor (0.5) */
	int rollback_after; /* troubles within trouble_steps -> rollback (3) */
	long trouble_steps; /* (50) */
	int max_rollbacks;  /* then give up: diverged (3) */
	bool recompute;	    /* recompute a bad step once: the hardware check */
};

enum guard_cause {
	GUARD_CAUSE_NONE,
	GUARD_CAUSE_NONFINITE, /* loss or gradient norm not finite */
	GUARD_CAUSE_LOSS_SPIKE,
	GUARD_CAUSE_GNORM_SPIKE,
	GUARD_CAUSE_OVERFLOW, /* bf16 outputs overflowed */
	GUARD_CAUSE_COLLAPSE, /* router load far from balance */
	GUARD_CAUSE_HARDWARE, /* the recomputed step differs */
	GUARD_CAUSE_RESTORE,  /* a layer's fp32 window ended */
	GUARD_CAUSE_DATA,     /* a step of a skipped data window */
	GUARD_NCAUSES,
};

/* actions: a bit set */
enum {
	GUARD_ACT_RECOMPUTE = 1 << 0, /* run the same step again, then check */
	GUARD_ACT_SKIP = 1 << 1,      /* no update; the state stays as it was */
	GUARD_ACT_FP32 = 1 << 2, /* the event's layers go fp32 for a window */
	GUARD_ACT_LOWER_LR = 1 << 3,
	GUARD_ACT_ROLLBACK = 1 << 4, /* reload a checkpoint, skip the window */
	GUARD_ACT_REQUEUE = 1 << 5,  /* exit TRAIN_EXIT_HARDWARE */
	GUARD_ACT_STOP = 1 << 6,     /* exit TRAIN_EXIT_DIVERGED */
	GUARD_ACT_BF16 = 1 << 7,     /* the event's layer is back to bf16 */
	GUARD_NACTS = 8,
};

struct guard_event {
	long step; /* 1-based, as logged */
	enum guard_cause cause;
	unsigned actions;
	int layer;    /* first layer concerned, -1 none (L: the output head) */
	double value; /* loss, gradient norm, overflow count or imbalance */
	double z;     /* z-score of a spike, else NAN */
};

/* What a step produced. */
struct guard_obs {
	long step; /* 1-based */
	double loss, gnorm;
	const uint64_t *overflow; /* [nslots] bf16 overflows this step; NULL */
	double imbalance;	  /* worst layer, 0 .. 1; NAN when unknown */
	bool recomputed;	  /* the second computation of this step */
};

struct guard {
	struct guard_config cfg;
	int nslots; /* precision slots: layers + the output head */
	bool bf16;  /* the run's precision: bf16 where not held in fp32 */
	struct guard_ring loss, gnorm, imb;
	long *fp32_until; /* [nslots] last step a layer stays fp32; 0 none */
	long lr_until;	  /* last step of the lowered learning rate; 0 none */
	long trouble[64]; /* steps of recent trouble, oldest first */
	int ntrouble;
	long skip_lo, skip_hi; /* skipped data window, 1-based; 0 none */
	int rollbacks;
	double first_loss, first_gnorm; /* of a step being recomputed */
	long first_step;
	/* counts, for the metrics file, the checkpoint and the summary */
	uint64_t causes[GUARD_NCAUSES];
	uint64_t acts[GUARD_NACTS];
	uint64_t overflows; /* bf16 outputs that overflowed */
	/* time spent in guard_run_begin and guard_run_check, steps checked */
	uint64_t time_ns, checks;
};

void guard_config_default(struct guard_config *c);
/* 0, or -EINVAL with the reason in err */
int guard_config_check(const struct guard_config *c, char *err, size_t len);

/* 0 or -ENOMEM; nslots = layers + 1 */
int guard_init(struct guard *g, const struct guard_config *c, int nslots,
	       bool bf16);
void guard_free(struct guard *g);

/*
 * Judge step o. Fills ev (cause NONE when all is well) and returns its
 * actions; 0: apply the update. With RECOMPUTE, run the step again and
 * call guard_check with recomputed set. With ROLLBACK, reload (rollback.h
 * does) and call guard_rolled_back.
 */
unsigned guard_check(struct guard *g, const struct guard_obs *o,
		     struct guard_event *ev);

/* The rollback happened; the data window of the trouble is skipped. */
void guard_rolled_back(struct guard *g, long ckpt_step, long at_step);

/* Whether step (1-based) lies in a skipped data window (counts it). */
bool guard_skip_data(struct guard *g, long step);

/*
 * Precision of each slot for step: prec[nslots] 1 = bf16. Fills ev and
 * returns GUARD_ACT_BF16 when a layer's fp32 window ended (one per call:
 * call until 0).
 */
unsigned guard_precision(struct guard *g, long step, uint8_t *prec,
			 struct guard_event *ev);

/* Learning-rate factor for step (1 or cfg.lr_factor). */
double guard_lr_scale(const struct guard *g, long step);

/* Router imbalance of one layer, 0 balanced .. 1 all on K experts. */
double guard_imbalance(const int *counts, int E, int K);

const char *guard_cause_name(enum guard_cause c);
/* "skip+fp32" */
void guard_actions_str(unsigned acts, char *buf, size_t len);
/* the line of an event: "guard: step S: CAUSE ...: ACTIONS" */
void guard_event_str(const struct guard_event *ev, char *buf, size_t len);
/* that line, with a newline, to f */
void guard_log(FILE *f, const struct guard_event *ev);
/* totals at exit */
void guard_summary(FILE *f, const struct guard *g);

/* ---- persistent state (the checkpoint's guard group) --------------------- */

/*
 * The counters and the windows (loss, gradient norm, expert imbalance)
 * into or out of the saved state (guard_state.h) exactly as held (ring
 * storage and next slot), so a resumed run judges its next steps as the
 * uninterrupted run does. Import does nothing when s holds no counters,
 * and leaves a window empty when it does not fit this run's
 * --guard-window.
 */
void guard_state_export(const struct guard *g, struct guard_state *s);
void guard_state_import(struct guard *g, const struct guard_state *s);

#endif /* SIGMA_GUARD_H */
