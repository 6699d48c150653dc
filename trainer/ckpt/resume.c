/*
 * resume.c - a start that continues a run (resume.h): the planner over
 * both tiers, and its plan run.
 *
 * The ranks list what they hold (resume_table.c), every rank computes the
 * same plan (restore.h), and the plan runs. Tier 1: transfers in the
 * plan's order (the source reads and verifies the file, sends a flag,
 * then the stage and state), then each owner that holds its own shard
 * reads it. Tier 2: one read of the shared tier's newest valid
 * checkpoint, with the loaders' fallbacks (shared_read). A copy that
 * fails its checksums is marked bad, a shared read that fell back past
 * the plan's checkpoint lists the one it read, and if any rank saw
 * either the table goes round again and a new plan is made. With tier 1
 * off the nodes list nothing, and the plan is the shared tier's.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sigma.h"
#include "attempt.h"
#include "blas_core.h"
#include "comm.h"
#include "resume.h"
#include "resume_table.h"
#include "exitcodes.h"
#include "tags.h"

static bool state_is(const struct ckpt_state *s, const struct restore_plan *p)
{
	return s->step == p->step && s->attempt == p->attempt;
}

/* the part `to` holds, for reading its copy elsewhere: m itself when
 * every rank holds the same, else a table of its own (*own to free) */
static const struct model *part_of(struct dist *d, struct model *m, int to,
				   struct model **own)
{
	char why[256];

	*own = NULL;
	if (!m->sharded || to == d->rank)
		return m;
	if (dist_part_of(d, m, to, own, why, sizeof(why)))
		return NULL;
	return *own;
}

/* transfer tr of the plan: from reads the copy and sends it, to keeps it
 * in buf[3 x its nparams]; *got when it did */
static int run_transfer(struct dist *d, struct model *m,
			const struct restore_plan *p,
			const struct restore_transfer *tr, const struct table *t,
			struct local *loc, struct ckpt_state *st, float *buf,
			bool *got, int *fails)
{
	int c = p->source[tr->shard];
	struct model *own = NULL;
	const struct model *pm = part_of(d, m, tr->to, &own);
	size_t n3 = pm ? 3 * pm->nparams : 0;
	struct ckpt_state xs;
	char why[1024];
	int32_t ok = 0;
	float *sbuf = NULL;
	int rc;

	if (d->rank == tr->from) {
		struct local *l = &loc[t->cidx[c]];

		memset(&xs, 0, sizeof(xs));
		sbuf = pm ? malloc(sizeof(float) * n3) : NULL;
		ok = sbuf &&
		     ckpt_read_stage(l->path, pm, sbuf, &xs, why,
				     sizeof(why)) == 0 &&
		     state_is(&xs, p);
		if (!ok) {
			sigma_warn("resume: copy refused: %s",
				   xs.step == p->step ? why : l->path);
			l->r.flags |= F_BAD;
			(*fails)++;
		}
		rc = comm_send(d->world, &ok, 1, COMM_I32, tr->to,
			       SIGMA_TAG_RESUME_FLAG);
		if (!rc && ok)
			rc = comm_send(d->world, sbuf, n3, COMM_F32, tr->to,
				       SIGMA_TAG_RESUME_STAGE)
				 ?: comm_send(d->world, &xs, sizeof(xs), COMM_U8,
					      tr->to, SIGMA_TAG_RESUME_STATE);
	} else {
		rc = comm_recv(d->world, &ok, 1, COMM_I32, tr->from,
			       SIGMA_TAG_RESUME_FLAG);
		if (!rc && ok) {
			rc = comm_recv(d->world, buf, 3 * m->nparams, COMM_F32,
				       tr->from, SIGMA_TAG_RESUME_STAGE)
				 ?: comm_recv(d->world, st, sizeof(*st), COMM_U8,
					      tr->from, SIGMA_TAG_RESUME_STATE);
			*got = rc == 0;
		}
	}
	free(sbuf);
	model_destroy(own);
	return rc;
}

/*
 * Run a tier-1 plan. *fails counts this rank's copies found bad (marked
 * in loc); 0 or -EIO (a peer) / -ENOMEM.
 */
