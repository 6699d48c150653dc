/*
 * probe_state.c - the probe's state files (sbin/probe/state.c):
 * state_dir/NODE.state, the counters of a baseline run that probe_rates
 * turns into ecc_corrected_rate readings, and state_dir/NODE.warn, the
 * run of consecutive warnings probe_warn_streak counts (warn_confirm).
 * The input is either file as a previous run (or a disk error) left it.
 *
 * FUZZ_SOURCES: sbin/probe/state.c sbin/probe/report.c sbin/probe/conf.c lib/contract.c lib/kv.c lib/str.c lib/log.c lib/file.c lib/metrics.c
 * FUZZ_PKG: jansson
 *
 * Invariants:
 * - whatever the file holds, a rate is only ever added for a measured
 *   (not injected) ecc_corrected counter, once per component, finite and
 *   not negative, with the configured warning threshold and unit "/h";
 * - nothing else in the report changes, and it stays within
 *   PROBE_MAX_READINGS;
 * - when the probe rewrites the file it is a valid state file again:
 *   time_s now, and one COMP.ecc_corrected line per measured counter
 *   with its value; a rewritten file read back at once adds no rate (a
 *   baseline younger than a minute);
 * - the warning run: a damaged or foreign file counts as a run of none;
 *   a warning makes the run one longer, any other verdict ends it (0);
 *   the file written holds the run, and the next warning extends it.
 */
#include "fuzz.h"

#include <math.h>
#include <time.h>

#include "probe.h"

#define NODE "n1"

static char state_dir[512], state_path[600], warn_path[600];
static struct probe_conf conf;
static struct probe_report rep, before;

static const struct {
	const char *comp;
	double value;
	bool injected;
} counters[] = {
    {"host", 100, false},
    {"gpu0", 5, false},
    {"gpu1", 1e6, false},
    {"gpu2", 3, true}, /* injected: never a baseline, never a rate */
};
#define NCOUNTERS (sizeof(counters) / sizeof(counters[0]))

static void measure(void)
{
	probe_report_init(&rep, NODE, PROBE_QUICK);
	for (size_t i = 0; i < NCOUNTERS; i++) {
		struct probe_reading *r =
		    probe_add(&rep, counters[i].comp, "ecc_corrected",
			      counters[i].value, PROBE_INFO, NAN, NAN, "");

		r->injected = counters[i].injected;
	}
	probe_add(&rep, "gpu0", "temp_c", 50, PROBE_HIGH_BAD, 85, 95, "");
	before = rep;
}

static bool is_counter(const char *comp, bool measured_only)
{
	for (size_t i = 0; i < NCOUNTERS; i++)
		if (!strcmp(counters[i].comp, comp))
			return !measured_only || !counters[i].injected;
	return false;
}

static void check_rates(void)
{
	int rates = 0;

	CHECK(rep.n <= PROBE_MAX_READINGS);
	/* what was there is untouched, in place */
	for (int i = 0; i < before.n; i++) {
		CHECK(!strcmp(rep.r[i].comp, before.r[i].comp));
		CHECK(!strcmp(rep.r[i].key, before.r[i].key));
		CHECK(rep.r[i].value == before.r[i].value);
		CHECK(rep.r[i].injected == before.r[i].injected);
	}
	for (int i = before.n; i < rep.n; i++) {
		const struct probe_reading *r = &rep.r[i];

		CHECK(!strcmp(r->key, "ecc_corrected_rate"));
		CHECK(is_counter(r->comp, true));
		CHECK(isfinite(r->value) && r->value >= 0);
		CHECK(r->sense == PROBE_HIGH_BAD);
		CHECK(r->warn == conf.ecc_corrected_rate_warn);
		CHECK(!strcmp(r->unit, "/h"));
		for (int j = before.n; j < i; j++)
			CHECK(strcmp(rep.r[j].comp, r->comp));
		rates++;
	}
	CHECK(rates <= (int)NCOUNTERS - 1);
}

/* a rewritten state file: its keys and values */
struct back {
	double time_s;
	bool have_time;
	int seen[NCOUNTERS];
};

