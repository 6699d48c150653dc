/*
 * test_lib_runtime.c - libsigma-runtime through its public header alone
 * (lib/sigma_runtime.h): the exit codes by name, a handle without and
 * with records, its refusals, and a NULL handle everywhere.
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
#include <unistd.h>

#include <cmocka.h>

#include "sigma_runtime.h"
#include "scratch.h"

static char dir[64];

static int setup(void **state)
{
	(void)state;
	unsetenv("SIGMA_LAUNCH");
	unsetenv("SIGMA_JOB_RECORDS");
	setenv("SLURMD_NODENAME", "n2", 1);
	return scratch_make(dir, sizeof(dir), "runtime");
}

static int teardown(void **state)
{
	(void)state;
	return scratch_remove(dir);
}

static void test_exit_codes(void **state)
{
	(void)state;
	assert_int_equal(sigma_rt_exit_code("ok"), SIGMA_RT_EXIT_OK);
	assert_int_equal(sigma_rt_exit_code("requeue"), 75);
	assert_int_equal(sigma_rt_exit_code("peer"), 76);
	assert_int_equal(sigma_rt_exit_code("hardware"), 79);
	assert_int_equal(sigma_rt_exit_code("diverged"), 70);
	assert_int_equal(sigma_rt_exit_code("Peer"), -1);
	assert_int_equal(sigma_rt_exit_code(""), -1);
	assert_int_equal(sigma_rt_exit_code(NULL), -1);
}

static void test_without_records(void **state)
{
	struct sigma_rt_job *job = NULL;
	char err[256];

	(void)state;
	assert_int_equal(sigma_rt_job_open(&job, 0, err, sizeof(err)), 0);
	assert_non_null(job);
	assert_int_equal(sigma_rt_job_recording(job), 0);
	sigma_rt_job_step(job, 1);
	sigma_rt_job_exit(job, 1, 0);
	sigma_rt_job_close(job);
}

static void test_records(void **state)
{
	struct sigma_rt_job *job = NULL;
	char err[256], path[PATH_MAX], line[256];
	FILE *f;

	(void)state;
	setenv("SIGMA_JOB_RECORDS", dir, 1);
	assert_int_equal(sigma_rt_job_open(&job, 4, err, sizeof(err)), 0);
	assert_int_equal(sigma_rt_job_recording(job), 1);
	sigma_rt_job_step(job, 9);
	sigma_rt_job_exit(job, 9, SIGMA_RT_EXIT_PEER);
	sigma_rt_job_close(job);
	snprintf(path, sizeof(path), "%s/rank-4", dir);
	f = fopen(path, "r");
	assert_non_null(f);
	assert_non_null(fgets(line, sizeof(line), f));
	fclose(f);
	assert_string_equal(line, "sigma-job 1 rank=4 node=n2 launch=0 step=9 state=exit code=76\n");
}

static void test_refused(void **state)
{
	struct sigma_rt_job *job = (struct sigma_rt_job *)&job;
	char err[256];

	(void)state;
	assert_int_equal(sigma_rt_job_open(&job, -1, err, sizeof(err)), -EINVAL);
	assert_null(job);
	assert_non_null(strstr(err, "rank -1"));
	setenv("SIGMA_JOB_RECORDS", "/nonexistent/records", 1);
	assert_int_equal(sigma_rt_job_open(&job, 0, err, sizeof(err)), -ENOENT);
	assert_null(job);
	assert_non_null(strstr(err, "SIGMA_JOB_RECORDS=/nonexistent/records"));
	/* no error buffer: still refused, nothing written */
	assert_int_equal(sigma_rt_job_open(&job, 0, NULL, 0), -ENOENT);
	/* a NULL handle is no handle */
	assert_int_equal(sigma_rt_job_recording(NULL), 0);
	sigma_rt_job_step(NULL, 1);
	sigma_rt_job_exit(NULL, 1, 0);
	sigma_rt_job_close(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_exit_codes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_without_records, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_records, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refused, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
