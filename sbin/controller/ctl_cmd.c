/*
 * ctl_cmd.c - the commands of sigmactl that sigmad's server hands the
 * controller (see ctl.h): status and spares read the latest look at the
 * cluster; spares add and remove, drain and resume change it, and are
 * logged with the uid that asked. status and spares reply one line of JSON,
 * the others a line of text; errors begin with "error: ".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "contract.h"
#include "ctl_internal.h"
#include "policy.h"
#include "sigma.h"
#include "slurm_api.h"

/* ---- what sigmad sees ---------------------------------------------------- */

/*
 * status and spares answer one JSON object on one line, times in epoch
 * seconds: sigmactl prints it for people in their own time zone, or as it
 * is with --json (the schema is sigmactl(8)'s).
 */

static const char *job_state_name(const struct ctl_job *j)
{
	static const char *const names[] = {"PENDING", "RUNNING", "ENDED"};

	return names[j->state];
}

/* a comma list as a JSON array of names */
static json_t *ctl_json_list(const char *list)
{
	json_t *a = json_array();
	const char *p = list;

	while (a && p && *p) {
		size_t n = strcspn(p, ",");

		if (n && json_array_append_new(a, json_stringn(p, n))) {
			json_decref(a);
			return NULL;
		}
		p += n + (p[n] == ',');
	}
	return a;
}

/* sigma's drained nodes: in repair, or (admin) those an admin took out */
static json_t *ctl_status_nodes(const struct ctl_view *v, bool admin)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < v->nnodes; i++) {
		const struct ctl_node *nd = &v->nodes[i];
		enum sigma_reason k =
		    sigma_reason_parse(nd->reason, NULL, NULL);

		if (!(nd->flags & CTL_N_DRAIN) || k == SIGMA_REASON_NONE ||
		    (k == SIGMA_REASON_ADMIN) != admin)
			continue;
		json_array_append_new(
		    a,
		    json_pack("{s:s, s:s, s:I, s:s}", "node", nd->name, "state",
			      (nd->flags & CTL_N_IDLE) ? "drained" : "draining",
			      "since", (json_int_t)nd->reason_time, "reason",
			      nd->reason));
	}
	return a;
}

/* restarts the job has left, or -1 when its block does not parse */
static int ctl_restarts_left(const struct ctl *c, const struct ctl_job *job)
{
	struct sigma_block opts;
	int left;

	if (sigma_block_parse(job->comment, &opts, NULL))
		return -1;
	left = ctl_max_restarts(c, &opts) - ctl_restarts_used(c, job);
	return left < 0 ? 0 : left;
}

/* the running and pending jobs sigma manages (all, or uid's) */
static json_t *ctl_status_jobs(const struct ctl *c, uid_t uid, bool all)
{
	const struct ctl_view *v = &c->view;
	json_t *a = json_array();

	for (size_t j = 0; a && j < v->njobs; j++) {
		const struct ctl_job *job = &v->jobs[j];
		json_t *nodes = json_array();

		if (job->state == CTL_J_ENDED || (!all && job->uid != uid)) {
			json_decref(nodes);
			continue;
		}
		for (size_t k = 0; nodes && k < job->nnodes; k++)
			json_array_append_new(
			    nodes, json_string(v->nodes[job->nodes[k]].name));
		json_array_append_new(
		    a,
		    json_pack("{s:I, s:I, s:s, s:i, s:i, s:o*}", "job",
			      (json_int_t)job->id, "uid", (json_int_t)job->uid,
			      "state", job_state_name(job), "restarts",
			      job->restart_cnt, "restarts_left",
			      ctl_restarts_left(c, job), "nodes", nodes));
	}
	return a;
}

/* the recoveries still open (all, or those of uid's jobs) */
static json_t *ctl_status_recs(const struct ctl *c, uid_t uid, bool all)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < c->nrecs; i++) {
		const struct ctl_rec *r = &c->recs[i];

		if (r->complete || (!all && r->uid != uid))
			continue;
		json_array_append_new(
		    a, json_pack(
			   "{s:I, s:i, s:s, s:s, s:o*, s:o*, s:I}", "job",
			   (json_int_t)r->job, "attempt", r->attempt, "verdict",
			   policy_verdict_name((enum policy_verdict)r->verdict),
			   "kind", r->warning ? "warning" : "failure", "nodes",
			   ctl_json_list(r->bad), "spares",
			   ctl_json_list(r->spares), "decided_at",
			   (json_int_t)r->decided_at));
	}
	return a;
}

