/*
 * guard_state.c - the guard's saved state (guard_state.h): the names its
 * values have in a checkpoint, and the guard's counters and windows into
 * and out of it.
 */
#include <string.h>

#include "guard.h"
#include "guard_state.h"

_Static_assert(GUARD_STATE_N == 6 + GUARD_NCAUSES + GUARD_NACTS,
	       "the saved state names every cause and every action");

static const char *const state_names[GUARD_STATE_N] = {
    "lr_until",
    "skip_lo",
    "skip_hi",
    "rollbacks",
    "overflow_outputs",
    "last_trouble",
    /* causes, in enum guard_cause order */
    "cause_none",
    "cause_nonfinite",
    "cause_loss_spike",
    "cause_gnorm_spike",
    "cause_overflow",
    "cause_collapse",
    "cause_hardware",
    "cause_restore",
    "cause_data",
    /* actions, in bit order */
    "action_recompute",
    "action_skip",
    "action_fp32",
    "action_lower_lr",
    "action_rollback",
    "action_requeue",
    "action_stop",
    "action_bf16",
};

static const char *const window_names[GUARD_STATE_WINDOWS] = {
    "window_loss", "window_gnorm", "window_imbalance"};

const char *guard_state_name(int i)
{
	return i >= 0 && i < GUARD_STATE_N ? state_names[i] : "?";
}

const char *guard_state_window_name(int i)
{
	return i >= 0 && i < GUARD_STATE_WINDOWS ? window_names[i] : "?";
}

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
