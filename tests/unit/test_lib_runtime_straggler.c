/*
 * test_lib_runtime_straggler.c - libsigma-runtime's straggler detection
 * through its public header alone (lib/sigma_runtime.h): the settings'
 * refusals, a rank at half speed found and then cleared, noise that is
 * not a straggler, bad times refused, and the report of this rank's node
 * through a sigmactl that writes down how it was called.
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
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "sigma_runtime.h"
#include "scratch.h"

#define N 4

static char dir[64];

static int setup(void **state)
{
	(void)state;
	unsetenv("SIGMA_CONF");
	unsetenv("SIGMACTL");
	unsetenv("SLURMD_NODENAME");
	unsetenv("SLURM_JOB_ID");
	return scratch_make(dir, sizeof(dir), "straggler");
}

static int teardown(void **state)
{
	(void)state;
	return scratch_remove(dir);
}

static struct sigma_rt_straggler *open_ok(int rank, const char *settings)
{
	struct sigma_rt_straggler *s = NULL;
	char err[256] = "";

	assert_int_equal(
	    sigma_rt_straggler_open(&s, N, rank, settings, err, sizeof(err)),
	    0);
	assert_non_null(s);
	return s;
}

/* a deterministic jitter in [-1, 1) */
static double jitter(uint64_t *st)
{
	*st = *st * 6364136223846793005ULL + 1442695040888963407ULL;
	return (double)(*st >> 11) / (double)(1ULL << 52) - 1.0;
}

/* one step: every rank 100 ms +- noise, rank slow at factor */
static int step(struct sigma_rt_straggler *s, long k, int slow, double factor,
		double noise, uint64_t *st,
		struct sigma_rt_straggler_event *ev)
{
	double busy[N];

	for (int r = 0; r < N; r++)
		busy[r] = 0.1 * (1 + noise * jitter(st)) *
			  (r == slow ? factor : 1.0);
	return sigma_rt_straggler_record(s, k, busy, N, ev);
}

static void test_refused(void **state)
{
	static const char *const bad[] = {"window=2", "window=65", "slow=1",
					  "confirm=0", "floor=-1",
					  "escalate=soon", "colour=blue"};
	struct sigma_rt_straggler *s = (void *)1;
	char err[256];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		char key[16];

		err[0] = '\0';
		assert_int_equal(
		    sigma_rt_straggler_open(&s, N, 0, bad[i], err, sizeof(err)),
		    -EINVAL);
		assert_null(s);
		sscanf(bad[i], "%15[^=]", key);
		if (!strstr(err, key))
			fail_msg("%s: \"%s\" does not name %s", bad[i], err,
				 key);
	}
	assert_int_equal(sigma_rt_straggler_open(&s, 0, 0, NULL, err,
						 sizeof(err)),
			 -EINVAL);
	assert_int_equal(sigma_rt_straggler_open(&s, N, N, NULL, err,
						 sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "rank 4"));
	sigma_rt_straggler_close(NULL);
}

static void test_found_and_cleared(void **state)
{
	struct sigma_rt_straggler *s = open_ok(0, "window=10 confirm=3");
	struct sigma_rt_straggler_event ev[N];
	uint64_t st = 7;
	long k = 1, found = 0, cleared = 0;
	int n;
	double bad[N] = {0.1, NAN, 0.1, 0.1}, neg[N] = {0.1, 0.1, -1, 0.1};

	(void)state;
	/* rank 2 at half speed from the start: found once the window is
	 * full and confirmed 3 steps in a row */
	for (; k <= 40 && !found; k++) {
		n = step(s, k, 2, 2.0, 0.02, &st, ev);
		assert_true(n >= 0);
		if (n) {
			assert_int_equal(n, 1);
			assert_int_equal(ev[0].rank, 2);
			assert_int_equal(ev[0].slow, 1);
			assert_int_equal(ev[0].step, k);
			assert_true(ev[0].ratio > 1.9 && ev[0].ratio < 2.1);
			found = k;
		}
	}
	assert_int_equal(found, 12);
	assert_true(sigma_rt_straggler_slow(s, 2));
	assert_false(sigma_rt_straggler_slow(s, 1));
	/* bad times: refused, nothing recorded */
	assert_int_equal(sigma_rt_straggler_record(s, k, bad, N, ev), -EINVAL);
	assert_int_equal(sigma_rt_straggler_record(s, k, neg, N, ev), -EINVAL);
	assert_int_equal(sigma_rt_straggler_record(s, k, neg, N - 1, ev),
			 -EINVAL);
	/* back to speed: cleared once the window has turned over */
	for (; k <= 80 && !cleared; k++) {
		n = step(s, k, -1, 1.0, 0.02, &st, ev);
		if (n) {
			assert_int_equal(n, 1);
			assert_int_equal(ev[0].rank, 2);
			assert_int_equal(ev[0].slow, 0);
			assert_int_equal(ev[0].step, k);
			cleared = k;
		}
	}
	assert_true(cleared > found);
	assert_false(sigma_rt_straggler_slow(s, 2));
	sigma_rt_straggler_close(s);
}

