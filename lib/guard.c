/*
 * guard.c - numerical guardrails (guard.h, docs/guardrails.md): the
 * detectors, the escalation state machine, and the guard's saved state.
 * It reads and writes no file and knows no model: the saved state's
 * names are guard_state.c's, a rollback's checkpoint the caller's.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sigma.h"
#include "guard.h"

void guard_config_default(struct guard_config *c)
{
	*c = (struct guard_config){.enabled = true,
				   .window = 50,
				   .min_samples = 20,
				   .loss_z = 6.0,
				   .gnorm_z = 6.0,
				   .rel_floor = 0.02,
				   .collapse = 0.8,
				   .fp32_steps = 50,
				   .lr_steps = 50,
				   .lr_factor = 0.5,
				   .rollback_after = 3,
				   .trouble_steps = 50,
				   .max_rollbacks = 3,
				   .recompute = true};
}

int guard_config_check(const struct guard_config *c, char *err, size_t len)
{
	if (c->window < 2 || c->window > GUARD_MAX_WINDOW)
		return sigma_set_err(err, len, EINVAL,
				     "guard window %d is out of range [2, %d]",
				     c->window, GUARD_MAX_WINDOW);
	if (c->min_samples < 2 || c->min_samples > c->window)
		return sigma_set_err(
		    err, len, EINVAL,
		    "guard min samples %d is out of range [2, window %d]",
		    c->min_samples, c->window);
	if (!(c->loss_z > 0 && c->gnorm_z > 0))
		return sigma_set_err(err, len, EINVAL,
				     "guard spike thresholds must be positive");
	if (!(c->rel_floor >= 0 && c->rel_floor <= 1))
		return sigma_set_err(
		    err, len, EINVAL,
		    "guard rel floor %g is out of range [0, 1]", c->rel_floor);
	if (!(c->collapse > 0 && c->collapse <= 1))
		return sigma_set_err(err, len, EINVAL,
				     "guard collapse %g is out of range (0, 1]",
				     c->collapse);
	if (!(c->lr_factor > 0 && c->lr_factor <= 1))
		return sigma_set_err(
		    err, len, EINVAL,
		    "guard lr factor %g is out of range (0, 1]", c->lr_factor);
	if (c->fp32_steps < 1 || c->lr_steps < 1 || c->trouble_steps < 1)
		return sigma_set_err(err, len, EINVAL,
				     "guard windows must be at least 1 step");
	if (c->rollback_after < 1 || c->rollback_after > 64)
		return sigma_set_err(
		    err, len, EINVAL,
		    "guard rollback-after %d is out of range [1, 64]",
		    c->rollback_after);
	if (c->max_rollbacks < 0 || c->max_rollbacks > 1000)
		return sigma_set_err(
		    err, len, EINVAL,
		    "guard max rollbacks %d is out of range [0, 1000]",
		    c->max_rollbacks);
	return 0;
}

int guard_init(struct guard *g, const struct guard_config *c, int nslots,
	       bool bf16)
{
	memset(g, 0, sizeof(*g));
	g->cfg = *c;
	g->nslots = nslots;
	g->bf16 = bf16;
	g->fp32_until = calloc(nslots > 0 ? nslots : 1, sizeof(long));
	return g->fp32_until ? 0 : -ENOMEM;
}

void guard_free(struct guard *g)
{
	free(g->fp32_until);
	g->fp32_until = NULL;
}

/* ---- running window ------------------------------------------------------ */

static void ring_push(struct guard_ring *r, int window, double x)
{
	r->v[r->head] = x;
	r->head = (r->head + 1) % window;
	if (r->n < window)
		r->n++;
}

static void ring_stats(const struct guard_ring *r, double *mean, double *sd)
{
	double s = 0.0, ss = 0.0;

	for (int i = 0; i < r->n; i++)
		s += r->v[i];
	*mean = r->n ? s / r->n : 0.0;
	for (int i = 0; i < r->n; i++)
		ss += (r->v[i] - *mean) * (r->v[i] - *mean);
	*sd = r->n > 1 ? sqrt(ss / (r->n - 1)) : 0.0;
}

/* z-score of x against r with the sd floor; NAN while the window fills */
static double zscore(const struct guard *g, const struct guard_ring *r,
		     double x)
{
	double mean, sd, fl;

	if (r->n < g->cfg.min_samples)
		return NAN;
	ring_stats(r, &mean, &sd);
	/* in log units the floor is a relative change */
	fl = g->cfg.rel_floor > 0 ? g->cfg.rel_floor : 1e-12;
	if (sd < fl)
		sd = fl;
	return (x - mean) / sd;
}

/* ---- the state machine --------------------------------------------------- */

