/*
 * test_probe_nvml.c - the NVML backend, loaded at run time, against the
 * fake library built beside this test (fake_nvml.c): no library and no
 * driver mean "no GPUs"; healthy GPUs; each kind of GPU fault; power
 * spikes judged against the GPU's own limit.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "sigma.h"
#include "probe.h"

static char spec[64];
static struct probe_conf conf;
static struct probe_report rep;

static void fake(const char *text)
{
	FILE *f = fopen(spec, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	probe_report_init(&rep, "g1", PROBE_QUICK);
	assert_int_equal(probe_nvml(&conf, &rep), 0);
	probe_judge(&rep);
}

static double value(const char *comp, const char *key)
{
	struct probe_reading *r = probe_find(&rep, comp, key);

	return r ? r->value : NAN;
}

static int setup(void **state)
{
	const char *top = getenv("top_builddir");
	int fd;

	snprintf(spec, sizeof(spec), "/tmp/test_probe_nvml.XXXXXX");
	fd = mkstemp(spec);
	if (fd < 0)
		return -1;
	close(fd);
	setenv("FAKE_NVML", spec, 1);
	probe_conf_init(&conf);
	snprintf(conf.nvml_library, sizeof(conf.nvml_library),
		 "%s/tests/unit/.libs/libfakenvml.so", top ? top : "..");
	conf.power_samples = 3;
	return access(conf.nvml_library, R_OK);
}

static int teardown(void **state)
{
	return unlink(spec);
}

static void test_no_library(void **state)
{
	struct probe_conf c = conf;
	char s[512];

	sigma_strlcpy(c.nvml_library, "/nonexistent/libnvidia-ml.so.1",
		      sizeof(c.nvml_library));
	probe_report_init(&rep, "g1", PROBE_QUICK);
	assert_int_equal(probe_nvml(&c, &rep), 0);
	assert_int_equal(rep.ngpus, 0);
	assert_int_equal(rep.n, 0);
	assert_non_null(strstr(rep.gpu_note, "no NVML"));
	probe_judge(&rep);
	probe_summary(&rep, s, sizeof(s));
	assert_non_null(strstr(s, "ok: g1, no GPUs, host only (no NVML"));
	/* gpus=no: not even looked for */
	c.gpus = false;
	probe_report_init(&rep, "g1", PROBE_QUICK);
	probe_nvml(&c, &rep);
	assert_string_equal(rep.gpu_note, "gpus=no in sigma.conf");
}

static void test_no_driver(void **state)
{
	fake("init=9\ncount=2\n");
	assert_int_equal(rep.ngpus, 0);
	assert_string_equal(rep.gpu_note, "NVML: Driver Not Loaded");
	fake("count=0\n");
	assert_int_equal(rep.ngpus, 0);
	assert_string_equal(rep.gpu_note, "NVML: no devices");
}

static void test_healthy(void **state)
{
	char s[512];

	fake("count=2\n"
	     "gpu0.temp_c=55\ngpu0.power_w=300\ngpu0.limit_w=700\n"
	     "gpu1.temp_c=60\ngpu1.power_w=310\ngpu1.limit_w=700\n"
	     "gpu1.ecc_corrected=5\n");
	assert_int_equal(rep.ngpus, 2);
	assert_int_equal(rep.verdict, PROBE_OK);
	assert_true(value("gpu0", "temp_c") == 55);
	assert_true(value("gpu1", "power_w") == 310);
	assert_true(value("gpu1", "power_limit_w") == 700);
	assert_true(value("gpu1", "ecc_corrected") == 5);
	assert_true(value("gpu0", "ecc_uncorrected") == 0);
	assert_true(value("gpu0", "retired_pages") == 0);
	assert_true(value("gpu0", "remap_failed") == 0);
	assert_true(value("gpu0", "throttle_hw") == 0);
	/* the spike limit follows the GPU's own power limit */
	assert_true(
	    fabs(probe_find(&rep, "gpu0", "power_spike_w")->warn - 770) < 1e-6);
	probe_summary(&rep, s, sizeof(s));
	assert_non_null(strstr(s, "sigma: probe quick: ok: g1, 2 GPUs"));
}

