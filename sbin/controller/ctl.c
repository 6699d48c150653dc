/*
 * ctl.c - sigmad's controller (see ctl.h): its lifecycle, how a new sigmad
 * rebuilds its records from the event log, the log's compaction, and the
 * tick. The parts of the tick have their own files, and so do the records
 * (ctl_rec.c) and the event log's lines and counters (ctl_events.c) that
 * every part uses (see ctl_internal.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "contract.h"
#include "ctl_internal.h"
#include "eventlog.h"
#include "policy.h"
#include "proc.h"
#include "sigma.h"
#include "slurm_api.h"
#include "view.h"

const char *const ctl_stop_names[] = {"unknown", "exit", "signal", "running",
				      NULL};

/* ---- replay ------------------------------------------------------------- */

static int verdict_of(const char *name)
{
	for (int v = POLICY_REQUEUE; v <= POLICY_UNPROTECTED; v++)
		if (!strcmp(policy_verdict_name((enum policy_verdict)v), name))
			return v;
	return -1;
}

/* a "decide" line: the record it makes (or a crash made it twice) */
static int ctl_replay_decide(struct ctl *c, const struct evlog_event *ev)
{
	int v = verdict_of(ev->verdict);
	struct ctl_rec *r;

	if (v < 0)
		return 0;
	r = ctl_rec_find(c, ev->job, ev->attempt, ctl_rec_class(v));
	if (!r && !(r = ctl_rec_new(c)))
		return -ENOMEM;
	r->job = ev->job;
	r->uid = ev->uid;
	r->attempt = ev->attempt;
	r->verdict = v;
	r->warning = !strcmp(ev->kind, "warning");
	if (v == POLICY_WATCH)
		sigma_list_add(r->bad, sizeof(r->bad), ev->node);
	else
		sigma_strlcpy(r->bad, ev->node, sizeof(r->bad));
	sigma_strlcpy(r->spares, ev->spare, sizeof(r->spares));
	sigma_strlcpy(r->what, ev->text, sizeof(r->what));
	r->decided_at = ev->time;
	r->complete = v == POLICY_WATCH;
	return 0;
}

/* a step of a recovery or a give-up: what it has done so far */
static void ctl_replay_step(struct ctl *c, const struct evlog_event *ev)
{
	struct ctl_rec *r;

	r = ctl_rec_find(c, ev->job, ev->attempt,
			 strcmp(ev->type, "give_up") ? REC_RECOVERY
						     : REC_GIVE_UP);
	if (!r && !strcmp(ev->type, "complete"))
		r = ctl_rec_find(c, ev->job, ev->attempt, REC_GIVE_UP);
	if (!r)
		return;
	if (!strcmp(ev->type, "signal")) {
		r->signalled = true;
		r->signalled_at = ev->time;
	} else if (!strcmp(ev->type, "stop")) {
		int k = sigma_parse_enum(ev->kind, ctl_stop_names);

		r->stop = k > 0 ? k : STOP_UNKNOWN;
		r->stop_code = ev->rc;
	} else if (!strcmp(ev->type, "release")) {
		r->released = true;
	} else if (!strcmp(ev->type, "requeue")) {
		r->requeued = true;
	} else if (!strcmp(ev->type, "complete") ||
		   !strcmp(ev->type, "give_up")) {
		r->complete = true;
	}
}

