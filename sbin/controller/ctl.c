/*
 * ctl.c - sigmad's controller (see ctl.h): failure path, early-warning path,
 * hot-spare pool, return to service, and the commands of sigmactl.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "contract.h"
#include "ctl.h"
#include "eventlog.h"
#include "policy.h"
#include "proc.h"
#include "sigma.h"
#include "slurm_api.h"
#include "view.h"

#define CTL_LENT_S	    300 /* a released spare is not reclaimed this soon */
#define CTL_PROBE_TIMEOUT_S 300
#define CTL_MAX_TRIES	    64
#define CTL_STEP_RETRIES    20	/* failed Slurm calls before a step gives up */
#define CTL_FAILED_END_S    300 /* a failed job's node may drain this late */

struct ctl_rec {
	uint32_t job, uid;
	int attempt;
	int verdict; /* enum policy_verdict */
	bool warning;
	char bad[EVLOG_NODE_MAX];
	char spares[EVLOG_NODE_MAX];
	char what[200];
	int64_t decided_at, signalled_at;
	bool signalled, released, requeued, complete;
	int errors; /* in memory: failed Slurm calls */
	/* in memory: how a signalled job stopped, for its account */
	enum { STOP_UNKNOWN = 0, STOP_EXIT, STOP_SIGNAL, STOP_RUNNING } stop;
	int stop_code; /* its exit status, or the signal */
};

/* the names of a recovery's stop, in the event log */
static const char *const stop_names[] = {"unknown", "exit", "signal",
					  "running", NULL};

struct ctl_tries {
	char node[CTL_NAME_MAX];
	int tries;
	int64_t last;
	struct ctl_proc probe; /* the repair probe running now, if any */
	bool done;	       /* it has ended: rc and out wait */
	int rc;
	char out[CTL_PROC_OUT_MAX];
};

struct ctl_last {
	uint32_t job;
	char nodes[CTL_LIST_MAX];
};

struct ctl {
	struct sigmad_config cfg;
	char config_path[4096];
	char log_path[4096];
	struct evlog log;
	struct ctl_rec *recs;
	size_t nrecs, caprecs;
	char added[SIGMAD_LIST_MAX];   /* sigmactl spares add */
	char removed[SIGMAD_LIST_MAX]; /* sigmactl spares remove */
	struct ctl_tries tries[CTL_MAX_TRIES];
	size_t ntries;
	struct ctl_last *last;
	size_t nlast;
	struct ctl_view view; /* the latest look, for status */
};

/* ---- comma lists --------------------------------------------------------- */

static bool list_has(const char *list, const char *name)
{
	size_t n = strlen(name);
	const char *p = list;

	if (!n)
		return false;
	while ((p = strstr(p, name))) {
		if ((p == list || p[-1] == ',') && (p[n] == ',' || !p[n]))
			return true;
		p += n;
	}
	return false;
}

static int list_add(char *list, size_t size, const char *name)
{
	size_t len = strlen(list), n = strlen(name);

	if (list_has(list, name))
		return 0;
	if (len + n + 2 > size)
		return -ENAMETOOLONG;
	if (len)
		list[len++] = ',';
	memcpy(list + len, name, n + 1);
	return 0;
}

static void list_del(char *list, const char *name)
{
	char out[SIGMAD_LIST_MAX] = "", tmp[SIGMAD_LIST_MAX];
	char *save = NULL, *tok;

	sigma_strlcpy(tmp, list, sizeof(tmp));
	for (tok = strtok_r(tmp, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save))
		if (strcmp(tok, name))
			list_add(out, sizeof(out), tok);
	strcpy(list, out);
}

static size_t list_count(const char *list)
{
	size_t n = *list ? 1 : 0;

	for (; *list; list++)
		n += *list == ',';
	return n;
}

/* ---- event log ----------------------------------------------------------- */

static void ev_init(struct evlog_event *ev, const char *type)
{
	memset(ev, 0, sizeof(*ev));
	ev->time = (int64_t)time(NULL);
	sigma_strlcpy(ev->type, type, sizeof(ev->type));
}

static int ctl_log(struct ctl *c, const struct evlog_event *ev)
{
	int rc = evlog_append(&c->log, ev);

	if (rc)
		sigma_error("event log %s: cannot append %s: %s", c->log_path,
			    ev->type, strerror(-rc));
	return rc;
}

static void ev_from_rec(struct evlog_event *ev, const char *type,
			const struct ctl_rec *r)
{
	ev_init(ev, type);
	ev->job = r->job;
	ev->uid = r->uid;
	ev->attempt = r->attempt;
	sigma_strlcpy(ev->node, r->bad, sizeof(ev->node));
}

/*
 * Records fall in three classes that may share an attempt number: a
 * recovery (requeue, checkpoint, drain only) names the attempt the job
 * restarts as, a give-up names the attempt that failed, a watch collects
 * warned nodes of the running attempt.
 */
enum rec_class { REC_RECOVERY = 0, REC_WATCH, REC_GIVE_UP };

static enum rec_class rec_class_of(int verdict)
{
	if (verdict == POLICY_WATCH)
		return REC_WATCH;
	return verdict == POLICY_GIVE_UP || verdict == POLICY_UNPROTECTED
		   ? REC_GIVE_UP
		   : REC_RECOVERY;
}

static struct ctl_rec *rec_find(struct ctl *c, uint32_t job, int attempt,
				enum rec_class cls)
{
	for (size_t i = 0; i < c->nrecs; i++) {
		struct ctl_rec *r = &c->recs[i];

		if (r->job == job && r->attempt == attempt &&
		    rec_class_of(r->verdict) == cls)
			return r;
	}
	return NULL;
}

static struct ctl_rec *rec_new(struct ctl *c)
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

static int verdict_of(const char *name)
{
	for (int v = POLICY_REQUEUE; v <= POLICY_UNPROTECTED; v++)
		if (!strcmp(policy_verdict_name((enum policy_verdict)v), name))
			return v;
	return -1;
}

static void ctl_last_set(struct ctl *c, uint32_t job, const char *nodes);

