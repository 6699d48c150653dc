/*
 * sigma-sim - replay a failure trace over a simulated cluster under sigma's
 * policy, sigma without its node-local tier, and plain Slurm requeue, and
 * report effective training time, recovery times, the paths taken and the
 * policy core's decision time. See sigma-sim(1) and docs/sigma-sim.md.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "config.h"
#include "sigma.h"
#include "sim.h"

enum {
	OPT_NODES = 256,
	OPT_DAYS,
	OPT_JOB_NODES,
	OPT_SPARES,
	OPT_SEED,
	OPT_POLICY,
	OPT_JSON,
	OPT_CALIBRATION,
	OPT_HELP,
	OPT_VERSION
};

static const struct option sim_options[] = {
    {"trace", required_argument, NULL, 't'},
    {"nodes", required_argument, NULL, OPT_NODES},
    {"days", required_argument, NULL, OPT_DAYS},
    {"job-nodes", required_argument, NULL, OPT_JOB_NODES},
    {"spares", required_argument, NULL, OPT_SPARES},
    {"seed", required_argument, NULL, OPT_SEED},
    {"policy", required_argument, NULL, OPT_POLICY},
    {"json", no_argument, NULL, OPT_JSON},
    {"calibration", no_argument, NULL, OPT_CALIBRATION},
    {"help", no_argument, NULL, OPT_HELP},
    {"version", no_argument, NULL, OPT_VERSION},
    {NULL, 0, NULL, 0},
};

static void sim_usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: sigma-sim --trace FILE [--nodes N] [--days D] [--job-nodes N]\n"
	    "                 [--spares N] [--seed N] [--json] [--calibration]\n"
	    "                 [--policy sigma|baseline|both|sigma-no-tier1|all]\n"
	    "Replays the failure trace FILE under sigma's policy, sigma without tier 1\n"
	    "and plain Slurm requeue (both: sigma and baseline; all: the three).\n");
}

static long peak_kib(void)
{
	struct rusage ru;

	return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss : -1;
}

static double per_call_ns(const struct sim_result *r)
{
	return r->policy_calls ? r->policy_s * 1e9 / (double)r->policy_calls
			       : 0.0;
}

/* the paths taken, fail-slow and the policy's time: added to the object */
static int sim_json_more(json_t *o, const struct sim_result *r)
{
	json_t *m = json_pack(
	    "{s:I, s:I, s:I, s:I, s:I, s:f, s:f, s:f, s:f, s:I, s:f, s:f}",
	    "injob_restarts", (json_int_t)r->injob_restarts, "pool_requeues",
	    (json_int_t)r->pool_requeues, "fallbacks",
	    (json_int_t)r->fallbacks, "buddy_losses",
	    (json_int_t)r->buddy_losses, "failslow_episodes",
	    (json_int_t)r->failslow_episodes, "failslow_s", r->failslow_s,
	    "failslow_lost_node_s", r->failslow_lost_node_s, "rollback_node_s",
	    r->rollback_node_s, "down_node_s", r->down_node_s, "policy_calls",
	    (json_int_t)r->policy_calls, "policy_ns_per_call",
	    per_call_ns(r), "policy_ns_per_event",
	    r->events ? r->policy_s * 1e9 / (double)r->events : 0.0);

	if (!m || json_object_update(o, m)) {
		json_decref(m);
		return -ENOMEM;
	}
	json_decref(m);
	return 0;
}

/* one run as one JSON line (docs/sigma-sim.md); 10 digits are plenty */
static int sim_print_json(const char *policy, const struct sim_params *p,
			  const struct sim_result *r, double ett, double eps,
			  double mean)
{
	json_t *o = json_pack(
	    "{s:s, s:I, s:f, s:I, s:I, s:I, s:I, s:I, s:f, s:I, s:I, s:f, s:I,"
	    " s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:f, s:f, s:f,"
	    " s:f}",
	    "policy", policy, "nodes", (json_int_t)p->nodes, "days", p->days,
	    "job_nodes", (json_int_t)p->job_nodes, "jobs", (json_int_t)r->jobs,
	    "spares", (json_int_t)(p->sigma ? p->spares : 0), "seed",
	    (json_int_t)p->seed, "events", (json_int_t)r->events, "wall_s",
	    r->wall_s, "events_per_s", (json_int_t)llround(eps), "peak_kib",
	    (json_int_t)peak_kib(), "effective_training_time", ett, "incidents",
	    (json_int_t)r->incidents, "job_failures",
	    (json_int_t)r->job_failures, "warnings_moved",
	    (json_int_t)r->warnings_moved, "warnings_watched",
	    (json_int_t)r->warnings_watched, "restarts",
	    (json_int_t)r->restarts, "give_ups", (json_int_t)r->give_ups,
	    "spares_used", (json_int_t)r->spares_used, "min_pool",
	    (json_int_t)r->min_pool, "recoveries", (json_int_t)r->recoveries,
	    "recovery_mean_s", mean, "recovery_p50_s",
	    sim_result_quantile(r, 0.5), "recovery_p90_s",
	    sim_result_quantile(r, 0.9), "recovery_p99_s",
	    sim_result_quantile(r, 0.99), "recovery_max_s", r->recovery_max_s);
	int rc = 0;

	if (o)
		rc = sim_json_more(o, r);
	if (!o || rc || json_dumpf(o, stdout, JSON_COMPACT | JSON_REAL_PRECISION(10)))
		rc = -EIO;
	json_decref(o);
	if (!rc)
		putchar('\n');
	return rc;
}

