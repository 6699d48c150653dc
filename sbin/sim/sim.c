/*
 * sim.c - the discrete-event engine of sigma-sim (see sim.h). The
 * checkpoint tiers are in sim_ckpt.c, fail-slow losses in sim_slow.c.
 *
 * Memory is linear in nodes: a few bytes of state per node, the jobs' node
 * slots (at most one per node: a job's training nodes, then its
 * in-allocation spares), a binary heap of pending events (at most a few per
 * node), and a fixed histogram of recovery times. Each event costs
 * O(log events) plus, on a failure, O(spares + job size).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sigma.h"
#include "sim_internal.h"

/* ---- event heap --------------------------------------------------------- */

int sim_heap_push(struct sim *s, double t, uint8_t type, uint32_t id,
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

void sim_pool_add(struct sim *s, int32_t node, double t)
{
	s->state[node] = NODE_POOL;
	s->where[node] = (int32_t)s->npool;
	s->pool[s->npool] = node;
	s->pool_since[s->npool] = (int64_t)t;
	s->npool++;
}

void sim_pool_remove(struct sim *s, int32_t node)
{
	long i = s->where[node], last = --s->npool;

	s->pool[i] = s->pool[last];
	s->pool_since[i] = s->pool_since[last];
	s->where[s->pool[i]] = (int32_t)i;
	if (s->npool < s->r->min_pool)
		s->r->min_pool = s->npool;
}

void sim_free_push(struct sim *s, int32_t node)
{
	s->state[node] = NODE_FREE;
	s->where[node] = (int32_t)s->nfree;
	s->freel[s->nfree++] = node;
}

void sim_free_remove(struct sim *s, int32_t node)
{
	long i = s->where[node], last = --s->nfree;

	s->freel[i] = s->freel[last];
	s->where[s->freel[i]] = (int32_t)i;
}

int sim_to_repair(struct sim *s, int32_t node, double t)
{
	s->state[node] = NODE_REPAIR;
	return sim_heap_push(s, t + rng_exp(s->rng_other, s->tr->repair_s),
			 EV_REPAIRED, (uint32_t)node, 0);
}

/* ---- incidents ---------------------------------------------------------- */

static int on_fail(struct sim *s, int32_t node, double t)
{
	switch (s->state[node]) {
	case NODE_REPAIR:
		return 0;
	case NODE_POOL:
		sim_pool_remove(s, node);
		s->failures[node]++;
		return sim_to_repair(s, node, t);
	case NODE_FREE:
		sim_free_remove(s, node);
		s->failures[node]++;
		return sim_to_repair(s, node, t);
	default:
		return sim_on_fail(s, node, t);
	}
}

static int on_warning(struct sim *s, int32_t node, double t)
{
	switch (s->state[node]) {
	case NODE_REPAIR:
		return 0;
	case NODE_POOL: /* drained: a warned node is no spare */
		sim_pool_remove(s, node);
		return sim_to_repair(s, node, t);
	case NODE_FREE:
		sim_free_remove(s, node);
		return sim_to_repair(s, node, t);
	default:
		return sim_on_warning(s, node, t);
	}
}

/* the next fail-slow episode: a node, a kind, a length */
static int on_slow(struct sim *s, double t)
{
	const struct sim_trace *tr = s->tr;
	double next = t + rng_exp(s->rng_slow, 1.0 / s->rate_slow), mean;
	int32_t node;
	int rc;

	if (next < s->horizon &&
	    (rc = sim_heap_push(s, next, EV_SLOW, 0, 0)))
		return rc;
	node = (int32_t)(rng_next(s->rng_slow) % (uint64_t)s->n);
	mean = rng_unit(s->rng_slow) < tr->failslow_comm_share
		   ? tr->failslow_comm_mean_s
		   : tr->failslow_comp_mean_s;
	sim_on_slow(s, node, t, rng_exp(s->rng_slow, mean));
	return 0;
}

static int on_incident(struct sim *s, double t)
{
	double u, next;
	int32_t node;
	size_t k = 0;
	bool warns;
	int rc;

	next = t + rng_exp(s->rng_inc, 1.0 / s->rate);
	if (next < s->horizon && (rc = sim_heap_push(s, next, EV_INCIDENT, 0, 0)))
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
	return sim_heap_push(s, t + s->tr->warn_lead_s, EV_FAIL, (uint32_t)node, 0);
}

static int on_repaired(struct sim *s, int32_t node, double t)
{
	int rc = rng_unit(s->rng_other) < s->tr->repair_fail ? 1 : 0;
	enum policy_return ret;

	if (s->p->sigma)
		ret = sim_after_probe(s, rc);
	else
		ret = rc ? POLICY_STAY_DRAINED : POLICY_RETURN_TO_SERVICE;
	switch (ret) {
	case POLICY_RETURN_TO_POOL:
		sim_pool_add(s, node, t);
		break;
	case POLICY_RETURN_TO_SERVICE:
		sim_free_push(s, node);
		break;
	default:
		return sim_to_repair(s, node, t);
	}
	return sim_serve_waiting(s, t);
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
	s->r->down_node_s += rec * (double)s->jsize;
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

/* failure and fail-slow rates per node of the trace, on p->nodes nodes */
static int sim_setup_rates(struct sim *s, char *err, size_t errlen)
{
	const struct sim_trace *tr = s->tr;
	double total = 0.0, acc = 0.0;
	double node_s = (double)tr->nodes * tr->days * 86400.0;

	if (tr->nkinds == 0)
		return sigma_set_err(err, errlen, EINVAL,
				     "the trace has no failure kinds");
	for (size_t k = 0; k < tr->nkinds; k++)
		total += tr->kinds[k].count;
	for (size_t k = 0; k < tr->nkinds; k++) {
		acc += tr->kinds[k].count;
		s->kind_cum[k] = total > 0.0 ? acc / total : 1.0;
	}
	s->rate = total / node_s * (double)s->p->nodes;
	s->rate_slow = tr->failslow_count / node_s * (double)s->p->nodes;
	return 0;
}

static int sim_setup_alloc(struct sim *s, char *err, size_t errlen)
{
	size_t nsp = (size_t)s->p->spares + 1;

	s->state = calloc((size_t)s->n, sizeof(*s->state));
	s->where = calloc((size_t)s->n, sizeof(*s->where));
	s->failures = calloc((size_t)s->n, sizeof(*s->failures));
	s->pool = calloc(nsp, sizeof(*s->pool));
	s->pool_since = calloc(nsp, sizeof(*s->pool_since));
	s->view = calloc(nsp, sizeof(*s->view));
	s->freel = calloc((size_t)s->n, sizeof(*s->freel));
	s->jobs = calloc((size_t)s->njobs, sizeof(*s->jobs));
	s->slots = calloc((size_t)(s->njobs * s->stride), sizeof(*s->slots));
	s->waitq = calloc((size_t)s->njobs, sizeof(*s->waitq));
	if (!s->state || !s->where || !s->failures || !s->pool ||
	    !s->pool_since || !s->view || !s->freel || !s->jobs || !s->slots ||
	    !s->waitq)
		return sigma_set_err(err, errlen, ENOMEM,
				     "out of memory for %ld nodes", s->n);
	return 0;
}

/* jobs (training nodes, then in-allocation spares), the pool, the rest */
static void sim_setup_place(struct sim *s)
{
	long spares = s->p->sigma ? s->p->spares : 0, node = 0;

	for (long j = 0; j < s->njobs; j++) {
		for (long k = 0; k < s->stride; k++, node++) {
			s->slots[j * s->stride + k] = (int32_t)node;
			s->state[node] = NODE_JOB;
			s->where[node] = (int32_t)(j * s->stride + k);
		}
		s->jobs[j].inalloc_left = (int)s->ninalloc;
		s->jobs[j].restore_s = s->ck.restore2;
	}
	for (long k = 0; k < spares; k++, node++)
		sim_pool_add(s, (int32_t)node, 0.0);
	for (; node < s->n; node++)
		sim_free_push(s, (int32_t)node);
}

static int sim_setup_events(struct sim *s, char *err, size_t errlen)
{
	const struct sim_params *p = s->p;
	int rc = 0;

	for (size_t i = 0; i < p->ninject && !rc; i++) {
		const struct sim_inject *in = &p->inject[i];

		if (in->node < 0 || in->node >= s->n || in->t < 0.0)
			return sigma_set_err(err, errlen, EINVAL,
					     "scripted incident %zu: bad node or time", i);
		rc = sim_heap_push(s, in->t,
				   in->type == SIM_INJECT_SLOW ? EV_SLOW_INJ
							       : EV_FAIL,
				   (uint32_t)in->node, (uint32_t)i);
	}
	if (!rc && s->rate > 0.0)
		rc = sim_heap_push(s, rng_exp(s->rng_inc, 1.0 / s->rate),
				   EV_INCIDENT, 0, 0);
	if (!rc && s->rate_slow > 0.0)
		rc = sim_heap_push(s, rng_exp(s->rng_slow, 1.0 / s->rate_slow),
				   EV_SLOW, 0, 0);
	return rc ? sigma_set_err(err, errlen, -rc, "out of memory") : 0;
}

static int sim_setup(struct sim *s, char *err, size_t errlen)
{
	const struct sim_trace *tr = s->tr;
	const struct sim_params *p = s->p;
	int rc;

	if (p->nodes < 1 || p->nodes > INT32_MAX / 2 || p->job_nodes < 1 ||
	    p->spares < 0 || p->days <= 0.0)
		return sigma_set_err(err, errlen, EINVAL, "bad cluster size");
	s->n = p->nodes;
	s->jsize = p->job_nodes;
	s->ninalloc = p->sigma ? tr->inalloc_spares : 0;
	s->stride = s->jsize + s->ninalloc;
	/* all policies run the same jobs: spares they do not use sit free */
	s->njobs = (p->nodes - p->spares) / (p->job_nodes + tr->inalloc_spares);
	if (s->njobs < 1)
		return sigma_set_err(
		    err, errlen, EINVAL,
		    "%ld nodes with %ld spares cannot hold a %ld-node job and its %ld in-allocation spares",
		    p->nodes, p->spares, p->job_nodes, tr->inalloc_spares);
	rc = sim_setup_rates(s, err, errlen);
	if (rc)
		return rc;
	sim_ckpt_init(&s->ck, tr, p->sigma && !p->no_tier1);
	s->horizon = p->days * 86400.0;
	rng_seed(s->rng_inc, p->seed);
	rng_seed(s->rng_other, p->seed ^ 0x5eed5eed5eed5eedULL);
	rng_seed(s->rng_slow, p->seed ^ 0x510e510e510e510eULL);
	policy_config_init(&s->pol);
	s->pol.proactive = true;
	rc = sim_setup_alloc(s, err, errlen);
	if (rc)
		return rc;
	sim_setup_place(s);
	s->r->jobs = s->njobs;
	s->r->min_pool = s->npool;
	return sim_setup_events(s, err, errlen);
}

static int sim_dispatch(struct sim *s, const struct sim_ev *ev)
{
	const struct sim_inject *in;

	switch (ev->type) {
	case EV_INCIDENT:
		return on_incident(s, ev->t);
	case EV_FAIL:
		return on_fail(s, (int32_t)ev->id, ev->t);
	case EV_REPAIRED:
		return on_repaired(s, (int32_t)ev->id, ev->t);
	case EV_RESTART:
		on_restart(s, (long)ev->id, ev->aux, ev->t);
		return 0;
	case EV_SLOW:
		return on_slow(s, ev->t);
	case EV_SLOW_INJ:
		in = &s->p->inject[ev->aux];
		sim_on_slow(s, in->node, ev->t, in->dur_s);
		return 0;
	}
	return 0;
}

/* training kept by every job, less what fail-slow episodes cost */
static void sim_account(struct sim *s)
{
	struct sim_result *r = s->r;

	for (long j = 0; j < s->njobs; j++) {
		struct sim_job *job = &s->jobs[j];

		if (job->state == JOB_RUN)
			job->committed += sim_ckpt_kept(
			    &s->ck, s->horizon - job->t_run, SIM_FLUSH);
		else if (job->state != JOB_DEAD)
			r->down_node_s +=
			    (s->horizon - job->t_fail) * (double)s->jsize;
		r->useful_node_s += job->committed * (double)s->jsize;
	}
	r->useful_node_s -= r->failslow_lost_node_s;
	if (r->useful_node_s < 0.0)
		r->useful_node_s = 0.0;
	r->job_node_s = s->horizon * (double)s->njobs * (double)s->jsize;
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
		rc = sim_dispatch(&s, &ev);
		if (rc) {
			sigma_set_err(err, errlen, -rc,
				      "simulation stopped: %s", strerror(-rc));
			goto out_free;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	r->wall_s = (double)(b.tv_sec - a.tv_sec) +
		    (double)(b.tv_nsec - a.tv_nsec) * 1e-9;
	sim_account(&s);
out_free:
	sim_free(&s);
	return rc;
}
