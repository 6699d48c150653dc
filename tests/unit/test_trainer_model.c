/*
 * test_trainer_model.c - the whole model on the small config of
 * docs/model.md: gradients against finite differences of the loss, per
 * tensor and along a random direction; bitwise determinism; layout and
 * initialisation; the learning-rate schedule and clipping; the hooks of
 * data parallelism (gradients final per layer, global expert counts); the
 * T x T attention buffers allocated only for ops that use them.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "model.h"
#include "rng.h"

#define B 1 /* sequences per batch: one keeps it fast under valgrind */

static void batch(int32_t *tok, int32_t *tgt, int n, uint64_t seed)
{
	uint64_t st = seed;

	/* a learnable pattern with noise: next = (cur * 3 + 1) mod 61 mostly */
	tok[0] = 1;
	for (int i = 0; i < n; i++) {
		int32_t nx = (rng_next(&st) % 4) ? (tok[i] * 3 + 1) % 61
						 : (int32_t)(rng_next(&st) % 256);

		tgt[i] = nx;
		if (i + 1 < n)
			tok[i + 1] = nx;
	}
}

static struct model *small(uint64_t seed)
{
	struct model_config c;
	struct model *m = NULL;
	char err[256];

	model_config_small(&c);
	assert_int_equal(model_create(&m, &c, B, &sigma_ops_cpu, err,
				      sizeof(err)),
			 0);
	model_init_weights(m, seed);
	return m;
}

static void test_layout(void **state)
{
	struct model *m = small(1);
	const struct model_tensor *t;
	size_t total = 0;

	(void)state;
	assert_int_equal(m->ntensors, 3 + 10 * 2);
	t = model_find_tensor(m, "layers.1.w2");
	assert_non_null(t);
	assert_int_equal(t->ndim, 3);
	assert_int_equal(t->shape[0], 4);
	assert_int_equal(t->shape[1], 128);
	assert_int_equal(t->shape[2], 64);
	assert_ptr_equal(m->params + t->offset, m->P.layer[1].w2);
	assert_null(model_find_tensor(m, "layers.2.wq"));
	assert_false(model_find_tensor(m, "final_norm")->decay);
	assert_true(model_find_tensor(m, "w_out")->decay);
	for (int i = 0; i < m->ntensors; i++)
		total += m->tensors[i].n;
	/* V*D + L*(2D + 4D^2 + DE + 3EDF) + D + DV */
	assert_int_equal(total, 256 * 64 + 2 * (128 + 4 * 4096 + 256 +
						 3 * 4 * 64 * 128) +
					64 + 64 * 256);
	/* gains 1, matrices ~ N(0, 0.02), Wo smaller */
	assert_true(m->P.layer[0].attn_norm[5] == 1.0f);
	{
		double s = 0, so = 0;
		const float *wq = m->P.layer[0].wq, *wo = m->P.layer[0].wo;

		for (int i = 0; i < 4096; i++)
			s += wq[i] * wq[i], so += wo[i] * wo[i];
		assert_true(fabs(sqrt(s / 4096) - 0.02) < 0.002);
		assert_true(fabs(sqrt(so / 4096) - 0.01) < 0.001);
	}
	model_destroy(m);
}

static void test_config_check(void **state)
{
	struct model_config c;
	char err[256];
	struct model *m;

	(void)state;
	model_config_small(&c);
	c.H = 3;
	assert_int_equal(model_config_check(&c, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "multiple"));
	model_config_small(&c);
	c.K = 5;
	assert_int_equal(model_config_check(&c, err, sizeof(err)), -EINVAL);
	model_config_small(&c);
	assert_int_equal(model_create(&m, &c, 0, &sigma_ops_cpu, err,
				      sizeof(err)),
			 -EINVAL);
	assert_null(m);
}

static double loss_at(struct model *m, const int32_t *tok,
		      const int32_t *tgt)
{
	model_forward(m, tok, tgt);
	return m->loss;
}

