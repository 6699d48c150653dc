/*
 * test_lib_runtime_guard.c - libsigma-runtime's guard through its public
 * header alone (lib/sigma_runtime.h): the settings and their refusals,
 * the decisions on synthetic series (non-finite, spike, hardware,
 * rollback, giving up), and the saved state, hostile bytes included.
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

#include "sigma_runtime.h"

/* a calm run: the loss and gradient norm wobble by 1% */
static double loss_at(long s)
{
	return 2.0 * (1.0 + 0.01 * sin((double)s));
}

static double gnorm_at(long s)
{
	return 1.0 + 0.01 * cos((double)s);
}

static struct sigma_rt_guard *open_ok(const char *settings)
{
	struct sigma_rt_guard *g = NULL;
	char err[256] = "";

	assert_int_equal(sigma_rt_guard_open(&g, settings, err, sizeof(err)),
			 0);
	assert_non_null(g);
	return g;
}

/* steps [from, to] of the calm run, every one accepted */
static void calm(struct sigma_rt_guard *g, long from, long to)
{
	for (long s = from; s <= to; s++)
		assert_int_equal(sigma_rt_guard_check(g, s, loss_at(s),
						      gnorm_at(s), 0, NULL),
				 0);
}

static void test_settings(void **state)
{
	static const struct {
		const char *settings, *says;
	} bad[] = {
	    {"window=1", "window"},
	    {"window=x", "window"},
	    {"z=-1", "z=-1"},
	    {"lr_factor=2", "lr_factor"},
	    {"recompute=perhaps", "recompute"},
	    {"colour=blue", "unknown guard setting \"colour\""},
	    {"window", "window"},
	};
	struct sigma_rt_guard *g = (void *)1;
	char err[256], *big;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		err[0] = '\0';
		assert_int_equal(sigma_rt_guard_open(&g, bad[i].settings, err,
						     sizeof(err)),
				 -EINVAL);
		assert_null(g);
		if (!strstr(err, bad[i].says))
			fail_msg("%s: \"%s\" does not name %s",
				 bad[i].settings, err, bad[i].says);
	}
	big = malloc(8192);
	assert_non_null(big);
	memset(big, 'a', 8191);
	big[8191] = '\0';
	assert_int_equal(sigma_rt_guard_open(&g, big, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "longer than"));
	free(big);
	/* the defaults, and settings by commas and spaces */
	sigma_rt_guard_close(open_ok(NULL));
	sigma_rt_guard_close(open_ok(""));
	sigma_rt_guard_close(open_ok("window=10, min_samples=50 z=4"));
	sigma_rt_guard_close(NULL);
}

static void test_nonfinite(void **state)
{
	struct sigma_rt_guard *g = open_ok(NULL), *h;
	struct sigma_rt_guard_event ev;
	char line[256];

	(void)state;
	calm(g, 1, 30);
	/* recomputed first; the same NaN again: skipped, not hardware */
	assert_int_equal(sigma_rt_guard_check(g, 31, NAN, 1.0, 0, &ev),
			 SIGMA_RT_GUARD_RECOMPUTE);
	assert_string_equal(ev.cause, "non-finite");
	assert_int_equal(sigma_rt_guard_check(g, 31, NAN, 1.0, 1, &ev),
			 SIGMA_RT_GUARD_SKIP);
	sigma_rt_guard_describe(&ev, line, sizeof(line));
	assert_string_equal(line, "guard: step 31: non-finite value nan: skip");
	/* not finite: the learning rate stays */
	assert_true(sigma_rt_guard_lr_scale(g, 32) == 1.0);
	calm(g, 32, 33);

	/* recompute=off: skipped at once; an infinite gradient norm too */
	h = open_ok("recompute=off");
	calm(h, 1, 30);
	assert_int_equal(sigma_rt_guard_check(h, 31, 2.0, INFINITY, 0, &ev),
			 SIGMA_RT_GUARD_SKIP);
	assert_string_equal(ev.cause, "non-finite");
	sigma_rt_guard_close(h);
	sigma_rt_guard_close(g);
}

