/*
 * view.c - the view's lookups and predicates (view.h): nodes by name
 * through an index in name order, jobs by id, what a node's or a job's
 * state means to sigmad. No Slurm here.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "contract.h"
#include "sigma.h"
#include "view.h"

#define CTL_FAILED_END_S 300 /* a failed job's node may drain this late */

void ctl_view_free(struct ctl_view *v)
{
	for (size_t i = 0; i < v->njobs; i++)
		free(v->jobs[i].nodes);
	free(v->jobs);
	free(v->nodes);
	free(v->by_name);
	memset(v, 0, sizeof(*v));
}

/* the view being sorted (qsort has no argument for it) */
static const struct ctl_view *sorting;

static int by_name_cmp(const void *a, const void *b)
{
	return strcmp(sorting->nodes[*(const uint32_t *)a].name,
		      sorting->nodes[*(const uint32_t *)b].name);
}

int ctl_view_index_names(struct ctl_view *v)
{
	v->by_name = malloc((v->nnodes ? v->nnodes : 1) * sizeof(*v->by_name));
	if (!v->by_name)
		return -ENOMEM;
	for (size_t i = 0; i < v->nnodes; i++)
		v->by_name[i] = (uint32_t)i;
	sorting = v;
	qsort(v->by_name, v->nnodes, sizeof(*v->by_name), by_name_cmp);
	sorting = NULL;
	return 0;
}

long ctl_view_node(const struct ctl_view *v, const char *name)
{
	size_t lo = 0, hi = v->nnodes;

	if (!v->by_name) {
		for (size_t i = 0; i < v->nnodes; i++)
			if (!strcmp(v->nodes[i].name, name))
				return (long)i;
		return -1;
	}
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(v->nodes[v->by_name[mid]].name, name);

		if (!c)
			return (long)v->by_name[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

struct ctl_job *ctl_view_job(const struct ctl_view *v, uint32_t id)
{
	for (size_t i = 0; i < v->njobs; i++)
		if (v->jobs[i].id == id)
			return &v->jobs[i];
	return NULL;
}

void ctl_view_job_nodes(const struct ctl_view *v, const struct ctl_job *job,
			char *out, size_t size)
{
	out[0] = '\0';
	for (size_t k = 0; k < job->nnodes; k++)
		sigma_list_add(out, size, v->nodes[job->nodes[k]].name);
}

/* ---- what states mean ---------------------------------------------------- */

enum sigma_drain_action ctl_drain_decide(const struct ctl_node *n,
					 enum sigma_drain_ask ask, char *why,
					 size_t whylen)
{
	struct sigma_node_now now = {(n->flags & CTL_N_DRAIN) != 0,
				     (n->flags & CTL_N_DOWN) != 0, n->reason};

	return sigma_drain_decide(&now, ask, SIGMA_LEVEL_FULL, false, why,
				  whylen);
}

#define CTL_UNHEALTHY (CTL_N_DOWN | CTL_N_DRAIN | CTL_N_NO_RESPOND | CTL_N_FAIL)

bool ctl_node_healthy(const struct ctl_node *n)
{
	return !(n->flags & CTL_UNHEALTHY);
}

/*
 * Node i runs a sigma job that is running. The node and job lists are
 * loaded one after the other, so a node may still look idle while the job
 * that was just given it already runs: such a node is no spare.
 */
bool ctl_node_in_job(const struct ctl_view *v, size_t i)
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

/*
 * The job ended a short while ago: a node at fault may still be drained by
 * the probe (job epilog, health check), or called not responding by
 * slurmctld (SlurmdTimeout), after the job's end.
 */
bool ctl_job_just_ended(const struct ctl_job *job, int64_t now)
{
	return job->state == CTL_J_ENDED &&
	       now - job->end_time <= CTL_FAILED_END_S;
}

/*
 * The job's batch script failed with the trainer's "requeue me" codes (76: a
 * peer rank died, 79: the trouble follows the hardware) a short while ago:
 * once the node at fault drains, sigmad requeues it.
 */
bool ctl_job_may_come_back(const struct ctl_job *job, int64_t now)
{
	return ctl_job_just_ended(job, now) && job->failed &&
	       (job->exit_code == TRAIN_EXIT_PEER ||
		job->exit_code == TRAIN_EXIT_HARDWARE);
}
