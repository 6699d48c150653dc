/*
 * test_kernels_cpu.c - every CPU op against finite differences of its own
 * forward (objective J = sum(out * R) for a fixed random R), plus exact
 * checks of routing, reductions and AdamW.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ops.h"

static const struct sigma_ops *o = &sigma_ops_cpu;

static uint64_t seed_state = 12345;

static float frand(void)
{
	seed_state = seed_state * 6364136223846793005ULL + 1442695040888963407ULL;
	return (float)((double)(seed_state >> 40) / (double)(1ULL << 24)) * 2.0f - 1.0f;
}

static float *rnd(size_t n, float scale)
{
	float *x = o->alloc(sizeof(float) * n);

	assert_non_null(x);
	for (size_t i = 0; i < n; i++)
		x[i] = scale * frand();
	return x;
}

static float *zeros(size_t n)
{
	float *x = o->alloc(sizeof(float) * n);

	assert_non_null(x);
	return x;
}

/* ---- finite differences -------------------------------------------------- */

struct fd {
	void (*fwd)(void *ctx);
	void *ctx;
	const float *y; /* output */
	const float *r; /* objective weights */
	size_t ny;
};

static double fd_objective(struct fd *f)
{
	double s = 0.0;

	f->fwd(f->ctx);
	for (size_t i = 0; i < f->ny; i++)
		s += (double)f->y[i] * f->r[i];
	return s;
}

/* Central differences at up to 32 spread-out elements of x against an. */
static void fd_check(struct fd *f, float *x, size_t n, const float *an,
		     float eps, const char *what)
{
	int bad = 0, samples = n < 32 ? (int)n : 32;

	for (int s = 0; s < samples; s++) {
		size_t i = (size_t)s * n / samples + (size_t)(s % 3) % n;
		float x0;
		double jp, jm, num;

		if (i >= n)
			i = n - 1;
		x0 = x[i];
		x[i] = x0 + eps;
		jp = fd_objective(f);
		x[i] = x0 - eps;
		jm = fd_objective(f);
		x[i] = x0;
		num = (jp - jm) / (2.0 * eps);
		if (fabs(num - an[i]) >
		    2e-3 + 2e-2 * fmax(fabs(num), fabs(an[i]))) {
			print_message("%s[%zu]: numeric %.6g analytic %.6g\n",
				      what, i, num, (double)an[i]);
			bad++;
		}
	}
	fd_objective(f);
	assert_int_equal(bad, 0);
}

/* ---- matmul -------------------------------------------------------------- */

struct mm {
	float *out, *in, *w;
	int N, C, OC;
	const int *offs;
	int G;
};

static void mm_fwd(void *p)
{
	struct mm *c = p;

	o->matmul_forward(c->out, c->in, c->w, c->N, c->C, c->OC, 0);
}

static void test_matmul(void **state)
{
	int N = 150, C = 40, OC = 24; /* N spans two row chunks */
	struct mm c = { zeros(N * OC), rnd(N * C, 1), rnd(C * OC, 1), N, C, OC,
			NULL, 0 };
	float *r = rnd(N * OC, 1), *din = zeros(N * C), *dw = zeros(C * OC);
	struct fd f = { mm_fwd, &c, c.out, r, (size_t)N * OC };

	(void)state;
	mm_fwd(&c);
	/* against a plain triple loop */
	for (int n = 0; n < N; n += 7)
		for (int j = 0; j < OC; j++) {
			double s = 0;

			for (int i = 0; i < C; i++)
				s += (double)c.in[n * C + i] * c.w[i * OC + j];
			assert_true(fabs(s - c.out[n * OC + j]) < 1e-4);
		}
	o->matmul_backward(din, dw, r, c.in, c.w, N, C, OC, 0);
	fd_check(&f, c.in, (size_t)N * C, din, 1e-2f, "matmul din");
	fd_check(&f, c.w, (size_t)C * OC, dw, 1e-2f, "matmul dw");
	/* accumulate adds to din; dw always adds */
	{
		float d0 = din[17], w0 = dw[5];

		o->matmul_backward(din, dw, r, c.in, c.w, N, C, OC, 1);
		assert_true(fabs(din[17] - 2 * d0) < 1e-5 * fabs(d0) + 1e-6);
		assert_true(fabs(dw[5] - 2 * w0) < 1e-5 * fabs(w0) + 1e-6);
		o->matmul_backward(din, NULL, r, c.in, c.w, N, C, OC, 0);
		assert_true(fabs(din[17] - d0) < 1e-5 * fabs(d0) + 1e-6);
	}
	o->free(c.out), o->free(c.in), o->free(c.w), o->free(r);
	o->free(din), o->free(dw);
}

