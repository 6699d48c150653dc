/*
 * resume.c - restore after a requeue with the node-local tier (resume.h).
 *
 * Every rank lists the rank-R and replica-R directories of its node (all
 * of them, whatever rank wrote them: a new placement may put rank R on
 * the node that holds another rank's copies) and peeks at each file's
 * header; rank 0 lists the shared directory. The table goes to every rank
 * (one all-to-all of fixed-size records), every rank computes the same
 * plan, and the plan runs: transfers in the plan's order (the source
 * reads and verifies the file, sends a flag, then the stage and state),
 * then each owner that holds its own shard reads it. A copy that fails
 * its checksums is marked bad, and if any rank saw one the table goes
 * round again and a new plan is made.
 */
#include "config.h"

#include <dirent.h>
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
#include "claim.h"
#include "exitcodes.h"
#include "tags.h"

#define PER_DIR	  16  /* newest names listed per directory */
#define MAX_REC	  128 /* records per rank */

enum {
	F_USED = 1,
	F_REPLICA = 2,
	F_LAYOUT = 4, /* written by this job's layout */
	F_BAD = 8,
	F_SHARED = 16, /* a file of the shared tier (rank 0) */
	F_DIFF = 32,   /* its newest differential (read with its base) */
};

/* one line of the table, as it travels */
struct rec {
	int64_t shard, step, attempt, flags;
};

struct local {
	struct rec r;
	char path[PATH_MAX];
};

/* "rank-12" or "replica-3": the shard, else -1 */
static long dir_shard(const char *name, bool *replica)
{
	const char *n = NULL;
	long v;

	if (!strncmp(name, "rank-", 5))
		n = name + 5, *replica = false;
	else if (!strncmp(name, "replica-", 8))
		n = name + 8, *replica = true;
	if (!n || sigma_parse_long(n, 0, RESTORE_MAX_RANKS - 1, &v))
		return -1;
	return v;
}

static void add_dir(const char *dir, long shard, int flags,
		    const struct resume_args *a, struct local *loc, int *n)
{
	struct ckpt_entry e[PER_DIR];
	int k;

	/* a node-local directory of another run (or of none) is not ours */
	if (!(flags & F_SHARED) && a->run && *a->run &&
	    !claim_holds(dir, a->run))
		return;
	k = ckpt_list(dir, e, PER_DIR);

	for (int i = 0; i < k && *n < MAX_REC; i++) {
		struct local *l = &loc[*n];
		struct ckpt_state ps;
		char why[1024];

		if (ckpt_path(l->path, sizeof(l->path), dir, e[i].step,
			      e[i].attempt))
			continue;
		l->r = (struct rec){shard, e[i].step, e[i].attempt,
				    F_USED | flags};
		if (!(flags & F_SHARED)) {
			/* the header only: the data are verified by the
			 * rank that reads the copy for the plan */
			if (ckpt_peek(l->path, &ps, why, sizeof(why))) {
				sigma_warn("resume: %s", why);
				l->r.flags |= F_BAD;
			} else if (ps.step != e[i].step ||
				   ps.attempt != e[i].attempt) {
				sigma_warn(
				    "resume: %s holds step %ld of attempt %d, its name says otherwise",
				    l->path, ps.step, ps.attempt);
				l->r.flags |= F_BAD;
			} else if (a->run && *a->run && strcmp(ps.run, a->run)) {
				sigma_warn("resume: %s belongs to run %s, not %s",
					   l->path, *ps.run ? ps.run : "(none)",
					   a->run);
				l->r.flags |= F_BAD;
			} else if (!strcmp(ps.layout, a->layout)) {
				l->r.flags |= F_LAYOUT;
			}
		}
		(*n)++;
	}
}

/* what this rank can read: its node's directories, and rank 0 the
 * shared one */
static int list_local(const struct dist *d, const struct resume_args *a,
		      struct local *loc, int *n, long *shared_newest)
{
	DIR *dh = opendir(a->node_dir);
	struct dirent *de;

