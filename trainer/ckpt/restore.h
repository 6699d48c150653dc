/*
 * restore.h - the restore planner: from what every rank of a new
 * allocation holds, which step to resume, from which tier, and where each
 * shard comes from (docs/checkpoint-format.md, "Restore after a requeue").
 *
 * Pure: no files, no communication. The trainer gathers the table (every
 * rank lists its node-local copies; rank 0 lists the shared directory),
 * every rank computes the same plan from the same table, the sources
 * verify their copies by reading them, and a copy found damaged is marked
 * bad and the plan made again.
 *
 * Order of checkpoints: a checkpoint is named by (attempt, step), the
 * job's restart count and the steps completed. A higher attempt is newer
 * than any step of a lower one: an old instance of the job, still running
 * after a requeue, may go on writing higher steps, and those must never win
 * over what the newer instance published. Within one attempt, the higher
 * step is newer.
 */
#ifndef SIGMA_TRAIN_RESTORE_H
#define SIGMA_TRAIN_RESTORE_H

#include <stdbool.h>
#include <stddef.h>

#define RESTORE_MAX_RANKS  65536
#define RESTORE_MAX_COPIES (1 << 20)

enum restore_tier {
	RESTORE_NONE = 0,  /* nothing usable anywhere: start at step 0 */
	RESTORE_TIER1 = 1, /* node-local copies and buddy replicas */
	RESTORE_TIER2 = 2, /* the shared checkpoint directory */
};

/* one node-local checkpoint file a rank of the new allocation can read */
struct restore_copy {
	int holder; /* rank (new allocation) on whose node it is */
	int shard;  /* whose state: the rank of the layout that wrote it */
	long step;
	int attempt;
	bool replica;	  /* kept for a buddy rather than the holder's own */
	bool same_layout; /* written by the layout this job runs */
	bool bad; /* unreadable or failed its checksums: never a source */
};

/* one checkpoint of the shared directory (whole tensors, any layout) */
struct restore_shared {
	long step;
	int attempt;
	bool bad;
};

struct restore_input {
	int nranks; /* ranks, and so shards, of the new allocation */
	const struct restore_copy *copies;
	int ncopies;
	const struct restore_shared *shared;
	int nshared;
};

/* shard moves from the rank that holds a copy to the rank that owns it */
struct restore_transfer {
	int shard;
	int from;
	int to;
};

struct restore_plan {
	enum restore_tier tier;
	long step; /* -1 with RESTORE_NONE */
	int attempt;
	int shared;  /* tier 2: index into input->shared; else -1 */
	int nshards; /* tier 1: = nranks; else 0 */
	int *source; /* tier 1: per shard, the index into input->copies */
	struct restore_transfer *xfer; /* tier 1: in the order to run them */
	int nxfer;
	int from_replica; /* tier 1: shards restored from a buddy's replica */
	long newest_step; /* the newest step any copy names, valid or not */
	int newest_attempt;
	long lost;     /* steps between that one and the chosen step, >= 0 */
	char why[256]; /* tier 2 or none: why not tier 1 */
};

/* 1 when (a1, s1) is newer than (a2, s2), -1 older, 0 the same */
int restore_cmp(int a1, long s1, int a2, long s2);

/*
 * Fill p (caller-owned, released with restore_plan_fini) from in. Returns
 * 0 (p->tier says what to do, RESTORE_NONE included), or -EINVAL with err
 * naming the entry of in that is out of range, or -ENOMEM.
 */
int restore_plan(const struct restore_input *in, struct restore_plan *p,
		 char *err, size_t len);
void restore_plan_fini(struct restore_plan *p);

#endif /* SIGMA_TRAIN_RESTORE_H */