static void count(struct guard *g, const struct guard_event *ev)
{
	g->causes[ev->cause]++;
	for (int i = 0; i < GUARD_NACTS; i++)
		if (ev->actions & (1u << i))
			g->acts[i]++;
}

/*
 * One more trouble at step: escalate to a rollback when there were
 * rollback_after of them within trouble_steps; past max_rollbacks, stop.
 */
static unsigned escalate(struct guard *g, long step)
{
	int keep = 0;

	for (int i = 0; i < g->ntrouble; i++)
		if (step - g->trouble[i] < g->cfg.trouble_steps)
			g->trouble[keep++] = g->trouble[i];
	g->ntrouble = keep;
	if (g->ntrouble == (int)(sizeof(g->trouble) / sizeof(g->trouble[0]))) {
		memmove(g->trouble, g->trouble + 1,
			sizeof(g->trouble[0]) * (g->ntrouble - 1));
		g->ntrouble--;
	}
	g->trouble[g->ntrouble++] = step;
	if (g->ntrouble < g->cfg.rollback_after)
		return 0;
	if (g->rollbacks >= g->cfg.max_rollbacks)
		return GUARD_ACT_STOP;
	return GUARD_ACT_ROLLBACK;
}

static bool same_bits(double a, double b)
{
	return memcmp(&a, &b, sizeof(a)) == 0;
}

unsigned guard_check(struct guard *g, const struct guard_obs *o,
		     struct guard_event *ev)
{
	bool finite = isfinite(o->loss) && isfinite(o->gnorm), pos;
	uint64_t ovf = 0;
	int ovf_layer = -1;
	double zl, zg;

	*ev = (struct guard_event){.step = o->step, .layer = -1, .z = NAN};
	if (!g->cfg.enabled)
		return 0;

	/* the second computation of a suspicious step: the hardware check */
	if (o->recomputed && o->step == g->first_step) {
		g->first_step = 0;
		if (!same_bits(o->loss, g->first_loss) ||
		    !same_bits(o->gnorm, g->first_gnorm)) {
			ev->cause = GUARD_CAUSE_HARDWARE;
			ev->actions = GUARD_ACT_REQUEUE;
			ev->value = o->gnorm;
			count(g, ev);
			return ev->actions;
		}
	}

	for (int l = 0; o->overflow && l < g->nslots; l++) {
		if (o->overflow[l] && ovf_layer < 0)
			ovf_layer = l;
		ovf += o->overflow[l];
	}
	g->overflows += ovf;

	/*
	 * bf16 overflow: the first layer that overflowed goes fp32 (those
	 * after it only saw its infinities), the update is dropped
	 */
	if (ovf) {
		ev->cause = GUARD_CAUSE_OVERFLOW;
		ev->layer = ovf_layer;
		ev->value = (double)ovf;
		ev->actions = GUARD_ACT_SKIP | GUARD_ACT_FP32;
		g->fp32_until[ovf_layer] = o->step + g->cfg.fp32_steps;
		ev->actions |= escalate(g, o->step);
		count(g, ev);
		return ev->actions;
	}

	/* both are heavy-tailed and positive: judged on their logarithm (a
	 * zero, as of a model that fits perfectly, is no spike) */
	pos = finite && o->loss > 0 && o->gnorm > 0;
	zl = pos ? zscore(g, &g->loss, log(o->loss)) : NAN;
	zg = pos ? zscore(g, &g->gnorm, log(o->gnorm)) : NAN;
	if (!finite || zl > g->cfg.loss_z || zg > g->cfg.gnorm_z) {
		if (!finite) {
			ev->cause = GUARD_CAUSE_NONFINITE;
			ev->value = isfinite(o->loss) ? o->gnorm : o->loss;
		} else if (zl > g->cfg.loss_z) {
			ev->cause = GUARD_CAUSE_LOSS_SPIKE;
			ev->value = o->loss;
			ev->z = zl;
		} else {
			ev->cause = GUARD_CAUSE_GNORM_SPIKE;
			ev->value = o->gnorm;
			ev->z = zg;
		}
		if (g->cfg.recompute && !o->recomputed) {
			/* judged again after the recomputation; counted then */
			g->first_step = o->step;
			g->first_loss = o->loss;
			g->first_gnorm = o->gnorm;
			ev->actions = GUARD_ACT_RECOMPUTE;
			g->acts[0]++;
			return ev->actions;
		}
		ev->actions = GUARD_ACT_SKIP;
		if (finite) {
			ev->actions |= GUARD_ACT_LOWER_LR;
			g->lr_until = o->step + g->cfg.lr_steps;
		}
		ev->actions |= escalate(g, o->step);
		count(g, ev);
		return ev->actions;
	}

