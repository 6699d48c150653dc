/*
 * ckpt.h - checkpoints in HDF5 (docs/checkpoint-format.md): full ones
 * (ckpt_full.c), differential ones (ckpt_diff.c), what a directory holds
 * (ckpt_dir.c) and the background writer (ckpt_async.c). Only
 * ckpt_h5.c, behind them, sees hdf5.h.
 *
 * A checkpoint holds every tensor of docs/model.md under its canonical
 * name, both AdamW moments, the step, the data position, the RNG state,
 * the configuration and a provenance group. It is written to a temporary
 * name, fsync'd, marked complete, and renamed into place; a reader
 * validates everything before it touches the model.
 */
#ifndef SIGMA_TRAIN_CKPT_H
#define SIGMA_TRAIN_CKPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "contract.h"
#include "guard_state.h"
#include "tuner_state.h"
#include "model.h"
#include "run.h"

#define CKPT_FORMAT "sigma-checkpoint"
#define CKPT_VERSION 1
/* an index of whole tensors over shard files (virtual datasets) */
#define CKPT_VERSION_SHARDED 2
#define CKPT_SHARD_FORMAT "sigma-checkpoint-shard"
#define CKPT_LAYOUT_MAX 96
#define CKPT_ATTEMPT_MAX SIGMA_ATTEMPT_MAX /* lib/attempt.h */

/* Everything besides the tensors that a resumed run needs. */
struct ckpt_state {
	long step; /* steps completed; the next step to run */
	int batch; /* sequences per step */
	uint64_t seed; /* run seed: weights and batch order */
	uint64_t rng; /* RNG state */
	uint64_t data_ntokens; /* identity of the training file */
	uint64_t data_checksum;
	struct optim_config optim;
	/* the guard's counters and windows (guard_state.h): the /guard
	 * group, written when guard.n > 0 (a window: when its n > 0);
	 * guard.n 0 after reading a file without */
	struct guard_state guard;
	/* the auto-tuner's shares and decisions (tuner_state.h): the
	 * /tuner group, written when tuner.n > 0; n 0 after reading a file
	 * without (even shares) */
	struct tuner_state tuner;
	/* the job's attempt (SIGMA_ATTEMPT) that wrote it: part of the
	 * name, and orders checkpoints before the step does (restore.h) */
	int attempt;
	/* the run that wrote it (run.h): the run_id attribute, "" in a
	 * file of an earlier version; a directory's manifest names the one
	 * run whose checkpoints it may hold */
	char run[RUN_ID_MAX];
	/* the parallel layout that wrote it, "" when it does not matter
	 * (shared files hold whole tensors); read back "" if absent */
	char layout[CKPT_LAYOUT_MAX];
	/* the BLAS kernel of the program that wrote it (blas_core.h), from
	 * /provenance; "" in a file without. Informative: a resume on
	 * another kernel is allowed, and says so */
	char blas_kernel[32];
};

/* a checkpoint named in a directory */
struct ckpt_entry {
	long step;
	int attempt;
};

/*
 * Write dir/ckpt-STEP.h5 (STEP = st->step, 8 digits), or
 * dir/ckpt-STEP-aATTEMPT.h5 when st->attempt > 0. path receives the final
 * name. Returns 0 or -errno with err naming the file and problem:
 * -ENOSPC when the file system is full (the temporary file is removed,
 * the checkpoints already there are untouched), -ESTALE when the
 * directory holds a checkpoint of a newer attempt (this instance of the
 * job is an old one still running after a requeue: it publishes
 * nothing).
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
 * The same weights into out (m->nparams floats, host memory), m itself
 * untouched: what the reader of a file from elsewhere hands back
 * (untrusted.h). A file with no seal is taken.
 */
int ckpt_read_weights_host(const char *path, const struct model *m, float *out,
			   char *err, size_t len);
/* Weights read by ckpt_read_weights_host into m (moments zeroed): 0, or
 * -EBADMSG when one is not finite. */
int ckpt_load_weights(struct model *m, const float *w);

