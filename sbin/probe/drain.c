/*
 * drain.c - the probe's only libslurm calls (sigma-probe --drain): read the
 * node's state and reason, and drain or resume it as sigma's one drain
 * decision (lib/drain.c) says. libslurm's API drifts between releases; it stays
 * in this file, and what differs is bridged in slurm_compat.h.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#include "sigma.h"
#include "probe.h"
#include "slurm_compat.h"

/* Slurm keeps reasons short in its displays; keep ours well within */
#define DRAIN_REASON_MAX 250

/* what a verdict asks of the drain decision */
static enum sigma_drain_ask drain_ask(int verdict)
{
	switch (verdict) {
	case PROBE_FAIL:
	case PROBE_ERROR:
		return SIGMA_ASK_FAILURE;
	case PROBE_WARN:
		return SIGMA_ASK_WARNING;
	default:
		return SIGMA_ASK_HEALTHY;
	}
}

static int drain_errno(void)
{
	int e = errno;

	return e > 0 ? -e : -EIO;
}

int probe_drain(const struct probe_conf *conf, const char *node, int level,
		int verdict, const char *reason, struct probe_drain_result *res)
{
	node_info_msg_t *msg = NULL;
	update_node_msg_t upd;
	char why[300], text[DRAIN_REASON_MAX + 1];
	struct sigma_node_now now;
	bool drained, down;
	int action, rc = 0;

	memset(res, 0, sizeof(*res));
	slurm_init(conf->slurm_conf[0] && !getenv("SLURM_CONF")
		       ? conf->slurm_conf
		       : NULL);
	if (slurm_load_node_single(&msg, (char *)node, SHOW_ALL) !=
	    SLURM_SUCCESS) {
		rc = drain_errno();
		snprintf(res->what, sizeof(res->what),
			 "cannot load node %s: %s", node, slurm_strerror(-rc));
		goto out_fini;
	}
	if (!msg || msg->record_count < 1) {
		rc = -ENOENT;
		snprintf(res->what, sizeof(res->what), "no node %s in Slurm",
			 node);
		goto out_free;
	}
	drained = msg->node_array[0].node_state & NODE_STATE_DRAIN;
	down = (msg->node_array[0].node_state & NODE_STATE_BASE) ==
	       NODE_STATE_DOWN;
	now.drained = drained;
	now.down = down;
	now.reason = msg->node_array[0].reason;
	action = sigma_drain_decide(&now, drain_ask(verdict), level,
				    conf->drain_resume, why, sizeof(why));
	snprintf(res->what, sizeof(res->what), "%s: %s", node, why);
	if (action == SIGMA_DRAIN_NONE)
		goto out_free;
	slurm_init_update_node_msg(&upd);
	upd.node_names = (char *)node;
	if (action == SIGMA_DRAIN_SET) {
		sigma_strlcpy(text, reason, sizeof(text));
		upd.node_state = NODE_STATE_DRAIN;
		slurm_compat_node_reason(&upd, text, getuid());
	} else {
		upd.node_state = NODE_RESUME;
	}
	if (slurm_update_node(&upd) != SLURM_SUCCESS) {
		rc = drain_errno();
		snprintf(res->what, sizeof(res->what), "%s: %s failed: %s",
			 node, action == SIGMA_DRAIN_SET ? "drain" : "resume",
			 slurm_strerror(-rc));
		goto out_free;
	}
	res->changed = true;
out_free:
	slurm_free_node_info_msg(msg);
out_fini:
	slurm_fini();
	return rc;
}
