/*
 * tiers.c - the checkpoint tiers behind one door (tiers.h). The shared
 * tier has one writer interface here, shared_save and shared_settle, over
 * the two layouts: a model every rank holds whole is written by rank 0
 * (tier2.c), one held in parts by each part's writer, then indexed by
 * rank 0 (tier2_parts.c).
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sigma.h"
#include "exitcodes.h"
#include "rollback.h"
#include "tiers.h"

void tiers_init(struct tiers *tr, const struct tiers_conf *c, struct dist *d)
{
	memset(tr, 0, sizeof(*tr));
	tr->c = *c;
	tr->d = d;
	tr->ct = (struct ckpt_times){ .stall_ms = NAN, .write_ms = NAN };
	tr->t1.buddy = tr->t1.from = -1;
	tr->base.step = -1;
	tr->parts.pending = -1;
}

int tiers_open(struct tiers *tr, struct model *m, const char *run)
{
	tr->m = m;
	if (!*tr->c.local_dir)
		return 0;
	if (!*tr->c.ckpt_dir) {
		sigma_error("--local-ckpt-dir: needs --ckpt-dir");
		return TRAIN_EXIT_USAGE;
	}
	if (tier1_open(&tr->t1, &tr->c, tr->d, tr->m, run))
		return TRAIN_EXIT_CANTCREAT;
	tr->local = true;
	return 0;
}

const char *tiers_local_dir(const struct tiers *tr)
{
	return tr->local ? tr->t1.node_dir : NULL;
}

/* this rank writes to the shared tier: rank 0 for a whole model, each
 * part's writer for one in parts (sharded) */
static bool shared_writer(const struct dist *d, bool sharded)
{
	if (sharded)
		return tier2_parts_writer(d, d->rank, &(unsigned){ 0 });
	return d->rank == 0;
}

/* the differentials: settings checked, the writer's base made */
static int start_diff(struct tiers *tr, bool writer, long resumed_step,
		      const char *resumed_full)
{
	const struct tiers_conf *c = &tr->c;
	long fe = tr->local ? c->full_every : c->every;
	char err[1024];
	int rc;

	if (fe > 0 && c->diff_every >= fe) {
		sigma_error("--ckpt-diff-every %ld: differentials come between full checkpoints, every %ld steps here: use a smaller interval",
			    c->diff_every, fe);
		return TRAIN_EXIT_USAGE;
	}
	rc = !writer  ? 0
	     : tr->aw ? ckpt_async_enable_diff(tr->aw, tr->m, err, sizeof(err))
		      : ckpt_base_init(&tr->base, tr->m, err, sizeof(err));
	if (rc) {
		sigma_error("%s", err);
		return TRAIN_EXIT_OSERR;
	}
	/* resumed from a full checkpoint: it is the base */
	if (resumed_step >= 0 && tr->aw)
		ckpt_async_set_base(tr->aw, tr->m, resumed_step, resumed_full);
	else if (resumed_step >= 0 && tr->base.state)
		ckpt_base_set(&tr->base, tr->m, NULL, resumed_step,
			      resumed_full);
	printf("config: ckpt_diff_every=%ld (differential checkpoints against the newest full one)\n",
	       c->diff_every);
	return 0;
}

/*
 * A model every rank holds whole: rank 0 writes, in the background
 * unless asked otherwise; one held in parts: each part's writer, always
 * in the background (--ckpt-sync waits for it).
 */
