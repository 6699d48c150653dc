/*
 * guard_run.h - sigma-train's guardrails: the guard's decisions (guard.h)
 * attached to a model, with the bf16 precision of its layers, the ranks'
 * agreement on what they saw, and the fault injection of
 * SIGMA_GUARD_INJECT (docs/guardrails.md).
 */
#ifndef SIGMA_TRAIN_GUARD_RUN_H
#define SIGMA_TRAIN_GUARD_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "guard.h"

#define GUARD_MAX_INJECT 32
/* ---- fault injection (SIGMA_GUARD_INJECT) -------------------------------- */

enum guard_fault {
	GUARD_FAULT_NAN_GRAD, /* a NaN gradient, every computation */
	GUARD_FAULT_SPIKE,    /* gradients x 1000, every computation */
	GUARD_FAULT_FLAKY,    /* a NaN gradient, first computation only */
	GUARD_FAULT_OVERFLOW, /* a bf16 overflow in a layer */
};

struct guard_inject {
	int n;
	struct {
		enum guard_fault kind;
		long lo, hi; /* steps, 1-based, inclusive */
		int layer;
	} f[GUARD_MAX_INJECT];
};

/*
 * Parse "KIND@STEP[-STEP2][:LAYER],..." with KIND nan-grad, spike, flaky,
 * overflow (LAYER required, 0 .. nlayers). 0 or -EINVAL with err.
 */
int guard_inject_parse(struct guard_inject *in, const char *spec, int nlayers,
		       char *err, size_t len);
/* Whether fault kind hits step; *layer receives its layer. */
bool guard_inject_hits(const struct guard_inject *in, enum guard_fault kind,
		       long step, bool recomputed, int *layer);

/* ---- the trainer's side ------------------------------------------------- */

struct model;

/* the guard attached to a model */
struct guard_run {
	struct guard g;
	struct guard_inject inj;
	struct model *m;
	uint8_t *prec;	    /* [nslots] */
	uint64_t *overflow; /* [nslots] */
	/*
	 * With several data-parallel ranks: the mean over the ranks of v[n]
	 * (0 or -errno), so that every rank sees every rank's bf16 overflows
	 * and takes the same decision. Loss and gradient norm are global
	 * already, and so are the expert counts of a stage when its
	 * data-parallel ranks sum them. NULL: one rank. agree_rc: its last
	 * failure.
	 */
	int (*agree)(void *ctx, double *v, int n);
	/*
	 * With several ranks: *v = the largest *v over the ranks (0 or
	 * -errno). The expert imbalance a rank sees is of its own pipeline
	 * stage's layers; every rank judges the worst of all. NULL: one rank,
	 * or one stage (every rank sees every layer's counts of the batch).
	 */
	int (*agree_max)(void *ctx, double *v);
	void *agree_ctx;
	int agree_size;
	int agree_rc;
};

/*
 * Attach to m: its layers run bf16 when bf16, through m->bf16 if the
 * caller set it (sigma_bf16_select for the device), else sigma_bf16_cpu
 * for the CPU table; the fault injection of SIGMA_GUARD_INJECT. 0,
 * -EINVAL (bad SIGMA_GUARD_INJECT, no bf16 table) or -ENOMEM.
 */
int guard_run_init(struct guard_run *r, const struct guard_config *c, bool bf16,
		   struct model *m, char *err, size_t len);
void guard_run_free(struct guard_run *r);
/* before the forward of step: precision per layer, injected overflow */
void guard_run_begin(struct guard_run *r, long step);
/*
 * after the gradient norm *gn of step is known: injected gradient faults
 * (which update *gn), detection, the event logged. Returns the actions;
 * GUARD_ACT_STOP with agree_rc set when the ranks could not agree.
 */
unsigned guard_run_check(struct guard_run *r, long step, double *gn,
			 bool recomputed);
/* ",skipped,rollbacks,overflows,fp32_layers" for the metrics row */
void guard_run_metrics(const struct guard_run *r, FILE *f);
#define GUARD_METRICS_HEADER                                                   \
	",guard_events,guard_skipped,guard_rollbacks,bf16_overflows,fp32_layers"

#endif /* SIGMA_TRAIN_GUARD_RUN_H */
