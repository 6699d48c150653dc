/*
 * test_trainer_dist.c - the distributed trainer (trainer/dist/dist*.c) in one
 * process, over the self back end:
 *
 *   - the expert exchange's steps (dist_ep_route, dist_ep_dispatch,
 *     dist_ep_combine) on known rows, with a placement that is not the
 *     identity: the counts and offsets of the route, every row in its
 *     expert's slot in order, and the way back gives the rows again;
 *   - the expert hooks (dist_ep_attach) against the model's own expert
 *     path: the same loss and the same gradients;
 *   - dist_step on two micro-batches (the 1F1B schedule of one stage):
 *     the schedule's order, the losses the means of the micro-batches'
 *     and the gradients the mean of theirs; dist_forward the model's.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sigma.h"
#include "boot.h"
#include "comm.h"
#include "dist_impl.h"
#include "model.h"
#include "rng.h"

#define B 1 /* sequences per micro-batch */

static int setup_env(void **state)
{
	(void)state;
	unsetenv("PMIX_NAMESPACE");
	unsetenv("SLURM_NTASKS");
	unsetenv("SIGMA_COMM_TIMEOUT");
	return 0;
}

static void tokens(int32_t *tok, int32_t *tgt, int n, uint64_t seed)
{
	uint64_t st = seed;

	for (int i = 0; i < n; i++) {
		tok[i] = (int32_t)(rng_next(&st) % 256);
		tgt[i] = (int32_t)(rng_next(&st) % 256);
	}
}

static struct model *small(int nacts, uint64_t seed)
{
	struct model_config c;
	struct model *m = NULL;
	char err[256];

	model_config_small(&c);
	assert_int_equal(model_create_acts(&m, &c, B, nacts, &sigma_ops_cpu,
					   err, sizeof(err)),
			 0);
	model_init_weights(m, seed);
	return m;
}

/* A struct dist of one rank with ep = 1 by hand (dist_init makes no ep
 * communicator for ep = 1): the self world as both ep communicators and
 * the experts of the one layer in the order loc. */
struct ep_fixture {
	struct boot boot;
	struct comm *self;
	struct dist d;
};

static void ep_fixture_init(struct ep_fixture *f, int E, int L,
			    const int *loc)
{
	struct comm_options o;
	char err[256];

	memset(f, 0, sizeof(*f));
	assert_int_equal(boot_init(&f->boot, err, sizeof(err)), 0);
	assert_int_equal(comm_options_default(&o, err, sizeof(err)), 0);
	assert_int_equal(comm_create(&f->self, COMM_SELF, &f->boot, &o, err,
				     sizeof(err)),
			 0);
	f->d.lp.ep = 1;
	f->d.lp.E = E;
	f->d.lp.L = L;
	f->d.micro = 1;
	f->d.ep = f->d.tep = f->self;
	f->d.ops = &sigma_ops_cpu;
	/* with ep = 1 the plan places nothing */
	assert_int_equal(dist_ep_plan(&f->d, err, sizeof(err)), 0);
	assert_null(f->d.ep_loc);
	f->d.ep_loc = malloc(sizeof(int) * (size_t)E * L);
	assert_non_null(f->d.ep_loc);
	for (int l = 0; l < L; l++)
		memcpy(f->d.ep_loc + (size_t)l * E, loc, sizeof(int) * E);
}

static void ep_fixture_fini(struct ep_fixture *f)
{
	dist_ep_fini(&f->d);
	assert_null(f->d.ep_loc);
	comm_destroy(f->self);
	boot_fini(&f->boot);
}