static json_t *ctl_spares_json(struct ctl *c)
{
	char members[SIGMAD_LIST_MAX], pool[SIGMAD_LIST_MAX];

	ctl_members(c, &c->view, members);
	ctl_pool_now(&c->view, pool, sizeof(pool));
	return json_pack("{s:s, s:o*, s:o*}", "reservation", c->cfg.reservation,
			 "pool", ctl_json_list(pool), "members",
			 ctl_json_list(members));
}

/* o as one line of out; NULL (out of memory) is an error line */
static int ctl_reply_json(json_t *o, FILE *out)
{
	int rc = 0;

	if (!o || json_dumpf(o, out, JSON_COMPACT)) {
		fprintf(out, "error: sigmad could not write its reply\n");
		rc = -ENOMEM;
	} else {
		fputc('\n', out);
	}
	json_decref(o);
	return rc;
}

int ctl_cmd_status(struct ctl *c, FILE *out, uid_t uid, bool all)
{
	return ctl_reply_json(
	    json_pack("{s:I, s:o*, s:o*, s:o*, s:o*, s:o*}", "now",
		      (json_int_t)c->view.now, "spares", ctl_spares_json(c),
		      "jobs", ctl_status_jobs(c, uid, all), "recoveries",
		      ctl_status_recs(c, uid, all), "repair",
		      ctl_status_nodes(&c->view, false), "admin_drained",
		      ctl_status_nodes(&c->view, true)),
	    out);
}

int ctl_cmd_spares(struct ctl *c, FILE *out)
{
	return ctl_reply_json(ctl_spares_json(c), out);
}

/* ---- what changes the cluster -------------------------------------------- */

static long ctl_cmd_node(struct ctl *c, const char *node, FILE *out)
{
	long i = ctl_view_node(&c->view, node);

	if (i < 0)
		fprintf(out, "error: no node called '%s'\n", node);
	return i;
}

static void ctl_cmd_log(struct ctl *c, const char *type, const char *node,
			uid_t uid, const char *text)
{
	struct evlog_event ev;

	ctl_ev_init(&ev, type);
	ev.uid = (uint32_t)uid;
	sigma_strlcpy(ev.node, node, sizeof(ev.node));
	sigma_strlcpy(ev.text, text, sizeof(ev.text));
	ctl_log(c, &ev);
}

int ctl_cmd_spare_add(struct ctl *c, const char *node, uid_t uid, FILE *out)
{
	if (ctl_cmd_node(c, node, out) < 0)
		return -ENOENT;
	if (sigma_list_add(c->added, sizeof(c->added), node)) {
		fprintf(out, "error: too many spares\n");
		return -ENAMETOOLONG;
	}
	sigma_list_del(c->removed, node);
	ctl_cmd_log(c, "spare_add", node, uid, "sigmactl spares add");
	fprintf(
	    out,
	    "ok: %s joins the spare pool (reserved once idle and healthy)\n",
	    node);
	return 0;
}

int ctl_cmd_spare_remove(struct ctl *c, const char *node, uid_t uid, FILE *out)
{
	char pool[SIGMAD_LIST_MAX];

	if (ctl_cmd_node(c, node, out) < 0)
		return -ENOENT;
	sigma_list_del(c->added, node);
	sigma_list_add(c->removed, sizeof(c->removed), node);
	ctl_pool_now(&c->view, pool, sizeof(pool));
	if (sigma_list_has(pool, node)) {
		sigma_list_del(pool, node);
		if (ctl_resv_apply(c, &c->view, pool)) {
			fprintf(
			    out,
			    "error: Slurm refused the reservation update (see sigmad's log)\n");
			return -EIO;
		}
	}
	ctl_cmd_log(c, "spare_remove", node, uid, "sigmactl spares remove");
	fprintf(out, "ok: %s left the spare pool\n", node);
	return 0;
}

int ctl_cmd_drain(struct ctl *c, const char *node, const char *reason,
		  uid_t uid, FILE *out)
{
	char full[CTL_REASON_MAX];

	if (ctl_cmd_node(c, node, out) < 0)
		return -ENOENT;
	/* "admin:" keeps it out of the automatic return to service */
	if (sigma_snprintf(full, sizeof(full), SIGMA_REASON_ADMIN_PREFIX "%s",
			   reason) < 0) {
		fprintf(out, "error: reason too long\n");
		return -ENAMETOOLONG;
	}
	if (ctl_slurm_drain(node, full)) {
		fprintf(out,
			"error: Slurm refused to drain %s (see sigmad's log)\n",
			node);
		return -EIO;
	}
	ctl_cmd_log(c, "drain", node, uid, full);
	fprintf(out, "ok: %s drained: %s\n", node, full);
	return 0;
}

