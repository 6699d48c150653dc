/*
 * runtime_guard.c - libsigma-runtime's guard (sigma_runtime.h): the
 * guardrails' decisions of guard.c, which sigma-train takes too, for a
 * training loop that reports a loss and a gradient norm per step. No
 * layers: the precision windows and bf16 overflows are sigma-train's.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sigma.h"
#include "guard.h"
#include "sigma_runtime.h"

_Static_assert(SIGMA_RT_GUARD_RECOMPUTE == GUARD_ACT_RECOMPUTE, "guard.h");
_Static_assert(SIGMA_RT_GUARD_SKIP == GUARD_ACT_SKIP, "guard.h");
_Static_assert(SIGMA_RT_GUARD_LOWER_LR == GUARD_ACT_LOWER_LR, "guard.h");
_Static_assert(SIGMA_RT_GUARD_ROLLBACK == GUARD_ACT_ROLLBACK, "guard.h");
_Static_assert(SIGMA_RT_GUARD_REQUEUE == GUARD_ACT_REQUEUE, "guard.h");
_Static_assert(SIGMA_RT_GUARD_STOP == GUARD_ACT_STOP, "guard.h");

struct sigma_rt_guard {
	struct guard g;
};

/* ---- settings ------------------------------------------------------------ */

static int set_int(const char *key, const char *val, long min, long max,
		   long *out, char *err, size_t len)
{
	return sigma_parse_long_named(key, val, min, max, out, err, len);
}

static int set_real(const char *key, const char *val, double min, double max,
		    double *out, char *err, size_t len)
{
	if (sigma_parse_double(val, min, max, out))
		return sigma_set_err(err, len, EINVAL,
				     "guard setting %s=%s: want a number in "
				     "[%g, %g]",
				     key, val, min, max);
	return 0;
}

static int set_one(const char *key, const char *val, void *arg, char *err,
		   size_t len)
{
	struct guard_config *c = arg;
	long n;
	bool b;
	int rc = 0;

	if (!strcmp(key, "enabled") || !strcmp(key, "recompute")) {
		if (sigma_parse_bool(val, &b))
			return sigma_set_err(err, len, EINVAL,
					     "guard setting %s=%s: want on or "
					     "off",
					     key, val);
		*(key[0] == 'e' ? &c->enabled : &c->recompute) = b;
	} else if (!strcmp(key, "window")) {
		if (!(rc = set_int(key, val, 2, GUARD_MAX_WINDOW, &n, err, len)))
			c->window = (int)n;
	} else if (!strcmp(key, "min_samples")) {
		if (!(rc = set_int(key, val, 2, GUARD_MAX_WINDOW, &n, err, len)))
			c->min_samples = (int)n;
	} else if (!strcmp(key, "z")) {
		rc = set_real(key, val, 0.5, 1000, &c->loss_z, err, len);
		c->gnorm_z = c->loss_z;
	} else if (!strcmp(key, "loss_z")) {
		rc = set_real(key, val, 0.5, 1000, &c->loss_z, err, len);
	} else if (!strcmp(key, "gnorm_z")) {
		rc = set_real(key, val, 0.5, 1000, &c->gnorm_z, err, len);
	} else if (!strcmp(key, "rel_floor")) {
		rc = set_real(key, val, 0, 1, &c->rel_floor, err, len);
	} else if (!strcmp(key, "lr_steps")) {
		rc = set_int(key, val, 1, 1000000000L, &c->lr_steps, err, len);
	} else if (!strcmp(key, "lr_factor")) {
		rc = set_real(key, val, 1e-6, 1, &c->lr_factor, err, len);
	} else if (!strcmp(key, "rollback_after")) {
		if (!(rc = set_int(key, val, 1, 64, &n, err, len)))
			c->rollback_after = (int)n;
	} else if (!strcmp(key, "trouble_steps")) {
		rc = set_int(key, val, 1, 1000000000L, &c->trouble_steps, err,
			     len);
	} else if (!strcmp(key, "max_rollbacks")) {
		if (!(rc = set_int(key, val, 0, 1000, &n, err, len)))
			c->max_rollbacks = (int)n;
	} else {
		return sigma_set_err(err, len, EINVAL,
				     "unknown guard setting \"%s\"", key);
	}
	return rc;
}

