/*
 * test_probe_report.c - judging readings against thresholds, the summary
 * line (the drain reason of docs/interfaces.md), JSON, Prometheus text,
 * and the drain policy (whose drain may the probe touch).
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sigma.h"
#include "probe.h"

static struct probe_conf conf;
static struct probe_report rep;

static void add(const char *comp, const char *key, double v)
{
	double warn, fail;
	const char *unit;
	int sense;

	probe_thresholds(&conf, key, &sense, &warn, &fail, &unit);
	assert_non_null(probe_add(&rep, comp, key, v, sense, warn, fail, unit));
}

static int setup(void **state)
{
	probe_conf_init(&conf);
	probe_report_init(&rep, "n2", PROBE_QUICK);
	rep.ngpus = 0;
	return 0;
}

static void test_healthy(void **state)
{
	char s[512];

	add("host", "temp_c", 45);
	add("host", "mem_avail_mb", 4096);
	add("host", "compute", 1);
	add("host", "ecc_corrected", 1000); /* a count alone is only shown */
	assert_int_equal(probe_judge(&rep), PROBE_OK);
	snprintf(rep.gpu_note, sizeof(rep.gpu_note), "no NVML");
	probe_summary(&rep, s, sizeof(s));
	assert_string_equal(
	    s,
	    "sigma: probe quick: ok: n2, no GPUs, host only (no NVML), 4 readings");
	rep.ngpus = 8;
	probe_summary(&rep, s, sizeof(s));
	assert_string_equal(s,
			    "sigma: probe quick: ok: n2, 8 GPUs, 4 readings");
}

static void test_thresholds(void **state)
{
	/* at the limit counts: >= fail fails, >= warn warns */
	add("host", "temp_c", 84.9);
	assert_int_equal(probe_judge(&rep), PROBE_OK);
	add("host", "temp_c", 85);
	assert_int_equal(probe_judge(&rep), PROBE_WARN);
	add("host", "temp_c", 95);
	assert_int_equal(probe_judge(&rep), PROBE_FAIL);
	add("host", "temp_c", 20);
	/* lower is worse for free memory and disk */
	add("host", "mem_avail_mb", 400);
	assert_int_equal(probe_judge(&rep), PROBE_WARN);
	add("host", "mem_avail_mb", 100);
	assert_int_equal(probe_judge(&rep), PROBE_FAIL);
	add("host", "mem_avail_mb", 2048);
	add("gpu3", "ecc_uncorrected", 0);
	assert_int_equal(probe_judge(&rep), PROBE_OK);
	add("gpu3", "ecc_uncorrected", 1);
	assert_int_equal(probe_judge(&rep), PROBE_FAIL);
	add("gpu3", "ecc_uncorrected", 0);
	add("gpu3", "remap_pending", 1);
	assert_int_equal(probe_judge(&rep), PROBE_WARN);
	add("gpu3", "remap_failed", 1);
	assert_int_equal(probe_judge(&rep), PROBE_FAIL);
	/* a NaN reading is no evidence either way */
	add("gpu3", "remap_failed", NAN);
	add("gpu3", "remap_pending", 0);
	assert_int_equal(probe_judge(&rep), PROBE_OK);
	/* thresholds follow sigma.conf */
	conf.temp_fail_c = 70;
	add("host", "temp_c", 71);
	assert_int_equal(probe_judge(&rep), PROBE_FAIL);
}

static void test_fail_summary(void **state)
{
	char s[512];

	rep.level = PROBE_FULL;
	add("host", "temp_c", 50);
	add("gpu0", "ecc_uncorrected", 2);
	add("gpu0", "temp_c", 88); /* a warning: not listed */
	add("gpu1", "compute", 0);
	assert_int_equal(probe_judge(&rep), PROBE_FAIL);
	probe_summary(&rep, s, sizeof(s));
	assert_string_equal(
	    s,
	    "sigma: probe full: gpu0 ecc_uncorrected=2 (limit 1); gpu1 compute=fail");
	/* a short buffer truncates, never overflows */
	probe_summary(&rep, s, 24);
	assert_int_equal(strlen(s), 23);
}

static void test_warn_summary(void **state)
{
	char s[512];

	add("host", "ecc_corrected_rate", 40);
	add("host", "temp_c", 40);
	assert_int_equal(probe_judge(&rep), PROBE_WARN);
	probe_summary(&rep, s, sizeof(s));
	assert_string_equal(
	    s,
	    "sigma: warning: probe quick: host ecc_corrected_rate=40/h (limit 20)");
	add("gpu2", "power_spike_w", 900);
	probe_judge(&rep);
	probe_summary(&rep, s, sizeof(s));
	assert_string_equal(
	    s,
	    "sigma: warning: probe quick: host ecc_corrected_rate=40/h (limit 20); gpu2 power_spike_w=900W (limit 750)");
}

