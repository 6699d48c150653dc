/*
 * sigma_runtime.h - sigma's runtime for a training loop that is not
 * sigma-train: what a trainer does to be protected by sigma under Slurm
 * (docs/job-protocol.md). Installed with libsigma-runtime and its
 * pkg-config file (sigma-runtime.pc); the Python package sigmatorch is
 * built on it.
 *
 * Four objects: a job handle (the records a launcher reads), a guard
 * (the numerical guardrails' decisions, docs/guardrails.md), a
 * straggler detector (which ranks are slow, and the early warning to
 * sigmad for this rank's node, docs/tuner.md) and a checkpoint of a
 * table of named tensors (the node-local tier, docs/pytorch.md).
 *
 * Lifecycle of a job handle, one per rank:
 *
 *   sigma_rt_job_open    once the rank is known: the start record
 *   sigma_rt_job_step    after each step (its checkpoint, if any, taken)
 *   sigma_rt_job_exit    just before the process exits, with its code
 *   sigma_rt_job_close   frees the handle (no record)
 *
 * Ownership: the handle is the caller's from open to close. Functions
 * that return int return 0 or a negative errno, with err (when given)
 * naming the problem. Nothing here installs a signal handler or exits:
 * the caller owns its signals (SIGUSR1 and SIGTERM ask for a checkpoint
 * and the exit code SIGMA_RT_EXIT_REQUEUE) and its exit.
 *
 * Thread safety: one thread calls step; exit may be called from another
 * thread that is about to end the process (a watchdog).
 */
#ifndef SIGMA_RUNTIME_H
#define SIGMA_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SIGMA_RT_VERSION 1

/*
 * The exit codes of the job protocol (docs/job-protocol.md): the values of
 * contract.h, which sigmad, Slurm's RequeueExit and sigma-launch act on.
 */
#define SIGMA_RT_EXIT_OK	  0  /* every step done */
#define SIGMA_RT_EXIT_FAILURE	  1  /* anything else */
#define SIGMA_RT_EXIT_USAGE	  64 /* bad flags or settings */
#define SIGMA_RT_EXIT_DIVERGED	  70 /* not finite, the guard gave up */
#define SIGMA_RT_EXIT_CANTCREAT	  73 /* a checkpoint could not be written */
#define SIGMA_RT_EXIT_REQUEUE	  75 /* stopped on request, checkpointed */
#define SIGMA_RT_EXIT_PEER	  76 /* a peer rank failed */
#define SIGMA_RT_EXIT_HARDWARE	  79 /* a recomputed step differs */

/* the value of an exit code by its name ("ok", "requeue", "peer", ...,
 * the names above in lower case), or -1 */
int sigma_rt_exit_code(const char *name);

struct sigma_rt_job;

/*
 * A handle for rank, with its start record in $SIGMA_JOB_RECORDS (set by
 * sigma-launch; unset: a handle that records nothing). -ENOMEM, or the
 * record directory's problem (-EINVAL, -ENOTDIR, -EPERM, ...) with *job
 * NULL.
 */
int sigma_rt_job_open(struct sigma_rt_job **job, int rank, char *err,
		      size_t len);

/* whether the handle writes records (SIGMA_JOB_RECORDS was set) */
int sigma_rt_job_recording(const struct sigma_rt_job *job);

/* step done; written at most every 200 ms */
void sigma_rt_job_step(struct sigma_rt_job *job, long step);

/* the process leaves with code after step; written at once */
void sigma_rt_job_exit(struct sigma_rt_job *job, long step, int code);

void sigma_rt_job_close(struct sigma_rt_job *job);

/* ---- the guard: numerical guardrails ------------------------------------ */

/*
 * The decisions sigma-train's guard takes, over the numbers any training
 * loop has after its backward pass: the loss and the gradient norm, the
 * same on every rank (reduce them first). Pure: no I/O, no signals; the
 * caller acts on what sigma_rt_guard_check returns.
 *
 *   sigma_rt_guard_open      with its settings
 *   sigma_rt_guard_check     every step, before the optimizer's update
 *   sigma_rt_guard_lr_scale  the factor of the learning rate for a step
 *   sigma_rt_guard_rolled_back  after the caller reloaded a checkpoint
 *   sigma_rt_guard_skip_data whether a step's batch is to be skipped
 *   sigma_rt_guard_save/_load   the guard's state, kept in a checkpoint
 *   sigma_rt_guard_close
 */

