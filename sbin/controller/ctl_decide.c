/*
 * ctl_decide.c - what sigmad sees happen to sigma jobs and what it decides
 * to do about it: a failed or warned node under a running job, a job Slurm
 * requeued or ended after a node failure, a job whose script asked to be
 * requeued. A decision asks the policy core (policy.h) and is written to
 * the event log before anything is done about it (ctl_recover.c does it).
 * Also where each running job runs, remembered through the log.
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

#define CTL_POOL_MAX 256
#define CTL_NEW_FAILURE_WAIT_S 60 /* for the node that ended an in-job job */

/* the nodes one decision is about, and what happened to the first */
struct ctl_blame {
	char nodes[EVLOG_NODE_MAX];
	size_t n;
	char what[200];
};

static void ctl_blame_add(struct ctl_blame *b, const char *node,
			  const char *what)
{
	if (!sigma_list_add(b->nodes, sizeof(b->nodes), node) && !b->n++)
		sigma_strlcpy(b->what, what, sizeof(b->what));
}

/* A failed node: what happened, or NULL when it did not fail. */
static const char *node_failed(const struct ctl_node *n)
{
	const char *what;

	if (sigma_reason_parse(n->reason, NULL, &what) ==
		SIGMA_REASON_FAILURE &&
	    (n->flags & CTL_N_DRAIN))
		return what;
	if (n->flags & CTL_N_NO_RESPOND)
		return "not responding";
	if (n->flags & CTL_N_DOWN)
		return n->reason[0] ? n->reason : "down";
	if (n->flags & CTL_N_FAIL)
		return n->reason[0] ? n->reason : "failing";
	return NULL;
}

static const char *node_warned(const struct ctl_node *n)
{
	const char *what;

	if ((n->flags & CTL_N_DRAIN) &&
	    sigma_reason_parse(n->reason, NULL, &what) == SIGMA_REASON_WARNING)
		return what;
	return NULL;
}

/* ---- a decision ---------------------------------------------------------- */

static uint32_t ctl_node_failures(const struct ctl *c, const char *node)
{
	uint32_t n = 0;

	for (size_t i = 0; i < c->nrecs; i++)
		if (c->recs[i].verdict != POLICY_WATCH &&
		    sigma_list_has(c->recs[i].bad, node))
			n++;
	return n;
}

/*
 * The reserved spares free for job now, as the policy weighs them; idx
 * says which node each is. A spare an earlier decision took (in this very
 * poll, say: failures that come together) is not free for this one.
 */
static size_t ctl_free_spares(const struct ctl *c, const struct ctl_view *v,
			      const struct ctl_job *job, const char *bad,
			      struct policy_spare *spares, size_t *idx)
{
	size_t nsp = 0;

	for (size_t i = 0; i < v->nnodes && nsp < CTL_POOL_MAX; i++) {
		const struct ctl_node *n = &v->nodes[i];

		if (!(n->flags & CTL_N_RESERVED) || !ctl_node_healthy(n) ||
		    sigma_list_has(bad, n->name) || ctl_node_in_job(v, i) ||
		    ctl_lent(c, v, n->name))
			continue;
		spares[nsp].failures = ctl_node_failures(c, n->name);
		spares[nsp].since = 0;
		spares[nsp].excluded = sigma_list_has(job->exc_nodes, n->name);
		idx[nsp++] = i;
	}
	return nsp;
}

/*
 * The spares job may get now: what it asked for, within the site's caps
 * per job and per user (spares the user's running jobs already hold
 * count against the second).
 */
static int ctl_spares_allowed(struct ctl *c, const struct ctl_view *v,
			      const struct ctl_job *job, long asked)
{
	const struct sigma_site_caps *caps = &c->cfg.caps;
	char members[SIGMAD_LIST_MAX];
	long held = 0, n = asked;

	ctl_members(c, v, members);
	for (size_t j = 0; j < v->njobs; j++) {
		const struct ctl_job *o = &v->jobs[j];

		if (o->uid != job->uid || o->state == CTL_J_ENDED)
			continue;
		for (size_t k = 0; k < o->nnodes; k++)
			if (sigma_list_has(members, v->nodes[o->nodes[k]].name))
				held++;
	}
	if (n > caps->spares_per_job)
		n = caps->spares_per_job;
	if (n > caps->spares_per_user - held)
		n = caps->spares_per_user - held;
	if (n < asked)
		sigma_info(
		    "job %u: %ld of its %ld spares allowed (site caps: %ld a job, %ld a user, who holds %ld)",
		    job->id, n > 0 ? n : 0, asked, caps->spares_per_job,
		    caps->spares_per_user, held);
	return n > 0 ? (int)n : 0;
}

