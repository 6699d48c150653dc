/*
 * drain.c - the one decision whether sigma may drain or resume a node,
 * given the node's state and reason and who asks. The probe, the plugin
 * (a probe that could not run), sigmad (a job's failed node) and users'
 * reports through sigmad (sigmactl suspect, slow) all ask it, so that no
 * path replaces a decision that is not sigma's own:
 *
 * - a node drained or down for a reason that is not sigma's, or for an
 *   admin's reason given through sigma ("sigma: admin: ..."), is left as
 *   it is by every path;
 * - a probe's failure (or a probe that could not run) drains a node in
 *   service, or replaces sigma's own early warning; a node already out by
 *   sigma keeps its reason;
 * - a probe's warning drains only a node in service;
 * - sigmad drains a node a job failed on when it is in service, or down
 *   for Slurm's own "Not responding" (or no reason) or for sigma's;
 * - a user's report drains only a node in service: never one already out,
 *   whatever its reason;
 * - a healthy probe resumes (with drain_resume) only a node whose reason a
 *   probe wrote at this level or below (a quick pass never clears what a
 *   full probe found).
 *
 * Pure, so that every case is unit-tested.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "sigma.h"
#include "contract.h"

/* the reason a probe wrote, at a level at most level */
static bool probe_reason_at_most(const char *reason, int level)
{
	int written = 0;

	switch (sigma_reason_parse(reason, &written, NULL)) {
	case SIGMA_REASON_FAILURE:
	case SIGMA_REASON_WARNING:
		return written <= level;
	default:
		return false;
	}
}

/* Slurm's own reason for a node it lost: not anyone's decision */
static bool slurm_lost(const char *reason)
{
	return !reason || !reason[0] || !strcmp(reason, "Not responding");
}

enum sigma_drain_action sigma_drain_decide(const struct sigma_node_now *n,
					   enum sigma_drain_ask ask, int level,
					   bool resume, char *why,
					   size_t whylen)
{
	enum sigma_reason k = sigma_reason_parse(n->reason, NULL, NULL);
	const char *shown = n->reason && n->reason[0] ? n->reason : "(none)";
	bool out = n->drained || n->down;
	bool others = k == SIGMA_REASON_NONE || k == SIGMA_REASON_ADMIN;

	if (ask == SIGMA_ASK_HEALTHY) {
		if (n->drained && !n->down && resume &&
		    probe_reason_at_most(n->reason, level)) {
			snprintf(why, whylen, "healthy again, resuming (was: %s)",
				 shown);
			return SIGMA_DRAIN_RESUME;
		}
		snprintf(why, whylen, "healthy, node state not changed");
		return SIGMA_DRAIN_NONE;
	}
	if (!out) {
		snprintf(why, whylen, ask == SIGMA_ASK_WARNING
					  ? "draining (early warning)"
					  : "draining");
		return SIGMA_DRAIN_SET;
	}
	if (ask == SIGMA_ASK_JOB_FAILED && n->down && !n->drained &&
	    (slurm_lost(n->reason) || !others)) {
		snprintf(why, whylen, "draining the lost node (was: %s)", shown);
		return SIGMA_DRAIN_SET;
	}
	if (others && !(ask == SIGMA_ASK_JOB_FAILED && slurm_lost(n->reason))) {
		snprintf(why, whylen,
			 "node is %s for another reason, left alone: %s",
			 n->drained ? "drained" : "down", shown);
		return SIGMA_DRAIN_NONE;
	}
	if (ask == SIGMA_ASK_FAILURE && k == SIGMA_REASON_WARNING) {
		snprintf(why, whylen, "draining (a failure replaces %s)", shown);
		return SIGMA_DRAIN_SET;
	}
	snprintf(why, whylen, "node already out of service, reason kept: %s",
		 shown);
	return SIGMA_DRAIN_NONE;
}
