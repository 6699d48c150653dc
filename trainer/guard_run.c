/*
 * guard_run.c - sigma-train's guardrails (guard_run.h): fault injection,
 * and the guard's decisions (guard.c) attached to a model: precision per
 * layer, bf16 overflow counts, the ranks' agreement, timing.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sigma.h"
#include "bf16.h"
#include "guard_run.h"
#include "model.h"

/* ---- fault injection ----------------------------------------------------- */

int guard_inject_parse(struct guard_inject *in, const char *spec, int nlayers,
		       char *err, size_t len)
{
	static const char *const kinds[] = {"nan-grad", "spike", "flaky",
					    "overflow", NULL};
	char buf[1024], *save = NULL, *tok;

	memset(in, 0, sizeof(*in));
	if (sigma_strlcpy(buf, spec, sizeof(buf)) >= sizeof(buf))
		return sigma_set_err(err, len, EINVAL,
				     "SIGMA_GUARD_INJECT is too long");
	for (tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		char *at = strchr(tok, '@'), *colon, *dash;
		long lo, hi, layer = -1;
		int k;

		if (!at)
			return sigma_set_err(
			    err, len, EINVAL,
			    "SIGMA_GUARD_INJECT \"%s\": expected KIND@STEP",
			    tok);
		*at++ = '\0';
		k = sigma_parse_enum(tok, kinds);
		if (k < 0)
			return sigma_set_err(
			    err, len, EINVAL,
			    "SIGMA_GUARD_INJECT: unknown fault \"%s\" (nan-grad, spike, flaky, overflow)",
			    tok);
		colon = strchr(at, ':');
		if (colon) {
			*colon++ = '\0';
			if (sigma_parse_long(colon, 0, nlayers, &layer))
				return sigma_set_err(
				    err, len, EINVAL,
				    "SIGMA_GUARD_INJECT: layer \"%s\" is not in [0, %d]",
				    colon, nlayers);
		}
		if (k == GUARD_FAULT_OVERFLOW && layer < 0)
			return sigma_set_err(
			    err, len, EINVAL,
			    "SIGMA_GUARD_INJECT: overflow needs :LAYER");
		dash = strchr(at, '-');
		if (dash)
			*dash++ = '\0';
		if (sigma_parse_long(at, 1, 999999999, &lo) ||
		    sigma_parse_long(dash ? dash : at, lo, 999999999, &hi))
			return sigma_set_err(
			    err, len, EINVAL,
			    "SIGMA_GUARD_INJECT: bad step range \"%s%s%s\"", at,
			    dash ? "-" : "", dash ? dash : "");
		if (in->n == GUARD_MAX_INJECT)
			return sigma_set_err(
			    err, len, EINVAL,
			    "SIGMA_GUARD_INJECT: more than %d faults",
			    GUARD_MAX_INJECT);
		in->f[in->n].kind = (enum guard_fault)k;
		in->f[in->n].lo = lo;
		in->f[in->n].hi = hi;
		in->f[in->n].layer = (int)layer;
		in->n++;
	}
	return 0;
}

bool guard_inject_hits(const struct guard_inject *in, enum guard_fault kind,
		       long step, bool recomputed, int *layer)
{
	for (int i = 0; i < in->n; i++) {
		if (in->f[i].kind != kind || step < in->f[i].lo ||
		    step > in->f[i].hi)
			continue;
		if (kind == GUARD_FAULT_FLAKY && recomputed)
			continue;
		if (layer)
			*layer = in->f[i].layer;
		return true;
	}
	return false;
}

/* ---- the trainer's side -------------------------------------------------- */

int guard_run_init(struct guard_run *r, const struct guard_config *c, bool bf16,
		   struct model *m, char *err, size_t len)
{
	const char *spec = getenv("SIGMA_GUARD_INJECT");
	int ns = m->cfg.L + 1, rc;

	memset(r, 0, sizeof(*r));
	r->m = m;
	if (spec && *spec) {
		rc = guard_inject_parse(&r->inj, spec, m->cfg.L, err, len);
		if (rc)
			return rc;
	}
	rc = guard_init(&r->g, c, ns, bf16);
	r->prec = calloc(ns, sizeof(*r->prec));
	r->overflow = calloc(ns, sizeof(*r->overflow));
	if (rc || !r->prec || !r->overflow) {
		guard_run_free(r);
		return sigma_set_err(err, len, ENOMEM, "out of memory");
	}
	/* the caller may have chosen the device's table (sigma_bf16_select) */
	if (!m->bf16 && m->ops == &sigma_ops_cpu)
		m->bf16 = &sigma_bf16_cpu;
	if (bf16 && !m->bf16) {
		guard_run_free(r);
		return sigma_set_err(
		    err, len, EINVAL,
		    "--precision bf16: the %s kernels have no bf16 products",
		    m->ops->name);
	}
	for (int l = 0; l < ns; l++)
		r->prec[l] = bf16;
	m->prec = r->prec;
	m->overflow = r->overflow;
	return 0;
}

