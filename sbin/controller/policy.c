/*
 * policy.c - the controller's decisions (see policy.h). Pure: no Slurm, no
 * clock, no allocation, no I/O.
 */
#include <errno.h>

#include "contract.h"
#include "policy.h"

void policy_config_init(struct policy_config *cfg)
{
	cfg->cooldown_s = 600;
	cfg->warn_grace_s = 300;
	cfg->proactive = true;
	cfg->probe_retries = 3;
}

long policy_pick_spare(const struct policy_spare *spares, size_t nspares,
		       const bool *taken)
{
	long best = -1;

	for (size_t i = 0; i < nspares; i++) {
		const struct policy_spare *s = &spares[i];

		if (s->excluded || (taken && taken[i]))
			continue;
		if (best < 0) {
			best = (long)i;
			continue;
		}
		const struct policy_spare *b = &spares[best];
		/* fewest failures, then longest in the pool; ties keep the
		 * lower index */
		if (s->failures < b->failures ||
		    (s->failures == b->failures && s->since < b->since))
			best = (long)i;
	}
	return best;
}

static bool policy_picked(const struct policy_plan *plan, size_t i)
{
	for (size_t k = 0; k < plan->npicked; k++)
		if (plan->picked[k] == i)
			return true;
	return false;
}

/*
 * Pick up to want spares into plan, best first (policy_pick_spare's order).
 * No allocation: each round scans the pool once, skipping spares already
 * picked; rounds are bounded by POLICY_MAX_PICK.
 */
static size_t policy_pick_many(const struct policy_spare *spares,
			       size_t nspares, size_t want,
			       struct policy_plan *plan)
{
	plan->npicked = 0;
	while (plan->npicked < want && plan->npicked < POLICY_MAX_PICK) {
		long best = -1;

		for (size_t i = 0; i < nspares; i++) {
			const struct policy_spare *s = &spares[i], *b;

			if (s->excluded || policy_picked(plan, i))
				continue;
			if (best < 0) {
				best = (long)i;
				continue;
			}
			b = &spares[best];
			if (s->failures < b->failures ||
			    (s->failures == b->failures && s->since < b->since))
				best = (long)i;
		}
		if (best < 0)
			break;
		plan->picked[plan->npicked++] = (size_t)best;
	}
	return plan->npicked;
}

/* Spares job may still draw, bounded by the bad nodes to replace. */
static size_t policy_allowance(const struct policy_job *job, size_t nbad)
{
	int left = job->spares - job->spares_used;

	if (left <= 0)
		return 0;
	return (size_t)left < nbad ? (size_t)left : nbad;
}

static void policy_plan_reset(struct policy_plan *plan)
{
	plan->verdict = POLICY_DRAIN_ONLY;
	plan->attempt = 0;
	plan->npicked = 0;
	plan->why = "";
}

int policy_plan_failure(const struct policy_config *cfg,
			const struct policy_job *job, size_t nbad,
			const struct policy_spare *spares, size_t nspares,
			struct policy_plan *plan)
{
	if (!cfg || !plan || nbad == 0 || (nspares && !spares))
		return -EINVAL;
	policy_plan_reset(plan);
	if (!job) {
		plan->why = "no sigma job on the node";
		return 0;
	}
	plan->attempt = job->restarts + 2;
	if (job->restarts >= job->max_restarts) {
		plan->verdict = POLICY_GIVE_UP;
		plan->attempt = job->restarts + 1;
		plan->why = "max_restarts reached";
		return 0;
	}
	plan->verdict = POLICY_REQUEUE;
	policy_pick_many(spares, nspares, policy_allowance(job, nbad), plan);
	if (plan->npicked == nbad)
		plan->why = "requeued onto spares";
	else if (job->spares - job->spares_used <= 0)
		plan->why = "requeued, no spares granted to the job";
	else
		plan->why = "requeued, not enough spares in the pool";
	return 0;
}