int ctl_max_restarts(const struct ctl *c, const struct sigma_block *opts)
{
	return (int)(opts->max_restarts < c->cfg.caps.max_restarts
			 ? opts->max_restarts
			 : c->cfg.caps.max_restarts);
}

/* what the policy plans for job, whose sigma[] block is opts */
static int ctl_plan(struct ctl *c, const struct ctl_view *v,
		    const struct ctl_job *job, const struct sigma_block *opts,
		    int restarts, bool warning, size_t nbad,
		    const struct policy_spare *spares, size_t nsp,
		    struct policy_plan *plan)
{
	struct policy_job pj;

	if (job->unprotected) {
		/* no requeue, no spare: drain, and say what sigma cannot do */
		memset(plan, 0, sizeof(*plan));
		plan->verdict = POLICY_UNPROTECTED;
		plan->attempt = restarts + 1;
		plan->why = job->unprotected;
		return 0;
	}
	pj.id = job->id;
	pj.restarts = restarts;
	/* a job that restarts itself spent some of them in its allocation */
	pj.max_restarts = ctl_max_restarts(c, opts) - ctl_relaunches(c, job->id);
	if (pj.max_restarts < 0)
		pj.max_restarts = 0;
	pj.spares = ctl_spares_allowed(c, v, job, opts->spares);
	pj.spares_used = 0; /* each recovery may hold up to spares */
	pj.on_warning = opts->on_warning;
	if (warning)
		return policy_plan_warning(&c->cfg.policy, &pj, nbad, spares,
					   nsp, plan);
	return policy_plan_failure(&c->cfg.policy, &pj, nbad, spares, nsp,
				   plan);
}

/* the decision's "decide" line, which a new sigmad replays */
static int ctl_log_decision(struct ctl *c, const struct ctl_rec *r,
			    const struct policy_plan *plan)
{
	struct evlog_event ev;

	ctl_ev_from_rec(&ev, "decide", r);
	sigma_strlcpy(ev.kind, r->warning ? "warning" : "failure",
		      sizeof(ev.kind));
	sigma_strlcpy(ev.verdict, policy_verdict_name(plan->verdict),
		      sizeof(ev.verdict));
	sigma_strlcpy(ev.spare, r->spares, sizeof(ev.spare));
	if (plan->verdict == POLICY_WATCH && plan->why)
		/* no account follows a watch: the history says why here */
		(void)sigma_snprintf(ev.text, sizeof(ev.text), "%s; %s",
				     r->what, plan->why);
	else
		sigma_strlcpy(ev.text, r->what, sizeof(ev.text));
	sigma_info("job %u attempt %d: %s on %s (%s): %s%s%s (%s)", r->job,
		   r->attempt, r->warning ? "warning" : "failure", r->bad,
		   r->what, policy_verdict_name(plan->verdict),
		   r->spares[0] ? " onto " : "", r->spares, plan->why);
	return ctl_log(c, &ev);
}

static int ctl_decide(struct ctl *c, const struct ctl_view *v,
		      const struct ctl_job *job, int restarts, bool warning,
		      const struct ctl_blame *b)
{
	struct policy_spare spares[CTL_POOL_MAX];
	size_t idx[CTL_POOL_MAX], nsp;
	struct sigma_block opts;
	struct policy_plan plan;
	struct ctl_rec *r;
	int rc;

	if (sigma_block_parse(job->comment, &opts, NULL)) {
		sigma_warn(
		    "job %u: bad sigma[] block in AdminComment, not managed",
		    job->id);
		return 0;
	}
	nsp = ctl_free_spares(c, v, job, b->nodes, spares, idx);
	rc = ctl_plan(c, v, job, &opts, restarts, warning, b->n, spares, nsp,
		      &plan);
	if (rc)
		return rc;
	r = ctl_rec_new(c);
	if (!r)
		return -ENOMEM;
	r->job = job->id;
	r->uid = job->uid;
	r->attempt = plan.attempt;
	r->verdict = plan.verdict;
	r->warning = warning;
	r->decided_at = v->now;
	sigma_strlcpy(r->bad, b->nodes, sizeof(r->bad));
	sigma_strlcpy(r->what, b->what, sizeof(r->what));
	for (size_t k = 0; k < plan.npicked; k++)
		sigma_list_add(r->spares, sizeof(r->spares),
			     v->nodes[idx[plan.picked[k]]].name);
	r->complete = plan.verdict == POLICY_WATCH;
	/* the decision is on disk before anything is done about it */
	rc = ctl_log_decision(c, r, &plan);
	if (rc) {
		c->nrecs--;
		return rc;
	}
	return 0;
}

