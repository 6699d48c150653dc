/*
 * sim_job.c - sigma-sim's jobs (sim_internal.h): what a failure, a warning
 * or a fail-slow episode costs a job, and the paths back to running.
 *
 * - in-job: the job's launcher relaunches the step on one of the job's own
 *   in-allocation spares, with no queue (sigma, while a spare is left);
 * - pool: the job is requeued onto spares the policy picks from sigmad's
 *   pool, else onto free nodes, else it waits for repairs (sigma; after
 *   the in-job path found no spare, its fallback costs come first);
 * - baseline: plain Slurm requeue onto free nodes, after its timeouts.
 *
 * A failure rolls the job back to its newest tier-1 save, or to its newest
 * tier-2 save when tier 1 is off or the node's buddy was lost with it.
 */
#include <errno.h>
#include <time.h>

#include "contract.h"
#include "sigma.h"
#include "sim_internal.h"

/* ---- slots --------------------------------------------------------------- */

/* Put node into job j: an empty training slot, else an empty spare slot. */
static void job_fill_slot(struct sim *s, long j, int32_t node)
{
	int32_t *sl = &s->slots[j * s->stride];
	long k = 0;

	if (s->jobs[j].missing == 0)
		k = s->jsize;
	for (; k < s->stride; k++) {
		if (sl[k] >= 0)
			continue;
		sl[k] = node;
		s->state[node] = NODE_JOB;
		s->where[node] = (int32_t)(j * s->stride + k);
		if (k < s->jsize)
			s->jobs[j].missing--;
		else
			s->jobs[j].inalloc_left++;
		return;
	}
}

/* slots job j should fill now: training ones, and spares on a requeue */
static long job_wants(const struct sim *s, long j, bool spares_too)
{
	const struct sim_job *job = &s->jobs[j];

	return job->missing +
	       (spares_too ? s->ninalloc - job->inalloc_left : 0);
}

static void take_from_free(struct sim *s, long j, bool spares_too)
{
	while (job_wants(s, j, spares_too) > 0 && s->nfree > 0) {
		int32_t node = s->freel[s->nfree - 1];

		sim_free_remove(s, node);
		job_fill_slot(s, j, node);
	}
}

static void take_from_pool(struct sim *s, long j,
			   const struct policy_plan *plan)
{
	int32_t nodes[POLICY_MAX_PICK];

	/* indexes shift as nodes leave the pool: resolve them first */
	for (size_t k = 0; k < plan->npicked; k++)
		nodes[k] = s->pool[plan->picked[k]];
	for (size_t k = 0; k < plan->npicked; k++) {
		sim_pool_remove(s, nodes[k]);
		job_fill_slot(s, j, nodes[k]);
		s->jobs[j].spares_used++;
		s->r->spares_used++;
	}
}

/* ---- the policy core, timed ---------------------------------------------- */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
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

static int plan_failure(struct sim *s, const struct policy_job *pj, size_t nbad,
			struct policy_plan *plan)
{
	size_t nv = pool_view(s);
	double t0 = now_s();
	int rc = policy_plan_failure(&s->pol, pj, nbad, s->view, nv, plan);

	s->r->policy_s += now_s() - t0;
	s->r->policy_calls++;
	return rc;
}

static int plan_warning(struct sim *s, const struct policy_job *pj,
			struct policy_plan *plan)
{
	size_t nv = pool_view(s);
	double t0 = now_s();
	int rc = policy_plan_warning(&s->pol, pj, 1, s->view, nv, plan);

	s->r->policy_s += now_s() - t0;
	s->r->policy_calls++;
	return rc;
}

enum policy_return sim_after_probe(struct sim *s, int probe_rc)
{
	double t0 = now_s();
	enum policy_return ret = policy_after_probe(
	    &s->pol, probe_rc, 0, (size_t)s->npool, (size_t)s->p->spares);

	s->r->policy_s += now_s() - t0;
	s->r->policy_calls++;
	return ret;
}

/* ---- job state ----------------------------------------------------------- */

static int job_schedule_restart(struct sim *s, long j, double at)
{
	struct sim_job *job = &s->jobs[j];

	job->state = JOB_DOWN;
	job->gen++;
	return sim_heap_push(s, at, EV_RESTART, (uint32_t)j, job->gen);
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
	int32_t *sl = &s->slots[j * s->stride];

	s->jobs[j].state = JOB_DEAD;
	s->jobs[j].gen++;
	s->r->give_ups++;
	for (long k = 0; k < s->stride; k++) {
		if (sl[k] >= 0)
			sim_free_push(s, sl[k]);
		sl[k] = -1;
	}
	s->jobs[j].inalloc_left = 0;
}

/*
 * The run of job j stops at t: bank what level keeps (SIM_TIER1: the
 * newest tier-1 save, SIM_TIER2: the newest tier-2 save, SIM_FLUSH: all,
 * written to tier 2 on the stop) and note what the next start restores.
 */
