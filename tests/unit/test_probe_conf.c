/*
 * test_probe_conf.c - sigma.conf as the probe reads it: defaults, every
 * kind of key, the controller's keys skipped, bad values and unknown keys
 * refused with file and line.
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
#include <unistd.h>

#include <cmocka.h>

#include "sigma.h"
#include "probe.h"

static int parse(struct probe_conf *conf, const char *text, char *err,
		 size_t errlen)
{
	probe_conf_init(conf);
	return probe_conf_parse_buf(conf, text, strlen(text), "sigma.conf", err,
				    errlen);
}

static void test_defaults(void **state)
{
	struct probe_conf c;
	char err[256];

	assert_int_equal(parse(&c, "", err, sizeof(err)), 0);
	assert_string_equal(c.inject_dir, "");
	assert_string_equal(c.sysfs, "/sys");
	assert_string_equal(c.procfs, "/proc");
	assert_string_equal(c.nvml_library, "libnvidia-ml.so.1");
	assert_true(c.gpus);
	assert_false(c.drain_resume);
	assert_true(c.temp_warn_c < c.temp_fail_c);
	assert_true(c.ecc_uncorrected_fail >= 1);
	assert_int_equal(c.quick_gemm_n, 64);
}

static void test_keys(void **state)
{
	struct probe_conf c;
	char err[256] = "";

	assert_int_equal(
	    parse(&c,
		  "# probe\n"
		  "inject_dir = /var/lib/sigma/inject\n"
		  "temp_warn_c=80\n"
		  "temp_fail_c=90.5\n"
		  "gpus=no\n"
		  "drain_resume=yes\n"
		  "ckpt_root=/scratch\n"
		  "nvml_library=libnvidia-ml.so\n"
		  "full_mem_mb=0\n"
		  "ecc_corrected_rate_warn=5\n"
		  "\n"
		  "# the controller's keys are not the probe's business\n"
		  "sigmad_spares=2\n"
		  "sigmad_anything=whatever value\n",
		  err, sizeof(err)),
	    0);
	assert_string_equal(c.inject_dir, "/var/lib/sigma/inject");
	assert_true(c.temp_warn_c == 80);
	assert_true(c.temp_fail_c == 90.5);
	assert_false(c.gpus);
	assert_true(c.drain_resume);
	assert_string_equal(c.ckpt_root, "/scratch");
	assert_string_equal(c.nvml_library, "libnvidia-ml.so");
	assert_int_equal(c.full_mem_mb, 0);
	assert_true(c.ecc_corrected_rate_warn == 5);
	/* an empty path turns a feature off */
	assert_int_equal(
	    parse(&c, "state_dir=\ninject_dir=\n", err, sizeof(err)), 0);
	assert_string_equal(c.state_dir, "");
}

static void test_bad(void **state)
{
	static const struct {
		const char *text, *says;
	} bad[] = {
	    {"temp_fail_c=hot\n",
	     "sigma.conf:1: temp_fail_c=hot: expected a number"},
	    {"\n\ntemp_fail_c=500\n", "sigma.conf:3: temp_fail_c=500"},
	    {"quick_gemm_n=4\n",
	     "quick_gemm_n=4: expected a whole number from 8 to 1024"},
	    {"quick_gemm_n=64.5\n", "quick_gemm_n"},
	    {"gpus=perhaps\n", "gpus=perhaps: expected yes or no"},
	    {"inject_dir=inject\n",
	     "inject_dir=inject: expected an absolute path"},
	    {"sysfs=\n", "sysfs=: expected an absolute path"},
	    {"nvml_library=\n", "nvml_library=: expected an absolute path"},
	    {"temp_limit=90\n", "sigma.conf:1: unknown key 'temp_limit'"},
	    {"sigmadx=1\n", "unknown key 'sigmadx'"},
	    {"temp_warn_c=96\n", "temp_warn_c (96) above temp_fail_c (95)"},
	    {"mem_avail_fail_mb=1000\nmem_avail_warn_mb=500\n",
	     "mem_avail_warn_mb below"},
	    {"no equals sign\n", "not key=value"},
	};
	struct probe_conf c;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char err[256] = "";

		assert_true(parse(&c, bad[i].text, err, sizeof(err)) < 0);
		if (!strstr(err, bad[i].says))
			fail_msg("'%s': message '%s' lacks '%s'", bad[i].text,
				 err, bad[i].says);
	}
}

static void test_load_file(void **state)
{
	char path[] = "/tmp/test_probe_conf.XXXXXX", err[256];
	struct probe_conf c;
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, "temp_fail_c=99\n", 15), 15);
	close(fd);
	probe_conf_init(&c);
	assert_int_equal(probe_conf_load(&c, path, err, sizeof(err)), 0);
	assert_true(c.temp_fail_c == 99);
	unlink(path);
	assert_true(probe_conf_load(&c, path, err, sizeof(err)) < 0);
	assert_non_null(strstr(err, path));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_defaults),
	    cmocka_unit_test(test_keys),
	    cmocka_unit_test(test_bad),
	    cmocka_unit_test(test_load_file),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