static void test_spike_lowers_lr(void **state)
{
	struct sigma_rt_guard *g = open_ok("recompute=off lr_steps=10");
	struct sigma_rt_guard_event ev;

	(void)state;
	/* before min_samples accepted steps nothing is a spike */
	assert_int_equal(sigma_rt_guard_check(g, 1, 2.0, 1.0, 0, NULL), 0);
	assert_int_equal(sigma_rt_guard_check(g, 2, 200.0, 1.0, 0, NULL), 0);
	calm(g, 3, 40);
	assert_int_equal(sigma_rt_guard_check(g, 41, 200.0, 1.0, 0, &ev),
			 SIGMA_RT_GUARD_SKIP | SIGMA_RT_GUARD_LOWER_LR);
	assert_string_equal(ev.cause, "loss-spike");
	assert_true(ev.z > 6.0);
	assert_true(ev.value == 200.0);
	assert_true(sigma_rt_guard_lr_scale(g, 42) == 0.5);
	assert_true(sigma_rt_guard_lr_scale(g, 51) == 0.5);
	assert_true(sigma_rt_guard_lr_scale(g, 52) == 1.0);
	assert_int_equal(sigma_rt_guard_check(g, 42, 2.0, 500.0, 0, &ev),
			 SIGMA_RT_GUARD_SKIP | SIGMA_RT_GUARD_LOWER_LR);
	assert_string_equal(ev.cause, "gnorm-spike");
	sigma_rt_guard_close(g);
}

static void test_hardware(void **state)
{
	struct sigma_rt_guard *g = open_ok(NULL);
	struct sigma_rt_guard_event ev;

	(void)state;
	calm(g, 1, 30);
	assert_int_equal(sigma_rt_guard_check(g, 31, 2.0, 900.0, 0, &ev),
			 SIGMA_RT_GUARD_RECOMPUTE);
	/* the second computation differs: the chip, not the model */
	assert_int_equal(sigma_rt_guard_check(g, 31, 2.0, 1.0, 1, &ev),
			 SIGMA_RT_GUARD_REQUEUE);
	assert_string_equal(ev.cause, "hardware");
	sigma_rt_guard_close(g);
}

static void test_rollback_then_stop(void **state)
{
	struct sigma_rt_guard *g =
	    open_ok("recompute=off rollback_after=2 max_rollbacks=1");
	unsigned a;
	long s = 31;

	(void)state;
	calm(g, 1, 30);
	assert_int_equal(sigma_rt_guard_check(g, s++, NAN, 1, 0, NULL),
			 SIGMA_RT_GUARD_SKIP);
	a = sigma_rt_guard_check(g, s++, NAN, 1, 0, NULL);
	assert_int_equal(a, SIGMA_RT_GUARD_SKIP | SIGMA_RT_GUARD_ROLLBACK);
	/* the caller reloaded step 30; the troubled batches are skipped */
	sigma_rt_guard_rolled_back(g, 30, 32);
	assert_false(sigma_rt_guard_skip_data(g, 30));
	assert_true(sigma_rt_guard_skip_data(g, 31));
	assert_true(sigma_rt_guard_skip_data(g, 32));
	assert_false(sigma_rt_guard_skip_data(g, 33));
	calm(g, 33, 35);
	/* trouble again, after the one rollback allowed: give up */
	s = 36;
	assert_int_equal(sigma_rt_guard_check(g, s++, NAN, 1, 0, NULL),
			 SIGMA_RT_GUARD_SKIP);
	a = sigma_rt_guard_check(g, s++, NAN, 1, 0, NULL);
	assert_true(a & SIGMA_RT_GUARD_STOP);
	assert_false(a & SIGMA_RT_GUARD_ROLLBACK);
	sigma_rt_guard_close(g);
}

