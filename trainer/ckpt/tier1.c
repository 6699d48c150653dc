/*
 * tier1.c - the node-local tier from the training loop (tier1.h): where
 * a rank's copies live, its buddy, and one save: the local write in the
 * background and the exchange of replicas.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "sigma.h"
#include "claim.h"
#include "comm.h"
#include "exitcodes.h"
#include "replica_link.h"
#include "run.h"
#include "select.h"
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

/*
 * The replica exchange: a thread of its own that takes one save at a
 * time, waits for its staged copy, swaps it with the buddies over the
 * replica link and hands the replica received to the replica's writer.
 * A replica is committed only once it arrived whole, so a node lost in
 * the middle of an exchange takes at most that step with it.
 */
struct tier1_exchange {
	struct replica_link *link;
	struct ckpt_async *own, *rep;
	size_t n, rn; /* floats of a block sent, received */
	int rank, buddy, from;
	long pause_step; /* SIGMA_REPLICA_INJECT=STEP:MS, -1: none */
	unsigned pause_ms;
	pthread_t th;
	bool started; /* th runs */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool posted, busy, stop;
	int code; /* the exit code of a failed exchange, kept */
	struct ckpt_state sst, rst; /* the state sent and received */
};

/* one save's exchange, in the thread: 0 or an exit code */
static int exchange_one(struct tier1_exchange *x)
{
	struct iovec out[2], in[2];
	char err[1024];
	float *r;
	int rc;

	ckpt_async_copied(x->own);
	r = ckpt_async_claim(x->rep, err, sizeof(err));
	if (!r) {
		sigma_error("tier 1: replica: %s", err);
		return TRAIN_EXIT_CANTCREAT;
	}
	out[0].iov_base = (void *)ckpt_async_staged(x->own);
	out[0].iov_len = 3 * x->n * sizeof(float);
	out[1].iov_base = &x->sst, out[1].iov_len = sizeof(x->sst);
	in[0].iov_base = r, in[0].iov_len = 3 * x->rn * sizeof(float);
	in[1].iov_base = &x->rst, in[1].iov_len = sizeof(x->rst);
	if (x->pause_ms && x->sst.step == x->pause_step) {
		sigma_info("rank %d: tier 1: step %ld: the replica to rank %d pauses %u ms halfway (SIGMA_REPLICA_INJECT)",
			   x->rank, x->sst.step, x->buddy, x->pause_ms);
		replica_link_pause_next(x->link, x->pause_ms);
	}
	rc = replica_link_swap(x->link, out, 2, in, 2, err, sizeof(err));
	if (rc == 0 && x->rst.step != x->sst.step)
		rc = sigma_set_err(err, sizeof(err), EPROTO,
				   "rank %d sent step %ld", x->from,
				   x->rst.step);
	if (rc) {
		sigma_error("tier 1: step %ld: the replica exchange (to rank %d, from rank %d) failed: %s",
			    x->sst.step, x->buddy, x->from, err);
		return TRAIN_EXIT_PEER;
	}
	ckpt_async_commit(x->rep, &x->rst);
	return 0;
}

static void *exchanger(void *arg)
{
	struct tier1_exchange *x = arg;

	pthread_mutex_lock(&x->mu);
	for (;;) {
		int code;

		while (!x->posted && !x->stop)
			pthread_cond_wait(&x->cv, &x->mu);
		if (!x->posted)
			break;
		x->posted = false;
		pthread_mutex_unlock(&x->mu);
		code = x->code ? 0 : exchange_one(x);
		pthread_mutex_lock(&x->mu);
		x->busy = false;
		if (code && !x->code)
			x->code = code;
		pthread_cond_broadcast(&x->cv);
	}
	pthread_mutex_unlock(&x->mu);
	return NULL;
}

/*
 * The exit code of an exchange that failed, or 0; with wait, once no
 * exchange is in flight (*waited, when not NULL: one was).
 */
static int exchange_code(struct tier1_exchange *x, bool wait, bool *waited)
{
	int code;

	if (waited)
		*waited = false;
	if (!x)
		return 0;
	pthread_mutex_lock(&x->mu);
	if (waited)
		*waited = x->busy;
	while (wait && x->busy)
		pthread_cond_wait(&x->cv, &x->mu);
	code = x->code;
	pthread_mutex_unlock(&x->mu);
	return code;
}

