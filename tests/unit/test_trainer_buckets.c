/*
 * test_trainer_buckets.c - the auto-tuner's gradient buckets
 * (tuner_comm.c): the cost model on cases worked out by hand, the choice
 * it makes for a link that is late per message and for a slow transfer,
 * what a back end that moves nothing in the background changes, the
 * decision at the exchange that probes and its trial on synthetic
 * summaries of 4 data-parallel ranks, the checkpoint's figure, and a
 * replayed line.
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

#include "scratch.h"
#include "tuner.h"
#include "tuner_comm.h"
#include "tuner_fixture.h"

#define DP 4
#define B  16
/* the testbed's small model, and a bucket of 0.05 MiB */
#define SPAN  115520L
#define SMALL 13107L

static void setup_tuner(struct tuner *tu, int mode, const char *replay,
			long bucket)
{
	tuner_fixture(tu, DP, B, mode, replay);
	tuner_comm_init(tu, bucket, SPAN);
}

/* the exposed wait, worked out by hand */
static void test_model(void **state)
{
	/* 4 buckets of 25 floats, each 1 ms fixed and 1 ms for its bytes,
	 * ready every 10 ms of a 40 ms pass: only the last one waits */
	struct tuner_comm_in in = {.grad_floats = 100,
				   .backward_ns = 40e6,
				   .lat_ns = 1e6,
				   .byte_ns = 1e6 / 100.0,
				   .overlap = 1.0};

	(void)state;
	assert_float_equal(tuner_comm_exposed(&in, 25), 2e6, 1.0);
	/* one bucket: all of it after the pass, 1 ms + 4 ms */
	assert_float_equal(tuner_comm_exposed(&in, 100), 5e6, 1.0);
	assert_float_equal(tuner_comm_exposed(&in, 1000), 5e6, 1.0);
	/* a pass of 2 ms: the 4 buckets queue, 2 ms each, the first ready
	 * at 0.5 ms: 8.5 ms in all, 6.5 after the pass */
	in.backward_ns = 2e6;
	assert_float_equal(tuner_comm_exposed(&in, 25), 6.5e6, 1.0);
	/* a back end that moves nothing in the background: every bucket
	 * holds the rank its whole time, 4 x 2 ms */
	in.backward_ns = 40e6;
	in.overlap = 0.0;
	assert_float_equal(tuner_comm_exposed(&in, 25), 8e6, 1.0);
	assert_float_equal(tuner_comm_exposed(&in, 100), 5e6, 1.0);
	/* half: the 3 first buckets' halves move in the pass, 3 x 1 + 2 */
	in.overlap = 0.5;
	assert_float_equal(tuner_comm_exposed(&in, 25), 5e6, 1.0);
}

/* a late link wants one bucket; a slow transfer over a long pass wants
 * small ones */
static void test_best(void **state)
{
	struct tuner_comm_in late = {.grad_floats = SPAN,
				     .backward_ns = 20e6,
				     .lat_ns = 3e6,
				     .byte_ns = 1e-3,
				     .overlap = 1.0};
	struct tuner_comm_in slow = {.grad_floats = 1 << 20,
				     .backward_ns = 100e6,
				     .lat_ns = 1e4,
				     .byte_ns = 12.5,
				     .overlap = 1.0};
	double w, one;

	(void)state;
	assert_int_equal(tuner_comm_best(&late, &w), SPAN);
	assert_true(w < tuner_comm_exposed(&late, SMALL));
	assert_true(tuner_comm_exposed(&late, SMALL) > 9e6);
	one = tuner_comm_exposed(&slow, 1L << 20);
	assert_true(one > 50e6); /* 4 MiB at 12.5 ns a byte */
	assert_true(tuner_comm_best(&slow, &w) <= (1L << 16));
	assert_true(w < 5e6);
	/* sizes a trial took back are not chosen: above lo, below hi */
	slow.lo = 1L << 16;
	assert_int_equal(tuner_comm_best(&slow, &w), 1L << 17);
	slow.lo = 0;
	late.hi = SPAN;
	assert_true(tuner_comm_best(&late, &w) < SPAN);
	late.lo = 1L << 16;
	assert_int_equal(tuner_comm_best(&late, &w), 0); /* none left */
	late.lo = late.hi = 0;
	/* nothing moves in the background: small buckets only add up */
	late.overlap = slow.overlap = 0.0;
	assert_int_equal(tuner_comm_best(&late, &w), SPAN);
	assert_int_equal(tuner_comm_best(&slow, &w), 1L << 20);
	assert_float_equal(w, one, 1.0);
	slow.overlap = 1.0;
	/* no cost for the bytes: the fewest buckets (the larger on a tie) */
	slow.byte_ns = 0.0;
	assert_int_equal(tuner_comm_best(&slow, &w), 1L << 20);
}