	*n = 0;
	*shared_newest = -1;
	if (dh) {
		while ((de = readdir(dh))) {
			char dir[PATH_MAX];
			bool replica = false;
			long shard = dir_shard(de->d_name, &replica);

			if (shard < 0 ||
			    sigma_snprintf(dir, sizeof(dir), "%s/%s",
					   a->node_dir, de->d_name))
				continue;
			add_dir(dir, shard, replica ? F_REPLICA : 0, a, loc,
				n);
		}
		closedir(dh);
	}
	if (d->rank == 0 && a->shared_dir && *a->shared_dir) {
		int att = 0, da = -1;
		long ds = ckpt_diff_newest(a->shared_dir, &da);

		*shared_newest = ckpt_newest(a->shared_dir, &att);
		add_dir(a->shared_dir, 0, F_SHARED, a, loc, n);
		/* the newest differential, when newer in (attempt, step)
		 * order than the newest full one: ckpt_load_latest_diff
		 * reads base + differential */
		if (ds >= 0 && *shared_newest >= 0 &&
		    (da > att || (da == att && ds > *shared_newest)) &&
		    *n < MAX_REC) {
			loc[*n].r =
			    (struct rec){0, ds, da, F_USED | F_SHARED | F_DIFF};
			sigma_strlcpy(loc[*n].path, a->shared_dir,
				      sizeof(loc[*n].path));
			(*n)++;
			*shared_newest = ds;
		}
	}
	return 0;
}

/* every rank's records to every rank: all[size * MAX_REC] */
static int exchange(struct dist *d, const struct local *loc, int n,
		    struct rec *all)
{
	struct rec *mine = calloc(MAX_REC, sizeof(*mine));
	int rc;

	if (!mine)
		return -ENOMEM;
	for (int i = 0; i < n; i++)
		mine[i] = loc[i].r;
	rc = dist_allgather(d, mine, sizeof(*mine) * MAX_REC, all);
	free(mine);
	return rc;
}

struct table {
	struct restore_copy *copies;
	int *cowner, *cidx; /* rank and its record of each copy */
	struct restore_shared *shared;
	int *sidx; /* rank 0's record of each shared checkpoint */
	int ncopies, nshared;
};

static void table_free(struct table *t)
{
	free(t->copies), free(t->cowner), free(t->cidx);
	free(t->shared), free(t->sidx);
	memset(t, 0, sizeof(*t));
}

static int table_build(const struct dist *d, const struct rec *all,
		       struct table *t)
{
	size_t max = (size_t)d->size * MAX_REC;

	memset(t, 0, sizeof(*t));
	t->copies = calloc(max, sizeof(*t->copies));
	t->cowner = calloc(max, sizeof(int));
	t->cidx = calloc(max, sizeof(int));
	t->shared = calloc(MAX_REC, sizeof(*t->shared));
	t->sidx = calloc(MAX_REC, sizeof(int));
	if (!t->copies || !t->cowner || !t->cidx || !t->shared || !t->sidx) {
		table_free(t);
		return -ENOMEM;
	}
	for (int p = 0; p < d->size; p++) {
		for (int i = 0; i < MAX_REC; i++) {
			const struct rec *r = &all[(size_t)p * MAX_REC + i];

			if (!(r->flags & F_USED) || r->step < 0 ||
			    r->step > LONG_MAX || r->attempt < 0 ||
			    r->attempt > CKPT_ATTEMPT_MAX || r->shard < 0 ||
			    r->shard >= RESTORE_MAX_RANKS)
				continue;
			if (r->flags & F_SHARED) {
				if (p != 0 || t->nshared >= MAX_REC)
					continue;
				t->shared[t->nshared] = (struct restore_shared){
				    (long)r->step, (int)r->attempt,
				    (r->flags & F_BAD) != 0};
				t->sidx[t->nshared++] = i;
				continue;
			}
			t->copies[t->ncopies] = (struct restore_copy){
			    .holder = p,
			    .shard = (int)r->shard,
			    .step = (long)r->step,
			    .attempt = (int)r->attempt,
			    .replica = (r->flags & F_REPLICA) != 0,
			    /* a shard this job does not have: another
			     * layout whatever the header says */
			    .same_layout =
				(r->flags & F_LAYOUT) && r->shard < d->size,
			    .bad = (r->flags & F_BAD) != 0,
			};
			t->cowner[t->ncopies] = p;
			t->cidx[t->ncopies++] = i;
		}
	}
	return 0;
}

