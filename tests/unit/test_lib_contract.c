/*
 * test_lib_contract.c - the contract between the parts (lib/contract.h):
 * the job block and node reasons, formatted and parsed back, every field
 * at its limits.
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
#include "sigma.h"

static enum sigma_reason sigma_reason_parse_what(const char *r,
						 const char **what)
{
	return sigma_reason_parse(r, NULL, what);
}

static void test_block_parse(void **state)
{
	struct sigma_block o;
	size_t end = 0;
	const char *c =
	    "sigma[probe=quick,spares=1,max_restarts=3,ckpt_every=50] "
	    "sigma: attempt 2: n3 ecc -> requeued onto n5";

	assert_int_equal(sigma_block_parse(c, &o, &end), 0);
	assert_int_equal(o.probe, SIGMA_LEVEL_QUICK);
	assert_int_equal(o.spares, 1);
	assert_int_equal(o.max_restarts, 3);
	assert_int_equal(o.ckpt_every, 50);
	assert_int_equal(c[end], ' ');
	assert_int_equal(
	    end,
	    strlen("sigma[probe=quick,spares=1,max_restarts=3,ckpt_every=50]"));

	/* a newer plugin's extra key is skipped */
	assert_int_equal(
	    sigma_block_parse("sigma[spares=2,future=x]", &o, NULL), 0);
	assert_int_equal(o.spares, 2);
	assert_int_equal(o.probe, SIGMA_LEVEL_OFF);

	assert_int_equal(sigma_block_parse(NULL, &o, NULL), -ENOENT);
	assert_int_equal(sigma_block_parse("", &o, NULL), -ENOENT);
	assert_int_equal(
	    sigma_block_parse("user note sigma[spares=1]", &o, NULL),
	    -ENOENT);
	assert_int_equal(sigma_block_parse("sigma[spares=1", &o, NULL),
			 -EINVAL);
	assert_int_equal(sigma_block_parse("sigma[spares=-1]", &o, NULL),
			 -EINVAL);
	assert_int_equal(sigma_block_parse("sigma[spares=]", &o, NULL),
			 -EINVAL);
	assert_int_equal(sigma_block_parse("sigma[spares]", &o, NULL),
			 -EINVAL);
	assert_int_equal(sigma_block_parse("sigma[probe=loud]", &o, NULL),
			 -EINVAL);
	assert_int_equal(
	    sigma_block_parse("sigma[max_restarts=99999999999999999999]", &o,
				 NULL),
	    -EINVAL);
}

static void test_reasons(void **state)
{
	const char *what;

	assert_int_equal(
	    sigma_reason_parse_what("sigma: probe full: gpu0 ecc_uncorrected=2",
				   &what),
	    SIGMA_REASON_FAILURE);
	assert_string_equal(what, "gpu0 ecc_uncorrected=2");
	assert_int_equal(
	    sigma_reason_parse_what(
		"sigma: warning: probe quick: host ecc_corrected_rate=40/h (limit 20)",
		&what),
	    SIGMA_REASON_WARNING);
	assert_string_equal(what, "host ecc_corrected_rate=40/h (limit 20)");
	assert_int_equal(
	    sigma_reason_parse_what("sigma: node not responding", &what),
	    SIGMA_REASON_SIGMA);
	assert_string_equal(what, "node not responding");
	assert_int_equal(sigma_reason_parse_what("Prolog error", &what),
			 SIGMA_REASON_NONE);
	assert_null(what);
	assert_int_equal(sigma_reason_parse(NULL, NULL, NULL),
			 SIGMA_REASON_NONE);
	/* "probe" without a level is sigmad's own text, not a probe verdict */
	assert_int_equal(sigma_reason_parse("sigma: probe: x", NULL, NULL),
			 SIGMA_REASON_SIGMA);
}