/* Rebuild recoveries and pool changes from the log. */
static int ctl_replay(const struct evlog_event *ev, void *arg)
{
	struct ctl *c = arg;

	/* a compacted log's counters: all it had counted (ctl_log_compact) */
	if (!strcmp(ev->type, "counts")) {
		if (ctl_counts_parse(&c->counts, ev->text))
			sigma_warn("event log: a counts line that does not parse: "
				   "the counters count from the next line");
		return 0;
	}
	if (!strcmp(ev->type, "decide")) {
		int rc = ctl_replay_decide(c, ev);

		if (!rc)
			ctl_count_event(c, ev);
		return rc;
	}
	if (!strcmp(ev->type, "spare_add")) {
		sigma_list_add(c->added, sizeof(c->added), ev->node);
		sigma_list_del(c->removed, ev->node);
	} else if (!strcmp(ev->type, "spare_remove")) {
		sigma_list_add(c->removed, sizeof(c->removed), ev->node);
		sigma_list_del(c->added, ev->node);
	} else if (!strcmp(ev->type, "run")) {
		ctl_last_set(c, ev->job, ev->node);
	} else if (!strcmp(ev->type, "in_job")) {
		ctl_in_job_tell(c, ev->job, ev->node);
	} else if (!strcmp(ev->type, "drain") && ev->job) {
		if (!strncmp(ev->text, "sigma: suspect:", 15))
			ctl_report_note(c, ev->time, ev->job, ev->uid);
		ctl_drained_add(c, ev->job, ev->node);
		ctl_replay_step(c, ev);
	} else if (!strcmp(ev->type, "slow")) {
		ctl_slow_add(c, ev->job, ev->node);
	} else if (!strcmp(ev->type, "relaunch")) {
		ctl_relaunch_count(c, ev->job, ev->launch);
	} else {
		ctl_replay_step(c, ev);
	}
	ctl_count_event(c, ev);
	return 0;
}

/* ---- lifecycle ----------------------------------------------------------- */

int ctl_create(struct ctl **out, const struct sigmad_config *cfg,
	       const char *config_path)
{
	struct ctl *c = calloc(1, sizeof(*c));
	size_t bad = 0;
	int rc;

	if (!c)
		return -ENOMEM;
	c->log.fd = -1;
	c->cfg = *cfg;
	sigma_strlcpy(c->config_path, config_path, sizeof(c->config_path));
	rc = sigmad_config_event_log(cfg, c->log_path, sizeof(c->log_path));
	if (rc)
		goto out_free;
	{
		char err[PATH_MAX + 128];

		rc = sigma_mkdir_owned(cfg->state_dir, 0700, err, sizeof(err));
		if (rc) {
			sigma_error("state directory: %s", err);
			goto out_free;
		}
	}
	rc = evlog_read(c->log_path, ctl_replay, c, &bad);
	if (rc) {
		sigma_error("event log %s: %s", c->log_path,
			    strerror(rc < 0 ? -rc : EIO));
		goto out_free;
	}
	if (bad)
		sigma_warn("event log %s: skipped %zu damaged line(s)",
			   c->log_path, bad);
	rc = evlog_open(&c->log, c->log_path);
	if (rc) {
		sigma_error("event log %s: %s", c->log_path, strerror(-rc));
		goto out_free;
	}
	if (!cfg->spares[0] && !cfg->spare_feature[0])
		sigma_warn(
		    "no sigmad_spares or sigmad_spare_feature: no hot spares, jobs are requeued onto free nodes");
	if (!cfg->probe_command[0])
		sigma_warn(
		    "no sigmad_probe_command: nodes sigma drains stay drained until an admin resumes them");
	*out = c;
	return 0;
out_free:
	ctl_destroy(c);
	return rc;
}

void ctl_destroy(struct ctl *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->tries.n; i++)
		ctl_proc_kill(&c->tries.v[i]->probe);
	ctl_tries_free(&c->tries);
	ctl_suspects_kill(c);
	evlog_close(&c->log);
	ctl_view_free(&c->view);
	free(c->recs);
	free(c->last);
	free(c->metrics_last);
	free(c);
}

int ctl_reload(struct ctl *c, const struct sigmad_config *cfg)
{
	char state_dir[sizeof(c->cfg.state_dir)];

	if (strcmp(cfg->state_dir, c->cfg.state_dir))
		sigma_warn("sigmad_state_dir changed: takes effect on restart");
	memcpy(state_dir, c->cfg.state_dir, sizeof(state_dir));
	c->cfg = *cfg;
	memcpy(c->cfg.state_dir, state_dir, sizeof(state_dir));
	return 0;
}

