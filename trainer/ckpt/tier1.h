/*
 * tier1.h - the node-local tier (docs/checkpoint-format.md, "Tiers"):
 * every --ckpt-every steps each rank writes its state to
 * LOCAL/NODE/rank-R in the background and sends a copy to its buddy, the
 * rank at the same place on the next node, which keeps it in
 * LOCAL/NODE/replica-F. resume.c reads them back.
 */
#ifndef SIGMA_TRAIN_TIER1_H
#define SIGMA_TRAIN_TIER1_H

#include <limits.h>

#include "ckpt.h"
#include "dist.h"
#include "tiers_conf.h"
#include "tier2.h"

struct tier1 {
	struct ckpt_async *own, *rep; /* this rank's shard, the replica */
	char own_dir[PATH_MAX], rep_dir[PATH_MAX];
	char node_dir[PATH_MAX]; /* LOCAL/NODE: what resume lists */
	int buddy, from; /* sends to buddy, keeps from's replica; -1: none */
	/* what from holds (its tensors, no memory), when ranks hold
	 * different parts; NULL: the same as this rank */
	struct model *from_shard;
	/* a save whose copy the writer thread is still making */
	bool inflight;
	/* the replica exchange of the last save, still travelling: the
	 * parameters and both moments, then the state (received in rst) */
	struct comm_request xreq[4];
	struct ckpt_state sst, rst; /* the state sent and received */
	bool exchanging;
};

/* the rank this one sends its copies to, and the one whose replica it
 * keeps (the same place on the next and the previous node); -1: none */
void tier1_buddies(const struct dist *d, int *buddy, int *from);

/* this rank's directories, cleared of another run's copies, and their
 * writers; 0 or -errno after printing why */
int tier1_open(struct tier1 *t, const struct tiers_conf *o,
	       const struct dist *d, const struct model *m, const char *run);

/* stage, write locally in the background, and start the swap of copies
 * with the buddies; both overlap the next step (the copy for a model in
 * host memory) until tier1_finish; 0 or an exit code after printing why */
int tier1_save(struct tier1 *t, struct dist *d, const struct model *m,
	       const struct ckpt_state *st, struct ckpt_times *ct);
/* before anything changes the model's parameters or moments again: the
 * copy of the last save is made and its replicas have arrived (the
 * replica goes to its writer); the wait is added to ct->stall_ms. 0 or
 * an exit code (76: the exchange failed) */
int tier1_finish(struct tier1 *t, struct ckpt_times *ct);

/* both writes in flight are on disk (or reported): 0 or -errno */
int tier1_wait(struct tier1 *t);

/* waits, then frees the writers; t may never have been opened */
void tier1_close(struct tier1 *t);

#endif /* SIGMA_TRAIN_TIER1_H */