/* every field at its maximum (and minimum) formats and parses back */
static void test_block_limits(void **state)
{
	const struct sigma_block edge[] = {
	    {SIGMA_LEVEL_QUICK, SIGMA_SPARES_MAX, SIGMA_RESTARTS_MAX,
	     SIGMA_CKPT_EVERY_MAX, SIGMA_WARN_DRAIN_AFTER,
	     SIGMA_RESTART_IN_JOB, SIGMA_SPARES_MAX},
	    {SIGMA_LEVEL_FULL, SIGMA_SPARES_MAX, SIGMA_RESTARTS_MAX,
	     SIGMA_CKPT_EVERY_MAX, SIGMA_WARN_CHECKPOINT,
	     SIGMA_RESTART_REQUEUE, 0},
	    {SIGMA_LEVEL_OFF, 0, 0, 1, SIGMA_WARN_IGNORE, SIGMA_RESTART_IN_JOB,
	     0},
	};
	char buf[SIGMA_BLOCK_MAX];
	struct sigma_block b, back;
	size_t end;

	for (size_t i = 0; i < sizeof(edge) / sizeof(edge[0]); i++) {
		assert_int_equal(sigma_block_format(&edge[i], buf, sizeof(buf)),
				 0);
		assert_int_equal(sigma_block_parse(buf, &back, &end), 0);
		assert_int_equal(end, strlen(buf));
		assert_int_equal(back.probe, edge[i].probe);
		assert_int_equal(back.spares, edge[i].spares);
		assert_int_equal(back.max_restarts, edge[i].max_restarts);
		assert_int_equal(back.ckpt_every, edge[i].ckpt_every);
		assert_int_equal(back.on_warning, edge[i].on_warning);
		assert_int_equal(back.restart, edge[i].restart);
		assert_int_equal(back.job_spares, edge[i].job_spares);
	}
	/* a requeued job's block reads as it did before in-job restarts */
	assert_int_equal(sigma_block_format(&edge[1], buf, sizeof(buf)), 0);
	assert_null(strstr(buf, "restart="));
	assert_int_equal(sigma_block_format(&edge[0], buf, sizeof(buf)), 0);
	assert_non_null(strstr(buf, ",restart=in-job,job_spares=1024]"));
	/* in-allocation spares are for an in-job restart only */
	b = edge[1];
	b.job_spares = 1;
	assert_int_equal(sigma_block_format(&b, buf, sizeof(buf)), -ERANGE);
	assert_int_equal(sigma_block_parse("sigma[restart=sometimes]", &back,
					   NULL),
			 -EINVAL);
	/* one past a limit is refused both ways */
	b = edge[0];
	b.max_restarts = SIGMA_RESTARTS_MAX + 1;
	assert_int_equal(sigma_block_format(&b, buf, sizeof(buf)), -ERANGE);
	assert_int_equal(sigma_block_parse("sigma[max_restarts=10001]", &back,
					   NULL),
			 -EINVAL);
	assert_int_equal(sigma_block_parse("sigma[max_restarts=5000]", &back,
					   NULL),
			 0);
	assert_int_equal(back.max_restarts, 5000);
	assert_int_equal(sigma_block_parse("sigma[spares=1025]", &back, NULL),
			 -EINVAL);
	assert_int_equal(sigma_block_parse("sigma[ckpt_every=0]", &back, NULL),
			 -EINVAL);
	assert_int_equal(
	    sigma_block_parse("sigma[on_warning=explode]", &back, NULL),
	    -EINVAL);
	/* a block of an older plugin: the job is not sent SIGUSR1 */
	assert_int_equal(sigma_block_parse("sigma[spares=1]", &back, NULL), 0);
	assert_int_equal(back.on_warning, SIGMA_WARN_DRAIN_AFTER);
	b = edge[0];
	assert_int_equal(sigma_block_format(&b, buf, 20), -ENAMETOOLONG);
}