static void gmm_fwd(void *p)
{
	struct mm *c = p;

	o->grouped_matmul_forward(c->out, c->in, c->w, c->offs, c->G, c->C,
				  c->OC);
}

static void test_grouped_matmul(void **state)
{
	int G = 3, C = 20, OC = 12, offs[4] = { 0, 140, 140, 170 };
	int R = offs[G];
	struct mm c = { zeros(R * OC), rnd(R * C, 1), rnd(G * C * OC, 1), R, C,
			OC, offs, G };
	float *r = rnd(R * OC, 1), *din = zeros(R * C), *dw = zeros(G * C * OC);
	struct fd f = { gmm_fwd, &c, c.out, r, (size_t)R * OC };

	(void)state;
	o->grouped_matmul_backward(din, dw, r, c.in, c.w, offs, G, C, OC, 0);
	fd_check(&f, c.in, (size_t)R * C, din, 1e-2f, "grouped din");
	fd_check(&f, c.w, (size_t)G * C * OC, dw, 1e-2f, "grouped dw");
	/* the empty group's gradient stays zero */
	for (int i = 0; i < C * OC; i++)
		assert_true(dw[C * OC + i] == 0.0f);
	o->free(c.out), o->free(c.in), o->free(c.w), o->free(r);
	o->free(din), o->free(dw);
}

/* ---- embedding, rmsnorm, rope -------------------------------------------- */

struct emb {
	float *out, *emb;
	int32_t *tok;
	int N, V, D;
};

static void emb_fwd(void *p)
{
	struct emb *c = p;

	o->embedding_forward(c->out, c->tok, c->emb, c->N, c->D);
}

static void test_embedding(void **state)
{
	int N = 40, V = 10, D = 36;
	int32_t tok[40];
	struct emb c = { zeros(N * D), rnd(V * D, 1), tok, N, V, D };
	float *r = rnd(N * D, 1), *demb = zeros(V * D);
	struct fd f = { emb_fwd, &c, c.out, r, (size_t)N * D };

	(void)state;
	for (int i = 0; i < N; i++)
		tok[i] = (i * 7) % (V - 1); /* the last row is never used */
	o->embedding_backward(demb, r, tok, N, V, D);
	fd_check(&f, c.emb, (size_t)V * D, demb, 1e-2f, "embedding");
	for (int d = 0; d < D; d++)
		assert_true(demb[(V - 1) * D + d] == 0.0f);
	o->free(c.out), o->free(c.emb), o->free(r), o->free(demb);
}

struct rms {
	float *out, *rstd, *x, *g;
	int N, D;
};

static void rms_fwd(void *p)
{
	struct rms *c = p;

	o->rmsnorm_forward(c->out, c->rstd, c->x, c->g, c->N, c->D);
}

static void test_rmsnorm(void **state)
{
	int N = 20, D = 40;
	struct rms c = { zeros(N * D), zeros(N), rnd(N * D, 2), rnd(D, 1), N,
			 D };
	float *r = rnd(N * D, 1), *dx = zeros(N * D), *dg = zeros(D);
	struct fd f = { rms_fwd, &c, c.out, r, (size_t)N * D };
	double ms = 0;

	(void)state;
	rms_fwd(&c);
	for (int d = 0; d < D; d++)
		ms += (double)c.x[d] * c.x[d];
	assert_true(fabs(c.rstd[0] - 1.0 / sqrt(ms / D + 1e-5)) < 1e-5);
	o->rmsnorm_backward(dx, dg, r, c.x, c.g, c.rstd, N, D);
	fd_check(&f, c.x, (size_t)N * D, dx, 1e-3f, "rmsnorm dx");
	fd_check(&f, c.g, D, dg, 1e-2f, "rmsnorm dg");
	o->free(c.out), o->free(c.rstd), o->free(c.x), o->free(c.g);
	o->free(r), o->free(dx), o->free(dg);
}

