/*
 * test_trainer_place.c - the auto-tuner's expert placement (tuner_place.c):
 * the swaps decided from routed tokens and the ranks' pace, worked by
 * hand; the tuner moving experts off a 2x slow rank once a window of
 * steps has counted them; a move that makes the step slower taken back;
 * the moves' log read back as a checkpoint holds it, all or nothing; and
 * the replayed moves.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tuner.h"
#include "tuner_fixture.h"

#define DP 4
#define L  2
#define E  8

/* contiguous: experts 2p, 2p + 1 on ep rank p */
static void layout_owner(int16_t *own)
{
	for (int l = 0; l < L; l++)
		for (int e = 0; e < E; e++)
			own[l * E + e] = (int16_t)(e / (E / DP));
}

static int held(const int16_t *own, int l, int p)
{
	int n = 0;

	for (int e = 0; e < E; e++)
		n += own[l * E + e] == p;
	return n;
}

/* by hand: layer 0, rank 0 holds experts 0 (load 100) and 1 (80), the
 * others 10 and 10 each; the best swap gives rank 0's hottest (0) for a
 * cold one of another rank: rank 0 then costs 90, the other 110, and no
 * swap can do better (pairs 80 + 10, 100 + 10) */
static void test_decide_by_hand(void **state)
{
	int16_t own[L * E];
	double load[L * E], pace[DP] = {1, 1, 1, 1};
	struct tuner_swap s[L];
	int n;

	(void)state;
	layout_owner(own);
	for (int i = 0; i < L * E; i++)
		load[i] = 10;
	load[0] = 100, load[1] = 80;
	n = tuner_place_decide(L, E, DP, own, load, pace, s, L);
	assert_int_equal(n, 1); /* layer 1 is even: nothing to gain */
	assert_int_equal(s[0].layer, 0);
	assert_int_equal(s[0].a, 0);
	assert_int_equal(s[0].b, 2); /* the lowest of the cold ones */
	assert_int_equal(own[0], 1);
	assert_int_equal(own[2], 0);
	for (int p = 0; p < DP; p++)
		assert_int_equal(held(own, 0, p), E / DP);

	/* a rank twice as slow: its two experts of 10 cost 40, the others
	 * 20; it trades one for a cold one... of the same load: no gain */
	layout_owner(own);
	for (int i = 0; i < L * E; i++)
		load[i] = 10;
	pace[3] = 2.0;
	assert_int_equal(tuner_place_decide(L, E, DP, own, load, pace, s, L),
			 0);
	/* with uneven loads it takes the coldest of another rank */
	load[6] = 30, load[7] = 20, load[1] = 4; /* rank 3: 100 */
	n = tuner_place_decide(L, E, DP, own, load, pace, s, L);
	assert_int_equal(n, 1);
	assert_int_equal(s[0].a, 6);
	assert_int_equal(s[0].b, 1);
	assert_int_equal(own[6], 0);
	assert_int_equal(own[1], 3);
}

static void test_swaps_text(void **state)
{
	struct tuner_swap s[4] = {{0, 1, 2}, {1, 7, 0}}, r[4];
	char buf[64], err[256];

	(void)state;
	assert_int_equal(tuner_swaps_format(s, 2, buf, sizeof(buf)), 11);
	assert_string_equal(buf, "0:1-2,1:7-0");
	assert_int_equal(
	    tuner_swaps_parse(buf, ',', L, E, r, 4, err, sizeof(err)), 2);
	assert_memory_equal(r, s, sizeof(*s) * 2);
	/* a layer, an expert out of range, a swap with itself, junk */
	assert_int_equal(
	    tuner_swaps_parse("2:0-1", ',', L, E, r, 4, err, sizeof(err)),
	    -EINVAL);
	assert_non_null(strstr(err, "2:0-1"));
	assert_int_equal(
	    tuner_swaps_parse("0:0-8", ',', L, E, r, 4, err, sizeof(err)),
	    -EINVAL);
	assert_int_equal(
	    tuner_swaps_parse("0:3-3", ',', L, E, r, 4, err, sizeof(err)),
	    -EINVAL);
	assert_int_equal(
	    tuner_swaps_parse("0:1-2x", ',', L, E, r, 4, err, sizeof(err)),
	    -EINVAL);
	assert_int_equal(
	    tuner_swaps_parse("-1:1-2", ',', L, E, r, 4, err, sizeof(err)),
	    -EINVAL);
	/* more than max */
	assert_int_equal(
	    tuner_swaps_parse("0:1-2,0:2-1", ',', L, E, r, 1, err, sizeof(err)),
	    -EINVAL);
}