/* ---- what happened ------------------------------------------------------- */

/*
 * The story of a failed node of an in-job job, once: an "in_job" event
 * (sigmactl history) and an account in its AdminComment. Written when the
 * launcher reports the relaunch that moved the step off the node
 * (ctl_in_job_relaunched), not when the node fails: with no spare left
 * the launcher falls back to a requeue, which tells its own story.
 */
static void ctl_in_job_account(struct ctl *c, const struct ctl_job *job,
			       const char *node, const char *what)
{
	char account[CTL_REASON_MAX + 96], comment[CTL_COMMENT_MAX];
	struct evlog_event ev;

	(void)sigma_snprintf(
	    account, sizeof(account),
	    "sigma: attempt %d: %s %s -> relaunched in the allocation (in-job)",
	    job->restart_cnt + 1, node, what);
	if (sigma_snprintf(comment, sizeof(comment), "%s %s", job->comment,
			   account) < 0 ||
	    ctl_slurm_admin_comment(job->id, comment))
		sigma_warn("job %u: account of %s not appended", job->id, node);
	ctl_ev_init(&ev, "in_job");
	ev.job = job->id;
	ev.uid = job->uid;
	ev.attempt = job->restart_cnt + 1;
	sigma_strlcpy(ev.node, node, sizeof(ev.node));
	sigma_strlcpy(ev.text, account, sizeof(ev.text));
	if (!ctl_log(c, &ev))
		ctl_in_job_tell(c, job->id, node);
}

/*
 * A running job that restarts itself (--sigma-restart=in-job): its launcher
 * relaunches the step inside the allocation, off a failed node. sigmad
 * never requeues it behind the launcher's back; it drains the node, once,
 * and records it. Should the launcher run out of spares, the job exits 76
 * and the stopped job is requeued as any other (ctl_detect_stopped).
 */
static void ctl_in_job_failed(struct ctl *c, const struct ctl_view *v,
			      const struct ctl_job *job, long i,
			      const char *what)
{
	char reason[CTL_REASON_MAX];
	struct ctl_node *n = &v->nodes[i];
	const char *node = n->name;
	struct evlog_event ev;
	char why[320];

	/* once a job: a drain that did not hold in Slurm is not redone at
	 * every tick, nor logged again */
	if (sigma_list_has(ctl_drained_nodes(c, job->id), node))
		return;
	if (ctl_drain_decide(n, SIGMA_ASK_JOB_FAILED, why, sizeof(why)) ==
	    SIGMA_DRAIN_SET) {
		/* not drained yet by the probe */
		snprintf(reason, sizeof(reason), "sigma: %s", what);
		if (ctl_slurm_drain(node, reason))
			return; /* tried again at the next tick */
		n->flags |= CTL_N_DRAIN;
		ctl_ev_init(&ev, "drain");
		ev.job = job->id;
		ev.uid = job->uid;
		ev.attempt = job->restart_cnt + 1;
		sigma_strlcpy(ev.node, node, sizeof(ev.node));
		(void)sigma_snprintf(
		    ev.text, sizeof(ev.text),
		    "%s (the job's launcher relaunches it in its allocation, "
		    "or it is requeued)",
		    reason);
		sigma_info(
		    "job %u: %s failed (%s): drained; the job restarts itself",
		    job->id, node, what);
		ctl_log(c, &ev);
		ctl_drained_add(c, job->id, node);
	}
}