void guard_run_free(struct guard_run *r)
{
	if (r->m) {
		r->m->prec = NULL;
		r->m->overflow = NULL;
	}
	guard_free(&r->g);
	free(r->prec);
	free(r->overflow);
	r->prec = NULL;
	r->overflow = NULL;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void guard_run_begin(struct guard_run *r, long step)
{
	struct guard_event ev;
	int layer = -1;
	uint64_t t0 = now_ns();

	if (r->g.cfg.enabled) {
		while (guard_precision(&r->g, step, r->prec, &ev))
			guard_log(stdout, &ev);
	}
	memset(r->overflow, 0, sizeof(*r->overflow) * r->g.nslots);
	if (guard_inject_hits(&r->inj, GUARD_FAULT_OVERFLOW, step, false,
			      &layer) &&
	    r->prec[layer])
		r->m->inject_overflow = layer + 1;
	r->g.time_ns += now_ns() - t0;
}

unsigned guard_run_check(struct guard_run *r, long step, double *gn,
			 bool recomputed)
{
	struct model *m = r->m;
	struct guard_obs obs = {
	    .step = step, .recomputed = recomputed, .imbalance = NAN};
	struct guard_event ev;
	unsigned acts;
	float nan_ = NAN;
	uint64_t t0;

	if (guard_inject_hits(&r->inj, GUARD_FAULT_NAN_GRAD, step, recomputed,
			      NULL) ||
	    guard_inject_hits(&r->inj, GUARD_FAULT_FLAKY, step, recomputed,
			      NULL)) {
		m->ops->from_host(m->grads, &nan_, sizeof(float));
		*gn = model_grad_norm(m);
	}
	if (guard_inject_hits(&r->inj, GUARD_FAULT_SPIKE, step, recomputed,
			      NULL)) {
		/* scale on the host: a test hook, small models */
		size_t n = m->nparams;
		float *h = malloc(sizeof(float) * n);

		if (h) {
			m->ops->to_host(h, m->grads, sizeof(float) * n);
			for (size_t i = 0; i < n; i++)
				h[i] *= 1000.0f;
			m->ops->from_host(m->grads, h, sizeof(float) * n);
			free(h);
		}
		*gn = model_grad_norm(m);
	}
	if (!r->g.cfg.enabled)
		return 0;
	t0 = now_ns();
	if (r->agree && r->g.bf16) {
		int ns = r->g.nslots;
		double v[MODEL_MAX_L + 1];

		for (int l = 0; l < ns; l++)
			v[l] = (double)r->overflow[l];
		r->agree_rc = r->agree(r->agree_ctx, v, ns);
		if (r->agree_rc) {
			sigma_error(
			    "guard: step %ld: the ranks cannot agree on the bf16 overflows: %s",
			    step, strerror(-r->agree_rc));
			return GUARD_ACT_STOP;
		}
		for (int l = 0; l < ns; l++)
			r->overflow[l] =
			    (uint64_t)llround(v[l] * r->agree_size);
	}
	obs.loss = m->loss;
	obs.gnorm = *gn;
	obs.overflow = r->g.bf16 ? r->overflow : NULL;
	if (m->cfg.E > m->cfg.K) {
		int E = m->cfg.E, *cnt = malloc(sizeof(int) * E);
		/* the counts of the whole batch where the data-parallel ranks
		 * summed them; layers this rank does not compute (another
		 * pipeline stage's) have none and give NAN */
		bool global = m->counts_reduce && m->count_ranks > 1;

		for (int l = 0; cnt && l < m->cfg.L; l++) {
			double u;

			m->ops->to_host(cnt,
					global ? m->act.layer[l].gcounts
					       : m->act.layer[l].counts,
					sizeof(int) * E);
			u = guard_imbalance(cnt, E, m->cfg.K);
			if (isfinite(u) && !(u <= obs.imbalance))
				obs.imbalance = u;
		}
		free(cnt);
		if (r->agree_max) {
			double v = isfinite(obs.imbalance) ? obs.imbalance
							   : -1.0;

			r->agree_rc = r->agree_max(r->agree_ctx, &v);
			if (r->agree_rc) {
				sigma_error(
				    "guard: step %ld: the ranks cannot agree on the expert imbalance: %s",
				    step, strerror(-r->agree_rc));
				return GUARD_ACT_STOP;
			}
			obs.imbalance = v >= 0.0 ? v : NAN;
		}
	}
	acts = guard_check(&r->g, &obs, &ev);
	if (ev.cause != GUARD_CAUSE_NONE)
		guard_log(stdout, &ev);
	r->g.time_ns += now_ns() - t0;
	r->g.checks++;
	return acts;
}

void guard_run_metrics(const struct guard_run *r, FILE *f)
{
	uint64_t events = 0;
	int fp32 = 0;

	for (int i = 1; i < GUARD_NCAUSES; i++)
		events += r->g.causes[i];
	for (int l = 0; l < r->g.nslots; l++)
		fp32 += r->g.bf16 && !r->prec[l];
	fprintf(f, ",%llu,%llu,%llu,%llu,%d", (unsigned long long)events,
		(unsigned long long)r->g.acts[1],
		(unsigned long long)r->g.acts[4],
		(unsigned long long)r->g.overflows, fp32);
}

