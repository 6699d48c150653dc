/*
 * tier2.h - the shared tier from the training loop: full and differential
 * checkpoints in --ckpt-dir, written by rank 0 in the background (a
 * ckpt_async writer) or, with --ckpt-sync, in the loop. Each returns 0 or
 * -errno after printing why; the loop turns that into exit 73.
 */
#ifndef SIGMA_TRAIN_TIER2_H
#define SIGMA_TRAIN_TIER2_H

#include "ckpt.h"
#include "opts.h"

/* checkpoint timings for the metrics file: NAN where none in the row */
struct ckpt_times {
	double stall_ms; /* training stopped for the last checkpoint */
	double write_ms; /* the last write that finished */
	long finished; /* writes finished (or given up) by the last row */
	long finished1; /* the same, of the tier-1 writer */
};

/* a full checkpoint; base (or NULL): the differentials' base to move on */
int tier2_save(const struct train_opts *o, struct ckpt_async *aw,
	       struct ckpt_base *base, const struct model *m,
	       struct ckpt_state *st, struct ckpt_times *ct);

/* a differential one against the newest full one (or a full one) */
int tier2_save_diff(const struct train_opts *o, struct ckpt_async *aw,
		    struct ckpt_base *base, const struct model *m,
		    struct ckpt_state *st, struct ckpt_times *ct);

/* the background write in flight, if any, is on disk or reported */
int tier2_wait(struct ckpt_async *aw);

#endif /* SIGMA_TRAIN_TIER2_H */
