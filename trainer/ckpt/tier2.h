/*
 * tier2.h - the shared tier from the training loop: full and differential
 * checkpoints in --ckpt-dir, written by rank 0 in the background (a
 * ckpt_async writer) or, with --ckpt-sync, in the loop. Each returns 0 or
 * -errno after printing why; the loop turns that into exit 73.
 */
#ifndef SIGMA_TRAIN_TIER2_H
#define SIGMA_TRAIN_TIER2_H

#include "ckpt.h"
#include "dist.h"
#include "tiers_conf.h"

/* checkpoint timings for the metrics file: NAN where none in the row */
struct ckpt_times {
	double stall_ms; /* training stopped for the last checkpoint */
	double write_ms; /* the last write that finished */
	long finished; /* writes finished (or given up) by the last row */
	long finished1; /* the same, of the tier-1 writer */
	/* this rank's tier-1 stalls over the run, for its summary, and the
	 * waits for the last copy and its replicas at the end or a stop */
	double t1_stall_sum_ms, t1_stall_max_ms;
	long t1_saves;
	double t1_end_ms;
};

/* a full checkpoint; base (or NULL): the differentials' base to move on */
int tier2_save(const struct tiers_conf *o, struct ckpt_async *aw,
	       struct ckpt_base *base, const struct model *m,
	       struct ckpt_state *st, struct ckpt_times *ct);

/* a differential one against the newest full one (or a full one) */
int tier2_save_diff(const struct tiers_conf *o, struct ckpt_async *aw,
		    struct ckpt_base *base, const struct model *m,
		    struct ckpt_state *st, struct ckpt_times *ct);

/*
 * A model whose moments are split over the ranks (--zero 1): every rank
 * of the groups calls this at the same step. The writer aw's stage (NULL:
 * this rank writes nothing, and lends its moments only) receives the
 * parameters and every moment of what this rank holds, gathered from
 * their holders, and goes to the writer as st. 0, or with err
 * -ECANCELED (aw's previous write failed), -ENOMEM, or the exchange's
 * -errno (a peer).
 */
int tier2_submit_gathered(struct ckpt_async *aw, struct dist *d,
			  const struct model *m, const struct ckpt_state *st,
			  double *stall_ms, char *err, size_t len);

/* the background write in flight, if any, is on disk or reported */
int tier2_wait(struct ckpt_async *aw);

#endif /* SIGMA_TRAIN_TIER2_H */
