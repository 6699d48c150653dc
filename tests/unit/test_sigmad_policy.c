/*
 * test_sigmad_policy.c - the controller's pure policy core over a table of
 * scenarios: spare available or not, two failures at once, warning then
 * failure, max restarts reached, node back healthy or not.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "contract.h"
#include "policy.h"

#define NO -1

struct scenario {
	const char *name;
	bool warning; /* warning path instead of failure */
	bool has_job;
	struct policy_job job;
	size_t nbad;
	size_t nspares;
	struct policy_spare spares[4];
	bool proactive;
	/* expected */
	enum policy_verdict verdict;
	int attempt;
	size_t npicked;
	long picked[2];
};

/* jobs that handle SIGUSR1 (--sigma-on-warning=checkpoint) */
#define C SIGMA_WARN_CHECKPOINT

/* one scenario per row reads better as a table */
/* clang-format off */
static const struct scenario scenarios[] = {
	{ "failure, spare available", false, true, { 7, 0, 3, 1, 0, C }, 1,
	  2, { { 0, 100, false }, { 0, 50, false } }, true,
	  POLICY_REQUEUE, 2, 1, { 1, NO } },
	{ "failure, no spare in the pool", false, true, { 7, 0, 3, 1, 0, C }, 1,
	  0, { { 0 } }, true, POLICY_REQUEUE, 2, 0, { NO, NO } },
	{ "failure, job asked for no spares", false, true, { 7, 1, 3, 0, 0, C }, 1,
	  2, { { 0, 1, false }, { 0, 2, false } }, true,
	  POLICY_REQUEUE, 3, 0, { NO, NO } },
	{ "failure, recovery holds its spares", false, true, { 7, 1, 3, 1, 1, C }, 1,
	  1, { { 0, 1, false } }, true, POLICY_REQUEUE, 3, 0, { NO, NO } },
	{ "failure, fewest past failures wins", false, true, { 7, 0, 3, 1, 0, C },
	  1, 3, { { 2, 1, false }, { 0, 9, false }, { 1, 0, false } }, true,
	  POLICY_REQUEUE, 2, 1, { 1, NO } },
	{ "failure, excluded spare skipped", false, true, { 7, 0, 3, 1, 0, C }, 1,
	  2, { { 0, 1, true }, { 3, 9, false } }, true,
	  POLICY_REQUEUE, 2, 1, { 1, NO } },
	{ "two failures at once, two spares", false, true, { 9, 0, 3, 2, 0, C }, 2,
	  3, { { 0, 5, false }, { 0, 1, false }, { 0, 3, false } }, true,
	  POLICY_REQUEUE, 2, 2, { 1, 2 } },
	{ "two failures at once, one spare", false, true, { 9, 0, 3, 2, 0, C }, 2,
	  1, { { 0, 5, false } }, true, POLICY_REQUEUE, 2, 1, { 0, NO } },
	{ "max restarts reached", false, true, { 7, 3, 3, 1, 0, C }, 1,
	  1, { { 0, 5, false } }, true, POLICY_GIVE_UP, 4, 0, { NO, NO } },
	{ "no restarts allowed at all", false, true, { 7, 0, 0, 1, 0, C }, 1,
	  1, { { 0, 5, false } }, true, POLICY_GIVE_UP, 1, 0, { NO, NO } },
	{ "failure on an idle node", false, false, { 0, 0, 0, 0, 0, C }, 1,
	  1, { { 0, 5, false } }, true, POLICY_DRAIN_ONLY, 0, 0, { NO, NO } },
	{ "warning, spare available", true, true, { 7, 0, 3, 1, 0, C }, 1,
	  1, { { 0, 5, false } }, true, POLICY_CHECKPOINT, 2, 1, { 0, NO } },
	{ "warning, no spare: keep running", true, true, { 7, 0, 3, 1, 0, C }, 1,
	  0, { { 0 } }, true, POLICY_WATCH, 2, 0, { NO, NO } },
	{ "warning, two nodes, one spare", true, true, { 7, 0, 3, 2, 0, C }, 2,
	  1, { { 0, 5, false } }, true, POLICY_WATCH, 2, 0, { NO, NO } },
	{ "warning, proactive off", true, true, { 7, 0, 3, 1, 0, C }, 1,
	  1, { { 0, 5, false } }, false, POLICY_WATCH, 2, 0, { NO, NO } },
	{ "warning, max restarts reached", true, true, { 7, 2, 2, 1, 0, C }, 1,
	  1, { { 0, 5, false } }, true, POLICY_WATCH, 4, 0, { NO, NO } },
	{ "warning, job does not handle SIGUSR1", true, true,
	  { 7, 0, 3, 1, 0, SIGMA_WARN_DRAIN_AFTER }, 1,
	  1, { { 0, 5, false } }, true, POLICY_WATCH, 2, 0, { NO, NO } },
	{ "warning, --sigma-on-warning=ignore", true, true,
	  { 7, 0, 3, 1, 0, SIGMA_WARN_IGNORE }, 1,
	  1, { { 0, 5, false } }, true, POLICY_WATCH, 2, 0, { NO, NO } },
	{ "failure, whatever the warning mode", false, true,
	  { 7, 0, 3, 1, 0, SIGMA_WARN_DRAIN_AFTER }, 1,
	  2, { { 0, 100, false }, { 0, 50, false } }, true,
	  POLICY_REQUEUE, 2, 1, { 1, NO } },
	{ "warning on an idle node", true, false, { 0, 0, 0, 0, 0, C }, 1,
	  1, { { 0, 5, false } }, true, POLICY_DRAIN_ONLY, 0, 0, { NO, NO } },
};
/* clang-format on */

