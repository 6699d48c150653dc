/*
 * probe_inject.c - the probe's fault-injection file (sbin/probe/inject.c
 * probe_inject: inject_dir/NODE, key=value readings) and what the probe
 * makes of the readings afterwards (sbin/probe/report.c: the verdict, the
 * summary that becomes the drain reason, the Prometheus text, the JSON).
 * The input is the injection file, read at a quick and at a full level.
 *
 * FUZZ_SOURCES: sbin/probe/inject.c sbin/probe/report.c sbin/probe/conf.c lib/contract.c lib/kv.c lib/str.c lib/log.c lib/file.c lib/metrics.c
 * FUZZ_PKG: jansson
 *
 * Invariants, against a model of the documented rules (docs/probe.md,
 * inject.c):
 * - the file is key=value words, one or more a line separated by blanks,
 *   '#' to the end of the line a comment; it is applied exactly when every
 *   word is a known reading (host's, or "gpuN." with N < 64) with a number
 *   in -1e15..1e15, or ok|fail for compute and memtest, and it has no NUL
 *   byte (malformed: an error, never a file cut short); the return value
 *   is the number of readings applied (memtest only at full level), else
 *   -errno with a note that names the file and line;
 * - every reading the model expects is there, marked injected, with the
 *   last value the file gave it, and a measured reading it replaces keeps
 *   the thresholds its backend chose; nothing else is marked injected;
 * - the report never holds more than PROBE_MAX_READINGS, nor one
 *   (component, key) twice;
 * - an injected compute=fail or memtest=fail (at full level) fails the
 *   node; the summary of a failing or warning report is a drain reason
 *   that the contract's parser (sigma_reason_parse) reads as a failure or
 *   a warning of the probe's own level, naming at least one reading;
 * - the JSON and Prometheus outputs are terminated, without raw control
 *   bytes inside strings, and the JSON's brackets balance.
 */
#include "fuzz.h"

#include <math.h>

#include "probe.h"

#define NODE "n1"

static char inject_dir[512], inject_path[600];
static struct probe_conf conf;
static struct probe_report rep;

static const char *const keys[] = {
    "temp_c",	    "ecc_uncorrected", "ecc_corrected", "ecc_corrected_rate",
    "retired_pages", "retired_pending", "remap_pending", "remap_failed",
    "power_w",	    "power_spike_w",   "power_limit_w", "throttle_hw",
    "mem_avail_mb", "disk_free_gb",    "compute",	  "memtest",
    NULL,
};

/* ---- the model ---------------------------------------------------------- */

struct want {
	char comp[16], key[32];
	double value;
};

struct model {
	struct want w[PROBE_MAX_READINGS * 2];
	int n;
	int applied;
	int level;
	bool full; /* more readings than the report can hold */
};

static int model_kv(const char *key, const char *value, void *arg, char *err,
		    size_t errlen)
{
	struct model *m = arg;
	char comp[16] = "host";
	const char *k = key, *dot = strchr(key, '.');
	double v;
	int i;

	if (dot) {
		size_t len = (size_t)(dot - key);
		char num[16];
		long g;

		if (len < 4 || len > 8 || strncmp(key, "gpu", 3))
			return -EINVAL;
		memcpy(num, key + 3, len - 3);
		num[len - 3] = '\0';
		if (sigma_parse_long(num, 0, PROBE_MAX_GPUS - 1, &g))
			return -EINVAL;
		snprintf(comp, sizeof(comp), "gpu%ld", g);
		k = dot + 1;
	}
	if (sigma_parse_enum(k, keys) < 0)
		return -EINVAL;
	if (!strcmp(k, "compute") || !strcmp(k, "memtest")) {
		if (strcmp(value, "ok") && strcmp(value, "fail"))
			return -EINVAL;
		v = !strcmp(value, "ok");
		if (!strcmp(k, "memtest") && m->level != PROBE_FULL)
			return 0;
	} else if (sigma_parse_double(value, -1e15, 1e15, &v)) {
		return -EINVAL;
	}
	for (i = 0; i < m->n; i++)
		if (!strcmp(m->w[i].comp, comp) && !strcmp(m->w[i].key, k))
			break;
	if (i == m->n) {
		if (m->n == (int)(sizeof(m->w) / sizeof(m->w[0]))) {
			m->full = true;
			return -ENOSPC;
		}
		sigma_strlcpy(m->w[i].comp, comp, sizeof(m->w[i].comp));
		sigma_strlcpy(m->w[i].key, k, sizeof(m->w[i].key));
		m->n++;
	}
	m->w[i].value = v;
	m->applied++;
	(void)err;
	(void)errlen;
	return 0;
}