/*
 * Load the newest valid checkpoint of dir, refusing bad ones with a
 * warning that names the file and the problem and falling back to older
 * ones. Returns 0 (path says which), -ENOENT (none there), or -EBADMSG
 * (some there, none valid).
 */
int ckpt_load_latest(const char *dir, struct model *m, struct ckpt_state *st,
		     char *path, size_t plen, char *err, size_t len);

/*
 * Read path into stage (params, m, v of m's layout: 3 * nparams floats of
 * host memory) and st, validated as ckpt_read does; m is not touched.
 */
int ckpt_read_stage(const char *path, const struct model *m, float *stage,
		    struct ckpt_state *st, char *err, size_t len);

/*
 * The header only (format, complete, step, attempt, layout): cheap, for
 * listing what a directory offers. 0 or -EBADMSG/-ENOENT with err.
 */
int ckpt_peek(const char *path, struct ckpt_state *st, char *err,
	      size_t len);

/* "dir/ckpt-00000009.h5" or "dir/ckpt-00000009-a2.h5"; 0 or -errno */
int ckpt_path(char *buf, size_t len, const char *dir, long step,
	      int attempt);

/*
 * The checkpoints named in dir, newest first in (attempt, step) order
 * (restore.h): up to max of them; the count, or -errno.
 */
int ckpt_list(const char *dir, struct ckpt_entry *e, int max);

/*
 * Remove all but the newest keep complete checkpoints of dir, in
 * (attempt, step) order, and all but the newest keep differentials; a
 * full checkpoint that a kept differential names as its base is kept
 * whatever its age. Called only after a newer one is in place.
 */
int ckpt_prune(const char *dir, int keep);

/*
 * Differential checkpoints (docs/checkpoint-format.md, "Differential
 * checkpoints"): dir/diff-SSSSSSSS-base-BBBBBBBB.h5 (-aN.h5 when
 * written by attempt N > 0) holds the state at
 * step S as, per tensor, nothing (bit-identical to the base), a lossless
 * delta (delta.h) or the tensor whole, against the full checkpoint of
 * step B in the same directory, named by its file name and the checksum
 * of its state. Never against another differential: base + one
 * differential gives the state.
 */
#define CKPT_DIFF_FORMAT "sigma-checkpoint-diff"
#define CKPT_DIFF_VERSION 1

/* The base in host memory: a full checkpoint's state as written. */
struct ckpt_base {
	float *state; /* params, m, v: 3 * nparams, owned */
	size_t nparams;
	long step; /* -1: none yet */
	uint64_t checksum; /* state_hash of state (delta_hash chained) */
	char file[256]; /* its file name in the checkpoint directory */
};

struct ckpt_diff_stats {
	int tensors[3]; /* per enum delta_kind: same, delta, whole */
	uint64_t bytes; /* the file's size */
	long base_step;
	double ms; /* to encode and write */
};

/* _init/_fini: allocates the state for m's layout; 0 or -ENOMEM */
int ckpt_base_init(struct ckpt_base *b, const struct model *m, char *err,
		   size_t len);
void ckpt_base_fini(struct ckpt_base *b);
/* b becomes the state of stage (host, 3 * nparams) or, stage NULL, of m,
 * just written as the full checkpoint path of step */
void ckpt_base_set(struct ckpt_base *b, const struct model *m,
		   const float *stage, long step, const char *path);
/*
 * Write the differential of st->step against b (older) into dir, with
 * a full checkpoint's safety (temporary name, marker last, fsync,
 * rename, checksums). stage as for the background writer, NULL: from m.
 * ds (may be NULL) receives what was stored. 0 or -errno with err.
 */
int ckpt_write_diff(const char *dir, const struct model *m,
		    const float *stage, const struct ckpt_state *st,
		    const struct ckpt_base *b, struct ckpt_diff_stats *ds,
		    char *path, size_t plen, char *err, size_t len);
/*
 * Validate a differential, its base (in the same directory: whole,
 * valid, the same step and checksum) and every decoded tensor's
 * checksum, then load; nothing in m changes unless all is good.
 * 0, -ENOENT or -EBADMSG with err naming the file and problem.
 */