/* routing of every layer, to see whether a perturbation flipped a choice */
static void routes(struct model *m, int *out)
{
	size_t nk = (size_t)B * m->cfg.T * m->cfg.K;

	for (int l = 0; l < m->cfg.L; l++)
		memcpy(out + l * nk, m->act.layer[l].idx, sizeof(int) * nk);
}

/*
 * For each tensor: the derivative of the loss along its own normalised
 * gradient must equal the gradient's norm, and along a random direction
 * over all parameters it must equal g . u.
 */
static void test_gradcheck(void **state)
{
	struct model *m = small(7);
	int n = B * m->cfg.T;
	int32_t *tok = malloc(sizeof(int32_t) * n), *tgt = malloc(sizeof(int32_t) * n);
	size_t nk = (size_t)n * m->cfg.K * m->cfg.L;
	int *r0 = malloc(sizeof(int) * nk), *r1 = malloc(sizeof(int) * nk);
	float *g = malloc(sizeof(float) * m->nparams);
	float *p0 = malloc(sizeof(float) * m->nparams);
	int bad = 0;

	(void)state;
	/* stronger weights than the init so every path carries gradient */
	for (size_t i = 0; i < m->nparams; i++)
		m->params[i] *= 4.0f;
	m->cfg.aux_coef = 0.5f; /* make the balancing loss visible */
	batch(tok, tgt, n, 3);
	model_forward(m, tok, tgt);
	routes(m, r0);
	model_backward(m);
	memcpy(g, m->grads, sizeof(float) * m->nparams);
	memcpy(p0, m->params, sizeof(float) * m->nparams);

	for (int ti = 0; ti < m->ntensors; ti++) {
		const struct model_tensor *t = &m->tensors[ti];
		const float *gt = g + t->offset;
		double gn = 0, num = 0;
		float eps = 1e-2f;
		int tries;

		for (size_t i = 0; i < t->n; i++)
			gn += (double)gt[i] * gt[i];
		gn = sqrt(gn);
		assert_true(gn > 0);
		for (tries = 0; tries < 4; tries++, eps /= 4) {
			double lp, lm;
			int flipped;

			for (size_t i = 0; i < t->n; i++)
				m->params[t->offset + i] =
					p0[t->offset + i] + eps * gt[i] / gn;
			lp = loss_at(m, tok, tgt);
			routes(m, r1);
			flipped = memcmp(r0, r1, sizeof(int) * nk);
			for (size_t i = 0; i < t->n; i++)
				m->params[t->offset + i] =
					p0[t->offset + i] - eps * gt[i] / gn;
			lm = loss_at(m, tok, tgt);
			routes(m, r1);
			flipped |= memcmp(r0, r1, sizeof(int) * nk);
			memcpy(m->params + t->offset, p0 + t->offset,
			       sizeof(float) * t->n);
			num = (lp - lm) / (2.0 * eps);
			if (!flipped)
				break;
		}
		assert_true(tries < 4); /* a routing-stable step was found */
		if (fabs(num - gn) > 1e-2 * gn + 1e-5) {
			print_message("%s: |g| %.6g, numeric %.6g\n", t->name,
				      gn, num);
			bad++;
		}
	}
	assert_int_equal(bad, 0);

	/* a random direction over every parameter */
	{
		uint64_t st = 99;
		float *u = malloc(sizeof(float) * m->nparams);
		double un = 0, gu = 0, lp, lm, eps = 1e-3;

		for (size_t i = 0; i < m->nparams; i++) {
			u[i] = (float)rng_normal(&st);
			un += (double)u[i] * u[i];
		}
		un = sqrt(un);
		for (size_t i = 0; i < m->nparams; i++) {
			u[i] /= (float)un;
			gu += (double)g[i] * u[i];
		}
		for (size_t i = 0; i < m->nparams; i++)
			m->params[i] = p0[i] + (float)eps * u[i];
		lp = loss_at(m, tok, tgt);
		for (size_t i = 0; i < m->nparams; i++)
			m->params[i] = p0[i] - (float)eps * u[i];
		lm = loss_at(m, tok, tgt);
		print_message("random direction: g.u %.6g numeric %.6g\n", gu,
			      (lp - lm) / (2 * eps));
		assert_true(fabs((lp - lm) / (2 * eps) - gu) <
			    2e-2 * fabs(gu) + 2e-4);
		free(u);
	}
	free(tok), free(tgt), free(r0), free(r1), free(g), free(p0);
	model_destroy(m);
}

