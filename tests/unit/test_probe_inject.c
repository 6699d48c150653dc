/*
 * test_probe_inject.c - fault injection: readings applied as measured, the
 * gpuN. prefix, memtest only at full level, malformed files, and above all
 * the permission checks (a file anyone could write is refused).
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

static void inject_file(const char *node, const char *text, mode_t mode)
{
	char path[PATH_MAX + 80];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", conf.inject_dir, node);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	assert_int_equal(chmod(path, mode), 0);
}

static int setup(void **state)
{
	snprintf(tmp, sizeof(tmp), "/tmp/test_probe_inject.XXXXXX");
	if (!mkdtemp(tmp))
		return -1;
	probe_conf_init(&conf);
	snprintf(conf.inject_dir, sizeof(conf.inject_dir), "%s/inject", tmp);
	if (mkdir(conf.inject_dir, 0755) < 0)
		return -1;
	probe_report_init(&rep, "n2", PROBE_QUICK);
	return 0;
}

static int teardown(void **state)
{
	char cmd[300];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	return system(cmd) == 0 ? 0 : -1;
}

static double value(const char *comp, const char *key)
{
	struct probe_reading *r = probe_find(&rep, comp, key);

	return r ? r->value : NAN;
}

static void test_off_and_absent(void **state)
{
	char note[512];

	/* no file for this node: nothing happens */
	assert_int_equal(
	    probe_inject(&conf, &rep, getuid(), note, sizeof(note)), 0);
	assert_string_equal(note, "");
	/* injection off: even a file present is not read */
	inject_file("n2", "temp_c=97\n", 0644);
	conf.inject_dir[0] = '\0';
	assert_int_equal(
	    probe_inject(&conf, &rep, getuid(), note, sizeof(note)), 0);
	assert_int_equal(rep.n, 0);
}

static void test_applied(void **state)
{
	char note[512], s[512];

	probe_add(&rep, "host", "temp_c", 40, PROBE_HIGH_BAD, 85, 95, "");
	probe_add(&rep, "host", "compute", 1, PROBE_LOW_BAD, NAN, 1, "");
	inject_file(
	    "n2",
	    "# drill\ntemp_c=97\ngpu1.ecc_uncorrected=2\ncompute=fail\nmemtest=fail\n",
	    0644);
	assert_int_equal(
	    probe_inject(&conf, &rep, getuid(), note, sizeof(note)), 3);
	assert_string_equal(note, "");
	assert_true(value("host", "temp_c") == 97);
	assert_true(probe_find(&rep, "host", "temp_c")->injected);
	assert_true(value("gpu1", "ecc_uncorrected") == 2);
	assert_true(value("host", "compute") == 0);
	/* a quick probe does not run the memory test */
	assert_true(isnan(value("host", "memtest")));
	assert_int_equal(probe_judge(&rep), PROBE_FAIL);
	probe_summary(&rep, s, sizeof(s));
	assert_string_equal(
	    s,
	    "sigma: probe quick: host temp_c=97 (limit 95); host compute=fail; gpu1 ecc_uncorrected=2 (limit 1)");
	/* a full probe sees the injected memory test */
	probe_report_init(&rep, "n2", PROBE_FULL);
	assert_int_equal(
	    probe_inject(&conf, &rep, getuid(), note, sizeof(note)), 4);
	assert_true(value("host", "memtest") == 0);
}

static void test_warning(void **state)
{
	char note[512], s[512];

	inject_file("n2", "ecc_corrected_rate=40\n", 0600);
	assert_int_equal(
	    probe_inject(&conf, &rep, getuid(), note, sizeof(note)), 1);
	assert_int_equal(probe_judge(&rep), PROBE_WARN);
	probe_summary(&rep, s, sizeof(s));
	assert_string_equal(
	    s,
	    "sigma: warning: probe quick: host ecc_corrected_rate=40/h (limit 20)");
}

/* a power limit the backend knew stays the limit of an injected spike */
static void test_keeps_backend_limit(void **state)
{
	char note[512];

	probe_add(&rep, "gpu0", "power_spike_w", 300, PROBE_HIGH_BAD, 770, NAN,
		  "W");
	inject_file("n2", "gpu0.power_spike_w=900\n", 0644);
	assert_int_equal(
	    probe_inject(&conf, &rep, getuid(), note, sizeof(note)), 1);
	assert_true(probe_find(&rep, "gpu0", "power_spike_w")->warn == 770);
	assert_int_equal(probe_judge(&rep), PROBE_WARN);
}