static int run_tier1(struct dist *d, struct model *m,
		     const struct restore_plan *p, const struct table *t,
		     struct local *loc, struct ckpt_state *st, int *fails)
{
	const size_t n = m->nparams, n3 = 3 * n;
	float *buf = NULL;
	struct ckpt_state xs;
	bool got = false;
	char why[1024];
	int rc = 0;

	*fails = 0;
	for (int x = 0; x < p->nxfer && !rc; x++) {
		const struct restore_transfer *tr = &p->xfer[x];

		if (d->rank != tr->from && d->rank != tr->to)
			continue;
		if (!buf && !(buf = malloc(sizeof(float) * n3)))
			return -ENOMEM;
		rc = run_transfer(d, m, p, tr, t, loc, st, buf, &got, fails);
	}
	if (rc)
		goto out;
	{
		int c = p->source[d->rank];

		if (t->cowner[c] == d->rank) {
			struct local *l = &loc[t->cidx[c]];

			memset(&xs, 0, sizeof(xs));
			if (ckpt_read(l->path, m, &xs, why, sizeof(why)) ||
			    !state_is(&xs, p)) {
				sigma_warn("resume: copy refused: %s",
					   xs.step == p->step ? why : l->path);
				l->r.flags |= F_BAD;
				(*fails)++;
			} else {
				*st = xs;
			}
		} else if (got) {
			m->ops->from_host(m->params, buf, sizeof(float) * n);
			model_moments_load(m, buf + n, buf + 2 * n);
		}
		/* a failed transfer is counted by its sender */
	}
out:
	free(buf);
	return rc;
}

/* ---- the shared tier: one read for every caller ---------------------------- */

/*
 * A model in parts read from the shared tier by every rank (each its own
 * rows): all must have read the same step, else none goes on. rc is this
 * rank's result, made the job's: 0, -ENOENT (nothing anywhere) or
 * -EBADMSG with err. Returns -errno of the exchange.
 */
static int parts_agree(struct dist *d, int *rc, const struct ckpt_state *st,
		       char *err, size_t len)
{
	int64_t mine[3] = { *rc, *rc ? -1 : st->step, *rc ? -1 : st->attempt };
	int64_t *all = calloc((size_t)d->size, sizeof(mine));
	int x;

	if (!all)
		return -ENOMEM;
	x = dist_allgather(d, mine, sizeof(mine), all);
	for (int i = 0; x == 0 && i < d->size; i++) {
		const int64_t *o = all + 3 * i;

		if (!memcmp(o, mine, sizeof(mine)))
			continue;
		if (*rc == 0 || (o[0] != 0 && o[0] != -ENOENT))
			*rc = (int)(o[0] ? o[0] : -EBADMSG);
		if (*rc == -EBADMSG || o[0] == 0)
			sigma_set_err(err, len, EBADMSG,
				      "rank %d read step %lld (attempt %lld, result %lld), rank %d step %lld (attempt %lld, result %lld): the ranks do not agree on the checkpoint",
				      d->rank, (long long)mine[1],
				      (long long)mine[2], (long long)mine[0], i,
				      (long long)o[1], (long long)o[2],
				      (long long)o[0]);
		*rc = -EBADMSG;
		break;
	}
	free(all);
	return x;
}

/*
 * The shared tier's newest valid checkpoint into m and st, with the
 * loaders' fallbacks (an older one when the newest is refused; a
 * differential on its base): rank 0 reads a whole model and every rank
 * gets it; every rank reads its own rows of a model in parts, and all
 * must have read the same step. path: the file read (a whole model: rank
 * 0's alone). Returns the job's result, 0, -ENOENT (nothing there) or
 * -EBADMSG (none valid, with err on rank 0), or -EIO when the exchange
 * itself failed.
 */
static int shared_read(struct dist *d, struct model *m, const char *dir,
		       struct ckpt_state *st, char *path, size_t plen,
		       char *err, size_t len)
{
	int rc;

	memset(st, 0, sizeof(*st));
	if (m->sharded) {
		rc = ckpt_load_latest(dir, m, st, path, plen, err, len);
		return parts_agree(d, &rc, st, err, len) ? -EIO : rc;
	}
	rc = d->rank == 0 ? ckpt_load_latest_diff(dir, m, st, path, plen, err,
						   len)
			  : 0;
	if (dist_bcast_int(d, &rc) ||
	    (rc == 0 && dist_sync_model(d, m, st, sizeof(*st))))
		return -EIO;
	return rc;
}