struct rope {
	float *out, *in;
	int B, T, H, Dh;
};

static void rope_fwd(void *p)
{
	struct rope *c = p;

	o->rope(c->out, c->in, c->B, c->T, c->H, c->Dh, 1);
}

static void test_rope(void **state)
{
	int B = 2, T = 9, H = 3, Dh = 8, n = B * T * H * Dh;
	struct rope c = { zeros(n), rnd(n, 1), B, T, H, Dh };
	float *r = rnd(n, 1), *din = zeros(n), *back = zeros(n);
	struct fd f = { rope_fwd, &c, c.out, r, (size_t)n };
	double theta = pow(10000.0, -2.0 * 1 / Dh);

	(void)state;
	rope_fwd(&c);
	/* position 0 is the identity; position 3, pair 1 by hand */
	for (int i = 0; i < H * Dh; i++)
		assert_true(c.out[i] == c.in[i]);
	{
		size_t b = (size_t)3 * H * Dh + Dh; /* t = 3, head 1 */
		double a = 3 * theta;
		double y = c.in[b + 1] * cos(a) - c.in[b + 1 + Dh / 2] * sin(a);

		assert_true(fabs(y - c.out[b + 1]) < 1e-6);
	}
	/* rotating back restores the input */
	o->rope(back, c.out, B, T, H, Dh, -1);
	for (int i = 0; i < n; i++)
		assert_true(fabs(back[i] - c.in[i]) < 1e-5);
	o->rope(din, r, B, T, H, Dh, -1);
	fd_check(&f, c.in, (size_t)n, din, 1e-2f, "rope");
	o->free(c.out), o->free(c.in), o->free(r), o->free(din), o->free(back);
}

/* ---- attention ----------------------------------------------------------- */

struct att {
	float *out, *att, *q, *k, *v;
	int B, T, H, Dh;
};

static void att_fwd(void *p)
{
	struct att *c = p;

	o->attention_forward(c->out, c->att, c->q, c->k, c->v, c->B, c->T,
			     c->H, c->Dh);
}

static void test_attention(void **state)
{
	int B = 2, T = 7, H = 2, Dh = 4, n = B * T * H * Dh;
	struct att c = { zeros(n), zeros(B * H * T * T), rnd(n, 1), rnd(n, 1),
			 rnd(n, 1), B, T, H, Dh };
	float *r = rnd(n, 1), *dq = zeros(n), *dk = zeros(n), *dv = zeros(n);
	float *scratch = zeros(B * H * T * T);
	struct fd f = { att_fwd, &c, c.out, r, (size_t)n };

	(void)state;
	att_fwd(&c);
	/* causal: the first position attends only to itself */
	for (int d = 0; d < Dh; d++)
		assert_true(fabs(c.out[d] - c.v[d]) < 1e-6);
	for (int i = 0; i < T; i++) {
		double s = 0;

		for (int j = 0; j < T; j++) {
			s += c.att[i * T + j];
			if (j > i)
				assert_true(c.att[i * T + j] == 0.0f);
		}
		assert_true(fabs(s - 1.0) < 1e-5);
	}
	o->attention_backward(dq, dk, dv, scratch, r, c.q, c.k, c.v, c.att, B,
			      T, H, Dh);
	fd_check(&f, c.q, n, dq, 1e-2f, "attention dq");
	fd_check(&f, c.k, n, dk, 1e-2f, "attention dk");
	fd_check(&f, c.v, n, dv, 1e-2f, "attention dv");
	o->free(c.out), o->free(c.att), o->free(c.q), o->free(c.k);
	o->free(c.v), o->free(r), o->free(dq), o->free(dk), o->free(dv);
	o->free(scratch);
}

/* ---- softmax, swiglu, cross-entropy -------------------------------------- */

struct sm {
	float *p, *l;
	int N, C;
};

static void sm_fwd(void *x)
{
	struct sm *c = x;

	o->softmax_forward(c->p, c->l, c->N, c->C);
}

static void test_softmax(void **state)
{
	int N = 10, C = 6;
	struct sm c = { zeros(N * C), rnd(N * C, 3), N, C };
	float *r = rnd(N * C, 1), *dl = zeros(N * C);
	struct fd f = { sm_fwd, &c, c.p, r, (size_t)N * C };

	(void)state;
	sm_fwd(&c);
	o->softmax_backward(dl, r, c.p, N, C);
	fd_check(&f, c.l, (size_t)N * C, dl, 1e-3f, "softmax");
	o->free(c.p), o->free(c.l), o->free(r), o->free(dl);
}