static void setup_tuner(struct tuner *tu, int mode, const char *replay)
{
	int16_t own[L * E];
	int ep_of[DP] = {0, 1, 2, 3};
	char err[256];

	tuner_fixture(tu, DP, 16, mode, replay);
	layout_owner(own);
	assert_int_equal(
	    tuner_place_init(tu, L, E, DP, ep_of, own, false, err,
			     sizeof(err)), 0);
}

/* one exchange, rank 3 twice as slow, then its tokens: rank 3's experts
 * get more (an uneven router); the job's step time step_ms; the swaps
 * made */
static int exchange_at(struct tuner *tu, long done, double step_ms)
{
	struct tuner_sample all[DP];
	float load[L * E];

	memset(all, 0, sizeof(all));
	for (int r = 0; r < DP; r++) {
		all[r].dp_index = r;
		all[r].steps = 4;
		all[r].seqs = 64;
		all[r].compute_ns = 64e6 * (r == 3 ? 2.0 : 1.0) *
				    (1.0 + 0.01 * (double)((done + r) % 3));
		all[r].step_ns = 4 * step_ms * 1e6;
	}
	tuner_exchange(tu, all, DP, done, false);
	for (int i = 0; i < L * E; i++)
		load[i] = (float)(100 + 10 * (i % E));
	return tuner_place_exchange(tu, load, 4, done, false);
}

static int exchange(struct tuner *tu, long done)
{
	return exchange_at(tu, done, 32.0);
}

/* the tuner: nothing before a full window of steps; then the slow rank
 * sheds its hot experts, its cost per layer falls, each rank keeps E / ep
 * experts, and the log holds every swap with its step */
static void test_tuner_moves_off_slow(void **state)
{
	struct tuner tu, back;
	double before = 0, after = 0;
	long done, first = -1;
	char err[256];

	(void)state;
	setup_tuner(&tu, TUNER_ON, NULL);
	assert_true(tuner_place_wants(&tu));
	for (done = 4; done <= 60; done += 4)
		if (exchange(&tu, done) > 0 && first < 0)
			first = done;
	assert_true(first >= 20); /* the window is full at step 20 */
	assert_true(first <= 40);
	assert_true(tu.experts.moves > 0);
	for (int l = 0; l < L; l++) {
		for (int p = 0; p < DP; p++)
			assert_int_equal(held(tu.experts.owner, l, p), E / DP);
		for (int e = 0; e < E; e++) {
			before += e / 2 == 3 ? 100 + 10 * e : 0;
			after += tu.experts.owner[l * E + e] == 3 ? 100 + 10 * e : 0;
		}
	}
	assert_true(after < 0.8 * before);
	assert_non_null(strstr(tu.st.moves, "@"));

	/* the checkpoint's log gives the same placement */
	setup_tuner(&back, TUNER_OFF, NULL);
	assert_int_equal(
	    tuner_place_import(&back, tu.st.moves, err, sizeof(err)), 0);
	assert_memory_equal(back.experts.owner, tu.experts.owner, sizeof(int16_t) * L * E);
	assert_int_equal(back.experts.moves, tu.experts.moves);
	tuner_fini(&back);

	/* a bad log changes nothing */
	setup_tuner(&back, TUNER_OFF, NULL);
	assert_int_equal(
	    tuner_place_import(&back, "0:1-2@4;1:9-0@8;", err, sizeof(err)),
	    -EINVAL);
	assert_non_null(strstr(err, "1:9-0"));
	assert_int_equal(back.experts.owner[1], 0);
	assert_int_equal(back.experts.moves, 0);
	assert_int_equal(tuner_place_import(&back, "0:1-2;", err, sizeof(err)),
			 -EINVAL);
	tuner_fini(&back);
	tuner_fini(&tu);

	/* observe and --zero 1 move nothing */
	setup_tuner(&tu, TUNER_OBSERVE, NULL);
	assert_false(tuner_place_wants(&tu));
	for (done = 4; done <= 60; done += 4)
		assert_int_equal(exchange(&tu, done), 0);
	tuner_fini(&tu);
	setup_tuner(&tu, TUNER_ON, NULL);
	tu.experts.fixed = true;
	for (done = 4; done <= 60; done += 4)
		assert_int_equal(exchange(&tu, done), 0);
	tuner_fini(&tu);
}

