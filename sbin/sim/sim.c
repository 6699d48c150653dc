/*
 * sim.c - the discrete-event engine of sigma-sim (see sim.h).
 *
 * Memory is linear in nodes: a few bytes of state per node, the jobs' node
 * slots (at most one per node), a binary heap of pending events (at most a
 * few per node), and a fixed histogram of recovery times. Each event costs
 * O(log events) plus, on a failure, O(spares + job size).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "contract.h"
#include "policy.h"
#include "sigma.h"
#include "sim.h"

enum sim_node_state { NODE_FREE = 0, NODE_POOL, NODE_JOB, NODE_REPAIR };
enum sim_job_state { JOB_RUN = 0, JOB_DOWN, JOB_WAIT, JOB_DEAD };
enum sim_ev_type { EV_INCIDENT = 0, EV_FAIL, EV_REPAIRED, EV_RESTART };

struct sim_ev {
	double t;
	uint32_t id;  /* node or job */
	uint32_t aux; /* job generation */
	uint8_t type;
};

struct sim_job {
	double t_run;	  /* running since (JOB_RUN) */
	double t_fail;	  /* recovery started (JOB_DOWN, JOB_WAIT) */
	double committed; /* seconds of training kept */
	int restarts;
	int spares_used;
	int missing;  /* empty node slots */
	uint32_t gen; /* invalidates stale restart events */
	uint8_t state;
	uint8_t queued; /* in the wait queue */
};

struct sim {
	const struct sim_trace *tr;
	const struct sim_params *p;
	struct sim_result *r;
	struct policy_config pol;
	double horizon;
	double rate; /* incidents per second, cluster-wide */
	double kind_cum[SIM_MAX_KINDS];
	uint64_t rng_inc[4], rng_other[4];
	/* nodes */
	long n;
	uint8_t *state;
	int32_t *where; /* slot (job), index (pool, free list) */
	uint32_t *failures;
	/* pool and free list */
	int32_t *pool;
	int64_t *pool_since;
	long npool;
	int32_t *freel;
	long nfree;
	struct policy_spare *view; /* scratch: the pool as the policy sees it */
	/* jobs */
	long njobs, jsize;
	struct sim_job *jobs;
	int32_t *slots; /* njobs * jsize node ids, -1 empty */
	int32_t *waitq;
	long wq_head, wq_len;
	/* events */
	struct sim_ev *heap;
	size_t nheap, cap;
};

/* ---- random numbers: xoshiro256** seeded by splitmix64 ------------------- */

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static void rng_seed(uint64_t s[4], uint64_t seed)
{
	for (int i = 0; i < 4; i++)
		s[i] = splitmix64(&seed);
}

static inline uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

static uint64_t rng_next(uint64_t s[4])
{
	uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return result;
}

/* uniform in [0, 1) */
static double rng_unit(uint64_t s[4])
{
	return (double)(rng_next(s) >> 11) * 0x1.0p-53;
}

static double rng_exp(uint64_t s[4], double mean)
{
	return -log1p(-rng_unit(s)) * mean;
}

/* ---- event heap --------------------------------------------------------- */

static int heap_push(struct sim *s, double t, uint8_t type, uint32_t id,
		     uint32_t aux)
{
	size_t i;

	if (s->nheap == s->cap) {
		size_t ncap = s->cap ? s->cap * 2 : 1024;
		struct sim_ev *h = realloc(s->heap, ncap * sizeof(*h));

		if (!h)
			return -ENOMEM;
		s->heap = h;
		s->cap = ncap;
	}
	i = s->nheap++;
	while (i > 0) {
		size_t parent = (i - 1) / 2;

		if (s->heap[parent].t <= t)
			break;
		s->heap[i] = s->heap[parent];
		i = parent;
	}
	s->heap[i] = (struct sim_ev){t, id, aux, type};
	return 0;
}