static void test_reason_round_trip(void **state)
{
	char buf[128];
	const char *what;
	int level = 0;

	assert_int_equal(sigma_reason_format(buf, sizeof(buf), true,
					     SIGMA_LEVEL_FULL, "gpu0 temp_c=97"),
			 0);
	assert_string_equal(buf, "sigma: warning: probe full: gpu0 temp_c=97");
	assert_int_equal(sigma_reason_parse(buf, &level, &what),
			 SIGMA_REASON_WARNING);
	assert_int_equal(level, SIGMA_LEVEL_FULL);
	assert_string_equal(what, "gpu0 temp_c=97");
	assert_int_equal(sigma_reason_format(buf, sizeof(buf), false,
					     SIGMA_LEVEL_QUICK, "host x"),
			 0);
	assert_int_equal(sigma_reason_parse(buf, &level, &what),
			 SIGMA_REASON_FAILURE);
	assert_int_equal(level, SIGMA_LEVEL_QUICK);
	assert_int_equal(sigma_reason_format(buf, sizeof(buf), false,
					     SIGMA_LEVEL_OFF, "x"),
			 -EINVAL);
	assert_int_equal(sigma_reason_format(buf, 12, false, SIGMA_LEVEL_QUICK,
					     "a long reason"),
			 -ENAMETOOLONG);
	assert_int_equal(sigma_reason_parse("sigma: admin: fan swap", NULL,
					    &what),
			 SIGMA_REASON_ADMIN);
	assert_string_equal(what, "fan swap");
	/* an unknown level is not a probe's verdict */
	assert_int_equal(sigma_reason_parse("sigma: probe loud: x", NULL, NULL),
			 SIGMA_REASON_SIGMA);
}

/* the one drain decision, as each path asks it */
static enum sigma_drain_action decide(bool drained, bool down,
				      const char *reason,
				      enum sigma_drain_ask ask, int level,
				      bool resume)
{
	struct sigma_node_now n = {drained, down, reason};
	char why[300];

	return sigma_drain_decide(&n, ask, level, resume, why, sizeof(why));
}

