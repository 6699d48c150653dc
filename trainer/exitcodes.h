/*
 * exitcodes.h - sigma-train's exit codes (enum train_exit) are part of the
 * contract between sigma's parts, for Slurm's RequeueExit and for sigmad:
 * lib/contract.h defines them (docs/interfaces.md, sigma-train(1)).
 *
 * exit_code_of() is the one place that turns a failure (a negative errno)
 * into an exit code; what an errno means depends on what was being done.
 */
#ifndef SIGMA_TRAIN_EXITCODES_H
#define SIGMA_TRAIN_EXITCODES_H

#include "contract.h"

enum train_phase {
	PHASE_PREPARE,	 /* sigma-train prepare: reading text, writing tokens */
	PHASE_DATA,	 /* opening a token file */
	PHASE_CONFIG,	 /* the model, the kernels, the guard: the settings */
	PHASE_BOOT,	 /* joining the job's ranks (dist_init) */
	PHASE_LAYOUT,	 /* the parallel layout over the ranks (dist_attach) */
	PHASE_INIT_FROM, /* --init-from: reading a checkpoint's weights */
	PHASE_CLAIM,	 /* which run a checkpoint directory holds (claim.h) */
	PHASE_RESUME,	 /* restoring from tier 1 or the shared tier */
	PHASE_RESUME_SHARED, /* reading the shared tier's newest checkpoint */
	PHASE_COMM,	 /* a collective or a message between ranks */
	PHASE_WRITE,	 /* writing checkpoints or the metrics file */
	PHASE_MEMORY,	 /* allocating buffers and writers */
};

/* the exit code for rc (a negative errno; 0 gives TRAIN_EXIT_OK) */
int exit_code_of(int rc, enum train_phase phase);

#endif /* SIGMA_TRAIN_EXITCODES_H */
