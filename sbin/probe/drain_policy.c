/*
 * drain_policy.c - whether the probe may drain or resume a node, given its
 * state and reason. Pure, so that every case is unit-tested:
 *
 * - failure (or "could not run"): drain, unless the node is already
 *   drained or down for a reason that is not sigma's (someone else's
 *   decision stands), or already drained by sigma for a failure. A sigma
 *   warning is replaced by the failure.
 * - warning: drain only a node in service.
 * - healthy: resume only with drain_resume=yes, and only a node whose
 *   reason this probe wrote at this level or below (a quick pass never
 *   clears what a full probe found). Never anything else.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "sigma.h"
#include "probe.h"

static bool starts(const char *s, const char *prefix)
{
	return s && !strncmp(s, prefix, strlen(prefix));
}

/* the reason was written by a probe at a level at most level */
static bool ours_at_most(const char *reason, int level)
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

int probe_drain_decide(bool drained, bool down, const char *cur, int level,
		       int verdict, bool resume, char *why, size_t whylen)
{
	bool sigma = starts(cur, "sigma:");
	bool sigma_warning = starts(cur, "sigma: warning:");
	const char *shown = cur && cur[0] ? cur : "(none)";

	switch (verdict) {
	case PROBE_FAIL:
	case PROBE_ERROR:
		if ((drained || down) && !sigma) {
			snprintf(
			    why, whylen,
			    "node is %s for another reason, left alone: %s",
			    drained ? "drained" : "down", shown);
			return PROBE_DRAIN_NONE;
		}
		if ((drained || down) && !sigma_warning) {
			snprintf(why, whylen, "node already out by sigma: %s",
				 shown);
			return PROBE_DRAIN_NONE;
		}
		snprintf(why, whylen, "draining");
		return PROBE_DRAIN_SET;
	case PROBE_WARN:
		if (drained || down) {
			snprintf(why, whylen,
				 "node already out of service, reason kept: %s",
				 shown);
			return PROBE_DRAIN_NONE;
		}
		snprintf(why, whylen, "draining (early warning)");
		return PROBE_DRAIN_SET;
	default:
		if (drained && !down && resume && ours_at_most(cur, level)) {
			snprintf(why, whylen,
				 "healthy again, resuming (was: %s)", shown);
			return PROBE_DRAIN_RESUME;
		}
		snprintf(why, whylen, "healthy, node state not changed");
		return PROBE_DRAIN_NONE;
	}
}
