/*
 * test_sigmad_sim.c - sigma-sim's engine and trace files: determinism, the
 * same incidents for both policies, sigma ahead of the baseline on the
 * shipped trace, accounting that adds up, and trace errors; and, on small
 * scripted clusters where every figure can be worked out by hand, the
 * checkpoint tiers, the in-job and pool paths, the fall back to tier 2 and
 * fail-slow episodes with and without mitigation.
 */
#include <math.h>
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

#include "sigma.h"
#include "sim.h"

static struct sim_trace trace;
static struct sim_result a, b;

static void load_shipped(void)
{
	const char *top = getenv("top_srcdir");
	char path[4096], err[512] = "";

	snprintf(path, sizeof(path), "%s/contrib/traces/llama3-54d.trace",
		 top ? top : "..");
	sim_trace_init(&trace);
	assert_int_equal(sim_trace_load(&trace, path, err, sizeof(err)), 0);
}

static void test_shipped_trace(void **state)
{
	double total = 0;

	load_shipped();
	assert_int_equal(trace.nodes, 2048);
	assert_true(trace.days == 54.0);
	assert_int_equal(trace.nkinds, 5);
	for (size_t k = 0; k < trace.nkinds; k++)
		total += trace.kinds[k].count;
	assert_true(total == 419.0); /* the published total */
	assert_string_equal(trace.kinds[0].name, "accelerator");
	assert_true(trace.kinds[0].count / total > 0.586 &&
		    trace.kinds[0].count / total < 0.588);
}

static void test_sigma_vs_baseline(void **state)
{
	struct sim_params p = {.nodes = 2048,
			       .days = 54,
			       .job_nodes = 2000,
			       .spares = 46,
			       .seed = 7};
	char err[256];

	load_shipped();
	p.sigma = true;
	assert_int_equal(sim_run(&trace, &p, &a, err, sizeof(err)), 0);
	p.sigma = false;
	assert_int_equal(sim_run(&trace, &p, &b, err, sizeof(err)), 0);
	print_message(
	    "sigma ETT %.4f p50 %.0f s, baseline ETT %.4f p50 %.0f s, %llu incidents\n",
	    a.useful_node_s / a.job_node_s, sim_result_quantile(&a, 0.5),
	    b.useful_node_s / b.job_node_s, sim_result_quantile(&b, 0.5),
	    (unsigned long long)a.incidents);
	/* the same incident stream for both */
	assert_int_equal(a.incidents, b.incidents);
	assert_true(a.incidents > 300 && a.incidents < 550);
	/* accounting: kept work never exceeds the wall time */
	assert_true(a.useful_node_s > 0 && a.useful_node_s <= a.job_node_s);
	assert_true(b.useful_node_s > 0 && b.useful_node_s <= b.job_node_s);
	assert_true(a.job_node_s == b.job_node_s);
	/* sigma recovers faster and keeps more work */
	assert_true(a.useful_node_s > b.useful_node_s);
	assert_true(sim_result_quantile(&a, 0.5) <
		    sim_result_quantile(&b, 0.5));
	assert_true(a.warnings_moved > 0);
	assert_int_equal(b.warnings_moved, 0);
	assert_true(a.spares_used > 0);
	assert_int_equal(b.spares_used, 0);
	assert_true(a.recoveries > 0 && a.recoveries <= a.restarts);
	/* sigma's paths: in-job on the job's spares, tier 1 almost always */
	assert_true(a.injob_restarts > 0 && a.fallbacks > 0);
	assert_int_equal(b.injob_restarts, 0);
	assert_true(a.buddy_losses < a.job_failures / 20);
	assert_true(a.failslow_lost_node_s < b.failslow_lost_node_s);
	assert_true(a.policy_calls > 0);
	assert_int_equal(b.policy_calls, 0);
}

static void test_deterministic(void **state)
{
	struct sim_params p = {.nodes = 4096,
			       .days = 20,
			       .job_nodes = 512,
			       .spares = 64,
			       .seed = 3,
			       .sigma = true};
	char err[256];

	load_shipped();
	assert_int_equal(sim_run(&trace, &p, &a, err, sizeof(err)), 0);
	assert_int_equal(sim_run(&trace, &p, &b, err, sizeof(err)), 0);
	assert_int_equal(a.events, b.events);
	assert_true(a.useful_node_s == b.useful_node_s);
	assert_memory_equal(a.hist, b.hist, sizeof(a.hist));
	assert_int_equal(a.jobs, 7); /* (4096 - 64) / 512 */
	p.seed = 4;
	assert_int_equal(sim_run(&trace, &p, &b, err, sizeof(err)), 0);
	assert_true(a.events != b.events || a.useful_node_s != b.useful_node_s);
}

