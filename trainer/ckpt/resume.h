/*
 * resume.h - a start that continues a run, from whichever tier holds its
 * newest valid step (resume_run), through one path: the restore planner
 * (resume_restore). The ranks of the new allocation list what their
 * nodes hold (nothing with tier 1 off) and rank 0 what the shared tier
 * names, exchange the table, each computes the same plan (restore.h),
 * the sources read and verify their copies, missing shards move to their
 * owners, the shared tier is read once, and a copy found damaged is
 * marked bad and the plan made again (docs/checkpoint-format.md,
 * "Restore after a requeue").
 *
 * Part of sigma-train itself (it talks through dist.h).
 */
#ifndef SIGMA_TRAIN_RESUME_H
#define SIGMA_TRAIN_RESUME_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "ckpt.h"
#include "dist.h"
#include "model.h"
#include "restore.h"

struct resume_args {
	const char *node_dir;	/* LOCAL/NODE: rank-R and replica-R inside; NULL
				   with tier 1 off */
	const char *shared_dir; /* the shared tier, read by rank 0 */
	const char *layout;	/* of this job: copies of another are ignored */
	const char *run;	/* this run's id: copies of others are ignored */
};

struct resume_result {
	enum restore_tier tier;
	long step; /* -1: nothing anywhere, start at 0 */
	int attempt;
	int max_attempt; /* the newest attempt any copy names, -1 none */
	long lost; /* steps between the newest named and the chosen one */
	long newest_step;   /* the newest step any copy names */
	long shared_newest; /* the newest step named in the shared tier */
	int nshards, nxfer, from_replica, self_replica;
	int rounds;	 /* plans made (1 + those after a damaged copy) */
	char path[4096]; /* tier 2: the file */
	char why[256];	 /* tier 2 or none: why not tier 1 */
	/* the last shared read: 0, -ENOENT (none there), -EBADMSG (none
	 * valid) with shared_err on rank 0 (0 too when none was made) */
	int shared_rc;
	char shared_err[1024];
};

/*
 * Every rank calls it. On 0, m holds this rank's shard of the chosen step
 * and st its state (res->tier RESTORE_NONE: nothing loaded). Else -errno:
 * -EIO for a peer or exchange failure, -ENOMEM, -EBADMSG when copies kept
 * failing after as many plans as there were copies (err says which).
 */
int resume_restore(struct dist *d, struct model *m, const struct resume_args *a,
		   struct ckpt_state *st, struct resume_result *res, char *err,
		   size_t len);

/* ---- a start that continues a run: every tier ---------------------------- */

struct resume_from {
	const char *node_dir;	/* LOCAL/NODE with tier 1 on, else NULL */
	const char *shared_dir; /* the shared tier */
	int batch;		/* this start's --batch and --seed: told when */
	uint64_t seed;		/* the checkpoint differs */
	uint64_t data_checksum; /* of this start's training file */
};

struct resume_to {
	long start;	      /* the first step to run (0: from scratch) */
	char full[PATH_MAX]; /* rank 0: the full shared checkpoint read, if */
	long full_step;	      /* any (the differentials' base), -1 none */
	/* the tensors were read as their copies hold them (tier 1): the
	 * experts' slots are in the checkpoint's placement, not by expert */
	bool slots;
};

/*
 * Every rank calls it when the start continues a run. The planner above
 * chooses the step and the tier (and may raise st->attempt past the
 * newest attempt any copy names); with tier 1 off (node_dir NULL) it
 * chooses the shared tier's newest valid checkpoint, full or
 * differential. The log says which: with tier 1 on, the tier and how
 * many checkpointed steps were lost; with the shared tier alone, the
 * file, and a shared tier none of whose checkpoints is valid stops the
 * start (TRAIN_EXIT_DATAERR). st holds this start's state on entry
 * (its layout and run say which copies count) and the checkpoint's
 * seed, data position, guard and tuner state after. 0 or an exit code.
 */
int resume_run(struct dist *d, struct model *m, const struct resume_from *f,
	       struct ckpt_state *st, struct resume_to *to);

#endif /* SIGMA_TRAIN_RESUME_H */
