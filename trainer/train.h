/*
 * train.h - one training run of sigma-train, as main.c reads it:
 *
 *   trainer_setup      data, kernels, model, layout, run, tiers, resume
 *   trainer_loop       the steps (train.c), each one train_step
 *   trainer_teardown   everything setup made, in reverse
 *
 * struct trainer is the run's state; the loop's parts share it.
 */
#ifndef SIGMA_TRAIN_TRAIN_H
#define SIGMA_TRAIN_TRAIN_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "ckpt.h"
#include "data.h"
#include "dist.h"
#include "guard_run.h"
#include "jobrec.h"
#include "model.h"
#include "opts.h"
#include "report.h"
#include "tiers.h"
#include "tuner.h"
#include "tuner_inject.h"

struct trainer {
	struct train_opts *o;
	struct dist *d;
	struct data_file train_df, val_df;
	bool have_train, have_val;
	struct model *m;
	struct ckpt_state st; /* what a checkpoint of the next step holds */
	struct guard_run gr;
	bool gr_ready;
	struct tiers tiers; /* the checkpoint tiers (tiers.h) */
	struct sigma_jobrec rec; /* the launcher's record of this rank */
	struct report rep; /* the progress line and the metrics file */
	int32_t *tok, *tgt; /* this rank's micro-batches of a step */
	int B, Bmax; /* sequences per micro-batch: an even share, the most */
	struct tuner tu; /* the auto-tuner (tuner.h) */
	bool tu_ready;
	struct tuner_inject inj; /* its fail-slow faults, for tests */
	long start; /* the first step this start runs */
	uint64_t mem_need; /* bytes the configuration check counted */
	/* the resume read the experts' slots as written (tier 1): they
	 * hold the checkpoint's placement already */
	bool resumed_slots;
	long resumed_step; /* resumed from a full shared checkpoint: its */
	char resumed_full[PATH_MAX]; /* step and file (rank 0), else -1 */
};

/* the signal that asks for a checkpoint and a stop (SIGUSR1, SIGTERM) */
extern volatile sig_atomic_t train_stop_signal;

/* 0, or an exit code after printing why; teardown is due either way */
int trainer_setup(struct trainer *t, struct train_opts *o, struct dist *d);

/* the steps from t->start: an exit code (0: all done) */
int trainer_loop(struct trainer *t);
/* the auto-tuner's placement (t->tu.owner) into the model; data: move
 * the experts (else the slots hold it already). 0 or an exit code. */
int trainer_place(struct trainer *t, bool data);

/* after setup, whatever it returned; code: the run's so far, returned
 * unless a write still in flight fails */
int trainer_teardown(struct trainer *t, int code);

#endif /* SIGMA_TRAIN_TRAIN_H */
