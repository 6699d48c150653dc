/*
 * tier1.c - the node-local tier from the training loop (tier1.h): where
 * a rank's copies live, its buddy, and one save: the local write in the
 * background and the exchange of replicas.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sigma.h"
#include "claim.h"
#include "exitcodes.h"
#include "run.h"
#include "select.h"
#include "tags.h"
#include "tier1.h"

/*
 * LOCAL/NODE/rank-R and LOCAL/NODE/replica-F; the buddy is the rank at
 * the same place on the next node (ranks placed node by node, as srun
 * does by default), so it is on another node whenever there is one.
 */
void tier1_buddies(const struct dist *d, int *buddy, int *from)
{
	int ls = d->boot.local_size > 0 ? d->boot.local_size : 1;

	*buddy = *from = -1;
	if (d->size > ls) {
		*buddy = (d->rank + ls) % d->size;
		*from = (d->rank - ls + d->size) % d->size;
	}
}

int tier1_open(struct tier1 *t, const struct tiers_conf *o,
	       const struct dist *d, const struct model *m, const char *run)
{
	const char *node = getenv("SLURMD_NODENAME");
	char err[1024];
	int rc;

	memset(t, 0, sizeof(*t));
	if (!node || !*node)
		node = *d->boot.node ? d->boot.node : "localhost";
	tier1_buddies(d, &t->buddy, &t->from);
	if (sigma_snprintf(t->node_dir, sizeof(t->node_dir), "%s/%s",
			   o->local_dir, node) ||
	    sigma_snprintf(t->own_dir, sizeof(t->own_dir), "%s/%s/rank-%d",
			   o->local_dir, node, d->rank) ||
	    sigma_snprintf(t->rep_dir, sizeof(t->rep_dir),
			   "%s/%s/replica-%d", o->local_dir, node,
			   t->from < 0 ? d->rank : t->from)) {
		sigma_error("--local-ckpt-dir %s: path too long", o->local_dir);
		return -ENAMETOOLONG;
	}
	/* this run's directories: another run's copies go */
	for (int i = 0; i < (t->buddy >= 0 ? 2 : 1); i++) {
		const char *dir = i ? t->rep_dir : t->own_dir;

		rc = claim_local(dir, run, run_slurm_job(), err, sizeof(err));
		if (rc < 0) {
			sigma_error("tier 1: %s", err);
			return rc;
		}
		if (rc > 0)
			printf("tier 1: %s held another run's copies: removed\n",
			       dir);
	}
	rc = ckpt_async_create(&t->own, t->own_dir, o->local_keep, 3, 200, m,
			       err, sizeof(err));
	if (rc == 0 && t->buddy >= 0 && m->sharded)
		rc = dist_part_of(d, m, t->from, &t->from_shard, err,
				  sizeof(err));
	if (rc == 0 && t->buddy >= 0)
		rc = ckpt_async_create(&t->rep, t->rep_dir, o->local_keep, 3,
				       200, t->from_shard ? t->from_shard : m,
				       err, sizeof(err));
	if (rc)
		sigma_error("tier 1: %s", err);
	return rc;
}

int tier1_wait(struct tier1 *t)
{
	struct ckpt_times ct = { 0 };
	int x = tier1_finish(t, &ct) ? -EIO : 0;
	int a = tier2_wait(t->own), b = tier2_wait(t->rep);

	return x ?: a ?: b;
}

void tier1_close(struct tier1 *t)
{
	tier1_wait(t);
	ckpt_async_destroy(t->own);
	ckpt_async_destroy(t->rep);
	t->own = t->rep = NULL;
	model_destroy(t->from_shard);
	t->from_shard = NULL;
}

/* the replica exchange of step st started: this rank's state (live, NULL:
 * the staged copy) to the buddy, from's into its replica, completed by
 * tier1_finish; an exit code or 0 */