/* 20% noise on every rank for 2000 steps is nobody's straggling */
static void test_noise_is_no_straggler(void **state)
{
	struct sigma_rt_straggler *s = open_ok(0, NULL);
	struct sigma_rt_straggler_event ev[N];
	uint64_t st = 99;

	(void)state;
	for (long k = 1; k <= 2000; k++)
		assert_int_equal(step(s, k, -1, 1.0, 0.2, &st, ev), 0);
	sigma_rt_straggler_close(s);
}

/* a sigmactl that writes down its arguments */
static void fake_sigmactl(char *path, size_t len, const char *out)
{
	FILE *f;

	snprintf(path, len, "%s/sigmactl", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f, "#!/bin/sh\necho \"$*\" > %s.tmp && mv %s.tmp %s\n", out,
		out, out);
	fclose(f);
	assert_int_equal(chmod(path, 0755), 0);
}

static void test_escalate(void **state)
{
	struct sigma_rt_straggler *slow = open_ok(2, "escalate=0"),
				  *other = open_ok(1, "escalate=0"),
				  *never = open_ok(2, "escalate=off");
	struct sigma_rt_straggler_event ev[N];
	char ctl[128], out[128], line[256] = "";
	uint64_t a = 1, b = 1, c = 1;
	FILE *f = NULL;

	(void)state;
	snprintf(out, sizeof(out), "%s/called", dir);
	fake_sigmactl(ctl, sizeof(ctl), out);
	setenv("SIGMACTL", ctl, 1);
	for (long k = 1; k <= 12; k++) {
		step(slow, k, 2, 2.0, 0.02, &a, ev);
		step(other, k, 2, 2.0, 0.02, &b, ev);
		step(never, k, 2, 2.0, 0.02, &c, ev);
	}
	assert_true(sigma_rt_straggler_slow(slow, 2));
	/* outside a Slurm job: nothing to report */
	assert_int_equal(sigma_rt_straggler_escalate(slow, 12), -ENOENT);
	sigma_rt_straggler_close(slow);
	slow = open_ok(2, "escalate=0");
	a = 1;
	for (long k = 1; k <= 12; k++)
		step(slow, k, 2, 2.0, 0.02, &a, ev);
	setenv("SLURMD_NODENAME", "n3", 1);
	setenv("SLURM_JOB_ID", "42", 1);
	/* the rank that is fast reports nothing; off never does */
	assert_int_equal(sigma_rt_straggler_escalate(other, 12), 0);
	assert_int_equal(sigma_rt_straggler_escalate(never, 12), 0);
	assert_int_equal(sigma_rt_straggler_escalate(slow, 12), 1);
	/* once a spell */
	assert_int_equal(sigma_rt_straggler_escalate(slow, 13), 0);
	for (int i = 0; i < 500 && !(f = fopen(out, "r")); i++)
		usleep(10000);
	assert_non_null(f);
	assert_non_null(fgets(line, sizeof(line), f));
	fclose(f);
	assert_string_equal(line, "slow n3 --job 42\n");
	sigma_rt_straggler_close(slow);
	sigma_rt_straggler_close(other);
	sigma_rt_straggler_close(never);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_found_and_cleared, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_noise_is_no_straggler, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_escalate, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
