/*
 * report.c - readings, thresholds and the verdict; the summary line (also
 * the drain reason), JSON and Prometheus text.
 */
#include "config.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "sigma.h"
#include "probe.h"

void probe_report_init(struct probe_report *rep, const char *node, int level)
{
	memset(rep, 0, sizeof(*rep));
	sigma_strlcpy(rep->node, node ? node : "", sizeof(rep->node));
	rep->level = level;
	rep->ngpus = -1;
	rep->verdict = PROBE_OK;
	rep->started_ms = sigma_now_ms();
}

struct probe_reading *probe_find(struct probe_report *rep, const char *comp,
				 const char *key)
{
	for (int i = 0; i < rep->n; i++)
		if (!strcmp(rep->r[i].comp, comp) &&
		    !strcmp(rep->r[i].key, key))
			return &rep->r[i];
	return NULL;
}

struct probe_reading *probe_add(struct probe_report *rep, const char *comp,
				const char *key, double value, int sense,
				double warn, double fail, const char *unit)
{
	struct probe_reading *r = probe_find(rep, comp, key);

	if (!r) {
		if (rep->n >= PROBE_MAX_READINGS)
			return NULL;
		r = &rep->r[rep->n++];
		memset(r, 0, sizeof(*r));
		sigma_strlcpy(r->comp, comp, sizeof(r->comp));
		sigma_strlcpy(r->key, key, sizeof(r->key));
	}
	r->value = value;
	r->sense = sense;
	r->warn = warn;
	r->fail = fail;
	r->unit = unit ? unit : "";
	r->injected = false;
	r->not_ours = false;
	return r;
}

void probe_thresholds(const struct probe_conf *conf, const char *key,
		      int *sense, double *warn, double *fail, const char **unit)
{
	*sense = PROBE_INFO;
	*warn = NAN;
	*fail = NAN;
	*unit = "";
	if (!strcmp(key, "temp_c")) {
		/* after a job its own heat is still in the parts: not judged */
		*sense = conf->after_job ? PROBE_INFO : PROBE_HIGH_BAD;
		*warn = conf->temp_warn_c;
		*fail = conf->temp_fail_c;
	} else if (!strcmp(key, "ecc_uncorrected")) {
		*sense = PROBE_HIGH_BAD;
		*fail = conf->ecc_uncorrected_fail;
	} else if (!strcmp(key, "ecc_corrected_rate")) {
		*sense = PROBE_HIGH_BAD;
		*warn = conf->ecc_corrected_rate_warn;
		*unit = "/h";
	} else if (!strcmp(key, "retired_pages")) {
		*sense = PROBE_HIGH_BAD;
		*warn = conf->retired_pages_warn;
		*fail = conf->retired_pages_fail;
	} else if (!strcmp(key, "retired_pending") ||
		   !strcmp(key, "remap_pending") ||
		   !strcmp(key, "throttle_hw")) {
		*sense = PROBE_HIGH_BAD;
		*warn = 1;
	} else if (!strcmp(key, "remap_failed")) {
		*sense = PROBE_HIGH_BAD;
		*fail = 1;
	} else if (!strcmp(key, "power_spike_w")) {
		*sense = PROBE_HIGH_BAD;
		*warn = conf->power_spike_warn_w;
		*unit = "W";
	} else if (!strcmp(key, "power_w") || !strcmp(key, "power_limit_w")) {
		*unit = "W";
	} else if (!strcmp(key, "mem_avail_mb")) {
		*sense = PROBE_LOW_BAD;
		*warn = conf->mem_avail_warn_mb;
		*fail = conf->mem_avail_fail_mb;
	} else if (!strcmp(key, "disk_free_gb")) {
		*sense = PROBE_LOW_BAD;
		*warn = conf->disk_free_warn_gb;
		*fail = conf->disk_free_fail_gb;
	} else if (!strcmp(key, "compute") || !strcmp(key, "memtest")) {
		*sense = PROBE_LOW_BAD;
		*fail = 1; /* 1 = the known answer came back */
	}
}

static int judge_value(const struct probe_reading *r)
{
	if (isnan(r->value))
		return PROBE_OK;
	switch (r->sense) {
	case PROBE_HIGH_BAD:
		if (!isnan(r->fail) && r->value >= r->fail)
			return PROBE_FAIL;
		if (!isnan(r->warn) && r->value >= r->warn)
			return PROBE_WARN;
		return PROBE_OK;
	case PROBE_LOW_BAD:
		if (!isnan(r->fail) && r->value < r->fail)
			return PROBE_FAIL;
		if (!isnan(r->warn) && r->value < r->warn)
			return PROBE_WARN;
		return PROBE_OK;
	}
	return PROBE_OK;
}