static int back_kv(const char *key, const char *value, void *arg, char *err,
		   size_t errlen)
{
	struct back *b = arg;
	const char *dot = strchr(key, '.');
	double v;

	CHECK(sigma_parse_double(value, 0, 1e18, &v) == 0);
	if (!strcmp(key, "time_s")) {
		CHECK(!b->have_time);
		b->have_time = true;
		b->time_s = v;
		return 0;
	}
	CHECK(dot && !strcmp(dot + 1, "ecc_corrected"));
	for (size_t i = 0; i < NCOUNTERS; i++) {
		if (strlen(counters[i].comp) == (size_t)(dot - key) &&
		    !strncmp(key, counters[i].comp, (size_t)(dot - key))) {
			CHECK(!counters[i].injected);
			CHECK(v == counters[i].value);
			b->seen[i]++;
			return 0;
		}
	}
	CHECK(!"a component the probe never measured");
	(void)err;
	(void)errlen;
	return 0;
}

/* a state file the probe wrote: time_s now, each measured counter once */
static void check_state_file(const char *buf, size_t len)
{
	struct back b = {0};
	double now = (double)time(NULL);
	char err[256];

	CHECK(sigma_kv_parse_buf(buf, len, "state", back_kv, &b, err,
				 sizeof(err)) == 0);
	CHECK(b.have_time && fabs(b.time_s - now) <= 5);
	for (size_t i = 0; i < NCOUNTERS; i++)
		CHECK(b.seen[i] == (counters[i].injected ? 0 : 1));
}

static void check_rewritten(const uint8_t *data, size_t size)
{
	char *buf = NULL;
	size_t len = 0;

	CHECK(sigma_file_read(state_path, 1 << 20, &buf, &len) == 0);
	if (len == size && !memcmp(buf, data, size)) {
		free(buf);
		return; /* kept as it was: a baseline still young enough */
	}
	check_state_file(buf, len);
	free(buf);

	/* the fresh baseline at once: under a minute old, so no rate (it
	 * may be written again: time_s is rounded to the second) */
	measure();
	CHECK(probe_rates(&conf, &rep) == 0);
	CHECK(rep.n == before.n);
	CHECK(sigma_file_read(state_path, 1 << 20, &buf, &len) == 0);
	check_state_file(buf, len);
	free(buf);
}

/* ---- the run of warnings ------------------------------------------------- */

struct run {
	long streak;
	bool bad;
};

static int run_kv(const char *key, const char *value, void *arg, char *err,
		  size_t errlen)
{
	struct run *r = arg;

	if (strcmp(key, "streak"))
		return 0;
	if (sigma_parse_long(value, 0, 1000000, &r->streak)) {
		r->bad = true;
		return -EINVAL;
	}
	(void)err;
	(void)errlen;
	return 0;
}

/* the run a .warn file holds: 0 when it is damaged */
static long run_of(const char *buf, size_t len)
{
	struct run r = {0};
	char err[128];

	if (sigma_kv_parse_buf(buf, len, "warn", run_kv, &r, err,
			       sizeof(err)) || r.bad)
		return 0;
	return r.streak;
}

static long run_on_disk(void)
{
	char *buf = NULL;
	size_t len = 0;
	long n;

	CHECK(sigma_file_read(warn_path, 1 << 20, &buf, &len) == 0);
	n = run_of(buf, len);
	free(buf);
	return n;
}

static void fuzz_warn(const uint8_t *data, size_t size)
{
	long before_run = run_of((const char *)data, size);
	int n;

	fuzz_write_file(warn_path, data, size);
	measure();
	rep.verdict = PROBE_WARN;
	n = probe_warn_streak(&conf, &rep);
	/* one more, up to the cap where the reader stops */
	CHECK(n == (before_run < 1000000 ? before_run + 1 : 1000000));
	CHECK(run_on_disk() == n);
	if (n < 1000000) {
		CHECK(probe_warn_streak(&conf, &rep) == n + 1);
		CHECK(run_on_disk() == n + 1);
	}
	rep.verdict = PROBE_OK;
	CHECK(probe_warn_streak(&conf, &rep) == 0);
	CHECK(run_on_disk() == 0);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_quiet();
	snprintf(state_dir, sizeof(state_dir), "%s/state", fuzz_scratch());
	if (mkdir(state_dir, 0700) < 0 && errno != EEXIST)
		abort();
	snprintf(state_path, sizeof(state_path), "%s/" NODE ".state",
		 state_dir);
	snprintf(warn_path, sizeof(warn_path), "%s/" NODE ".warn", state_dir);
	probe_conf_init(&conf);
	sigma_strlcpy(conf.state_dir, state_dir, sizeof(conf.state_dir));
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_write_file(state_path, data, size);
	measure();
	CHECK(probe_rates(&conf, &rep) == 0);
	check_rates();
	check_rewritten(data, size);
	fuzz_warn(data, size);
	return 0;
}
