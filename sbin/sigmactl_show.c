/*
 * sigmactl_show.c - sigmad's replies printed for people (see
 * sigmactl_show.h). The JSON is sigmactl(8)'s schema, read with jansson.
 */
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <string.h>

#include "sigma.h"
#include "sigmactl_show.h"

/* prefix then s, with control characters escaped: s came from users */
static void show_put(FILE *f, const char *prefix, const char *s)
{
	char safe[4 * EVLOG_LINE_MAX + 1];

	fprintf(f, "%s%s", prefix, sigma_escape(s, safe, sizeof(safe)));
}

static const char *show_str(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	return s ? s : "";
}

static long long show_int(json_t *o, const char *key)
{
	return json_integer_value(json_object_get(o, key));
}

/* a JSON array of names as a comma list, or none when empty */
static void show_list(FILE *out, json_t *a, const char *none)
{
	size_t i;
	json_t *v;

	if (!json_array_size(a)) {
		fputs(none, out);
		return;
	}
	json_array_foreach(a, i, v)
	    show_put(out, i ? "," : "",
		     json_string_value(v) ? json_string_value(v) : "?");
}

/* "2026-01-05 14:03:12 CET (3m12s ago)" */
static void show_since(FILE *out, int64_t t, int64_t now)
{
	char when[64], dur[24];

	fprintf(out, "%s (%s ago)", sigma_format_time(t, when, sizeof(when)),
		sigma_format_duration(now - t, dur, sizeof(dur)));
}

static int show_load(const char *reply, json_t **o, char *err, size_t errlen)
{
	json_error_t jerr;

	*o = json_loads(reply, JSON_REJECT_DUPLICATES, &jerr);
	if (!*o)
		return sigma_set_err(
		    err, errlen, -EINVAL,
		    "sigmad's reply is not JSON: column %d: %s", jerr.column,
		    jerr.text);
	if (!json_is_object(*o)) {
		json_decref(*o);
		return sigma_set_err(err, errlen, -EINVAL,
				     "sigmad's reply is not a JSON object");
	}
	return 0;
}

static void show_jobs(FILE *out, json_t *jobs)
{
	size_t i;
	json_t *j;

	fprintf(out, "managed jobs:\n");
	json_array_foreach(jobs, i, j)
	{
		long long left = show_int(j, "restarts_left");

		fprintf(out,
			"  %lld %s restarts=%lld nodes=", show_int(j, "job"),
			show_str(j, "state"), show_int(j, "restarts"));
		show_list(out, json_object_get(j, "nodes"), "(none)");
		if (left >= 0)
			fprintf(out, " (%lld restart%s left)", left,
				left == 1 ? "" : "s");
		fputc('\n', out);
	}
	if (!json_array_size(jobs))
		fprintf(out, "  none\n");
}

static void show_recs(FILE *out, json_t *recs, int64_t now)
{
	char dur[24];
	size_t i;
	json_t *r;

	fprintf(out, "recoveries in progress:\n");
	json_array_foreach(recs, i, r)
	{
		json_t *spares = json_object_get(r, "spares");

		fprintf(out, "  job %lld attempt %lld: %s %s on ",
			show_int(r, "job"), show_int(r, "attempt"),
			show_str(r, "verdict"), show_str(r, "kind"));
		show_list(out, json_object_get(r, "nodes"), "?");
		if (json_array_size(spares)) {
			fputs(" -> ", out);
			show_list(out, spares, "");
		}
		fprintf(out, ", for %s\n",
			sigma_format_duration(now - show_int(r, "decided_at"),
					      dur, sizeof(dur)));
	}
	if (!json_array_size(recs))
		fprintf(out, "  none\n");
}

