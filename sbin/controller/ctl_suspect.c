/*
 * ctl_suspect.c - a user's suspect report (sigmactl suspect NODE --job ID,
 * which sigma-launch sends when its rank keeps dying on a node that
 * probes healthy), judged on what sigmad can verify itself: its own probe
 * of the node, and Slurm's records of the job's steps there.
 *
 * A report of a node another user's job runs on, or past the hourly caps,
 * is refused at once. Otherwise sigmad probes the node first
 * (sigmad_probe_command, without waiting for it), and then:
 *   - the probe finds a fault or an early sign: the node is drained with
 *     the probe's reason, as for any failed probe;
 *   - it finds none: the node is drained as a suspect only when Slurm's
 *     accounting holds sigmad_suspect_crashes failed steps of the job
 *     there (the launcher's own count is its owner's word).
 * Each verdict is a "suspect" event, which `sigmactl history` shows. A
 * report while the node's probe runs waits for that probe's verdict; one
 * within CTL_SUSPECT_REPROBE_S of a probe that found no fault is judged
 * on the count at once. Without a probe command, every report is judged
 * on the count alone, at once. An admin's report drains at once, through
 * the drain decision as every drain.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract.h"
#include "ctl_internal.h"
#include "sigma.h"
#include "slurm_api.h"

/* the report's probe of node, running or with its result, or NULL */
static struct ctl_suspect *suspect_find(struct ctl *c, const char *node)
{
	for (size_t k = 0; k < c->nsuspects; k++)
		if (!strcmp(c->suspects[k].node, node))
			return &c->suspects[k];
	return NULL;
}

static void suspect_forget(struct ctl *c, struct ctl_suspect *s)
{
	*s = c->suspects[--c->nsuspects];
}

/* another user's job runs on node: 0, or a negative errno told on out */
static int suspect_shared(uint32_t job, const char *node, uid_t uid,
			  FILE *out)
{
	long other = ctl_slurm_other_job(node, (uint32_t)uid);

	if (other < 0) {
		fprintf(out, "error: job %u, node %s: slurmctld cannot tell "
			     "which jobs run there; try again\n",
			job, node);
		return -EAGAIN;
	}
	if (other > 0) {
		fprintf(out, "error: job %u, node %s: refused: job %ld of another "
			     "user runs on %s\n",
			job, node, other, node);
		return -EPERM;
	}
	return 0;
}

/*
 * Node i probes healthy (or could not be probed): drain it as a suspect if
 * Slurm's accounting holds enough failed steps of job there. 0 (drained,
 * or left as it is), or a negative errno; told on out.
 */
static int suspect_by_count(struct ctl *c, long i, uint32_t job, uid_t uid,
			    FILE *out)
{
	const char *node = c->view.nodes[i].name;
	int want = c->cfg.suspect_crashes, n, rc;
	char reason[CTL_REASON_MAX];

	n = ctl_slurm_failed_steps(job, node);
	if (n < 0) {
		fprintf(out, "error: job %u, node %s: slurmdbd cannot tell the "
			     "job's failed steps; try again\n",
			job, node);
		return -EAGAIN;
	}
	if (n < want) {
		fprintf(out, "error: job %u, node %s: refused: Slurm records %d "
			     "failed steps of the job on %s, sigmad drains at %d\n",
			job, node, n, node, want);
		return -EPERM;
	}
	snprintf(reason, sizeof(reason),
		 "sigma: suspect: the rank of job %u keeps dying here, though it probes healthy",
		 job);
	rc = ctl_job_drain(c, i, job, uid, SIGMA_ASK_USER, reason, "a suspect",
			   out);
	if (rc == 0 && (c->view.nodes[i].flags & CTL_N_DRAIN) &&
	    !strcmp(c->view.nodes[i].reason, reason))
		ctl_report_note(c, c->view.now, job, (uint32_t)uid);
	return rc;
}

/* node i failed s's probe, or warned: drained with the probe's reason */
static int suspect_by_probe(struct ctl *c, long i, const struct ctl_suspect *s,
			    FILE *out)
{
	bool warn = s->rc == SIGMA_PROBE_EXIT_WARN;
	char reason[CTL_REASON_MAX];

	if (sigma_reason_parse(s->out, NULL, NULL) != SIGMA_REASON_NONE)
		sigma_strlcpy(reason, s->out, sizeof(reason));
	else
		(void)sigma_reason_format(reason, sizeof(reason), warn,
					  SIGMA_LEVEL_FULL,
					  s->out[0] ? s->out : "failed");
	return ctl_job_drain(c, i, s->job, s->uid,
			     warn ? SIGMA_ASK_WARNING : SIGMA_ASK_FAILURE,
			     reason, "failing its probe", out);
}