/* in a job's prolog and epilog only the job's GPUs are probed */
static void test_job_gpus(void **state)
{
	conf.gpu_only = 1ULL << 0;
	fake(
	    "count=2\ngpu0.temp_c=50\ngpu1.temp_c=50\ngpu1.ecc_uncorrected=2\n");
	conf.gpu_only = 0;
	assert_int_equal(rep.verdict, PROBE_OK);
	assert_true(value("gpu0", "temp_c") == 50);
	assert_true(isnan(value("gpu1", "temp_c")));
	assert_true(isnan(value("gpu1", "ecc_uncorrected")));
	assert_true(isnan(value("gpu1", "power_w")));
	/* after the job, its heat is not judged, its faults are */
	conf.after_job = true;
	fake("count=1\ngpu0.temp_c=99\n");
	assert_int_equal(rep.verdict, PROBE_OK);
	fake("count=1\ngpu0.temp_c=99\ngpu0.ecc_uncorrected=2\n");
	conf.after_job = false;
	assert_int_equal(rep.verdict, PROBE_FAIL);
}

static void test_faults(void **state)
{
	char s[512];

	fake(
	    "count=2\ngpu0.temp_c=50\ngpu1.temp_c=50\ngpu1.ecc_uncorrected=2\n");
	assert_int_equal(rep.verdict, PROBE_FAIL);
	probe_summary(&rep, s, sizeof(s));
	assert_string_equal(
	    s, "sigma: probe quick: gpu1 ecc_uncorrected=2 (limit 1)");

	fake("count=1\ngpu0.temp_c=97\n");
	assert_int_equal(rep.verdict, PROBE_FAIL);
	fake("count=1\ngpu0.temp_c=88\n");
	assert_int_equal(rep.verdict, PROBE_WARN);
	fake("count=1\ngpu0.remap_failed=1\n");
	assert_int_equal(rep.verdict, PROBE_FAIL);
	fake("count=1\ngpu0.remap_pending=1\n");
	assert_int_equal(rep.verdict, PROBE_WARN);
	fake("count=1\ngpu0.retired=3\n");
	assert_true(value("gpu0", "retired_pages") == 3);
	assert_int_equal(rep.verdict, PROBE_WARN);
	fake("count=1\ngpu0.retired=60\n");
	assert_int_equal(rep.verdict, PROBE_FAIL);
	fake("count=1\ngpu0.retired_pending=1\n");
	assert_int_equal(rep.verdict, PROBE_WARN);
	fake("count=1\ngpu0.throttle=0x40\n"); /* hardware thermal slowdown */
	assert_int_equal(rep.verdict, PROBE_WARN);
	fake("count=1\ngpu0.throttle=0x4\n"); /* application clocks: fine */
	assert_int_equal(rep.verdict, PROBE_OK);
	/* a GPU without ECC reports no ECC readings, and is not failed */
	fake("count=1\ngpu0.no_ecc=1\n");
	assert_true(isnan(value("gpu0", "ecc_uncorrected")));
	assert_int_equal(rep.verdict, PROBE_OK);
}

/* a GPU NVML cannot open fails the node; the others are still read */
static void test_bad_handle(void **state)
{
	char s[512];

	fake("count=2\ngpu0.bad_handle=1\ngpu1.temp_c=50\ngpu1.power_w=300\n");
	assert_int_equal(rep.ngpus, 2);
	assert_int_equal(rep.verdict, PROBE_FAIL);
	probe_summary(&rep, s, sizeof(s));
	assert_string_equal(s, "sigma: probe quick: gpu0 compute=fail");
	assert_true(value("gpu1", "temp_c") == 50);
	assert_true(value("gpu1", "power_w") == 300);
	assert_true(isnan(value("gpu0", "power_w")));
}

static void test_power_spike(void **state)
{
	char s[512];

	fake(
	    "count=1\ngpu0.power_w=400\ngpu0.power_peak_w=800\ngpu0.limit_w=700\n");
	assert_true(value("gpu0", "power_spike_w") == 800);
	/* the mean of three samples, one of them the peak */
	assert_true(fabs(value("gpu0", "power_w") - 1600.0 / 3) < 1e-6);
	assert_int_equal(rep.verdict, PROBE_WARN);
	probe_summary(&rep, s, sizeof(s));
	assert_string_equal(
	    s,
	    "sigma: warning: probe quick: gpu0 power_spike_w=800W (limit 770)");
	/* no known limit: the absolute power_spike_warn_w */
	fake("count=1\ngpu0.power_w=400\ngpu0.power_peak_w=760\n");
	assert_int_equal(rep.verdict, PROBE_WARN);
	fake("count=1\ngpu0.power_w=400\ngpu0.power_peak_w=740\n");
	assert_int_equal(rep.verdict, PROBE_OK);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_no_library),
	    cmocka_unit_test(test_no_driver),
	    cmocka_unit_test(test_healthy),
	    cmocka_unit_test(test_faults),
	    cmocka_unit_test(test_job_gpus),
	    cmocka_unit_test(test_bad_handle),
	    cmocka_unit_test(test_power_spike),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