/*
 * The file as docs/probe.md describes it. Returns 0, or -EINVAL with the
 * number of the first bad line in *bad_line.
 */
static int model_file(const uint8_t *data, size_t size, struct model *m,
		      size_t *bad_line)
{
	size_t pos = 0, line_no = 0;
	char err[256];

	*bad_line = 0;
	if (memchr(data, '\0', size))
		return -EINVAL; /* malformed; which line is not modelled */
	while (pos < size) {
		const char *line = (const char *)data + pos;
		const char *nl = memchr(line, '\n', size - pos);
		size_t len = nl ? (size_t)(nl - line) : size - pos;
		const char *hash = memchr(line, '#', len);
		size_t i = 0;

		pos += len + 1;
		line_no++;
		if (hash)
			len = (size_t)(hash - line);
		while (i < len) {
			size_t start, wlen;
			char *word;
			int rc;

			while (i < len && strchr(" \t\r", line[i]))
				i++;
			start = i;
			while (i < len && !strchr(" \t\r", line[i]))
				i++;
			wlen = i - start;
			if (!wlen)
				continue;
			word = strndup(line + start, wlen);
			if (!word)
				abort();
			rc = sigma_kv_parse_word(word, model_kv, m, err,
						 sizeof(err));
			free(word);
			if (rc < 0) {
				*bad_line = line_no;
				return rc;
			}
		}
	}
	return 0;
}

/* ---- the measured readings the file lands on ------------------------------ */

static void measure(int level)
{
	double warn, fail;
	const char *unit;
	int sense;

	probe_report_init(&rep, NODE, level);
	rep.ngpus = 1;
	probe_thresholds(&conf, "temp_c", &sense, &warn, &fail, &unit);
	probe_add(&rep, "host", "temp_c", 41, sense, warn, fail, unit);
	probe_add(&rep, "gpu0", "temp_c", 55, sense, warn, fail, unit);
	/* the backend's own limit (1.10 x a 700 W enforced limit) */
	probe_add(&rep, "gpu0", "power_spike_w", 650, PROBE_HIGH_BAD, 770, NAN,
		  "W");
	probe_add(&rep, "gpu0", "power_limit_w", 700, PROBE_INFO, NAN, NAN,
		  "W");
	probe_thresholds(&conf, "compute", &sense, &warn, &fail, &unit);
	probe_add(&rep, "host", "compute", 1, sense, warn, fail, unit);
}

/* ---- the outputs ---------------------------------------------------------- */

static void check_json(const char *s, size_t len)
{
	int depth = 0;
	bool in_str = false;

	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (in_str) {
			CHECK(c >= 0x20);
			if (c == '\\')
				i++;
			else if (c == '"')
				in_str = false;
			continue;
		}
		if (c == '"')
			in_str = true;
		else if (c == '{' || c == '[')
			depth++;
		else if (c == '}' || c == ']')
			CHECK(--depth >= 0);
	}
	CHECK(!in_str && depth == 0);
	CHECK(len > 0 && s[len - 1] == '\n');
}

static void check_outputs(void)
{
	static char summary[1024], metrics[1 << 17];
	char *json = NULL;
	size_t json_len = 0;
	const char *what = NULL;
	int level = -1, kind;
	FILE *f;

	probe_summary(&rep, summary, sizeof(summary));
	CHECK_TERMINATED(summary);
	kind = sigma_reason_parse(summary, &level, &what);
	if (rep.verdict == PROBE_FAIL || rep.verdict == PROBE_WARN) {
		CHECK(kind == (rep.verdict == PROBE_FAIL ? SIGMA_REASON_FAILURE
							 : SIGMA_REASON_WARNING));
		CHECK(level == rep.level);
		CHECK(what && what[0]);
	}
	/* the drain reason fits what Slurm is given, and says why */
	probe_summary(&rep, summary, 64);
	CHECK(memchr(summary, '\0', 64));

	CHECK(probe_format_metrics(&rep, metrics, sizeof(metrics)) >= 0);
	CHECK_TERMINATED(metrics);

	f = open_memstream(&json, &json_len);
	if (!f)
		abort();
	probe_print_json(&rep, f);
	fclose(f);
	check_json(json, json_len);
	free(json);
}

