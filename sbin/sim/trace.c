/*
 * trace.c - sigma-sim trace files: key=value lines (the shared parser), one
 * "kind = NAME:COUNT:WARN_FRACTION" line per failure kind.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sigma.h"
#include "sim.h"

void sim_trace_init(struct sim_trace *t)
{
	memset(t, 0, sizeof(*t));
	sigma_strlcpy(t->name, "unnamed", sizeof(t->name));
	t->nodes = 2048;
	t->days = 54.0;
	t->job_nodes = 2000;
	t->spares = 32;
	t->ckpt_interval_s = 1800.0;
	t->ckpt_cost_s = 30.0;
	t->restart_s = 300.0;
	t->warn_lead_s = 1800.0;
	t->repair_s = 86400.0;
	t->repair_fail = 0.1;
	t->sigma_detect_s = 60.0;
	t->sigma_requeue_s = 2.0;
	t->baseline_detect_s = 600.0;
	t->baseline_requeue_s = 130.0;
	t->max_restarts = 1000000;
	t->job_spares = 1000000;
	t->seed = 1;
	/*
	 * The mechanisms below default to off (or to no cost), so that a
	 * trace without their keys keeps its old meaning: one checkpoint
	 * tier of fixed cost, requeue only, no fail-slow episodes.
	 */
	t->injob_detect_s = 6.2;   /* bench/restart-paths, node crash */
	t->injob_relaunch_s = 0.1; /* bench/restart-paths, node crash */
	t->injob_fallback_s = 25.6; /* 53.2 - 27.6 of the pool path there */
	t->failslow_comm_share = 0.40; /* Greyhound (ATC'25) */
	t->failslow_comm_mean_s = 1440.0;
	t->failslow_comp_mean_s = 600.0;
	t->failslow_slowdown = 1.34;
	t->failslow_mitigation = 0.60;
	t->failslow_detect_s = 60.0;
	t->step_s = 0.4;
	t->slurmd_timeout_s = 15.0; /* the testbed's */
	t->local_read_bytes_s = 2e9;
}

struct trace_num {
	const char *key;
	size_t off;
	bool is_long;
	double min, max;
};

#define TN_D(k, lo, hi)                                                        \
	{                                                                      \
#k, offsetof(struct sim_trace, k), false, lo, hi               \
	}
#define TN_L(k, lo, hi)                                                        \
	{                                                                      \
#k, offsetof(struct sim_trace, k), true, lo, hi                \
	}

static const struct trace_num trace_nums[] = {
    TN_L(nodes, 1, 1e9),
    TN_D(days, 1e-6, 1e6),
    TN_L(job_nodes, 1, 1e9),
    TN_L(spares, 0, 1e9),
    TN_D(ckpt_interval_s, 1, 1e9),
    TN_D(ckpt_cost_s, 0, 1e9),
    TN_D(restart_s, 0, 1e9),
    TN_D(warn_lead_s, 0, 1e9),
    TN_D(repair_s, 1, 1e9),
    TN_D(repair_fail, 0, 0.99),
    TN_D(sigma_detect_s, 0, 1e9),
    TN_D(sigma_requeue_s, 0, 1e9),
    TN_D(baseline_detect_s, 0, 1e9),
    TN_D(baseline_requeue_s, 0, 1e9),
    TN_L(max_restarts, 0, 1e9),
    TN_L(job_spares, 0, 1e9),
    TN_L(sim_nodes, 0, 1e9),
    TN_D(tier1_interval_s, 0, 1e9),
    TN_D(tier1_stall_s, 0, 1e9),
    TN_D(tier1_restore_s, 0, 1e9),
    TN_D(tier1_buddy_loss, 0, 1),
    TN_D(state_bytes, 0, 1e18),
    TN_D(tier2_write_bytes_s, 0, 1e15),
    TN_D(tier2_read_bytes_s, 0, 1e15),
    TN_L(tier2_async, 0, 1),
    TN_L(inalloc_spares, 0, 1e6),
    TN_D(injob_detect_s, 0, 1e9),
    TN_D(injob_relaunch_s, 0, 1e9),
    TN_D(injob_fallback_s, 0, 1e9),
    TN_D(failslow_count, 0, 1e12),
    TN_D(failslow_comm_share, 0, 1),
    TN_D(failslow_comm_mean_s, 0, 1e9),
    TN_D(failslow_comp_mean_s, 0, 1e9),
    TN_D(failslow_slowdown, 1, 1e3),
    TN_D(failslow_mitigation, 0, 1),
    TN_D(failslow_detect_s, 0, 1e9),
    TN_D(step_s, 0, 1e6),
    TN_D(launch_s, 0, 1e9),
    TN_D(slurmd_timeout_s, 0, 1e6),
    TN_D(local_read_bytes_s, 1, 1e15),
};