static struct sim_ev heap_pop(struct sim *s)
{
	struct sim_ev top = s->heap[0], last = s->heap[--s->nheap];
	size_t i = 0;

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= s->nheap)
			break;
		if (c + 1 < s->nheap && s->heap[c + 1].t < s->heap[c].t)
			c++;
		if (last.t <= s->heap[c].t)
			break;
		s->heap[i] = s->heap[c];
		i = c;
	}
	if (s->nheap)
		s->heap[i] = last;
	return top;
}

/* ---- node sets ----------------------------------------------------------- */

static void pool_add(struct sim *s, int32_t node, double t)
{
	s->state[node] = NODE_POOL;
	s->where[node] = (int32_t)s->npool;
	s->pool[s->npool] = node;
	s->pool_since[s->npool] = (int64_t)t;
	s->npool++;
}

static void pool_remove(struct sim *s, int32_t node)
{
	long i = s->where[node], last = --s->npool;

	s->pool[i] = s->pool[last];
	s->pool_since[i] = s->pool_since[last];
	s->where[s->pool[i]] = (int32_t)i;
	if (s->npool < s->r->min_pool)
		s->r->min_pool = s->npool;
}

static void free_push(struct sim *s, int32_t node)
{
	s->state[node] = NODE_FREE;
	s->where[node] = (int32_t)s->nfree;
	s->freel[s->nfree++] = node;
}

static void free_remove(struct sim *s, int32_t node)
{
	long i = s->where[node], last = --s->nfree;

	s->freel[i] = s->freel[last];
	s->where[s->freel[i]] = (int32_t)i;
}

static int to_repair(struct sim *s, int32_t node, double t)
{
	s->state[node] = NODE_REPAIR;
	return heap_push(s, t + rng_exp(s->rng_other, s->tr->repair_s),
			 EV_REPAIRED, (uint32_t)node, 0);
}

/* ---- jobs --------------------------------------------------------------- */

/* Training kept when a run of e seconds stops (checkpoint cycles). */
static double job_kept(const struct sim_trace *tr, double e, bool flush)
{
	double cycle = tr->ckpt_interval_s + tr->ckpt_cost_s;
	double cycles = floor(e / cycle), rem = e - cycles * cycle;
	double kept = cycles * tr->ckpt_interval_s;

	if (flush)
		kept += rem < tr->ckpt_interval_s ? rem : tr->ckpt_interval_s;
	return kept;
}

static void job_fill_slot(struct sim *s, long j, int32_t node)
{
	int32_t *sl = &s->slots[j * s->jsize];

	for (long k = 0; k < s->jsize; k++) {
		if (sl[k] < 0) {
			sl[k] = node;
			s->state[node] = NODE_JOB;
			s->where[node] = (int32_t)(j * s->jsize + k);
			s->jobs[j].missing--;
			return;
		}
	}
}

static void policy_job_of(const struct sim *s, long j, struct policy_job *pj)
{
	pj->id = (uint32_t)j;
	pj->restarts = s->jobs[j].restarts;
	pj->max_restarts = (int)s->tr->max_restarts;
	pj->spares = (int)s->tr->job_spares;
	pj->spares_used = s->jobs[j].spares_used;
	pj->on_warning = SIGMA_WARN_CHECKPOINT; /* a trainer: it checkpoints */
}

/* The pool as the policy sees it (the view is a scratch array). */
static size_t pool_view(struct sim *s)
{
	for (long i = 0; i < s->npool; i++) {
		s->view[i].failures = s->failures[s->pool[i]];
		s->view[i].since = s->pool_since[i];
		s->view[i].excluded = false;
	}
	return (size_t)s->npool;
}

static void take_from_pool(struct sim *s, long j,
			   const struct policy_plan *plan)
{
	int32_t nodes[POLICY_MAX_PICK];

	/* indexes shift as nodes leave the pool: resolve them first */
	for (size_t k = 0; k < plan->npicked; k++)
		nodes[k] = s->pool[plan->picked[k]];
	for (size_t k = 0; k < plan->npicked; k++) {
		pool_remove(s, nodes[k]);
		job_fill_slot(s, j, nodes[k]);
		s->jobs[j].spares_used++;
		s->r->spares_used++;
	}
}

