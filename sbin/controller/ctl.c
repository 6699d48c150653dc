/*
 * ctl.c - sigmad's controller (see ctl.h): its lifecycle and its tick, the
 * records of recoveries and how a new sigmad rebuilds them from the event
 * log, and the small helpers every part uses (comma lists, event log
 * lines, nodes and jobs). The parts of the tick have their own files (see
 * ctl_internal.h).
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

#define CTL_FAILED_END_S 300 /* a failed job's node may drain this late */

const char *const ctl_stop_names[] = {"unknown", "exit", "signal", "running",
				      NULL};

/* ---- comma lists --------------------------------------------------------- */

int ctl_list_add(char *list, size_t size, const char *name)
{
	size_t len = strlen(list), n = strlen(name);

	if (sigma_list_has(list, name))
		return 0;
	if (len + n + 2 > size)
		return -ENAMETOOLONG;
	if (len)
		list[len++] = ',';
	memcpy(list + len, name, n + 1);
	return 0;
}

void ctl_list_del(char *list, const char *name)
{
	char out[SIGMAD_LIST_MAX] = "", tmp[SIGMAD_LIST_MAX];
	char *save = NULL, *tok;

	sigma_strlcpy(tmp, list, sizeof(tmp));
	for (tok = strtok_r(tmp, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save))
		if (strcmp(tok, name))
			ctl_list_add(out, sizeof(out), tok);
	strcpy(list, out);
}

size_t ctl_list_count(const char *list)
{
	size_t n = *list ? 1 : 0;

	for (; *list; list++)
		n += *list == ',';
	return n;
}

/* ---- event log ----------------------------------------------------------- */

void ctl_ev_init(struct evlog_event *ev, const char *type)
{
	memset(ev, 0, sizeof(*ev));
	ev->time = (int64_t)time(NULL);
	sigma_strlcpy(ev->type, type, sizeof(ev->type));
}

int ctl_log(struct ctl *c, const struct evlog_event *ev)
{
	int rc = evlog_append(&c->log, ev);

	if (rc)
		sigma_error("event log %s: cannot append %s: %s", c->log_path,
			    ev->type, strerror(-rc));
	else
		ctl_metrics_count(c, ev);
	return rc;
}

void ctl_ev_from_rec(struct evlog_event *ev, const char *type,
		     const struct ctl_rec *r)
{
	ctl_ev_init(ev, type);
	ev->job = r->job;
	ev->uid = r->uid;
	ev->attempt = r->attempt;
	sigma_strlcpy(ev->node, r->bad, sizeof(ev->node));
}

/* ---- records ------------------------------------------------------------- */

enum ctl_rec_class ctl_rec_class(int verdict)
{
	if (verdict == POLICY_WATCH)
		return REC_WATCH;
	return verdict == POLICY_GIVE_UP || verdict == POLICY_UNPROTECTED
		   ? REC_GIVE_UP
		   : REC_RECOVERY;
}

struct ctl_rec *ctl_rec_find(struct ctl *c, uint32_t job, int attempt,
			     enum ctl_rec_class cls)
{
	for (size_t i = 0; i < c->nrecs; i++) {
		struct ctl_rec *r = &c->recs[i];

		if (r->job == job && r->attempt == attempt &&
		    ctl_rec_class(r->verdict) == cls)
			return r;
	}
	return NULL;
}

struct ctl_rec *ctl_rec_new(struct ctl *c)
{
	if (c->nrecs == c->caprecs) {
		size_t ncap = c->caprecs ? c->caprecs * 2 : 16;
		struct ctl_rec *n = realloc(c->recs, ncap * sizeof(*n));

		if (!n)
			return NULL;
		c->recs = n;
		c->caprecs = ncap;
	}
	memset(&c->recs[c->nrecs], 0, sizeof(c->recs[0]));
	return &c->recs[c->nrecs++];
}