static void test_drain_decide(void **state)
{
	const char *fq = "sigma: probe quick: host temp_c=97 (limit 95)";
	const char *wq =
	    "sigma: warning: probe quick: host ecc_corrected_rate=40/h (limit 20)";
	const char *ff = "sigma: probe full: host memtest=fail";
	const char *admin = "sigma: admin: RMA pending";
	const char *nhc = "NHC: ib0 link down - do not resume";
	const char *sus = "sigma: suspect: the rank of job 7 keeps dying here";
	const enum sigma_drain_ask drainers[] = {
	    SIGMA_ASK_FAILURE, SIGMA_ASK_WARNING, SIGMA_ASK_JOB_FAILED,
	    SIGMA_ASK_USER};
	char why[300];
	struct sigma_node_now n = {true, false, nhc};

	(void)state;
	/* a node in service: every path may drain it */
	for (size_t i = 0; i < 4; i++)
		assert_int_equal(decide(false, false, NULL, drainers[i], 1,
					false),
				 SIGMA_DRAIN_SET);
	/* an admin's drain, in Slurm or through sigma, and an admin's
	 * down: no path replaces it */
	for (size_t i = 0; i < 4; i++) {
		assert_int_equal(decide(true, false, nhc, drainers[i], 1, true),
				 SIGMA_DRAIN_NONE);
		assert_int_equal(decide(true, false, admin, drainers[i], 1,
					true),
				 SIGMA_DRAIN_NONE);
		assert_int_equal(decide(false, true, nhc, drainers[i], 1, true),
				 SIGMA_DRAIN_NONE);
		assert_int_equal(decide(true, false, "Prolog error",
					drainers[i], 1, true),
				 SIGMA_DRAIN_NONE);
	}
	assert_int_equal(sigma_drain_decide(&n, SIGMA_ASK_USER, 1, false, why,
					    sizeof(why)),
			 SIGMA_DRAIN_NONE);
	assert_non_null(strstr(why, nhc));
	/* a user's report never touches a node out of service */
	assert_int_equal(decide(true, false, wq, SIGMA_ASK_USER, 1, false),
			 SIGMA_DRAIN_NONE);
	assert_int_equal(decide(true, false, sus, SIGMA_ASK_USER, 1, false),
			 SIGMA_DRAIN_NONE);
	assert_int_equal(decide(false, true, "Not responding", SIGMA_ASK_USER,
				1, false),
			 SIGMA_DRAIN_NONE);
	/* a failure replaces sigma's own warning, and nothing else of
	 * sigma's; the probe leaves a node Slurm lost alone */
	assert_int_equal(decide(true, false, wq, SIGMA_ASK_FAILURE, 1, false),
			 SIGMA_DRAIN_SET);
	assert_int_equal(decide(true, false, ff, SIGMA_ASK_FAILURE, 1, false),
			 SIGMA_DRAIN_NONE);
	assert_int_equal(decide(true, false, "sigma: attempt 2: n3 requeued",
				SIGMA_ASK_FAILURE, 1, false),
			 SIGMA_DRAIN_NONE);
	assert_int_equal(decide(false, true, "Not responding",
				SIGMA_ASK_FAILURE, 1, true),
			 SIGMA_DRAIN_NONE);
	/* a warning: only a node in service */
	assert_int_equal(decide(true, false, fq, SIGMA_ASK_WARNING, 1, false),
			 SIGMA_DRAIN_NONE);
	/* sigmad drains a node a job failed on that Slurm lost, or sigma
	 * downed, once: never one drained already */
	assert_int_equal(decide(false, true, "Not responding",
				SIGMA_ASK_JOB_FAILED, 1, false),
			 SIGMA_DRAIN_SET);
	assert_int_equal(decide(false, true, "sigma: node not responding",
				SIGMA_ASK_JOB_FAILED, 1, false),
			 SIGMA_DRAIN_SET);
	assert_int_equal(decide(true, true, "Not responding",
				SIGMA_ASK_JOB_FAILED, 1, false),
			 SIGMA_DRAIN_NONE);
	assert_int_equal(decide(true, false, fq, SIGMA_ASK_JOB_FAILED, 1,
				false),
			 SIGMA_DRAIN_NONE);
	/* healthy: resume only when allowed, only a probe's own reason, and
	 * a quick pass never what a full probe found */
	assert_int_equal(decide(true, false, fq, SIGMA_ASK_HEALTHY, 1, false),
			 SIGMA_DRAIN_NONE);
	assert_int_equal(decide(true, false, fq, SIGMA_ASK_HEALTHY, 1, true),
			 SIGMA_DRAIN_RESUME);
	assert_int_equal(decide(true, false, wq, SIGMA_ASK_HEALTHY, 1, true),
			 SIGMA_DRAIN_RESUME);
	assert_int_equal(decide(true, false, ff, SIGMA_ASK_HEALTHY, 1, true),
			 SIGMA_DRAIN_NONE);
	assert_int_equal(decide(true, false, ff, SIGMA_ASK_HEALTHY, 2, true),
			 SIGMA_DRAIN_RESUME);
	assert_int_equal(decide(true, false, admin, SIGMA_ASK_HEALTHY, 2, true),
			 SIGMA_DRAIN_NONE);
	assert_int_equal(decide(true, false, sus, SIGMA_ASK_HEALTHY, 2, true),
			 SIGMA_DRAIN_NONE);
	assert_int_equal(decide(false, false, NULL, SIGMA_ASK_HEALTHY, 1, true),
			 SIGMA_DRAIN_NONE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_block_parse),
	    cmocka_unit_test(test_block_limits),
	    cmocka_unit_test(test_reasons),
	    cmocka_unit_test(test_reason_round_trip),
	    cmocka_unit_test(test_drain_decide),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