static int sim_print(const char *policy, const struct sim_params *p,
		     const struct sim_result *r, bool json)
{
	double ett = r->job_node_s > 0 ? r->useful_node_s / r->job_node_s : 0.0;
	double eps = r->wall_s > 0 ? (double)r->events / r->wall_s : 0.0;
	double mean =
	    r->recoveries ? r->recovery_sum_s / (double)r->recoveries : 0.0;

	if (json)
		return sim_print_json(policy, p, r, ett, eps, mean);
	printf(
	    "%-8s effective training time %.4f  (%llu incidents, %llu job failures, "
	    "%llu moved on warning, %llu restarts, %llu given up)\n",
	    policy, ett, (unsigned long long)r->incidents,
	    (unsigned long long)r->job_failures,
	    (unsigned long long)r->warnings_moved,
	    (unsigned long long)r->restarts, (unsigned long long)r->give_ups);
	printf(
	    "%-8s recovery s: mean %.0f p50 %.0f p90 %.0f p99 %.0f max %.0f; "
	    "spares used %llu (pool low %ld)\n",
	    "", mean, sim_result_quantile(r, 0.5), sim_result_quantile(r, 0.9),
	    sim_result_quantile(r, 0.99), r->recovery_max_s,
	    (unsigned long long)r->spares_used, r->min_pool);
	printf(
	    "%-8s paths: %llu in-job, %llu requeues (%llu fallbacks), %llu tier-1 losses; "
	    "fail-slow %llu episodes, %.0f node-s lost\n",
	    "", (unsigned long long)r->injob_restarts,
	    (unsigned long long)r->pool_requeues,
	    (unsigned long long)r->fallbacks,
	    (unsigned long long)r->buddy_losses,
	    (unsigned long long)r->failslow_episodes, r->failslow_lost_node_s);
	if (r->job_node_s > 0)
		printf("%-8s lost: rollback %.4f, down %.4f, fail-slow %.4f, "
		       "stalls %.4f\n",
		       "", r->rollback_node_s / r->job_node_s,
		       r->down_node_s / r->job_node_s,
		       r->failslow_lost_node_s / r->job_node_s,
		       1.0 - ett -
			   (r->rollback_node_s + r->down_node_s +
			    r->failslow_lost_node_s) /
			       r->job_node_s);
	printf("%-8s %llu events in %.3f s: %.0f events/s; policy core %.0f ns "
	       "per call (%llu calls)\n",
	       "", (unsigned long long)r->events, r->wall_s, eps,
	       per_call_ns(r), (unsigned long long)r->policy_calls);
	return 0;
}

/* run k (0 sigma, 1 baseline, 2 sigma-no-tier1) under --policy choice */
static const char *const sim_policy_names[] = {"sigma", "baseline",
					       "sigma-no-tier1"};

static bool sim_policy_wanted(int choice, int k)
{
	switch (choice) {
	case 0:
	case 1:
		return k == choice;
	case 2:
		return k < 2;
	case 3:
		return k == 2;
	default:
		return true;
	}
}

