/*
 * ctl_events.c - the controller's event log lines: an event made and
 * appended (fsync'd), and the counters every appended or replayed event
 * adds to (ctl_metrics.c exports them; ctl.c keeps them across the log's
 * compaction, in ctl_counts_format's text).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "contract.h"
#include "ctl_internal.h"
#include "eventlog.h"
#include "policy.h"
#include "sigma.h"

/* ---- lines --------------------------------------------------------------- */

void ctl_ev_init(struct evlog_event *ev, const char *type)
{
	memset(ev, 0, sizeof(*ev));
	ev->time = (int64_t)time(NULL);
	sigma_strlcpy(ev->type, type, sizeof(ev->type));
}

int ctl_log(struct ctl *c, const struct evlog_event *ev)
{
	int rc = evlog_append(&c->log, ev);

	if (rc)
		sigma_error("event log %s: cannot append %s: %s", c->log_path,
			    ev->type, strerror(-rc));
	else
		ctl_count_event(c, ev);
	return rc;
}

void ctl_ev_from_rec(struct evlog_event *ev, const char *type,
		     const struct ctl_rec *r)
{
	ctl_ev_init(ev, type);
	ev->job = r->job;
	ev->uid = r->uid;
	ev->attempt = r->attempt;
	sigma_strlcpy(ev->node, r->bad, sizeof(ev->node));
}

/* ---- counters ----------------------------------------------------------- */

/* the bounds of the recovery-duration histogram, seconds */
const double ctl_duration_bounds[CTL_DURATION_BUCKETS] = {
    5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200};

static int verdict_index(const char *name)
{
	for (int v = 0; v < CTL_VERDICTS; v++)
		if (!strcmp(policy_verdict_name((enum policy_verdict)v), name))
			return v;
	return -1;
}

static void count_duration(struct ctl_counts *k, double s)
{
	for (int i = 0; i < CTL_DURATION_BUCKETS; i++)
		if (s <= ctl_duration_bounds[i])
			k->duration_le[i]++;
	k->duration_count++;
	k->duration_sum += s;
}

/* every counter in a fixed order: what ctl_counts_format writes */
#define COUNTS_N (2 * CTL_VERDICTS + CTL_DRAIN_CLASSES + CTL_DURATION_BUCKETS + 1)

static uint64_t *counts_at(struct ctl_counts *k, int i)
{
	if (i < 2 * CTL_VERDICTS)
		return &k->recoveries[i / CTL_VERDICTS][i % CTL_VERDICTS];
	i -= 2 * CTL_VERDICTS;
	if (i < CTL_DRAIN_CLASSES)
		return &k->drains[i];
	i -= CTL_DRAIN_CLASSES;
	if (i < CTL_DURATION_BUCKETS)
		return &k->duration_le[i];
	return &k->duration_count;
}

int ctl_counts_format(const struct ctl_counts *k, char *buf, size_t size)
{
	struct ctl_counts tmp = *k;
	size_t n = 0;
	int w;

	for (int i = 0; i < COUNTS_N; i++) {
		w = snprintf(buf + n, size - n, "%llu ",
			     (unsigned long long)*counts_at(&tmp, i));
		if (w < 0 || (size_t)w >= size - n)
			return -ENOSPC;
		n += (size_t)w;
	}
	w = snprintf(buf + n, size - n, "%.17g", k->duration_sum);
	if (w < 0 || (size_t)w >= size - n)
		return -ENOSPC;
	return (int)(n + (size_t)w);
}

int ctl_counts_parse(struct ctl_counts *k, const char *text)
{
	struct ctl_counts tmp;
	const char *p = text;
	char *end;

	memset(&tmp, 0, sizeof(tmp));
	for (int i = 0; i < COUNTS_N; i++) {
		if (*p < '0' || *p > '9')
			return -EINVAL;
		errno = 0;
		*counts_at(&tmp, i) = strtoull(p, &end, 10);
		if (errno || *end != ' ')
			return -EINVAL;
		p = end + 1;
	}
	errno = 0;
	tmp.duration_sum = strtod(p, &end);
	if (errno || *end || end == p || !(tmp.duration_sum >= 0))
		return -EINVAL;
	*k = tmp;
	return 0;
}

void ctl_count_event(struct ctl *c, const struct evlog_event *ev)
{
	struct ctl_counts *k = &c->counts;
	bool warning = !strcmp(ev->kind, "warning");
	struct ctl_rec *r;
	int v;

	if (!strcmp(ev->type, "decide")) {
		if ((v = verdict_index(ev->verdict)) < 0)
			return;
		/* durations run from event to event: one clock */
		r = ctl_rec_find(c, ev->job, ev->attempt, REC_RECOVERY);
		if (r)
			r->logged_at = ev->time;
		k->recoveries[warning][v]++;
		/* the probe's drains (or DOWN nodes) sigmad acted on */
		k->drains[warning ? 1 : 0] += sigma_list_count(ev->node);
	} else if (!strcmp(ev->type, "drain")) {
		if (sigma_reason_parse(ev->text, NULL, NULL) ==
		    SIGMA_REASON_ADMIN)
			k->drains[2]++;
	} else if (!strcmp(ev->type, "complete")) {
		r = ctl_rec_find(c, ev->job, ev->attempt, REC_RECOVERY);
		if (r && r->logged_at && ev->time >= r->logged_at)
			count_duration(k, (double)(ev->time - r->logged_at));
	}
}
