/*
 * ctl_metrics.c - sigmad's metrics, a node_exporter textfile in the
 * Prometheus text format (lib/metrics.c writes it), in
 * sigmad_metrics_dir/sigmad.prom.
 *
 * The counters are a function of the event log (ctl_events.c counts each
 * event once, as it is appended and when a new sigmad replays the log, so
 * they survive a restart and never count a step twice). The gauges are the
 * latest look at the cluster. The file is written after a tick that
 * changed it, and at least every sigmad_metrics_interval seconds (its
 * mtime then tells a scrape that sigmad is alive).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract.h"
#include "ctl_internal.h"
#include "policy.h"
#include "sigma.h"

#define CTL_METRICS_FILE "sigmad.prom"

static const char *const drain_classes[CTL_DRAIN_CLASSES] = {
    "failure", "warning", "admin"};

static void metrics_counters(const struct ctl *c, struct sigma_metrics *m)
{
	const struct ctl_counts *k = &c->counts;
	char le[32];

	sigma_metrics_family(
	    m, "sigma_recoveries_total", "counter",
	    "recoveries sigmad decided, by what it saw and what it did");
	for (int w = 0; w < 2; w++)
		for (int v = 0; v < CTL_VERDICTS; v++)
			sigma_metrics_sample(
			    m, "sigma_recoveries_total",
			    (double)k->recoveries[w][v], "kind",
			    w ? "warning" : "failure", "verdict",
			    policy_verdict_name((enum policy_verdict)v), NULL);
	sigma_metrics_family(m, "sigma_recovery_duration_seconds", "histogram",
			     "from a recovery's decision to its account");
	for (int i = 0; i < CTL_DURATION_BUCKETS; i++) {
		snprintf(le, sizeof(le), "%g", ctl_duration_bounds[i]);
		sigma_metrics_sample(m,
				     "sigma_recovery_duration_seconds_bucket",
				     (double)k->duration_le[i], "le", le, NULL);
	}
	sigma_metrics_sample(m, "sigma_recovery_duration_seconds_bucket",
			     (double)k->duration_count, "le", "+Inf", NULL);
	sigma_metrics_sample(m, "sigma_recovery_duration_seconds_sum",
			     k->duration_sum, NULL);
	sigma_metrics_sample(m, "sigma_recovery_duration_seconds_count",
			     (double)k->duration_count, NULL);
	sigma_metrics_family(m, "sigma_drains_total", "counter",
			     "nodes drained, by reason class");
	for (int i = 0; i < CTL_DRAIN_CLASSES; i++)
		sigma_metrics_sample(m, "sigma_drains_total",
				     (double)k->drains[i], "class",
				     drain_classes[i], NULL);
}

/* spares in the pool and in use, and the pool's size target */
static void metrics_spares(struct ctl *c, struct sigma_metrics *m)
{
	char members[SIGMAD_LIST_MAX], pool[SIGMAD_LIST_MAX];
	const struct ctl_view *v = &c->view;
	size_t in_use = 0;

	ctl_members(c, v, members);
	ctl_pool_now(v, pool, sizeof(pool));
	for (size_t i = 0; i < v->nnodes; i++)
		if (sigma_list_has(members, v->nodes[i].name) &&
		    ctl_node_in_job(v, i))
			in_use++;
	sigma_metrics_family(m, "sigma_spares", "gauge",
			     "hot spares: idle in the pool, or running a job");
	sigma_metrics_sample(m, "sigma_spares", (double)sigma_list_count(pool),
			     "state", "pool", NULL);
	sigma_metrics_sample(m, "sigma_spares", (double)in_use, "state",
			     "in_use", NULL);
	sigma_metrics_family(m, "sigma_spare_members", "gauge",
			     "nodes configured or added as spares");
	sigma_metrics_sample(m, "sigma_spare_members",
			     (double)sigma_list_count(members), NULL);
}