static void test_max_restarts(void **state)
{
	struct sim_params p = {.nodes = 2048,
			       .days = 54,
			       .job_nodes = 2000,
			       .spares = 46,
			       .seed = 1,
			       .sigma = true};
	char err[256];

	load_shipped();
	trace.max_restarts = 5;
	assert_int_equal(sim_run(&trace, &p, &a, err, sizeof(err)), 0);
	assert_int_equal(a.give_ups, 1);
	assert_true(a.restarts <= 5);
	p.sigma = false;
	assert_int_equal(sim_run(&trace, &p, &b, err, sizeof(err)), 0);
	assert_int_equal(b.give_ups, 1);
}

static void test_errors(void **state)
{
	static const char *const bad[] = {
	    "nodes = 0\nkind = a:1:0\n",
	    "kind = a:1\n",
	    "kind = a:x:0\n",
	    "kind = a:1:2\n",
	    "bogus = 1\n",
	    "days = 54\n",
	    "repair_fail = 1\nkind = a:1:0\n",
	    "kind = a:1:0\ntier1_buddy_loss = 2\n",
	    "kind = a:1:0\ntier2_async = 2\n",
	    "kind = a:1:0\nfailslow_slowdown = 0.5\n",
	    "kind = a:1:0\nstate_bytes = 1e12\ntier2_async = 1\n",
	};
	static const char *const new_keys[] = {
	    "tier1_buddy_loss", "tier2_async", "failslow_slowdown"};
	struct sim_params p = {.nodes = 10,
			       .days = 1,
			       .job_nodes = 20,
			       .spares = 0,
			       .seed = 1,
			       .sigma = true};
	char path[] = "/tmp/test_sigmad_sim.XXXXXX", err[512];
	int fd;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		fd = mkstemp(path);
		assert_true(fd >= 0);
		assert_int_equal(write(fd, bad[i], strlen(bad[i])),
				 (ssize_t)strlen(bad[i]));
		close(fd);
		sim_trace_init(&trace);
		err[0] = '\0';
		assert_true(sim_trace_load(&trace, path, err, sizeof(err)) < 0);
		print_message("%s\n", err);
		assert_true(err[0] != '\0');
		/* a bad new key is named, with its line */
		if (i >= 7 && i < 10) {
			assert_non_null(strstr(err, ":2:"));
			assert_non_null(strstr(err, new_keys[i - 7]));
		}
		if (i == 10)
			assert_non_null(strstr(err, "tier2_write_bytes_s"));
		unlink(path);
		strcpy(path, "/tmp/test_sigmad_sim.XXXXXX");
	}
	load_shipped();
	assert_int_equal(sim_run(&trace, &p, &a, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "cannot hold"));
}

/* ---- scripted clusters ---------------------------------------------------- */

#define DAY 86400.0

/* 4-node jobs, no random incidents, nodes never back from repair */
static void small_trace(void)
{
	sim_trace_init(&trace);
	trace.nodes = 8;
	trace.days = 1;
	trace.job_nodes = 4;
	trace.nkinds = 1;
	strcpy(trace.kinds[0].name, "none");
	trace.kinds[0].count = 0;
	trace.repair_s = 1e9;
	trace.ckpt_interval_s = 1000;
	trace.ckpt_cost_s = 0;
	trace.sigma_detect_s = 10;
	trace.sigma_requeue_s = 20;
	trace.restart_s = 30;
	trace.baseline_detect_s = 10;
	trace.baseline_requeue_s = 20;
}

static double ett(const struct sim_result *r)
{
	return r->useful_node_s / r->job_node_s;
}

static void run_small(long nodes, long spares, bool sigma,
		      const struct sim_inject *in, size_t nin,
		      struct sim_result *r)
{
	struct sim_params p = {.nodes = nodes,
			       .days = 1,
			       .job_nodes = 4,
			       .spares = spares,
			       .seed = 1,
			       .sigma = sigma,
			       .inject = in,
			       .ninject = nin};
	char err[256] = "";

	assert_int_equal(sim_run(&trace, &p, r, err, sizeof(err)), 0);
	assert_int_equal(r->jobs, 1);
}