/* one exchange: each rank computes 20 ms a step, and (probe) its bucket
 * probe saw ar (its fixed time a little more on each rank); the buckets
 * in force (8 a step) were waited for 1 - bg of their time (bg < 0: one
 * bucket, none waited for during the pass); step_ns the job's step; true
 * when the buckets changed */
static bool exchange_ar(struct tuner *tu, long done, struct dist_bucket_cost ar,
			double bg, double step_ns)
{
	struct tuner_sample all[DP];
	bool probe = tuner_comm_due(tu);
	long before = tu->buckets.now;

	memset(all, 0, sizeof(all));
	for (int r = 0; r < DP; r++) {
		all[r].dp_index = r;
		all[r].steps = 4;
		all[r].seqs = 4.0 * B;
		all[r].compute_ns = 4 * 20e6 * (1.0 + 0.001 * r);
		all[r].step_ns = 4 * step_ns;
		all[r].ovl_waits = bg < 0 ? 0 : 4 * 8;
		all[r].ovl_floats = bg < 0 ? 0 : 4.0 * SPAN;
		all[r].ovl_ns =
		    (1.0 - bg) * (all[r].ovl_waits * ar.lat_ns +
				  4 * all[r].ovl_floats * ar.byte_ns);
		if (probe) {
			all[r].ar = ar;
			all[r].ar.lat_ns *= 1.0 + 0.01 * r;
		}
	}
	tuner_exchange(tu, all, DP, done, false);
	return tu->buckets.now != before;
}

/* the same, probing an all-reduce of lat_ns fixed time, fast per byte,
 * moved in the background */
static bool exchange(struct tuner *tu, long done, double lat_ns, double step_ns)
{
	struct dist_bucket_cost ar = {lat_ns, 1e-3};

	return exchange_ar(tu, done, ar, 1.0, step_ns);
}

/* the probe runs once a window, from the first full one; a late link
 * takes the buckets to one; a step 20% slower after it takes them back,
 * and 4 windows pass without another */
static void test_decide_and_trial(void **state)
{
	struct tuner tu;
	int probes = 0;
	long done = 4;

	(void)state;
	setup_tuner(&tu, TUNER_ON, NULL, SMALL);
	for (int x = 1; x < 5; x++, done += 4) /* the window fills */
		assert_false(exchange(&tu, done, 3e6, 40e6));
	assert_true(exchange(&tu, done, 3e6, 40e6)); /* the 5th exchange */
	assert_int_equal(tu.buckets.now, SPAN);
	assert_int_equal(tu.buckets.prev, SMALL);
	/* the job is 20% slower with it: taken back a window later */
	for (int x = 1; x < 5; x++)
		assert_false(exchange(&tu, done += 4, 3e6, 48e6));
	assert_true(exchange(&tu, done += 4, 3e6, 48e6));
	assert_int_equal(tu.buckets.now, SMALL);
	/* no probe while it cools down, 20 exchanges */
	for (int x = 0; x < 20; x++) {
		assert_false(exchange(&tu, done += 4, 3e6, 40e6));
		probes += tu.buckets.probe;
	}
	assert_int_equal(probes, 0);
	/* a healthy link: the buckets stay as they are */
	for (int x = 0; x < 10; x++)
		assert_false(exchange(&tu, done += 4, 1e4, 40e6));
	assert_int_equal(tu.buckets.now, SMALL);
	/* the late link again: one bucket was taken back, not tried again */
	assert_int_equal(tu.buckets.hi, SPAN);
	for (int x = 0; x < 10; x++)
		exchange(&tu, done += 4, 3e6, 40e6);
	assert_true(tu.buckets.now < SPAN);
	tuner_fini(&tu);

	/* observe: probes and decides nothing */
	setup_tuner(&tu, TUNER_OBSERVE, NULL, SMALL);
	for (int x = 0; x < 10; x++)
		assert_false(exchange(&tu, 4 * (x + 1), 3e6, 40e6));
	tuner_fini(&tu);
	/* a layout that sends the gradient after the pass: nothing */
	setup_tuner(&tu, TUNER_ON, NULL, SMALL);
	tu.buckets.span = 0;
	for (int x = 0; x < 10; x++)
		assert_false(exchange(&tu, 4 * (x + 1), 3e6, 40e6));
	tuner_fini(&tu);
}

/* a transfer of 10 ms a step: smaller buckets where the back end was
 * seen to move it while the rank computes, none where it was not, or
 * where only one bucket was in force (nothing seen) */