int tiers_start(struct tiers *tr, long resumed_step, const char *resumed_full)
{
	const struct tiers_conf *c = &tr->c;
	bool shared = *c->ckpt_dir != '\0', writer = tr->d->rank == 0;
	char err[1024];
	int rc;

	tr->sched = (struct ckpt_sched){ shared, tr->local, c->every,
					 c->full_every, c->diff_every,
					 c->steps };
	if (tr->m->sharded && shared && c->diff_every > 0) {
		sigma_error("--ckpt-diff-every: differential checkpoints need a model that every rank holds whole (--ep 1, --pp 1, --zero 0)");
		return TRAIN_EXIT_USAGE;
	}
	if (shared)
		writer = shared_writer(tr->d, tr->m->sharded);
	if (shared && writer && (!c->sync || tr->m->sharded)) {
		rc = ckpt_async_create(&tr->aw, c->ckpt_dir, c->ckpt_keep, 3,
				       200, tr->m, err, sizeof(err));
		if (rc) {
			sigma_error("%s", err);
			return TRAIN_EXIT_OSERR;
		}
	}
	if (tr->m->sharded && shared &&
	    (rc = tier2_parts_open(&tr->parts, tr->d, tr->m, tr->aw)))
		return rc;
	if (c->diff_every <= 0)
		return 0;
	return start_diff(tr, writer, resumed_step, resumed_full);
}

bool tiers_due(const struct tiers *tr, long done, bool stop)
{
	struct ckpt_due due = ckpt_due(done, stop, &tr->sched);

	return due.tier1 || due.full || due.diff;
}

/* the shared tier's writes in flight are settled: a model in parts gets
 * the index of a step whose parts are in (wait: every part first) */
static int shared_settle(struct tiers *tr, bool wait)
{
	if (tr->m->sharded)
		return tier2_parts_settle(&tr->parts, &tr->c, tr->aw, tr->d,
					  wait);
	return 0;
}

/* a full shared checkpoint of st; last: on disk on return */
static int shared_save(struct tiers *tr, struct ckpt_state *st, bool last)
{
	struct dist *d = tr->d;
	int code;

	if (tr->m->sharded) {
		/* each part by its writer, then the index (at once with
		 * --ckpt-sync and at the end, else when the parts are in) */
		code = tier2_parts_save(&tr->parts, tr->aw, d, tr->m, st,
					&tr->ct);
		if (code == 0 && (last || tr->c.sync))
			code = shared_settle(tr, true);
		return code;
	}
	/* every rank holds the whole model: rank 0 writes */
	if (d->rank == 0 &&
	    tier2_save(&tr->c, tr->aw, tr->base.state ? &tr->base : NULL,
		       tr->m, st, &tr->ct))
		return TRAIN_EXIT_CANTCREAT;
	return 0;
}

int tiers_after_step(struct tiers *tr, long done, bool stop, bool last,
		     struct ckpt_state *st)
{
	struct ckpt_due due = ckpt_due(done, stop, &tr->sched);
	struct dist *d = tr->d;
	int code;

	if ((code = shared_settle(tr, due.full)))
		return code;
	if (due.tier1) {
		code = tier1_save(&tr->t1, tr->m, st, &tr->ct);
		/* at the end or a stop, nothing follows to overlap: the
		 * copy and its replicas are complete before anything else */
		if (code == 0 && last)
			code = tier1_flush(&tr->t1, &tr->ct);
		if (code)
			return code;
	}
	if (due.full) {
		if ((code = shared_save(tr, st, last)))
			return code;
		/* at the end or a stop the files are on disk first, and no
		 * rank ends before the checkpoint is complete */
		if (last && (tier2_wait(tr->aw) || tier1_wait(&tr->t1)))
			return TRAIN_EXIT_CANTCREAT;
		if (last && dist_barrier(d))
			return TRAIN_EXIT_PEER;
	}
	if (due.diff && d->rank == 0 &&
	    tier2_save_diff(&tr->c, tr->aw, &tr->base, tr->m, st, &tr->ct))
		return TRAIN_EXIT_CANTCREAT;
	return 0;
}

int tiers_settle(struct tiers *tr)
{
	return tier1_finish(&tr->t1, &tr->ct);
}

int tiers_quiesce(struct tiers *tr)
{
	int code;

	if ((code = tier1_exchanged(&tr->t1, &tr->ct)) ||
	    (code = shared_settle(tr, true)))
		return code;
	if (tier2_wait(tr->aw))
		return TRAIN_EXIT_CANTCREAT;
	return 0;
}

