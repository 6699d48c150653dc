/*
 * restore.c - the restore planner (restore.h). The rules, in order:
 *
 *   - a copy that is bad (unreadable, failed checksums) or written by
 *     another layout is never a source;
 *   - tier 1 offers the newest (attempt, step) for which every shard of
 *     the running layout has a copy of that same (attempt, step);
 *   - tier 2 offers the newest shared checkpoint not known to be bad;
 *   - the newer of the two wins, tier 1 on a tie (it is local);
 *   - each shard is read by its owner when the owner holds a copy, else
 *     by the lowest rank that holds one (its own copy before a replica),
 *     and sent to the owner.
 *
 * Since every candidate is taken newest first, no step older than one
 * complete in every shard is ever chosen.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sigma.h"
#include "restore.h"

int restore_cmp(int a1, long s1, int a2, long s2)
{
	if (a1 != a2)
		return a1 > a2 ? 1 : -1;
	if (s1 != s2)
		return s1 > s2 ? 1 : -1;
	return 0;
}

void restore_plan_fini(struct restore_plan *p)
{
	if (!p)
		return;
	free(p->source);
	free(p->xfer);
	p->source = NULL;
	p->xfer = NULL;
	p->nxfer = p->nshards = 0;
}

static int check_input(const struct restore_input *in, char *err, size_t len)
{
	if (in->nranks < 1 || in->nranks > RESTORE_MAX_RANKS)
		return sigma_set_err(err, len, EINVAL,
				     "restore plan: %d ranks, want 1 to %d",
				     in->nranks, RESTORE_MAX_RANKS);
	if (in->ncopies < 0 || in->ncopies > RESTORE_MAX_COPIES ||
	    (in->ncopies > 0 && !in->copies) || in->nshared < 0 ||
	    in->nshared > RESTORE_MAX_COPIES ||
	    (in->nshared > 0 && !in->shared))
		return sigma_set_err(
		    err, len, EINVAL,
		    "restore plan: %d copies, %d shared checkpoints: out of range",
		    in->ncopies, in->nshared);
	for (int i = 0; i < in->ncopies; i++) {
		const struct restore_copy *c = &in->copies[i];

		if (c->holder < 0 || c->holder >= in->nranks || c->shard < 0 ||
		    (c->same_layout && c->shard >= in->nranks) || c->step < 0 ||
		    c->attempt < 0)
			return sigma_set_err(
			    err, len, EINVAL,
			    "restore plan: copy %d (rank %d, shard %d, step %ld, attempt %d) is out of range for %d ranks",
			    i, c->holder, c->shard, c->step, c->attempt,
			    in->nranks);
	}
	for (int i = 0; i < in->nshared; i++)
		if (in->shared[i].step < 0 || in->shared[i].attempt < 0)
			return sigma_set_err(
			    err, len, EINVAL,
			    "restore plan: shared checkpoint %d (step %ld, attempt %d) is out of range",
			    i, in->shared[i].step, in->shared[i].attempt);
	return 0;
}

/* for qsort: newest (attempt, step) first, then by shard, then the copy
 * its owner holds, then its own copy before a replica, then lowest rank */
static int cmp_copy(const void *a, const void *b)
{
	const struct restore_copy *x = *(const struct restore_copy *const *)a;
	const struct restore_copy *y = *(const struct restore_copy *const *)b;
	int c = restore_cmp(y->attempt, y->step, x->attempt, x->step);
	bool xo, yo;

	if (c)
		return c;
	if (x->shard != y->shard)
		return x->shard < y->shard ? -1 : 1;
	xo = x->holder == x->shard;
	yo = y->holder == y->shard;
	if (xo != yo)
		return xo ? -1 : 1;
	if (x->replica != y->replica)
		return x->replica ? 1 : -1;
	if (x->holder != y->holder)
		return x->holder < y->holder ? -1 : 1;
	return x < y ? -1 : x > y;
}

/*
 * The newest (attempt, step) with a usable copy of every shard: fills
 * src[shard] and returns true; else false with the newest incomplete one
 * described in why.
 */
static bool plan_tier1(const struct restore_input *in,
		       const struct restore_copy *const *order, int n, int *src,
		       long *step, int *attempt, char *why, size_t wlen)
{
	bool described = false;
	int i = 0;

	while (i < n) {
		const struct restore_copy *g = order[i];
		int have = 0, j = i, missing = -1;

		for (int k = 0; k < in->nranks; k++)
			src[k] = -1;
		for (; j < n; j++) {
			const struct restore_copy *c = order[j];

			if (c->step != g->step || c->attempt != g->attempt)
				break;
			if (src[c->shard] < 0) {
				src[c->shard] = (int)(c - in->copies);
				have++;
			}
		}
		if (have == in->nranks) {
			*step = g->step;
			*attempt = g->attempt;
			return true;
		}
		for (int k = 0; k < in->nranks && missing < 0; k++)
			if (src[k] < 0)
				missing = k;
		if (!described) {
			snprintf(
			    why, wlen,
			    "tier 1: newest step %ld (attempt %d) has no valid copy of shard %d (%d of %d shards)",
			    g->step, g->attempt, missing, have, in->nranks);
			described = true;
		}
		i = j;
	}
	if (!described)
		snprintf(why, wlen, "tier 1: no valid copy of this layout");
	return false;
}

