/*
 * ctl_pool.c - the hot-spare pool: which nodes are its members, which of
 * them are free, and the Slurm reservation that keeps ordinary jobs off
 * them. A spare released to a recovery is lent, and comes back to the
 * pool once its job has started or cannot come back.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "ctl_internal.h"
#include "sigma.h"
#include "slurm_api.h"

#define CTL_LENT_S 300 /* a released spare is not reclaimed this soon */

static int expand_add(const char *name, void *arg)
{
	char *list = arg;

	return sigma_list_add(list, SIGMAD_LIST_MAX, name);
}

/* Pool members: configured (list or feature) + added - removed. */
void ctl_members(struct ctl *c, const struct ctl_view *v, char *out)
{
	char tmp[SIGMAD_LIST_MAX], *save = NULL, *tok;

	out[0] = '\0';
	if (c->cfg.spares[0] &&
	    ctl_slurm_expand(c->cfg.spares, expand_add, out))
		sigma_warn("sigmad_spares: cannot expand '%s'", c->cfg.spares);
	if (c->cfg.spare_feature[0])
		for (size_t i = 0; i < v->nnodes; i++)
			if (v->nodes[i].flags & CTL_N_FEATURE)
				sigma_list_add(out, SIGMAD_LIST_MAX,
					     v->nodes[i].name);
	sigma_strlcpy(tmp, c->added, sizeof(tmp));
	for (tok = strtok_r(tmp, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save))
		sigma_list_add(out, SIGMAD_LIST_MAX, tok);
	sigma_strlcpy(tmp, c->removed, sizeof(tmp));
	for (tok = strtok_r(tmp, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save))
		sigma_list_del(out, tok);
}

/* job's newest recovery record, or NULL */
static const struct ctl_rec *ctl_newest_rec(const struct ctl *c, uint32_t job)
{
	const struct ctl_rec *newest = NULL;

	for (size_t i = 0; i < c->nrecs; i++)
		if (c->recs[i].job == job &&
		    (!newest || c->recs[i].decided_at >= newest->decided_at))
			newest = &c->recs[i];
	return newest;
}

/*
 * job will run again on the nodes it had: a recovery of it is under way
 * (decided, the requeue not done yet), or it is pending after its newest
 * recovery (until it starts), or it ended in a way that may bring it back
 * and sigma has not given it up.
 */
static bool ctl_job_needs_back(const struct ctl *c, const struct ctl_view *v,
			       const struct ctl_job *job)
{
	const struct ctl_rec *r = ctl_newest_rec(c, job->id);

	if (r && !r->complete)
		return true;
	if (r && job->state == CTL_J_PENDING &&
	    v->now - r->decided_at < CTL_LENT_S)
		return true;
	return ctl_job_may_come_back(job, v->now) &&
	       !(r && ctl_rec_class(r->verdict) == REC_GIVE_UP &&
		 r->attempt == job->restart_cnt + 1);
}

/*
 * A spare released for a recovery stays out of the pool until its job has
 * started (then the node is busy, or the job went elsewhere and it is free),
 * and while the job will run again on the nodes it had (ctl_job_needs_back):
 * it needs the spare again, whenever it was lent.
 */
bool ctl_lent(const struct ctl *c, const struct ctl_view *v, const char *node)
{
	for (size_t i = 0; i < c->nrecs; i++) {
		const struct ctl_rec *r = &c->recs[i];
		const struct ctl_job *job;

		if (!sigma_list_has(r->spares, node))
			continue;
		if (!r->complete)
			return true;
		job = ctl_view_job(v, r->job);
		if (job && ctl_job_needs_back(c, v, job))
			return true;
	}
	return false;
}

/* The reservation's healthy nodes that run no job, as a comma list. */
void ctl_pool_now(const struct ctl_view *v, char *out, size_t size)
{
	out[0] = '\0';
	for (size_t i = 0; i < v->nnodes; i++)
		if ((v->nodes[i].flags & CTL_N_RESERVED) &&
		    ctl_node_healthy(&v->nodes[i]) && !ctl_node_in_job(v, i))
			sigma_list_add(out, size, v->nodes[i].name);
}