int tiers_moved(struct tiers *tr)
{
	if (tr->d->rank == 0 && tr->m->sharded && tr->parts.w)
		return tier2_parts_replace(&tr->parts, tr->d, tr->m);
	return 0;
}

int tiers_rollback(struct tiers *tr, struct guard_run *gr, long done,
		   long *to)
{
	int code;

	/* the newest checkpoint is on disk before any rank reads it */
	if ((code = tiers_quiesce(tr)))
		return code;
	if (tr->d->size > 1 && dist_barrier(tr->d))
		return TRAIN_EXIT_PEER;
	*to = rollback_to_latest(gr, tr->c.ckpt_dir, done);
	if (*to < 0)
		return TRAIN_EXIT_DIVERGED;
	/* differentials after it belong to the abandoned run */
	if (tr->d->rank == 0 && tr->c.diff_every > 0) {
		int nr = ckpt_diff_discard_after(tr->c.ckpt_dir, *to);

		if (nr > 0)
			printf("guard: %d differential checkpoint%s newer than step %ld removed\n",
			       nr, nr == 1 ? "" : "s", *to);
	}
	return 0;
}

struct ckpt_async *tiers_writer(const struct tiers *tr, bool local)
{
	return local ? tr->t1.own : tr->aw;
}

struct ckpt_times *tiers_times(struct tiers *tr)
{
	return &tr->ct;
}

void tiers_summary(const struct tiers *tr, double ms)
{
	const struct ckpt_times *ct = &tr->ct;
	struct ckpt_async_stats cs;
	double stall;

	if (!tr->local || !tr->t1.own || ct->t1_saves < 1)
		return;
	ckpt_async_stats(tr->t1.own, &cs);
	stall = ct->t1_stall_sum_ms / (double)ct->t1_saves;
	sigma_info("rank %d: tier 1: %ld saves, stall %.2f ms per save (%.2f%% of the step, largest %.2f ms), write %.2f ms per save in the background; the end waited %.2f ms for the last copy and its replicas",
		   tr->d->rank, ct->t1_saves, stall,
		   ms > 0 ? 100.0 * stall / ms : 0.0, ct->t1_stall_max_ms,
		   cs.writes ? cs.total_write_ms / (double)cs.writes : 0.0,
		   ct->t1_end_ms);
}

int tiers_close(struct tiers *tr, int code)
{
	/* whatever happened, a write in flight is finished (or reported) */
	if (tier2_wait(tr->aw) && code == TRAIN_EXIT_OK)
		code = TRAIN_EXIT_CANTCREAT;
	ckpt_async_destroy(tr->aw);
	tr->aw = NULL;
	tier2_parts_close(&tr->parts);
	ckpt_base_fini(&tr->base);
	if (tier1_wait(&tr->t1) && code == TRAIN_EXIT_OK)
		code = TRAIN_EXIT_CANTCREAT;
	tier1_close(&tr->t1);
	return code;
}

int tiers_host_copies(const struct tiers_conf *c, const struct dist *d,
		      const struct model_config *cfg, bool sharded,
		      size_t *rep)
{
	int n = 0, buddy, from;

	*rep = 0;
	if (!*c->ckpt_dir)
		return 0;
	n += shared_writer(d, sharded); /* tier 2 */
	n += d->rank == 0 && c->diff_every > 0; /* its base */
	if (*c->local_dir) {
		n++;
		tier1_buddies(d, &buddy, &from);
		if (from >= 0) {
			struct model_shard fs;
			int *ex = calloc((size_t)cfg->L * cfg->E, sizeof(int));
			size_t pb = 0;

			if (!ex)
				return n;
			dist_shard_of(d, from, &fs, ex);
			model_bytes(cfg, 1, 1, &fs, NULL, &pb);
			*rep = 3 * pb / sizeof(float);
			free(ex);
		}
	}
	return n;
}
