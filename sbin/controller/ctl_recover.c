/*
 * ctl_recover.c - carrying a decision out, one step a tick: drain the bad
 * nodes, ask a warned job to checkpoint (SIGUSR1) and wait for it, release
 * its spares from the reservation, requeue it with the bad nodes excluded,
 * and end with the account in its AdminComment. Each step is checked
 * against Slurm before it is taken and logged after, so a sigmad that
 * crashed in between neither repeats nor skips one.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "contract.h"
#include "ctl_internal.h"
#include "policy.h"
#include "sigma.h"
#include "slurm_api.h"

#define CTL_STEP_RETRIES 20 /* failed Slurm calls before a step gives up */
#define CTL_ACCOUNT_WAIT_S 600 /* an account waits this long for slurmdbd */
#define CTL_ACCOUNT_VERIFY 60  /* ticks a finished job's account is checked */

/* ---- the account --------------------------------------------------------- */

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
		snprintf(
		    buf, size,
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
		    out, size,
		    "sigma: attempt %d: %s warning %s -> %s, requeued onto %s",
		    r->attempt, r->bad, r->what,
		    ctl_stop_text(r, stop, sizeof(stop)),
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

/* ---- the steps ----------------------------------------------------------- */

static bool node_out(const struct ctl_node *n)
{
	return n->flags & (CTL_N_DRAIN | CTL_N_DOWN);
}

static void ctl_drain_bad(struct ctl *c, struct ctl_view *v, struct ctl_rec *r)
{
	char tmp[EVLOG_NODE_MAX], reason[CTL_REASON_MAX], why[320];
	char *save = NULL, *tok;

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
		/* a warning on its own rank's word (sigmactl slow) moves
		 * the job alone: the node stays in service for the others */
		if (r->warning && !node_out(n) &&
		    sigma_list_has(ctl_slow_nodes(c, r->job), tok))
			continue;
		/* the probe, or an earlier sigmad, did it; or someone
		 * else's reason stands */
		if (ctl_drain_decide(n, SIGMA_ASK_JOB_FAILED, why,
				     sizeof(why)) != SIGMA_DRAIN_SET)
			continue;
		if (n->reason[0] && !strncmp(n->reason, "sigma: ", 7))
			sigma_strlcpy(reason, n->reason, sizeof(reason));
		else
			snprintf(reason, sizeof(reason), "sigma: %s", r->what);
		if (ctl_slurm_drain(tok, reason)) {
			r->errors++;
			continue;
		}
		n->flags |= CTL_N_DRAIN;
		ctl_ev_from_rec(&ev, "drain", r);
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
		if (sigma_list_has(pool, tok)) {
			sigma_list_del(pool, tok);
			any = true;
		}
	}
	if (any && ctl_resv_apply(c, v, pool)) {
		r->errors++;
		return;
	}
	r->released = true;
	ctl_ev_from_rec(&ev, "release", r);
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
		  : job->term_sig	      ? STOP_SIGNAL
					      : STOP_EXIT;
	r->stop_code = job->term_sig ? job->term_sig : job->exit_code;
	ctl_ev_from_rec(&ev, "stop", r);
	ev.rc = r->stop_code;
	sigma_strlcpy(ev.kind, ctl_stop_names[r->stop], sizeof(ev.kind));
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
		if (!sigma_list_has(r->bad, tok))
			sigma_list_add(next, sizeof(next), tok);
	sigma_strlcpy(tmp, r->spares, sizeof(tmp));
	for (tok = strtok_r(tmp, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save))
		sigma_list_add(next, sizeof(next), tok);
	if (!next[0])
		return;
	ctl_last_set(c, r->job, next);
	ctl_ev_from_rec(&ev, "run", r);
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
		if (ctl_slurm_requeue(job->id) < 0) {
			r->errors++;
			return -EIO;
		}
		return 1;
	}
	if (job->state != CTL_J_PENDING) {
		/* requeued and already started again (a crash hid the log
		 * line, or Slurm requeued it itself: expedited requeue), or
		 * requeued and ended since (scancel) */
		r->requeued = true;
		ctl_ev_from_rec(&ev, "requeue", r);
		sigma_strlcpy(ev.text,
			      job->state == CTL_J_RUNNING
				  ? "found the job started again"
				  : "found the job requeued, ended since",
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
		if (!sigma_list_has(exc, tok))
			sigma_list_add(exc, sizeof(exc), tok);
	/*
	 * Not at once: begin_time = now races the credential revocation, and
	 * the slurmstepd of the last attempt's step may still be cleaning up
	 * on a node the job keeps (seconds after the job ended); a new
	 * attempt's step of the same id there would find its PMIx socket
	 * taken and fail to launch. An expedited job is left as Slurm made
	 * it: eligible now, once the epilog on its nodes has ended.
	 */
	if (ctl_slurm_pending_update(job->id, exc,
				     job->expedited
					 ? 0
					 : v->now + c->cfg.restart_delay_s)) {
		r->errors++;
		return -EIO;
	}
	r->requeued = true;
	ctl_expect_nodes(c, r);
	ctl_ev_from_rec(&ev, "requeue", r);
	sigma_strlcpy(ev.spare, r->spares, sizeof(ev.spare));
	if (job->expedited)
		(void)sigma_snprintf(ev.text, sizeof(ev.text),
				     "exc_nodes=%s (expedited: no begin time)",
				     exc);
	else
		(void)sigma_snprintf(ev.text, sizeof(ev.text),
				     "exc_nodes=%s begin_time=now+%lld", exc,
				     (long long)c->cfg.restart_delay_s);
	ctl_log(c, &ev);
	return 0;
}

/* ---- the end of a recovery ----------------------------------------------- */

/*
 * End a recovery with its account: appended to the job's AdminComment
 * (after the plugin's sigma[...] block), then the history. A failed
 * AdminComment write is retried at the next tick; one that waits for
 * slurmdbd (a finished job's account goes to its accounting record) is not
 * a failure until CTL_ACCOUNT_WAIT_S.
 */
static void ctl_finish(struct ctl *c, struct ctl_rec *r,
		       const struct ctl_job *job, const char *account)
{
	char comment[CTL_COMMENT_MAX];
	struct evlog_event ev;
	int rc;

	/* the whole account: a give-up and the recovery before it may name
	 * the same attempt */
	if (job && !strstr(job->comment, account)) {
		if (sigma_snprintf(comment, sizeof(comment), "%s %s",
				   job->comment, account) < 0)
			sigma_warn(
			    "job %u: AdminComment full, account not appended",
			    job->id);
		else if ((rc = ctl_slurm_admin_comment(job->id, comment))) {
			/* slurmdbd down or behind: wait, for a while */
			if (rc < 0 || ++r->waits * c->cfg.poll_interval_s >
					  CTL_ACCOUNT_WAIT_S)
				r->errors++;
			return;
		} else if (job->state == CTL_J_ENDED) {
			r->verify = CTL_ACCOUNT_VERIFY;
			sigma_strlcpy(r->comment, comment, sizeof(r->comment));
		}
	}
	r->complete = true;
	ctl_ev_from_rec(&ev,
			r->verdict == POLICY_GIVE_UP ||
				r->verdict == POLICY_UNPROTECTED
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

	(void)sigma_snprintf(
	    account, sizeof(account), "sigma: attempt %d: %s %s%s -> %s",
	    r->attempt, r->bad, r->warning ? "warning " : "", r->what, why);
	ctl_finish(c, r, job, account);
}

/*
 * A finished job's account, once written to its accounting record: slurmctld
 * may still send a record of the job that carries its old AdminComment
 * (after slurmdbd came back, say). Written again while it is missing.
 */
void ctl_verify_account(struct ctl *c, struct ctl_rec *r)
{
	(void)c;
	r->verify--;
	if (ctl_slurm_admin_comment(r->job, r->comment) < 0)
		r->verify = 0; /* the job is gone: nothing to keep */
}

/*
 * Where the requeued job ran. A released spare is not exclusive (an idle
 * node of the partition serves Slurm as well), so the account's "requeued
 * onto" names the spares sigmad released, not always where Slurm started
 * the job. Once the job runs the recovery's attempt, a spare it did not get
 * is said after the account, with the nodes it got:
 *
 *   sigma: attempt 2: ran on n1,n2,n4,n5, not on the released spare n6
 */
void ctl_check_placement(struct ctl *c, const struct ctl_view *v,
			 struct ctl_rec *r)
{
	const struct ctl_job *job = ctl_view_job(v, r->job);
	char nodes[CTL_LIST_MAX], missing[EVLOG_NODE_MAX] = "";
	char tmp[EVLOG_NODE_MAX], note[CTL_LIST_MAX + 160];
	char comment[CTL_COMMENT_MAX], *save = NULL, *tok;

	(void)c;
	if (!r->requeued || !r->spares[0] || !job ||
	    job->restart_cnt + 1 > r->attempt || job->state == CTL_J_ENDED) {
		r->placed = true; /* nothing to tell, or too late to */
		return;
	}
	if (job->state != CTL_J_RUNNING || job->restart_cnt + 1 < r->attempt)
		return; /* not started again yet */
	ctl_view_job_nodes(v, job, nodes, sizeof(nodes));
	sigma_strlcpy(tmp, r->spares, sizeof(tmp));
	for (tok = strtok_r(tmp, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save))
		if (!sigma_list_has(nodes, tok))
			sigma_list_add(missing, sizeof(missing), tok);
	r->placed = true;
	if (!missing[0])
		return;
	if (sigma_snprintf(note, sizeof(note),
			   "sigma: attempt %d: ran on %s, not on the released spare%s %s",
			   r->attempt, nodes, strchr(missing, ',') ? "s" : "",
			   missing) < 0 ||
	    strstr(job->comment, note))
		return;
	sigma_info("job %u: %s", job->id, note);
	if (sigma_snprintf(comment, sizeof(comment), "%s %s", job->comment,
			   note) < 0)
		sigma_warn("job %u: AdminComment full, placement not appended",
			   job->id);
	else if (ctl_slurm_admin_comment(job->id, comment))
		r->placed = false; /* again at the next tick */
}

/* Slurm refused too many calls: the recovery ends without its account */
static void ctl_step_refused(struct ctl *c, struct ctl_rec *r)
{
	struct evlog_event ev;

	sigma_error("job %u attempt %d: giving up after %d failed Slurm calls",
		    r->job, r->attempt, r->errors);
	r->complete = true;
	ctl_ev_from_rec(&ev, "complete", r);
	sigma_strlcpy(ev.text, "abandoned: Slurm refused the steps",
		      sizeof(ev.text));
	ctl_log(c, &ev);
}

/*
 * A warned job is sent SIGUSR1 to checkpoint and stop, and moved once it
 * stopped or its grace is over: true then.
 */
static bool ctl_checkpointed(struct ctl *c, const struct ctl_view *v,
			     struct ctl_rec *r, const struct ctl_job *job)
{
	struct evlog_event ev;

	if (r->signalled)
		return policy_warning_move_due(&c->cfg.policy, r->signalled_at,
					       v->now,
					       job->state == CTL_J_RUNNING);
	/* logged first: after a crash the job is not signalled twice */
	r->signalled = true;
	r->signalled_at = v->now;
	ctl_ev_from_rec(&ev, "signal", r);
	sigma_strlcpy(ev.text, "SIGUSR1: checkpoint and stop", sizeof(ev.text));
	if (ctl_log(c, &ev))
		return false;
	if (job->state == CTL_J_RUNNING && ctl_slurm_signal(job->id, SIGUSR1))
		r->errors++;
	return false;
}

void ctl_step(struct ctl *c, struct ctl_view *v, struct ctl_rec *r)
{
	const struct ctl_job *job = ctl_view_job(v, r->job);

	if (r->errors >= CTL_STEP_RETRIES) {
		ctl_step_refused(c, r);
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
	if (job->cancelled && !r->requeued &&
	    job->restart_cnt < r->attempt - 1) {
		/* the user's scancel is final: no requeue, spares go back.
		 * A job Slurm requeued itself first (expedited requeue, a
		 * node sigmad set down) was requeued: its account says so */
		ctl_abandon(c, r, job, "the job was cancelled: not requeued");
		return;
	}
	if (r->verdict == POLICY_CHECKPOINT && !ctl_checkpointed(c, v, r, job))
		return;
	if (!r->released)
		ctl_release(c, v, r);
	if (!r->released)
		return;
	if (!r->requeued && ctl_requeue(c, v, r, job) != 0)
		return;
	ctl_complete(c, r, job);
}