static void test_ep_dispatch_combine(void **state)
{
	/* rows per expert 3, 0, 2, 1 (this rank's expert-sorted order) and
	 * local expert slots that hold experts 2, 0, 3, 1 */
	static const int counts[4] = { 3, 0, 2, 1 };
	static const int loc[4] = { 2, 0, 3, 1 };
	const size_t W = 5;
	struct ep_fixture f;
	struct model mm;
	struct dist_ep *st;
	struct dist_fbuf dst = { 0 };
	float src[6 * 5], back[6 * 5];
	size_t k;

	(void)state;
	ep_fixture_init(&f, 4, 1, loc);
	memset(&mm, 0, sizeof(mm));
	assert_int_equal(dist_ep_attach(&f.d, &mm), 0);
	assert_ptr_equal(mm.experts, &f.d.experts);
	assert_ptr_equal(mm.experts->ctx, &f.d);
	assert_non_null(mm.experts->forward);
	assert_non_null(mm.experts->backward);
	st = &f.d.ep_state[0];
	st->offs[0] = 0;
	for (int e = 0; e < 4; e++)
		st->offs[e + 1] = st->offs[e] + counts[e];
	assert_int_equal(st->offs[4], 6);
	for (size_t i = 0; i < 6 * W; i++)
		src[i] = (float)(100 * (i / W) + i % W);

	/* route: the one rank sends each local expert its rows */
	assert_int_equal(dist_ep_route(&f.d, st, loc), 0);
	for (int j = 0; j < 4; j++)
		assert_int_equal(st->rcnt[j], counts[loc[j]]);
	assert_int_equal(st->roff[0], 0);
	assert_int_equal(st->roff[1], 2);
	assert_int_equal(st->roff[2], 5);
	assert_int_equal(st->roff[3], 6);
	assert_int_equal(st->roff[4], 6);

	/* dispatch: slot j holds the rows of expert loc[j], in order */
	assert_int_equal(
	    dist_ep_dispatch(&f.d, st, st->offs, loc, src, W, &dst), 0);
	assert_true(dst.cap >= 6 * W);
	k = 0;
	for (int j = 0; j < 4; j++) {
		int e = loc[j];

		assert_int_equal(st->roff[j], (int)k);
		for (int r = st->offs[e]; r < st->offs[e + 1]; r++, k++)
			assert_memory_equal(dst.p + k * W, src + r * W,
					    W * sizeof(float));
	}
	assert_int_equal(k, 6);
	/* the rows of expert 2 (src rows 3 and 4) come first */
	assert_true(dst.p[0] == 300.0f && dst.p[W] == 400.0f);

	/* combine: every row back to where it came from */
	for (size_t i = 0; i < 6 * W; i++)
		back[i] = -1.0f;
	assert_int_equal(
	    dist_ep_combine(&f.d, st, st->offs, loc, dst.p, W, back), 0);
	assert_memory_equal(back, src, sizeof(src));

	/* an expert that gets no rows, and no rows at all */
	for (int e = 0; e <= 4; e++)
		st->offs[e] = 0;
	assert_int_equal(dist_ep_route(&f.d, st, loc), 0);
	for (int j = 0; j < 4; j++)
		assert_int_equal(st->rcnt[j], 0);
	assert_int_equal(st->roff[4], 0);
	assert_int_equal(
	    dist_ep_dispatch(&f.d, st, st->offs, loc, src, W, &dst), 0);
	assert_int_equal(
	    dist_ep_combine(&f.d, st, st->offs, loc, dst.p, W, back), 0);
	assert_memory_equal(back, src, sizeof(src));

	sigma_ops_cpu.free(dst.p);
	ep_fixture_fini(&f);
}

static void assert_close(const float *a, const float *b, size_t n,
			 double tol)
{
	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)a[i] - (double)b[i]);

		if (d > tol * (1.0 + fabs((double)b[i])))
			fail_msg("element %zu: %.9g against %.9g", i,
				 (double)a[i], (double)b[i]);
	}
}

/* b's gradients against a's: tensor by tensor, row j of b against a's
 * row of the same model row (the expert b's slot j holds) */
static void assert_grads_close(const struct model *b, const struct model *a,
			       double tol)
{
	for (int i = 0; i < b->ntensors; i++) {
		const struct model_tensor *tb = &b->tensors[i];
		const struct model_tensor *ta = model_find_tensor(a, tb->name);
		size_t row = tb->n / tb->shape[0];

		assert_non_null(ta);
		for (uint64_t j = 0; j < tb->shape[0]; j++)
			assert_close(b->grads + tb->offset + j * row,
				     a->grads + ta->offset +
					 model_tensor_row(b, tb, j) * row,
				     row, tol);
	}
}

/* The hooks through the exchange compute what the model's grouped
 * products do, on a model that holds its experts in another slot order
 * (as an expert-parallel rank holds its own). */