static int judge_one(const struct probe_reading *r)
{
	int v = judge_value(r);

	if ((v == PROBE_FAIL || v == PROBE_WARN) && r->not_ours)
		return PROBE_UNJUDGED;
	return v;
}

int probe_judge(struct probe_report *rep)
{
	bool fail = false, warn = false, unjudged = false;

	for (int i = 0; i < rep->n; i++) {
		rep->r[i].verdict = judge_one(&rep->r[i]);
		fail |= rep->r[i].verdict == PROBE_FAIL;
		warn |= rep->r[i].verdict == PROBE_WARN;
		unjudged |= rep->r[i].verdict == PROBE_UNJUDGED;
	}
	/* the node's own faults first; "cannot judge" only when none */
	if (rep->verdict != PROBE_ERROR)
		rep->verdict = fail	  ? PROBE_FAIL
			       : warn	  ? PROBE_WARN
			       : unjudged ? PROBE_UNJUDGED
					  : PROBE_OK;
	return rep->verdict;
}

const char *probe_verdict_name(int verdict)
{
	switch (verdict) {
	case PROBE_OK:
		return "ok";
	case PROBE_FAIL:
		return "fail";
	case PROBE_WARN:
		return "warning";
	case PROBE_UNJUDGED:
		return "cannot_judge";
	}
	return "error";
}

static bool is_passfail(const struct probe_reading *r)
{
	return !strcmp(r->key, "compute") || !strcmp(r->key, "memtest");
}

/* "gpu0 ecc_uncorrected=2 (limit 1)" */
static int reading_text(const struct probe_reading *r, char *buf, size_t size)
{
	double limit = r->verdict == PROBE_FAIL ||
			       (r->verdict == PROBE_UNJUDGED &&
				judge_value(r) == PROBE_FAIL)
			   ? r->fail
			   : r->warn;

	if (is_passfail(r))
		return snprintf(buf, size, "%s %s=%s", r->comp, r->key,
				r->value >= 1 ? "ok" : "fail");
	if (isnan(limit) || r->verdict == PROBE_OK)
		return snprintf(buf, size, "%s %s=%g%s", r->comp, r->key,
				r->value, r->unit);
	return snprintf(buf, size, "%s %s=%g%s (limit %g)", r->comp, r->key,
			r->value, r->unit, limit);
}

static void append(char *buf, size_t size, size_t *used, const char *fmt, ...)
    SIGMA_PRINTF(4, 5);