void ctl_in_job_relaunched(struct ctl *c, const struct ctl_job *job,
			   const char *node)
{
	long i = ctl_view_node(&c->view, node);
	const char *what = i >= 0 ? node_failed(&c->view.nodes[i]) : NULL;

	if (sigma_list_has(ctl_in_job_told(c, job->id), node))
		return;
	/* what sigmad sees of the node, never the launcher's words */
	ctl_in_job_account(c, job, node,
			   what ? what : "failed in the job's step");
}

/*
 * The failed nodes of a running in-job job: those it runs on, and those
 * it ran on when sigmad last looked (with --no-kill, Slurm takes a failed
 * node out of the job; sigmad may have been down when it did). Of a job
 * that has ended, only those its launcher moved off while it ran: a node
 * that fails after the job is not the job's.
 */
static void ctl_detect_in_job(struct ctl *c, const struct ctl_view *v,
			      const struct ctl_job *job)
{
	bool ended = job->state == CTL_J_ENDED;
	char tmp[CTL_LIST_MAX], *save = NULL, *tok;
	const char *w;

	for (size_t k = 0; k < job->nnodes && !ended; k++)
		if ((w = node_failed(&v->nodes[job->nodes[k]])))
			ctl_in_job_failed(c, v, job, job->nodes[k], w);
	sigma_strlcpy(tmp, ctl_last_nodes(c, job->id), sizeof(tmp));
	for (tok = strtok_r(tmp, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		long i = ctl_view_node(v, tok);

		/* one a requeue excluded is of an attempt before this one */
		if (i >= 0 && !sigma_list_has(job->exc_nodes, tok) &&
		    (!ended || sigma_list_has(ctl_in_job_told(c, job->id), tok)) &&
		    (w = node_failed(&v->nodes[i])))
			ctl_in_job_failed(c, v, job, i, w);
	}
}

/* submitted with --sigma-restart=in-job: its launcher relaunches it */
static bool restarts_in_job(const struct ctl_job *job)
{
	struct sigma_block opts;

	return !sigma_block_parse(job->comment, &opts, NULL) &&
	       opts.restart == SIGMA_RESTART_IN_JOB;
}

/* a running job: a failed node, else a warned one not watched yet */
static void ctl_detect_running(struct ctl *c, const struct ctl_view *v,
			       const struct ctl_job *job)
{
	struct ctl_blame bad = {0}, warn = {0};
	const struct ctl_rec *watch;
	int R = job->restart_cnt;
	bool in_job;

	if (ctl_decided(c, job))
		return; /* handled, or given up at this attempt */
	in_job = restarts_in_job(job);
	/* its failed nodes: drained, the job left to its launcher */
	if (in_job)
		ctl_detect_in_job(c, v, job);
	/* a warning moves any job: it checkpoints and exits 75 */
	watch = ctl_rec_find(c, job->id, R + 2, REC_WATCH);
	for (size_t k = 0; k < job->nnodes; k++) {
		const struct ctl_node *n = &v->nodes[job->nodes[k]];
		const char *w;

		if ((w = node_failed(n))) {
			if (!in_job)
				ctl_blame_add(&bad, n->name, w);
		}
		else if ((w = node_warned(n)) &&
			 !(watch && sigma_list_has(watch->bad, n->name)))
			ctl_blame_add(&warn, n->name, w);
		else if (sigma_list_has(ctl_slow_nodes(c, job->id), n->name) &&
			 !(watch && sigma_list_has(watch->bad, n->name)))
			ctl_blame_add(&warn, n->name,
				      "tuner: its rank stays slow here");
	}
	if (bad.n)
		ctl_decide(c, v, job, R, false, &bad);
	else if (warn.n)
		ctl_decide(c, v, job, R, true, &warn);
}

/*
 * A job that does not run: Slurm requeued it after a node failure, take
 * over from there. Or it ended NODE_FAIL and Slurm will not requeue it:
 * do. Or its script failed with the trainer's "requeue me" codes (76: a
 * peer rank died, 79: the trouble follows the hardware) and one of its
 * nodes is now drained as failing: the probe (job epilog or health check)
 * often drains the node a few seconds after the step ended, so an ended
 * job is watched for a while (ctl_job_may_come_back). Its nodes are the
 * last ones sigmad saw it on.
 *
 * An in-job job carries the nodes its launcher moved off, drained, in its
 * allocation (--no-kill). They did not end it: the node that did fails
 * after them, and the requeue must replace it too, or the job waits for
 * good for a node it cannot have. So sigmad waits for a failed node the
 * launcher did not move off, CTL_NEW_FAILURE_WAIT_S at most.
 */
static void ctl_detect_stopped(struct ctl *c, const struct ctl_view *v,
			       const struct ctl_job *job)
{
	struct ctl_blame bad = {0};
	char tmp[CTL_LIST_MAX], *save = NULL, *tok;
	int R = job->restart_cnt;
	bool decided = ctl_decided(c, job);
	/*
	 * whenever it happened: sigmad may have been down then (its
	 * last nodes come from the event log)
	 */
	bool slurm_requeued = job->state == CTL_J_PENDING && R >= 1 &&
			      !ctl_rec_find(c, job->id, R + 1, REC_RECOVERY) &&
			      !ctl_rec_find(c, job->id, R, REC_GIVE_UP);
	bool node_failed_end =
	    job->state == CTL_J_ENDED && job->node_fail && !decided;
	bool script_failed_end = !decided && ctl_job_may_come_back(job, v->now);
	bool fresh = false; /* a failed node the launcher did not move off */

	if (!slurm_requeued && !node_failed_end && !script_failed_end) {
		/*
		 * an in-job job's launcher may have moved off a dead node
		 * that slurmctld calls not responding only after the job
		 * completed: drained for the job all the same (that node
		 * only)
		 */
		if (ctl_job_just_ended(job, v->now) && restarts_in_job(job))
			ctl_detect_in_job(c, v, job);
		return;
	}
	sigma_strlcpy(tmp, ctl_last_nodes(c, job->id), sizeof(tmp));
	for (tok = strtok_r(tmp, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		long i = ctl_view_node(v, tok);
		const char *w;

		if (i >= 0 && (w = node_failed(&v->nodes[i]))) {
			ctl_blame_add(&bad, tok, w);
			if (!sigma_list_has(ctl_in_job_told(c, job->id), tok))
				fresh = true;
		}
	}
	if (!bad.n)
		return; /* not a node failure we can see */
	if (!slurm_requeued && !node_failed_end && !fresh &&
	    v->now - job->end_time < CTL_NEW_FAILURE_WAIT_S)
		return; /* the node that ended it has not drained yet */
	ctl_decide(c, v, job, slurm_requeued ? R - 1 : R, false, &bad);
}

void ctl_detect(struct ctl *c, const struct ctl_view *v)
{
	for (size_t j = 0; j < v->njobs; j++) {
		if (v->jobs[j].state == CTL_J_RUNNING)
			ctl_detect_running(c, v, &v->jobs[j]);
		else
			ctl_detect_stopped(c, v, &v->jobs[j]);
	}
}

/* ---- where jobs run ------------------------------------------------------ */

/*
 * The nodes each running sigma job runs on. They are what a recovery needs
 * after Slurm requeued a job itself (a node failure while sigmad was down,
 * say), so a new set is written to the event log ("run") and replayed at
 * start: a restart or an upgrade of sigmad strands no job.
 */
void ctl_remember_nodes(struct ctl *c, const struct ctl_view *v)
{
	size_t kept = 0;

	/* a job slurmctld no longer knows needs nothing remembered */
	for (size_t i = 0; i < c->nlast; i++)
		if (ctl_view_job(v, c->last[i].job))
			c->last[kept++] = c->last[i];
	c->nlast = kept;
	for (size_t j = 0; j < v->njobs; j++) {
		const struct ctl_job *job = &v->jobs[j];
		char nodes[CTL_LIST_MAX];
		struct evlog_event ev;

		if (job->state != CTL_J_RUNNING)
			continue; /* keep what we knew of it */
		ctl_view_job_nodes(v, job, nodes, sizeof(nodes));
		if (!strcmp(nodes, ctl_last_nodes(c, job->id)))
			continue;
		ctl_last_set(c, job->id, nodes);
		ctl_ev_init(&ev, "run");
		ev.job = job->id;
		ev.uid = job->uid;
		ev.attempt = job->restart_cnt + 1;
		sigma_strlcpy(ev.node, nodes, sizeof(ev.node));
		ctl_log(c, &ev);
	}
}
