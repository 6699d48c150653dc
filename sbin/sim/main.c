/*
 * sigma-sim - replay a failure trace over a simulated cluster under sigma's
 * policy and under plain Slurm requeue, and report effective training time,
 * recovery times and spares used. See sigma-sim(1) and docs/sigma-sim.md.
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
    {"help", no_argument, NULL, OPT_HELP},
    {"version", no_argument, NULL, OPT_VERSION},
    {NULL, 0, NULL, 0},
};

static void sim_usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: sigma-sim --trace FILE [--nodes N] [--days D] [--job-nodes N]\n"
	    "                 [--spares N] [--seed N] [--policy sigma|baseline|both] [--json]\n"
	    "Replays the failure trace FILE under sigma's policy and plain Slurm requeue.\n");
}

static long peak_kib(void)
{
	struct rusage ru;

	return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss : -1;
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

	if (!o || json_dumpf(o, stdout, JSON_COMPACT | JSON_REAL_PRECISION(10)))
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
	printf("%-8s %llu events in %.3f s: %.0f events/s\n", "",
	       (unsigned long long)r->events, r->wall_s, eps);
	return 0;
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
	static const char *const policies[] = {"sigma", "baseline", "both",
					       NULL};
	struct sim_trace *trace = NULL;
	struct sim_params p = {0};
	struct sim_result *r = NULL;
	const char *trace_path = NULL;
	long nodes = -1, job_nodes = -1, spares = -1, seed = -1;
	double days = -1.0;
	int policy = 2, c, rc = 64;
	bool json = false;
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
				    "sigma-sim: --policy: '%s' is not sigma, baseline or both\n",
				    optarg);
				return 64;
			}
			break;
		case OPT_JSON:
			json = true;
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
	p.nodes = nodes > 0 ? nodes : trace->nodes;
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
	for (int k = 0; k < 2; k++) {
		if ((k == 0 && policy == 1) || (k == 1 && policy == 0))
			continue;
		p.sigma = k == 0;
		if (sim_run(trace, &p, r, err, sizeof(err))) {
			fprintf(stderr, "sigma-sim: %s\n", err);
			rc = 70;
			goto out;
		}
		if (sim_print(p.sigma ? "sigma" : "baseline", &p, r, json)) {
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