/* No failures: effective training time is 1 minus the stalls, exactly. */
static void test_tier1_stalls(void **state)
{
	struct sim_ckpt ck;

	small_trace();
	trace.tier1_interval_s = 59.5;
	trace.tier1_stall_s = 0.5;
	trace.ckpt_interval_s = 1785; /* every 30th tier-1 save */
	trace.ckpt_cost_s = 360;      /* a cycle of 30 x 60 + 360 s */
	sim_ckpt_init(&ck, &trace, true);
	assert_int_equal(ck.k, 30);
	assert_true(ck.cycle == 2160.0);
	run_small(4, 0, true, NULL, 0, &a);
	assert_int_equal(a.job_failures, 0);
	assert_true(fabs(ett(&a) - (1.0 - (30 * 0.5 + 360) / 2160.0)) < 1e-12);
	assert_true(fabs(ett(&a) - sim_ckpt_efficiency(&ck)) < 1e-12);
	/* the baseline has no tier 1: 40 cycles of 2145 s, 600 s more */
	run_small(4, 0, false, NULL, 0, &b);
	assert_true(fabs(ett(&b) - (40 * 1785.0 + 600) / DAY) < 1e-12);
	/* the tier-2 stall follows state size and bandwidth */
	trace.state_bytes = 240e9;
	trace.tier2_write_bytes_s = 1e9; /* 240 s more per tier-2 save */
	run_small(4, 0, true, NULL, 0, &a);
	assert_true(fabs(ett(&a) - 1785.0 / 2400.0) < 1e-12);
	trace.tier2_async = 1; /* only the fixed part stalls */
	run_small(4, 0, true, NULL, 0, &a);
	assert_true(fabs(ett(&a) - 1785.0 / 2160.0) < 1e-12);
}

/* Two failures in one tier-2 interval, then the same with tier 1. */
static void test_two_failures(void **state)
{
	static const struct sim_inject in[] = {
	    {.t = 500, .node = 0, .type = SIM_INJECT_FAIL},
	    {.t = 900, .node = 1, .type = SIM_INJECT_FAIL},
	};
	static const struct sim_inject in1[] = {
	    {.t = 550, .node = 0, .type = SIM_INJECT_FAIL},
	    {.t = 865, .node = 1, .type = SIM_INJECT_FAIL},
	};

	small_trace();
	/* baseline: both runs lost whole; back at 560 and 960 */
	run_small(6, 0, false, in, 2, &b);
	assert_int_equal(b.job_failures, 2);
	assert_int_equal(b.recoveries, 2);
	assert_true(fabs(b.recovery_sum_s - 120.0) < 1e-9);
	assert_true(fabs(ett(&b) - (DAY - 960.0) / DAY) < 1e-12);
	/* sigma, tier 1 every 100 s: 500 kept, back at 615; 200 kept */
	trace.tier1_interval_s = 100;
	trace.tier1_restore_s = 5;
	run_small(6, 2, true, in1, 2, &a);
	assert_int_equal(a.job_failures, 2);
	assert_int_equal(a.spares_used, 2);
	assert_true(fabs(ett(&a) - (700.0 + DAY - 930.0) / DAY) < 1e-12);
	/* sigma without tier 1 loses what the baseline does */
	{
		struct sim_params p = {.nodes = 6,
				       .days = 1,
				       .job_nodes = 4,
				       .spares = 2,
				       .seed = 1,
				       .sigma = true,
				       .no_tier1 = true,
				       .inject = in1,
				       .ninject = 2};
		char err[256];

		assert_int_equal(sim_run(&trace, &p, &b, err, sizeof(err)), 0);
		assert_true(fabs(ett(&b) - (DAY - 925.0) / DAY) < 1e-12);
	}
}

