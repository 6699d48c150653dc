/*
 * tries.c - the table of nodes in repair (tries.h): a sorted array of
 * entries, found by binary search, grown by doubling.
 */
#include <stdlib.h>
#include <string.h>

#include "sigma.h"
#include "tries.h"

/* where node is, or would go: *found says which */
static size_t tries_at(const struct ctl_tries_table *t, const char *node,
		       bool *found)
{
	size_t lo = 0, hi = t->n;

	*found = false;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int cmp = strcmp(t->v[mid]->node, node);

		if (!cmp) {
			*found = true;
			return mid;
		}
		if (cmp < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

struct ctl_tries *ctl_tries_find(const struct ctl_tries_table *t,
				 const char *node)
{
	bool found;
	size_t i = tries_at(t, node, &found);

	return found ? t->v[i] : NULL;
}

struct ctl_tries *ctl_tries_get(struct ctl_tries_table *t, const char *node)
{
	struct ctl_tries *e;
	bool found;
	size_t i = tries_at(t, node, &found);

	if (found)
		return t->v[i];
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 16;
		struct ctl_tries **v = realloc(t->v, cap * sizeof(*v));

		if (!v)
			return NULL;
		t->v = v;
		t->cap = cap;
	}
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	sigma_strlcpy(e->node, node, sizeof(e->node));
	memmove(&t->v[i + 1], &t->v[i], (t->n - i) * sizeof(*t->v));
	t->v[i] = e;
	t->n++;
	return e;
}

void ctl_tries_drop(struct ctl_tries_table *t, const char *node)
{
	bool found;
	size_t i = tries_at(t, node, &found);

	if (!found)
		return;
	free(t->v[i]);
	memmove(&t->v[i], &t->v[i + 1], (t->n - i - 1) * sizeof(*t->v));
	t->n--;
}

void ctl_tries_free(struct ctl_tries_table *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->v[i]);
	free(t->v);
	memset(t, 0, sizeof(*t));
}
