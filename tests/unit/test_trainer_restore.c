/*
 * test_trainer_restore.c - the restore planner over a table of scenarios:
 * four ranks on four nodes, the buddy of rank R being R + 1 (so rank R
 * keeps its own copy and the replica of rank R - 1), tier-1 copies every
 * 3 steps, shared checkpoints every 8.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sigma.h"
#include "restore.h"

#define N    4
#define MAXC 64

/* a copy: holder, shard, step, attempt; flags */
/* clang-format off */
#define OWN(r, s, a) { r, r, s, a, false, true, false }
#define REP(r, s, a) { r, (r + N - 1) % N, s, a, true, true, false }
#define BAD_OWN(r, s, a) { r, r, s, a, false, true, true }
#define BAD_REP(r, s, a) { r, (r + N - 1) % N, s, a, true, true, true }
#define OTHER(r, s, a) { r, r, s, a, false, false, false }
#define END { -1, -1, -1, -1, false, false, false }
/* clang-format on */

struct scenario {
	const char *name;
	struct restore_copy copies[MAXC];
	struct restore_shared shared[8];
	int nshared;
	/* expected */
	enum restore_tier tier;
	long step;
	int attempt;
	int nxfer;
	struct restore_transfer xfer0; /* the first transfer, if any */
	int from_replica;
	long lost;
	const char *why; /* substring of why, or NULL */
};

/* every rank holds its own copy and its buddy's replica of step s */
#define ALL(s, a)                                                              \
	OWN(0, s, a), OWN(1, s, a), OWN(2, s, a), OWN(3, s, a), REP(0, s, a),  \
	    REP(1, s, a), REP(2, s, a), REP(3, s, a)