static void test_ep_hooks_match_model(void **state)
{
	static const int loc[4] = { 3, 1, 0, 2 };
	int slots[2 * 4];
	struct model_shard sh;
	struct model *a = small(1, 7), *b = NULL;
	char err[256];
	int n = B * a->cfg.T;
	int32_t *tok = calloc((size_t)n, sizeof(*tok));
	int32_t *tgt = calloc((size_t)n, sizeof(*tgt));
	struct ep_fixture f;

	(void)state;
	assert_non_null(tok);
	assert_non_null(tgt);
	tokens(tok, tgt, n, 11);
	assert_int_equal(a->cfg.L * a->cfg.E, 8);
	for (int i = 0; i < 8; i++)
		slots[i] = loc[i % 4];
	sh = (struct model_shard){ .layer_count = a->cfg.L, .ep = 1, .experts = slots };
	assert_int_equal(model_create_shard(&b, &a->cfg, B, 1, &sh,
					    &sigma_ops_cpu, err, sizeof(err)),
			 0);
	model_init_weights(b, 7);
	/* slot j starts as expert loc[j] of the whole model */
	assert_memory_equal(b->P.layer[0].w1, a->P.layer[0].w1 + 3 * 64 * 128,
			    sizeof(float) * 64 * 128);
	ep_fixture_init(&f, a->cfg.E, a->cfg.L, loc);
	assert_int_equal(dist_ep_attach(&f.d, b), 0);

	model_forward(a, tok, tgt);
	model_backward(a);
	model_forward(b, tok, tgt);
	assert_int_equal(f.d.ep_err, 0);
	model_backward(b);
	assert_int_equal(f.d.ep_err, 0);
	assert_true(isfinite(a->loss));
	assert_true(fabs(a->ce - b->ce) <= 1e-5 * fabs(a->ce));
	assert_true(fabs(a->aux - b->aux) <= 1e-6 * fabs(a->aux));
	assert_grads_close(b, a, 1e-4);
	/* the expert exchange's time is counted */
	assert_true(f.d.comm_ns > 0);

	ep_fixture_fini(&f);
	model_destroy(a);
	model_destroy(b);
	free(tok);
	free(tgt);
}

/* dist_step's micro-batches: with one stage, forward then backward of
 * each in turn, the losses their means, the gradients the mean. */
static void test_pipe_micro_batches(void **state)
{
	struct model *m = small(2, 3), *r = small(1, 3);
	int n = B * m->cfg.T;
	int32_t *tok = calloc(2 * (size_t)n, sizeof(*tok));
	int32_t *tgt = calloc(2 * (size_t)n, sizeof(*tgt));
	float *g = calloc(r->nparams, sizeof(float));
	double ce = 0.0, aux = 0.0;
	struct dist d;
	char err[256];

	(void)state;
	assert_non_null(tok);
	assert_non_null(tgt);
	assert_non_null(g);
	tokens(tok, tgt, 2 * n, 5);
	assert_int_equal(dist_init(&d, 0, 1, 1, 2, m->cfg.E, m->cfg.L, 2 * B,
				   err, sizeof(err)),
			 0);
	assert_int_equal(d.size, 1);
	assert_int_equal(d.micro, 2);
	assert_int_equal(d.nsched, 4);
	for (size_t i = 0; i < d.nsched; i++) {
		assert_int_equal(d.sched[i].op, i % 2 ? PIPE_BWD : PIPE_FWD);
		assert_int_equal(d.sched[i].micro, (int)i / 2);
	}
	/* one process: no expert hooks, no counts reduction */
	assert_int_equal(dist_attach(&d, m, err, sizeof(err)), 0);
	assert_null(m->experts);
	assert_null(m->counts_reduce);
	assert_int_equal(dist_step(&d, m, tok, tgt), 0);
	assert_int_equal(dist_grad_finish(&d), 0);

	/* the reference: each micro-batch alone, gradients scaled by 1/2 */
	for (int i = 0; i < 2; i++) {
		model_forward(r, tok + i * n, tgt + i * n);
		model_backward(r);
		ce += r->ce / 2, aux += r->aux / 2;
		for (size_t p = 0; p < r->nparams; p++)
			g[p] += r->grads[p] / 2;
	}
	assert_true(fabs(m->ce - ce) <= 1e-6 * fabs(ce));
	assert_true(fabs(m->aux - aux) <= 1e-6 * fabs(aux));
	assert_true(fabs(m->loss - (ce + m->cfg.aux_coef * aux)) <=
		    1e-6 * fabs(m->loss));
	assert_close(m->grads, g, r->nparams, 1e-4);

	/* the forward pass alone: the model's loss on activation set 0 */
	assert_int_equal(dist_forward(&d, m, tok + n, tgt + n), 0);
	model_forward(r, tok + n, tgt + n);
	assert_true(fabs(m->ce - r->ce) <= 1e-6 * fabs(r->ce));
	assert_int_equal(dist_forward_error(&d), 0);

	dist_fini(&d);
	model_destroy(m);
	model_destroy(r);
	free(tok);
	free(tgt);
	free(g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ep_dispatch_combine),
		cmocka_unit_test(test_ep_hooks_match_model),
		cmocka_unit_test(test_pipe_micro_batches),
	};

	return cmocka_run_group_tests(tests, setup_env, NULL);
}