/* a move after which the step is 20% slower is taken back once a
 * window has measured it, and none is tried for 4 windows; one after
 * which it is no slower stays */
static void test_move_on_trial(void **state)
{
	struct tuner tu;
	int16_t was[L * E];
	long done, moved = -1, back = -1;
	int k;

	(void)state;
	setup_tuner(&tu, TUNER_ON, NULL);
	memcpy(was, tu.experts.owner, sizeof(was));
	for (done = 4; done <= 200 && back < 0; done += 4) {
		k = exchange_at(&tu, done, moved < 0 ? 32.0 : 38.4);
		if (k > 0 && moved < 0)
			moved = done;
		else if (k > 0)
			back = done;
	}
	assert_true(moved > 0);
	/* the window of 5 exchanges after the move, then taken back */
	assert_int_equal(back, moved + 5 * 4);
	assert_memory_equal(tu.experts.owner, was, sizeof(was));
	assert_non_null(strstr(tu.st.moves, "@"));
	/* no move for 4 windows (20 exchanges) */
	for (int i = 0; i < 20; i++, done += 4)
		assert_int_equal(exchange_at(&tu, done, 38.4), 0);
	tuner_fini(&tu);

	/* as fast as before: kept, nothing taken back */
	setup_tuner(&tu, TUNER_ON, NULL);
	moved = -1;
	for (done = 4; done <= 200; done += 4) {
		if (exchange(&tu, done) > 0 && moved < 0)
			moved = done;
		assert_int_equal(tu.experts.cool, 0);
	}
	assert_true(moved > 0);
	tuner_fini(&tu);
}

static void test_replay_moves(void **state)
{
	char path[] = "/tmp/test_place.XXXXXX", err[512];
	struct tuner_config c;
	struct tuner tu;
	int16_t own[L * E];
	int ep_of[DP] = {0, 1, 2, 3};
	FILE *f;
	int fd;

	(void)state;
	fd = mkstemp(path);
	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	fprintf(
	    f,
	    "tuner: step 8: shares 20,20,20,4 (slowest rank 3 at 4.00x)\n"
	    "tuner: step 8: experts 0:6-0,1:7-1 (balance the routed tokens)\n"
	    "tuner: step 24: experts 0:0-2 (balance)\n");
	fclose(f);
	setup_tuner(&tu, TUNER_OFF, path);
	assert_int_equal(tu.replay.nplan, 1);
	assert_int_equal(tu.replay.nmplan, 2);
	assert_int_equal(tuner_place_replay(&tu, 4, false), 0);
	assert_int_equal(tuner_place_replay(&tu, 8, false), 2);
	assert_int_equal(tu.experts.owner[6], 0);
	assert_int_equal(tu.experts.owner[0], 3);
	assert_int_equal(tu.experts.owner[E + 7], 0);
	assert_int_equal(tuner_place_replay(&tu, 24, false), 1);
	assert_int_equal(tu.experts.owner[0], 1);
	assert_string_equal(tu.st.moves, "0:6-0@8;1:7-1@8;0:0-2@24;");
	tuner_fini(&tu);

	/* a resumed run skips what its checkpoint holds */
	setup_tuner(&tu, TUNER_OFF, path);
	assert_int_equal(tuner_place_replay(&tu, 12, false), 0);
	assert_int_equal(tuner_place_replay(&tu, 24, false), 1);
	tuner_fini(&tu);

	/* an expert that is not there: the line is named */
	f = fopen(path, "w");
	fprintf(f, "tuner: step 8: experts 0:6-9\n");
	fclose(f);
	tuner_config_default(&c);
	snprintf(c.replay, sizeof(c.replay), "%s", path);
	assert_int_equal(tuner_init(&tu, &c, DP, 16, 24, err, sizeof(err)), 0);
	layout_owner(own);
	assert_int_equal(
	    tuner_place_init(&tu, L, E, DP, ep_of, own, false, err,
			     sizeof(err)),
	    -EINVAL);
	assert_non_null(strstr(err, "step 8"));
	tuner_fini(&tu);
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_decide_by_hand),
	    cmocka_unit_test(test_swaps_text),
	    cmocka_unit_test(test_tuner_moves_off_slow),
	    cmocka_unit_test(test_move_on_trial),
	    cmocka_unit_test(test_replay_moves),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