static void take_from_free(struct sim *s, long j)
{
	while (s->jobs[j].missing > 0 && s->nfree > 0) {
		int32_t node = s->freel[s->nfree - 1];

		free_remove(s, node);
		job_fill_slot(s, j, node);
	}
}

static int job_schedule_restart(struct sim *s, long j, double at)
{
	struct sim_job *job = &s->jobs[j];

	job->state = JOB_DOWN;
	job->gen++;
	return heap_push(s, at, EV_RESTART, (uint32_t)j, job->gen);
}

static void job_enqueue_wait(struct sim *s, long j)
{
	struct sim_job *job = &s->jobs[j];

	job->state = JOB_WAIT;
	job->gen++; /* a restart scheduled before is void */
	if (!job->queued) {
		s->waitq[(s->wq_head + s->wq_len) % s->njobs] = (int32_t)j;
		s->wq_len++;
		job->queued = 1;
	}
}

static void job_give_up(struct sim *s, long j)
{
	int32_t *sl = &s->slots[j * s->jsize];

	s->jobs[j].state = JOB_DEAD;
	s->jobs[j].gen++;
	s->r->give_ups++;
	for (long k = 0; k < s->jsize; k++) {
		if (sl[k] >= 0)
			free_push(s, sl[k]);
		sl[k] = -1;
	}
}

/* Job j lost nodes (slots already empty): decide and act. */
static int job_recover(struct sim *s, long j, double t, bool new_requeue)
{
	struct sim_job *job = &s->jobs[j];
	struct policy_job pj;
	struct policy_plan plan;
	double delay;
	int rc;

	policy_job_of(s, j, &pj);
	if (!new_requeue && pj.restarts > 0)
		pj.restarts--; /* the requeue under way was already granted */
	if (!s->p->sigma && new_requeue &&
	    job->restarts >= s->tr->max_restarts) {
		job_give_up(s, j);
		return 0;
	}
	if (s->p->sigma) {
		size_t nv = pool_view(s);

		rc = policy_plan_failure(&s->pol, &pj, (size_t)job->missing,
					 s->view, nv, &plan);
		if (rc)
			return rc;
		if (plan.verdict == POLICY_GIVE_UP && new_requeue) {
			job_give_up(s, j);
			return 0;
		}
		if (plan.verdict == POLICY_REQUEUE)
			take_from_pool(s, j, &plan);
		delay = s->tr->sigma_detect_s + s->tr->sigma_requeue_s;
	} else {
		delay = s->tr->baseline_detect_s + s->tr->baseline_requeue_s;
	}
	if (new_requeue) {
		job->restarts++;
		s->r->restarts++;
	}
	take_from_free(s, j);
	if (job->missing > 0) {
		job_enqueue_wait(s, j);
		return 0;
	}
	return job_schedule_restart(s, j, t + delay + s->tr->restart_s);
}

/* Serve waiting jobs, oldest first, from the pool (sigma) and free nodes. */
static int serve_waiting(struct sim *s, double t)
{
	while (s->wq_len > 0) {
		long j = s->waitq[s->wq_head];
		struct sim_job *job = &s->jobs[j];

		if (job->state == JOB_WAIT) {
			if (s->p->sigma) {
				struct policy_job pj;
				struct policy_plan plan;
				size_t nv = pool_view(s);

				policy_job_of(s, j, &pj);
				pj.restarts =
				    0; /* counted when it was requeued */
				if (!policy_plan_failure(&s->pol, &pj,
							 (size_t)job->missing,
							 s->view, nv, &plan) &&
				    plan.verdict == POLICY_REQUEUE)
					take_from_pool(s, j, &plan);
			}
			take_from_free(s, j);
			if (job->missing > 0)
				return 0;
			if (job_schedule_restart(s, j, t + s->tr->restart_s))
				return -ENOMEM;
		}
		job->queued = 0;
		s->wq_head = (s->wq_head + 1) % s->njobs;
		s->wq_len--;
	}
	return 0;
}