static void show_nodes(FILE *out, const char *title, json_t *nodes, int64_t now)
{
	size_t i;
	json_t *n;

	fprintf(out, "%s:\n", title);
	json_array_foreach(nodes, i, n)
	{
		show_put(out, "  ", show_str(n, "node"));
		fprintf(out, " %s since ", show_str(n, "state"));
		show_since(out, show_int(n, "since"), now);
		show_put(out, ": ", show_str(n, "reason"));
		fputc('\n', out);
	}
	if (!json_array_size(nodes))
		fprintf(out, "  none\n");
}

int show_status(const char *reply, int64_t now, FILE *out, char *err,
		size_t errlen)
{
	json_t *o, *sp;
	int rc = show_load(reply, &o, err, errlen);

	if (rc)
		return rc;
	sp = json_object_get(o, "spares");
	fputs("spares: ", out);
	show_list(out, json_object_get(sp, "pool"), "none");
	fprintf(out, " (%zu of %zu in reservation ",
		json_array_size(json_object_get(sp, "pool")),
		json_array_size(json_object_get(sp, "members")));
	show_put(out, "", show_str(sp, "reservation"));
	fputs(")\n", out);
	show_jobs(out, json_object_get(o, "jobs"));
	show_recs(out, json_object_get(o, "recoveries"), now);
	show_nodes(out, "nodes in repair", json_object_get(o, "repair"), now);
	show_nodes(out, "nodes drained by an admin (sigmactl drain)",
		   json_object_get(o, "admin_drained"), now);
	json_decref(o);
	return 0;
}

int show_spares(const char *reply, FILE *out, char *err, size_t errlen)
{
	json_t *o;
	int rc = show_load(reply, &o, err, errlen);

	if (rc)
		return rc;
	show_put(out, "reservation ", show_str(o, "reservation"));
	fputs(": ", out);
	show_list(out, json_object_get(o, "pool"), "(empty)");
	fputs("\npool members: ", out);
	show_list(out, json_object_get(o, "members"), "(none)");
	fputc('\n', out);
	json_decref(o);
	return 0;
}

/* the time of the decision of job's attempt printed before, or -1 */
static int64_t show_decided(const struct show_history *h, uint32_t job,
			    int attempt)
{
	for (unsigned i = 0; i < sizeof(h->decided) / sizeof(h->decided[0]);
	     i++)
		if (h->decided[i].job == job &&
		    h->decided[i].attempt == attempt)
			return h->decided[i].time;
	return -1;
}

static void show_remember(struct show_history *h, const struct evlog_event *ev)
{
	unsigned n = sizeof(h->decided) / sizeof(h->decided[0]);

	h->decided[h->next % n].job = ev->job;
	h->decided[h->next % n].attempt = ev->attempt;
	h->decided[h->next % n].time = ev->time;
	h->next++;
}

void show_event(struct show_history *h, const struct evlog_event *ev, FILE *out)
{
	char when[64], dur[24];
	int64_t t0 = -1;

	sigma_format_time(ev->time, when, sizeof(when));
	fprintf(out, "%s %-12s", when, ev->type);
	if (ev->job)
		fprintf(out, " job %u", ev->job);
	if (ev->attempt)
		fprintf(out, " attempt %d", ev->attempt);
	if (ev->kind[0])
		show_put(out, " ", ev->kind);
	if (ev->node[0])
		show_put(out, " ", ev->node);
	if (ev->verdict[0])
		show_put(out, " -> ", ev->verdict);
	if (ev->spare[0])
		show_put(out, " spares ", ev->spare);
	if (!strcmp(ev->type, "repair"))
		fprintf(out, " exit %d", ev->rc);
	if (ev->text[0])
		show_put(out, ": ", ev->text);
	if (!strcmp(ev->type, "decide"))
		show_remember(h, ev);
	else if (!strcmp(ev->type, "complete") || !strcmp(ev->type, "give_up"))
		t0 = show_decided(h, ev->job, ev->attempt);
	if (t0 >= 0)
		fprintf(out, " (%s after the decision)",
			sigma_format_duration(ev->time - t0, dur, sizeof(dur)));
	fputc('\n', out);
}