/* words "key=value" separated by spaces or commas */
static int parse_settings(struct guard_config *c, const char *settings,
			  char *err, size_t len)
{
	/* out of range, too long: all bad settings (-EINVAL) */
	if (sigma_kv_parse_words(settings, set_one, c, err, len))
		return -EINVAL;
	if (c->min_samples > c->window)
		c->min_samples = c->window;
	return guard_config_check(c, err, len);
}

/* ---- the verbs ----------------------------------------------------------- */

int sigma_rt_guard_open(struct sigma_rt_guard **g, const char *settings,
			char *err, size_t len)
{
	struct guard_config c;
	struct sigma_rt_guard *n;
	int rc;

	*g = NULL;
	guard_config_default(&c);
	rc = parse_settings(&c, settings, err, len);
	if (rc)
		return rc;
	n = calloc(1, sizeof(*n));
	if (!n || guard_init(&n->g, &c, 0, false)) {
		free(n);
		return sigma_set_err(err, len, ENOMEM, "out of memory");
	}
	*g = n;
	return 0;
}

unsigned sigma_rt_guard_check(struct sigma_rt_guard *g, long step,
			      double loss, double gnorm, int recomputed,
			      struct sigma_rt_guard_event *ev)
{
	struct guard_obs o = {.step = step,
			      .loss = loss,
			      .gnorm = gnorm,
			      .imbalance = NAN,
			      .recomputed = recomputed != 0};
	struct guard_event e;
	unsigned acts = guard_check(&g->g, &o, &e);

	if (ev) {
		*ev = (struct sigma_rt_guard_event){.step = e.step,
						    .actions = e.actions,
						    .value = e.value,
						    .z = e.z};
		if (e.cause != GUARD_CAUSE_NONE)
			sigma_strlcpy(ev->cause, guard_cause_name(e.cause),
				      sizeof(ev->cause));
	}
	return acts;
}

double sigma_rt_guard_lr_scale(const struct sigma_rt_guard *g, long step)
{
	return guard_lr_scale(&g->g, step);
}

void sigma_rt_guard_rolled_back(struct sigma_rt_guard *g, long ckpt_step,
				long at_step)
{
	guard_rolled_back(&g->g, ckpt_step, at_step);
}

int sigma_rt_guard_skip_data(struct sigma_rt_guard *g, long step)
{
	return guard_skip_data(&g->g, step);
}

void sigma_rt_guard_describe(const struct sigma_rt_guard_event *ev, char *buf,
			     size_t len)
{
	struct guard_event e = {.step = ev->step,
				.actions = ev->actions,
				.layer = -1,
				.value = ev->value,
				.z = ev->z};

	for (int i = 0; i < GUARD_NCAUSES; i++)
		if (!strcmp(ev->cause, guard_cause_name(i)))
			e.cause = i;
	guard_event_str(&e, buf, len);
}

void sigma_rt_guard_close(struct sigma_rt_guard *g)
{
	if (!g)
		return;
	guard_free(&g->g);
	free(g);
}

/* ---- the saved state ----------------------------------------------------- */

/*
 * Bytes, in this machine's byte order: a header (magic, version, the
 * counter and window counts), the counters, then per window its length,
 * next slot and values. A file of the other byte order fails the magic.
 */
#define GUARD_BLOB_MAGIC 0x53474731u /* "SGG1" */

struct blob_head {
	uint32_t magic, counters, windows, reserved;
};

struct blob_win {
	int32_t n, head;
};

static size_t blob_size(const struct guard_state *s)
{
	size_t n = sizeof(struct blob_head) + sizeof(s->v);

	for (int i = 0; i < GUARD_STATE_WINDOWS; i++)
		n += sizeof(struct blob_win) + sizeof(double) * (size_t)s->win[i].n;
	return n;
}