	/* an accepted step feeds the windows */
	if (pos) {
		ring_push(&g->loss, g->cfg.window, log(o->loss));
		ring_push(&g->gnorm, g->cfg.window, log(o->gnorm));
	}
	if (isfinite(o->imbalance)) {
		double mean, sd;

		ring_push(&g->imb, g->cfg.window, o->imbalance);
		ring_stats(&g->imb, &mean, &sd);
		if (g->imb.n >= g->cfg.window && mean > g->cfg.collapse) {
			ev->cause = GUARD_CAUSE_COLLAPSE;
			ev->value = mean;
			ev->actions = GUARD_ACT_LOWER_LR;
			g->lr_until = o->step + g->cfg.lr_steps;
			g->imb.n = 0; /* judge a fresh window next */
			g->imb.head = 0;
			count(g, ev);
			return ev->actions;
		}
	}
	return 0;
}

void guard_rolled_back(struct guard *g, long ckpt_step, long at_step)
{
	long lo = g->ntrouble ? g->trouble[0] : at_step;

	if (lo <= ckpt_step)
		lo = ckpt_step + 1;
	g->skip_lo = lo;
	g->skip_hi = at_step;
	g->ntrouble = 0;
	g->rollbacks++;
	g->first_step = 0;
}

bool guard_skip_data(struct guard *g, long step)
{
	if (!g->cfg.enabled || !g->skip_lo || step < g->skip_lo ||
	    step > g->skip_hi)
		return false;
	g->causes[GUARD_CAUSE_DATA]++;
	return true;
}

unsigned guard_precision(struct guard *g, long step, uint8_t *prec,
			 struct guard_event *ev)
{
	*ev = (struct guard_event){.step = step, .layer = -1, .z = NAN};
	for (int l = 0; l < g->nslots; l++) {
		if (g->fp32_until[l] && step > g->fp32_until[l]) {
			g->fp32_until[l] = 0;
			prec[l] = g->bf16;
			if (!g->bf16)
				continue;
			ev->cause = GUARD_CAUSE_RESTORE;
			ev->layer = l;
			ev->actions = GUARD_ACT_BF16;
			count(g, ev);
			return ev->actions;
		}
		prec[l] = g->bf16 && !g->fp32_until[l];
	}
	return 0;
}

double guard_lr_scale(const struct guard *g, long step)
{
	if (g->cfg.enabled && g->lr_until && step <= g->lr_until)
		return g->cfg.lr_factor;
	return 1.0;
}

double guard_imbalance(const int *counts, int E, int K)
{
	long total = 0, mx = 0;
	double ratio, worst;

	if (E <= K)
		return 0.0;
	for (int e = 0; e < E; e++) {
		total += counts[e];
		if (counts[e] > mx)
			mx = counts[e];
	}
	if (total <= 0)
		return NAN;
	/* max load over the balanced load: 1 balanced, E/K all on K experts */
	ratio = (double)mx * E / (double)total;
	worst = (double)E / K;
	return (ratio - 1.0) / (worst - 1.0);
}

/* ---- reporting ----------------------------------------------------------- */

static const char *const cause_names[GUARD_NCAUSES] = {
    "none",	   "non-finite",	"loss-spike",
    "gnorm-spike", "bf16-overflow",	"router-collapse",
    "hardware",	   "fp32-window-ended", "data-window",
};

static const char *const act_names[GUARD_NACTS] = {
    "recompute", "skip",    "fp32", "lower-lr",
    "rollback",	 "requeue", "stop", "bf16",
};

const char *guard_cause_name(enum guard_cause c)
{
	return (unsigned)c < GUARD_NCAUSES ? cause_names[c] : "?";
}

void guard_actions_str(unsigned acts, char *buf, size_t len)
{
	size_t used = 0;

	if (len)
		buf[0] = '\0';
	for (int i = 0; i < GUARD_NACTS; i++) {
		int n;

		if (!(acts & (1u << i)))
			continue;
		n = snprintf(buf + used, len - used, "%s%s", used ? "+" : "",
			     act_names[i]);
		if (n < 0 || (size_t)n >= len - used)
			return;
		used += (size_t)n;
	}
	if (!used)
		sigma_strlcpy(buf, "none", len);
}

void guard_event_str(const struct guard_event *ev, char *buf, size_t len)
{
	char acts[128], where[32] = "", value[64] = "";

	guard_actions_str(ev->actions, acts, sizeof(acts));
	if (ev->layer >= 0)
		snprintf(where, sizeof(where), " layer %d", ev->layer);
	if (isfinite(ev->z))
		snprintf(value, sizeof(value), " value %.4g z %.1f", ev->value,
			 ev->z);
	else if (ev->cause != GUARD_CAUSE_RESTORE)
		snprintf(value, sizeof(value), " value %.4g", ev->value);
	snprintf(buf, len, "guard: step %ld: %s%s%s: %s", ev->step,
		 guard_cause_name(ev->cause), where, value, acts);
}