/* job is uid's running job (any restart mode): NULL, or why not */
static const char *ctl_job_refused(const struct ctl *c, uint32_t job, uid_t uid,
				   bool admin)
{
	const struct ctl_job *j = ctl_view_job(&c->view, job);

	if (!j || (!admin && j->uid != (uint32_t)uid))
		return "no such job of yours";
	if (j->state != CTL_J_RUNNING)
		return "the job is not running";
	return NULL;
}

/* job is uid's running in-job job: NULL, or why not */
static const char *ctl_in_job_refused(const struct ctl *c, uint32_t job,
				      uid_t uid, bool admin)
{
	const struct ctl_job *j = ctl_view_job(&c->view, job);
	const char *why = ctl_job_refused(c, job, uid, admin);
	struct sigma_block opts;

	if (why)
		return why;
	if (sigma_block_parse(j->comment, &opts, NULL) ||
	    opts.restart != SIGMA_RESTART_IN_JOB)
		return "the job does not restart itself (--sigma-restart=in-job)";
	return NULL;
}

/* node i is one of job's: NULL, or why not */
static const char *ctl_node_refused(const struct ctl *c, long i, uint32_t job)
{
	const struct ctl_job *j = ctl_view_job(&c->view, job);

	for (size_t k = 0; j && k < j->nnodes; k++)
		if (j->nodes[k] == i)
			return NULL;
	return "the node is not one of the job's";
}

