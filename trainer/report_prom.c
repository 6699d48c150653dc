/*
 * report_prom.c - rank 0's progress as a Prometheus textfile for
 * node_exporter's textfile collector (--metrics-textfile,
 * docs/sigma-train.md), rewritten atomically with every progress line:
 * the step, the loss, the job's tokens per second, the step time and its
 * communication share, the guard's actions, and the newest checkpoint step
 * of each tier. Every series is named sigma_train_*, a prefix sigma's node
 * series (sigma_probe_*, sigmad_*) never use, and carries the label
 * slurm_job, so that two jobs' files on one node never clash.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sigma.h"
#include "guard_state.h"
#include "report.h"

/* the job the series are of: SLURM_JOB_ID when it is a job id, else "none" */
static const char *job_label(void)
{
	const char *id = getenv("SLURM_JOB_ID");

	return id && *id && strlen(id) < 24 &&
		       strspn(id, "0123456789_") == strlen(id)
		   ? id
		   : "none";
}

/* the newest step a writer has on disk, -1 none */
static long written_step(struct ckpt_async *w)
{
	struct ckpt_async_stats cs;

	if (!w)
		return -1;
	ckpt_async_stats(w, &cs);
	return cs.writes ? cs.write_step : -1;
}

static void guard_actions(struct sigma_metrics *pm, const struct guard_run *gr)
{
	sigma_metrics_family(pm, "sigma_train_guard_actions_total", "counter",
			     "numerical guardrail actions taken, by action");
	for (int i = 0; i < GUARD_NACTS; i++) {
		/* the counters' names under /guard: action_<name> */
		const char *n = guard_state_name(GUARD_STATE_N - GUARD_NACTS + i);

		sigma_metrics_sample(pm, "sigma_train_guard_actions_total",
				     (double)gr->g.acts[i], "slurm_job",
				     job_label(), "action",
				     n + strlen("action_"), NULL);
	}
}

static void checkpoints(struct sigma_metrics *pm, struct ckpt_async *aw,
			struct ckpt_async *a1)
{
	struct {
		const char *tier;
		long step;
	} t[2] = { { "1", written_step(a1) }, { "2", written_step(aw) } };

	sigma_metrics_family(pm, "sigma_train_checkpoint_step", "gauge",
			     "newest step rank 0 has written, by tier (1 node-local, 2 shared)");
	for (int i = 0; i < 2; i++)
		if (t[i].step >= 0)
			sigma_metrics_sample(pm, "sigma_train_checkpoint_step",
					     (double)t[i].step, "slurm_job",
					     job_label(), "tier", t[i].tier,
					     NULL);
}

void report_textfile(const char *path, const struct report_prom *p,
		     const struct guard_run *gr, struct ckpt_async *aw,
		     struct ckpt_async *a1)
{
	char buf[8192];
	struct sigma_metrics pm;
	int rc;

	sigma_metrics_init(&pm, buf, sizeof(buf));
	sigma_metrics_family(&pm, "sigma_train_step", "gauge",
			     "training steps completed");
	sigma_metrics_sample(&pm, "sigma_train_step", (double)p->step,
			     "slurm_job", job_label(), NULL);
	sigma_metrics_family(&pm, "sigma_train_loss", "gauge",
			     "loss of the last step (cross-entropy plus the weighted load-balancing loss)");
	sigma_metrics_sample(&pm, "sigma_train_loss", p->loss, "slurm_job",
			     job_label(), NULL);
	sigma_metrics_family(&pm, "sigma_train_tokens_per_second", "gauge",
			     "tokens the job trained per second over the last interval");
	sigma_metrics_sample(&pm, "sigma_train_tokens_per_second", p->tokens_s,
			     "slurm_job", job_label(), NULL);
	sigma_metrics_family(&pm, "sigma_train_step_seconds", "gauge",
			     "wall time per step over the last interval");
	sigma_metrics_sample(&pm, "sigma_train_step_seconds", p->step_s,
			     "slurm_job", job_label(), NULL);
	sigma_metrics_family(&pm, "sigma_train_communication_ratio", "gauge",
			     "share of rank 0's step time spent waiting on communication");
	sigma_metrics_sample(&pm, "sigma_train_communication_ratio",
			     p->step_s > 0 ? p->comm_s / p->step_s : 0.0,
			     "slurm_job", job_label(), NULL);
	if (gr)
		guard_actions(&pm, gr);
	checkpoints(&pm, aw, a1);
	rc = sigma_metrics_write(&pm, path);
	if (rc)
		sigma_warn("--metrics-textfile %s: %s", path,
			   rc == -ENOSPC ? "too many samples" : strerror(-rc));
}