int restore_plan(const struct restore_input *in, struct restore_plan *p,
		 char *err, size_t len)
{
	const struct restore_copy **order = NULL;
	int n = 0, rc, best2 = -1;
	long s1 = -1;
	int a1 = -1;
	bool t1 = false;

	memset(p, 0, sizeof(*p));
	p->step = -1;
	p->shared = -1;
	p->newest_step = -1;
	rc = check_input(in, err, len);
	if (rc)
		return rc;

	/* the newest step anything names, usable or not */
	for (int i = 0; i < in->ncopies; i++) {
		const struct restore_copy *c = &in->copies[i];

		if (p->newest_step < 0 ||
		    restore_cmp(c->attempt, c->step, p->newest_attempt,
				p->newest_step) > 0) {
			p->newest_step = c->step;
			p->newest_attempt = c->attempt;
		}
	}
	for (int i = 0; i < in->nshared; i++) {
		const struct restore_shared *s = &in->shared[i];

		if (p->newest_step < 0 ||
		    restore_cmp(s->attempt, s->step, p->newest_attempt,
				p->newest_step) > 0) {
			p->newest_step = s->step;
			p->newest_attempt = s->attempt;
		}
		if (!s->bad &&
		    (best2 < 0 ||
		     restore_cmp(s->attempt, s->step, in->shared[best2].attempt,
				 in->shared[best2].step) > 0))
			best2 = i;
	}

	/* tier 1: the usable copies, grouped newest first */
	order = malloc(sizeof(*order) * (in->ncopies > 0 ? in->ncopies : 1));
	p->source = malloc(sizeof(int) * in->nranks);
	if (!order || !p->source) {
		rc = sigma_set_err(err, len, ENOMEM, "out of memory");
		goto fail;
	}
	for (int i = 0; i < in->ncopies; i++)
		if (in->copies[i].same_layout && !in->copies[i].bad)
			order[n++] = &in->copies[i];
	qsort(order, n, sizeof(*order), cmp_copy);
	t1 = plan_tier1(in, order, n, p->source, &s1, &a1, p->why,
			sizeof(p->why));
	/* a newer copy of another layout: say so rather than "missing" */
	for (int i = 0; !t1 && i < in->ncopies; i++) {
		const struct restore_copy *c = &in->copies[i];

		if (!c->same_layout && !c->bad &&
		    (n == 0 ||
		     restore_cmp(c->attempt, c->step, order[0]->attempt,
				 order[0]->step) > 0)) {
			snprintf(
			    p->why, sizeof(p->why),
			    "tier 1: the layout changed since step %ld (attempt %d) was written",
			    c->step, c->attempt);
			break;
		}
	}
	if (t1 && best2 >= 0 &&
	    restore_cmp(a1, s1, in->shared[best2].attempt,
			in->shared[best2].step) < 0) {
		snprintf(
		    p->why, sizeof(p->why),
		    "the shared tier is newer (step %ld, attempt %d) than tier 1 (step %ld, attempt %d)",
		    in->shared[best2].step, in->shared[best2].attempt, s1, a1);
		t1 = false;
	}
	if (t1) {
		p->tier = RESTORE_TIER1;
		p->step = s1;
		p->attempt = a1;
		p->nshards = in->nranks;
		p->why[0] = '\0';
		p->xfer = malloc(sizeof(*p->xfer) * in->nranks);
		if (!p->xfer) {
			rc = sigma_set_err(err, len, ENOMEM, "out of memory");
			goto fail;
		}
		for (int k = 0; k < in->nranks; k++) {
			const struct restore_copy *c =
			    &in->copies[p->source[k]];

			if (c->replica)
				p->from_replica++;
			if (c->holder != k)
				p->xfer[p->nxfer++] =
				    (struct restore_transfer){k, c->holder, k};
		}
	} else {
		free(p->source);
		p->source = NULL;
		if (best2 >= 0) {
			p->tier = RESTORE_TIER2;
			p->shared = best2;
			p->step = in->shared[best2].step;
			p->attempt = in->shared[best2].attempt;
		} else {
			p->tier = RESTORE_NONE;
		}
	}
	if (p->tier != RESTORE_NONE)
		p->lost =
		    p->newest_step > p->step ? p->newest_step - p->step : 0;
	free(order);
	return 0;
fail:
	free(order);
	restore_plan_fini(p);
	return rc;
}