static void check_report(const struct model *m, int rc, bool ok)
{
	for (int i = 0; i < rep.n; i++) {
		CHECK_TERMINATED(rep.r[i].comp);
		CHECK_TERMINATED(rep.r[i].key);
		for (int j = 0; j < i; j++)
			CHECK(strcmp(rep.r[i].comp, rep.r[j].comp) ||
			      strcmp(rep.r[i].key, rep.r[j].key));
	}
	CHECK(rep.n <= PROBE_MAX_READINGS);
	if (!ok)
		return;
	CHECK(rc == m->applied);
	for (int i = 0; i < m->n; i++) {
		struct probe_reading *r =
		    probe_find(&rep, m->w[i].comp, m->w[i].key);

		CHECK(r && r->injected);
		CHECK(r->value == m->w[i].value);
		if (!strcmp(r->comp, "gpu0") && !strcmp(r->key, "power_spike_w"))
			CHECK(r->warn == 770); /* the backend's threshold kept */
	}
	for (int i = 0; i < rep.n; i++) {
		bool expected = false;

		for (int j = 0; j < m->n; j++)
			expected |= !strcmp(rep.r[i].comp, m->w[j].comp) &&
				    !strcmp(rep.r[i].key, m->w[j].key);
		CHECK(rep.r[i].injected == expected);
	}
}

static void one_level(const uint8_t *data, size_t size, int level)
{
	static struct model m;
	char note[600], where[700];
	bool ok, failed_check = false;
	size_t bad_line;
	int rc;

	memset(&m, 0, sizeof(m));
	m.level = level;
	ok = model_file(data, size, &m, &bad_line) == 0;
	measure(level);
	/* the model cannot count what the report has room for: room for
	 * every reading, or the parser must say it is full */
	if (ok && rep.n + m.n > PROBE_MAX_READINGS)
		ok = false, failed_check = true;

	memset(note, 0x55, sizeof(note));
	rc = probe_inject(&conf, &rep, getuid(), note, sizeof(note));
	if (failed_check) {
		CHECK(rc == -ENOSPC || rc == m.applied);
		ok = rc >= 0;
	}
	CHECK((rc >= 0) == ok);
	CHECK_TERMINATED(note);
	if (rc < 0) {
		CHECK(!strncmp(note, "injection file: ", 16));
		snprintf(where, sizeof(where), "injection file: %s:%zu: ",
			 inject_path, bad_line);
		if (bad_line && !failed_check)
			CHECK(!strncmp(note, where, strlen(where)));
	}
	else
		CHECK(note[0] == '\0');
	check_report(&m, rc, ok);

	probe_judge(&rep);
	CHECK(rep.verdict == PROBE_OK || rep.verdict == PROBE_FAIL ||
	      rep.verdict == PROBE_WARN || rep.verdict == PROBE_UNJUDGED);
	if (ok)
		for (int i = 0; i < m.n; i++)
			if ((!strcmp(m.w[i].key, "compute") ||
			     !strcmp(m.w[i].key, "memtest")) &&
			    m.w[i].value == 0)
				CHECK(rep.verdict == PROBE_FAIL);
	check_outputs();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_quiet();
	snprintf(inject_dir, sizeof(inject_dir), "%s/inject", fuzz_scratch());
	if (mkdir(inject_dir, 0700) < 0 && errno != EEXIST)
		abort();
	snprintf(inject_path, sizeof(inject_path), "%s/" NODE, inject_dir);
	probe_conf_init(&conf);
	sigma_strlcpy(conf.inject_dir, inject_dir, sizeof(conf.inject_dir));
	conf.state_dir[0] = '\0';
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_write_file(inject_path, data, size);
	one_level(data, size, PROBE_QUICK);
	one_level(data, size, PROBE_FULL);
	return 0;
}
