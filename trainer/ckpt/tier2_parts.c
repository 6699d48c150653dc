/*
 * tier2_parts.c - the shared tier of a model held in parts (tier2_parts.h).
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sigma.h"
#include "ckpt_h5.h"
#include "exitcodes.h"
#include "tier2_parts.h"

bool tier2_parts_writer(const struct dist *d, int rank, unsigned *which)
{
	struct layout_coords c;

	if (layout_coords(&d->lp, rank, &c) || c.ep_group != 0)
		return false;
	/* the stage's dense tensors once, each ep rank's experts once */
	*which = CKPT_EXPERTS | (c.dp_index == 0 ? CKPT_DENSE : 0);
	return true;
}

int tier2_parts_open(struct tier2_parts *p, struct dist *d,
		     const struct model *m, struct ckpt_async *aw)
{
	char err[1024];
	int rc = 0;

	memset(p, 0, sizeof(*p));
	p->pending = -1;
	p->writer = tier2_parts_writer(d, d->rank, &p->which);
	if (p->writer && aw)
		ckpt_async_set_shard(aw, d->rank, p->which);
	if (d->rank != 0)
		return 0;
	p->w = calloc((size_t)d->size, sizeof(*p->w));
	if (!p->w)
		return TRAIN_EXIT_OSERR;
	rc = model_create_layout(&p->whole, &m->cfg, NULL, err, sizeof(err));
	if (rc == 0) { /* its placement, for the index's /experts */
		p->whole->ops = m->ops;
		p->whole->shard.owner = m->shard.owner;
		p->whole->shard.owner_ep = m->shard.owner_ep;
	}
	for (int r = 0; rc == 0 && r < d->size; r++) {
		struct ckpt_writer *w = &p->w[p->nw];
		struct model *part;

		if (!tier2_parts_writer(d, r, &w->which))
			continue;
		rc = dist_part_of(d, m, r, &part, err, sizeof(err));
		w->rank = r;
		w->shard = part;
		p->nw += rc == 0;
	}
	if (rc) {
		sigma_error("sharded checkpoints: %s", err);
		return TRAIN_EXIT_OSERR;
	}
	return 0;
}

void tier2_parts_close(struct tier2_parts *p)
{
	for (int i = 0; i < p->nw; i++)
		model_destroy((struct model *)p->w[i].shard);
	free(p->w);
	model_destroy(p->whole);
	p->w = NULL;
	p->whole = NULL;
	p->nw = 0;
}

int tier2_parts_replace(struct tier2_parts *p, struct dist *d,
			const struct model *m)
{
	char err[1024];

	for (int i = 0; i < p->nw; i++) {
		struct model *part;

		if (dist_part_of(d, m, p->w[i].rank, &part, err, sizeof(err))) {
			sigma_error("sharded checkpoints: %s", err);
			return TRAIN_EXIT_OSERR;
		}
		model_destroy((struct model *)p->w[i].shard);
		p->w[i].shard = part;
	}
	return 0;
}

int tier2_parts_save(struct tier2_parts *p, struct ckpt_async *aw,
		     struct dist *d, const struct model *m,
		     const struct ckpt_state *st, struct ckpt_times *ct)
{
	struct ckpt_async_stats cs;
	char err[1024];

	if (m->zero) {
		int rc = tier2_submit_gathered(p->writer ? aw : NULL, d, m, st,
					       &ct->stall_ms, err, sizeof(err));

		if (rc) {
			sigma_error("checkpoint failed: %s", err);
			return rc == -ECANCELED ? TRAIN_EXIT_CANTCREAT
			       : rc == -ENOMEM	? TRAIN_EXIT_OSERR
						: TRAIN_EXIT_PEER;
		}
	} else if (p->writer) {
		if (ckpt_async_submit(aw, m, st, err, sizeof(err))) {
			sigma_error("checkpoint failed: %s", err);
			return TRAIN_EXIT_CANTCREAT;
		}
		ckpt_async_stats(aw, &cs);
		ct->stall_ms = cs.stall_ms;
	}
	p->pending = st->step;
	p->st = *st;
	return 0;
}

/* rank 0: the index of the pending step, three tries like any write */
static int write_index(struct tier2_parts *p, const struct tiers_conf *o)
{
	char path[PATH_MAX], err[1024];
	uint64_t t0 = sigma_now_ms();
	int rc = -EIO;

	for (int a = 0; a < 3 && rc; a++) {
		ckpt_h5_lock();
		rc = ckpt_write_index(o->ckpt_dir, p->whole, p->w, p->nw,
				      &p->st, path, sizeof(path), err,
				      sizeof(err));
		ckpt_h5_unlock();
		if (rc == -ESTALE)
			break;
	}
	if (rc) {
		sigma_error("checkpoint step %ld: the index of its %d shards: %s",
			    p->st.step, p->nw, err);
		return TRAIN_EXIT_CANTCREAT;
	}
	ckpt_prune(o->ckpt_dir, o->ckpt_keep);
	printf("checkpoint step %ld: %s (%d shards; index %.2f s)\n",
	       p->st.step, path, p->nw, (sigma_now_ms() - t0) / 1000.0);
	fflush(stdout);
	return 0;
}

/* this rank's part of the pending step: 1 published (or no part), 0 in
 * flight, -1 failed */
static int32_t part_state(const struct tier2_parts *p, struct ckpt_async *aw)
{
	long step = -1;
	int rc;

	if (!p->writer)
		return 1;
	rc = ckpt_async_poll(aw, &step);
	return rc < 0 ? -1 : rc == 1 && step == p->pending ? 1 : 0;
}

int tier2_parts_settle(struct tier2_parts *p, const struct tiers_conf *o,
		       struct ckpt_async *aw, struct dist *d, bool wait)
{
	int32_t mine, *all;
	int rc, done = 1, failed = 0;

	if (p->pending < 0)
		return 0;
	if (wait && p->writer && tier2_wait(aw))
		mine = -1;
	else
		mine = part_state(p, aw);
	all = calloc((size_t)d->size, sizeof(*all));
	if (!all)
		return TRAIN_EXIT_OSERR;
	rc = dist_allgather(d, &mine, sizeof(mine), all);
	for (int i = 0; rc == 0 && i < d->size; i++) {
		done &= all[i] == 1;
		failed |= all[i] < 0;
	}
	free(all);
	if (rc)
		return TRAIN_EXIT_PEER;
	if (failed) {
		if (d->rank == 0)
			sigma_error("checkpoint step %ld: a shard could not be written: the step is not published",
				    p->pending);
		p->pending = -1;
		return TRAIN_EXIT_CANTCREAT;
	}
	if (!done)
		return 0;
	rc = d->rank == 0 ? write_index(p, o) : 0;
	p->pending = -1;
	return rc;
}
