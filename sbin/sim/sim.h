/*
 * sim.h - sigma-sim: a discrete-event simulator of a cluster losing nodes,
 * driving the same policy core as sigmad (policy.h).
 *
 * A trace describes the failure process (per-node rates by kind, the share
 * of each kind that shows an early warning, the warning's lead time) and the
 * cluster (nodes, job size, spares, checkpoint interval and cost, detection,
 * requeue and repair times). The simulator replays it under sigma's policy
 * and under a baseline (plain Slurm requeue: no spares, no early warning),
 * with the same incident stream for both.
 */
#ifndef SIGMA_SIM_H
#define SIGMA_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SIM_MAX_KINDS	 32
#define SIM_NAME_MAX	 64
#define SIM_HIST_BUCKETS 800

struct sim_kind {
	char name[SIM_NAME_MAX];
	double count;	      /* incidents over the trace period */
	double warn_fraction; /* share that shows an early warning */
};

struct sim_trace {
	char name[SIM_NAME_MAX];
	char source[256];
	long nodes;		/* nodes the counts were observed on */
	double days;		/* period the counts were observed over */
	long job_nodes;		/* nodes per job */
	long spares;		/* hot spares (sigma) */
	double ckpt_interval_s; /* compute between checkpoints */
	double ckpt_cost_s;	/* a checkpoint's stall */
	double restart_s;	/* job start plus checkpoint load */
	double warn_lead_s;	/* warning comes this long before the failure */
	double repair_s;	/* mean repair time (exponential) */
	double repair_fail;	/* share of repairs whose probe fails again */
	double sigma_detect_s;	/* failure to sigmad acting */
	double sigma_requeue_s; /* requeue to running (begin_time reset) */
	double baseline_detect_s;  /* failure to Slurm requeueing (timeouts) */
	double baseline_requeue_s; /* requeue to running (cred_expire etc.) */
	long max_restarts;
	long job_spares; /* spares a job may draw (sigma) */
	uint64_t seed;
	size_t nkinds;
	struct sim_kind kinds[SIM_MAX_KINDS];
};

/* What to run: the trace's cluster, scaled. */
struct sim_params {
	long nodes; /* simulated nodes (rates per node kept) */
	double days;
	long job_nodes;
	long spares;
	uint64_t seed;
	bool sigma; /* sigma's policy, or the baseline */
};

struct sim_result {
	uint64_t events;
	double wall_s;
	double useful_node_s; /* node-seconds of kept training */
	double job_node_s;    /* jobs' wall time x nodes */
	uint64_t incidents;
	uint64_t job_failures;
	uint64_t warnings_moved;
	uint64_t warnings_watched;
	uint64_t spares_used;
	uint64_t restarts;
	uint64_t give_ups;
	long jobs;
	long min_pool;
	uint64_t recoveries;
	uint64_t hist[SIM_HIST_BUCKETS]; /* recovery time, log buckets */
	double recovery_max_s;
	double recovery_sum_s;
};

void sim_trace_init(struct sim_trace *t);
/* Read a trace file (key=value, see sigma-sim(1)). 0 or -errno, err says why.
 */
int sim_trace_load(struct sim_trace *t, const char *path, char *err,
		   size_t errlen);
/* Run one simulation. 0 or -errno (-ENOMEM, -EINVAL with err). */
int sim_run(const struct sim_trace *t, const struct sim_params *p,
	    struct sim_result *r, char *err, size_t errlen);
/* Recovery-time quantile (q in [0,1]) from the histogram, in seconds. */
double sim_result_quantile(const struct sim_result *r, double q);

#endif /* SIGMA_SIM_H */
