/*
 * test_lib_attempt.c - which attempt of a run a start is (lib/attempt.c):
 * Slurm's requeues, the plugin's count that wins over them, sigma-launch's
 * relaunch added, bad values named, the ceiling, and the move past the
 * attempts a resume saw.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sigma.h"
#include "attempt.h"

static int clear(void **state)
{
	(void)state;
	unsetenv("SLURM_RESTART_COUNT");
	unsetenv("SIGMA_ATTEMPT");
	unsetenv("SIGMA_LAUNCH");
	return 0;
}

static void test_from_env(void **state)
{
	struct sigma_attempt a;
	char err[256];

	(void)state;
	assert_int_equal(sigma_attempt_from_env(&a, err, sizeof(err)), 0);
	assert_int_equal(a.attempt, 0);
	assert_false(a.resume);
	/* Slurm's requeue */
	setenv("SLURM_RESTART_COUNT", "2", 1);
	assert_int_equal(sigma_attempt_from_env(&a, err, sizeof(err)), 0);
	assert_int_equal(a.attempt, 2);
	assert_int_equal(a.requeues, 2);
	assert_true(a.resume);
	/* the plugin's count wins; the relaunch adds */
	setenv("SIGMA_ATTEMPT", "5", 1);
	setenv("SIGMA_LAUNCH", "3", 1);
	assert_int_equal(sigma_attempt_from_env(&a, err, sizeof(err)), 0);
	assert_int_equal(a.attempt, 8);
	assert_int_equal(a.launch, 3);
	assert_int_equal(a.requeues, 2);
	/* a relaunch alone continues the run */
	clear(state);
	setenv("SIGMA_LAUNCH", "1", 1);
	assert_int_equal(sigma_attempt_from_env(&a, err, sizeof(err)), 0);
	assert_int_equal(a.attempt, 1);
	assert_true(a.resume);
	assert_int_equal(a.requeues, 0);
	/* Slurm's malformed count is none; ours is refused by name */
	clear(state);
	setenv("SLURM_RESTART_COUNT", "x", 1);
	assert_int_equal(sigma_attempt_from_env(&a, err, sizeof(err)), 0);
	assert_int_equal(a.attempt, 0);
	setenv("SIGMA_ATTEMPT", "two", 1);
	assert_int_equal(sigma_attempt_from_env(&a, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "SIGMA_ATTEMPT \"two\" is not a whole number");
	setenv("SIGMA_ATTEMPT", "1000001", 1);
	assert_int_equal(sigma_attempt_from_env(&a, err, sizeof(err)), -ERANGE);
	assert_string_equal(err, "SIGMA_ATTEMPT 1000001 is out of range [0, 1000000]");
	/* the ceiling holds with the relaunch added */
	setenv("SIGMA_ATTEMPT", "1000000", 1);
	setenv("SIGMA_LAUNCH", "7", 1);
	assert_int_equal(sigma_attempt_from_env(&a, err, sizeof(err)), 0);
	assert_int_equal(a.attempt, SIGMA_ATTEMPT_MAX);
}

static void test_past(void **state)
{
	(void)state;
	assert_int_equal(sigma_attempt_past(3, -1), 3); /* nothing seen */
	assert_int_equal(sigma_attempt_past(3, 3), 3);
	assert_int_equal(sigma_attempt_past(3, 5), 6);
	assert_int_equal(sigma_attempt_past(0, SIGMA_ATTEMPT_MAX),
			 SIGMA_ATTEMPT_MAX);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_from_env, clear, clear),
		cmocka_unit_test(test_past),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