/* the shared checkpoint m and st hold from a read of an earlier plan */
struct held {
	bool valid;
	long step;
	int attempt;
};

/*
 * Rank 0's records after a shared read: the entries newer than what it
 * read (all of them when it read none) are bad, and what it read is
 * listed (when there is room), so that the next plan weighs it against
 * tier 1. True when anything changed, so that the plan is made again.
 */
static bool shared_settle(struct local *loc, int *n, const struct held *h,
			  const char *path)
{
	bool listed = false, changed = false;

	for (int i = 0; i < *n; i++) {
		struct rec *r = &loc[i].r;

		if (!(r->flags & F_SHARED))
			continue;
		if (h->valid && r->step == h->step && r->attempt == h->attempt) {
			listed = true;
		} else if (!(r->flags & F_BAD) &&
			   (!h->valid ||
			    restore_cmp((int)r->attempt, (long)r->step,
					h->attempt, h->step) > 0)) {
			r->flags |= F_BAD;
			changed = true;
		}
	}
	if (h->valid && !listed && *n < MAX_REC) {
		loc[*n].r = (struct rec){ 0, h->step, h->attempt,
					  F_USED | F_SHARED };
		sigma_strlcpy(loc[*n].path, path, sizeof(loc[*n].path));
		(*n)++;
		changed = true;
	}
	return changed;
}

/*
 * Run a tier-2 plan: one shared read (shared_read), unless m already
 * holds the planned checkpoint from an earlier one. When the read found
 * an older checkpoint than the plan's, or none, rank 0 settles its
 * records and *fails asks for a new plan; res->shared_rc and shared_err
 * keep the read's result. 0 or -EIO.
 */
static int run_tier2(struct dist *d, struct model *m,
		     const struct restore_plan *p, const struct resume_args *a,
		     struct local *loc, int *n, struct ckpt_state *st,
		     struct held *h, struct resume_result *res, int *fails)
{
	int rc;

	*fails = 0;
	if (h->valid && h->step == p->step && h->attempt == p->attempt)
		return 0;
	rc = shared_read(d, m, a->shared_dir, st, res->path, sizeof(res->path),
			 res->shared_err, sizeof(res->shared_err));
	if (rc == -EIO)
		return rc;
	res->shared_rc = rc;
	*h = (struct held){ rc == 0, rc == 0 ? st->step : -1,
			    rc == 0 ? st->attempt : -1 };
	if (d->rank == 0 && (rc || !state_is(st, p)) &&
	    shared_settle(loc, n, h, res->path))
		*fails = 1;
	return 0;
}

/* ---- the plan, made again until its copies read ---------------------------- */

/* what the plan chose, for the caller's report */
static void result_of(struct resume_result *res, const struct restore_plan *p)
{
	res->tier = p->tier;
	res->step = p->step;
	res->attempt = p->attempt;
	res->lost = p->lost;
	res->newest_step = p->newest_step;
	res->nshards = p->nshards;
	res->nxfer = p->nxfer;
	res->from_replica = p->from_replica;
	sigma_strlcpy(res->why, p->why, sizeof(res->why));
}

/* the state of one resume: what this rank lists, every rank's records,
 * and the shared checkpoint m holds */
struct round {
	struct local *loc;
	int n;
	struct rec *all;
	struct held held;
};

/*
 * One plan and its run: the records exchanged, the plan made, and its
 * copies read. *fails: this rank's copies found bad (then every rank
 * plans again). 0, or -errno with err.
 */