/* Rebuild recoveries and pool changes from the log. */
static int ctl_replay(const struct evlog_event *ev, void *arg)
{
	struct ctl *c = arg;
	struct ctl_rec *r;

	if (!strcmp(ev->type, "decide")) {
		int v = verdict_of(ev->verdict);

		if (v < 0)
			return 0;
		r = rec_find(c, ev->job, ev->attempt, rec_class_of(v));
		if (!r && !(r = rec_new(c)))
			return -ENOMEM;
		r->job = ev->job;
		r->uid = ev->uid;
		r->attempt = ev->attempt;
		r->verdict = v;
		r->warning = !strcmp(ev->kind, "warning");
		if (v == POLICY_WATCH)
			list_add(r->bad, sizeof(r->bad), ev->node);
		else
			sigma_strlcpy(r->bad, ev->node, sizeof(r->bad));
		sigma_strlcpy(r->spares, ev->spare, sizeof(r->spares));
		sigma_strlcpy(r->what, ev->text, sizeof(r->what));
		r->decided_at = ev->time;
		r->complete = v == POLICY_WATCH;
		return 0;
	}
	if (!strcmp(ev->type, "spare_add")) {
		list_add(c->added, sizeof(c->added), ev->node);
		list_del(c->removed, ev->node);
		return 0;
	}
	if (!strcmp(ev->type, "spare_remove")) {
		list_add(c->removed, sizeof(c->removed), ev->node);
		list_del(c->added, ev->node);
		return 0;
	}
	if (!strcmp(ev->type, "run")) {
		ctl_last_set(c, ev->job, ev->node);
		return 0;
	}
	r = rec_find(c, ev->job, ev->attempt,
		     strcmp(ev->type, "give_up") ? REC_RECOVERY : REC_GIVE_UP);
	if (!r && !strcmp(ev->type, "complete"))
		r = rec_find(c, ev->job, ev->attempt, REC_GIVE_UP);
	if (!r)
		return 0;
	if (!strcmp(ev->type, "signal")) {
		r->signalled = true;
		r->signalled_at = ev->time;
	} else if (!strcmp(ev->type, "stop")) {
		int k = sigma_parse_enum(ev->kind, stop_names);

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
	return 0;
}

/* ---- node helpers -------------------------------------------------------- */

#define CTL_UNHEALTHY (CTL_N_DOWN | CTL_N_DRAIN | CTL_N_NO_RESPOND | CTL_N_FAIL)

static bool node_healthy(const struct ctl_node *n)
{
	return !(n->flags & CTL_UNHEALTHY);
}

/* A failed node: what happened, or NULL when it did not fail. */
static const char *node_failed(const struct ctl_node *n)
{
	const char *what;

	if (sigma_reason_parse(n->reason, NULL, &what) == SIGMA_REASON_FAILURE &&
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

static int expand_add(const char *name, void *arg)
{
	char *list = arg;

	return list_add(list, SIGMAD_LIST_MAX, name);
}

/* Pool members: configured (list or feature) + added - removed. */
static void ctl_members(struct ctl *c, const struct ctl_view *v, char *out)
{
	char tmp[SIGMAD_LIST_MAX], *save = NULL, *tok;

	out[0] = '\0';
	if (c->cfg.spares[0] &&
	    ctl_slurm_expand(c->cfg.spares, expand_add, out))
		sigma_warn("sigmad_spares: cannot expand '%s'", c->cfg.spares);
	if (c->cfg.spare_feature[0])
		for (size_t i = 0; i < v->nnodes; i++)
			if (v->nodes[i].flags & CTL_N_FEATURE)
				list_add(out, SIGMAD_LIST_MAX,
					 v->nodes[i].name);
	sigma_strlcpy(tmp, c->added, sizeof(tmp));
	for (tok = strtok_r(tmp, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save))
		list_add(out, SIGMAD_LIST_MAX, tok);
	sigma_strlcpy(tmp, c->removed, sizeof(tmp));
	for (tok = strtok_r(tmp, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save))
		list_del(out, tok);
}

/*
 * The job's batch script failed with the trainer's "requeue me" codes (76: a
 * peer rank died, 79: the trouble follows the hardware) a short while ago:
 * the probe may still drain the node at fault, and sigmad then requeues it.
 */
static bool job_may_come_back(const struct ctl_job *job, int64_t now)
{
	return job->state == CTL_J_ENDED && job->failed &&
	       (job->exit_code == TRAIN_EXIT_PEER ||
		job->exit_code == TRAIN_EXIT_HARDWARE) &&
	       now - job->end_time <= CTL_FAILED_END_S;
}

/* A recovery or a give-up was decided for the job's current attempt. */
static bool ctl_decided(const struct ctl *c, const struct ctl_job *job)
{
	for (size_t i = 0; i < c->nrecs; i++) {
		const struct ctl_rec *r = &c->recs[i];
		enum rec_class cls = rec_class_of(r->verdict);

		if (r->job != job->id)
			continue;
		if ((cls == REC_RECOVERY &&
		     r->attempt == job->restart_cnt + 2) ||
		    (cls == REC_GIVE_UP && r->attempt == job->restart_cnt + 1))
			return true;
	}
	return false;
}

/*
 * A spare released for a recovery stays out of the pool until its job has
 * started (then the node is busy, or the job went elsewhere and it is free),
 * and while a job that ran on it may come back (job_may_come_back): the job
 * needs it again.
 */
static bool ctl_lent(const struct ctl *c, const struct ctl_view *v,
		     const char *node)
{
	for (size_t i = 0; i < c->nrecs; i++) {
		const struct ctl_rec *r = &c->recs[i];
		const struct ctl_job *job;

		if (!list_has(r->spares, node))
			continue;
		if (!r->complete)
			return true;
		job = ctl_view_job(v, r->job);
		if (job && job->state == CTL_J_PENDING &&
		    v->now - r->decided_at < CTL_LENT_S)
			return true;
		if (job && job_may_come_back(job, v->now) &&
		    !ctl_decided(c, job))
			return true;
	}
	return false;
}

static bool ctl_in_open_rec(const struct ctl *c, const char *node)
{
	for (size_t i = 0; i < c->nrecs; i++)
		if (!c->recs[i].complete && list_has(c->recs[i].bad, node))
			return true;
	return false;
}

/*
 * Node i runs a sigma job that is running. The node and job lists are
 * loaded one after the other, so a node may still look idle while the job
 * that was just given it already runs: such a node is no spare.
 */
static bool ctl_node_in_job(const struct ctl_view *v, size_t i)
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

/* The reservation's healthy nodes that run no job, as a comma list. */
static void ctl_pool_now(const struct ctl_view *v, char *out, size_t size)
{
	out[0] = '\0';
	for (size_t i = 0; i < v->nnodes; i++)
		if ((v->nodes[i].flags & CTL_N_RESERVED) &&
		    node_healthy(&v->nodes[i]) && !ctl_node_in_job(v, i))
			list_add(out, size, v->nodes[i].name);
}

static int ctl_resv_apply(struct ctl *c, struct ctl_view *v, const char *nodes)
{
	int rc = ctl_slurm_resv_set(c->cfg.reservation, nodes, v->resv_exists);

	if (rc)
		return rc;
	/* keep the view in step for the rest of this tick */
	v->nresv = 0;
	for (size_t i = 0; i < v->nnodes; i++) {
		v->nodes[i].flags &= ~(unsigned)CTL_N_RESERVED;
		if (list_has(nodes, v->nodes[i].name)) {
			v->nodes[i].flags |= CTL_N_RESERVED;
			v->nresv++;
		}
	}
	v->resv_exists = nodes[0] != '\0';
	return 0;
}

/* ---- the hot-spare pool -------------------------------------------------- */

/* a spare free to be reserved now: healthy, idle, in no job, not lent */
static bool ctl_spare_free(const struct ctl *c, const struct ctl_view *v,
			   long i)
{
	const struct ctl_node *n = &v->nodes[i];

	return node_healthy(n) && (n->flags & CTL_N_IDLE) &&
	       !ctl_node_in_job(v, (size_t)i) && !ctl_lent(c, v, n->name);
}

/* the first node of pool that is not a configured spare (a stand-in) */
static bool ctl_stand_in(const char *pool, const char *members, char *out,
			 size_t size)
{
	char tmp[SIGMAD_LIST_MAX], *save = NULL, *tok;

	sigma_strlcpy(tmp, pool, sizeof(tmp));
	for (tok = strtok_r(tmp, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save))
		if (!list_has(members, tok)) {
			sigma_strlcpy(out, tok, size);
			return true;
		}
	return false;
}

/*
 * Keep the reservation at the configured spares: fill it from them, and
 * when one of them is free again while a stand-in (a repaired node that
 * joined while the pool was short) holds its place, the stand-in goes back
 * to service.
 */
static void ctl_pool_sync(struct ctl *c, struct ctl_view *v)
{
	char members[SIGMAD_LIST_MAX], want[SIGMAD_LIST_MAX],
	    tmp[SIGMAD_LIST_MAX], out[CTL_NAME_MAX], gone[SIGMAD_LIST_MAX] = "";
	char *save = NULL, *tok;
	size_t target, have;
	bool changed = false;

	ctl_members(c, v, members);
	target = list_count(members);
	ctl_pool_now(v, want, sizeof(want));
	have = list_count(want);
	/* a reserved node that went bad leaves the pool (repair brings it back)
	 */
	if (have != v->nresv)
		changed = true;
	sigma_strlcpy(tmp, members, sizeof(tmp));
	for (tok = strtok_r(tmp, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		long i = ctl_view_node(v, tok);

		if (i < 0 || (v->nodes[i].flags & CTL_N_RESERVED))
			continue;
		if (!ctl_spare_free(c, v, i)) {
			sigma_debug("spare %s not reserved now (flags 0x%x%s)",
				    tok, v->nodes[i].flags,
				    ctl_lent(c, v, tok) ? ", lent" : "");
			continue;
		}
		if (have >= target) {
			if (!ctl_stand_in(want, members, out, sizeof(out)))
				break;
			list_del(want, out);
			list_add(gone, sizeof(gone), out);
			have--;
		}
		if (!list_add(want, sizeof(want), tok)) {
			have++;
			changed = true;
		}
	}
	if (!changed)
		return;
	if (ctl_resv_apply(c, v, want) == 0) {
		struct evlog_event ev;

		ev_init(&ev, "pool");
		sigma_strlcpy(ev.node, want, sizeof(ev.node));
		sigma_strlcpy(ev.spare, gone, sizeof(ev.spare));
		snprintf(ev.text, sizeof(ev.text),
			 "reservation %s holds %zu of %zu spares%s%s",
			 c->cfg.reservation, list_count(want), target,
			 gone[0] ? "; back to service: " : "", gone);
		sigma_info("spare pool: %s = [%s] (%zu of %zu)%s%s",
			   c->cfg.reservation, want, list_count(want), target,
			   gone[0] ? "; back to service: " : "", gone);
		ctl_log(c, &ev);
	}
}

/* ---- decisions ----------------------------------------------------------- */

static uint32_t ctl_node_failures(const struct ctl *c, const char *node)
{
	uint32_t n = 0;

	for (size_t i = 0; i < c->nrecs; i++)
		if (c->recs[i].verdict != POLICY_WATCH &&
		    list_has(c->recs[i].bad, node))
			n++;
	return n;
}

#define CTL_POOL_MAX 256

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
			if (list_has(members, v->nodes[o->nodes[k]].name))
				held++;
	}
	if (n > caps->spares_per_job)
		n = caps->spares_per_job;
	if (n > caps->spares_per_user - held)
		n = caps->spares_per_user - held;
	if (n < asked)
		sigma_info("job %u: %ld of its %ld spares allowed (site caps: %ld a job, %ld a user, who holds %ld)",
			   job->id, n > 0 ? n : 0, asked, caps->spares_per_job,
			   caps->spares_per_user, held);
	return n > 0 ? (int)n : 0;
}

static int ctl_decide(struct ctl *c, const struct ctl_view *v,
		      const struct ctl_job *job, int restarts, bool warning,
		      const char *bad, size_t nbad, const char *what)
{
	struct policy_spare spares[CTL_POOL_MAX];
	size_t idx[CTL_POOL_MAX], nsp = 0;
	struct sigma_block opts;
	struct policy_job pj;
	struct policy_plan plan;
	struct evlog_event ev;
	struct ctl_rec *r;
	int rc;

	if (sigma_block_parse(job->comment, &opts, NULL)) {
		sigma_warn(
		    "job %u: bad sigma[] block in AdminComment, not managed",
		    job->id);
		return 0;
	}
	for (size_t i = 0; i < v->nnodes && nsp < CTL_POOL_MAX; i++) {
		const struct ctl_node *n = &v->nodes[i];

		/*
		 * a spare an earlier decision took (in this very poll, say:
		 * failures that come together) is not free for this one
		 */
		if (!(n->flags & CTL_N_RESERVED) || !node_healthy(n) ||
		    list_has(bad, n->name) || ctl_node_in_job(v, i) ||
		    ctl_lent(c, v, n->name))
			continue;
		spares[nsp].failures = ctl_node_failures(c, n->name);
		spares[nsp].since = 0;
		spares[nsp].excluded = list_has(job->exc_nodes, n->name);
		idx[nsp++] = i;
	}
	if (job->unprotected) {
		/* no requeue, no spare: drain, and say what sigma cannot do */
		memset(&plan, 0, sizeof(plan));
		plan.verdict = POLICY_UNPROTECTED;
		plan.attempt = restarts + 1;
		plan.why = job->unprotected;
		goto out_record;
	}
	pj.id = job->id;
	pj.restarts = restarts;
	pj.max_restarts = (int)(opts.max_restarts < c->cfg.caps.max_restarts
				    ? opts.max_restarts
				    : c->cfg.caps.max_restarts);
	pj.spares = ctl_spares_allowed(c, v, job, opts.spares);
	pj.spares_used = 0; /* each recovery may hold up to spares */
	pj.on_warning = opts.on_warning;
	if (warning)
		rc = policy_plan_warning(&c->cfg.policy, &pj, nbad, spares, nsp,
					 &plan);
	else
		rc = policy_plan_failure(&c->cfg.policy, &pj, nbad, spares, nsp,
					 &plan);
	if (rc)
		return rc;
out_record:
	r = rec_new(c);
	if (!r)
		return -ENOMEM;
	r->job = job->id;
	r->uid = job->uid;
	r->attempt = plan.attempt;
	r->verdict = plan.verdict;
	r->warning = warning;
	r->decided_at = v->now;
	sigma_strlcpy(r->bad, bad, sizeof(r->bad));
	sigma_strlcpy(r->what, what, sizeof(r->what));
	for (size_t k = 0; k < plan.npicked; k++)
		list_add(r->spares, sizeof(r->spares),
			 v->nodes[idx[plan.picked[k]]].name);
	r->complete = plan.verdict == POLICY_WATCH;

	ev_from_rec(&ev, "decide", r);
	sigma_strlcpy(ev.kind, warning ? "warning" : "failure",
		      sizeof(ev.kind));
	sigma_strlcpy(ev.verdict, policy_verdict_name(plan.verdict),
		      sizeof(ev.verdict));
	sigma_strlcpy(ev.spare, r->spares, sizeof(ev.spare));
	if (plan.verdict == POLICY_WATCH && plan.why)
		/* no account follows a watch: the history says why here */
		(void)sigma_snprintf(ev.text, sizeof(ev.text), "%s; %s", what,
				     plan.why);
	else
		sigma_strlcpy(ev.text, what, sizeof(ev.text));
	sigma_info("job %u attempt %d: %s on %s (%s): %s%s%s (%s)", job->id,
		   r->attempt, warning ? "warning" : "failure", bad, what,
		   policy_verdict_name(plan.verdict),
		   r->spares[0] ? " onto " : "", r->spares, plan.why);
	/* the decision is on disk before anything is done about it */
	rc = ctl_log(c, &ev);
	if (rc) {
		c->nrecs--;
		return rc;
	}
	return 0;
}

static const char *ctl_last_nodes(const struct ctl *c, uint32_t job)
{
	for (size_t i = 0; i < c->nlast; i++)
		if (c->last[i].job == job)
			return c->last[i].nodes;
	return "";
}

/* remember the nodes of job (in memory; callers log them) */
static void ctl_last_set(struct ctl *c, uint32_t job, const char *nodes)
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
	n[c->nlast].job = job;
	sigma_strlcpy(n[c->nlast++].nodes, nodes, sizeof(n[0].nodes));
}

/*
 * The nodes each running sigma job runs on. They are what a recovery needs
 * after Slurm requeued a job itself (a node failure while sigmad was down,
 * say), so a new set is written to the event log ("run") and replayed at
 * start: a restart or an upgrade of sigmad strands no job.
 */
static void ctl_remember_nodes(struct ctl *c, const struct ctl_view *v)
{
	size_t kept = 0;

	/* a job slurmctld no longer knows needs nothing remembered */
	for (size_t i = 0; i < c->nlast; i++)
		if (ctl_view_job(v, c->last[i].job))
			c->last[kept++] = c->last[i];
	c->nlast = kept;
	for (size_t j = 0; j < v->njobs; j++) {
		const struct ctl_job *job = &v->jobs[j];
		char nodes[CTL_LIST_MAX] = "";
		struct evlog_event ev;

		if (job->state != CTL_J_RUNNING)
			continue; /* keep what we knew of it */
		for (size_t k = 0; k < job->nnodes; k++)
			list_add(nodes, sizeof(nodes),
				 v->nodes[job->nodes[k]].name);
		if (!strcmp(nodes, ctl_last_nodes(c, job->id)))
			continue;
		ctl_last_set(c, job->id, nodes);
		ev_init(&ev, "run");
		ev.job = job->id;
		ev.uid = job->uid;
		ev.attempt = job->restart_cnt + 1;
		sigma_strlcpy(ev.node, nodes, sizeof(ev.node));
		ctl_log(c, &ev);
	}
}

static void ctl_detect(struct ctl *c, const struct ctl_view *v)
{
	for (size_t j = 0; j < v->njobs; j++) {
		const struct ctl_job *job = &v->jobs[j];
		char bad[EVLOG_NODE_MAX] = "", warn[EVLOG_NODE_MAX] = "";
		char what[200] = "", wwhat[200] = "";
		size_t nbad = 0, nwarn = 0;
		struct ctl_rec *watch;
		int R = job->restart_cnt;

		if (job->state == CTL_J_RUNNING) {
			if (rec_find(c, job->id, R + 2, REC_RECOVERY) ||
			    rec_find(c, job->id, R + 1, REC_GIVE_UP))
				continue; /* handled, or given up at this
					     attempt */
			watch = rec_find(c, job->id, R + 2, REC_WATCH);
			for (size_t k = 0; k < job->nnodes; k++) {
				const struct ctl_node *n =
				    &v->nodes[job->nodes[k]];
				const char *w;

				if ((w = node_failed(n))) {
					if (!list_add(bad, sizeof(bad),
						      n->name) &&
					    !nbad++)
						sigma_strlcpy(what, w,
							      sizeof(what));
				} else if ((w = node_warned(n)) &&
					   !(watch &&
					     list_has(watch->bad, n->name))) {
					if (!list_add(warn, sizeof(warn),
						      n->name) &&
					    !nwarn++)
						sigma_strlcpy(wwhat, w,
							      sizeof(wwhat));
				}
			}
			if (nbad)
				ctl_decide(c, v, job, R, false, bad, nbad,
					   what);
			else if (nwarn)
				ctl_decide(c, v, job, R, true, warn, nwarn,
					   wwhat);
			continue;
		}
		/*
		 * Slurm requeued it after a node failure: take over from there.
		 * Or it ended NODE_FAIL and Slurm will not requeue it: do. Or
		 * its script failed with the trainer's "requeue me" codes (76:
		 * a peer rank died, 79: the trouble follows the hardware) and
		 * one of its nodes is now drained as failing: the probe (job
		 * epilog or health check) often drains the node a few seconds
		 * after the step ended, so an ended job is watched for
		 * CTL_FAILED_END_S.
		 */
		bool decided = rec_find(c, job->id, R + 2, REC_RECOVERY) ||
			       rec_find(c, job->id, R + 1, REC_GIVE_UP);
		/*
		 * whenever it happened: sigmad may have been down then (its
		 * last nodes come from the event log)
		 */
		bool slurm_requeued =
		    job->state == CTL_J_PENDING && R >= 1 &&
		    !rec_find(c, job->id, R + 1, REC_RECOVERY) &&
		    !rec_find(c, job->id, R, REC_GIVE_UP);
		bool node_failed_end =
		    job->state == CTL_J_ENDED && job->node_fail && !decided;
		bool script_failed_end =
		    !decided && job_may_come_back(job, v->now);

		node_failed_end = node_failed_end || script_failed_end;
		if (slurm_requeued || node_failed_end) {
			char tmp[CTL_LIST_MAX], *save = NULL, *tok;

			sigma_strlcpy(tmp, ctl_last_nodes(c, job->id),
				      sizeof(tmp));
			for (tok = strtok_r(tmp, ",", &save); tok;
			     tok = strtok_r(NULL, ",", &save)) {
				long i = ctl_view_node(v, tok);
				const char *w;

				if (i >= 0 && (w = node_failed(&v->nodes[i])) &&
				    !list_add(bad, sizeof(bad), tok) && !nbad++)
					sigma_strlcpy(what, w, sizeof(what));
			}
			if (!nbad)
				continue; /* not a node failure we can see */
			ctl_decide(c, v, job, slurm_requeued ? R - 1 : R, false,
				   bad, nbad, what);
		}
	}
}

/* ---- carrying a decision out --------------------------------------------- */

/*
 * How a job sent SIGUSR1 stopped: only exit 75 is a checkpoint; death by
 * the signal (a job that does not handle it) or another exit is not, and
 * the account says so.
 */
static const char *ctl_stop_text(const struct ctl_rec *r, char *buf,
				 size_t size)
{
	switch (r->stop) {
	case STOP_EXIT:
		if (r->stop_code == TRAIN_EXIT_REQUEUE)
			return "checkpointed";
		snprintf(buf, size, "stopped with exit %d, not a checkpoint",
			 r->stop_code);
		return buf;
	case STOP_SIGNAL:
		snprintf(buf, size,
			 "killed by signal %d, not a checkpoint (it does not handle SIGUSR1)",
			 r->stop_code);
		return buf;
	case STOP_RUNNING:
		return "still running after the grace, not a checkpoint";
	case STOP_UNKNOWN:
		break;
	}
	return "stopped";
}

static void ctl_account(const struct ctl_rec *r, const struct ctl_job *job,
			int max_restarts, char *out, size_t size)
{
	char stop[96];

	if (r->verdict == POLICY_GIVE_UP)
		(void)sigma_snprintf(
		    out, size,
		    "sigma: attempt %d: %s %s -> not requeued: max_restarts=%d reached",
		    r->attempt, r->bad, r->what, max_restarts);
	else if (r->verdict == POLICY_UNPROTECTED)
		(void)sigma_snprintf(
		    out, size,
		    "sigma: attempt %d: %s %s -> not requeued: sigma cannot protect this job: %s",
		    r->attempt, r->bad, r->what,
		    job && job->unprotected ? job->unprotected
					    : "Slurm cannot requeue it");
	else if (r->warning)
		(void)sigma_snprintf(
		    out, size, "sigma: attempt %d: %s warning %s -> %s, requeued onto %s",
		    r->attempt, r->bad, r->what, ctl_stop_text(r, stop, sizeof(stop)),
		    r->spares[0] ? r->spares : "free nodes");
	else if (r->spares[0])
		(void)sigma_snprintf(
		    out, size, "sigma: attempt %d: %s %s -> requeued onto %s",
		    r->attempt, r->bad, r->what, r->spares);
	else
		(void)sigma_snprintf(
		    out, size,
		    "sigma: attempt %d: %s %s -> requeued (no spare)",
		    r->attempt, r->bad, r->what);
}

static void ctl_drain_bad(struct ctl *c, struct ctl_view *v, struct ctl_rec *r)
{
	char tmp[EVLOG_NODE_MAX], reason[CTL_REASON_MAX], *save = NULL, *tok;

	sigma_strlcpy(tmp, r->bad, sizeof(tmp));
	for (tok = strtok_r(tmp, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		long i = ctl_view_node(v, tok);
		struct ctl_node *n;
		struct evlog_event ev;

		if (i < 0)
			continue;
		n = &v->nodes[i];
		if (c->cfg.down_on_no_respond &&
		    (n->flags & CTL_N_NO_RESPOND) && !(n->flags & CTL_N_DOWN)) {
			/* Slurm then requeues the job at once instead of in ~10
			 * s */
			if (!ctl_slurm_down(tok,
					    "sigma: node not responding")) {
				n->flags |= CTL_N_DOWN;
				sigma_strlcpy(n->reason,
					      "sigma: node not responding",
					      sizeof(n->reason));
			}
		}
		if (n->flags & CTL_N_DRAIN)
			continue; /* the probe, or an earlier sigmad, did it */
		if (n->reason[0] && !strncmp(n->reason, "sigma: ", 7))
			sigma_strlcpy(reason, n->reason, sizeof(reason));
		else
			snprintf(reason, sizeof(reason), "sigma: %s", r->what);
		if (ctl_slurm_drain(tok, reason)) {
			r->errors++;
			continue;
		}
		n->flags |= CTL_N_DRAIN;
		ev_from_rec(&ev, "drain", r);
		sigma_strlcpy(ev.node, tok, sizeof(ev.node));
		sigma_strlcpy(ev.text, reason, sizeof(ev.text));
		ctl_log(c, &ev);
	}
}

static void ctl_release(struct ctl *c, struct ctl_view *v, struct ctl_rec *r)
{
	char pool[SIGMAD_LIST_MAX], tmp[EVLOG_NODE_MAX], *save = NULL, *tok;
	bool any = false;
	struct evlog_event ev;

	ctl_pool_now(v, pool, sizeof(pool));
	/* also drop reserved nodes that went bad, as the pool sync would */
	sigma_strlcpy(tmp, r->spares, sizeof(tmp));
	for (tok = strtok_r(tmp, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (list_has(pool, tok)) {
			list_del(pool, tok);
			any = true;
		}
	}
	if (any && ctl_resv_apply(c, v, pool)) {
		r->errors++;
		return;
	}
	r->released = true;
	ev_from_rec(&ev, "release", r);
	sigma_strlcpy(ev.spare, r->spares, sizeof(ev.spare));
	ctl_log(c, &ev);
}

/*
 * How a signalled job stopped, written to the event log before it is
 * requeued (Slurm forgets it then), so a restarted sigmad tells it too.
 */
static int ctl_note_stop(struct ctl *c, struct ctl_rec *r,
			 const struct ctl_job *job)
{
	struct evlog_event ev;
	char text[96];

	r->stop = job->state == CTL_J_RUNNING ? STOP_RUNNING
		  : job->term_sig		? STOP_SIGNAL
						: STOP_EXIT;
	r->stop_code = job->term_sig ? job->term_sig : job->exit_code;
	ev_from_rec(&ev, "stop", r);
	ev.rc = r->stop_code;
	sigma_strlcpy(ev.kind, stop_names[r->stop], sizeof(ev.kind));
	sigma_strlcpy(ev.text, ctl_stop_text(r, text, sizeof(text)),
		      sizeof(ev.text));
	return ctl_log(c, &ev);
}

/*
 * Where the requeued job will run: its last nodes without the bad ones,
 * with the spares. Should a spare fail the job's prolog before a poll
 * sees the job run there, the next recovery then blames that spare, not
 * a node the job already left.
 */
static void ctl_expect_nodes(struct ctl *c, const struct ctl_rec *r)
{
	char next[CTL_LIST_MAX] = "", tmp[CTL_LIST_MAX], *save = NULL, *tok;
	struct evlog_event ev;

	sigma_strlcpy(tmp, ctl_last_nodes(c, r->job), sizeof(tmp));
	for (tok = strtok_r(tmp, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save))
		if (!list_has(r->bad, tok))
			list_add(next, sizeof(next), tok);
	sigma_strlcpy(tmp, r->spares, sizeof(tmp));
	for (tok = strtok_r(tmp, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save))
		list_add(next, sizeof(next), tok);
	if (!next[0])
		return;
	ctl_last_set(c, r->job, next);
	ev_from_rec(&ev, "run", r);
	sigma_strlcpy(ev.node, next, sizeof(ev.node));
	sigma_strlcpy(ev.text, "expected after the requeue", sizeof(ev.text));
	ctl_log(c, &ev);
}

/* 0: done; 1: waiting on Slurm; <0: failed */
static int ctl_requeue(struct ctl *c, struct ctl_view *v, struct ctl_rec *r,
		       const struct ctl_job *job)
{
	char exc[CTL_LIST_MAX], tmp[EVLOG_NODE_MAX], *save = NULL, *tok;
	struct evlog_event ev;

	if (job->restart_cnt < r->attempt - 1) {
		if (job->state == CTL_J_PENDING || job->completing)
			return 1;
		if (r->warning && r->stop == STOP_UNKNOWN &&
		    ctl_note_stop(c, r, job))
			return -EIO;
		if (ctl_slurm_requeue(job->id)) {
			r->errors++;
			return -EIO;
		}
		return 1;
	}
	if (job->state != CTL_J_PENDING) {
		/* requeued and already started again (a crash hid the log line)
		 */
		r->requeued = true;
		ev_from_rec(&ev, "requeue", r);
		sigma_strlcpy(ev.text, "found the job started again",
			      sizeof(ev.text));
		ctl_log(c, &ev);
		return 0;
	}
	/* exc_nodes is refused on a running job: wait for PENDING exactly */
	if (job->completing)
		return 1;
	sigma_strlcpy(exc, job->exc_nodes, sizeof(exc));
	sigma_strlcpy(tmp, r->bad, sizeof(tmp));
	for (tok = strtok_r(tmp, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save))
		if (!list_has(exc, tok))
			list_add(exc, sizeof(exc), tok);
	/*
	 * Not at once: begin_time = now races the credential revocation, and
	 * the slurmstepd of the last attempt's step may still be cleaning up
	 * on a node the job keeps (seconds after the job ended); a new
	 * attempt's step of the same id there would find its PMIx socket
	 * taken and fail to launch.
	 */
	if (ctl_slurm_pending_update(job->id, exc,
				     v->now + c->cfg.restart_delay_s)) {
		r->errors++;
		return -EIO;
	}
	r->requeued = true;
	ctl_expect_nodes(c, r);
	ev_from_rec(&ev, "requeue", r);
	sigma_strlcpy(ev.spare, r->spares, sizeof(ev.spare));
	(void)sigma_snprintf(ev.text, sizeof(ev.text),
			     "exc_nodes=%s begin_time=now+%lld", exc,
			     (long long)c->cfg.restart_delay_s);
	ctl_log(c, &ev);
	return 0;
}

/*
 * End a recovery with its account: appended to the job's AdminComment
 * (after the plugin's sigma[...] block), then the history. A failed
 * AdminComment write is retried at the next tick.
 */
static void ctl_finish(struct ctl *c, struct ctl_rec *r,
		       const struct ctl_job *job, const char *account)
{
	char comment[CTL_COMMENT_MAX];
	struct evlog_event ev;

	/* the whole account: a give-up and the recovery before it may name
	 * the same attempt */
	if (job && !strstr(job->comment, account)) {
		if (sigma_snprintf(comment, sizeof(comment), "%s %s",
				   job->comment, account) < 0)
			sigma_warn(
			    "job %u: AdminComment full, account not appended",
			    job->id);
		else if (ctl_slurm_admin_comment(job->id, comment)) {
			r->errors++;
			return;
		}
	}
	r->complete = true;
	ev_from_rec(&ev,
		    r->verdict == POLICY_GIVE_UP || r->verdict == POLICY_UNPROTECTED
			? "give_up"
			: "complete",
		    r);
	sigma_strlcpy(ev.spare, r->spares, sizeof(ev.spare));
	sigma_strlcpy(ev.text, account, sizeof(ev.text));
	sigma_info("job %u: %s", r->job, account);
	ctl_log(c, &ev);
}

static void ctl_complete(struct ctl *c, struct ctl_rec *r,
			 const struct ctl_job *job)
{
	char account[512];
	struct sigma_block opts;

	sigma_block_parse(job ? job->comment : NULL, &opts, NULL);
	ctl_account(r, job, opts.max_restarts, account, sizeof(account));
	ctl_finish(c, r, job, account);
}

/* end a recovery without carrying it out, saying why in the account */
static void ctl_abandon(struct ctl *c, struct ctl_rec *r,
			const struct ctl_job *job, const char *why)
{
	char account[512];

	(void)sigma_snprintf(account, sizeof(account),
			     "sigma: attempt %d: %s %s%s -> %s", r->attempt,
			     r->bad, r->warning ? "warning " : "", r->what,
			     why);
	ctl_finish(c, r, job, account);
}

static void ctl_step(struct ctl *c, struct ctl_view *v, struct ctl_rec *r)
{
	const struct ctl_job *job = ctl_view_job(v, r->job);
	struct evlog_event ev;

	if (r->errors >= CTL_STEP_RETRIES) {
		sigma_error(
		    "job %u attempt %d: giving up after %d failed Slurm calls",
		    r->job, r->attempt, r->errors);
		r->complete = true;
		ev_from_rec(&ev, "complete", r);
		sigma_strlcpy(ev.text, "abandoned: Slurm refused the steps",
			      sizeof(ev.text));
		ctl_log(c, &ev);
		return;
	}
	ctl_drain_bad(c, v, r);
	if (!job) {
		/* gone from slurmctld (purged): nothing left to move */
		ctl_complete(c, r, NULL);
		return;
	}
	if (r->verdict == POLICY_GIVE_UP || r->verdict == POLICY_DRAIN_ONLY ||
	    r->verdict == POLICY_UNPROTECTED) {
		ctl_complete(c, r, job);
		return;
	}
	if (job->cancelled && !r->requeued) {
		/* the user's scancel is final: no requeue, spares go back */
		ctl_abandon(c, r, job, "the job was cancelled: not requeued");
		return;
	}
	if (r->verdict == POLICY_CHECKPOINT) {
		if (!r->signalled) {
			/* logged first: after a crash the job is not signalled
			 * twice */
			r->signalled = true;
			r->signalled_at = v->now;
			ev_from_rec(&ev, "signal", r);
			sigma_strlcpy(ev.text, "SIGUSR1: checkpoint and stop",
				      sizeof(ev.text));
			if (ctl_log(c, &ev))
				return;
			if (job->state == CTL_J_RUNNING &&
			    ctl_slurm_signal(job->id, SIGUSR1))
				r->errors++;
			return;
		}
		if (!policy_warning_move_due(&c->cfg.policy, r->signalled_at,
					     v->now,
					     job->state == CTL_J_RUNNING))
			return;
	}
	if (!r->released)
		ctl_release(c, v, r);
	if (!r->released)
		return;
	if (!r->requeued && ctl_requeue(c, v, r, job) != 0)
		return;
	ctl_complete(c, r, job);
}

/* ---- return to service --------------------------------------------------- */

static struct ctl_tries *ctl_tries_of(struct ctl *c, const char *node)
{
	for (size_t i = 0; i < c->ntries; i++)
		if (!strcmp(c->tries[i].node, node))
			return &c->tries[i];
	if (c->ntries == CTL_MAX_TRIES)
		return NULL;
	memset(&c->tries[c->ntries], 0, sizeof(c->tries[0]));
	sigma_strlcpy(c->tries[c->ntries].node, node, sizeof(c->tries[0].node));
	return &c->tries[c->ntries++];
}

/*
 * Start the probe command for node: words split on blanks, %n replaced by
 * the node name, no shell. Its result is collected by ctl_repair_collect.
 */
static int ctl_probe_start(struct ctl *c, const char *node,
			   struct ctl_proc *p)
{
	char cmd[SIGMAD_LIST_MAX], words[32][512], *argv[33], *save = NULL,
							      *tok;
	char env_node[CTL_NAME_MAX + 20], env_conf[PATH_MAX + 16];
	char *env[] = {env_node, env_conf, NULL};
	int argc = 0;

	sigma_strlcpy(cmd, c->cfg.probe_command, sizeof(cmd));
	for (tok = strtok_r(cmd, " \t", &save); tok && argc < 32;
	     tok = strtok_r(NULL, " \t", &save)) {
		char *w = words[argc];
		size_t n = 0;

		for (const char *q = tok; *q && n + 1 < sizeof(words[0]); q++) {
			if (q[0] == '%' && q[1] == 'n') {
				n += sigma_strlcpy(w + n, node,
						   sizeof(words[0]) - n);
				q++;
			} else {
				w[n++] = *q;
			}
		}
		w[n < sizeof(words[0]) ? n : sizeof(words[0]) - 1] = '\0';
		argv[argc++] = w;
	}
	argv[argc] = NULL;
	if (!argc)
		return -EINVAL;
	snprintf(env_node, sizeof(env_node), "SLURMD_NODENAME=%s", node);
	snprintf(env_conf, sizeof(env_conf), "SIGMA_CONF=%s", c->config_path);
	return ctl_proc_start(p, argv, env, CTL_PROBE_TIMEOUT_S);
}

/* collect every repair probe that has ended; never waits */
static void ctl_repair_collect(struct ctl *c)
{
	for (size_t i = 0; i < c->ntries; i++) {
		struct ctl_tries *t = &c->tries[i];

		if (!t->probe.pid || !ctl_proc_poll(&t->probe, &t->rc))
			continue;
		sigma_strlcpy(t->out, t->probe.out, sizeof(t->out));
		t->out[strcspn(t->out, "\n")] = '\0';
		t->done = true;
	}
}

static void ctl_repair(struct ctl *c, struct ctl_view *v)
{
	char members[SIGMAD_LIST_MAX];
	size_t target;

	if (!c->cfg.probe_command[0])
		return;
	ctl_repair_collect(c);
	ctl_members(c, v, members);
	target = list_count(members);
	for (size_t i = 0; i < v->nnodes; i++) {
		struct ctl_node *n = &v->nodes[i];
		enum sigma_reason cls = sigma_reason_parse(n->reason, NULL, NULL);
		struct ctl_tries *t;
		struct evlog_event ev;
		char out[256], pool[SIGMAD_LIST_MAX], reason[CTL_REASON_MAX];
		enum policy_return ret;
		int rc;

		if (cls == SIGMA_REASON_NONE || cls == SIGMA_REASON_ADMIN ||
		    !(n->flags & CTL_N_DRAIN) || !(n->flags & CTL_N_IDLE) ||
		    (n->flags & CTL_N_NO_RESPOND) ||
		    ctl_in_open_rec(c, n->name))
			continue;
		t = ctl_tries_of(c, n->name);
		if (!t || t->probe.pid)
			continue; /* its probe still runs */
		if (!t->done) {
			if (!policy_repair_due(&c->cfg.policy, n->reason_time,
					       v->now) ||
			    (t->last && !policy_repair_due(&c->cfg.policy,
							   t->last, v->now)))
				continue;
			t->last = v->now;
			if (ctl_probe_start(c, n->name, &t->probe) == 0)
				continue; /* collected at a later tick */
			t->rc = 3;
			snprintf(t->out, sizeof(t->out),
				 "cannot start sigmad_probe_command");
		}
		t->done = false;
		rc = t->rc;
		sigma_strlcpy(out, t->out, sizeof(out));
		if (rc != SIGMA_PROBE_EXIT_OK && rc != SIGMA_PROBE_EXIT_FAIL &&
		    rc != SIGMA_PROBE_EXIT_WARN && rc != SIGMA_PROBE_EXIT_UNJUDGED)
			t->tries++;
		ctl_pool_now(v, pool, sizeof(pool));
		ret = policy_after_probe(&c->cfg.policy, rc, t->tries,
					 list_count(pool), target);
		ev_init(&ev, "repair");
		sigma_strlcpy(ev.node, n->name, sizeof(ev.node));
		ev.rc = rc;
		sigma_strlcpy(ev.kind, policy_return_name(ret),
			      sizeof(ev.kind));
		sigma_strlcpy(ev.text, out, sizeof(ev.text));
		ctl_log(c, &ev);
		sigma_info("repair probe of %s: exit %d (%s): %s", n->name, rc,
			   out, policy_return_name(ret));
		switch (ret) {
		case POLICY_RETURN_TO_POOL:
			/* reserve before resuming, so no job slips in between
			 */
			list_add(pool, sizeof(pool), n->name);
			if (ctl_resv_apply(c, v, pool))
				break;
			/* fall through */
		case POLICY_RETURN_TO_SERVICE:
			if (ctl_slurm_resume(n->name))
				break;
			n->flags &= ~(unsigned)(CTL_N_DRAIN | CTL_N_DOWN);
			t->tries = 0;
			t->last = 0;
			ev_init(&ev, "return");
			sigma_strlcpy(ev.node, n->name, sizeof(ev.node));
			sigma_strlcpy(ev.kind,
				      ret == POLICY_RETURN_TO_POOL ? "pool"
								   : "service",
				      sizeof(ev.kind));
			snprintf(ev.text, sizeof(ev.text),
				 "full probe healthy after %s", n->reason);
			ctl_log(c, &ev);
			break;
		case POLICY_STAY_DRAINED:
			if (rc == SIGMA_PROBE_EXIT_FAIL ||
			    rc == SIGMA_PROBE_EXIT_WARN) {
				/* a fresh reason restarts the cool-down */
				if (sigma_reason_parse(out, NULL, NULL) !=
				    SIGMA_REASON_NONE)
					sigma_strlcpy(reason, out,
						      sizeof(reason));
				else
					(void)sigma_reason_format(
					    reason, sizeof(reason),
					    rc == SIGMA_PROBE_EXIT_WARN,
					    SIGMA_LEVEL_FULL,
					    out[0] ? out : "still failing");
				ctl_slurm_drain(n->name, reason);
			}
			break;
		case POLICY_PROBE_AGAIN:
			break;
		}
	}
	/* a result for a node that left repair meanwhile is stale */
	for (size_t i = 0; i < c->ntries; i++)
		c->tries[i].done = false;
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
	rc = sigma_mkdir_p(cfg->state_dir, 0700);
	if (rc) {
		sigma_error("state directory %s: %s", cfg->state_dir,
			    strerror(-rc));
		goto out_free;
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
	for (size_t i = 0; i < c->ntries; i++)
		ctl_proc_kill(&c->tries[i].probe);
	evlog_close(&c->log);
	ctl_view_free(&c->view);
	free(c->recs);
	free(c->last);
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

const char *ctl_event_log(const struct ctl *c)
{
	return c->log_path;
}

int ctl_tick(struct ctl *c)
{
	struct ctl_view v;
	size_t open = 0;
	int rc;

	rc = ctl_slurm_load(&v, c->cfg.reservation, c->cfg.spare_feature);
	if (rc)
		return rc;
	ctl_pool_sync(c, &v);
	ctl_detect(c, &v);
	for (size_t i = 0; i < c->nrecs; i++) {
		if (c->recs[i].complete)
			continue;
		ctl_step(c, &v, &c->recs[i]);
		open++;
	}
	ctl_repair(c, &v);
	ctl_remember_nodes(c, &v);
	ctl_view_free(&c->view);
	c->view = v;
	return 0;
}

/* ---- commands ------------------------------------------------------------ */

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
		enum sigma_reason k = sigma_reason_parse(nd->reason, NULL, NULL);

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

int ctl_cmd_status(struct ctl *c, FILE *out, uid_t uid, bool all)
{
	const struct ctl_view *v = &c->view;
	char members[SIGMAD_LIST_MAX], pool[SIGMAD_LIST_MAX];
	size_t n = 0;

	ctl_members(c, v, members);
	ctl_pool_now(v, pool, sizeof(pool));
	fprintf(out, "spares: %s (%zu of %zu in reservation %s)\n",
		pool[0] ? pool : "none", list_count(pool), list_count(members),
		c->cfg.reservation);
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
	fprintf(out, "recoveries in progress:\n");
	n = 0;
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

	ev_init(&ev, type);
	ev.uid = (uint32_t)uid;
	sigma_strlcpy(ev.node, node, sizeof(ev.node));
	sigma_strlcpy(ev.text, text, sizeof(ev.text));
	ctl_log(c, &ev);
}

int ctl_cmd_spare_add(struct ctl *c, const char *node, uid_t uid, FILE *out)
{
	if (ctl_cmd_node(c, node, out) < 0)
		return -ENOENT;
	if (list_add(c->added, sizeof(c->added), node)) {
		fprintf(out, "error: too many spares\n");
		return -ENAMETOOLONG;
	}
	list_del(c->removed, node);
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
	list_del(c->added, node);
	list_add(c->removed, sizeof(c->removed), node);
	ctl_pool_now(&c->view, pool, sizeof(pool));
	if (list_has(pool, node)) {
		list_del(pool, node);
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
	if (sigma_snprintf(full, sizeof(full), SIGMA_REASON_ADMIN_PREFIX "%s", reason) <
	    0) {
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
