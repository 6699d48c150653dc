/*
 * test_lib_jobrec.c - the job protocol's records (lib/jobrec.c): off
 * without SIGMA_JOB_RECORDS; the start, progress and exit lines; progress
 * written at most every SIGMA_JOBREC_EVERY_MS; a bad directory, launch
 * number or node name refused with its name; a link planted at the
 * temporary name not followed.
 */
#include <errno.h>
#include <limits.h>
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
#include "jobrec.h"
#include "scratch.h"

static char dir[64];

static int setup(void **state)
{
	(void)state;
	unsetenv("SIGMA_LAUNCH");
	setenv("SLURMD_NODENAME", "n3", 1);
	if (scratch_make(dir, sizeof(dir), "jobrec"))
		return -1;
	return setenv("SIGMA_JOB_RECORDS", dir, 1);
}

static int teardown(void **state)
{
	(void)state;
	return scratch_remove(dir);
}

static void put_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	assert_int_equal(fputs(text, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
}

/* rank's record, its one line without the newline */
static void record(int rank, char *line, size_t len)
{
	char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/rank-%d", dir, rank);
	f = fopen(path, "r");
	assert_non_null(f);
	assert_non_null(fgets(line, (int)len, f));
	fclose(f);
	line[strcspn(line, "\n")] = '\0';
}

static void test_off(void **state)
{
	struct sigma_jobrec r;
	char err[256], path[PATH_MAX];

	(void)state;
	unsetenv("SIGMA_JOB_RECORDS");
	assert_int_equal(sigma_jobrec_open(&r, 0, err, sizeof(err)), 0);
	sigma_jobrec_step(&r, 1);
	sigma_jobrec_exit(&r, 1, 0);
	snprintf(path, sizeof(path), "%s/rank-0", dir);
	assert_int_equal(access(path, F_OK), -1);
}

static void test_lines(void **state)
{
	struct sigma_jobrec r;
	char err[256], line[256];

	(void)state;
	setenv("SIGMA_LAUNCH", "2", 1);
	assert_int_equal(sigma_jobrec_open(&r, 5, err, sizeof(err)), 0);
	record(5, line, sizeof(line));
	assert_string_equal(line, "sigma-job 1 rank=5 node=n3 launch=2 step=0 state=start code=-1");
	sigma_jobrec_step(&r, 1);
	record(5, line, sizeof(line));
	assert_string_equal(line, "sigma-job 1 rank=5 node=n3 launch=2 step=1 state=run code=-1");
	/* at once after: not written */
	sigma_jobrec_step(&r, 2);
	record(5, line, sizeof(line));
	assert_non_null(strstr(line, " step=1 "));
	usleep((SIGMA_JOBREC_EVERY_MS + 20) * 1000);
	sigma_jobrec_step(&r, 3);
	record(5, line, sizeof(line));
	assert_non_null(strstr(line, " step=3 state=run "));
	/* an exit is written at once */
	sigma_jobrec_exit(&r, 3, 76);
	record(5, line, sizeof(line));
	assert_string_equal(line, "sigma-job 1 rank=5 node=n3 launch=2 step=3 state=exit code=76");
}

static void test_refused(void **state)
{
	struct sigma_jobrec r;
	char err[256], path[PATH_MAX], link[PATH_MAX];

	(void)state;
	setenv("SIGMA_JOB_RECORDS", "relative/dir", 1);
	assert_int_equal(sigma_jobrec_open(&r, 0, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "SIGMA_JOB_RECORDS=relative/dir"));
	assert_false(r.on);

	snprintf(path, sizeof(path), "%s/file", dir);
	put_file(path, "x");
	setenv("SIGMA_JOB_RECORDS", path, 1);
	assert_int_equal(sigma_jobrec_open(&r, 0, err, sizeof(err)), -ENOTDIR);

	/* a link to a directory is not one */
	snprintf(link, sizeof(link), "%s/link", dir);
	assert_int_equal(symlink(dir, link), 0);
	setenv("SIGMA_JOB_RECORDS", link, 1);
	assert_int_equal(sigma_jobrec_open(&r, 0, err, sizeof(err)), -ENOTDIR);

	setenv("SIGMA_JOB_RECORDS", dir, 1);
	setenv("SIGMA_LAUNCH", "-1", 1);
	assert_int_equal(sigma_jobrec_open(&r, 0, err, sizeof(err)), -ERANGE);
	assert_non_null(strstr(err, "SIGMA_LAUNCH -1 is out of range"));
	unsetenv("SIGMA_LAUNCH");

	setenv("SLURMD_NODENAME", "n1 state=exit", 1);
	assert_int_equal(sigma_jobrec_open(&r, 0, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "node name"));
	assert_false(r.on);
}

static void test_planted_link(void **state)
{
	struct sigma_jobrec r;
	char err[256], victim[PATH_MAX], tmp[PATH_MAX], line[256];
	FILE *f;

	(void)state;
	snprintf(victim, sizeof(victim), "%s/victim", dir);
	put_file(victim, "keep\n");
	snprintf(tmp, sizeof(tmp), "%s/.rank-0.tmp", dir);
	assert_int_equal(symlink(victim, tmp), 0);
	assert_int_equal(sigma_jobrec_open(&r, 0, err, sizeof(err)), 0);
	f = fopen(victim, "r");
	assert_non_null(f);
	assert_non_null(fgets(line, sizeof(line), f));
	fclose(f);
	assert_string_equal(line, "keep\n");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_off, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lines, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_planted_link, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