int ckpt_read_diff(const char *path, struct model *m, struct ckpt_state *st,
		   char *err, size_t len);
/*
 * ckpt_load_latest, then any valid differential of dir newer in
 * (attempt, step) order, newest first (one whose base is missing,
 * damaged or replaced is refused with a warning). Returns as
 * ckpt_load_latest; path says which file.
 */
int ckpt_load_latest_diff(const char *dir, struct model *m,
			  struct ckpt_state *st, char *path, size_t plen,
			  char *err, size_t len);
/* whether a file name is one a checkpoint is published under: a full
 * checkpoint, a differential, or the seal of either */
bool ckpt_is_published_name(const char *name);
/* whether path names a differential */
bool ckpt_is_diff(const char *path);
/* the newest differential named in dir in (attempt, step) order (not
 * validated): its step and attempt, -1 none */
long ckpt_diff_newest(const char *dir, int *attempt);
long ckpt_diff_newest_step(const char *dir);
/* remove the differentials of steps above step (after a rollback to
 * step, they belong to an abandoned run); how many, or -errno */
int ckpt_diff_discard_after(const char *dir, long step);
/* compressed size of n words as a differential stores them (bytes) */
long ckpt_diff_estimate(const uint32_t *words, size_t n);

/*
 * Asynchronous writer (docs/checkpoint-format.md, "Asynchronous
 * writes"). Submit copies the weights and both moments to a host stage
 * (the only stall of training) and a background thread writes the file
 * with ckpt_write's guarantees, then prunes to the newest keep. At most
 * one write is in flight: a submit while one is still writing waits for
 * it (a stall, counted). A failed write is retried attempts - 1 more
 * times, waiting retry_ms, then twice that, ...; if every attempt fails
 * the next submit or wait returns the error, naming the step, and keeps
 * returning it: the caller stops rather than run on unprotected.
 *
 * Only the writer thread calls HDF5 while a write is in flight: call
 * ckpt_async_wait before any other ckpt_ function (a rollback, the
 * end, a stop). m must outlive the writer and keep its layout.
 */
struct ckpt_async;

struct ckpt_async_stats {
	long submits; /* snapshots staged */
	long writes; /* written and renamed into place */
	long failures; /* attempts that failed (retried or not) */
	long lost; /* snapshots for which every attempt failed */
	long stalls; /* submits that waited for the previous write */
	long write_step; /* step of the newest written checkpoint */
	double stall_ms; /* last submit: waiting plus copying */
	double wait_ms; /* of it, waiting for the previous write */
	double write_ms; /* last finished write, retries included */
	double total_stall_ms, total_write_ms;
	long diff_writes; /* of writes, differentials */
	struct ckpt_diff_stats diff; /* the last differential written */
};

int ckpt_async_create(struct ckpt_async **w, const char *dir, int keep,
		      int attempts, unsigned retry_ms, const struct model *m,
		      char *err, size_t len);
/* 0, or -errno with err when the previous snapshot was never written */
int ckpt_async_submit(struct ckpt_async *w, const struct model *m,
		      const struct ckpt_state *st, char *err, size_t len);
/* until nothing is in flight; the result of the last write as submit */
int ckpt_async_wait(struct ckpt_async *w, char *err, size_t len);
/*
 * Like ckpt_async_submit, but the writer thread makes the copy itself,
 * first thing, so that it overlaps the caller's next computation: m's
 * parameters and moments must not change until ckpt_async_copied
 * returns (a model in host memory only: the thread copies with m's ops).
 */
int ckpt_async_submit_lazy(struct ckpt_async *w, const struct model *m,
			   const struct ckpt_state *st, char *err, size_t len);
/* Until the copy of the last submit is made; the milliseconds waited. */
double ckpt_async_copied(struct ckpt_async *w);
/* From now on w writes rank's part of sharded steps (ckpt_write_shard),
 * the tensors which selects, and prunes nothing. */
void ckpt_async_set_shard(struct ckpt_async *w, int rank, unsigned which);
/* Without waiting: 1 when no write is in flight and the last succeeded
 * (*step: the newest step written, -1 none), 0 while one is in flight,
 * or the last write's -errno. */