static const struct scenario scenarios[] = {
    {
	.name = "everything there: newest step, no transfer",
	.copies = {ALL(6, 0), ALL(9, 0), END},
	.shared = {{8, 0, false}},
	.nshared = 1,
	.tier = RESTORE_TIER1,
	.step = 9,
	.nxfer = 0,
    },
    {
	/* rank 3 now runs on a spare: its node's copies (its own
	 * and rank 2's replica) are gone; rank 0 keeps its replica */
	.name = "node lost, its buddy alive",
	.copies = {OWN(0, 6, 0), OWN(1, 6, 0), OWN(2, 6, 0), REP(0, 6, 0),
		   REP(1, 6, 0), REP(2, 6, 0), OWN(0, 9, 0), OWN(1, 9, 0),
		   OWN(2, 9, 0), REP(0, 9, 0), REP(1, 9, 0), REP(2, 9, 0), END},
	.shared = {{8, 0, false}},
	.nshared = 1,
	.tier = RESTORE_TIER1,
	.step = 9,
	.nxfer = 1,
	.xfer0 = {3, 0, 3},
	.from_replica = 1,
    },
    {
	/* ranks 0 and 1 on new nodes: shard 0 lived on both */
	.name = "node and its buddy lost: tier 2",
	.copies = {OWN(2, 9, 0), OWN(3, 9, 0), REP(2, 9, 0), REP(3, 9, 0),
		   OWN(2, 6, 0), OWN(3, 6, 0), REP(2, 6, 0), REP(3, 6, 0), END},
	.shared = {{0, 0, false}, {8, 0, false}},
	.nshared = 2,
	.tier = RESTORE_TIER2,
	.step = 8,
	.lost = 1,
	.why = "no valid copy of shard 0",
    },
    {
	.name = "layout changed: tier 2",
	.copies = {OTHER(0, 9, 0), OTHER(1, 9, 0), OTHER(2, 9, 0),
		   OTHER(3, 9, 0), END},
	.shared = {{8, 0, false}},
	.nshared = 1,
	.tier = RESTORE_TIER2,
	.step = 8,
	.lost = 1,
	.why = "layout changed",
    },
    {
	.name = "corrupt newest step in both copies of a shard: older",
	.copies = {ALL(6, 0), OWN(0, 9, 0), OWN(1, 9, 0), BAD_OWN(2, 9, 0),
		   OWN(3, 9, 0), REP(0, 9, 0), REP(1, 9, 0), REP(2, 9, 0),
		   BAD_REP(3, 9, 0), END},
	.shared = {{8, 0, true}},
	.nshared = 1,
	.tier = RESTORE_TIER1,
	.step = 6,
	.lost = 3,
    },
    {
	.name = "corrupt own copy, good replica: newest, moved",
	.copies = {ALL(6, 0), OWN(0, 9, 0), OWN(1, 9, 0), BAD_OWN(2, 9, 0),
		   OWN(3, 9, 0), REP(0, 9, 0), REP(1, 9, 0), REP(2, 9, 0),
		   REP(3, 9, 0), END},
	.tier = RESTORE_TIER1,
	.step = 9,
	.nxfer = 1,
	.xfer0 = {2, 3, 2},
	.from_replica = 1,
    },
    {
	/* attempt 1 resumed at 6 and completed 10; the old instance
	 * (attempt 0), still running, then wrote 12 everywhere and
	 * 15 on two nodes, and a shared 16 */
	.name = "overlapping old instance: the newer attempt wins",
	.copies = {ALL(12, 0), ALL(10, 1), OWN(0, 15, 0), OWN(1, 15, 0),
		   REP(1, 15, 0), END},
	.shared = {{8, 0, false}, {16, 0, false}},
	.nshared = 2,
	.tier = RESTORE_TIER1,
	.step = 10,
	.attempt = 1,
    },
    {
	.name = "one attempt's shards do not complete another's step",
	.copies = {OWN(0, 9, 1), REP(1, 9, 1), OWN(1, 9, 0), OWN(2, 9, 0),
		   OWN(3, 9, 0), ALL(6, 0), END},
	.tier = RESTORE_TIER1,
	.step = 6,
	.lost = 3,
    },
    {
	.name = "the shared tier newer than tier 1",
	.copies = {ALL(6, 0), END},
	.shared = {{8, 0, false}},
	.nshared = 1,
	.tier = RESTORE_TIER2,
	.step = 8,
	.why = "the shared tier is newer",
    },
    {
	.name = "the same step in both tiers: tier 1",
	.copies = {ALL(8, 0), END},
	.shared = {{8, 0, false}},
	.nshared = 1,
	.tier = RESTORE_TIER1,
	.step = 8,
    },
    {
	.name = "damaged newest shared, no tier 1: older shared",
	.shared = {{8, 0, false}, {16, 0, true}},
	.nshared = 2,
	.tier = RESTORE_TIER2,
	.step = 8,
	.lost = 8,
    },
    {
	.name = "nothing anywhere",
	.tier = RESTORE_NONE,
	.step = -1,
    },
    {
	.name = "everything damaged",
	.copies = {BAD_OWN(0, 3, 0), BAD_REP(1, 3, 0), END},
	.shared = {{8, 0, true}},
	.nshared = 1,
	.tier = RESTORE_NONE,
	.step = -1,
    },
};

static int count_copies(const struct restore_copy *c)
{
	int n = 0;

	while (n < MAXC && c[n].holder >= 0)
		n++;
	return n;
}