static void test_refused(void **state)
{
	char note[512];

	/* world-writable file */
	inject_file("n2", "temp_c=97\n", 0666);
	assert_int_equal(
	    probe_inject(&conf, &rep, getuid(), note, sizeof(note)), 0);
	assert_non_null(strstr(note, "injection refused"));
	assert_non_null(strstr(note, "group- or world-writable"));
	assert_int_equal(rep.n, 0);
	/* group-writable file */
	inject_file("n2", "temp_c=97\n", 0620);
	probe_inject(&conf, &rep, getuid(), note, sizeof(note));
	assert_non_null(strstr(note, "injection refused"));
	assert_int_equal(rep.n, 0);
	/* a good file in a world-writable directory */
	inject_file("n2", "temp_c=97\n", 0644);
	assert_int_equal(chmod(conf.inject_dir, 0777), 0);
	probe_inject(&conf, &rep, getuid(), note, sizeof(note));
	assert_non_null(strstr(note, "injection refused"));
	assert_int_equal(rep.n, 0);
	assert_int_equal(chmod(conf.inject_dir, 0755), 0);
	/* owned by someone other than the trusted user */
	probe_inject(&conf, &rep, getuid() + 1, note, sizeof(note));
	assert_non_null(strstr(note, "owned by uid"));
	assert_int_equal(rep.n, 0);
	/* a symbolic link to a good file */
	{
		char link[PATH_MAX + 8], target[PATH_MAX + 8];

		snprintf(target, sizeof(target), "%s/n2", conf.inject_dir);
		snprintf(link, sizeof(link), "%s/n3", conf.inject_dir);
		assert_int_equal(symlink(target, link), 0);
		probe_report_init(&rep, "n3", PROBE_QUICK);
		probe_inject(&conf, &rep, getuid(), note, sizeof(note));
		assert_non_null(strstr(note, "symbolic link"));
		assert_int_equal(rep.n, 0);
	}
	/* and the same good file, trusted, is applied */
	probe_report_init(&rep, "n2", PROBE_QUICK);
	assert_int_equal(
	    probe_inject(&conf, &rep, getuid(), note, sizeof(note)), 1);
}

static void test_malformed(void **state)
{
	static const char *const bad[] = {
	    "temp_c=hot\n",	"temperature=90\n",  "gpu.temp_c=90\n",
	    "gpux.temp_c=90\n", "gpu64.temp_c=90\n", "compute=broken\n",
	    "temp_c\n",
	};
	char note[512];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		probe_report_init(&rep, "n2", PROBE_QUICK);
		inject_file("n2", bad[i], 0644);
		assert_true(probe_inject(&conf, &rep, getuid(), note,
					 sizeof(note)) < 0);
		if (!strstr(note, "injection file"))
			fail_msg("'%s': note '%s'", bad[i], note);
	}
}

/* several readings on one line, as people write them; errors name the line */
static void test_one_line(void **state)
{
	char note[512];

	probe_report_init(&rep, "n2", PROBE_QUICK);
	inject_file("n2", "# a drill\ncompute=fail ecc_uncorrected=2\n\n"
			  "temp_c=90\tgpu1.temp_c=91 # hot\n",
		    0644);
	assert_int_equal(
	    probe_inject(&conf, &rep, getuid(), note, sizeof(note)), 4);
	assert_true(probe_find(&rep, "host", "compute")->value == 0);
	assert_true(probe_find(&rep, "host", "ecc_uncorrected")->value == 2);
	assert_true(probe_find(&rep, "gpu1", "temp_c")->value == 91);
	probe_report_init(&rep, "n2", PROBE_QUICK);
	inject_file("n2", "temp_c=90\n\n# x\ncompute=ok temp_c=hot\n", 0644);
	assert_true(probe_inject(&conf, &rep, getuid(), note, sizeof(note)) <
		    0);
	if (!strstr(note, "/n2:4: temp_c=hot: expected a number"))
		fail_msg("note '%s' does not name line 4", note);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_one_line, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_off_and_absent, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_applied, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_warning, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_keeps_backend_limit, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_malformed, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