/* the verdict on s, now its probe has ended: logged as a "suspect" event */
static void suspect_judge(struct ctl *c, const struct ctl_suspect *s)
{
	bool fault = s->rc == SIGMA_PROBE_EXIT_FAIL ||
		     s->rc == SIGMA_PROBE_EXIT_WARN;
	long i = ctl_view_node(&c->view, s->node);
	struct evlog_event ev;
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);
	int rc = -ENOENT;

	if (!out)
		return; /* out of memory: judged at the next report */
	if (i < 0)
		fprintf(out, "error: no node called '%s' any more\n", s->node);
	else if (fault)
		rc = suspect_by_probe(c, i, s, out);
	else if (!(rc = suspect_shared(s->job, s->node, s->uid, out)))
		rc = suspect_by_count(c, i, s->job, s->uid, out);
	fclose(out);
	ctl_ev_init(&ev, "suspect");
	ev.job = s->job;
	ev.uid = s->uid;
	ev.rc = s->rc;
	sigma_strlcpy(ev.node, s->node, sizeof(ev.node));
	sigma_strlcpy(ev.verdict, rc ? "refused" : "judged",
		      sizeof(ev.verdict));
	snprintf(ev.text, sizeof(ev.text), "probe exit %d (%s): %s", s->rc,
		 s->out[0] ? s->out : "no output", text ? text : "");
	ev.text[strcspn(ev.text, "\n")] = '\0';
	ctl_log(c, &ev);
	sigma_info("job %u: suspect %s: %s", s->job, s->node, ev.text);
	free(text);
}

void ctl_suspects(struct ctl *c)
{
	for (size_t k = c->nsuspects; k-- > 0;) {
		struct ctl_suspect *s = &c->suspects[k];

		if (!s->ended && ctl_proc_poll(&s->probe, &s->rc)) {
			sigma_strlcpy(s->out, s->probe.out, sizeof(s->out));
			s->out[strcspn(s->out, "\n")] = '\0';
			s->ended = c->view.now;
			suspect_judge(c, s);
		}
		/* a fault found is drained: only "no fault" is worth keeping */
		if (s->ended && (s->rc == SIGMA_PROBE_EXIT_FAIL ||
				 s->rc == SIGMA_PROBE_EXIT_WARN ||
				 c->view.now - s->ended > CTL_SUSPECT_REPROBE_S))
			suspect_forget(c, s);
	}
}

void ctl_suspects_kill(struct ctl *c)
{
	for (size_t k = 0; k < c->nsuspects; k++)
		ctl_proc_kill(&c->suspects[k].probe);
	c->nsuspects = 0;
}

/* probe node i for job's report, or say why not: 0 or a negative errno */
static int suspect_probe(struct ctl *c, long i, uint32_t job, uid_t uid,
			 FILE *out)
{
	const char *node = c->view.nodes[i].name;
	struct ctl_suspect *s;
	int rc;

	if (c->nsuspects == CTL_SUSPECTS_MAX) {
		fprintf(out, "error: job %u, node %s: %d suspect probes run "
			     "already; try again\n",
			job, node, CTL_SUSPECTS_MAX);
		return -EBUSY;
	}
	s = &c->suspects[c->nsuspects];
	memset(s, 0, sizeof(*s));
	sigma_strlcpy(s->node, node, sizeof(s->node));
	s->job = job;
	s->uid = (uint32_t)uid;
	rc = ctl_probe_start(c, node, &s->probe);
	if (rc) {
		fprintf(out, "error: job %u, node %s: sigmad cannot start its "
			     "probe (%s); try again\n",
			job, node, strerror(-rc));
		return -EAGAIN;
	}
	c->nsuspects++;
	sigma_info("job %u: suspect %s: probing it first (uid %u)", job, node,
		   (unsigned)uid);
	fprintf(out, "ok: job %u, node %s: sigmad probes it first: drained if "
		     "the probe finds a fault, or as a suspect if Slurm records "
		     "%d failed steps of the job there (sigmactl history --job "
		     "%u tells the verdict)\n",
		job, node, c->cfg.suspect_crashes, job);
	return 0;
}

int ctl_cmd_suspect(struct ctl *c, const char *node, uint32_t job, uid_t uid,
		    bool admin, FILE *out)
{
	long i = ctl_job_node(c, node, job, uid, admin, true, out);
	struct ctl_suspect *s;
	char why[320];
	int rc;

	if (i < 0)
		return (int)i;
	/* an admin's word, and a node the drain decision leaves alone (told
	 * so at no cost), go straight to the decision */
	if (admin || ctl_drain_decide(&c->view.nodes[i], SIGMA_ASK_USER, why,
				      sizeof(why)) != SIGMA_DRAIN_SET) {
		char reason[CTL_REASON_MAX];

		snprintf(reason, sizeof(reason),
			 "sigma: suspect: the rank of job %u keeps dying here, though it probes healthy",
			 job);
		return ctl_job_drain(c, i, job, uid, SIGMA_ASK_USER, reason,
				     "a suspect", out);
	}
	/* a job, or a user, takes few nodes out an hour */
	if (ctl_reports(c, c->view.now, job, (uint32_t)uid, false) >=
		CTL_SUSPECT_PER_JOB_HOUR ||
	    ctl_reports(c, c->view.now, job, (uint32_t)uid, true) >=
		CTL_SUSPECT_PER_USER_HOUR) {
		fprintf(out,
			"error: job %u, node %s: refused: at most %d suspect "
			"drains a job and %d a user in an hour\n",
			job, node, CTL_SUSPECT_PER_JOB_HOUR,
			CTL_SUSPECT_PER_USER_HOUR);
		return -EBUSY;
	}
	if ((rc = suspect_shared(job, node, uid, out)))
		return rc;
	s = suspect_find(c, node);
	if (s && !s->ended) {
		fprintf(out, "ok: job %u, node %s: being probed already "
			     "(sigmactl history --job %u tells the verdict)\n",
			job, node, s->job);
		return 0;
	}
	/* probed lately and no fault found, or no probe to run: the count */
	if (s || !c->cfg.probe_command[0])
		return suspect_by_count(c, i, job, uid, out);
	return suspect_probe(c, i, job, uid, out);
}