/* A recovery or a give-up was decided for the job's current attempt. */
bool ctl_decided(const struct ctl *c, const struct ctl_job *job)
{
	for (size_t i = 0; i < c->nrecs; i++) {
		const struct ctl_rec *r = &c->recs[i];
		enum ctl_rec_class cls = ctl_rec_class(r->verdict);

		if (r->job != job->id)
			continue;
		if ((cls == REC_RECOVERY &&
		     r->attempt == job->restart_cnt + 2) ||
		    (cls == REC_GIVE_UP && r->attempt == job->restart_cnt + 1))
			return true;
	}
	return false;
}

bool ctl_in_open_rec(const struct ctl *c, const char *node)
{
	for (size_t i = 0; i < c->nrecs; i++)
		if (!c->recs[i].complete &&
		    sigma_list_has(c->recs[i].bad, node))
			return true;
	return false;
}

/* job's entry, or NULL */
static const struct ctl_last *ctl_last_find(const struct ctl *c, uint32_t job)
{
	for (size_t i = 0; i < c->nlast; i++)
		if (c->last[i].job == job)
			return &c->last[i];
	return NULL;
}

const char *ctl_last_nodes(const struct ctl *c, uint32_t job)
{
	const struct ctl_last *l = ctl_last_find(c, job);

	return l ? l->nodes : "";
}

/* remember the nodes of job (in memory; callers log them) */
void ctl_last_set(struct ctl *c, uint32_t job, const char *nodes)
{
	struct ctl_last *n;

	for (size_t i = 0; i < c->nlast; i++)
		if (c->last[i].job == job) {
			sigma_strlcpy(c->last[i].nodes, nodes,
				      sizeof(c->last[i].nodes));
			return;
		}
	n = realloc(c->last, (c->nlast + 1) * sizeof(*n));
	if (!n)
		return;
	c->last = n;
	memset(&n[c->nlast], 0, sizeof(n[0]));
	n[c->nlast].job = job;
	sigma_strlcpy(n[c->nlast++].nodes, nodes, sizeof(n[0].nodes));
}

const char *ctl_in_job_told(const struct ctl *c, uint32_t job)
{
	const struct ctl_last *l = ctl_last_find(c, job);

	return l ? l->in_job : "";
}

/* job's entry, made when there is none (its nodes come at the next "run") */
static struct ctl_last *ctl_last_of(struct ctl *c, uint32_t job)
{
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < c->nlast; i++)
			if (c->last[i].job == job)
				return &c->last[i];
		if (!pass)
			ctl_last_set(c, job, "");
	}
	return NULL;
}

void ctl_in_job_tell(struct ctl *c, uint32_t job, const char *node)
{
	struct ctl_last *l = ctl_last_of(c, job);

	if (l)
		ctl_list_add(l->in_job, sizeof(l->in_job), node);
}

void ctl_report_note(struct ctl *c, int64_t time, uint32_t job, uint32_t uid)
{
	size_t k = 0;

	/* keep the last hour's; when full, the oldest goes */
	for (size_t i = 0; i < c->nreports; i++)
		if (time - c->reports[i].time < 3600)
			c->reports[k++] = c->reports[i];
	c->nreports = k;
	if (c->nreports == CTL_REPORTS_MAX) {
		memmove(&c->reports[0], &c->reports[1],
			(CTL_REPORTS_MAX - 1) * sizeof(c->reports[0]));
		c->nreports--;
	}
	c->reports[c->nreports++] = (struct ctl_report){time, job, uid};
}

int ctl_reports(const struct ctl *c, int64_t now, uint32_t job, uint32_t uid,
		bool by_user)
{
	int n = 0;

	for (size_t i = 0; i < c->nreports; i++)
		if (now - c->reports[i].time < 3600 &&
		    (by_user ? c->reports[i].uid == uid
			     : c->reports[i].job == job))
			n++;
	return n;
}

const char *ctl_slow_nodes(const struct ctl *c, uint32_t job)
{
	const struct ctl_last *l = ctl_last_find(c, job);

	return l ? l->slow : "";
}

void ctl_slow_add(struct ctl *c, uint32_t job, const char *node)
{
	struct ctl_last *l = ctl_last_of(c, job);

	if (l)
		ctl_list_add(l->slow, sizeof(l->slow), node);
}