struct sw {
	float *h, *a, *b;
	size_t n;
};

static void sw_fwd(void *x)
{
	struct sw *c = x;

	o->swiglu_forward(c->h, c->a, c->b, c->n);
}

static void test_swiglu(void **state)
{
	size_t n = 300;
	struct sw c = { zeros(n), rnd(n, 4), rnd(n, 2), n };
	float *r = rnd(n, 1), *da = zeros(n), *db = zeros(n);
	struct fd f = { sw_fwd, &c, c.h, r, n };

	(void)state;
	sw_fwd(&c);
	assert_true(fabs(c.h[5] - c.a[5] / (1 + exp(-c.a[5])) * c.b[5]) < 1e-5);
	o->swiglu_backward(da, db, r, c.a, c.b, n);
	fd_check(&f, c.a, n, da, 1e-3f, "swiglu da");
	fd_check(&f, c.b, n, db, 1e-3f, "swiglu db");
	o->free(c.h), o->free(c.a), o->free(c.b), o->free(r), o->free(da);
	o->free(db);
}

struct ce {
	float *losses, *probs, *logits;
	int32_t *tg;
	int N, V;
};

static void ce_fwd(void *x)
{
	struct ce *c = x;

	o->crossentropy_forward(c->losses, c->probs, c->logits, c->tg, c->N,
				c->V);
}

static void test_crossentropy(void **state)
{
	int N = 12, V = 17;
	int32_t tg[12];
	struct ce c = { zeros(N), zeros(N * V), rnd(N * V, 3), tg, N, V };
	float *r = zeros(N), *dl = zeros(N * V);
	struct fd f = { ce_fwd, &c, c.losses, r, (size_t)N };
	double lse = 0;

	(void)state;
	for (int i = 0; i < N; i++) {
		tg[i] = (i * 5) % V;
		r[i] = 1.0f / N; /* J = mean loss */
	}
	ce_fwd(&c);
	for (int v = 0; v < V; v++)
		lse += exp(c.logits[v]);
	assert_true(fabs(c.losses[0] - (log(lse) - c.logits[tg[0]])) < 1e-5);
	o->crossentropy_backward(dl, c.probs, tg, 1.0f / N, N, V);
	fd_check(&f, c.logits, (size_t)N * V, dl, 1e-2f, "crossentropy");
	o->free(c.losses), o->free(c.probs), o->free(c.logits), o->free(r);
	o->free(dl);
}

/* ---- mixture of experts --------------------------------------------------- */

static void test_moe_route(void **state)
{
	enum { N = 5, E = 4, K = 2 };
	float p[N * E] = {
		0.1f, 0.4f, 0.3f, 0.2f, /* 1, 2 */
		0.25f, 0.25f, 0.25f, 0.25f, /* ties: 0, 1 */
		0.7f, 0.1f, 0.1f, 0.1f, /* 0, then tie 1 */
		0.0f, 0.0f, 0.5f, 0.5f, /* 2, 3 */
		0.1f, 0.2f, 0.3f, 0.4f, /* 3, 2 */
	};
	int idx[N * K], counts[E], offs[E + 1], perm[N * K], pos[N * K];
	float gate[N * K], aux;
	int want[N * K] = { 1, 2, 0, 1, 0, 1, 2, 3, 3, 2 };

	(void)state;
	o->moe_route(idx, gate, counts, offs, perm, pos, p, N, E, K);
	for (int i = 0; i < N * K; i++)
		assert_int_equal(idx[i], want[i]);
	assert_true(fabs(gate[0] - 0.4 / 0.7) < 1e-6);
	assert_int_equal(counts[0], 2);
	assert_int_equal(counts[1], 3);
	assert_int_equal(counts[2], 3);
	assert_int_equal(counts[3], 2);
	assert_int_equal(offs[E], N * K);
	for (int r = 0; r < N * K; r++) {
		assert_int_equal(pos[perm[r]], r);
		/* expert-sorted, token order within an expert */
		assert_true(r >= offs[idx[perm[r]]] &&
			    r < offs[idx[perm[r]] + 1]);
		if (r > 0 && idx[perm[r]] == idx[perm[r - 1]])
			assert_true(perm[r] > perm[r - 1]);
	}
	o->moe_aux_loss(&aux, p, counts, N, E, K);
	{
		double ref = 0;

		for (int e = 0; e < E; e++) {
			double pe = 0;

			for (int n = 0; n < N; n++)
				pe += p[n * E + e];
			ref += counts[e] / (double)(N * K) * pe / N;
		}
		assert_true(fabs(aux - E * ref) < 1e-6);
	}
}