static void test_scenarios(void **state)
{
	for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++) {
		const struct scenario *s = &scenarios[i];
		struct policy_config cfg;
		struct policy_plan plan;
		int rc;

		policy_config_init(&cfg);
		cfg.proactive = s->proactive;
		if (s->warning)
			rc = policy_plan_warning(
			    &cfg, s->has_job ? &s->job : NULL, s->nbad,
			    s->spares, s->nspares, &plan);
		else
			rc = policy_plan_failure(
			    &cfg, s->has_job ? &s->job : NULL, s->nbad,
			    s->spares, s->nspares, &plan);
		print_message("scenario: %s -> %s (%s)\n", s->name,
			      policy_verdict_name(plan.verdict), plan.why);
		assert_int_equal(rc, 0);
		assert_int_equal(plan.verdict, s->verdict);
		assert_int_equal(plan.attempt, s->attempt);
		assert_int_equal(plan.npicked, s->npicked);
		for (size_t k = 0; k < plan.npicked; k++)
			assert_int_equal((long)plan.picked[k], s->picked[k]);
		assert_non_null(plan.why);
		assert_true(plan.why[0] != '\0');
	}
}

/* Warning then failure: the warned node is drained; the failure comes later. */
static void test_warning_then_failure(void **state)
{
	struct policy_config cfg;
	struct policy_job job = {11, 0, 3, 1, 0, C};
	struct policy_spare pool[1] = {{0, 0, false}};
	struct policy_plan plan;

	policy_config_init(&cfg);
	cfg.warn_grace_s = 60;
	/* pool empty at warning time: the job runs on, node drained */
	assert_int_equal(policy_plan_warning(&cfg, &job, 1, pool, 0, &plan), 0);
	assert_int_equal(plan.verdict, POLICY_WATCH);
	/* the node then fails while a spare has come back */
	assert_int_equal(policy_plan_failure(&cfg, &job, 1, pool, 1, &plan), 0);
	assert_int_equal(plan.verdict, POLICY_REQUEUE);
	assert_int_equal(plan.npicked, 1);
	/* with a spare at warning time the move is proactive */
	assert_int_equal(policy_plan_warning(&cfg, &job, 1, pool, 1, &plan), 0);
	assert_int_equal(plan.verdict, POLICY_CHECKPOINT);
	/* the job stops on its own, or the grace runs out */
	assert_false(policy_warning_move_due(&cfg, 100, 159, true));
	assert_true(policy_warning_move_due(&cfg, 100, 160, true));
	assert_true(policy_warning_move_due(&cfg, 100, 101, false));
}

struct repair_case {
	int rc, tries;
	size_t pool, target;
	enum policy_return want;
};

static void test_return_to_service(void **state)
{
	static const struct repair_case cases[] = {
	    {0, 0, 1, 2, POLICY_RETURN_TO_POOL},    /* healthy, pool short */
	    {0, 0, 2, 2, POLICY_RETURN_TO_SERVICE}, /* healthy, pool full */
	    {1, 0, 0, 2, POLICY_STAY_DRAINED},	    /* still failing */
	    {2, 0, 0, 2, POLICY_STAY_DRAINED},	    /* still warning */
	    {3, 1, 0, 2, POLICY_PROBE_AGAIN},	    /* probe could not run */
	    {3, 3, 0, 2, POLICY_STAY_DRAINED},	    /* ... too often */
	    {127, 3, 0, 2, POLICY_STAY_DRAINED},
	};
	struct policy_config cfg;

	policy_config_init(&cfg);
	cfg.cooldown_s = 30;
	assert_false(policy_repair_due(&cfg, 1000, 1029));
	assert_true(policy_repair_due(&cfg, 1000, 1030));
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		assert_int_equal(
		    policy_after_probe(&cfg, cases[i].rc, cases[i].tries,
				       cases[i].pool, cases[i].target),
		    cases[i].want);
}

static void test_pick_and_errors(void **state)
{
	struct policy_spare pool[3] = {
	    {1, 10, false}, {1, 5, false}, {1, 5, false}};
	bool taken[3] = {false, true, false};
	struct policy_config cfg;
	struct policy_job job = {1, 0, 1, 1, 0, C};
	struct policy_plan plan;

	policy_config_init(&cfg);
	assert_int_equal(policy_pick_spare(pool, 3, NULL),
			 1); /* tie: lower index */
	assert_int_equal(policy_pick_spare(pool, 3, taken), 2);
	assert_int_equal(policy_pick_spare(pool, 0, NULL), -1);
	assert_int_equal(policy_plan_failure(&cfg, &job, 0, pool, 3, &plan),
			 -EINVAL);
	assert_int_equal(policy_plan_failure(&cfg, &job, 1, NULL, 3, &plan),
			 -EINVAL);
	assert_int_equal(policy_plan_warning(NULL, &job, 1, pool, 3, &plan),
			 -EINVAL);
	assert_string_equal(policy_verdict_name(POLICY_GIVE_UP), "give_up");
	assert_string_equal(policy_return_name(POLICY_RETURN_TO_POOL),
			    "to_pool");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_scenarios),
	    cmocka_unit_test(test_warning_then_failure),
	    cmocka_unit_test(test_return_to_service),
	    cmocka_unit_test(test_pick_and_errors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