static bool state_is(const struct ckpt_state *s, const struct restore_plan *p)
{
	return s->step == p->step && s->attempt == p->attempt;
}

/*
 * Run a tier-1 plan. *fails counts this rank's copies found bad (marked
 * in loc); 0 or -EIO (a peer) / -ENOMEM.
 */
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

/*
 * The planner chose rank 0's shared file l for a model in parts: every
 * rank reads its rows of it. A refusal anywhere marks it bad on rank 0
 * (*fails), and the plan is made again. 0 or -errno of the exchange.
 */
static int read_parts(struct dist *d, struct model *m, struct local *l,
		      const struct restore_plan *p, const struct resume_args *a,
		      struct ckpt_state *st, char *path, size_t plen,
		      int *fails)
{
	char why[1024];
	int rc, bad;

	if (d->rank == 0)
		sigma_strlcpy(path, l->path, plen);
	rc = dist_bcast_bytes(d, path, plen);
	if (rc)
		return rc;
	memset(st, 0, sizeof(*st));
	bad = (l->r.flags & F_DIFF) ||
	      ckpt_read(path, m, st, why, sizeof(why)) ||
	      st->step != p->step || st->attempt != p->attempt ||
	      (a->run && *a->run && strcmp(st->run, a->run));
	if (bad && !(l->r.flags & F_DIFF))
		sigma_warn("checkpoint refused by rank %d: %s; trying an older one",
			   d->rank, st->step == p->step ? why : path);
	{
		double v = bad;

		rc = dist_world_mean(d, &v, 1);
		bad = v > 0;
	}
	if (!rc && bad && d->rank == 0) {
		l->r.flags |= F_BAD;
		*fails = 1;
	}
	return rc;
}

/* the newest attempt any copy of the run names, -1 none */
static int max_attempt(const struct dist *d, const struct rec *all)
{
	int mx = -1;

	for (size_t i = 0; i < (size_t)d->size * MAX_REC; i++)
		if ((all[i].flags & F_USED) && all[i].attempt > mx &&
		    all[i].attempt <= CKPT_ATTEMPT_MAX)
			mx = (int)all[i].attempt;
	return mx;
}