const char *ctl_drained_nodes(const struct ctl *c, uint32_t job)
{
	const struct ctl_last *l = ctl_last_find(c, job);

	return l ? l->drained : "";
}

void ctl_drained_add(struct ctl *c, uint32_t job, const char *node)
{
	struct ctl_last *l = ctl_last_of(c, job);

	if (l)
		ctl_list_add(l->drained, sizeof(l->drained), node);
}

int ctl_relaunches(const struct ctl *c, uint32_t job)
{
	const struct ctl_last *l = ctl_last_find(c, job);

	return l ? l->relaunches : 0;
}

int ctl_relaunch_newest(const struct ctl *c, uint32_t job)
{
	const struct ctl_last *l = ctl_last_find(c, job);

	return l ? l->launch : 0;
}

void ctl_relaunch_count(struct ctl *c, uint32_t job, int launch)
{
	struct ctl_last *l = ctl_last_of(c, job);

	if (!l)
		return;
	l->relaunches++;
	if (launch > l->launch)
		l->launch = launch;
}

int ctl_restarts_used(const struct ctl *c, const struct ctl_job *job)
{
	return job->restart_cnt + ctl_relaunches(c, job->id);
}

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
		ctl_list_add(r->bad, sizeof(r->bad), ev->node);
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
			ctl_metrics_count(c, ev);
		return rc;
	}
	if (!strcmp(ev->type, "spare_add")) {
		ctl_list_add(c->added, sizeof(c->added), ev->node);
		ctl_list_del(c->removed, ev->node);
	} else if (!strcmp(ev->type, "spare_remove")) {
		ctl_list_add(c->removed, sizeof(c->removed), ev->node);
		ctl_list_del(c->added, ev->node);
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
	ctl_metrics_count(c, ev);
	return 0;
}

/* ---- nodes and jobs ------------------------------------------------------ */

enum sigma_drain_action ctl_drain_decide(const struct ctl_node *n,
					 enum sigma_drain_ask ask, char *why,
					 size_t whylen)
{
	struct sigma_node_now now = {(n->flags & CTL_N_DRAIN) != 0,
				     (n->flags & CTL_N_DOWN) != 0, n->reason};

	return sigma_drain_decide(&now, ask, SIGMA_LEVEL_FULL, false, why,
				  whylen);
}

#define CTL_UNHEALTHY (CTL_N_DOWN | CTL_N_DRAIN | CTL_N_NO_RESPOND | CTL_N_FAIL)

bool ctl_node_healthy(const struct ctl_node *n)
{
	return !(n->flags & CTL_UNHEALTHY);
}

/*
 * Node i runs a sigma job that is running. The node and job lists are
 * loaded one after the other, so a node may still look idle while the job
 * that was just given it already runs: such a node is no spare.
 */
bool ctl_node_in_job(const struct ctl_view *v, size_t i)
{
	for (size_t j = 0; j < v->njobs; j++) {
		const struct ctl_job *job = &v->jobs[j];

		if (job->state != CTL_J_RUNNING)
			continue;
		for (size_t k = 0; k < job->nnodes; k++)
			if (job->nodes[k] >= 0 && (size_t)job->nodes[k] == i)
				return true;
	}
	return false;
}

/*
 * The job ended a short while ago: a node at fault may still be drained by
 * the probe (job epilog, health check), or called not responding by
 * slurmctld (SlurmdTimeout), after the job's end.
 */
bool ctl_job_just_ended(const struct ctl_job *job, int64_t now)
{
	return job->state == CTL_J_ENDED &&
	       now - job->end_time <= CTL_FAILED_END_S;
}

/*
 * The job's batch script failed with the trainer's "requeue me" codes (76: a
 * peer rank died, 79: the trouble follows the hardware) a short while ago:
 * once the node at fault drains, sigmad requeues it.
 */
bool ctl_job_may_come_back(const struct ctl_job *job, int64_t now)
{
	return ctl_job_just_ended(job, now) && job->failed &&
	       (job->exit_code == TRAIN_EXIT_PEER ||
		job->exit_code == TRAIN_EXIT_HARDWARE);
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