static int plan_round(struct dist *d, struct model *m,
		      const struct resume_args *a, struct round *rd, bool first,
		      struct ckpt_state *st, struct resume_result *res,
		      int *fails, char *err, size_t len)
{
	struct restore_input in;
	struct restore_plan p;
	struct table t;
	int rc = resume_exchange(d, rd->loc, rd->n, rd->all);

	if (rc)
		return sigma_set_err(err, len, EIO,
				     "exchanging what each rank holds: %s",
				     strerror(-rc));
	if (resume_table_build(d, rd->all, &t))
		return sigma_set_err(err, len, ENOMEM, "out of memory");
	if (first)
		res->max_attempt = resume_max_attempt(d, rd->all);
	in = (struct restore_input){ d->size, t.copies, t.ncopies, t.shared,
				     t.nshared };
	rc = restore_plan(&in, &p, err, len);
	if (rc) {
		resume_table_free(&t);
		return rc;
	}
	result_of(res, &p);
	*fails = 0;
	if (p.tier == RESTORE_TIER1) {
		res->self_replica = t.copies[p.source[d->rank]].replica;
		rd->held.valid = false; /* m is overwritten */
		rc = run_tier1(d, m, &p, &t, rd->loc, st, fails);
	} else if (p.tier == RESTORE_TIER2) {
		rc = run_tier2(d, m, &p, a, rd->loc, &rd->n, st, &rd->held,
			       res, fails);
	}
	restore_plan_fini(&p);
	resume_table_free(&t);
	if (rc)
		return sigma_set_err(err, len, EIO,
				     "moving checkpoint shards between ranks: %s",
				     strerror(rc < 0 ? -rc : rc));
	return 0;
}

int resume_restore(struct dist *d, struct model *m, const struct resume_args *a,
		   struct ckpt_state *st, struct resume_result *res, char *err,
		   size_t len)
{
	struct round rd = { calloc(MAX_REC, sizeof(*rd.loc)), 0,
			    calloc((size_t)d->size * MAX_REC, sizeof(*rd.all)),
			    { false, -1, -1 } };
	int rc = 0, max_rounds = d->size * MAX_REC + 1;

	memset(res, 0, sizeof(*res));
	res->step = -1;
	if (!rd.loc || !rd.all) {
		rc = sigma_set_err(err, len, ENOMEM, "out of memory");
		goto out;
	}
	resume_list(d, a, rd.loc, &rd.n, &res->shared_newest);
	for (int round = 1; round <= max_rounds; round++) {
		double failed;
		int fails = 0;

		res->rounds = round;
		rc = plan_round(d, m, a, &rd, round == 1, st, res, &fails, err,
				len);
		if (rc || res->tier == RESTORE_NONE)
			goto out;
		/* did any rank find a damaged copy? then plan again */
		failed = fails;
		rc = dist_world_mean(d, &failed, 1);
		if (rc) {
			rc = sigma_set_err(err, len, EIO,
					   "agreeing on the restore: %s",
					   strerror(-rc));
			goto out;
		}
		if (failed == 0)
			goto out;
	}
	rc = sigma_set_err(err, len, EBADMSG,
			   "copies kept failing their checks after %d plans",
			   max_rounds);
out:
	free(rd.loc);
	free(rd.all);
	return rc;
}

/* ---- a start that continues a run ---------------------------------------- */

/* what a start takes over from the checkpoint it resumes */
static void adopt(struct ckpt_state *st, const struct ckpt_state *rs)
{
	st->seed = rs->seed;
	st->rng = rs->rng;
	st->guard = rs->guard;
	st->tuner = rs->tuner;
}

/* a checkpoint of another BLAS kernel: the run goes on, not bit for bit */
static void note_kernel(const struct dist *d, const struct ckpt_state *rs)
{
	const char *now = blas_core_now();

	if (d->rank == 0 && *rs->blas_kernel && strcmp(rs->blas_kernel, now))
		printf("resume: the checkpoint was written with the BLAS kernel %s, this start runs %s: the run continues, its numbers differ from an uninterrupted run in the last bits\n",
		       rs->blas_kernel, now);
}