static void train(struct model *m, const struct optim_config *oc, int steps,
		  double *losses)
{
	int n = B * m->cfg.T;
	int32_t *tok = malloc(sizeof(int32_t) * n), *tgt = malloc(sizeof(int32_t) * n);

	for (int s = 0; s < steps; s++) {
		double gn;

		batch(tok, tgt, n, 100 + s);
		model_forward(m, tok, tgt);
		model_backward(m);
		gn = model_grad_norm(m);
		optim_step(m, oc, gn, optim_lr(oc, s), s + 1);
		losses[s] = m->loss;
	}
	free(tok), free(tgt);
}

/* steps of the determinism test: short, it also runs under valgrind */
#define NDET 12

static void test_determinism_and_learning(void **state)
{
	struct model *a = small(5), *b = small(5), *c = small(6);
	struct optim_config oc;
	double la[NDET], lb[NDET], lc[NDET];

	(void)state;
	optim_config_default(&oc);
	oc.lr = 2e-2f;
	oc.warmup = 3;
	oc.steps = NDET;
	assert_memory_equal(a->params, b->params, sizeof(float) * a->nparams);
	assert_memory_not_equal(a->params, c->params,
				sizeof(float) * a->nparams);
	train(a, &oc, NDET, la);
	train(b, &oc, NDET, lb);
	train(c, &oc, 3, lc);
	assert_memory_equal(la, lb, sizeof(la));
	assert_memory_equal(a->params, b->params,
			    sizeof(float) * 3 * a->nparams);
	/* it starts at ln(256) = 5.55 and learns (the long run: tests/cluster) */
	print_message("loss %.4f -> %.4f\n", la[0], la[NDET - 1]);
	assert_true(la[0] > 5.0 && la[0] < 6.0);
	assert_true(la[NDET - 1] < la[0] - 0.25);
	model_destroy(a), model_destroy(b), model_destroy(c);
}

/*
 * An attention that keeps nothing between its passes, as the fused CUDA
 * kernels: its plan says 0, it takes att and scratch NULL and recomputes
 * the probabilities into buffers of its own (the CPU op's, so results
 * must match the CPU table bit for bit).
 */
static float *rc_att, *rc_scr, *rc_out;

static void rc_need(int Bn, int T, int H, int Dh)
{
	size_t nt = (size_t)Bn * H * T * T, n = (size_t)Bn * T * H * Dh;

	free(rc_att), free(rc_scr), free(rc_out);
	rc_att = malloc(sizeof(float) * nt);
	rc_scr = malloc(sizeof(float) * nt);
	rc_out = malloc(sizeof(float) * n);
	assert_true(rc_att && rc_scr && rc_out);
}

static void rc_forward(float *out, float *att, const float *q,
		       const float *k, const float *v, int Bn, int T, int H,
		       int Dh)
{
	assert_null(att);
	rc_need(Bn, T, H, Dh);
	sigma_ops_cpu.attention_forward(out, rc_att, q, k, v, Bn, T, H, Dh);
}