int ctl_resv_apply(struct ctl *c, struct ctl_view *v, const char *nodes)
{
	int rc = ctl_slurm_resv_set(c->cfg.reservation, nodes, v->resv_exists);

	if (rc)
		return rc;
	/* keep the view in step for the rest of this tick */
	v->nresv = 0;
	for (size_t i = 0; i < v->nnodes; i++) {
		v->nodes[i].flags &= ~(unsigned)CTL_N_RESERVED;
		if (sigma_list_has(nodes, v->nodes[i].name)) {
			v->nodes[i].flags |= CTL_N_RESERVED;
			v->nresv++;
		}
	}
	v->resv_exists = nodes[0] != '\0';
	return 0;
}

/* a spare free to be reserved now: healthy, idle, in no job, not lent */
static bool ctl_spare_free(const struct ctl *c, const struct ctl_view *v,
			   long i)
{
	const struct ctl_node *n = &v->nodes[i];

	return ctl_node_healthy(n) && (n->flags & CTL_N_IDLE) &&
	       !ctl_node_in_job(v, (size_t)i) && !ctl_lent(c, v, n->name);
}

/* the first node of pool that is not a configured spare (a stand-in) */
static bool ctl_stand_in(const char *pool, const char *members, char *out,
			 size_t size)
{
	char tmp[SIGMAD_LIST_MAX], *save = NULL, *tok;

	sigma_strlcpy(tmp, pool, sizeof(tmp));
	for (tok = strtok_r(tmp, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save))
		if (!sigma_list_has(members, tok)) {
			sigma_strlcpy(out, tok, size);
			return true;
		}
	return false;
}

/* the reservation now holds pool; gone went back to service */
static void ctl_pool_log(struct ctl *c, const char *pool, const char *gone,
			 size_t target)
{
	struct evlog_event ev;

	ctl_ev_init(&ev, "pool");
	sigma_strlcpy(ev.node, pool, sizeof(ev.node));
	sigma_strlcpy(ev.spare, gone, sizeof(ev.spare));
	snprintf(ev.text, sizeof(ev.text),
		 "reservation %s holds %zu of %zu spares%s%s",
		 c->cfg.reservation, sigma_list_count(pool), target,
		 gone[0] ? "; back to service: " : "", gone);
	sigma_info("spare pool: %s = [%s] (%zu of %zu)%s%s", c->cfg.reservation,
		   pool, sigma_list_count(pool), target,
		   gone[0] ? "; back to service: " : "", gone);
	ctl_log(c, &ev);
}

/*
 * Keep the reservation at the configured spares: fill it from them, and
 * when one of them is free again while a stand-in (a repaired node that
 * joined while the pool was short) holds its place, the stand-in goes back
 * to service.
 */
void ctl_pool_sync(struct ctl *c, struct ctl_view *v)
{
	char members[SIGMAD_LIST_MAX], want[SIGMAD_LIST_MAX],
	    tmp[SIGMAD_LIST_MAX], out[CTL_NAME_MAX], gone[SIGMAD_LIST_MAX] = "";
	char *save = NULL, *tok;
	size_t target, have;
	bool changed = false;

	ctl_members(c, v, members);
	target = sigma_list_count(members);
	ctl_pool_now(v, want, sizeof(want));
	have = sigma_list_count(want);
	/* a reserved node that went bad leaves the pool (repair brings it
	 * back) */
	if (have != v->nresv)
		changed = true;
	sigma_strlcpy(tmp, members, sizeof(tmp));
	for (tok = strtok_r(tmp, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		long i = ctl_view_node(v, tok);

		if (i < 0 || (v->nodes[i].flags & CTL_N_RESERVED))
			continue;
		if (!ctl_spare_free(c, v, i)) {
			sigma_debug("spare %s not reserved now (flags 0x%x%s)",
				    tok, v->nodes[i].flags,
				    ctl_lent(c, v, tok) ? ", lent" : "");
			continue;
		}
		if (have >= target) {
			if (!ctl_stand_in(want, members, out, sizeof(out)))
				break;
			sigma_list_del(want, out);
			sigma_list_add(gone, sizeof(gone), out);
			have--;
		}
		if (!sigma_list_add(want, sizeof(want), tok)) {
			have++;
			changed = true;
		}
	}
	if (changed && ctl_resv_apply(c, v, want) == 0)
		ctl_pool_log(c, want, gone, target);
}