int resume_restore(struct dist *d, struct model *m, const struct resume_args *a,
		   struct ckpt_state *st, struct resume_result *res, char *err,
		   size_t len)
{
	struct local *loc = calloc(MAX_REC, sizeof(*loc));
	struct rec *all = calloc((size_t)d->size * MAX_REC, sizeof(*all));
	int n = 0, rc = 0, max_rounds;

	memset(res, 0, sizeof(*res));
	res->step = -1;
	if (!loc || !all) {
		rc = sigma_set_err(err, len, ENOMEM, "out of memory");
		goto out;
	}
	list_local(d, a, loc, &n, &res->shared_newest);
	max_rounds = d->size * MAX_REC + 1;
	for (int round = 1; round <= max_rounds; round++) {
		struct restore_input in;
		struct restore_plan p;
		struct table t;
		double failed = 0;
		int fails = 0;

		res->rounds = round;
		rc = exchange(d, loc, n, all);
		if (rc) {
			rc =
			    sigma_set_err(err, len, EIO,
					  "exchanging what each rank holds: %s",
					  strerror(-rc));
			goto out;
		}
		rc = table_build(d, all, &t);
		if (rc) {
			rc = sigma_set_err(err, len, ENOMEM, "out of memory");
			goto out;
		}
		if (round == 1)
			res->max_attempt = max_attempt(d, all);
		in = (struct restore_input){d->size, t.copies, t.ncopies,
					    t.shared, t.nshared};
		rc = restore_plan(&in, &p, err, len);
		if (rc) {
			table_free(&t);
			goto out;
		}
		res->tier = p.tier;
		res->step = p.step;
		res->attempt = p.attempt;
		res->lost = p.lost;
		res->newest_step = p.newest_step;
		res->nshards = p.nshards;
		res->nxfer = p.nxfer;
		res->from_replica = p.from_replica;
		sigma_strlcpy(res->why, p.why, sizeof(res->why));
		if (p.tier == RESTORE_TIER1) {
			int c = p.source[d->rank];

			res->self_replica = t.copies[c].replica;
			rc = run_tier1(d, m, &p, &t, loc, st, &fails);
		} else if (p.tier == RESTORE_TIER2 && m->sharded) {
			rc = read_parts(d, m, &loc[t.sidx[p.shared]], &p, a, st,
					res->path, sizeof(res->path), &fails);
		} else if (p.tier == RESTORE_TIER2) {
			int ok = 1;

			if (d->rank == 0) {
				struct local *l = &loc[t.sidx[p.shared]];
				char why[1024];

				sigma_strlcpy(res->path, l->path,
					      sizeof(res->path));
				memset(st, 0, sizeof(*st));
				if (((l->r.flags & F_DIFF)
					 ? ckpt_load_latest_diff(
					       l->path, m, st, res->path,
					       sizeof(res->path), why,
					       sizeof(why))
					 : ckpt_read(l->path, m, st, why,
						     sizeof(why))) ||
				    st->step != p.step ||
				    (!(l->r.flags & F_DIFF) &&
				     st->attempt != p.attempt) ||
				    (a->run && *a->run &&
				     strcmp(st->run, a->run))) {
					sigma_warn(
					    "checkpoint refused: %s; trying an older one",
					    st->step == p.step ? why : l->path);
					l->r.flags |= F_BAD;
					ok = 0;
					fails = 1;
				}
			}
			rc = dist_bcast_int(d, &ok);
			if (!rc && ok)
				rc = dist_sync_model(d, m, st, sizeof(*st));
		}
		restore_plan_fini(&p);
		table_free(&t);
		if (rc) {
			rc = sigma_set_err(
			    err, len, EIO,
			    "moving checkpoint shards between ranks: %s",
			    strerror(rc < 0 ? -rc : rc));
			goto out;
		}
		if (res->tier == RESTORE_NONE)
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
	free(loc);
	free(all);
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

/* tier 1 on: the planner chooses the step and the tier */
static int resume_tiers(struct dist *d, struct model *m,
			const struct resume_from *f, struct ckpt_state *st,
			struct resume_to *to)
{
	struct ckpt_state rs = *st; /* overwritten by what is read */
	struct resume_args a = { f->node_dir, f->shared_dir, st->layout,
				 st->run };
	struct resume_result r;
	char err[1024];
	int rc = resume_restore(d, m, &a, &rs, &r, err, sizeof(err));

	if (rc) {
		sigma_error("resume: %s", err);
		return exit_code_of(rc, PHASE_RESUME);
	}
	/* after every attempt that left a copy anywhere */
	st->attempt = sigma_attempt_past(st->attempt, r.max_attempt);
	to->start = r.tier == RESTORE_NONE ? 0 : rs.step;
	to->slots = r.tier == RESTORE_TIER1 && to->start > 0;
	/* a full shared checkpoint is the differentials' base */
	if (r.tier == RESTORE_TIER2 && d->rank == 0 && !ckpt_is_diff(r.path))
		sigma_strlcpy(to->full, r.path, sizeof(to->full));
	if (to->start > 0) {
		adopt(st, &rs);
		note_kernel(d, &rs);
	}
	if (r.tier == RESTORE_TIER1 && r.nshards == 1)
		printf("resume: tier 1, step %ld from rank 0's %s (newest shared checkpoint: %ld); %ld checkpointed steps lost; continuing at step %ld\n",
		       r.step, r.self_replica ? "replica" : "own copy",
		       r.shared_newest, r.lost, to->start);
	else if (r.tier == RESTORE_TIER1)
		printf("resume: tier 1, step %ld (attempt %d): %d shards, %d from a buddy's replica, %d moved to their rank (newest shared checkpoint: %ld); %ld checkpointed steps lost; continuing at step %ld\n",
		       r.step, r.attempt, r.nshards, r.from_replica, r.nxfer,
		       r.shared_newest, r.lost, to->start);
	else if (r.tier == RESTORE_TIER2)
		printf("resume: tier 2, %s (%s); %ld checkpointed steps lost; continuing at step %ld\n",
		       d->rank == 0 ? r.path : "rank 0's checkpoint", r.why,
		       r.lost, to->start);
	else
		printf("resume: no valid checkpoint in either tier (%s), starting at step 0\n",
		       *r.why ? r.why : "none there");
	return 0;
}

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

/* the shared tier only: rank 0 reads, every rank gets the tensors and
 * state (whatever layout wrote them: tensors are whole); a model in parts
 * is read by every rank */
static int resume_shared(struct dist *d, struct model *m,
			 const struct resume_from *f, struct ckpt_state *st,
			 struct resume_to *to)
{
	char path[PATH_MAX] = "rank 0's checkpoint", err[1024];
	struct ckpt_state rs;
	int rc;

	memset(&rs, 0, sizeof(rs));
	if (m->sharded) {
		rc = ckpt_load_latest(f->shared_dir, m, &rs, path, sizeof(path),
				      err, sizeof(err));
		if (parts_agree(d, &rc, &rs, err, sizeof(err)))
			return TRAIN_EXIT_PEER;
	} else {
		rc = d->rank == 0 ? ckpt_load_latest_diff(f->shared_dir, m, &rs,
							   path, sizeof(path),
							   err, sizeof(err))
				  : 0;
		if (dist_bcast_int(d, &rc) ||
		    (rc == 0 && dist_sync_model(d, m, &rs, sizeof(rs))))
			return TRAIN_EXIT_PEER;
	}
	if (rc == -ENOENT) {
		printf("resume: no checkpoint in %s, starting at step 0\n",
		       f->shared_dir);
		return 0;
	}
	if (rc) {
		sigma_error("resume: %s",
			    d->rank == 0 ? err
					 : "rank 0 found no valid checkpoint there");
		return exit_code_of(rc, PHASE_RESUME_SHARED);
	}
	if (rs.batch != f->batch || rs.seed != f->seed)
		sigma_warn("resume: %s was written with batch %d seed %llu; continuing with its seed",
			   path, rs.batch, (unsigned long long)rs.seed);
	if (rs.data_checksum != f->data_checksum)
		sigma_warn("resume: %s was written for another training file (checksum differs)",
			   path);
	to->start = rs.step;
	adopt(st, &rs);
	note_kernel(d, &rs);
	printf("resume: %s, continuing at step %ld\n", path, to->start);
	if (d->rank == 0 && !ckpt_is_diff(path))
		sigma_strlcpy(to->full, path, sizeof(to->full));
	return 0;
}

int resume_run(struct dist *d, struct model *m, const struct resume_from *f,
	       struct ckpt_state *st, struct resume_to *to)
{
	int code;

	to->start = 0;
	to->full[0] = '\0';
	to->full_step = -1;
	to->slots = false;
	code = f->node_dir ? resume_tiers(d, m, f, st, to)
			   : resume_shared(d, m, f, st, to);
	if (code == 0 && *to->full)
		to->full_step = to->start;
	fflush(stdout);
	return code;
}