/* the actions: a bit set (0: apply the update) */
#define SIGMA_RT_GUARD_RECOMPUTE 0x01 /* run the same step again, check */
#define SIGMA_RT_GUARD_SKIP	 0x02 /* no update */
#define SIGMA_RT_GUARD_LOWER_LR	 0x08 /* see sigma_rt_guard_lr_scale */
#define SIGMA_RT_GUARD_ROLLBACK	 0x10 /* reload the newest checkpoint */
#define SIGMA_RT_GUARD_REQUEUE	 0x20 /* exit SIGMA_RT_EXIT_HARDWARE */
#define SIGMA_RT_GUARD_STOP	 0x40 /* exit SIGMA_RT_EXIT_DIVERGED */

struct sigma_rt_guard_event {
	long step;	  /* as given */
	unsigned actions; /* as returned */
	char cause[24];	  /* "non-finite", "loss-spike", "gnorm-spike",
			     "hardware"; "" when all is well */
	double value;	  /* the loss or gradient norm concerned */
	double z;	  /* z-score of a spike; NaN otherwise */
};

struct sigma_rt_guard;

/*
 * A guard with settings, words "key=value" separated by spaces or commas
 * (NULL or "": the defaults of sigma-train): window (50), min_samples
 * (20), z (6: both spike thresholds), loss_z, gnorm_z, rel_floor (0.02),
 * lr_steps (50), lr_factor (0.5), rollback_after (3), trouble_steps
 * (50), max_rollbacks (3), recompute (on), enabled (on). -EINVAL with err
 * naming the setting, or -ENOMEM; *g NULL then.
 */
int sigma_rt_guard_open(struct sigma_rt_guard **g, const char *settings,
			char *err, size_t len);

/*
 * Judge step (1-based) from its loss and gradient norm; recomputed: this
 * is the second computation of a step that returned RECOMPUTE (a result
 * that differs in any bit is a hardware fault: REQUEUE). Fills ev (may be
 * NULL; cause "" when all is well) and returns the actions.
 */
unsigned sigma_rt_guard_check(struct sigma_rt_guard *g, long step,
			      double loss, double gnorm, int recomputed,
			      struct sigma_rt_guard_event *ev);

/* the learning rate's factor for step: 1, or lr_factor in a window */
double sigma_rt_guard_lr_scale(const struct sigma_rt_guard *g, long step);

/* the caller reloaded the checkpoint of ckpt_step while at at_step */
void sigma_rt_guard_rolled_back(struct sigma_rt_guard *g, long ckpt_step,
				long at_step);

/* whether step's batch lies in the data window a rollback skips */
int sigma_rt_guard_skip_data(struct sigma_rt_guard *g, long step);

/* "guard: step S: CAUSE value V z Z: ACTIONS", the line sigma-train logs */
void sigma_rt_guard_describe(const struct sigma_rt_guard_event *ev,
			     char *buf, size_t len);

/*
 * The guard's state (counters and windows, exactly as held) as bytes for
 * a checkpoint, so that a resumed run judges as the run that never
 * stopped. save returns the size (call with len 0 to learn it) or
 * -ENOSPC; load returns 0 or -EINVAL with err (bytes of another format,
 * size or version), the guard unchanged.
 */
long sigma_rt_guard_save(const struct sigma_rt_guard *g, void *buf,
			 size_t len);
int sigma_rt_guard_load(struct sigma_rt_guard *g, const void *buf,
			size_t len, char *err, size_t errlen);

void sigma_rt_guard_close(struct sigma_rt_guard *g);

/* ---- stragglers: which ranks are slow ------------------------------------ */

/*
 * sigma-train's test of a slow rank (docs/tuner.md, "detection") over the
 * time each rank was busy in a step (its compute, without the waits in
 * collectives), the same numbers on every rank (all-gather them first):
 * a rank whose median over a window is above slow x the ranks' median,
 * by more than 3 of its own MADs, confirmed after `confirm` steps in a
 * row. A rank that stays slow `escalate` seconds reports its own node to
 * sigmad as an early warning (sigmactl slow), which moves the job off it.
 *
 *   sigma_rt_straggler_open      for nranks ranks, this one rank
 *   sigma_rt_straggler_record    every step, the ranks' busy seconds
 *   sigma_rt_straggler_escalate  this rank's report, when due
 *   sigma_rt_straggler_close
 */
struct sigma_rt_straggler;

struct sigma_rt_straggler_event {
	int rank;     /* the rank that changed */
	int slow;     /* 1 now slow, 0 no longer slow */
	double ratio; /* its median over the ranks' median */
	long step;    /* the step whose record changed it */
};