static void exchange_post(struct tier1_exchange *x,
			  const struct ckpt_state *st)
{
	pthread_mutex_lock(&x->mu);
	x->sst = *st; /* st changes with the next step */
	x->posted = x->busy = true;
	pthread_cond_broadcast(&x->cv);
	pthread_mutex_unlock(&x->mu);
}

static void exchange_destroy(struct tier1_exchange *x)
{
	if (!x)
		return;
	if (x->started) {
		pthread_mutex_lock(&x->mu);
		x->stop = true;
		pthread_cond_broadcast(&x->cv);
		pthread_mutex_unlock(&x->mu);
		pthread_join(x->th, NULL);
	}
	pthread_cond_destroy(&x->cv);
	pthread_mutex_destroy(&x->mu);
	replica_link_close(x->link);
	free(x);
}

/* SIGMA_REPLICA_INJECT=STEP:MS: the drill's pause; 0 or -EINVAL */
static int exchange_inject(struct tier1_exchange *x)
{
	const char *s = getenv("SIGMA_REPLICA_INJECT");
	char step[32];
	const char *colon;
	long ms;

	x->pause_step = -1;
	if (!s || !*s)
		return 0;
	colon = strchr(s, ':');
	if (!colon || (size_t)(colon - s) >= sizeof(step))
		goto bad;
	memcpy(step, s, (size_t)(colon - s));
	step[colon - s] = '\0';
	if (sigma_parse_long(step, 0, LONG_MAX, &x->pause_step) ||
	    sigma_parse_long(colon + 1, 1, 600000, &ms))
		goto bad;
	x->pause_ms = (unsigned)ms;
	return 0;
bad:
	sigma_error("SIGMA_REPLICA_INJECT=%s: want STEP:MS (a step, and 1 to 600000 ms)",
		    s);
	return -EINVAL;
}

/*
 * The link to the buddies, every rank together: each listens, publishes
 * its address through PMIx, connects to its buddy and takes from's
 * connection; then the thread starts. 0 or -errno after printing why.
 */
static int exchange_open(struct tier1 *t, struct dist *d, size_t n,
			 size_t rn)
{
	struct tier1_exchange *x = calloc(1, sizeof(*x));
	struct replica_addr me, at;
	struct comm_options co;
	char key[64], err[1024];
	size_t got = 0;
	int rc;

	if (!x) {
		sigma_error("tier 1: out of memory");
		return -ENOMEM;
	}
	pthread_mutex_init(&x->mu, NULL);
	pthread_cond_init(&x->cv, NULL);
	x->own = t->own, x->rep = t->rep;
	x->n = n, x->rn = rn;
	x->rank = d->rank, x->buddy = t->buddy, x->from = t->from;
	t->x = x;
	if ((rc = exchange_inject(x)))
		return rc;
	rc = comm_options_default(&co, err, sizeof(err));
	if (rc == 0)
		rc = replica_link_listen(&x->link, d->rank, co.timeout_s, &me,
					 err, sizeof(err));
	if (rc == 0)
		rc = sigma_snprintf(key, sizeof(key), "sigma.replica.%lu",
				    d->boot.seq++);
	if (rc == 0 && ((rc = boot_put(&d->boot, key, &me, sizeof(me))) ||
			(rc = boot_commit(&d->boot)) ||
			(rc = boot_fence(&d->boot)) ||
			(rc = boot_get(&d->boot, t->buddy, key, &at, sizeof(at),
				       &got))))
		sigma_set_err(err, sizeof(err), rc,
			      "publishing the replica's address: %s",
			      strerror(-rc));
	if (rc == 0 && got != sizeof(at))
		rc = sigma_set_err(err, sizeof(err), EPROTO,
				   "rank %d published an address of %zu bytes",
				   t->buddy, got);
	if (rc == 0)
		rc = replica_link_join(x->link, t->buddy, &at, t->from, err,
				       sizeof(err));
	if (rc == 0 && (rc = -pthread_create(&x->th, NULL, exchanger, x)))
		sigma_set_err(err, sizeof(err), rc, "thread: %s",
			      strerror(-rc));
	x->started = rc == 0;
	if (rc)
		sigma_error("tier 1: the replica link (to rank %d, from rank %d): %s",
			    t->buddy, t->from, err);
	return rc;
}

int tier1_open(struct tier1 *t, const struct tiers_conf *o, struct dist *d,
	       const struct model *m, const char *run)
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
	if (rc) {
		sigma_error("tier 1: %s", err);
		return rc;
	}
	if (t->buddy >= 0)
		rc = exchange_open(t, d, m->nparams,
				   (t->from_shard ? t->from_shard : m)->nparams);
	return rc;
}