/* combine(gather(m) through a fixed "expert" = identity) from p */
struct router {
	float *p, *gate, *x, *eo, aux;
	int *idx, *counts, *offs, *perm, *pos;
	float *rg; /* weights of the gate objective */
	float aux_scale;
	int N, E, K, D;
	float *y; /* [N*K + 1]: gate * rg, then aux_scale * aux */
};

static void router_fwd(void *v)
{
	struct router *c = v;

	o->moe_route(c->idx, c->gate, c->counts, c->offs, c->perm, c->pos,
		     c->p, c->N, c->E, c->K);
	o->moe_aux_loss(&c->aux, c->p, c->counts, c->N, c->E, c->K);
	for (int i = 0; i < c->N * c->K; i++)
		c->y[i] = c->gate[i];
	c->y[c->N * c->K] = c->aux;
}

static void test_moe_router_backward(void **state)
{
	enum { N = 9, E = 5, K = 2 };
	struct router c = { 0 };
	float *r, *dp, *lg;
	int idx0[N * K];
	struct fd f;

	(void)state;
	c.N = N, c.E = E, c.K = K, c.aux_scale = 0.7f;
	lg = rnd(N * E, 2);
	c.p = zeros(N * E);
	o->softmax_forward(c.p, lg, N, E);
	c.gate = zeros(N * K);
	c.idx = calloc(N * K, sizeof(int));
	c.counts = calloc(E, sizeof(int));
	c.offs = calloc(E + 1, sizeof(int));
	c.perm = calloc(N * K, sizeof(int));
	c.pos = calloc(N * K, sizeof(int));
	c.y = zeros(N * K + 1);
	r = rnd(N * K + 1, 1);
	r[N * K] = c.aux_scale;
	dp = zeros(N * E);
	router_fwd(&c);
	memcpy(idx0, c.idx, sizeof(idx0));
	o->moe_router_backward(dp, r, c.p, c.idx, c.gate, c.counts,
			       c.aux_scale, N, E, K);
	f = (struct fd){ router_fwd, &c, c.y, r, (size_t)N * K + 1 };
	fd_check(&f, c.p, (size_t)N * E, dp, 1e-4f, "router dp");
	assert_memory_equal(idx0, c.idx, sizeof(idx0)); /* no flips */
	o->free(lg), o->free(c.p), o->free(c.gate), o->free(c.y), o->free(r);
	o->free(dp);
	free(c.idx), free(c.counts), free(c.offs), free(c.perm), free(c.pos);
}

struct comb {
	float *x, *m, *xe, *eo, *gate, *base;
	int *perm, *pos;
	int N, K, D;
};

/* x = base + sum_j gate * (gather(m) * 2 + eo) : exercises gather+combine */
static void comb_fwd(void *v)
{
	struct comb *c = v;
	size_t nk = (size_t)c->N * c->K * c->D;
	float *t = malloc(sizeof(float) * nk);

	o->moe_gather(c->xe, c->m, c->perm, c->N, c->K, c->D);
	for (size_t i = 0; i < nk; i++)
		t[i] = 2.0f * c->xe[i] + c->eo[i];
	memcpy(c->x, c->base, sizeof(float) * c->N * c->D);
	o->moe_combine(c->x, t, c->gate, c->pos, c->N, c->K, c->D);
	free(t);
}

