/*
 * resume.h - restore after a requeue with the node-local tier: the ranks
 * of the new allocation list what their nodes hold, exchange the table,
 * each computes the same plan (restore.h), the sources read and verify
 * their copies, missing shards move to their owners, and a copy found
 * damaged is marked bad and the plan made again
 * (docs/checkpoint-format.md, "Restore after a requeue").
 *
 * Part of sigma-train itself (it talks through dist.h).
 */
#ifndef SIGMA_TRAIN_RESUME_H
#define SIGMA_TRAIN_RESUME_H

#include <stddef.h>

#include "ckpt.h"
#include "dist.h"
#include "model.h"
#include "restore.h"

struct resume_args {
	const char *node_dir;	/* LOCAL/NODE: rank-R and replica-R inside */
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

#endif /* SIGMA_TRAIN_RESUME_H */
