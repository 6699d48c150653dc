/*
 * ctl_repair.c - return to service: a node sigma drained is probed again
 * (sigmad_probe_command, full level) once its cool-down is over, without
 * waiting for the probe, and the policy says where it goes: back to
 * service, into the spare pool when it is short, or it stays drained.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "contract.h"
#include "ctl_internal.h"
#include "policy.h"
#include "sigma.h"
#include "slurm_api.h"

#define CTL_PROBE_TIMEOUT_S 300

/* the probe command's words split on blanks, %n replaced by the node name */
int ctl_probe_start(struct ctl *c, const char *node, struct ctl_proc *p)
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
		return -ENOENT;
	snprintf(env_node, sizeof(env_node), "SLURMD_NODENAME=%s", node);
	snprintf(env_conf, sizeof(env_conf), "SIGMA_CONF=%s", c->config_path);
	return ctl_proc_start(p, argv, env, CTL_PROBE_TIMEOUT_S);
}

/* collect every repair probe that has ended; never waits */
static void ctl_repair_collect(struct ctl *c)
{
	for (size_t i = 0; i < c->tries.n; i++) {
		struct ctl_tries *t = c->tries.v[i];

		if (!t->probe.pid || !ctl_proc_poll(&t->probe, &t->rc))
			continue;
		sigma_strlcpy(t->out, t->probe.out, sizeof(t->out));
		t->out[strcspn(t->out, "\n")] = '\0';
		t->done = true;
	}
}

/* n is sigma's to repair: drained by sigma, idle, answering, not in a
 * recovery still open */
static bool ctl_repairable(const struct ctl *c, const struct ctl_node *n)
{
	enum sigma_reason cls = sigma_reason_parse(n->reason, NULL, NULL);

	return cls != SIGMA_REASON_NONE && cls != SIGMA_REASON_ADMIN &&
	       (n->flags & CTL_N_DRAIN) && (n->flags & CTL_N_IDLE) &&
	       !(n->flags & CTL_N_NO_RESPOND) && !ctl_in_open_rec(c, n->name);
}

/*
 * true when t holds a probe result for n. Otherwise the probe is started
 * if it is due, and collected at a later tick; a probe that cannot start
 * is a result at once.
 */
static bool ctl_repair_result(struct ctl *c, const struct ctl_view *v,
			      const struct ctl_node *n, struct ctl_tries *t)
{
	if (t->probe.pid)
		return false; /* its probe still runs */
	if (t->done)
		return true;
	if (!policy_repair_due(&c->cfg.policy, n->reason_time, v->now) ||
	    (t->last && !policy_repair_due(&c->cfg.policy, t->last, v->now)))
		return false;
	t->last = v->now;
	if (ctl_probe_start(c, n->name, &t->probe) == 0)
		return false; /* collected at a later tick */
	t->rc = 3;
	snprintf(t->out, sizeof(t->out), "cannot start sigmad_probe_command");
	return true;
}

/* healthy: resume n, into the pool first when ret says so */
static void ctl_repair_return(struct ctl *c, struct ctl_view *v,
			      struct ctl_node *n, struct ctl_tries *t,
			      enum policy_return ret, char *pool, size_t size)
{
	struct evlog_event ev;

	if (ret == POLICY_RETURN_TO_POOL) {
		/* reserve before resuming, so no job slips in between */
		sigma_list_add(pool, size, n->name);
		if (ctl_resv_apply(c, v, pool))
			return;
	}
	if (ctl_slurm_resume(n->name))
		return;
	n->flags &= ~(unsigned)(CTL_N_DRAIN | CTL_N_DOWN);
	t->tries = 0;
	t->last = 0;
	ctl_ev_init(&ev, "return");
	sigma_strlcpy(ev.node, n->name, sizeof(ev.node));
	sigma_strlcpy(ev.kind,
		      ret == POLICY_RETURN_TO_POOL ? "pool" : "service",
		      sizeof(ev.kind));
	snprintf(ev.text, sizeof(ev.text), "full probe healthy after %s",
		 n->reason);
	ctl_log(c, &ev);
}

