/*
 * slurm_api.c - every libslurm call of the plugin, in one small adapter:
 * the API drifts between Slurm releases, and the unit tests replace this
 * file. The symbols come from the Slurm process that loaded the plugin
 * (slurmd and slurmstepd link libslurmfull), so sigma.so does not link
 * libslurm itself. What differs between Slurm releases is bridged in
 * slurm_compat.h.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#include "sigma.h"
#include "slurm_compat.h"
#include "sigma_spank.h"

int sigma_slurm_job_info(uint32_t job_id, char **admin_comment, char **name,
			 const char **unprotected)
{
	job_info_msg_t *msg = NULL;
	const slurm_job_info_t *j;
	int rc = 0;

	*admin_comment = NULL;
	*name = NULL;
	if (unprotected)
		*unprotected = NULL;
	slurm_compat_rpc_ready();
	if (slurm_compat_load_job(&msg, job_id, SHOW_DETAIL) != SLURM_SUCCESS) {
		rc = errno;
		return rc > 0 ? -rc : -EIO;
	}
	if (!msg || msg->record_count < 1) {
		rc = -ENOENT;
		goto out_free;
	}
	j = &msg->job_array[0];
	if (j->admin_comment)
		*admin_comment = strdup(j->admin_comment);
	if (j->name)
		*name = strdup(j->name);
	if (unprotected && !j->requeue)
		*unprotected = SIGMA_UNPROTECTED_NO_REQUEUE;
	else if (unprotected && j->het_job_offset != NO_VAL &&
		 j->het_job_offset > 0)
		*unprotected = SIGMA_UNPROTECTED_HET;
out_free:
	slurm_free_job_info_msg(msg);
	return rc;
}

int sigma_slurm_set_admin_comment(uint32_t job_id, const char *text)
{
	job_desc_msg_t desc;
	int rc;

	slurm_compat_rpc_ready();
	slurm_init_job_desc_msg(&desc);
	slurm_compat_job_desc_id(&desc, job_id);
	desc.admin_comment = (char *)text;
	if (slurm_update_job(&desc) != SLURM_SUCCESS) {
		rc = errno;
		return rc > 0 ? -rc : -EIO;
	}
	return 0;
}

bool sigma_slurm_is_first_node(const char *list, const char *node)
{
	slurm_compat_hostlist_t *hl;
	char *first;
	bool yes;

	if (!list || !list[0] || !node)
		return true; /* cannot tell: writing twice is harmless */
	hl = slurm_hostlist_create(list);
	if (!hl)
		return true;
	first = slurm_hostlist_shift(hl);
	yes = !first || !strcmp(first, node);
	free(first);
	slurm_hostlist_destroy(hl);
	return yes;
}

int sigma_slurm_node_now(const char *node, bool *drained, bool *down,
			 char *reason, size_t size)
{
	node_info_msg_t *msg = NULL;
	int rc = 0;

	*drained = *down = false;
	*reason = '\0';
	slurm_compat_rpc_ready();
	if (slurm_load_node_single(&msg, (char *)node, SHOW_ALL) !=
	    SLURM_SUCCESS) {
		rc = errno;
		return rc > 0 ? -rc : -EIO;
	}
	if (!msg || msg->record_count < 1) {
		slurm_free_node_info_msg(msg);
		return -ENOENT;
	}
	*drained = msg->node_array[0].node_state & NODE_STATE_DRAIN;
	*down = (msg->node_array[0].node_state & NODE_STATE_BASE) ==
		NODE_STATE_DOWN;
	if (msg->node_array[0].reason)
		sigma_strlcpy(reason, msg->node_array[0].reason, size);
	slurm_free_node_info_msg(msg);
	return 0;
}

int sigma_slurm_drain(const char *node, const char *reason)
{
	update_node_msg_t msg;
	int rc;

	slurm_compat_rpc_ready();
	slurm_init_update_node_msg(&msg);
	msg.node_names = (char *)node;
	msg.node_state = NODE_STATE_DRAIN;
	slurm_compat_node_reason(&msg, (char *)reason, 0);
	if (slurm_update_node(&msg) != SLURM_SUCCESS) {
		rc = errno;
		return rc > 0 ? -rc : -EIO;
	}
	return 0;
}
