/*
 * sim_calib.c - sigma-sim --calibration: how the recovery times sigma
 * measured on its testbed (bench/recovery, bench/restart-paths; one 2-core
 * machine, 4 training nodes) map to the times a trace uses at scale.
 *
 * Each rule keeps the measured fixed part and scales only what grows with
 * the cluster or the model, from the trace's calibration inputs: step_s,
 * launch_s, slurmd_timeout_s, state_bytes / job_nodes and
 * local_read_bytes_s. With the testbed's inputs (step 0.4 s, no launch
 * term, SlurmdTimeout 15 s, a tiny state) every rule gives the testbed's
 * figure back.
 */
#include <stddef.h>
#include <stdio.h>

#include "sim.h"

struct calib_rule {
	const char *key;
	size_t off; /* the trace's value */
	const char *measured;
	const char *rule;
	double (*at_scale)(const struct sim_trace *t);
};

static double c_injob_detect(const struct sim_trace *t)
{
	double watch = 5.0 * t->step_s; /* the launcher's stall watch */

	return (watch > 2.0 ? watch : 2.0) + 2.0 + 1.0 + 1.2;
}

static double c_injob_relaunch(const struct sim_trace *t)
{
	return 0.1 + t->launch_s;
}

static double c_tier1_restore(const struct sim_trace *t)
{
	return 0.4 +
	       t->state_bytes / (double)t->job_nodes / t->local_read_bytes_s;
}

static double c_sigma_detect(const struct sim_trace *t)
{
	return t->slurmd_timeout_s - 0.1;
}

static double c_sigma_requeue(const struct sim_trace *t)
{
	(void)t;
	return 5.0;
}

static double c_restart(const struct sim_trace *t)
{
	return 7.0 + t->launch_s;
}

static double c_injob_fallback(const struct sim_trace *t)
{
	return 10.6 + t->slurmd_timeout_s;
}

#define CR(k, m, r, f)                                                         \
	{                                                                      \
#k, offsetof(struct sim_trace, k), m, r, f                     \
	}

static const struct calib_rule calib_rules[] = {
    CR(injob_detect_s, "6.2 (node crash)",
       "max(2, 5 x step_s) + 2 + 1 + 1.2: stall watch, slurmd ping, end",
       c_injob_detect),
    CR(injob_relaunch_s, "0.1", "0.1 + launch_s", c_injob_relaunch),
    CR(tier1_restore_s, "0.4-0.9",
       "0.4 + state_bytes / job_nodes / local_read_bytes_s", c_tier1_restore),
    CR(sigma_detect_s, "14.9 (SlurmdTimeout 15)",
       "slurmd_timeout_s - 0.1: a crash is seen when Slurm calls it",
       c_sigma_detect),
    CR(sigma_requeue_s, "2-5", "5 (the range's top; O(spares))",
       c_sigma_requeue),
    CR(restart_s, "start 5-7", "7 + launch_s", c_restart),
    CR(injob_fallback_s, "53.2 total",
       "10.6 + slurmd_timeout_s: 53.2 less the pool path's 27.6, the wait "
       "for Slurm to end the allocation",
       c_injob_fallback),
};

void sim_calib_print(const struct sim_trace *t, FILE *f)
{
	size_t n = sizeof(calib_rules) / sizeof(calib_rules[0]);

	fprintf(f,
		"calibration of trace %s: step_s %g, launch_s %g, "
		"slurmd_timeout_s %g, state %.3g bytes over %ld nodes, "
		"local read %.3g bytes/s\n",
		t->name, t->step_s, t->launch_s, t->slurmd_timeout_s,
		t->state_bytes, t->job_nodes, t->local_read_bytes_s);
	fprintf(f, "%-18s %-24s %10s %10s  %s\n", "key", "testbed (s)",
		"rule (s)", "trace (s)", "rule");
	for (size_t i = 0; i < n; i++) {
		const struct calib_rule *c = &calib_rules[i];
		double v = *(const double *)((const char *)t + c->off);
		double want = c->at_scale(t);
		double d = v - want;

		fprintf(f, "%-18s %-24s %10.1f %10.1f%s %s\n", c->key,
			c->measured, want, v,
			d > 0.05 || d < -0.05 ? " *" : "  ", c->rule);
	}
	fprintf(f,
		"testbed totals: in-job node crash 6.7 s, pool requeue 21.8 s "
		"(the model: %.1f s at the testbed's inputs, conservative), "
		"in-job fallback 53.2 s; * marks a trace value that departs "
		"from its rule\n",
		14.9 + 5.0 + 7.0 + 0.7);
}
