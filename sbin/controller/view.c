/*
 * view.c - the view's lookups (view.h): nodes by name through an index in
 * name order, jobs by id. No Slurm here.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "view.h"

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