/*
 * Settings, words "key=value" (NULL or "": the defaults): window (10
 * steps, 3 .. 64), slow (1.25), confirm (3), floor (0 seconds: the least
 * excess that counts), escalate (60 seconds; 0 at once; "off" never).
 * -EINVAL with err naming the setting (or nranks, rank), -ENOMEM.
 */
int sigma_rt_straggler_open(struct sigma_rt_straggler **s, int nranks,
			    int rank, const char *settings, char *err,
			    size_t len);

/*
 * The busy seconds of every rank, busy[nranks], for one step. Fills ev[]
 * (room for nranks events) with the ranks whose state changed at this
 * step and returns how many; -EINVAL (a negative or non-finite time, nranks
 * differs) with nothing recorded.
 */
int sigma_rt_straggler_record(struct sigma_rt_straggler *s, long step,
			      const double *busy, int nranks,
			      struct sigma_rt_straggler_event *ev);

/* whether rank is confirmed slow, and its median over the ranks' median
 * (0 before a full window) */
int sigma_rt_straggler_slow(const struct sigma_rt_straggler *s, int rank);
double sigma_rt_straggler_ratio(const struct sigma_rt_straggler *s, int rank);

/*
 * When this rank has been slow `escalate` seconds and has not reported
 * yet: report its node (SLURMD_NODENAME, of job SLURM_JOB_ID) with
 * sigmactl slow, in the background, and say so on stderr. 1 reported, 0
 * nothing due, or -errno: not in a Slurm job (-ENOENT), a report still
 * running (-EBUSY), sigmactl could not run (-EIO).
 */
int sigma_rt_straggler_escalate(struct sigma_rt_straggler *s, long step);

void sigma_rt_straggler_close(struct sigma_rt_straggler *s);

/* ---- checkpoints: a table of named tensors ------------------------------- */

/*
 * A rank's state as a table of named tensors (a model's parameters, an
 * optimizer's moments and step, a data position, RNG states as bytes),
 * written every step to the node-local tier: DIR/rank-R/step-S.h5, one
 * sealed HDF5 file per rank and step (the seal and the checksummed
 * datasets of docs/checkpoint-format.md), the newest `keep` kept.
 *
 *   sigma_rt_ckpt_open   this rank's directory, the run's identity
 *   sigma_rt_ckpt_save   after a step: copies the tensors, returns, and
 *                        writes the copy in the background
 *   sigma_rt_ckpt_fence  with "copy=no": the tensors may change now
 *   sigma_rt_ckpt_wait   the write in flight is on disk (or failed)
 *   sigma_rt_ckpt_steps  the steps this rank has, newest first
 *   sigma_rt_ckpt_shape  a tensor's dtype and shape in a step
 *   sigma_rt_ckpt_load   a step's tensors, by name, into the caller's
 *   sigma_rt_ckpt_load_resharded  the same from the files of another
 *                        number of ranks, by name and place
 *   sigma_rt_ckpt_close  waits, frees
 *
 * The step to resume is the newest that every rank has: all-gather the
 * steps and take the newest in all of them. A file of another run (its
 * run attribute differs) is refused, never read.
 *
 * With the setting "copy=no" there is no copy: save returns at once,
 * the writer thread writes the caller's tensors themselves while
 * the caller computes its next step's forward and backward passes, and
 * the caller calls fence before it changes any of them (before the
 * optimizer's step). fence returns once their bytes are in the file
 * (handed to the kernel; the sync, the seal and the rename come after).
 * That takes the copy off the caller's path, and out of its memory.
 *
 * Thread safety: one thread uses an object; the writer thread is its
 * own. Memory: with copy=yes, the object keeps one copy of the table
 * (the largest saved), for the writer.
 */

/* element types; bf16 and f16 are stored as their 16 bits */
enum sigma_rt_dtype {
	SIGMA_RT_F32 = 1,
	SIGMA_RT_F64,
	SIGMA_RT_BF16,
	SIGMA_RT_F16,
	SIGMA_RT_I64,
	SIGMA_RT_I32,
	SIGMA_RT_U8,
	SIGMA_RT_BOOL, /* one byte each */
};

#define SIGMA_RT_NDIM_MAX 8   /* dimensions of a tensor */
#define SIGMA_RT_NAME_MAX 255 /* bytes of a tensor's name */

/*
 * One entry of a table. name: unique in the table, letters, digits and
 * "_.:-", not starting with "."; shape[ndim] (ndim 0: a scalar); data:
 * the elements, contiguous, row-major, in host memory. For a shard of a
 * larger tensor, global_shape[ndim] and offset[ndim] say where this part
 * lies (both NULL: the tensor is whole). Nothing is kept after a call.
 */