/* ---- events ------------------------------------------------------------- */

/* Take node out of job j (it failed or was drained). */
static bool job_lose_node(struct sim *s, int32_t node, double t, bool bank)
{
	long slot = s->where[node], j = slot / s->jsize;
	struct sim_job *job = &s->jobs[j];
	bool was_running = job->state == JOB_RUN;

	if (was_running) {
		job->committed += job_kept(s->tr, t - job->t_run, bank);
		job->state = JOB_DOWN;
		job->t_fail = t;
		job->gen++;
	}
	s->slots[slot] = -1;
	job->missing++;
	return was_running;
}

static int on_fail(struct sim *s, int32_t node, double t)
{
	long j;
	bool fresh;
	int rc;

	switch (s->state[node]) {
	case NODE_REPAIR:
		return 0;
	case NODE_POOL:
		pool_remove(s, node);
		s->failures[node]++;
		return to_repair(s, node, t);
	case NODE_FREE:
		free_remove(s, node);
		s->failures[node]++;
		return to_repair(s, node, t);
	default:
		break;
	}
	j = s->where[node] / s->jsize;
	s->failures[node]++;
	s->r->job_failures++;
	fresh = job_lose_node(s, node, t, false);
	rc = to_repair(s, node, t);
	if (!rc)
		rc = job_recover(s, j, t, fresh);
	return rc;
}

static int on_warning(struct sim *s, int32_t node, double t)
{
	struct policy_job pj;
	struct policy_plan plan;
	long j;
	int rc;

	switch (s->state[node]) {
	case NODE_REPAIR:
		return 0;
	case NODE_POOL: /* drained: a warned node is no spare */
		pool_remove(s, node);
		return to_repair(s, node, t);
	case NODE_FREE:
		free_remove(s, node);
		return to_repair(s, node, t);
	default:
		break;
	}
	j = s->where[node] / s->jsize;
	if (s->jobs[j].state != JOB_RUN) {
		/* the job is already recovering: just keep the node out */
		job_lose_node(s, node, t, false);
		rc = to_repair(s, node, t);
		return rc ? rc : job_recover(s, j, t, false);
	}
	policy_job_of(s, j, &pj);
	rc = policy_plan_warning(&s->pol, &pj, 1, s->view, pool_view(s), &plan);
	if (rc)
		return rc;
	if (plan.verdict != POLICY_CHECKPOINT) {
		s->r->warnings_watched++;
		return 0;
	}
	/* checkpoint now, stop, restart on the spare */
	s->r->warnings_moved++;
	job_lose_node(s, node, t, true);
	s->jobs[j].restarts++;
	s->r->restarts++;
	take_from_pool(s, j, &plan);
	rc = to_repair(s, node, t);
	if (rc)
		return rc;
	return job_schedule_restart(
	    s, j,
	    t + s->tr->ckpt_cost_s + s->tr->sigma_requeue_s + s->tr->restart_s);
}

static int on_incident(struct sim *s, double t)
{
	double u, next;
	int32_t node;
	size_t k = 0;
	bool warns;
	int rc;

	next = t + rng_exp(s->rng_inc, 1.0 / s->rate);
	if (next < s->horizon && (rc = heap_push(s, next, EV_INCIDENT, 0, 0)))
		return rc;
	s->r->incidents++;
	node = (int32_t)(rng_next(s->rng_inc) % (uint64_t)s->n);
	u = rng_unit(s->rng_inc);
	while (k + 1 < s->tr->nkinds && u >= s->kind_cum[k])
		k++;
	warns = rng_unit(s->rng_inc) < s->tr->kinds[k].warn_fraction;
	if (!warns)
		return on_fail(s, node, t);
	/* an early sign now, the failure itself warn_lead_s later */
	if (s->p->sigma && (rc = on_warning(s, node, t)))
		return rc;
	return heap_push(s, t + s->tr->warn_lead_s, EV_FAIL, (uint32_t)node, 0);
}