static void rc_backward(float *dq, float *dk, float *dv, float *scratch,
			const float *dout, const float *q, const float *k,
			const float *v, const float *att, int Bn, int T, int H,
			int Dh)
{
	assert_null(scratch);
	assert_null(att);
	rc_need(Bn, T, H, Dh);
	sigma_ops_cpu.attention_forward(rc_out, rc_att, q, k, v, Bn, T, H, Dh);
	sigma_ops_cpu.attention_backward(dq, dk, dv, rc_scr, dout, q, k, v,
					 rc_att, Bn, T, H, Dh);
}

static int rc_plan_nbuf; /* the T x T buffers the model would keep */

static int rc_plan(int Bn, int T, int H, int Dh, int nbuf, char *err,
		   size_t len)
{
	(void)Bn, (void)T, (void)H, (void)Dh, (void)err, (void)len;
	rc_plan_nbuf = nbuf;
	return 0;
}

static int refuse_plan(int Bn, int T, int H, int Dh, int nbuf, char *err,
		       size_t len)
{
	(void)Bn, (void)T, (void)H, (void)nbuf;
	snprintf(err, len, "attention: Dh = %d is above the limit 8", Dh);
	return -EINVAL;
}

static void test_attention_buffers(void **state)
{
	struct sigma_ops recomp = sigma_ops_cpu, refuse = sigma_ops_cpu;
	struct model_config c;
	struct model *a = small(3), *b = NULL;
	struct optim_config oc;
	double la[3], lb[3];
	size_t tt;
	char err[256] = "";

	(void)state;
	model_config_small(&c);
	recomp.attention_forward = rc_forward;
	recomp.attention_backward = rc_backward;
	recomp.attention_plan = rc_plan;
	assert_int_equal(model_create(&b, &c, B, &recomp, err, sizeof(err)),
			 0);
	model_init_weights(b, 3);
	/* nothing for the T x T buffers: L of att, one datt, which the
	 * plan was told of */
	assert_int_equal(rc_plan_nbuf, c.L + 1);
	assert_true(a->att_tt);
	assert_false(b->att_tt);
	assert_non_null(a->act.layer[0].att);
	assert_null(b->act.layer[0].att);
	assert_null(b->act.layer[c.L - 1].att);
	assert_null(b->act.datt);
	tt = ((sizeof(float) * B * c.H * c.T * c.T) + 63) & ~(size_t)63;
	assert_int_equal(a->arena_bytes - b->arena_bytes, (c.L + 1) * tt);
	/* and the same training, bit for bit */
	optim_config_default(&oc);
	oc.steps = 3;
	train(a, &oc, 3, la);
	train(b, &oc, 3, lb);
	assert_memory_equal(la, lb, sizeof(la));
	assert_memory_equal(a->params, b->params,
			    sizeof(float) * 3 * a->nparams);
	model_destroy(a), model_destroy(b);
	free(rc_att), free(rc_scr), free(rc_out);
	rc_att = rc_scr = rc_out = NULL;
	/* a shape the attention refuses: at creation, with its message */
	refuse.attention_plan = refuse_plan;
	assert_int_equal(model_create(&b, &c, B, &refuse, err, sizeof(err)),
			 -EINVAL);
	assert_null(b);
	assert_string_equal(err, "attention: Dh = 16 is above the limit 8");
}

/* data-parallel hooks: the offsets the backward pass reports, and
 * global expert counts */
struct hook_log {
	size_t off[64];
	int n;
	int calls;
};

static void log_ready(void *ctx, size_t off)
{
	struct hook_log *h = ctx;

	if (h->n < 64)
		h->off[h->n++] = off;
}

/* two ranks that drew the same batch: the global counts are twice ours */
static void double_counts(void *ctx, int *counts, int n)
{
	struct hook_log *h = ctx;

	h->calls++;
	h->n = n;
	for (int e = 0; e < n; e++)
		counts[e] *= 2;
}

