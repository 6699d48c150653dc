/*
 * ctl_cmd.c - the commands of sigmactl that sigmad's server hands the
 * controller (see ctl.h): status and spares read the latest look at the
 * cluster; spares add and remove, drain and resume change it, and are
 * logged with the uid that asked. Replies are lines of text, errors begin
 * with "error: ".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "contract.h"
#include "ctl_internal.h"
#include "policy.h"
#include "sigma.h"
#include "slurm_api.h"

/* ---- what sigmad sees ---------------------------------------------------- */

static const char *job_state_name(const struct ctl_job *j)
{
	static const char *const names[] = {"PENDING", "RUNNING", "ENDED"};

	return names[j->state];
}

/* sigma's drained nodes: in repair, or (admin) those an admin took out */
static void ctl_status_nodes(const struct ctl_view *v, FILE *out,
			     const char *title, bool admin)
{
	size_t n = 0;

	fprintf(out, "%s:\n", title);
	for (size_t i = 0; i < v->nnodes; i++) {
		const struct ctl_node *nd = &v->nodes[i];
		enum sigma_reason k =
		    sigma_reason_parse(nd->reason, NULL, NULL);

		if (!(nd->flags & CTL_N_DRAIN) || k == SIGMA_REASON_NONE ||
		    (k == SIGMA_REASON_ADMIN) != admin)
			continue;
		fprintf(out, "  %s %s since %lld: %s\n", nd->name,
			(nd->flags & CTL_N_IDLE) ? "drained" : "draining",
			(long long)nd->reason_time, nd->reason);
		n++;
	}
	if (!n)
		fprintf(out, "  none\n");
}

/* the running and pending jobs sigma manages (all, or uid's) */
static void ctl_status_jobs(const struct ctl_view *v, FILE *out, uid_t uid,
			    bool all)
{
	size_t n = 0;

	fprintf(out, "managed jobs:\n");
	for (size_t j = 0; j < v->njobs; j++) {
		const struct ctl_job *job = &v->jobs[j];

		if (job->state == CTL_J_ENDED || (!all && job->uid != uid))
			continue;
		fprintf(out, "  %u %s restarts=%d nodes=", job->id,
			job_state_name(job), job->restart_cnt);
		for (size_t k = 0; k < job->nnodes; k++)
			fprintf(out, "%s%s", k ? "," : "",
				v->nodes[job->nodes[k]].name);
		fprintf(out, "\n");
		n++;
	}
	if (!n)
		fprintf(out, "  none\n");
}

/* the recoveries still open (all, or those of uid's jobs) */
static void ctl_status_recs(const struct ctl *c, FILE *out, uid_t uid, bool all)
{
	size_t n = 0;

	fprintf(out, "recoveries in progress:\n");
	for (size_t i = 0; i < c->nrecs; i++) {
		const struct ctl_rec *r = &c->recs[i];

		if (r->complete || (!all && r->uid != uid))
			continue;
		fprintf(out, "  job %u attempt %d: %s %s on %s%s%s\n", r->job,
			r->attempt,
			policy_verdict_name((enum policy_verdict)r->verdict),
			r->warning ? "warning" : "failure", r->bad,
			r->spares[0] ? " -> " : "", r->spares);
		n++;
	}
	if (!n)
		fprintf(out, "  none\n");
}

int ctl_cmd_status(struct ctl *c, FILE *out, uid_t uid, bool all)
{
	const struct ctl_view *v = &c->view;
	char members[SIGMAD_LIST_MAX], pool[SIGMAD_LIST_MAX];

	ctl_members(c, v, members);
	ctl_pool_now(v, pool, sizeof(pool));
	fprintf(out, "spares: %s (%zu of %zu in reservation %s)\n",
		pool[0] ? pool : "none", ctl_list_count(pool),
		ctl_list_count(members), c->cfg.reservation);
	ctl_status_jobs(v, out, uid, all);
	ctl_status_recs(c, out, uid, all);
	ctl_status_nodes(v, out, "nodes in repair", false);
	ctl_status_nodes(v, out, "nodes drained by an admin (sigmactl drain)",
			 true);
	return 0;
}

int ctl_cmd_spares(struct ctl *c, FILE *out)
{
	char members[SIGMAD_LIST_MAX], pool[SIGMAD_LIST_MAX];

	ctl_members(c, &c->view, members);
	ctl_pool_now(&c->view, pool, sizeof(pool));
	fprintf(out, "reservation %s: %s\n", c->cfg.reservation,
		pool[0] ? pool : "(empty)");
	fprintf(out, "pool members: %s\n", members[0] ? members : "(none)");
	return 0;
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
	if (ctl_list_add(c->added, sizeof(c->added), node)) {
		fprintf(out, "error: too many spares\n");
		return -ENAMETOOLONG;
	}
	ctl_list_del(c->removed, node);
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
	ctl_list_del(c->added, node);
	ctl_list_add(c->removed, sizeof(c->removed), node);
	ctl_pool_now(&c->view, pool, sizeof(pool));
	if (ctl_list_has(pool, node)) {
		ctl_list_del(pool, node);
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
	if ((t = ctl_tries_of(c, node)))
		t->tries = 0;
	ctl_cmd_log(c, "resume", node, uid, "sigmactl resume");
	fprintf(out, "ok: %s resumed\n", node);
	return 0;
}