int ckpt_async_poll(struct ckpt_async *w, long *step);
void ckpt_async_stats(struct ckpt_async *w, struct ckpt_async_stats *s);
/* test hook: the next n attempts fail with EIO before touching the disk */
void ckpt_async_inject_failures(struct ckpt_async *w, int n);
/*
 * Staging from elsewhere (a replica received from a peer): claim waits
 * for the write in flight and returns the stage (3 * nparams floats) to
 * fill, or NULL with err as submit; commit hands it to the writer, as
 * copied (ckpt_async_copied returns at once).
 * staged: the stage of the last submit, read-only until the next one.
 */
float *ckpt_async_claim(struct ckpt_async *w, char *err, size_t len);
void ckpt_async_commit(struct ckpt_async *w, const struct ckpt_state *st);
const float *ckpt_async_staged(struct ckpt_async *w);
/*
 * Differentials from this writer (after create, before any submit): each
 * full checkpoint written becomes the base; submit_diff stages like
 * submit and the thread writes a differential against that base, or a
 * full checkpoint when it has none yet (it says so). set_base: the
 * base is m as it is now, read from the full checkpoint path (resume).
 */
int ckpt_async_enable_diff(struct ckpt_async *w, const struct model *m,
			   char *err, size_t len);
void ckpt_async_set_base(struct ckpt_async *w, const struct model *m,
			 long step, const char *path);
int ckpt_async_submit_diff(struct ckpt_async *w, const struct model *m,
			   const struct ckpt_state *st, char *err, size_t len);
/* the newest step named in dir (not validated), -1 if none; attempt
 * (may be NULL) receives its attempt */
long ckpt_newest(const char *dir, int *attempt);
/* waits for the write in flight, stops the thread; NULL is fine */
void ckpt_async_destroy(struct ckpt_async *w);

/* ---- sharded checkpoints (ckpt_shard.c) ------------------------------------
 *
 * A model that no rank holds whole is checkpointed in parts: each writer
 * rank publishes DIR/shard-SSSSSSSS[-aN]-RRRRR.h5 (its tensors as it holds
 * them), and once all are there one rank publishes the index
 * DIR/ckpt-SSSSSSSS[-aN].h5, which readers list, seal-check and read like
 * any full checkpoint: every tensor is there whole, a virtual dataset over
 * the parts, and /shards records each part's seal.
 */

/* which tensors of a rank's model a part holds */
#define CKPT_DENSE 1u	/* every one but the experts */
#define CKPT_EXPERTS 2u /* w1, w3, w2 */
#define CKPT_ALL (CKPT_DENSE | CKPT_EXPERTS)

/* DIR/shard-SSSSSSSS-RRRRR.h5, or -aN- before RRRRR for attempt N > 0 */
int ckpt_shard_path(char *buf, size_t len, const char *dir, long step,
		    int attempt, int rank);
/*
 * Rank's part of step st->step: the tensors of m that which selects, from
 * stage (host memory: params, m, v, 3 x nparams). Published like a full
 * checkpoint (temporary name, seal, rename); -ESTALE as ckpt_write.
 */
int ckpt_write_shard(const char *dir, const struct model *m,
		     const float *stage, const struct ckpt_state *st, int rank,
		     unsigned which, char *path, size_t plen, char *err,
		     size_t len);

/* one part of a sharded step: the rank that wrote it, the tensor table of
 * what that rank holds (model_create_layout), and which it wrote */
struct ckpt_writer {
	int rank;
	const struct model *shard;
	unsigned which;
};

/*
 * The index of step st->step once every part w[nw] is published in dir:
 * the state of st, whole's configuration, and every tensor of whole (the
 * whole model's table) as a virtual dataset over the parts. -EINVAL when
 * the parts do not cover every row of every tensor.
 */
int ckpt_write_index(const char *dir, const struct model *whole,
		     const struct ckpt_writer *w, int nw,
		     const struct ckpt_state *st, char *path, size_t plen,
		     char *err, size_t len);

#endif /* SIGMA_TRAIN_CKPT_H */
