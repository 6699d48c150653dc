/*
 * policy.h - the controller's decisions, as a pure module.
 *
 * The policy sees a small view of the cluster (the job hit, its bad nodes,
 * the spares in the pool) and returns a plan; it never talks to Slurm and
 * never reads a clock. Two adapters drive it: sigmad (libslurm) and
 * sigma-sim (a discrete-event simulator), so the decisions that run on a
 * real cluster are the ones measured at scale.
 *
 * Every function is O(spares x spares picked) or better and allocates
 * nothing, so the simulator can call it for each event on 100,000 nodes.
 */
#ifndef SIGMA_POLICY_H
#define SIGMA_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Decision settings (sigma.conf sigmad_* keys, sigma-sim trace keys). */
struct policy_config {
	int64_t cooldown_s;   /* repair: wait this long before the full probe */
	int64_t warn_grace_s; /* warning: time the job gets to checkpoint */
	bool proactive;	      /* act on early warnings at all */
	int probe_retries;    /* probe could not run: retry this many times */
};

/* A sigma job as the policy sees it (from its sigma[...] block and Slurm). */
struct policy_job {
	uint32_t id;
	int restarts;	  /* requeues so far (Slurm's restart count) */
	int max_restarts; /* --sigma-max-restarts */
	int spares;	  /* --sigma-spares: spares held for one recovery */
	int spares_used;  /* spares already given to the recovery under way */
	int on_warning;	  /* enum sigma_on_warning (--sigma-on-warning) */
};

/* One node of the spare pool. */
struct policy_spare {
	uint32_t failures; /* times this node failed before (history) */
	int64_t since;	   /* when it joined the pool (seconds) */
	bool excluded;	   /* must not go to this job (failed under it) */
};

enum policy_verdict {
	POLICY_REQUEUE = 0, /* requeue at once, onto the spares picked */
	POLICY_CHECKPOINT,  /* warning: signal, wait, then requeue */
	POLICY_WATCH,	    /* warning: drain only, let the job run on */
	POLICY_GIVE_UP,	    /* restarts exhausted: leave the job ended */
	POLICY_DRAIN_ONLY,  /* no job on the node: drain it */
	POLICY_UNPROTECTED, /* Slurm cannot requeue the job: drain, say so */
};

#define POLICY_MAX_PICK 64

struct policy_plan {
	enum policy_verdict verdict;
	int attempt;	/* attempt number the job restarts as (first run = 1) */
	size_t npicked; /* spares picked, <= bad nodes */
	size_t picked[POLICY_MAX_PICK]; /* indexes into the spares array */
	const char *why; /* static text for logs and the AdminComment */
};

/* What to do with a node after its repair probe. */
enum policy_return {
	POLICY_RETURN_TO_POOL = 0, /* healthy, the pool is short: reserve it */
	POLICY_RETURN_TO_SERVICE,  /* healthy, the pool is full: resume it */
	POLICY_STAY_DRAINED,	   /* failing or warning: keep it out */
	POLICY_PROBE_AGAIN,	   /* probe could not run: retry later */
};

/* Defaults shared by sigmad and sigma-sim. */
void policy_config_init(struct policy_config *cfg);

/*
 * Spare choice: the usable (not excluded) spare with the fewest past
 * failures, then the longest in the pool, then the lowest index. taken marks
 * spares already picked in this round (may be NULL). Returns the index, or
 * -1 when none is usable.
 */
long policy_pick_spare(const struct policy_spare *spares, size_t nspares,
		       const bool *taken);

/*
 * nbad nodes of job failed (one requeue covers them all). job NULL: the
 * nodes ran no sigma job. Fills plan; returns 0 or -EINVAL.
 */
int policy_plan_failure(const struct policy_config *cfg,
			const struct policy_job *job, size_t nbad,
			const struct policy_spare *spares, size_t nspares,
			struct policy_plan *plan);

/*
 * nbad nodes of job gave an early warning. The job is moved only when it
 * has restarts left and a spare can take each warned node; otherwise the
 * nodes are drained and the job runs on (a later failure takes the failure
 * path).
 */
int policy_plan_warning(const struct policy_config *cfg,
			const struct policy_job *job, size_t nbad,
			const struct policy_spare *spares, size_t nspares,
			struct policy_plan *plan);

/*
 * A job was asked to checkpoint at signalled_at: requeue it now? Yes once it
 * stopped on its own, or when the grace period is over.
 */
bool policy_warning_move_due(const struct policy_config *cfg,
			     int64_t signalled_at, int64_t now,
			     bool job_still_running);

/* A node drained by sigma at drained_at: is its repair probe due? */
bool policy_repair_due(const struct policy_config *cfg, int64_t drained_at,
		       int64_t now);

/*
 * Result of the repair probe (sigma-probe exit code: 0 healthy, 1 failing,
 * 2 warning, 3 could not run) and pool occupancy: where the node goes.
 * tries counts probes that could not run so far.
 */
enum policy_return policy_after_probe(const struct policy_config *cfg,
				      int probe_rc, int tries, size_t pool_size,
				      size_t pool_target);

const char *policy_verdict_name(enum policy_verdict v);
const char *policy_return_name(enum policy_return r);

#endif /* SIGMA_POLICY_H */