/* managed jobs by state, and each one's restarts left */
static void metrics_jobs(const struct ctl *c, struct sigma_metrics *m)
{
	const struct ctl_view *v = &c->view;
	size_t n[2] = {0, 0};
	struct sigma_block opts;
	char id[16];

	for (size_t j = 0; j < v->njobs; j++)
		if (v->jobs[j].state != CTL_J_ENDED)
			n[v->jobs[j].state == CTL_J_RUNNING]++;
	sigma_metrics_family(m, "sigma_managed_jobs", "gauge",
			     "sigma jobs pending or running");
	sigma_metrics_sample(m, "sigma_managed_jobs", (double)n[0], "state",
			     "pending", NULL);
	sigma_metrics_sample(m, "sigma_managed_jobs", (double)n[1], "state",
			     "running", NULL);
	sigma_metrics_family(m, "sigma_job_restarts_left", "gauge",
			     "restarts a managed job has left");
	for (size_t j = 0; j < v->njobs; j++) {
		const struct ctl_job *job = &v->jobs[j];
		int left;

		if (job->state == CTL_J_ENDED ||
		    sigma_block_parse(job->comment, &opts, NULL))
			continue;
		left = ctl_max_restarts(c, &opts) - ctl_restarts_used(c, job);
		snprintf(id, sizeof(id), "%u", job->id);
		sigma_metrics_sample(m, "sigma_job_restarts_left",
				     left < 0 ? 0 : left, "job", id, NULL);
	}
}

static void metrics_repair(const struct ctl *c, struct sigma_metrics *m)
{
	const struct ctl_view *v = &c->view;
	size_t n = 0;

	for (size_t i = 0; i < v->nnodes; i++) {
		enum sigma_reason k =
		    sigma_reason_parse(v->nodes[i].reason, NULL, NULL);

		if ((v->nodes[i].flags & CTL_N_DRAIN) &&
		    k != SIGMA_REASON_NONE && k != SIGMA_REASON_ADMIN)
			n++;
	}
	sigma_metrics_family(m, "sigma_nodes_in_repair", "gauge",
			     "nodes drained by sigma, waiting to return");
	sigma_metrics_sample(m, "sigma_nodes_in_repair", (double)n, NULL);
}

int ctl_metrics_format(struct ctl *c, char *buf, size_t size)
{
	struct sigma_metrics m;

	sigma_metrics_init(&m, buf, size);
	metrics_spares(c, &m);
	metrics_jobs(c, &m);
	metrics_repair(c, &m);
	metrics_counters(c, &m);
	return sigma_metrics_end(&m);
}

void ctl_metrics_tick(struct ctl *c, int64_t now)
{
	static char buf[1 << 16];
	char path[PATH_MAX + 32];
	int n, rc;

	if (!c->cfg.metrics_dir[0])
		return;
	n = ctl_metrics_format(c, buf, sizeof(buf));
	if (n < 0) {
		sigma_error("metrics: more than %zu bytes", sizeof(buf));
		return;
	}
	if (c->metrics_last && c->metrics_len == (size_t)n &&
	    !memcmp(c->metrics_last, buf, (size_t)n) &&
	    now - c->metrics_written < c->cfg.metrics_interval_s)
		return;
	snprintf(path, sizeof(path), "%s/" CTL_METRICS_FILE,
		 c->cfg.metrics_dir);
	rc = sigma_file_write_atomic(path, buf, (size_t)n, 0644);
	if (rc) {
		if (c->metrics_written >= 0)
			sigma_warn("metrics %s: %s", path, strerror(-rc));
		c->metrics_written = -1; /* logged once until it works again */
		return;
	}
	free(c->metrics_last);
	c->metrics_last = malloc((size_t)n + 1);
	if (c->metrics_last)
		memcpy(c->metrics_last, buf, (size_t)n + 1);
	c->metrics_len = (size_t)n;
	c->metrics_written = now;
}