static void test_scenarios(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++) {
		const struct scenario *s = &scenarios[i];
		struct restore_input in = {
		    .nranks = N,
		    .copies = s->copies,
		    .ncopies = count_copies(s->copies),
		    .shared = s->shared,
		    .nshared = s->nshared,
		};
		struct restore_plan p;
		char err[256];

		print_message("scenario: %s\n", s->name);
		assert_int_equal(restore_plan(&in, &p, err, sizeof(err)), 0);
		assert_int_equal(p.tier, s->tier);
		assert_int_equal(p.step, s->step);
		if (s->tier != RESTORE_NONE)
			assert_int_equal(p.attempt, s->attempt);
		assert_int_equal(p.lost, s->lost);
		if (s->why)
			assert_non_null(strstr(p.why, s->why));
		if (s->tier == RESTORE_TIER1) {
			assert_int_equal(p.nshards, N);
			assert_int_equal(p.nxfer, s->nxfer);
			assert_int_equal(p.from_replica, s->from_replica);
			if (s->nxfer > 0) {
				assert_int_equal(p.xfer[0].shard,
						 s->xfer0.shard);
				assert_int_equal(p.xfer[0].from, s->xfer0.from);
				assert_int_equal(p.xfer[0].to, s->xfer0.to);
			}
			/* every source is a good copy of the chosen step of
			 * its shard, read by its owner or moved to it */
			for (int k = 0; k < N; k++) {
				const struct restore_copy *c =
				    &s->copies[p.source[k]];
				bool moved = false;

				assert_int_equal(c->shard, k);
				assert_int_equal(c->step, p.step);
				assert_int_equal(c->attempt, p.attempt);
				assert_false(c->bad);
				assert_true(c->same_layout);
				for (int x = 0; x < p.nxfer; x++)
					moved |= p.xfer[x].shard == k &&
						 p.xfer[x].from == c->holder &&
						 p.xfer[x].to == k;
				assert_true(c->holder == k || moved);
			}
		} else {
			assert_null(p.source);
			assert_int_equal(p.nxfer, 0);
		}
		if (s->tier == RESTORE_TIER2) {
			assert_true(p.shared >= 0 && p.shared < s->nshared);
			assert_int_equal(s->shared[p.shared].step, p.step);
			assert_false(s->shared[p.shared].bad);
		}
		restore_plan_fini(&p);
	}
}

/* marking the chosen sources bad, one at a time, walks down the steps
 * and never goes below a step that is still complete */
static void test_replan(void **state)
{
	struct restore_copy c[] = {ALL(3, 0), ALL(6, 0), ALL(9, 0)};
	struct restore_shared sh = {0, 0, false};
	struct restore_input in = {N, c, (int)(sizeof(c) / sizeof(c[0])), &sh,
				   1};
	struct restore_plan p;
	char err[256];
	long last = 10;

	(void)state;
	for (int round = 0; round < 16; round++) {
		assert_int_equal(restore_plan(&in, &p, err, sizeof(err)), 0);
		if (p.tier != RESTORE_TIER1) {
			assert_int_equal(p.tier, RESTORE_TIER2);
			assert_int_equal(p.step, 0);
			restore_plan_fini(&p);
			break;
		}
		assert_true(p.step <= last);
		last = p.step;
		/* the owner's copy is used while it is good */
		for (int k = 0; k < N; k++)
			if (!c[p.source[k]].replica)
				assert_int_equal(c[p.source[k]].holder, k);
		/* the copy of shard 1 turns out damaged */
		c[p.source[1]].bad = true;
		restore_plan_fini(&p);
	}
	/* each step had two copies of shard 1 */
	assert_int_equal(last, 3);
}

static void test_bad_input(void **state)
{
	struct restore_copy c[] = {OWN(0, 9, 0)};
	struct restore_input in = {0, c, 1, NULL, 0};
	struct restore_plan p;
	char err[256];

	(void)state;
	assert_int_equal(restore_plan(&in, &p, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "0 ranks"));
	in.nranks = N;
	c[0].holder = N;
	assert_int_equal(restore_plan(&in, &p, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "copy 0"));
	c[0].holder = 0;
	c[0].step = -2;
	assert_int_equal(restore_plan(&in, &p, err, sizeof(err)), -EINVAL);
	c[0].step = 1;
	in.ncopies = -1;
	assert_int_equal(restore_plan(&in, &p, err, sizeof(err)), -EINVAL);
	restore_plan_fini(NULL);
}

static void test_order(void **state)
{
	(void)state;
	assert_int_equal(restore_cmp(1, 2, 0, 100), 1);
	assert_int_equal(restore_cmp(0, 100, 1, 2), -1);
	assert_int_equal(restore_cmp(2, 7, 2, 5), 1);
	assert_int_equal(restore_cmp(2, 5, 2, 5), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_scenarios),
	    cmocka_unit_test(test_replan),
	    cmocka_unit_test(test_bad_input),
	    cmocka_unit_test(test_order),
	};

	sigma_log_init("test", SIGMA_LOG_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
