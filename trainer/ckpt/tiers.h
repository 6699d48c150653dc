/*
 * tiers.h - the one door to sigma-train's checkpoint tiers
 * (docs/checkpointing.md): tier 1, node-local with a buddy replica
 * (tier1.h), and the shared tier, full and differential, written whole by
 * rank 0 (tier2.h) or in parts by each part's writer (tier2_parts.h).
 * The loop, setup, the expert move and the rollback use these verbs
 * alone; which layout the model has, and which writers exist, is the
 * door's business:
 *
 *   tiers_init        settings and the run's ranks; no I/O
 *   tiers_open        the model; tier 1's directories and writers
 *                     (before a resume, which lists tiers_local_dir)
 *   tiers_start       the shared tier's writers, after a resume
 *   tiers_due         whether a checkpoint follows step done
 *   tiers_after_step  the checkpoints due after a step
 *   tiers_settle      the last tier-1 copy made: the weights may change
 *   tiers_quiesce     every writer settled: the model may move or reload
 *   tiers_moved       the experts moved: the index learns their places
 *   tiers_rollback    the guard's rollback to the newest checkpoint
 *   tiers_close       every write finished or reported, all freed
 *   tiers_init_from   a run's first weights from another run's file
 *
 * Functions that return int return 0 or an exit code of exitcodes.h,
 * after saying why. struct tiers is the caller's to hold; its members
 * are the door's.
 */
#ifndef SIGMA_TRAIN_TIERS_H
#define SIGMA_TRAIN_TIERS_H

#include <stdbool.h>
#include <stddef.h>

#include "ckpt.h"
#include "ckpt_due.h"
#include "dist.h"
#include "model.h"
#include "tier1.h"
#include "tier2.h"
#include "tier2_parts.h"
#include "tiers_conf.h"

struct guard_run;

struct tiers {
	struct tiers_conf c;
	struct dist *d;
	struct model *m;
	struct ckpt_sched sched;
	bool local;		/* tier 1 is open */
	struct tier1 t1;
	struct ckpt_async *aw;	/* this rank's shared-tier writer, or NULL */
	struct tier2_parts parts; /* a model held in parts: its writers */
	struct ckpt_base base;	/* --ckpt-sync: the differentials' base */
	struct ckpt_times ct;
};

/* c is copied; its strings must outlive tr. No I/O: tiers_close is safe */
void tiers_init(struct tiers *tr, const struct tiers_conf *c,
		struct dist *d);

/* m, the model the tiers save (it must outlive tr), and tier 1 when a
 * local directory is set, for run (claim.h) */
int tiers_open(struct tiers *tr, struct model *m, const char *run);

/* LOCAL/NODE, where this node's tier-1 copies are; NULL when off */
const char *tiers_local_dir(const struct tiers *tr);

/* the shared tier's writers; resumed_step >= 0: the run resumed from the
 * full checkpoint resumed_full, the differentials' first base */
int tiers_start(struct tiers *tr, long resumed_step,
		const char *resumed_full);

/* whether a checkpoint of any tier follows step done (stop: one was
 * asked for), so that the caller fills the state it will hold */
bool tiers_due(const struct tiers *tr, long done, bool stop);

/* the checkpoints due after step done, of st; last: nothing follows
 * (the run's end or a stop), so every write is on disk on return */
int tiers_after_step(struct tiers *tr, long done, bool stop, bool last,
		     struct ckpt_state *st);

/* the last tier-1 copy is made: the caller may change the weights */
int tiers_settle(struct tiers *tr);

/* every writer settled and a due index written: the caller may move the
 * experts or reload the model */
int tiers_quiesce(struct tiers *tr);

/* after the experts moved between ranks: rank 0's index of the parts */
int tiers_moved(struct tiers *tr);

/* the guard asked for a rollback at step done: every rank waits for the
 * newest checkpoint, reloads it (rollback.h) and drops the differentials
 * after it; 0 with *to its step, or an exit code */
int tiers_rollback(struct tiers *tr, struct guard_run *gr, long done,
		   long *to);

/* this rank's shared-tier and tier-1 writers (NULL when none), whose
 * timings the metrics carry, and the times of the last checkpoint */
struct ckpt_async *tiers_writer(const struct tiers *tr, bool local);
struct ckpt_times *tiers_times(struct tiers *tr);

/* this rank's tier-1 stalls and writes against its step time, on stderr */
void tiers_summary(const struct tiers *tr, double step_ms);

/* code, or an exit code when a write in flight fails; tr is freed */
int tiers_close(struct tiers *tr, int code);

/* the weights of path (--init-from; untrusted: --init-from-untrusted,
 * read in a process of its own) into m on every rank; a model in parts
 * reads its own rows */
int tiers_init_from(struct dist *d, struct model *m, const char *path,
		    bool untrusted);

/*
 * The host copies of a rank's state its checkpoints keep, and in *rep
 * the floats of the replica it keeps of another rank's shard: for the
 * configuration check, before there is a model. sharded: the model is
 * held in parts.
 */
int tiers_host_copies(const struct tiers_conf *c, const struct dist *d,
		      const struct model_config *cfg, bool sharded,
		      size_t *rep);

#endif /* SIGMA_TRAIN_TIERS_H */