/* a resumed guard judges as the guard that never stopped */
static void test_save_load(void **state)
{
	struct sigma_rt_guard *a = open_ok(NULL), *b = open_ok(NULL),
			      *fresh = open_ok(NULL);
	struct sigma_rt_guard_event ea, eb, ef;
	unsigned char *buf;
	long n;
	char err[256];

	(void)state;
	calm(a, 1, 40);
	n = sigma_rt_guard_save(a, NULL, 0);
	assert_true(n > 0);
	buf = malloc((size_t)n);
	assert_non_null(buf);
	assert_int_equal(sigma_rt_guard_save(a, buf, (size_t)n - 1), -ENOSPC);
	assert_int_equal(sigma_rt_guard_save(a, buf, (size_t)n), n);
	assert_int_equal(sigma_rt_guard_load(b, buf, (size_t)n, err,
					     sizeof(err)),
			 0);
	/* the same spike: the same z-score to the bit; a guard without the
	 * window has not seen enough steps to call it a spike */
	assert_int_equal(sigma_rt_guard_check(a, 41, 9.0, 1.0, 0, &ea),
			 SIGMA_RT_GUARD_RECOMPUTE);
	assert_int_equal(sigma_rt_guard_check(b, 41, 9.0, 1.0, 0, &eb),
			 SIGMA_RT_GUARD_RECOMPUTE);
	assert_memory_equal(&ea.z, &eb.z, sizeof(double));
	assert_int_equal(sigma_rt_guard_check(fresh, 41, 9.0, 1.0, 0, &ef), 0);
	sigma_rt_guard_close(a);
	sigma_rt_guard_close(b);
	sigma_rt_guard_close(fresh);
	free(buf);
}

static void test_load_hostile(void **state)
{
	struct sigma_rt_guard *a = open_ok(NULL), *b = open_ok(NULL);
	unsigned char *buf, *bad;
	long n;
	char err[256];
	int32_t huge = 1 << 20;
	/* the first window's length follows the header and the counters */
	size_t win0 = 16 + 23 * sizeof(int64_t);

	(void)state;
	calm(a, 1, 30);
	n = sigma_rt_guard_save(a, NULL, 0);
	buf = malloc((size_t)n);
	bad = malloc((size_t)n + 8);
	assert_non_null(buf);
	assert_non_null(bad);
	assert_int_equal(sigma_rt_guard_save(a, buf, (size_t)n), n);

	/* cut short, anywhere */
	for (long cut = 0; cut < n; cut += 7) {
		err[0] = '\0';
		assert_int_equal(sigma_rt_guard_load(b, buf, (size_t)cut, err,
						     sizeof(err)),
				 -EINVAL);
		assert_non_null(strstr(err, "guard state"));
	}
	/* another format */
	memcpy(bad, buf, (size_t)n);
	bad[0] ^= 0xff;
	assert_int_equal(sigma_rt_guard_load(b, bad, (size_t)n, err,
					     sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "format"));
	/* a window longer than any guard holds */
	memcpy(bad, buf, (size_t)n);
	memcpy(bad + win0, &huge, sizeof(huge));
	assert_int_equal(sigma_rt_guard_load(b, bad, (size_t)n, err,
					     sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "window 0"));
	/* bytes after the end */
	memcpy(bad, buf, (size_t)n);
	memset(bad + n, 0, 8);
	assert_int_equal(sigma_rt_guard_load(b, bad, (size_t)n + 8, err,
					     sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "after its end"));
	/* b unchanged by all of it: as fresh as it was (with a's window,
	 * this would be a spike) */
	assert_int_equal(sigma_rt_guard_check(b, 1, 200.0, 1.0, 0, NULL), 0);
	sigma_rt_guard_close(a);
	sigma_rt_guard_close(b);
	free(buf);
	free(bad);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_settings),
	    cmocka_unit_test(test_nonfinite),
	    cmocka_unit_test(test_spike_lowers_lr),
	    cmocka_unit_test(test_hardware),
	    cmocka_unit_test(test_rollback_then_stop),
	    cmocka_unit_test(test_save_load),
	    cmocka_unit_test(test_load_hostile),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