/* still failing or warned: a fresh reason restarts the cool-down */
static void ctl_repair_redrain(const char *node, int rc, const char *out)
{
	char reason[CTL_REASON_MAX];

	if (sigma_reason_parse(out, NULL, NULL) != SIGMA_REASON_NONE)
		sigma_strlcpy(reason, out, sizeof(reason));
	else
		(void)sigma_reason_format(
		    reason, sizeof(reason), rc == SIGMA_PROBE_EXIT_WARN,
		    SIGMA_LEVEL_FULL, out[0] ? out : "still failing");
	ctl_slurm_drain(node, reason);
}

/* the probe of n ended with t->rc: log it, and act as the policy says */
static void ctl_repair_judge(struct ctl *c, struct ctl_view *v,
			     struct ctl_node *n, struct ctl_tries *t,
			     size_t target)
{
	char out[256], pool[SIGMAD_LIST_MAX];
	struct evlog_event ev;
	enum policy_return ret;
	int rc = t->rc;

	t->done = false;
	sigma_strlcpy(out, t->out, sizeof(out));
	if (rc != SIGMA_PROBE_EXIT_OK && rc != SIGMA_PROBE_EXIT_FAIL &&
	    rc != SIGMA_PROBE_EXIT_WARN && rc != SIGMA_PROBE_EXIT_UNJUDGED)
		t->tries++;
	ctl_pool_now(v, pool, sizeof(pool));
	ret = policy_after_probe(&c->cfg.policy, rc, t->tries,
				 sigma_list_count(pool), target);
	ctl_ev_init(&ev, "repair");
	sigma_strlcpy(ev.node, n->name, sizeof(ev.node));
	ev.rc = rc;
	sigma_strlcpy(ev.kind, policy_return_name(ret), sizeof(ev.kind));
	sigma_strlcpy(ev.text, out, sizeof(ev.text));
	ctl_log(c, &ev);
	sigma_info("repair probe of %s: exit %d (%s): %s", n->name, rc, out,
		   policy_return_name(ret));
	switch (ret) {
	case POLICY_RETURN_TO_POOL:
	case POLICY_RETURN_TO_SERVICE:
		ctl_repair_return(c, v, n, t, ret, pool, sizeof(pool));
		break;
	case POLICY_STAY_DRAINED:
		if (rc == SIGMA_PROBE_EXIT_FAIL || rc == SIGMA_PROBE_EXIT_WARN)
			ctl_repair_redrain(n->name, rc, out);
		break;
	case POLICY_PROBE_AGAIN:
		break;
	}
}

/* sigma's own drain holds n: it stays in repair */
static bool ctl_in_repair(const struct ctl_node *n)
{
	enum sigma_reason cls = sigma_reason_parse(n->reason, NULL, NULL);

	return (n->flags & CTL_N_DRAIN) && cls != SIGMA_REASON_NONE &&
	       cls != SIGMA_REASON_ADMIN;
}

/*
 * Forget the nodes back in service, or gone, whose probe is not running:
 * the table holds the nodes in repair only. A result for a node that left
 * repair meanwhile is stale.
 */
static void ctl_repair_forget(struct ctl *c, const struct ctl_view *v)
{
	for (size_t i = c->tries.n; i-- > 0;) {
		struct ctl_tries *t = c->tries.v[i];
		long k = ctl_view_node(v, t->node);

		t->done = false;
		if (!t->probe.pid && (k < 0 || !ctl_in_repair(&v->nodes[k])))
			ctl_tries_drop(&c->tries, t->node);
	}
}

void ctl_repair(struct ctl *c, struct ctl_view *v)
{
	char members[SIGMAD_LIST_MAX];
	size_t target;

	if (!c->cfg.probe_command[0])
		return;
	ctl_repair_collect(c);
	ctl_members(c, v, members);
	target = sigma_list_count(members);
	for (size_t i = 0; i < v->nnodes; i++) {
		struct ctl_node *n = &v->nodes[i];
		struct ctl_tries *t;

		if (!ctl_repairable(c, n))
			continue;
		t = ctl_tries_get(&c->tries, n->name);
		if (t && ctl_repair_result(c, v, n, t))
			ctl_repair_judge(c, v, n, t, target);
	}
	ctl_repair_forget(c, v);
}