/* what others fill or hold is "cannot judge"; the node's own fault wins */
static void test_unjudged(void **state)
{
	char s[512];

	add("host", "disk_free_gb", 0.5);
	probe_find(&rep, "host", "disk_free_gb")->not_ours = true;
	add("host", "temp_c", 40);
	assert_int_equal(probe_judge(&rep), PROBE_UNJUDGED);
	assert_string_equal(probe_verdict_name(rep.verdict), "cannot_judge");
	probe_summary(&rep, s, sizeof(s));
	assert_string_equal(
	    s,
	    "sigma: probe quick: cannot judge (busy or full, not the node's own fault): host disk_free_gb=0.5 (limit 1)");
	add("host", "temp_c", 97);
	assert_int_equal(probe_judge(&rep), PROBE_FAIL);
	probe_summary(&rep, s, sizeof(s));
	assert_string_equal(s, "sigma: probe quick: host temp_c=97 (limit 95)");
}

static void test_error_summary(void **state)
{
	char s[512];

	add("host", "temp_c", 99);
	rep.verdict = PROBE_ERROR;
	snprintf(rep.error, sizeof(rep.error), "sigma.conf:3: unknown key 'x'");
	/* an error stays an error whatever the readings say */
	assert_int_equal(probe_judge(&rep), PROBE_ERROR);
	probe_summary(&rep, s, sizeof(s));
	assert_string_equal(
	    s,
	    "sigma: probe quick: could not run: sigma.conf:3: unknown key 'x'");
}

static void test_replace(void **state)
{
	add("host", "temp_c", 99);
	add("host", "temp_c", 30);
	assert_int_equal(rep.n, 1);
	assert_true(probe_find(&rep, "host", "temp_c")->value == 30);
	assert_null(probe_find(&rep, "gpu0", "temp_c"));
	for (int i = 1; i < PROBE_MAX_READINGS; i++) {
		char key[32];

		snprintf(key, sizeof(key), "k%d", i);
		assert_non_null(
		    probe_add(&rep, "host", key, i, PROBE_INFO, NAN, NAN, ""));
	}
	assert_null(probe_add(&rep, "host", "one_too_many", 1, PROBE_INFO, NAN,
			      NAN, ""));
}

static void test_json(void **state)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	add("host", "temp_c", 97);
	add("gpu\"0", "compute", 1);
	probe_judge(&rep);
	probe_print_json(&rep, f);
	fclose(f);
	assert_non_null(strstr(
	    buf,
	    "\"node\":\"n2\",\"level\":\"quick\",\"verdict\":\"fail\",\"exit\":1"));
	assert_non_null(strstr(
	    buf,
	    "{\"component\":\"host\",\"key\":\"temp_c\",\"value\":97,\"warn\":85,\"fail\":95,\"bad_when\":\"above\",\"verdict\":\"fail\",\"source\":\"measured\"}"));
	/* no threshold is null, strings are escaped */
	assert_non_null(strstr(buf, "\"component\":\"gpu\\\"0\""));
	assert_non_null(strstr(buf, "\"warn\":null,\"fail\":1"));
	assert_non_null(strstr(
	    buf,
	    "\"summary\":\"sigma: probe quick: host temp_c=97 (limit 95)\""));
	assert_int_equal(buf[len - 1], '\n');
	free(buf);
}

static void test_metrics(void **state)
{
	char buf[8192];

	add("host", "temp_c", 50);
	add("gpu1", "ecc_uncorrected", 0);
	probe_judge(&rep);
	assert_true(probe_format_metrics(&rep, buf, sizeof(buf)) > 0);
	assert_non_null(strstr(
	    buf,
	    "# TYPE sigma_probe_verdict gauge\nsigma_probe_verdict{node=\"n2\",level=\"quick\"} 0\n"));
	assert_non_null(strstr(
	    buf,
	    "sigma_probe_reading{node=\"n2\",component=\"host\",key=\"temp_c\"} 50\n"));
	assert_non_null(strstr(
	    buf,
	    "sigma_probe_threshold{node=\"n2\",component=\"host\",key=\"temp_c\",kind=\"fail\"} 95\n"));
	assert_non_null(strstr(
	    buf,
	    "sigma_probe_threshold{node=\"n2\",component=\"gpu1\",key=\"ecc_uncorrected\",kind=\"fail\"} 1\n"));
	assert_null(strstr(buf, "key=\"ecc_uncorrected\",kind=\"warn\""));
	assert_int_equal(probe_format_metrics(&rep, buf, 64), -ENOSPC);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(test_unjudged, setup),
	    cmocka_unit_test_setup(test_healthy, setup),
	    cmocka_unit_test_setup(test_thresholds, setup),
	    cmocka_unit_test_setup(test_fail_summary, setup),
	    cmocka_unit_test_setup(test_warn_summary, setup),
	    cmocka_unit_test_setup(test_error_summary, setup),
	    cmocka_unit_test_setup(test_replace, setup),
	    cmocka_unit_test_setup(test_json, setup),
	    cmocka_unit_test_setup(test_metrics, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