int tier1_wait(struct tier1 *t)
{
	struct ckpt_times ct = { 0 };
	int x = tier1_exchanged(t, &ct) ? -EIO : 0;
	int a = tier2_wait(t->own), b = tier2_wait(t->rep);

	return x ?: a ?: b;
}

void tier1_close(struct tier1 *t)
{
	tier1_wait(t);
	exchange_destroy(t->x);
	t->x = NULL;
	ckpt_async_destroy(t->own);
	ckpt_async_destroy(t->rep);
	t->own = t->rep = NULL;
	model_destroy(t->from_shard);
	t->from_shard = NULL;
}

/*
 * Split moments (--zero 1): the copy holds the parameters and this rank's
 * blocks of the moments, zeros elsewhere, with nothing gathered. Only this
 * rank, in this layout (its name says " zero=1"), reads it back, and
 * model_moments_load takes exactly those blocks.
 */
static int stage_own_blocks(struct ckpt_async *w, const struct model *m,
			    const struct ckpt_state *st, char *err, size_t len)
{
	const size_t n = m->nparams;
	float *s = ckpt_async_claim(w, err, len);

	if (!s)
		return -EIO;
	m->ops->to_host(s, m->params, sizeof(float) * n);
	memset(s + n, 0, sizeof(float) * 2 * n);
	model_moments_store(m, s + n, s + 2 * n);
	ckpt_async_commit(w, st);
	return 0;
}

/*
 * Stage and write locally in the background, and hand the copy to the
 * exchange thread. A model in host memory is copied by the writer thread
 * while the next step computes (tier1_finish waits for it before the
 * weights change); otherwise the copy is made here. Either way the
 * replicas travel from the copy, beside the next steps.
 */
int tier1_save(struct tier1 *t, const struct model *m,
	       const struct ckpt_state *st, struct ckpt_times *ct)
{
	struct ckpt_async_stats cs;
	uint64_t t0 = sigma_now_ms();
	bool lazy = m->ops == &sigma_ops_cpu && !m->zero;
	char err[1024];
	int rc;

	/* the last exchange still reads the stage: it ends first */
	if ((rc = exchange_code(t->x, true, NULL)))
		return rc;
	if (m->zero) {
		if ((rc = stage_own_blocks(t->own, m, st, err, sizeof(err)))) {
			sigma_error("tier 1: %s", err);
			return TRAIN_EXIT_CANTCREAT;
		}
		ckpt_async_stats(t->own, &cs);
		cs.stall_ms = (double)(sigma_now_ms() - t0);
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
	if (t->x)
		exchange_post(t->x, st);
	/* with a buddy, a wait for the last exchange stalls training too */
	ct->stall_ms = t->x ? (double)(sigma_now_ms() - t0) : cs.stall_ms;
	ct->t1_saves++;
	ct->t1_stall_sum_ms += ct->stall_ms;
	ct->t1_stall_max_ms = fmax(ct->t1_stall_max_ms, ct->stall_ms);
	return 0;
}

/* the wait since t0, a stall of the last save's */
static void stalled(struct ckpt_times *ct, uint64_t t0)
{
	double w = (double)(sigma_now_ms() - t0);

	ct->stall_ms += w;
	ct->t1_stall_sum_ms += w;
	ct->t1_stall_max_ms = fmax(ct->t1_stall_max_ms, ct->stall_ms);
}

int tier1_finish(struct tier1 *t, struct ckpt_times *ct)
{
	uint64_t t0 = sigma_now_ms();

	if (t->inflight) {
		ckpt_async_copied(t->own);
		t->inflight = false;
		stalled(ct, t0);
	}
	return exchange_code(t->x, false, NULL);
}

int tier1_exchanged(struct tier1 *t, struct ckpt_times *ct)
{
	uint64_t t0;
	int code = tier1_finish(t, ct);
	bool waited;

	if (code)
		return code;
	t0 = sigma_now_ms();
	code = exchange_code(t->x, true, &waited);
	if (waited)
		stalled(ct, t0);
	return code;
}

int tier1_flush(struct tier1 *t, struct ckpt_times *ct)
{
	struct ckpt_times end = { 0 };
	int code = tier1_exchanged(t, &end);

	ct->t1_end_ms += end.stall_ms;
	return code;
}
