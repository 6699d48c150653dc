/*
 * test_sigmad_sim.c - sigma-sim's engine and trace files: determinism, the
 * same incidents for both policies, sigma ahead of the baseline on the
 * shipped trace, accounting that adds up, and trace errors.
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
			       .spares = 48,
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
			       .spares = 48,
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
	};
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
		unlink(path);
		strcpy(path, "/tmp/test_sigmad_sim.XXXXXX");
	}
	load_shipped();
	assert_int_equal(sim_run(&trace, &p, &a, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "cannot hold"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_shipped_trace),
	    cmocka_unit_test(test_sigma_vs_baseline),
	    cmocka_unit_test(test_deterministic),
	    cmocka_unit_test(test_max_restarts),
	    cmocka_unit_test(test_errors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