struct sigma_rt_tensor {
	const char *name;
	int dtype; /* enum sigma_rt_dtype */
	int ndim;
	const int64_t *shape;
	void *data;
	const int64_t *global_shape;
	const int64_t *offset;
};

struct sigma_rt_ckpt;

/*
 * The node-local tier of rank under dir (made, mode 0700, if missing) for
 * the run named run (letters, digits, "_.-", at most 64 bytes: the job's
 * identity, the same on every rank and attempt). Settings, words
 * "key=value" (NULL or "": the defaults): keep (2, 1 .. 64), the steps
 * kept; copy (yes or no: see above; yes). -EINVAL with err naming what
 * is wrong, -ENOTSUP (a library built without HDF5), -ENOMEM, or dir's
 * problem (-EACCES, -ENOTDIR, ...).
 */
int sigma_rt_ckpt_open(struct sigma_rt_ckpt **ck, const char *dir,
		       const char *run, int rank, const char *settings,
		       char *err, size_t len);

/*
 * The table t[n] as step's checkpoint: checked (-EINVAL with err naming
 * the entry: a bad name, dtype or shape, a duplicate, a size that
 * overflows), copied, and written in the background. A write still in
 * flight is waited for first; when that one failed, its failure is
 * returned (err names its step) and nothing new is started. -ENOMEM.
 * With copy=no the elements are read after save returns: they must
 * stay where they are, unchanged, until fence (or wait, or the next
 * save) returns; the names and shapes are copied before save returns.
 */
int sigma_rt_ckpt_save(struct sigma_rt_ckpt *ck, long step,
		       const struct sigma_rt_tensor *t, size_t n, char *err,
		       size_t len);

/* returns once the last save's elements are in its file, or its write
 * failed (at once with copy=yes): the caller's tensors may change from
 * then on */
void sigma_rt_ckpt_fence(struct sigma_rt_ckpt *ck);

/* wait for the write in flight: 0, or its failure (-EIO, -ENOSPC, ...)
 * with err naming the file */
int sigma_rt_ckpt_wait(struct sigma_rt_ckpt *ck, char *err, size_t len);

/* the sealed steps this rank has, newest first, at most max into steps;
 * returns how many there are (may exceed max) or -errno */
int sigma_rt_ckpt_steps(struct sigma_rt_ckpt *ck, long *steps, int max);

/*
 * Read step's checkpoint into t[n]: every entry by name, its dtype and
 * shape as the file has them, or -EBADMSG with err saying which (a
 * missing tensor, another shape, a damaged file, a seal that does not
 * match, a file of another run or rank). -ENOENT: no such step.
 * Entries the file has and t does not are ignored.
 */
int sigma_rt_ckpt_load(struct sigma_rt_ckpt *ck, long step,
		       const struct sigma_rt_tensor *t, size_t n, char *err,
		       size_t len);

/*
 * Resharding: read step's checkpoint as written by writers ranks (rank-0
 * .. rank-W-1 beside this rank's directory: a directory every rank sees,
 * or one each writer's files were gathered into) into t[n], by name and
 * by place. Each entry gets the elements of its region (offset and shape
 * in its global shape; a whole entry, all of it) from whichever writers'
 * shards hold them, so a run may come back on another number of ranks or
 * split its tensors another way. Dtype and global shape must agree; a
 * shard held by several writers (data-parallel replicas) is read once.
 * 0; -ENOENT (a writer's file of step is missing) or -EBADMSG (a file
 * refused as by load, shards that overlap, or an entry the writers do
 * not cover whole) with err; -EINVAL (writers out of range, a bad table).
 */
#define SIGMA_RT_WRITERS_MAX 65536
int sigma_rt_ckpt_load_resharded(struct sigma_rt_ckpt *ck, long step,
				 int writers,
				 const struct sigma_rt_tensor *t, size_t n,
				 char *err, size_t len);

/*
 * What step's checkpoint holds as name: *dtype, *ndim and
 * shape[SIGMA_RT_NDIM_MAX], for a caller that makes room before a load
 * (a structure saved as bytes). 0, -ENOENT (no such step) or -EBADMSG
 * (no such tensor, a file refused as by load) with err.
 */
int sigma_rt_ckpt_shape(struct sigma_rt_ckpt *ck, long step,
			const char *name, int *dtype, int *ndim,
			int64_t *shape, char *err, size_t len);

void sigma_rt_ckpt_close(struct sigma_rt_ckpt *ck);

#ifdef __cplusplus
}
#endif

#endif /* SIGMA_RUNTIME_H */