static int on_repaired(struct sim *s, int32_t node, double t)
{
	int rc = rng_unit(s->rng_other) < s->tr->repair_fail ? 1 : 0;
	enum policy_return ret;

	if (s->p->sigma)
		ret = policy_after_probe(&s->pol, rc, 0, (size_t)s->npool,
					 (size_t)s->p->spares);
	else
		ret = rc ? POLICY_STAY_DRAINED : POLICY_RETURN_TO_SERVICE;
	switch (ret) {
	case POLICY_RETURN_TO_POOL:
		pool_add(s, node, t);
		break;
	case POLICY_RETURN_TO_SERVICE:
		free_push(s, node);
		break;
	default:
		return to_repair(s, node, t);
	}
	return serve_waiting(s, t);
}

static void on_restart(struct sim *s, long j, uint32_t gen, double t)
{
	struct sim_job *job = &s->jobs[j];
	double rec;
	int b;

	if (job->gen != gen || job->state != JOB_DOWN)
		return;
	job->state = JOB_RUN;
	job->t_run = t;
	job->spares_used = 0; /* the next recovery may hold spares again */
	rec = t - job->t_fail;
	s->r->recoveries++;
	s->r->recovery_sum_s += rec;
	if (rec > s->r->recovery_max_s)
		s->r->recovery_max_s = rec;
	b = rec <= 0.1 ? 0 : (int)(log10(rec / 0.1) * 100.0);
	if (b >= SIM_HIST_BUCKETS)
		b = SIM_HIST_BUCKETS - 1;
	s->r->hist[b]++;
}

double sim_result_quantile(const struct sim_result *r, double q)
{
	uint64_t want, acc = 0;

	if (!r->recoveries)
		return 0.0;
	want = (uint64_t)ceil(q * (double)r->recoveries);
	if (want == 0)
		want = 1;
	for (int b = 0; b < SIM_HIST_BUCKETS; b++) {
		acc += r->hist[b];
		if (acc >= want) {
			double upper = 0.1 * pow(10.0, (b + 1) / 100.0);

			return upper < r->recovery_max_s ? upper
							 : r->recovery_max_s;
		}
	}
	return r->recovery_max_s;
}

/* ---- setup and run ------------------------------------------------------ */

static void sim_free(struct sim *s)
{
	free(s->state);
	free(s->where);
	free(s->failures);
	free(s->pool);
	free(s->pool_since);
	free(s->freel);
	free(s->view);
	free(s->jobs);
	free(s->slots);
	free(s->waitq);
	free(s->heap);
}

