/*
 * test_probe_host.c - the host backend against a fake sysfs and procfs
 * tree made here (thermal zones, EDAC controllers, meminfo), the
 * known-answer compute checks, and corrected-error rates across runs.
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
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "sigma.h"
#include "probe.h"

static char tmp[256];
static struct probe_conf conf;
static struct probe_report rep;

static void put(const char *rel, const char *text)
{
	char path[PATH_MAX], dir[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", tmp, rel);
	sigma_strlcpy(dir, path, sizeof(dir));
	*strrchr(dir, '/') = '\0';
	assert_int_equal(sigma_mkdir_p(dir, 0755), 0);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static double value(const char *comp, const char *key)
{
	struct probe_reading *r = probe_find(&rep, comp, key);

	return r ? r->value : NAN;
}

static int setup(void **state)
{
	char cmd[300];

	snprintf(tmp, sizeof(tmp), "/tmp/test_probe_host.XXXXXX");
	if (!mkdtemp(tmp))
		return -1;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'/*", tmp);
	probe_conf_init(&conf);
	snprintf(conf.sysfs, sizeof(conf.sysfs), "%s/sys", tmp);
	snprintf(conf.procfs, sizeof(conf.procfs), "%s/proc", tmp);
	snprintf(conf.state_dir, sizeof(conf.state_dir), "%s/state", tmp);
	probe_report_init(&rep, "n1", PROBE_QUICK);
	return 0;
}

static int teardown(void **state)
{
	char cmd[300];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	return system(cmd) == 0 ? 0 : -1;
}

static void test_empty_tree(void **state)
{
	/* nothing there: no readings, no error */
	assert_int_equal(probe_host(&conf, &rep), 0);
	assert_int_equal(rep.n, 0);
}

static void test_fake_tree(void **state)
{
	put("sys/class/thermal/thermal_zone0/temp", "45000\n");
	put("sys/class/thermal/thermal_zone1/temp", "71500\n");
	put("sys/class/thermal/thermal_zone2/temp", "garbage\n");
	put("sys/class/thermal/cooling_device0/cur_state", "3\n");
	put("sys/devices/system/edac/mc/mc0/ce_count", "12\n");
	put("sys/devices/system/edac/mc/mc0/ue_count", "0\n");
	put("sys/devices/system/edac/mc/mc1/ce_count", "30\n");
	put("sys/devices/system/edac/mc/mc1/ue_count", "2\n");
	put("proc/meminfo",
	    "MemTotal:       16384000 kB\nMemFree:          100000 kB\n"
	    "MemAvailable:    2097152 kB\nBuffers: 0 kB\n");
	sigma_strlcpy(conf.ckpt_root, tmp, sizeof(conf.ckpt_root));
	assert_int_equal(probe_host(&conf, &rep), 0);
	assert_true(value("host", "temp_c") == 71.5);
	assert_true(value("host", "ecc_corrected") == 42);
	assert_true(value("host", "ecc_uncorrected") == 2);
	assert_true(value("host", "mem_avail_mb") == 2048);
	assert_true(value("host", "disk_free_gb") > 0);
	assert_int_equal(probe_judge(&rep), PROBE_FAIL);
	assert_int_equal(probe_find(&rep, "host", "ecc_uncorrected")->verdict,
			 PROBE_FAIL);
	assert_int_equal(probe_find(&rep, "host", "temp_c")->verdict, PROBE_OK);
}

static void test_hot(void **state)
{
	put("sys/class/thermal/thermal_zone0/temp", "96000\n");
	put("proc/meminfo", "MemAvailable:      65536 kB\n");
	probe_host(&conf, &rep);
	assert_int_equal(probe_judge(&rep), PROBE_FAIL);
	assert_int_equal(probe_find(&rep, "host", "mem_avail_mb")->verdict,
			 PROBE_FAIL);
	/* a checkpoint root that cannot be examined reads as no space */
	snprintf(conf.ckpt_root, sizeof(conf.ckpt_root), "%s/missing", tmp);
	probe_host(&conf, &rep);
	assert_true(value("host", "disk_free_gb") == 0);
}