void guard_log(FILE *f, const struct guard_event *ev)
{
	char line[320];

	guard_event_str(ev, line, sizeof(line));
	fprintf(f, "%s\n", line);
	fflush(f);
}

void guard_summary(FILE *f, const struct guard *g)
{
	fprintf(
	    f,
	    "guard: %s; non-finite %llu, loss spikes %llu, gnorm spikes %llu, bf16 overflow steps %llu (%llu outputs), collapse %llu, hardware %llu; recomputed %llu, skipped %llu, fp32 windows %llu, lr lowered %llu, rollbacks %llu, data steps skipped %llu\n",
	    g->cfg.enabled ? "on" : "off",
	    (unsigned long long)g->causes[GUARD_CAUSE_NONFINITE],
	    (unsigned long long)g->causes[GUARD_CAUSE_LOSS_SPIKE],
	    (unsigned long long)g->causes[GUARD_CAUSE_GNORM_SPIKE],
	    (unsigned long long)g->causes[GUARD_CAUSE_OVERFLOW],
	    (unsigned long long)g->overflows,
	    (unsigned long long)g->causes[GUARD_CAUSE_COLLAPSE],
	    (unsigned long long)g->causes[GUARD_CAUSE_HARDWARE],
	    (unsigned long long)g->acts[0], (unsigned long long)g->acts[1],
	    (unsigned long long)g->acts[2], (unsigned long long)g->acts[3],
	    (unsigned long long)g->acts[4],
	    (unsigned long long)g->causes[GUARD_CAUSE_DATA]);
	if (g->checks)
		fprintf(f,
			"guard: %.1f us per step in the guard (%llu steps)\n",
			(double)g->time_ns / 1e3 / (double)g->checks,
			(unsigned long long)g->checks);
	fflush(f);
}

/* ---- the saved state (guard_state.h) ------------------------------------ */

_Static_assert(GUARD_STATE_N == 6 + GUARD_NCAUSES + GUARD_NACTS,
	       "the saved state names every cause and every action");

static struct guard_ring *window_of(struct guard *g, int i)
{
	return i == 0 ? &g->loss : i == 1 ? &g->gnorm : &g->imb;
}

void guard_state_export(const struct guard *g, struct guard_state *s)
{
	int k = 0;

	s->v[k++] = g->lr_until;
	s->v[k++] = g->skip_lo;
	s->v[k++] = g->skip_hi;
	s->v[k++] = g->rollbacks;
	s->v[k++] = (int64_t)g->overflows;
	s->v[k++] = g->ntrouble ? g->trouble[g->ntrouble - 1] : 0;
	for (int i = 0; i < GUARD_NCAUSES; i++)
		s->v[k++] = (int64_t)g->causes[i];
	for (int i = 0; i < GUARD_NACTS; i++)
		s->v[k++] = (int64_t)g->acts[i];
	s->n = GUARD_STATE_N;
	/* exactly as held (ring storage and next slot) */
	for (int i = 0; i < GUARD_STATE_WINDOWS; i++)
		s->win[i] = *window_of((struct guard *)g, i);
}

static void import_counters(struct guard *g, const int64_t *v)
{
	int k = 0;

	g->lr_until = (long)v[k++];
	g->skip_lo = (long)v[k++];
	g->skip_hi = (long)v[k++];
	g->rollbacks = (int)v[k++];
	g->overflows = (uint64_t)v[k++];
	k++; /* the last trouble step: informative */
	for (int i = 0; i < GUARD_NCAUSES; i++)
		g->causes[i] = (uint64_t)v[k++];
	for (int i = 0; i < GUARD_NACTS; i++)
		g->acts[i] = (uint64_t)v[k++];
}

static void import_windows(struct guard *g, const struct guard_state *s)
{
	for (int i = 0; i < GUARD_STATE_WINDOWS; i++) {
		struct guard_ring *r = window_of(g, i);
		int n = s->win[i].n, head = s->win[i].head;

		r->n = r->head = 0;
		/* a ring of another window size does not map: start empty */
		if (n < 1 || n > g->cfg.window || head < 0 ||
		    head >= g->cfg.window || (n < g->cfg.window && head != n))
			continue;
		memcpy(r->v, s->win[i].v, sizeof(double) * (size_t)n);
		r->n = n;
		r->head = head;
	}
}

void guard_state_import(struct guard *g, const struct guard_state *s)
{
	if (s->n != GUARD_STATE_N)
		return;
	import_counters(g, s->v);
	import_windows(g, s);
}