static void job_stop(struct sim *s, long j, double t, enum sim_level level)
{
	struct sim_job *job = &s->jobs[j];
	double e = t - job->t_run;
	double k2 = sim_ckpt_kept(&s->ck, e, SIM_TIER2);
	double done = job->committed + sim_ckpt_kept(&s->ck, e, SIM_FLUSH);

	if (k2 > 0.0)
		job->committed2 = job->committed + k2;
	if (level == SIM_TIER2)
		job->committed = job->committed2;
	else
		job->committed += sim_ckpt_kept(&s->ck, e, level);
	if (level == SIM_FLUSH)
		job->committed2 = job->committed;
	s->r->rollback_node_s += (done - job->committed) * (double)s->jsize;
	job->restore_s =
	    s->ck.tier1 && level != SIM_TIER2 ? s->ck.restore1 : s->ck.restore2;
	job->state = JOB_DOWN;
	job->t_fail = t;
	job->gen++;
}

/* Take node out of job j (it failed or was drained). */
static bool job_lose_node(struct sim *s, int32_t node, double t,
			  enum sim_level level)
{
	long slot = s->where[node], j = slot / s->stride;
	struct sim_job *job = &s->jobs[j];
	bool was_running = job->state == JOB_RUN;

	if (was_running)
		job_stop(s, j, t, level);
	s->slots[slot] = -1;
	if (slot % s->stride < s->jsize)
		job->missing++;
	else
		job->inalloc_left--;
	return was_running;
}

/* ---- recovery paths ---------------------------------------------------- */

/* In-job: the launcher swaps a spare of the allocation in and relaunches. */
static int job_relaunch_in_place(struct sim *s, long j, double t)
{
	struct sim_job *job = &s->jobs[j];
	int32_t *sl = &s->slots[j * s->stride];
	long k = s->jsize;

	if (job->restarts >= s->tr->max_restarts) {
		job_give_up(s, j); /* the launcher's budget is spent: exit 1 */
		return 0;
	}
	while (sl[k] < 0)
		k++; /* inalloc_left > 0: there is one */
	job->inalloc_left--;
	job_fill_slot(s, j, sl[k]);
	sl[k] = -1;
	job->restarts++;
	s->r->restarts++;
	s->r->injob_restarts++;
	return job_schedule_restart(s, j,
				    t + s->tr->injob_detect_s +
					s->tr->injob_relaunch_s +
					job->restore_s);
}

/* sigma's requeue: the policy picks spares; the delay before the start */
static int job_requeue_sigma(struct sim *s, long j, bool new_requeue,
			     double *delay)
{
	struct sim_job *job = &s->jobs[j];
	struct policy_job pj;
	struct policy_plan plan;
	int rc;

	policy_job_of(s, j, &pj);
	if (!new_requeue && pj.restarts > 0)
		pj.restarts--; /* the requeue under way was already granted */
	rc = plan_failure(s, &pj, (size_t)job_wants(s, j, new_requeue), &plan);
	if (rc)
		return rc;
	if (plan.verdict == POLICY_GIVE_UP && new_requeue)
		return 1;
	if (plan.verdict == POLICY_REQUEUE)
		take_from_pool(s, j, &plan);
	*delay = s->tr->sigma_detect_s + s->tr->sigma_requeue_s;
	if (job->fallback)
		*delay += s->tr->injob_fallback_s;
	job->fallback = 0;
	return 0;
}

/* Job j lost nodes (slots already empty): requeue it. */
static int job_recover(struct sim *s, long j, double t, bool new_requeue)
{
	struct sim_job *job = &s->jobs[j];
	double delay;
	int rc;

	if (!s->p->sigma && new_requeue &&
	    job->restarts >= s->tr->max_restarts) {
		job_give_up(s, j);
		return 0;
	}
	if (s->p->sigma) {
		rc = job_requeue_sigma(s, j, new_requeue, &delay);
		if (rc < 0)
			return rc;
		if (rc > 0) {
			job_give_up(s, j);
			return 0;
		}
	} else {
		delay = s->tr->baseline_detect_s + s->tr->baseline_requeue_s;
	}
	if (new_requeue) {
		job->restarts++;
		s->r->restarts++;
		s->r->pool_requeues++;
	}
	take_from_free(s, j, new_requeue);
	if (job->missing > 0) {
		job_enqueue_wait(s, j);
		return 0;
	}
	return job_schedule_restart(
	    s, j, t + delay + s->tr->restart_s + job->restore_s);
}

