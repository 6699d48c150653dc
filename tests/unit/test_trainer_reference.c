/*
 * test_trainer_reference.c - sigma-train against a reference dump made
 * once by an independent numpy implementation (data/reference.py): fixed
 * fp32 weights read through the checkpoint reader, a fixed batch, and the
 * expected loss, cross-entropy, balancing loss and gradient norm of the
 * first AdamW steps, checked at a tight tolerance.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sigma.h"
#include "ckpt.h"
#include "model.h"

#define MAXSTEPS 8
#define MAXTOK 256

struct ref {
	struct model_config c;
	struct optim_config o;
	int batch, nsteps, nseq;
	int32_t seq[4][MAXTOK];
	int seqlen[4];
	double loss[MAXSTEPS], ce[MAXSTEPS], aux[MAXSTEPS], gn[MAXSTEPS];
	double pnorm;
};

static int on_kv(const char *key, const char *value, void *arg, char *err,
		 size_t errlen)
{
	struct ref *r = arg;
	static const char *const ints[] = { "V", "D", "L", "H", "T", "E",
					    "K", "F", "batch", "nsteps",
					    "warmup", "steps", NULL };
	int *ip[] = { &r->c.V, &r->c.D, &r->c.L, &r->c.H, &r->c.T, &r->c.E,
		      &r->c.K, &r->c.F, &r->batch, &r->nsteps };
	double d;
	long v;
	int i, s;

	i = sigma_parse_enum(key, ints);
	if (i >= 0) {
		if (sigma_parse_long(value, 0, 1 << 20, &v))
			return sigma_set_err(err, errlen, EINVAL, "bad %s", key);
		if (i < 10)
			*ip[i] = (int)v;
		else if (i == 10)
			r->o.warmup = v;
		else
			r->o.steps = v;
		return 0;
	}
	if (sscanf(key, "seq.%d", &s) == 1 && s >= 0 && s < 4) {
		char buf[SIGMA_KV_MAX_VALUE + 1], *save = NULL, *tok;
		int n = 0;

		sigma_strlcpy(buf, value, sizeof(buf));
		for (tok = strtok_r(buf, ",", &save); tok && n < MAXTOK;
		     tok = strtok_r(NULL, ",", &save)) {
			if (sigma_parse_long(tok, 0, 1 << 20, &v))
				return sigma_set_err(err, errlen, EINVAL,
						     "bad token");
			r->seq[s][n++] = (int32_t)v;
		}
		r->seqlen[s] = n;
		if (s + 1 > r->nseq)
			r->nseq = s + 1;
		return 0;
	}
	if (sigma_parse_double(value, -1e30, 1e30, &d))
		return sigma_set_err(err, errlen, EINVAL, "bad %s", key);
#define F(name, field)                                                        \
	if (!strcmp(key, name)) {                                             \
		field = (float)d;                                             \
		return 0;                                                     \
	}
	F("aux_coef", r->c.aux_coef)
	F("lr", r->o.lr)
	F("lr_min_ratio", r->o.lr_min_ratio)
	F("beta1", r->o.beta1)
	F("beta2", r->o.beta2)
	F("eps", r->o.eps)
	F("weight_decay", r->o.weight_decay)
	F("clip", r->o.clip)
#undef F
	if (sscanf(key, "loss.%d", &s) == 1 && s >= 0 && s < MAXSTEPS)
		r->loss[s] = d;
	else if (sscanf(key, "ce.%d", &s) == 1 && s >= 0 && s < MAXSTEPS)
		r->ce[s] = d;
	else if (sscanf(key, "aux.%d", &s) == 1 && s >= 0 && s < MAXSTEPS)
		r->aux[s] = d;
	else if (sscanf(key, "grad_norm.%d", &s) == 1 && s >= 0 &&
		 s < MAXSTEPS)
		r->gn[s] = d;
	else if (sscanf(key, "param_norm.%d", &s) == 1)
		r->pnorm = d;
	else
		return sigma_set_err(err, errlen, EINVAL, "unknown key %s",
				     key);
	return 0;
}

static void close_to(const char *what, int step, double got, double want,
		     double rel)
{
	double e = fabs(got - want) / fabs(want);

	print_message("step %d %-10s sigma-train %.9f reference %.9f rel %.1e\n",
		      step, what, got, want, e);
	assert_true(e <= rel);
}

static void test_reference_dump(void **state)
{
	const char *src = getenv("top_srcdir");
	char txt[PATH_MAX], h5[PATH_MAX], err[1024];
	struct ref r;
	struct model *m = NULL;
	int32_t *tok, *tgt;

	(void)state;
	memset(&r, 0, sizeof(r));
	optim_config_default(&r.o);
	snprintf(txt, sizeof(txt), "%s/tests/unit/data/reference_tiny.txt",
		 src ? src : "..");
	snprintf(h5, sizeof(h5), "%s/tests/unit/data/reference_tiny.h5",
		 src ? src : "..");
	if (sigma_kv_parse_file(txt, on_kv, &r, err, sizeof(err)))
		fail_msg("%s", err);
	assert_true(r.nsteps >= 1 && r.nsteps <= MAXSTEPS);
	assert_int_equal(r.nseq, r.batch);
	assert_int_equal(model_create(&m, &r.c, r.batch, &sigma_ops_cpu, err,
				      sizeof(err)),
			 0);
	if (ckpt_read_weights(h5, m, err, sizeof(err)))
		fail_msg("%s", err);
	tok = calloc((size_t)r.batch * r.c.T, sizeof(int32_t));
	tgt = calloc((size_t)r.batch * r.c.T, sizeof(int32_t));
	assert_non_null(tok);
	assert_non_null(tgt);
	for (int b = 0; b < r.batch; b++) {
		assert_int_equal(r.seqlen[b], r.c.T + 1);
		memcpy(tok + b * r.c.T, r.seq[b], sizeof(int32_t) * r.c.T);
		memcpy(tgt + b * r.c.T, r.seq[b] + 1, sizeof(int32_t) * r.c.T);
	}
	for (int s = 0; s < r.nsteps; s++) {
		double gn;

		model_forward(m, tok, tgt);
		model_backward(m);
		gn = model_grad_norm(m);
		/* fp32 against float64: a few ulps on the first step */
		close_to("loss", s, m->loss, r.loss[s], s ? 1e-5 : 2e-6);
		close_to("ce", s, m->ce, r.ce[s], s ? 1e-5 : 2e-6);
		close_to("aux", s, m->aux, r.aux[s], s ? 1e-5 : 2e-6);
		close_to("grad_norm", s, gn, r.gn[s], s ? 1e-4 : 1e-5);
		optim_step(m, &r.o, gn, optim_lr(&r.o, s), s + 1);
	}
	{
		double ss = 0;

		for (size_t i = 0; i < m->nparams; i++)
			ss += (double)m->params[i] * m->params[i];
		close_to("param_norm", r.nsteps, sqrt(ss), r.pnorm, 1e-5);
	}
	free(tok);
	free(tgt);
	model_destroy(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reference_dump),
	};

	assert_int_equal(sigma_ops_cpu.init(2), 0);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
