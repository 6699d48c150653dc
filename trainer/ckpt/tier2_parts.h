/*
 * tier2_parts.h - the shared tier of a model that no rank holds whole
 * (docs/checkpoint-format.md, "Sharded checkpoints"): every writer rank
 * (expert group 0 of each stage) hands its part to its background writer,
 * and once every part of a step is published rank 0 writes the step's
 * index, which is what readers see. Between the two the step is
 * "pending": each step the ranks learn, in one small exchange, whether
 * every part is there.
 */
#ifndef SIGMA_TRAIN_TIER2_PARTS_H
#define SIGMA_TRAIN_TIER2_PARTS_H

#include <stdbool.h>

#include "ckpt.h"
#include "dist.h"
#include "tiers_conf.h"
#include "tier2.h"

struct tier2_parts {
	bool writer;	   /* this rank writes a part */
	unsigned which;	   /* of its tensors (CKPT_DENSE, CKPT_EXPERTS) */
	long pending;	   /* the step whose index is due, -1 none */
	struct ckpt_state st; /* its state */
	/* rank 0: the whole model's table and every writer's */
	struct model *whole;
	struct ckpt_writer *w;
	int nw;
};

/* Which rank writes what; rank 0 also makes the tables of the index.
 * aw: this rank's writer (NULL when it writes none). 0 or exit code. */
int tier2_parts_open(struct tier2_parts *p, struct dist *d,
		     const struct model *m, struct ckpt_async *aw);
void tier2_parts_close(struct tier2_parts *p);

/* rank 0: the writers' tables again after the experts moved (no step
 * pending: settle it first). 0 or an exit code. */
int tier2_parts_replace(struct tier2_parts *p, struct dist *d,
			const struct model *m);

/* whether rank writes a part in d's layout, and which of its tensors */
bool tier2_parts_writer(const struct dist *d, int rank, unsigned *which);

/* Hand step st's part to the writer (writers), and mark it pending on
 * every rank; with split moments every rank lends its moments to the
 * writers' stages (collective). 0 or an exit code. */
int tier2_parts_save(struct tier2_parts *p, struct ckpt_async *aw,
		     struct dist *d, const struct model *m,
		     const struct ckpt_state *st, struct ckpt_times *ct);

/*
 * A pending step's index: written by rank 0 once every part is published
 * (wait: the writers finish first, so it is settled on return). 0, or an
 * exit code (73: a part or the index could not be written, 76: a peer).
 */
int tier2_parts_settle(struct tier2_parts *p, const struct tiers_conf *o,
		       struct ckpt_async *aw, struct dist *d, bool wait);

#endif /* SIGMA_TRAIN_TIER2_PARTS_H */