static int sim_setup(struct sim *s, char *err, size_t errlen)
{
	const struct sim_trace *tr = s->tr;
	const struct sim_params *p = s->p;
	double total = 0.0, acc = 0.0;
	long spares = p->sigma ? p->spares : 0, node = 0;

	if (p->nodes < 1 || p->nodes > INT32_MAX / 2 || p->job_nodes < 1 ||
	    p->spares < 0 || p->days <= 0.0)
		return sigma_set_err(err, errlen, EINVAL, "bad cluster size");
	s->n = p->nodes;
	s->jsize = p->job_nodes;
	/* both policies run the same jobs: the baseline's spares sit free */
	s->njobs = (p->nodes - p->spares) / p->job_nodes;
	if (s->njobs < 1)
		return sigma_set_err(
		    err, errlen, EINVAL,
		    "%ld nodes with %ld spares cannot hold a %ld-node job",
		    p->nodes, p->spares, p->job_nodes);
	for (size_t k = 0; k < tr->nkinds; k++)
		total += tr->kinds[k].count;
	if (tr->nkinds == 0 || total <= 0.0)
		return sigma_set_err(err, errlen, EINVAL,
				     "the trace has no failure kinds");
	for (size_t k = 0; k < tr->nkinds; k++) {
		acc += tr->kinds[k].count;
		s->kind_cum[k] = acc / total;
	}
	/* per-node rates of the trace, applied to the simulated node count */
	s->rate =
	    total / ((double)tr->nodes * tr->days * 86400.0) * (double)p->nodes;
	s->horizon = p->days * 86400.0;
	rng_seed(s->rng_inc, p->seed);
	rng_seed(s->rng_other, p->seed ^ 0x5eed5eed5eed5eedULL);
	policy_config_init(&s->pol);
	s->pol.proactive = true;

	s->state = calloc((size_t)s->n, sizeof(*s->state));
	s->where = calloc((size_t)s->n, sizeof(*s->where));
	s->failures = calloc((size_t)s->n, sizeof(*s->failures));
	s->pool = calloc((size_t)p->spares + 1, sizeof(*s->pool));
	s->pool_since = calloc((size_t)p->spares + 1, sizeof(*s->pool_since));
	s->view = calloc((size_t)p->spares + 1, sizeof(*s->view));
	s->freel = calloc((size_t)s->n, sizeof(*s->freel));
	s->jobs = calloc((size_t)s->njobs, sizeof(*s->jobs));
	s->slots = calloc((size_t)(s->njobs * s->jsize), sizeof(*s->slots));
	s->waitq = calloc((size_t)s->njobs, sizeof(*s->waitq));
	if (!s->state || !s->where || !s->failures || !s->pool ||
	    !s->pool_since || !s->view || !s->freel || !s->jobs || !s->slots ||
	    !s->waitq)
		return sigma_set_err(err, errlen, ENOMEM,
				     "out of memory for %ld nodes", s->n);
	for (long j = 0; j < s->njobs; j++) {
		for (long k = 0; k < s->jsize; k++, node++) {
			s->slots[j * s->jsize + k] = (int32_t)node;
			s->state[node] = NODE_JOB;
			s->where[node] = (int32_t)(j * s->jsize + k);
		}
	}
	for (long k = 0; k < spares; k++, node++)
		pool_add(s, (int32_t)node, 0.0);
	for (; node < s->n; node++)
		free_push(s, (int32_t)node);
	s->r->jobs = s->njobs;
	s->r->min_pool = s->npool;
	return heap_push(s, rng_exp(s->rng_inc, 1.0 / s->rate), EV_INCIDENT, 0,
			 0);
}

int sim_run(const struct sim_trace *tr, const struct sim_params *p,
	    struct sim_result *r, char *err, size_t errlen)
{
	struct sim s = {.tr = tr, .p = p, .r = r};
	struct timespec a, b;
	int rc;

	memset(r, 0, sizeof(*r));
	rc = sim_setup(&s, err, errlen);
	if (rc)
		goto out_free;
	clock_gettime(CLOCK_MONOTONIC, &a);
	while (s.nheap > 0 && s.heap[0].t < s.horizon) {
		struct sim_ev ev = heap_pop(&s);

		r->events++;
		switch (ev.type) {
		case EV_INCIDENT:
			rc = on_incident(&s, ev.t);
			break;
		case EV_FAIL:
			rc = on_fail(&s, (int32_t)ev.id, ev.t);
			break;
		case EV_REPAIRED:
			rc = on_repaired(&s, (int32_t)ev.id, ev.t);
			break;
		case EV_RESTART:
			on_restart(&s, (long)ev.id, ev.aux, ev.t);
			break;
		}
		if (rc) {
			sigma_set_err(err, errlen, -rc,
				      "simulation stopped: %s", strerror(-rc));
			goto out_free;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	r->wall_s = (double)(b.tv_sec - a.tv_sec) +
		    (double)(b.tv_nsec - a.tv_nsec) * 1e-9;
	for (long j = 0; j < s.njobs; j++) {
		struct sim_job *job = &s.jobs[j];

		if (job->state == JOB_RUN)
			job->committed +=
			    job_kept(tr, s.horizon - job->t_run, true);
		r->useful_node_s += job->committed * (double)s.jsize;
	}
	r->job_node_s = s.horizon * (double)s.njobs * (double)s.jsize;
out_free:
	sim_free(&s);
	return rc;
}