/*
 * What users fill is reported, never the node's fault: a full checkpoint
 * root, and memory held by files jobs left in tmpfs, cannot be judged.
 * A real shortage still fails.
 */
static void test_user_filled(void **state)
{
	struct probe_reading *r;

	sigma_strlcpy(conf.ckpt_root, tmp, sizeof(conf.ckpt_root));
	conf.disk_free_warn_gb = conf.disk_free_fail_gb = 1e9; /* "full" */
	put("proc/meminfo", "MemAvailable:      65536 kB\nShmem:   8388608 kB\n");
	probe_host(&conf, &rep);
	assert_true(value("host", "shmem_mb") == 8192);
	assert_int_equal(probe_judge(&rep), PROBE_UNJUDGED);
	r = probe_find(&rep, "host", "disk_free_gb");
	assert_int_equal(r->verdict, PROBE_UNJUDGED);
	r = probe_find(&rep, "host", "mem_avail_mb");
	assert_int_equal(r->verdict, PROBE_UNJUDGED);
	/* little in tmpfs: the shortage is the node's */
	put("proc/meminfo", "MemAvailable:      65536 kB\nShmem:   1024 kB\n");
	probe_report_init(&rep, "n1", PROBE_QUICK);
	probe_host(&conf, &rep);
	assert_int_equal(probe_judge(&rep), PROBE_FAIL);
	assert_int_equal(probe_find(&rep, "host", "mem_avail_mb")->verdict,
			 PROBE_FAIL);
	assert_int_equal(probe_find(&rep, "host", "disk_free_gb")->verdict,
			 PROBE_UNJUDGED);
}

/*
 * Memory held by another job's processes on the node (a user's, uid 1000
 * and up) is the job's, not the node's: cannot be judged. Held by the
 * system's own processes, the shortage is the node's.
 */
static void test_jobs_memory(void **state)
{
	put("proc/meminfo", "MemAvailable:      65536 kB\nShmem:   1024 kB\n");
	put("proc/4242/status", "Name:\ttrain\nUid:\t0\t0\t0\t0\n"
				"VmRSS:\t 8388608 kB\n");
	probe_host(&conf, &rep);
	assert_int_equal(probe_judge(&rep), PROBE_FAIL);
	assert_int_equal(probe_find(&rep, "host", "mem_avail_mb")->verdict,
			 PROBE_FAIL);
	put("proc/4242/status", "Name:\ttrain\nUid:\t1000\t1000\t1000\t1000\n"
				"VmRSS:\t 8388608 kB\n");
	probe_report_init(&rep, "n1", PROBE_QUICK);
	probe_host(&conf, &rep);
	assert_true(value("host", "jobs_mem_mb") == 8192);
	assert_int_equal(probe_judge(&rep), PROBE_UNJUDGED);
	assert_int_equal(probe_find(&rep, "host", "mem_avail_mb")->verdict,
			 PROBE_UNJUDGED);
}

/* after a job, its heat is shown but not judged */
static void test_after_job(void **state)
{
	put("sys/class/thermal/thermal_zone0/temp", "99000\n");
	conf.after_job = true;
	probe_host(&conf, &rep);
	assert_true(value("host", "temp_c") == 99);
	assert_int_equal(probe_judge(&rep), PROBE_OK);
	conf.after_job = false;
	probe_report_init(&rep, "n1", PROBE_QUICK);
	probe_host(&conf, &rep);
	assert_int_equal(probe_judge(&rep), PROBE_FAIL);
}

/* a warning drains only after warn_confirm probes in a row found one */
static void test_warn_streak(void **state)
{
	conf.warn_confirm = 2;
	rep.verdict = PROBE_WARN;
	assert_int_equal(probe_warn_streak(&conf, &rep), 1);
	assert_int_equal(probe_warn_streak(&conf, &rep), 2);
	assert_int_equal(probe_warn_streak(&conf, &rep), 3);
	rep.verdict = PROBE_OK;
	assert_int_equal(probe_warn_streak(&conf, &rep), 0);
	rep.verdict = PROBE_WARN;
	assert_int_equal(probe_warn_streak(&conf, &rep), 1);
	/* a damaged file is a run of none */
	put("state/n1.warn", "streak=lots\n");
	assert_int_equal(probe_warn_streak(&conf, &rep), 1);
	/* no state directory: cannot count, every warning confirmed */
	conf.state_dir[0] = '\0';
	assert_int_equal(probe_warn_streak(&conf, &rep), 2);
}