/* the log of a start with tier 1 on: which tier, and what was lost */
static void report_tiers(const struct dist *d, const struct resume_result *r,
			 long start)
{
	if (r->tier == RESTORE_TIER1 && r->nshards == 1)
		printf("resume: tier 1, step %ld from rank 0's %s (newest shared checkpoint: %ld); %ld checkpointed steps lost; continuing at step %ld\n",
		       r->step, r->self_replica ? "replica" : "own copy",
		       r->shared_newest, r->lost, start);
	else if (r->tier == RESTORE_TIER1)
		printf("resume: tier 1, step %ld (attempt %d): %d shards, %d from a buddy's replica, %d moved to their rank (newest shared checkpoint: %ld); %ld checkpointed steps lost; continuing at step %ld\n",
		       r->step, r->attempt, r->nshards, r->from_replica,
		       r->nxfer, r->shared_newest, r->lost, start);
	else if (r->tier == RESTORE_TIER2)
		printf("resume: tier 2, %s (%s); %ld checkpointed steps lost; continuing at step %ld\n",
		       d->rank == 0 ? r->path : "rank 0's checkpoint", r->why,
		       r->lost, start);
	else
		printf("resume: no valid checkpoint in either tier (%s), starting at step 0\n",
		       *r->why ? r->why : "none there");
}

/* the shared tier alone, every checkpoint of it refused: the start stops
 * (an exit code), as it would for a damaged file named by hand; 0 else */
static int shared_refused(const struct dist *d, const struct resume_result *r)
{
	if (r->tier != RESTORE_NONE || !r->shared_rc || r->shared_rc == -ENOENT)
		return 0;
	sigma_error("resume: %s",
		    d->rank == 0 ? r->shared_err
				 : "rank 0 found no valid checkpoint there");
	return exit_code_of(r->shared_rc, PHASE_RESUME_SHARED);
}

/* the log of a start with the shared tier alone: the file, or none */
static void report_shared(const struct dist *d, const struct model *m,
			  const struct resume_from *f,
			  const struct resume_result *r,
			  const struct ckpt_state *rs, long start)
{
	const char *path = d->rank == 0 || m->sharded ? r->path
						       : "rank 0's checkpoint";

	if (r->tier == RESTORE_NONE) {
		printf("resume: no checkpoint in %s, starting at step 0\n",
		       f->shared_dir);
		return;
	}
	if (rs->batch != f->batch || rs->seed != f->seed)
		sigma_warn("resume: %s was written with batch %d seed %llu; continuing with its seed",
			   path, rs->batch, (unsigned long long)rs->seed);
	if (rs->data_checksum != f->data_checksum)
		sigma_warn("resume: %s was written for another training file (checksum differs)",
			   path);
	note_kernel(d, rs);
	printf("resume: %s, continuing at step %ld\n", path, start);
}

/*
 * One path for every start that continues a run: the planner over what
 * the nodes' tier 1 holds (nothing, with tier 1 off) and the shared
 * tier. Only the log differs: with tier 1 on it names the tier and the
 * steps lost, with the shared tier alone the file.
 */
int resume_run(struct dist *d, struct model *m, const struct resume_from *f,
	       struct ckpt_state *st, struct resume_to *to)
{
	struct ckpt_state rs = *st; /* overwritten by what is read */
	struct resume_args a = { f->node_dir, f->shared_dir, st->layout,
				 st->run };
	struct resume_result r;
	char err[1024];
	int rc = resume_restore(d, m, &a, &rs, &r, err, sizeof(err)), code = 0;

	to->start = 0;
	to->full[0] = '\0';
	to->full_step = -1;
	to->slots = false;
	if (rc) {
		sigma_error("resume: %s", err);
		code = exit_code_of(rc, PHASE_RESUME);
	} else if (!f->node_dir) {
		code = shared_refused(d, &r);
	}
	if (code == 0) {
		/* after every attempt that left a copy anywhere */
		st->attempt = sigma_attempt_past(st->attempt, r.max_attempt);
		to->start = r.tier == RESTORE_NONE ? 0 : rs.step;
		to->slots = r.tier == RESTORE_TIER1 && to->start > 0;
		if (to->start > 0)
			adopt(st, &rs);
		if (!f->node_dir) {
			report_shared(d, m, f, &r, &rs, to->start);
		} else {
			if (to->start > 0)
				note_kernel(d, &rs);
			report_tiers(d, &r, to->start);
		}
		/* a full shared checkpoint is the differentials' base */
		if (r.tier == RESTORE_TIER2 && d->rank == 0 &&
		    !ckpt_is_diff(r.path)) {
			sigma_strlcpy(to->full, r.path, sizeof(to->full));
			to->full_step = to->start;
		}
	}
	fflush(stdout);
	return code;
}