/* every node of the comma list off is one job ran on: NULL, or why not */
static const char *ctl_off_refused(const struct ctl *c, uint32_t job,
				   const char *off)
{
	const char *last = ctl_last_nodes(c, job);
	char tmp[CTL_LIST_MAX], *save = NULL, *tok;

	if (sigma_strlcpy(tmp, off, sizeof(tmp)) >= sizeof(tmp))
		return "too many nodes after off=";
	for (tok = strtok_r(tmp, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		long i = ctl_view_node(&c->view, tok);

		if (i < 0)
			return "no such node after off=";
		if (ctl_node_refused(c, i, job) && !sigma_list_has(last, tok))
			return "a node after off= is not one of the job's";
	}
	return NULL;
}

int ctl_cmd_relaunch(struct ctl *c, uint32_t job, int launch, const char *off,
		     uid_t uid, bool admin, FILE *out)
{
	const char *why = ctl_in_job_refused(c, job, uid, admin);
	const struct ctl_job *j = ctl_view_job(&c->view, job);
	char tmp[CTL_LIST_MAX], *save = NULL, *tok;
	struct evlog_event ev;

	if (!why)
		why = ctl_off_refused(c, job, off);
	if (!why && launch > ctl_relaunch_newest(c, job) &&
	    ctl_restarts_left(c, j) <= 0)
		why = "no restart left (--sigma-max-restarts)";
	if (why) {
		fprintf(out, "error: job %u: %s\n", job, why);
		return -EPERM;
	}
	if (launch <= ctl_relaunch_newest(c, job)) {
		/* a report repeated, or one from before a later launch */
		fprintf(out, "ok: job %u: launch %d counted already, %d restarts used\n",
			job, launch, ctl_restarts_used(c, j));
		return 0;
	}
	ctl_ev_init(&ev, "relaunch");
	ev.job = job;
	ev.uid = (uint32_t)uid;
	ev.attempt = j->restart_cnt + 1;
	ev.launch = launch;
	sigma_strlcpy(ev.node, off, sizeof(ev.node));
	(void)sigma_snprintf(
	    ev.text, sizeof(ev.text),
	    "relaunched in its allocation by its launcher (%d restarts used)",
	    ctl_restarts_used(c, j) + 1);
	if (ctl_log(c, &ev)) {
		fprintf(out, "error: the event log refused the relaunch\n");
		return -EIO;
	}
	ctl_relaunch_count(c, job, launch);
	sigma_strlcpy(tmp, off, sizeof(tmp));
	for (tok = strtok_r(tmp, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save))
		ctl_in_job_relaunched(c, j, tok);
	fprintf(out, "ok: job %u: %d restarts used\n", job,
		ctl_restarts_used(c, j));
	return 0;
}

int ctl_job_drain(struct ctl *c, long i, uint32_t job, uid_t uid,
		  enum sigma_drain_ask ask, const char *reason, const char *as,
		  FILE *out)
{
	const char *node = c->view.nodes[i].name;
	struct evlog_event ev;
	char why[320];

	/* the one drain decision: never a node out of service already */
	if (ctl_drain_decide(&c->view.nodes[i], ask, why, sizeof(why)) !=
	    SIGMA_DRAIN_SET) {
		fprintf(out, "ok: %s left as it is: %s\n", node, why);
		return 0;
	}
	if (ctl_slurm_drain(node, reason)) {
		fprintf(out,
			"error: Slurm refused to drain %s (see sigmad's log)\n",
			node);
		return -EIO;
	}
	c->view.nodes[i].flags |= CTL_N_DRAIN;
	sigma_strlcpy(c->view.nodes[i].reason, reason,
		      sizeof(c->view.nodes[i].reason));
	ctl_ev_init(&ev, "drain");
	ev.job = job;
	ev.uid = (uint32_t)uid;
	sigma_strlcpy(ev.node, node, sizeof(ev.node));
	sigma_strlcpy(ev.text, reason, sizeof(ev.text));
	ctl_log(c, &ev);
	ctl_drained_add(c, job, node);
	sigma_info("job %u: %s drained as %s, on its owner's report (uid %u)",
		   job, node, as, (unsigned)uid);
	fprintf(out, "ok: %s drained: %s\n", node, reason);
	return 0;
}

long ctl_job_node(struct ctl *c, const char *node, uint32_t job,
			 uid_t uid, bool admin, bool in_job, FILE *out)
{
	long i = ctl_cmd_node(c, node, out);
	const char *why;

	if (i < 0)
		return -ENOENT;
	why = in_job ? ctl_in_job_refused(c, job, uid, admin)
		     : ctl_job_refused(c, job, uid, admin);
	if (why || (why = ctl_node_refused(c, i, job))) {
		fprintf(out, "error: job %u, node %s: %s\n", job, node, why);
		return -EPERM;
	}
	return i;
}

int ctl_cmd_slow(struct ctl *c, const char *node, uint32_t job, uid_t uid,
		 bool admin, FILE *out)
{
	long i = ctl_job_node(c, node, job, uid, admin, false, out);
	struct evlog_event ev;

	if (i < 0)
		return (int)i;
	if (sigma_list_has(ctl_slow_nodes(c, job), node)) {
		fprintf(out, "ok: job %u: %s reported slow already\n", job,
			node);
		return 0;
	}
	/*
	 * An early warning for this job alone: the warning path moves it off
	 * the node (ctl_detect_running). The node stays in service for the
	 * other jobs on it; only sigma's own probe marks it for all of them.
	 */
	ctl_ev_init(&ev, "slow");
	ev.job = job;
	ev.uid = (uint32_t)uid;
	sigma_strlcpy(ev.node, node, sizeof(ev.node));
	(void)sigma_snprintf(ev.text, sizeof(ev.text),
			     "tuner: the rank of job %u stays slow here after "
			     "the rebalance (its owner's report)",
			     job);
	if (ctl_log(c, &ev)) {
		fprintf(out, "error: the event log refused the report\n");
		return -EIO;
	}
	ctl_slow_add(c, job, node);
	sigma_info("job %u: %s slow at its owner's word (uid %u): the job "
		   "moves off it",
		   job, node, (unsigned)uid);
	fprintf(out, "ok: job %u moves off %s (the node stays in service)\n",
		job, node);
	return 0;
}

int ctl_cmd_resume(struct ctl *c, const char *node, uid_t uid, FILE *out)
{
	struct ctl_tries *t;

	if (ctl_cmd_node(c, node, out) < 0)
		return -ENOENT;
	if (ctl_slurm_resume(node)) {
		fprintf(
		    out,
		    "error: Slurm refused to resume %s (see sigmad's log)\n",
		    node);
		return -EIO;
	}
	t = ctl_tries_find(&c->tries, node);
	if (t && !t->probe.pid)
		ctl_tries_drop(&c->tries, node);
	else if (t)
		t->tries = 0;
	ctl_cmd_log(c, "resume", node, uid, "sigmactl resume");
	fprintf(out, "ok: %s resumed\n", node);
	return 0;
}