int policy_plan_warning(const struct policy_config *cfg,
			const struct policy_job *job, size_t nbad,
			const struct policy_spare *spares, size_t nspares,
			struct policy_plan *plan)
{
	if (!cfg || !plan || nbad == 0 || (nspares && !spares))
		return -EINVAL;
	policy_plan_reset(plan);
	if (!job) {
		plan->why = "no sigma job on the node";
		return 0;
	}
	plan->attempt = job->restarts + 2;
	if (!cfg->proactive) {
		plan->verdict = POLICY_WATCH;
		plan->why = "proactive moves disabled";
		return 0;
	}
	if (job->on_warning != SIGMA_WARN_CHECKPOINT) {
		/* a job that has not said it handles SIGUSR1 would die of it */
		plan->verdict = POLICY_WATCH;
		plan->why = job->on_warning == SIGMA_WARN_IGNORE
				? "--sigma-on-warning=ignore: job left running"
				: "--sigma-on-warning=drain-after: job left "
				  "running, the node drains after it";
		return 0;
	}
	if (job->restarts >= job->max_restarts) {
		plan->verdict = POLICY_WATCH;
		plan->why = "max_restarts reached, job left running";
		return 0;
	}
	if (nbad > POLICY_MAX_PICK ||
	    policy_pick_many(spares, nspares, policy_allowance(job, nbad),
			     plan) < nbad) {
		/* moving without a spare would stop a healthy run to wait */
		plan->npicked = 0;
		plan->verdict = POLICY_WATCH;
		plan->why = "no spare for every warned node, job left running";
		return 0;
	}
	plan->verdict = POLICY_CHECKPOINT;
	plan->why = "checkpoint and move before the node fails";
	return 0;
}

bool policy_warning_move_due(const struct policy_config *cfg,
			     int64_t signalled_at, int64_t now,
			     bool job_still_running)
{
	if (!job_still_running)
		return true;
	return now - signalled_at >= cfg->warn_grace_s;
}

bool policy_repair_due(const struct policy_config *cfg, int64_t drained_at,
		       int64_t now)
{
	return now - drained_at >= cfg->cooldown_s;
}

enum policy_return policy_after_probe(const struct policy_config *cfg,
				      int probe_rc, int tries, size_t pool_size,
				      size_t pool_target)
{
	switch (probe_rc) {
	case SIGMA_PROBE_EXIT_OK:
		return pool_size < pool_target ? POLICY_RETURN_TO_POOL
					       : POLICY_RETURN_TO_SERVICE;
	case SIGMA_PROBE_EXIT_FAIL:
	case SIGMA_PROBE_EXIT_WARN:
		return POLICY_STAY_DRAINED;
	case SIGMA_PROBE_EXIT_UNJUDGED:
		return POLICY_PROBE_AGAIN; /* busy or full: not the node's */
	default:
		/* the probe could not judge: try again, then give up on it */
		return tries < cfg->probe_retries ? POLICY_PROBE_AGAIN
						  : POLICY_STAY_DRAINED;
	}
}

const char *policy_verdict_name(enum policy_verdict v)
{
	static const char *const names[] = {
	    [POLICY_REQUEUE] = "requeue",
	    [POLICY_CHECKPOINT] = "checkpoint",
	    [POLICY_WATCH] = "watch",
	    [POLICY_GIVE_UP] = "give_up",
	    [POLICY_DRAIN_ONLY] = "drain_only",
	    [POLICY_UNPROTECTED] = "unprotected",
	};

	return (unsigned)v < sizeof(names) / sizeof(names[0]) ? names[v] : "?";
}

const char *policy_return_name(enum policy_return r)
{
	static const char *const names[] = {
	    [POLICY_RETURN_TO_POOL] = "to_pool",
	    [POLICY_RETURN_TO_SERVICE] = "to_service",
	    [POLICY_STAY_DRAINED] = "stay_drained",
	    [POLICY_PROBE_AGAIN] = "probe_again",
	};

	return (unsigned)r < sizeof(names) / sizeof(names[0]) ? names[r] : "?";
}
