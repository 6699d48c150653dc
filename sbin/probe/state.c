/*
 * state.c - counters kept between runs, so that a counter becomes a rate:
 * state_dir/<node>.state holds the time and every ecc_corrected count of a
 * baseline run. A rate is reported once the baseline is at least
 * RATE_MIN_S old; the baseline moves on after RATE_WINDOW_S, so a rate
 * always spans a few minutes and frequent health checks do not make it
 * noisy. A counter that went down (driver reload, reboot) starts a new
 * baseline.
 *
 * state_dir/<node>.warn holds how many probes in a row found a warning, so
 * that one noisy reading does not drain a node (warn_confirm).
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sigma.h"
#include "probe.h"

#define RATE_MIN_S    60
#define RATE_WINDOW_S 600

struct state_base {
	double time_s;
	char comp[PROBE_MAX_GPUS + 1][16];
	double count[PROBE_MAX_GPUS + 1];
	int n;
};

static int state_kv(const char *key, const char *value, void *arg, char *err,
		    size_t errlen)
{
	struct state_base *b = arg;
	const char *dot = strchr(key, '.');
	double v;

	if (sigma_parse_double(value, 0, 1e18, &v) < 0)
		return sigma_set_err(err, errlen, EINVAL, "bad value of %s",
				     key);
	if (!strcmp(key, "time_s")) {
		b->time_s = v;
		return 0;
	}
	if (!dot || strcmp(dot + 1, "ecc_corrected") ||
	    (size_t)(dot - key) >= sizeof(b->comp[0]) || b->n > PROBE_MAX_GPUS)
		return 0; /* an older or newer file's key: ignore */
	memcpy(b->comp[b->n], key, (size_t)(dot - key));
	b->comp[b->n][dot - key] = '\0';
	b->count[b->n++] = v;
	return 0;
}

static int state_write(const char *path, const struct probe_report *rep,
		       double now_s)
{
	char buf[8192];
	size_t used = 0;

	used += (size_t)snprintf(
	    buf, sizeof(buf),
	    "# sigma-probe counters (rates), do not edit\ntime_s=%.0f\n",
	    now_s);
	for (int i = 0; i < rep->n && used < sizeof(buf); i++)
		if (!strcmp(rep->r[i].key, "ecc_corrected") &&
		    !rep->r[i].injected)
			used +=
			    (size_t)snprintf(buf + used, sizeof(buf) - used,
					     "%s.ecc_corrected=%.0f\n",
					     rep->r[i].comp, rep->r[i].value);
	if (used >= sizeof(buf))
		return -ENOSPC;
	return sigma_file_write_atomic(path, buf, used, 0644);
}

int probe_rates(const struct probe_conf *conf, struct probe_report *rep)
{
	char path[PATH_MAX + PROBE_NODE_MAX + 8], err[256];
	struct state_base base;
	double now_s = (double)sigma_wall_ms() / 1000.0, warn, fail;
	bool any = false, rebase = false;
	const char *unit;
	int sense, rc;

	for (int i = 0; i < rep->n; i++)
		any |= !strcmp(rep->r[i].key, "ecc_corrected");
	if (!any || !conf->state_dir[0])
		return 0;
	if (sigma_snprintf(path, sizeof(path), "%s/%s.state", conf->state_dir,
			   rep->node) < 0)
		return -ENAMETOOLONG;
	memset(&base, 0, sizeof(base));
	rc = sigma_kv_parse_file(path, state_kv, &base, err, sizeof(err));
	if (rc < 0 || base.time_s <= 0 || now_s < base.time_s) {
		rebase = true;
		goto out_write;
	}
	probe_thresholds(conf, "ecc_corrected_rate", &sense, &warn, &fail,
			 &unit);
	for (int i = 0; i < rep->n; i++) {
		struct probe_reading *r = &rep->r[i];
		double dt = now_s - base.time_s;

		if (strcmp(r->key, "ecc_corrected") || r->injected)
			continue;
		for (int j = 0; j < base.n; j++) {
			if (strcmp(base.comp[j], r->comp))
				continue;
			if (r->value < base.count[j])
				rebase = true; /* counter reset */
			else if (dt >= RATE_MIN_S &&
				 !probe_find(rep, r->comp,
					     "ecc_corrected_rate"))
				probe_add(rep, r->comp, "ecc_corrected_rate",
					  (r->value - base.count[j]) * 3600.0 /
					      dt,
					  sense, warn, fail, unit);
		}
	}
	if (now_s - base.time_s >= RATE_WINDOW_S)
		rebase = true;
out_write:
	if (!rebase)
		return 0;
	if (sigma_mkdir_owned(conf->state_dir, 0755, NULL, 0) < 0)
		return 0; /* no state (not root, read-only): no rates */
	rc = state_write(path, rep, now_s);
	if (rc < 0)
		sigma_debug("cannot write %s: %s", path, strerror(-rc));
	return 0;
}

/* ---- the run of consecutive warnings -------------------------------------- */

struct state_streak {
	long streak;
};

static int streak_kv(const char *key, const char *value, void *arg, char *err,
		     size_t errlen)
{
	struct state_streak *st = arg;

	if (strcmp(key, "streak"))
		return 0;
	if (sigma_parse_long(value, 0, 1000000, &st->streak) < 0)
		return sigma_set_err(err, errlen, EINVAL, "bad streak");
	return 0;
}

int probe_warn_streak(const struct probe_conf *conf,
		      const struct probe_report *rep)
{
	char path[PATH_MAX + PROBE_NODE_MAX + 8], err[256], buf[128];
	struct state_streak st = {0};
	int n;

	if (!conf->state_dir[0] ||
	    sigma_snprintf(path, sizeof(path), "%s/%s.warn", conf->state_dir,
			   rep->node) < 0)
		return (int)conf->warn_confirm;
	/* a missing or damaged file is a run of none */
	if (sigma_kv_parse_file(path, streak_kv, &st, err, sizeof(err)) < 0)
		st.streak = 0;
	/* capped where the reader stops, so it always reads back */
	st.streak = rep->verdict != PROBE_WARN ? 0
		    : st.streak < 1000000	 ? st.streak + 1
						 : 1000000;
	n = snprintf(buf, sizeof(buf),
		     "# sigma-probe: consecutive warnings, do not edit\n"
		     "streak=%ld\ntime_s=%.0f\n",
		     st.streak, (double)sigma_wall_ms() / 1000.0);
	if (sigma_mkdir_owned(conf->state_dir, 0755, NULL, 0) < 0 ||
	    sigma_file_write_atomic(path, buf, (size_t)n, 0644) < 0)
		return (int)conf->warn_confirm; /* cannot count: as before */
	return (int)st.streak;
}