const struct evlog *ctl_event_log(const struct ctl *c)
{
	return &c->log;
}

/* ---- compaction ------------------------------------------------------------ */

#define CTL_LOG_ARCHIVES 4 /* events.jsonl.1 to .4 */

struct keep_arg {
	const struct ctl *c;
	const struct ctl_view *v;
};

/* a recovery of job is open, or its account still to be written */
static bool ctl_job_has_live_rec(const struct ctl *c, uint32_t job)
{
	for (size_t i = 0; i < c->nrecs; i++)
		if (c->recs[i].job == job &&
		    (!c->recs[i].complete || c->recs[i].verify > 0))
			return true;
	return false;
}

/*
 * What the state replayed at start needs: every event of a job slurmctld
 * still knows or a recovery still holds (a job's events replay into its
 * own records only), the spare pool's changes, and the last hour's
 * suspect drains (the hourly caps). What goes is history, kept in the
 * archives, and counted in the counts line.
 */
static bool ctl_keep(const struct evlog_event *ev, void *arg)
{
	const struct keep_arg *k = arg;

	if (!strcmp(ev->type, "spare_add") || !strcmp(ev->type, "spare_remove"))
		return true;
	if (!strcmp(ev->type, "counts") || !ev->job)
		return false;
	if (ctl_view_job(k->v, ev->job) ||
	    ctl_job_has_live_rec(k->c, ev->job))
		return true;
	return !strcmp(ev->type, "drain") &&
	       !strncmp(ev->text, "sigma: suspect:", 15) &&
	       k->v->now - ev->time < 3600;
}

/*
 * Past sigmad_event_log_max, compact the event log with the look v just
 * taken (it names the jobs slurmctld knows). A failure (a full disk) is
 * logged, and the log goes on as it was: nothing decided is lost.
 */
static void ctl_log_compact(struct ctl *c, const struct ctl_view *v)
{
	long long size = evlog_size(&c->log), after;
	struct keep_arg k = {c, v};
	struct evlog_event tail;
	int rc;

	if (size < 0 || size <= c->cfg.event_log_max)
		return;
	ctl_ev_init(&tail, "counts");
	if (ctl_counts_format(&c->counts, tail.text, sizeof(tail.text)) < 0) {
		sigma_warn("event log: the counters do not fit a line: not "
			   "compacted");
		return;
	}
	rc = evlog_compact(&c->log, ctl_keep, &k, &tail, CTL_LOG_ARCHIVES);
	if (rc) {
		sigma_error("event log %s: not compacted: %s", c->log_path,
			    strerror(-rc));
		return;
	}
	after = evlog_size(&c->log);
	sigma_info("event log %s: compacted from %lld to %lld bytes; the old "
		   "one is %s.1",
		   c->log_path, size, after, c->log_path);
	if (after > c->cfg.event_log_max / 2)
		sigma_warn("event log %s: the state alone takes %lld bytes, "
			   "more than half of sigmad_event_log_max",
			   c->log_path, after);
}

int ctl_tick(struct ctl *c)
{
	struct ctl_view v;
	int rc;

	rc = ctl_slurm_load(&v, c->cfg.reservation, c->cfg.spare_feature,
			    c->cfg.poll_interval_s);
	if (rc)
		return rc;
	ctl_pool_sync(c, &v);
	ctl_detect(c, &v);
	for (size_t i = 0; i < c->nrecs; i++) {
		if (c->recs[i].complete) {
			if (c->recs[i].verify > 0)
				ctl_verify_account(c, &c->recs[i]);
			else if (!c->recs[i].placed)
				ctl_check_placement(c, &v, &c->recs[i]);
			continue;
		}
		ctl_step(c, &v, &c->recs[i]);
	}
	ctl_repair(c, &v);
	ctl_remember_nodes(c, &v);
	ctl_log_compact(c, &v);
	ctl_view_free(&c->view);
	c->view = v;
	ctl_suspects(c);
	ctl_metrics_tick(c, v.now);
	return 0;
}