static void test_rates(void **state)
{
	char path[PATH_MAX + 16], text[256];

	put("sys/devices/system/edac/mc/mc0/ce_count", "100\n");
	put("sys/devices/system/edac/mc/mc0/ue_count", "0\n");
	/* first run: a baseline, no rate yet */
	probe_host(&conf, &rep);
	assert_int_equal(probe_rates(&conf, &rep), 0);
	assert_true(isnan(value("host", "ecc_corrected_rate")));
	snprintf(path, sizeof(path), "%s/n1.state", conf.state_dir);
	assert_int_equal(access(path, F_OK), 0);
	/* a baseline two hours old: 80 more errors is 40 per hour */
	snprintf(text, sizeof(text), "time_s=%.0f\nhost.ecc_corrected=100\n",
		 (double)sigma_wall_ms() / 1000.0 - 7200);
	put("state/n1.state", text);
	put("sys/devices/system/edac/mc/mc0/ce_count", "180\n");
	probe_report_init(&rep, "n1", PROBE_QUICK);
	probe_host(&conf, &rep);
	probe_rates(&conf, &rep);
	assert_true(fabs(value("host", "ecc_corrected_rate") - 40) < 0.1);
	assert_int_equal(probe_judge(&rep), PROBE_WARN);
	/* a counter that went down (reboot) starts again, no rate */
	snprintf(text, sizeof(text), "time_s=%.0f\nhost.ecc_corrected=500\n",
		 (double)sigma_wall_ms() / 1000.0 - 7200);
	put("state/n1.state", text);
	probe_report_init(&rep, "n1", PROBE_QUICK);
	probe_host(&conf, &rep);
	probe_rates(&conf, &rep);
	assert_true(isnan(value("host", "ecc_corrected_rate")));
	assert_int_equal(probe_judge(&rep), PROBE_OK);
	/* a baseline younger than a minute gives no rate and stays */
	snprintf(text, sizeof(text), "time_s=%.0f\nhost.ecc_corrected=100\n",
		 (double)sigma_wall_ms() / 1000.0 - 5);
	put("state/n1.state", text);
	probe_report_init(&rep, "n1", PROBE_QUICK);
	probe_host(&conf, &rep);
	probe_rates(&conf, &rep);
	assert_true(isnan(value("host", "ecc_corrected_rate")));
	/* no state directory: no rates, no error */
	conf.state_dir[0] = '\0';
	assert_int_equal(probe_rates(&conf, &rep), 0);
}

static void test_cpu_kat(void **state)
{
	char why[256] = "";

	for (long n = 1; n <= 130; n += 43)
		assert_int_equal(probe_cpu_gemm_kat(n, why, sizeof(why)), 0);
	assert_int_equal(probe_cpu_gemm_kat(0, why, sizeof(why)), -ERANGE);
	assert_int_equal(probe_cpu_memtest(4, why, sizeof(why)), 0);
	assert_int_equal(probe_cpu_memtest(0, why, sizeof(why)), 0);
}

static void test_compute_levels(void **state)
{
	conf.full_mem_mb = 2;
	conf.full_gemm_n = 48;
	rep.ngpus = 0;
	assert_int_equal(probe_compute(&conf, &rep), 0);
	assert_true(value("host", "compute") == 1);
	assert_true(isnan(value("host", "memtest"))); /* quick: no memtest */
	probe_report_init(&rep, "n1", PROBE_FULL);
	rep.ngpus = 0;
	assert_int_equal(probe_compute(&conf, &rep), 0);
	assert_true(value("host", "compute") == 1);
	assert_true(value("host", "memtest") == 1);
	assert_int_equal(probe_judge(&rep), PROBE_OK);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_empty_tree, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_fake_tree, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_hot, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_rates, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_user_filled, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_jobs_memory, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_after_job, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_warn_streak, setup, teardown),
	    cmocka_unit_test(test_cpu_kat),
	    cmocka_unit_test_setup_teardown(test_compute_levels, setup,
					    teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
