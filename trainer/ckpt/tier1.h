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

#include <stdbool.h>

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
	struct tier1_exchange *x; /* the replicas' thread; NULL: no buddy */
};
/* the rank this one sends its copies to, and the one whose replica it
 * keeps (the same place on the next and the previous node); -1: none */
void tier1_buddies(const struct dist *d, int *buddy, int *from);

/* this rank's directories, cleared of another run's copies, their
 * writers, and the replica link to the buddies (every rank together:
 * the addresses go through PMIx); 0 or -errno after printing why */
int tier1_open(struct tier1 *t, const struct tiers_conf *o, struct dist *d,
	       const struct model *m, const char *run);

/* stage, write locally in the background, and hand the staged copy to
 * the exchange thread, which swaps it with the buddies over a transport
 * of its own (replica_link.h) while the next steps compute; a save waits
 * for the last one's exchange. With split moments the copy holds this
 * rank's blocks of them alone (zeros elsewhere): nothing is gathered.
 * 0 or an exit code after printing why */
int tier1_save(struct tier1 *t, const struct model *m,
	       const struct ckpt_state *st, struct ckpt_times *ct);
/* before anything changes the model's parameters or moments again: the
 * copy of the last save is made; the wait is added to ct->stall_ms. 0 or
 * an exit code (76: an exchange failed) */
int tier1_finish(struct tier1 *t, struct ckpt_times *ct);
/* the copy is made and the last exchange has ended, its replica handed
 * to the replica's writer (the end, a stop, an expert move, a rollback);
 * the wait is a stall too. 0 or an exit code (76: it failed) */
int tier1_exchanged(struct tier1 *t, struct ckpt_times *ct);
/* the same at the end of a run or a stop, where no step follows: the
 * wait is the end's (ct->t1_end_ms), not a stall of training */
int tier1_flush(struct tier1 *t, struct ckpt_times *ct);

/* both writes in flight are on disk (or reported): 0 or -errno */
int tier1_wait(struct tier1 *t);

/* waits, then frees the writers; t may never have been opened */
void tier1_close(struct tier1 *t);

#endif /* SIGMA_TRAIN_TIER1_H */