static int trace_kind(struct sim_trace *t, const char *value, char *err,
		      size_t errlen)
{
	char buf[SIGMA_KV_MAX_VALUE + 1], *name, *count, *warn;
	struct sim_kind *k;

	if (t->nkinds >= SIM_MAX_KINDS)
		return sigma_set_err(err, errlen, E2BIG, "more than %d kinds",
				     SIM_MAX_KINDS);
	sigma_strlcpy(buf, value, sizeof(buf));
	name = buf;
	count = strchr(name, ':');
	warn = count ? strchr(count + 1, ':') : NULL;
	if (!count || !warn)
		return sigma_set_err(
		    err, errlen, EINVAL,
		    "kind: '%s' is not NAME:COUNT:WARN_FRACTION", value);
	*count++ = '\0';
	*warn++ = '\0';
	k = &t->kinds[t->nkinds];
	if (!*name ||
	    sigma_strlcpy(k->name, name, sizeof(k->name)) >= sizeof(k->name))
		return sigma_set_err(err, errlen, EINVAL, "kind: bad name '%s'",
				     name);
	if (sigma_parse_double(count, 0.0, 1e12, &k->count))
		return sigma_set_err(err, errlen, EINVAL,
				     "kind %s: count '%s' is not a number >= 0",
				     name, count);
	if (sigma_parse_double(warn, 0.0, 1.0, &k->warn_fraction))
		return sigma_set_err(
		    err, errlen, EINVAL,
		    "kind %s: warn fraction '%s' is not in [0, 1]", name, warn);
	t->nkinds++;
	return 0;
}

static int trace_key(const char *key, const char *value, void *arg, char *err,
		     size_t errlen)
{
	struct sim_trace *t = arg;

	if (!strcmp(key, "kind"))
		return trace_kind(t, value, err, errlen);
	if (!strcmp(key, "name"))
		return sigma_strlcpy(t->name, value, sizeof(t->name)) <
			       sizeof(t->name)
			   ? 0
			   : sigma_set_err(err, errlen, ENAMETOOLONG,
					   "name: too long");
	if (!strcmp(key, "source"))
		return sigma_strlcpy(t->source, value, sizeof(t->source)) <
			       sizeof(t->source)
			   ? 0
			   : sigma_set_err(err, errlen, ENAMETOOLONG,
					   "source: too long");
	if (!strcmp(key, "seed")) {
		long v;

		if (sigma_parse_long(value, 0, __LONG_MAX__, &v))
			return sigma_set_err(err, errlen, EINVAL,
					     "seed: '%s' is not a number",
					     value);
		t->seed = (uint64_t)v;
		return 0;
	}
	for (size_t i = 0; i < sizeof(trace_nums) / sizeof(trace_nums[0]);
	     i++) {
		const struct trace_num *n = &trace_nums[i];
		char *field = (char *)t + n->off;

		if (strcmp(key, n->key))
			continue;
		if (n->is_long) {
			long v;

			if (sigma_parse_long(value, (long)n->min, (long)n->max,
					     &v))
				return sigma_set_err(
				    err, errlen, EINVAL,
				    "%s: '%s' is not a whole number in [%.0f, %.0f]",
				    key, value, n->min, n->max);
			memcpy(field, &v, sizeof(v));
		} else {
			double v;

			if (sigma_parse_double(value, n->min, n->max, &v))
				return sigma_set_err(
				    err, errlen, EINVAL,
				    "%s: '%s' is not a number in [%g, %g]", key,
				    value, n->min, n->max);
			memcpy(field, &v, sizeof(v));
		}
		return 0;
	}
	return sigma_set_err(err, errlen, EINVAL, "unknown key '%s'", key);
}

int sim_trace_load(struct sim_trace *t, const char *path, char *err,
		   size_t errlen)
{
	int rc = sigma_kv_parse_file(path, trace_key, t, err, errlen);

	if (!rc && t->nkinds == 0)
		rc = sigma_set_err(err, errlen, EINVAL, "%s: no 'kind' lines",
				   path);
	if (!rc && t->tier2_async && t->state_bytes > 0.0 &&
	    t->tier2_write_bytes_s <= 0.0)
		rc = sigma_set_err(
		    err, errlen, EINVAL,
		    "%s: tier2_async with state_bytes needs tier2_write_bytes_s",
		    path);
	return rc;
}