static void test_background(void **state)
{
	/* 10 ms for the gradient's bytes, 0.05 ms a message */
	struct dist_bucket_cost ar = {5e4, 10e6 / (4.0 * SPAN)};
	struct tuner tu;
	long done = 4;

	(void)state;
	/* two buckets, the first moved during the pass: smaller ones hide
	 * more of the transfer */
	setup_tuner(&tu, TUNER_ON, NULL, 1L << 16);
	for (int x = 1; x < 5; x++, done += 4)
		assert_false(exchange_ar(&tu, done, ar, 1.0, 40e6));
	assert_true(exchange_ar(&tu, done, ar, 1.0, 40e6));
	assert_true(tu.buckets.now < (1L << 16));
	assert_true(tu.buckets.now >= TUNER_COMM_MIN);
	tuner_fini(&tu);

	/* moved none, or a quarter: no smaller buckets */
	for (int k = 0; k < 2; k++) {
		setup_tuner(&tu, TUNER_ON, NULL, 1L << 16);
		for (int x = 0; x < 15; x++)
			exchange_ar(&tu, 4 * (x + 1), ar, k ? 0.25 : 0.0, 40e6);
		assert_true(tu.buckets.now >= (1L << 16));
		tuner_fini(&tu);
	}
	/* one bucket in force: no wait seen, nothing counted on */
	setup_tuner(&tu, TUNER_ON, NULL, 1L << 22);
	for (int x = 0; x < 15; x++)
		assert_false(exchange_ar(&tu, 4 * (x + 1), ar, -1.0, 40e6));
	assert_int_equal(tu.buckets.now, 1L << 22);
	tuner_fini(&tu);
}

/* the checkpoint's figure: exported only when the tuner chose it */
static void test_state(void **state)
{
	struct tuner tu, tv;
	struct tuner_state st;
	char err[256];

	(void)state;
	setup_tuner(&tu, TUNER_ON, NULL, SMALL);
	memset(&st, 0, sizeof(st));
	tuner_export(&tu, &st);
	assert_int_equal(st.bucket, 0);
	assert_true(tuner_comm_replay(&tu, SPAN, 8, false));
	tuner_export(&tu, &st);
	assert_int_equal(st.bucket, SPAN);
	setup_tuner(&tv, TUNER_ON, NULL, SMALL);
	assert_int_equal(tuner_import(&tv, &st, err, sizeof(err)), 0);
	assert_int_equal(tv.buckets.now, SPAN);
	st.bucket = -1;
	assert_int_equal(tuner_import(&tv, &st, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "gradient buckets"));
	tuner_fini(&tu);
	tuner_fini(&tv);
}

/* a replayed bucket line at its step, beside a share change at the same
 * step; a bad figure is named */
static void test_replay(void **state)
{
	char dir[64], path[96], err[512];
	struct tuner_config c;
	struct tuner tu;
	FILE *f;

	(void)state;
	assert_int_equal(scratch_make(dir, sizeof(dir), "buckets"), 0);
	snprintf(path, sizeof(path), "%s/replay", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fprintf(
	    f,
	    "tuner: step 8: shares 20,20,20,4 (slowest rank 3 at 4.00x)\n"
	    "tuner: step 8: gradient buckets 115520 floats (0.44 MiB, overlap off; all-reduce 3.00 ms)\n"
	    "tuner: step 20: gradient buckets 13107 floats (0.05 MiB, overlap on; replayed)\n");
	fclose(f);
	setup_tuner(&tu, TUNER_OFF, path, SMALL);
	assert_false(tuner_replay_due(&tu, 4, false));
	assert_true(tuner_replay_due(&tu, 8, false)); /* the shares */
	assert_int_equal(tu.buckets.now, SPAN);
	assert_int_equal(tuner_share(&tu, 3), 4);
	assert_false(tuner_replay_due(&tu, 20, false));
	assert_int_equal(tu.buckets.now, SMALL);
	tuner_fini(&tu);

	f = fopen(path, "w");
	fprintf(f, "tuner: step 8: gradient buckets 0 floats\n");
	fclose(f);
	tuner_config_default(&c);
	snprintf(c.replay, sizeof(c.replay), "%s", path);
	assert_int_equal(
	    tuner_init(&tu, &c, DP, B, tuner_bmax(&c, B), err, sizeof(err)),
	    -EINVAL);
	assert_non_null(strstr(err, ":1: gradient buckets of 0 floats"));
	assert_int_equal(scratch_remove(dir), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_model),
	    cmocka_unit_test(test_best),
	    cmocka_unit_test(test_decide_and_trial),
	    cmocka_unit_test(test_background),
	    cmocka_unit_test(test_state),
	    cmocka_unit_test(test_replay),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