static int sim_long_opt(const char *name, const char *arg, long min, long max,
			long *out)
{
	if (sigma_parse_long(arg, min, max, out)) {
		fprintf(
		    stderr,
		    "sigma-sim: --%s: '%s' is not a whole number in [%ld, %ld]\n",
		    name, arg, min, max);
		return -EINVAL;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const char *const policies[] = {
	    "sigma", "baseline", "both", "sigma-no-tier1", "all", NULL};
	struct sim_trace *trace = NULL;
	struct sim_params p = {0};
	struct sim_result *r = NULL;
	const char *trace_path = NULL;
	long nodes = -1, job_nodes = -1, spares = -1, seed = -1;
	double days = -1.0;
	int policy = 2, c, rc = 64;
	bool json = false, calibration = false;
	char err[512];

	sigma_log_init("sigma-sim", SIGMA_LOG_WARN);
	while ((c = getopt_long(argc, argv, "t:", sim_options, NULL)) != -1) {
		switch (c) {
		case 't':
			trace_path = optarg;
			break;
		case OPT_NODES:
			if (sim_long_opt("nodes", optarg, 1, 100000000, &nodes))
				return 64;
			break;
		case OPT_DAYS:
			if (sigma_parse_double(optarg, 1e-6, 1e6, &days)) {
				fprintf(
				    stderr,
				    "sigma-sim: --days: '%s' is not a number in (0, 1e6]\n",
				    optarg);
				return 64;
			}
			break;
		case OPT_JOB_NODES:
			if (sim_long_opt("job-nodes", optarg, 1, 100000000,
					 &job_nodes))
				return 64;
			break;
		case OPT_SPARES:
			if (sim_long_opt("spares", optarg, 0, 100000000,
					 &spares))
				return 64;
			break;
		case OPT_SEED:
			if (sim_long_opt("seed", optarg, 0, __LONG_MAX__,
					 &seed))
				return 64;
			break;
		case OPT_POLICY:
			policy = sigma_parse_enum(optarg, policies);
			if (policy < 0) {
				fprintf(
				    stderr,
				    "sigma-sim: --policy: '%s' is not sigma, baseline, both, sigma-no-tier1 or all\n",
				    optarg);
				return 64;
			}
			break;
		case OPT_JSON:
			json = true;
			break;
		case OPT_CALIBRATION:
			calibration = true;
			break;
		case OPT_HELP:
			sim_usage(stdout);
			return 0;
		case OPT_VERSION:
			printf("sigma-sim %s (git %s)\n", PACKAGE_VERSION,
			       SIGMA_GIT_REVISION);
			return 0;
		default:
			sim_usage(stderr);
			return 64;
		}
	}
	if (!trace_path || optind != argc) {
		sim_usage(stderr);
		return 64;
	}
	trace = malloc(sizeof(*trace));
	r = malloc(sizeof(*r));
	if (!trace || !r) {
		fprintf(stderr, "sigma-sim: out of memory\n");
		rc = 70;
		goto out;
	}
	sim_trace_init(trace);
	if (sim_trace_load(trace, trace_path, err, sizeof(err))) {
		fprintf(stderr, "sigma-sim: %s\n", err);
		rc = 65;
		goto out;
	}
	if (calibration) {
		sim_calib_print(trace, stdout);
		rc = 0;
		goto out;
	}
	p.nodes = nodes > 0	       ? nodes
		  : trace->sim_nodes > 0 ? trace->sim_nodes
					 : trace->nodes;
	p.days = days > 0 ? days : trace->days;
	p.job_nodes = job_nodes > 0 ? job_nodes : trace->job_nodes;
	/* spares scale with the cluster unless given */
	p.spares = spares >= 0
		       ? spares
		       : (long)((double)trace->spares * (double)p.nodes /
				    (double)trace->nodes +
				0.5);
	p.seed = seed >= 0 ? (uint64_t)seed : trace->seed;
	if (!json)
		printf(
		    "sigma-sim: trace %s: %ld nodes, %g days, %ld-node jobs, %ld spares, seed %llu\n",
		    trace->name, p.nodes, p.days, p.job_nodes, p.spares,
		    (unsigned long long)p.seed);
	for (int k = 0; k < 3; k++) {
		if (!sim_policy_wanted(policy, k))
			continue;
		p.sigma = k != 1;
		p.no_tier1 = k == 2;
		if (sim_run(trace, &p, r, err, sizeof(err))) {
			fprintf(stderr, "sigma-sim: %s\n", err);
			rc = 70;
			goto out;
		}
		if (sim_print(sim_policy_names[k], &p, r, json)) {
			fprintf(stderr,
				"sigma-sim: --json: cannot write the result\n");
			rc = 70;
			goto out;
		}
	}
	if (!json)
		printf("peak memory %ld KiB\n", peak_kib());
	rc = 0;
out:
	free(trace);
	free(r);
	return rc;
}