/* The first failure takes the in-job path, the second falls back. */
static void test_injob_then_pool(void **state)
{
	static const struct sim_inject in[] = {
	    {.t = 1000, .node = 0, .type = SIM_INJECT_FAIL},
	    {.t = 5000, .node = 1, .type = SIM_INJECT_FAIL},
	};

	small_trace();
	trace.tier1_interval_s = 100;
	trace.tier1_restore_s = 5;
	trace.inalloc_spares = 1;
	trace.injob_detect_s = 3;
	trace.injob_relaunch_s = 4;
	trace.injob_fallback_s = 50;
	run_small(6, 1, true, in, 2, &a);
	assert_int_equal(a.injob_restarts, 1);
	assert_int_equal(a.fallbacks, 1);
	assert_int_equal(a.pool_requeues, 1);
	assert_int_equal(a.spares_used, 1);
	assert_true(fabs(a.recovery_max_s - 115.0) < 1e-9); /* 50+10+20+30+5 */
	assert_true(fabs(a.recovery_sum_s - 127.0) < 1e-9); /* and 3+4+5 */
	assert_true(fabs(ett(&a) - (1000.0 + 3900.0 + DAY - 5115.0) / DAY) <
		    1e-12);
	/* the baseline has no spares of the job: requeues only */
	run_small(6, 1, false, in, 2, &b);
	assert_int_equal(b.injob_restarts, 0);
	assert_int_equal(b.pool_requeues, 2);
	/* no in-allocation spare at all: the pool path, with no fallback */
	trace.inalloc_spares = 0;
	run_small(6, 1, true, in, 1, &a);
	assert_int_equal(a.injob_restarts, 0);
	assert_int_equal(a.fallbacks, 0);
	assert_true(fabs(a.recovery_max_s - 65.0) < 1e-9);
}

/* A failure that takes the buddy's replica too restores from tier 2. */
static void test_buddy_loss(void **state)
{
	static const struct sim_inject in[] = {
	    {.t = 2550, .node = 0, .type = SIM_INJECT_FAIL},
	};

	small_trace();
	trace.tier1_interval_s = 100; /* tier 2 every 10th save */
	trace.tier1_restore_s = 5;
	trace.state_bytes = 1e9;
	trace.tier2_read_bytes_s = 1e8; /* a 10 s restore */
	trace.tier1_buddy_loss = 0.0;
	run_small(6, 2, true, in, 1, &a);
	assert_int_equal(a.buddy_losses, 0);
	assert_true(fabs(ett(&a) - (2500.0 + DAY - 2615.0) / DAY) < 1e-12);
	trace.tier1_buddy_loss = 1.0;
	run_small(6, 2, true, in, 1, &a);
	assert_int_equal(a.buddy_losses, 1);
	assert_true(fabs(a.recovery_max_s - 70.0) < 1e-9);
	assert_true(fabs(ett(&a) - (2000.0 + DAY - 2620.0) / DAY) < 1e-12);
}

/* One 20-minute episode (and one inside it, which costs nothing more). */
static void test_failslow(void **state)
{
	static const struct sim_inject in[] = {
	    {.t = 1000, .node = 2, .type = SIM_INJECT_SLOW, .dur_s = 1200},
	    {.t = 1500, .node = 3, .type = SIM_INJECT_SLOW, .dur_s = 300},
	};
	double s = 1.34, sm = 1.0 + 0.34 * 0.4;
	double lost_mit = 60 * (1 - 1 / s) + 1140 * (1 - 1 / sm);
	double lost = 1200 * (1 - 1 / s);

	small_trace();
	run_small(4, 0, true, in, 2, &a);
	assert_int_equal(a.failslow_episodes, 1);
	assert_true(fabs(ett(&a) - (1.0 - lost_mit / DAY)) < 1e-12);
	run_small(4, 0, false, in, 2, &b);
	assert_true(fabs(ett(&b) - (1.0 - lost / DAY)) < 1e-12);
	assert_true(ett(&a) > ett(&b));
	/* no slowdown, no loss */
	trace.failslow_slowdown = 1.0;
	run_small(4, 0, false, in, 2, &b);
	assert_true(ett(&b) == 1.0);
}

/* A trace without the new keys keeps one tier of fixed cost. */
static void test_old_meaning(void **state)
{
	struct sim_ckpt ck;

	sim_trace_init(&trace);
	sim_ckpt_init(&ck, &trace, true);
	assert_false(ck.tier1);
	assert_int_equal(ck.k, 1);
	assert_true(ck.seg == trace.ckpt_interval_s);
	assert_true(ck.seg_stall == trace.ckpt_cost_s);
	assert_true(ck.restore1 == 0.0 && ck.restore2 == 0.0);
	assert_int_equal(trace.inalloc_spares, 0);
	assert_true(trace.failslow_count == 0.0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_shipped_trace),
	    cmocka_unit_test(test_sigma_vs_baseline),
	    cmocka_unit_test(test_deterministic),
	    cmocka_unit_test(test_max_restarts),
	    cmocka_unit_test(test_errors),
	    cmocka_unit_test(test_tier1_stalls),
	    cmocka_unit_test(test_two_failures),
	    cmocka_unit_test(test_injob_then_pool),
	    cmocka_unit_test(test_buddy_loss),
	    cmocka_unit_test(test_failslow),
	    cmocka_unit_test(test_old_meaning),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