/* Serve waiting jobs, oldest first, from the pool (sigma) and free nodes. */
int sim_serve_waiting(struct sim *s, double t)
{
	while (s->wq_len > 0) {
		long j = s->waitq[s->wq_head];
		struct sim_job *job = &s->jobs[j];

		if (job->state == JOB_WAIT) {
			if (s->p->sigma) {
				struct policy_job pj;
				struct policy_plan plan;

				policy_job_of(s, j, &pj);
				pj.restarts = 0; /* counted when requeued */
				if (!plan_failure(s, &pj,
						  (size_t)job_wants(s, j, true),
						  &plan) &&
				    plan.verdict == POLICY_REQUEUE)
					take_from_pool(s, j, &plan);
			}
			take_from_free(s, j, true);
			if (job->missing > 0)
				return 0;
			if (job_schedule_restart(
				s, j, t + s->tr->restart_s + job->restore_s))
				return -ENOMEM;
		}
		job->queued = 0;
		s->wq_head = (s->wq_head + 1) % s->njobs;
		s->wq_len--;
	}
	return 0;
}

/* ---- incidents on a job's node ------------------------------------------ */

/* A node that holds nothing of the job's state: an idle spare of it. */
static int spare_lost(struct sim *s, int32_t node, double t)
{
	long j = sim_job_of(s, node);

	s->slots[s->where[node]] = -1;
	s->jobs[j].inalloc_left--;
	return sim_to_repair(s, node, t);
}

int sim_on_fail(struct sim *s, int32_t node, double t)
{
	enum sim_level level = SIM_TIER1;
	struct sim_job *job;
	long j;
	bool fresh;
	int rc;

	s->failures[node]++;
	if (sim_is_spare_slot(s, node))
		return spare_lost(s, node, t);
	j = sim_job_of(s, node);
	job = &s->jobs[j];
	s->r->job_failures++;
	if (s->ck.tier1 && job->state == JOB_RUN &&
	    rng_unit(s->rng_other) < s->tr->tier1_buddy_loss) {
		level = SIM_TIER2; /* the replica went down with the node */
		s->r->buddy_losses++;
	}
	fresh = job_lose_node(s, node, t, level);
	rc = sim_to_repair(s, node, t);
	if (rc)
		return rc;
	if (fresh && s->p->sigma && s->ninalloc > 0) {
		if (job->inalloc_left > 0)
			return job_relaunch_in_place(s, j, t);
		job->fallback = 1; /* the launcher exits 76: the pool path */
		s->r->fallbacks++;
	}
	return job_recover(s, j, t, fresh);
}

int sim_on_warning(struct sim *s, int32_t node, double t)
{
	struct policy_job pj;
	struct policy_plan plan;
	long j = sim_job_of(s, node);
	int rc;

	if (sim_is_spare_slot(s, node))
		return spare_lost(s, node, t);
	if (s->jobs[j].state != JOB_RUN) {
		/* the job is already recovering: just keep the node out */
		job_lose_node(s, node, t, SIM_TIER1);
		rc = sim_to_repair(s, node, t);
		return rc ? rc : job_recover(s, j, t, false);
	}
	policy_job_of(s, j, &pj);
	rc = plan_warning(s, &pj, &plan);
	if (rc)
		return rc;
	if (plan.verdict != POLICY_CHECKPOINT) {
		s->r->warnings_watched++;
		return 0;
	}
	/* checkpoint now, stop, restart on the spare: nothing lost */
	s->r->warnings_moved++;
	job_lose_node(s, node, t, SIM_FLUSH);
	s->jobs[j].restarts++;
	s->r->restarts++;
	s->r->pool_requeues++;
	take_from_pool(s, j, &plan);
	rc = sim_to_repair(s, node, t);
	if (rc)
		return rc;
	return job_schedule_restart(
	    s, j,
	    t + s->ck.tier2_stall + s->tr->sigma_requeue_s + s->tr->restart_s +
		s->jobs[j].restore_s);
}

/*
 * A fail-slow episode of dur seconds on node from t. A job runs at the pace
 * of its slowest member: episodes that overlap on one job count once.
 */
void sim_on_slow(struct sim *s, int32_t node, double t, double dur)
{
	struct sim_job *job;
	double end = t + dur, from, loss;

	if (s->state[node] != NODE_JOB || sim_is_spare_slot(s, node))
		return;
	job = &s->jobs[sim_job_of(s, node)];
	if (job->state != JOB_RUN)
		return;
	if (end > s->horizon)
		end = s->horizon;
	from = job->slow_until > t ? job->slow_until - t : 0.0;
	if (end - t <= from)
		return;
	/* sigma's tuner mitigates (sigma and sigma without tier 1) */
	loss = sim_slow_loss(s->tr, end - t, s->p->sigma) -
	       sim_slow_loss(s->tr, from, s->p->sigma);
	s->r->failslow_episodes++;
	s->r->failslow_s += end - t;
	s->r->failslow_lost_node_s += loss * (double)s->jsize;
	if (end > job->slow_until)
		job->slow_until = end;
}