static void test_moe_gather_combine(void **state)
{
	enum { N = 6, E = 3, K = 2, D = 5 };
	float p[N * E];
	int idx[N * K], counts[E], offs[E + 1], perm[N * K], pos[N * K];
	struct comb c = { zeros(N * D), rnd(N * D, 1), zeros(N * K * D),
			  rnd(N * K * D, 1), zeros(N * K), rnd(N * D, 1), perm,
			  pos, N, K, D };
	float *r = rnd(N * D, 1), *deo = zeros(N * K * D), *dg = zeros(N * K);
	float *dm = zeros(N * D), *t = zeros(N * K * D);
	float *dgate_num = zeros(N * K);
	struct fd f = { comb_fwd, &c, c.x, r, (size_t)N * D };

	(void)state;
	for (int i = 0; i < N * E; i++)
		p[i] = (float)((i * 7) % 11) + 0.1f * i;
	o->moe_route(idx, c.gate, counts, offs, perm, pos, p, N, E, K);
	comb_fwd(&c);
	/* the combine's input t for the backward */
	for (int i = 0; i < N * K * D; i++)
		t[i] = 2.0f * c.xe[i] + c.eo[i];
	o->moe_combine_backward(deo, dg, r, t, c.gate, pos, N, K, D);
	fd_check(&f, c.eo, (size_t)N * K * D, deo, 1e-2f, "combine deout");
	fd_check(&f, c.gate, (size_t)N * K, dg, 1e-2f, "combine dgate");
	/* d/dm = gather_backward(2 * deo) */
	for (int i = 0; i < N * K * D; i++)
		t[i] = 2.0f * deo[i];
	o->moe_gather_backward(dm, t, pos, N, K, D);
	fd_check(&f, c.m, (size_t)N * D, dm, 1e-2f, "gather dm");
	o->free(c.x), o->free(c.m), o->free(c.xe), o->free(c.eo);
	o->free(c.gate), o->free(c.base), o->free(r), o->free(deo);
	o->free(dg), o->free(dm), o->free(t), o->free(dgate_num);
}

/* ---- reductions and AdamW ------------------------------------------------- */

static void test_sum_and_adamw(void **state)
{
	size_t n = 10007;
	float *x = rnd(n, 1), *m = zeros(n), *v = zeros(n), *g = rnd(n, 1);
	float *p0;
	double s = 0, ss = 0, got;

	(void)state;
	for (size_t i = 0; i < n; i++)
		s += x[i], ss += (double)x[i] * x[i];
	o->sum(&got, x, n);
	assert_true(fabs(got - s) < 1e-9 * n);
	o->sumsq(&got, x, n);
	assert_true(fabs(got - ss) < 1e-9 * n);

	p0 = zeros(n);
	memcpy(p0, x, sizeof(float) * n);
	o->scale(p0, 0.25f, n);
	for (size_t i = 0; i < n; i += 97)
		assert_true(p0[i] == 0.25f * x[i]); /* exact: a power of 2 */
	o->scale(p0, 4.0f, n);
	assert_memory_equal(p0, x, sizeof(float) * n);
	o->scale(p0, 1.0f / 3.0f, n);
	for (size_t i = 0; i < n; i += 97)
		assert_true(p0[i] == x[i] * (1.0f / 3.0f));
	memcpy(p0, x, sizeof(float) * n);
	o->adamw(x, m, v, g, n, 0.01f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, 1);
	for (size_t i = 0; i < n; i += 101) {
		double gi = 0.5 * g[i];
		double mi = 0.1 * gi, vi = 0.05 * gi * gi;
		double upd = (mi / 0.1) / (sqrt(vi / 0.05) + 1e-8);
		double want = p0[i] - 0.01 * (upd + 0.1 * p0[i]);

		assert_true(fabs(m[i] - mi) < 1e-7);
		assert_true(fabs(v[i] - vi) < 1e-7);
		assert_true(fabs(x[i] - want) < 1e-6);
	}
	o->free(x), o->free(m), o->free(v), o->free(g), o->free(p0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_matmul),
		cmocka_unit_test(test_grouped_matmul),
		cmocka_unit_test(test_embedding),
		cmocka_unit_test(test_rmsnorm),
		cmocka_unit_test(test_rope),
		cmocka_unit_test(test_attention),
		cmocka_unit_test(test_softmax),
		cmocka_unit_test(test_swiglu),
		cmocka_unit_test(test_crossentropy),
		cmocka_unit_test(test_moe_route),
		cmocka_unit_test(test_moe_router_backward),
		cmocka_unit_test(test_moe_gather_combine),
		cmocka_unit_test(test_sum_and_adamw),
	};

	assert_int_equal(o->init(2), 0);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