static void test_dp_hooks(void **state)
{
	struct model *a = small(9), *b = small(9);
	int32_t tok[B * 32], tgt[B * 32];
	struct hook_log h = { .n = 0 };
	const int L = a->cfg.L;

	(void)state;
	assert_int_equal(a->cfg.T, 32);
	batch(tok, tgt, B * 32, 4);
	/* gradients become final from the end of the block down to 0, one
	 * report after the head, one per layer, one after the embedding */
	a->grad_ready = log_ready;
	a->grad_ready_ctx = &h;
	model_forward(a, tok, tgt);
	model_backward(a);
	assert_int_equal(h.n, L + 2);
	assert_int_equal(h.off[0], model_find_tensor(a, "final_norm")->offset);
	for (int l = 0; l < L; l++) {
		char name[MODEL_NAME_MAX];

		snprintf(name, sizeof(name), "layers.%d.attn_norm", L - 1 - l);
		assert_int_equal(h.off[1 + l],
				 model_find_tensor(a, name)->offset);
	}
	assert_int_equal(h.off[L + 1], 0);

	/* counts summed over two ranks with the same batch: the same
	 * load-balancing loss and gradients as one rank */
	b->counts_reduce = double_counts;
	b->counts_ctx = &h;
	b->count_ranks = 2;
	model_forward(b, tok, tgt);
	model_backward(b);
	/* every layer's counts in one call: one message a pass */
	assert_int_equal(h.calls, 1);
	assert_int_equal(h.n, L * b->cfg.E);
	assert_true(fabs(a->aux - b->aux) < 1e-6);
	assert_true(fabs(a->loss - b->loss) < 1e-6);
	for (size_t i = 0; i < a->nparams; i++)
		assert_true(fabsf(a->grads[i] - b->grads[i]) <=
			    1e-6f + 1e-4f * fabsf(a->grads[i]));
	model_destroy(a), model_destroy(b);
}

static void test_schedule_and_clip(void **state)
{
	struct optim_config oc;
	struct model *m = small(1);
	double gn, gn2;
	float scale;
	int n = B * m->cfg.T;
	int32_t tok[64], tgt[64];

	(void)state;
	optim_config_default(&oc);
	oc.lr = 1.0f;
	oc.warmup = 10;
	oc.steps = 110;
	assert_true(fabs(optim_lr(&oc, 0) - 0.1) < 1e-7);
	assert_true(fabs(optim_lr(&oc, 9) - 1.0) < 1e-7);
	assert_true(fabs(optim_lr(&oc, 10) - 1.0) < 1e-7);
	assert_true(fabs(optim_lr(&oc, 60) - 0.55) < 1e-6);
	assert_true(fabs(optim_lr(&oc, 110) - 0.1) < 1e-7);
	assert_true(fabs(optim_lr(&oc, 500) - 0.1) < 1e-7);
	assert_true(optim_lr(&oc, 30) > optim_lr(&oc, 31));

	/* clipping: the scale brings the norm to the limit */
	batch(tok, tgt, n, 1);
	model_forward(m, tok, tgt);
	model_backward(m);
	gn = model_grad_norm(m);
	oc.clip = (float)(gn / 4);
	oc.lr = 0.0f;
	scale = optim_step(m, &oc, gn, 0.0f, 1);
	assert_true(fabs(scale * gn - oc.clip) < 1e-5 * gn);
	oc.clip = (float)(gn * 2);
	assert_true(optim_step(m, &oc, gn, 0.0f, 2) == 1.0f);
	/* gradients of a second backward are zeroed first, not summed */
	model_forward(m, tok, tgt);
	model_backward(m);
	gn2 = model_grad_norm(m);
	assert_true(fabs(gn2 - gn) < 1e-6 * gn);
	model_destroy(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_layout),
		cmocka_unit_test(test_config_check),
		cmocka_unit_test(test_gradcheck),
		cmocka_unit_test(test_determinism_and_learning),
		cmocka_unit_test(test_attention_buffers),
		cmocka_unit_test(test_dp_hooks),
		cmocka_unit_test(test_schedule_and_clip),
	};

	assert_int_equal(sigma_ops_cpu.init(2), 0);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
