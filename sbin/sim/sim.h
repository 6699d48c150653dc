/*
 * sim.h - sigma-sim: a discrete-event simulator of a cluster losing nodes,
 * driving the same policy core as sigmad (policy.h).
 *
 * A trace describes the failure process (per-node rates by kind, the share
 * of each kind that shows an early warning, the warning's lead time, the
 * fail-slow episodes) and the cluster (nodes, job size, spares, the two
 * checkpoint tiers, the in-job and pool restart paths, detection, requeue
 * and repair times). The simulator replays it under sigma's policy, under
 * sigma without its node-local tier, and under a baseline (plain Slurm
 * requeue: no spares, no early warning, no tier 1, no in-job restart, no
 * fail-slow mitigation), with the same incident stream for all.
 */
#ifndef SIGMA_SIM_H
#define SIGMA_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

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
	long sim_nodes; /* simulated nodes when --nodes is not given (0: nodes) */
	/* tier 1: node-local, replicated to a buddy node (0 interval: none) */
	double tier1_interval_s; /* compute between tier-1 saves */
	double tier1_stall_s;	 /* training stalled per save */
	double tier1_restore_s;	 /* restore from tier 1 */
	double tier1_buddy_loss; /* a failure takes the buddy too: tier 2 */
	/* tier 2: shared storage; ckpt_interval_s, ckpt_cost_s (fixed part) */
	double state_bytes;	   /* the job's model and optimizer state */
	double tier2_write_bytes_s; /* the job's share of storage bandwidth */
	double tier2_read_bytes_s;
	long tier2_async; /* 1: only ckpt_cost_s stalls, the write overlaps */
	/* in-job restart on in-allocation spares (sigma) */
	long inalloc_spares; /* extra nodes each job holds */
	double injob_detect_s;	 /* failure to the launcher acting */
	double injob_relaunch_s; /* relaunch of the step, to its first step */
	double injob_fallback_s; /* no spare left: extra before the requeue */
	/* fail-slow episodes (rate per node as the kinds) */
	double failslow_count;	     /* episodes over the trace period */
	double failslow_comm_share;  /* share of communication episodes */
	double failslow_comm_mean_s; /* mean length (exponential) */
	double failslow_comp_mean_s;
	double failslow_slowdown;   /* step time x this during an episode */
	double failslow_mitigation; /* share of the slowdown the tuner cuts */
	double failslow_detect_s;   /* episode start to the tuner acting */
	/* calibration inputs (sigma-sim --calibration) */
	double step_s;		 /* one training step */
	double launch_s;	 /* launch and communicator setup at scale */
	double slurmd_timeout_s; /* Slurm's SlurmdTimeout */
	double local_read_bytes_s; /* node-local tier read bandwidth */
	size_t nkinds;
	struct sim_kind kinds[SIM_MAX_KINDS];
};

/* A scripted incident (tests): a failure, or a fail-slow episode. */
enum sim_inject_type { SIM_INJECT_FAIL = 0, SIM_INJECT_SLOW };

struct sim_inject {
	double t;
	int32_t node;
	uint8_t type;	/* enum sim_inject_type */
	bool comm;	/* SIM_INJECT_SLOW: a communication episode */
	double dur_s;	/* SIM_INJECT_SLOW: its length */
};

/* What to run: the trace's cluster, scaled. */
struct sim_params {
	long nodes; /* simulated nodes (rates per node kept) */
	double days;
	long job_nodes;
	long spares;
	uint64_t seed;
	bool sigma;    /* sigma's policy, or the baseline */
	bool no_tier1; /* sigma without its node-local tier */
	const struct sim_inject *inject; /* scripted incidents, by time */
	size_t ninject;
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
	uint64_t injob_restarts; /* relaunched on an in-allocation spare */
	uint64_t pool_requeues;	 /* requeued by sigmad (or Slurm) */
	uint64_t fallbacks;	 /* in-job path had no spare: requeued */
	uint64_t buddy_losses;	 /* tier 1 lost: restored from tier 2 */
	uint64_t failslow_episodes; /* that hit a running job */
	double failslow_s;	    /* their length, summed */
	double failslow_lost_node_s; /* progress they cost, node-seconds */
	double rollback_node_s; /* training done but not kept at a stop */
	double down_node_s;	/* jobs' time from failure to running */
	uint64_t policy_calls;	     /* calls into the policy core */
	double policy_s;	     /* wall time inside them */
};

/* ---- the checkpoint tiers (sim_ckpt.c) ----------------------------------- */

enum sim_level { SIM_TIER1 = 0, SIM_TIER2, SIM_FLUSH };

/*
 * A run of a job: segments of compute, each followed by a save; every k-th
 * save also writes tier 2. Without tier 1 a segment is the tier-2
 * interval and k is 1 (the model of the trace files without tier-1 keys).
 */
struct sim_ckpt {
	bool tier1;
	double seg;	  /* compute per segment */
	double seg_stall; /* stall after each segment */
	long k;		  /* segments per tier-2 save */
	double stall2;	  /* the tier-2 save's own stall (tier 1 on) */
	double cycle;	  /* k segments, their stalls and the tier-2 stall */
	double tier2_stall; /* one tier-2 save (a checkpoint on a stop) */
	double restore1, restore2;
};

void sim_ckpt_init(struct sim_ckpt *ck, const struct sim_trace *t,
		   bool tier1);
/* Training kept by a run of e seconds, at the newest save of level. */
double sim_ckpt_kept(const struct sim_ckpt *ck, double e, enum sim_level l);
/* Share of a failure-free run spent training (1 minus the stalls). */
double sim_ckpt_efficiency(const struct sim_ckpt *ck);

/* ---- fail-slow episodes (sim_slow.c) ------------------------------------- */

/*
 * Progress lost (seconds) in the first x seconds of an episode, mitigated
 * by the tuner or not.
 */
double sim_slow_loss(const struct sim_trace *t, double x, bool mitigated);

/* ---- calibration (sim_calib.c) ------------------------------------------- */

/* Print how the testbed's measurements map to the trace's times. */
void sim_calib_print(const struct sim_trace *t, FILE *f);

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