static void append(char *buf, size_t size, size_t *used, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (*used >= size)
		return;
	va_start(ap, fmt);
	n = vsnprintf(buf + *used, size - *used, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	*used += (size_t)n < size - *used ? (size_t)n : size - *used - 1;
}

void probe_summary(const struct probe_report *rep, char *buf, size_t size)
{
	const char *lv = probe_level_name(rep->level);
	size_t used = 0;
	int want, listed = 0;

	if (!size)
		return;
	buf[0] = '\0';
	switch (rep->verdict) {
	case PROBE_ERROR:
		(void)sigma_reason_format(buf, size, false,
					  rep->level == PROBE_FULL
					      ? SIGMA_LEVEL_FULL
					      : SIGMA_LEVEL_QUICK,
					  "could not run: ");
		used = strlen(buf);
		append(buf, size, &used, "%s", rep->error);
		return;
	case PROBE_OK:
		append(buf, size, &used, "sigma: probe %s: ok: %s, ", lv,
		       rep->node);
		if (rep->ngpus > 0)
			append(buf, size, &used, "%d GPU%s", rep->ngpus,
			       rep->ngpus == 1 ? "" : "s");
		else
			append(buf, size, &used, "no GPUs, host only%s%s%s",
			       rep->gpu_note[0] ? " (" : "", rep->gpu_note,
			       rep->gpu_note[0] ? ")" : "");
		append(buf, size, &used, ", %d readings", rep->n);
		return;
	case PROBE_WARN:
		want = PROBE_WARN;
		break;
	case PROBE_UNJUDGED:
		want = PROBE_UNJUDGED;
		break;
	default:
		want = PROBE_FAIL;
		break;
	}
	(void)sigma_reason_format(buf, size, want == PROBE_WARN,
				  rep->level == PROBE_FULL ? SIGMA_LEVEL_FULL
							   : SIGMA_LEVEL_QUICK,
				  want == PROBE_UNJUDGED
				      ? "cannot judge (busy or full, not the node's own fault): "
				      : "");
	used = strlen(buf);
	for (int i = 0; i < rep->n; i++) {
		char one[160];

		if (rep->r[i].verdict != want)
			continue;
		reading_text(&rep->r[i], one, sizeof(one));
		append(buf, size, &used, "%s%s", listed++ ? "; " : "", one);
	}
}

/*
 * a number, or null where there is none (NaN: no reading, no limit); a
 * whole one is written as an integer ("value":97), as it always was
 */
static json_t *json_num(double v)
{
	if (isnan(v) || isinf(v))
		return json_null();
	if (v == trunc(v) && fabs(v) < 9007199254740992.0) /* 2^53 */
		return json_integer((json_int_t)v);
	return json_real(v);
}

static json_t *json_reading(const struct probe_reading *r)
{
	return json_pack("{s:s, s:s, s:o, s:o, s:o, s:s, s:s, s:s}",
			 "component", r->comp, "key", r->key, "value",
			 json_num(r->value), "warn", json_num(r->warn), "fail",
			 json_num(r->fail), "bad_when",
			 r->sense == PROBE_HIGH_BAD  ? "above"
			 : r->sense == PROBE_LOW_BAD ? "below"
						     : "never",
			 "verdict", probe_verdict_name(r->verdict), "source",
			 r->injected ? "injected" : "measured");
}

int probe_print_json(const struct probe_report *rep, FILE *out)
{
	char summary[1024];
	json_t *o, *readings = json_array();
	int rc = 0;

	probe_summary(rep, summary, sizeof(summary));
	for (int i = 0; readings && i < rep->n; i++)
		if (json_array_append_new(readings, json_reading(&rep->r[i])))
			rc = -EINVAL;
	o = json_pack("{s:s, s:s, s:s, s:i, s:i, s:s, s:I, s:s, s:o*}", "node",
		      rep->node, "level", probe_level_name(rep->level),
		      "verdict", probe_verdict_name(rep->verdict), "exit",
		      rep->verdict, "gpus", rep->ngpus < 0 ? 0 : rep->ngpus,
		      "gpu_note", rep->gpu_note, "elapsed_ms",
		      (json_int_t)rep->elapsed_ms, "summary", summary,
		      "readings", readings);
	if (!o || rc || json_dumpf(o, out, JSON_COMPACT) ||
	    fputc('\n', out) < 0)
		rc = -EIO;
	json_decref(o);
	return rc;
}

int probe_format_metrics(const struct probe_report *rep, char *buf, size_t size)
{
	const char *lv = probe_level_name(rep->level);
	struct sigma_metrics m;

	sigma_metrics_init(&m, buf, size);
	sigma_metrics_family(&m, "sigma_probe_verdict", "gauge",
			     "sigma-probe verdict: 0 ok, 1 fail, 2 warning, 3 "
			     "could not run, 4 cannot judge");
	sigma_metrics_sample(&m, "sigma_probe_verdict", rep->verdict, "node",
			     rep->node, "level", lv, NULL);
	sigma_metrics_family(&m, "sigma_probe_gpus", "gauge",
			     "GPUs the probe found");
	sigma_metrics_sample(&m, "sigma_probe_gpus",
			     rep->ngpus < 0 ? 0 : rep->ngpus, "node", rep->node,
			     NULL);
	sigma_metrics_family(&m, "sigma_probe_duration_seconds", "gauge",
			     "wall time of the probe");
	sigma_metrics_sample(&m, "sigma_probe_duration_seconds",
			     (double)rep->elapsed_ms / 1000.0, "node",
			     rep->node, "level", lv, NULL);
	sigma_metrics_family(&m, "sigma_probe_reading", "gauge",
			     "one reading, with its thresholds as "
			     "sigma_probe_threshold");
	for (int i = 0; i < rep->n; i++)
		if (!isnan(rep->r[i].value))
			sigma_metrics_sample(&m, "sigma_probe_reading",
					     rep->r[i].value, "node", rep->node,
					     "component", rep->r[i].comp, "key",
					     rep->r[i].key, NULL);
	sigma_metrics_family(&m, "sigma_probe_threshold", "gauge",
			     "the warn and fail limits of a reading");
	for (int i = 0; i < rep->n; i++) {
		const struct probe_reading *r = &rep->r[i];

		if (!isnan(r->warn))
			sigma_metrics_sample(&m, "sigma_probe_threshold",
					     r->warn, "node", rep->node,
					     "component", r->comp, "key", r->key,
					     "kind", "warn", NULL);
		if (!isnan(r->fail))
			sigma_metrics_sample(&m, "sigma_probe_threshold",
					     r->fail, "node", rep->node,
					     "component", r->comp, "key", r->key,
					     "kind", "fail", NULL);
	}
	return sigma_metrics_end(&m);
}