long sigma_rt_guard_save(const struct sigma_rt_guard *g, void *buf, size_t len)
{
	struct guard_state *s = malloc(sizeof(*s));
	struct blob_head h = {GUARD_BLOB_MAGIC, GUARD_STATE_N,
			      GUARD_STATE_WINDOWS, 0};
	unsigned char *p = buf;
	size_t need;

	if (!s)
		return -ENOMEM;
	guard_state_export(&g->g, s);
	need = blob_size(s);
	if (len == 0 || !buf) {
		free(s);
		return (long)need;
	}
	if (len < need) {
		free(s);
		return -ENOSPC;
	}
	memcpy(p, &h, sizeof(h));
	p += sizeof(h);
	memcpy(p, s->v, sizeof(s->v));
	p += sizeof(s->v);
	for (int i = 0; i < GUARD_STATE_WINDOWS; i++) {
		struct blob_win w = {s->win[i].n, s->win[i].head};

		memcpy(p, &w, sizeof(w));
		p += sizeof(w);
		memcpy(p, s->win[i].v, sizeof(double) * (size_t)w.n);
		p += sizeof(double) * (size_t)w.n;
	}
	free(s);
	return (long)need;
}

/* a window of another size is checked by guard_state_import (it starts
 * empty then, as sigma-train's does); here only that the bytes hold it */
static int blob_read(struct guard_state *s, const unsigned char *p, size_t len,
		     char *err, size_t errlen)
{
	struct blob_head h;
	size_t at;

	if (len < sizeof(h) + sizeof(s->v))
		return sigma_set_err(err, errlen, EINVAL,
				     "guard state: %zu bytes is too short", len);
	memcpy(&h, p, sizeof(h));
	if (h.magic != GUARD_BLOB_MAGIC)
		return sigma_set_err(err, errlen, EINVAL,
				     "guard state: not a guard state of this "
				     "format or byte order");
	if (h.counters != GUARD_STATE_N || h.windows != GUARD_STATE_WINDOWS)
		return sigma_set_err(err, errlen, EINVAL,
				     "guard state: %u counters and %u windows, "
				     "want %d and %d",
				     h.counters, h.windows, GUARD_STATE_N,
				     GUARD_STATE_WINDOWS);
	memcpy(s->v, p + sizeof(h), sizeof(s->v));
	s->n = GUARD_STATE_N;
	at = sizeof(h) + sizeof(s->v);
	for (int i = 0; i < GUARD_STATE_WINDOWS; i++) {
		struct blob_win w;

		if (len - at < sizeof(w))
			return sigma_set_err(err, errlen, EINVAL,
					     "guard state: window %d is cut "
					     "short",
					     i);
		memcpy(&w, p + at, sizeof(w));
		at += sizeof(w);
		if (w.n < 0 || w.n > GUARD_MAX_WINDOW || w.head < 0 ||
		    w.head >= GUARD_MAX_WINDOW ||
		    (len - at) / sizeof(double) < (size_t)w.n)
			return sigma_set_err(err, errlen, EINVAL,
					     "guard state: window %d holds %d "
					     "values at %d: more than %d, or "
					     "more than its %zu bytes",
					     i, w.n, w.head, GUARD_MAX_WINDOW,
					     len);
		s->win[i].n = w.n;
		s->win[i].head = w.head;
		memcpy(s->win[i].v, p + at, sizeof(double) * (size_t)w.n);
		at += sizeof(double) * (size_t)w.n;
	}
	if (at != len)
		return sigma_set_err(err, errlen, EINVAL,
				     "guard state: %zu bytes after its end",
				     len - at);
	return 0;
}

int sigma_rt_guard_load(struct sigma_rt_guard *g, const void *buf, size_t len,
			char *err, size_t errlen)
{
	struct guard_state *s = calloc(1, sizeof(*s));
	int rc;

	if (!s)
		return sigma_set_err(err, errlen, ENOMEM, "out of memory");
	rc = blob_read(s, buf, len, err, errlen);
	if (!rc)
		guard_state_import(&g->g, s);
	free(s);
	return rc;
}
