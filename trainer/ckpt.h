/*
 * ckpt.h - full checkpoints in HDF5 (docs/checkpoint-format.md). This is
 * the only part of the trainer that sees hdf5.h.
 *
 * A checkpoint holds every tensor of docs/model.md under its canonical
 * name, both AdamW moments, the step, the data position, the RNG state,
 * the configuration and a provenance group. It is written to a temporary
 * name, fsync'd, marked complete, and renamed into place; a reader
 * validates everything before it touches the model.
 */
#ifndef SIGMA_TRAIN_CKPT_H
#define SIGMA_TRAIN_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

#define CKPT_FORMAT "sigma-checkpoint"
#define CKPT_VERSION 1
#define CKPT_GUARD_MAX 32

/* Everything besides the tensors that a resumed run needs. */
struct ckpt_state {
	long step; /* steps completed; the next step to run */
	int batch; /* sequences per step */
	uint64_t seed; /* run seed: weights and batch order */
	uint64_t rng; /* RNG state */
	uint64_t data_ntokens; /* identity of the training file */
	uint64_t data_checksum;
	struct optim_config optim;
	/* the guard's counters and windows (guard.h): the /guard group,
	 * written when nguard > 0; nguard 0 after reading a file without */
	int nguard;
	int64_t guard[CKPT_GUARD_MAX];
};

/*
 * Write dir/ckpt-STEP.h5 (STEP = st->step, 8 digits). path receives the
 * final name. Returns 0 or -errno with err naming the file and problem.
 */
int ckpt_write(const char *dir, const struct model *m,
	       const struct ckpt_state *st, char *path, size_t plen,
	       char *err, size_t len);

/*
 * Validate path against m's configuration, then load weights, moments and
 * state. Nothing in m changes unless the whole file is good.
 * Returns 0, -ENOENT, or -EBADMSG with err naming file and problem.
 */
int ckpt_read(const char *path, struct model *m, struct ckpt_state *st,
	      char *err, size_t len);

/*
 * Weights only (the "model" group and "config"), e.g. to start from
 * another run's weights or a reference file; moments are zeroed.
 */
int ckpt_read_weights(const char *path, struct model *m, char *err,
		      size_t len);

/*
 * Load the newest valid checkpoint of dir, refusing bad ones with a
 * warning that names the file and the problem and falling back to older
 * ones. Returns 0 (path says which), -ENOENT (none there), or -EBADMSG
 * (some there, none valid).
 */
int ckpt_load_latest(const char *dir, struct model *m, struct ckpt_state *st,
		     char *path, size_t plen, char *err, size_t len);

/* Remove all but the newest keep complete checkpoints of dir. */
int ckpt_prune(const char *dir, int keep);

/* "HDF5 1.10.8" */
void ckpt_library_version(char *buf, size_t len);

#endif /* SIGMA_TRAIN_CKPT_H */