static int exchange(struct tier1 *t, struct dist *d, const struct model *m,
		    const struct model *live, const struct ckpt_state *st)
{
	const size_t n = m->nparams;
	const size_t rn = (t->from_shard ? t->from_shard : m)->nparams;
	const float *own = ckpt_async_staged(t->own);
	const float *blk[3] = { own, own + n, own + 2 * n };
	char err[1024];
	float *r;
	int rc = 0;

	if (live) { /* host memory that nothing changes meanwhile */
		blk[0] = live->params, blk[1] = live->m, blk[2] = live->v;
	}
	r = ckpt_async_claim(t->rep, err, sizeof(err));
	if (!r) {
		sigma_error("tier 1: replica: %s", err);
		return TRAIN_EXIT_CANTCREAT;
	}
	t->sst = *st; /* st changes with the next step */
	for (int b = 0; b < 3 && rc == 0; b++)
		rc = comm_isendrecv(d->world, blk[b], n, t->buddy, r + b * rn,
				    rn, t->from, COMM_F32,
				    SIGMA_TAG_REPLICA_SHARD, &t->xreq[b]);
	if (rc == 0)
		rc = comm_isendrecv(d->world, &t->sst, sizeof(t->sst), t->buddy,
				    &t->rst, sizeof(t->rst), t->from, COMM_U8,
				    SIGMA_TAG_REPLICA_STATE, &t->xreq[3]);
	t->exchanging = true;
	if (rc) {
		sigma_error("tier 1: step %ld: replication to rank %d failed: %s",
			    st->step, t->buddy, strerror(-rc));
		return TRAIN_EXIT_PEER;
	}
	return 0;
}

/* the exchange of the last save has arrived: the replica to its writer */
static int exchange_end(struct tier1 *t)
{
	int rc = 0;

	if (!t->exchanging)
		return 0;
	t->exchanging = false;
	for (int b = 0; b < 4; b++) {
		int w = t->xreq[b].c ? comm_wait(&t->xreq[b]) : 0;

		rc = rc ?: w;
	}
	if (rc) {
		sigma_error("tier 1: step %ld: replication to rank %d failed: %s",
			    t->sst.step, t->buddy, strerror(-rc));
		return TRAIN_EXIT_PEER;
	}
	ckpt_async_commit(t->rep, &t->rst);
	return 0;
}

/*
 * Stage and write locally in the background, and swap replicas with the
 * buddies. A model in host memory is copied by the writer thread while
 * the next step computes (tier1_finish waits for it before the weights
 * change), and the replicas travel straight from the model; otherwise
 * the copy is made here and the replicas travel from it.
 */
int tier1_save(struct tier1 *t, struct dist *d, const struct model *m,
	       const struct ckpt_state *st, struct ckpt_times *ct)
{
	struct ckpt_async_stats cs;
	uint64_t t0 = sigma_now_ms();
	/* split moments are gathered here, by every rank together */
	bool lazy = m->ops == &sigma_ops_cpu && !m->zero;
	char err[1024];
	int rc;

	if (m->zero) {
		rc = tier2_submit_gathered(t->own, d, m, st, &cs.stall_ms, err,
					   sizeof(err));
		if (rc) {
			sigma_error("tier 1: %s", err);
			return rc == -ECANCELED ? TRAIN_EXIT_CANTCREAT
						: TRAIN_EXIT_PEER;
		}
	} else {
		rc = lazy ? ckpt_async_submit_lazy(t->own, m, st, err,
						   sizeof(err))
			  : ckpt_async_submit(t->own, m, st, err, sizeof(err));
		if (rc) {
			sigma_error("tier 1: %s", err);
			return TRAIN_EXIT_CANTCREAT;
		}
		ckpt_async_stats(t->own, &cs);
	}
	t->inflight = lazy;
	rc = t->buddy >= 0 ? exchange(t, d, m, lazy ? m : NULL, st) : 0;
	/* starting the replica's exchange stalls training too */
	ct->stall_ms = t->buddy >= 0 ? (double)(sigma_now_ms() - t0)
				     : cs.stall_ms;
	ct->t1_saves++;
	ct->t1_stall_sum_ms += ct->stall_ms;
	ct->t1_stall_max_ms = fmax(ct->t1_stall_max_ms, ct->stall_ms);
	return rc;
}

int tier1_finish(struct tier1 *t, struct ckpt_times *ct)
{
	uint64_t t0 = sigma_now_ms();
	double w;
	int rc;

	if (!t->inflight && !t->exchanging)
		return 0;
	if (t->inflight)
		ckpt_async_copied(t->own);
	t->inflight = false;
	rc = exchange_end(t);
	w = (double)(sigma_now_ms() - t0);
	ct->stall_ms += w;
	ct->t1_stall_sum_ms += w;
	ct->t1_stall_max_ms = fmax(ct->t1_stall_max_ms, ct->stall_ms);
	return rc;
}
