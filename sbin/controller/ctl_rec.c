/*
 * ctl_rec.c - the controller's records: the recoveries it decided (one per
 * job, attempt and class) and what it remembers of each job (its last
 * nodes, the nodes reported slow or drained for it, its relaunches, the
 * suspect reports). In memory; the event log is their record on disk.
 */
#include <stdlib.h>
#include <string.h>

#include "ctl_internal.h"
#include "policy.h"
#include "sigma.h"

enum ctl_rec_class ctl_rec_class(int verdict)
{
	if (verdict == POLICY_WATCH)
		return REC_WATCH;
	return verdict == POLICY_GIVE_UP || verdict == POLICY_UNPROTECTED
		   ? REC_GIVE_UP
		   : REC_RECOVERY;
}

struct ctl_rec *ctl_rec_find(struct ctl *c, uint32_t job, int attempt,
			     enum ctl_rec_class cls)
{
	for (size_t i = 0; i < c->nrecs; i++) {
		struct ctl_rec *r = &c->recs[i];

		if (r->job == job && r->attempt == attempt &&
		    ctl_rec_class(r->verdict) == cls)
			return r;
	}
	return NULL;
}

struct ctl_rec *ctl_rec_new(struct ctl *c)
{
	if (c->nrecs == c->caprecs) {
		size_t ncap = c->caprecs ? c->caprecs * 2 : 16;
		struct ctl_rec *n = realloc(c->recs, ncap * sizeof(*n));

		if (!n)
			return NULL;
		c->recs = n;
		c->caprecs = ncap;
	}
	memset(&c->recs[c->nrecs], 0, sizeof(c->recs[0]));
	return &c->recs[c->nrecs++];
}

/* A recovery or a give-up was decided for the job's current attempt. */
bool ctl_decided(const struct ctl *c, const struct ctl_job *job)
{
	for (size_t i = 0; i < c->nrecs; i++) {
		const struct ctl_rec *r = &c->recs[i];
		enum ctl_rec_class cls = ctl_rec_class(r->verdict);

		if (r->job != job->id)
			continue;
		if ((cls == REC_RECOVERY &&
		     r->attempt == job->restart_cnt + 2) ||
		    (cls == REC_GIVE_UP && r->attempt == job->restart_cnt + 1))
			return true;
	}
	return false;
}

bool ctl_in_open_rec(const struct ctl *c, const char *node)
{
	for (size_t i = 0; i < c->nrecs; i++)
		if (!c->recs[i].complete &&
		    sigma_list_has(c->recs[i].bad, node))
			return true;
	return false;
}

/* job's entry, or NULL */
static const struct ctl_last *ctl_last_find(const struct ctl *c, uint32_t job)
{
	for (size_t i = 0; i < c->nlast; i++)
		if (c->last[i].job == job)
			return &c->last[i];
	return NULL;
}

const char *ctl_last_nodes(const struct ctl *c, uint32_t job)
{
	const struct ctl_last *l = ctl_last_find(c, job);

	return l ? l->nodes : "";
}

/* remember the nodes of job (in memory; callers log them) */
void ctl_last_set(struct ctl *c, uint32_t job, const char *nodes)
{
	struct ctl_last *n;

	for (size_t i = 0; i < c->nlast; i++)
		if (c->last[i].job == job) {
			sigma_strlcpy(c->last[i].nodes, nodes,
				      sizeof(c->last[i].nodes));
			return;
		}
	n = realloc(c->last, (c->nlast + 1) * sizeof(*n));
	if (!n)
		return;
	c->last = n;
	memset(&n[c->nlast], 0, sizeof(n[0]));
	n[c->nlast].job = job;
	sigma_strlcpy(n[c->nlast++].nodes, nodes, sizeof(n[0].nodes));
}

const char *ctl_in_job_told(const struct ctl *c, uint32_t job)
{
	const struct ctl_last *l = ctl_last_find(c, job);

	return l ? l->in_job : "";
}

/* job's entry, made when there is none (its nodes come at the next "run") */
static struct ctl_last *ctl_last_of(struct ctl *c, uint32_t job)
{
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < c->nlast; i++)
			if (c->last[i].job == job)
				return &c->last[i];
		if (!pass)
			ctl_last_set(c, job, "");
	}
	return NULL;
}

void ctl_in_job_tell(struct ctl *c, uint32_t job, const char *node)
{
	struct ctl_last *l = ctl_last_of(c, job);

	if (l)
		sigma_list_add(l->in_job, sizeof(l->in_job), node);
}

void ctl_report_note(struct ctl *c, int64_t time, uint32_t job, uint32_t uid)
{
	size_t k = 0;

	/* keep the last hour's; when full, the oldest goes */
	for (size_t i = 0; i < c->nreports; i++)
		if (time - c->reports[i].time < 3600)
			c->reports[k++] = c->reports[i];
	c->nreports = k;
	if (c->nreports == CTL_REPORTS_MAX) {
		memmove(&c->reports[0], &c->reports[1],
			(CTL_REPORTS_MAX - 1) * sizeof(c->reports[0]));
		c->nreports--;
	}
	c->reports[c->nreports++] = (struct ctl_report){time, job, uid};
}

int ctl_reports(const struct ctl *c, int64_t now, uint32_t job, uint32_t uid,
		bool by_user)
{
	int n = 0;

	for (size_t i = 0; i < c->nreports; i++)
		if (now - c->reports[i].time < 3600 &&
		    (by_user ? c->reports[i].uid == uid
			     : c->reports[i].job == job))
			n++;
	return n;
}

const char *ctl_slow_nodes(const struct ctl *c, uint32_t job)
{
	const struct ctl_last *l = ctl_last_find(c, job);

	return l ? l->slow : "";
}

void ctl_slow_add(struct ctl *c, uint32_t job, const char *node)
{
	struct ctl_last *l = ctl_last_of(c, job);

	if (l)
		sigma_list_add(l->slow, sizeof(l->slow), node);
}

const char *ctl_drained_nodes(const struct ctl *c, uint32_t job)
{
	const struct ctl_last *l = ctl_last_find(c, job);

	return l ? l->drained : "";
}

void ctl_drained_add(struct ctl *c, uint32_t job, const char *node)
{
	struct ctl_last *l = ctl_last_of(c, job);

	if (l)
		sigma_list_add(l->drained, sizeof(l->drained), node);
}

int ctl_relaunches(const struct ctl *c, uint32_t job)
{
	const struct ctl_last *l = ctl_last_find(c, job);

	return l ? l->relaunches : 0;
}

int ctl_relaunch_newest(const struct ctl *c, uint32_t job)
{
	const struct ctl_last *l = ctl_last_find(c, job);

	return l ? l->launch : 0;
}

void ctl_relaunch_count(struct ctl *c, uint32_t job, int launch)
{
	struct ctl_last *l = ctl_last_of(c, job);

	if (!l)
		return;
	l->relaunches++;
	if (launch > l->launch)
		l->launch = launch;
}

int ctl_restarts_used(const struct ctl *c, const struct ctl_job *job)
{
	return job->restart_cnt + ctl_relaunches(c, job->id);
}
