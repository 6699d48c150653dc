/*
 * test_kernels_cuda.c - every op of the CUDA table against the CPU table on
 * the same random inputs, forward and backward, at per-precision
 * tolerances. The error of a tensor is max |cuda - cpu| / max |cpu| (so a
 * near-zero element is judged on the tensor's scale); integer outputs
 * (routing) must match exactly. Prints one line per op and tensor: the
 * figures contrib/gpu-check reports.
 *
 * Shapes include what the model meets at scale: attention at T = 1024 with
 * Dh = 128, the fused kernels without the T x T buffers, routing over 32
 * and 64 experts with K = 1, K = E, an empty expert, N = 0 and a sort of
 * many tiles, and reductions over more spans than the 1024 blocks.
 *
 * Without a CUDA device the whole program is skipped (exit 77).
 */
#include "config.h"

#include <math.h>
#include <stdbool.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "ops.h"
#include "bf16.h"
#include "select.h"
#include "cuda/sigma_cuda.h"

/* fp32: cuBLAS and the kernels sum in other orders than BLAS and the CPU */
#define TOL_FP32 2e-5
/* bf16 inputs (8-bit mantissa) to the matrix products, fp32 accumulation */
#define TOL_BF16 1e-2
/* attention through cuBLAS in bf16: two products in a chain */
#define TOL_BF16_ATT 3e-2

static const struct sigma_ops *cpu = &sigma_ops_cpu;
static const struct sigma_ops *gpu;
static double tol_mm = TOL_FP32; /* the matrix products' tolerance now */
static const char *prec_name = "fp32";
static double worst_fp32, worst_bf16;

static uint64_t seed_state = 20261129;

static float frand(void)
{
	seed_state =
	    seed_state * 6364136223846793005ULL + 1442695040888963407ULL;
	return (float)((double)(seed_state >> 40) / (double)(1ULL << 24)) *
		   2.0f -
	       1.0f;
}

/* one tensor on both sides: host (the CPU op's memory) and device */
struct pair {
	float *h;
	float *d;
	size_t n;
};

static struct pair pair_new(size_t n, float scale)
{
	struct pair p = {cpu->alloc(sizeof(float) * n),
			 gpu->alloc(sizeof(float) * n), n};

	assert_non_null(p.h);
	assert_non_null(p.d);
	for (size_t i = 0; i < n; i++)
		p.h[i] = scale * frand();
	gpu->from_host(p.d, p.h, sizeof(float) * n);
	return p;
}

static void pair_free(struct pair *p)
{
	cpu->free(p->h);
	gpu->free(p->d);
	p->h = p->d = NULL;
}

/* integer arrays: host copy and device copy of the same values */
struct ipair {
	int *h;
	int *d;
	size_t n;
};

static struct ipair ipair_new(size_t n)
{
	struct ipair p = {cpu->alloc(sizeof(int) * n),
			  gpu->alloc(sizeof(int) * n), n};

	assert_non_null(p.h);
	assert_non_null(p.d);
	return p;
}

static void ipair_push(struct ipair *p)
{
	gpu->from_host(p->d, p->h, sizeof(int) * p->n);
}

static void ipair_free(struct ipair *p)
{
	cpu->free(p->h);
	gpu->free(p->d);
}

/* relative error of the device tensor against the CPU's, asserted <= tol */
static double check(const char *op, const char *what, const struct pair *p,
		    double tol)
{
	float *got = malloc(sizeof(float) * (p->n ? p->n : 1));
	double maxref = 0.0, maxdiff = 0.0, err;
	size_t worst = 0;

	assert_non_null(got);
	gpu->to_host(got, p->d, sizeof(float) * p->n);
	for (size_t i = 0; i < p->n; i++) {
		double d = fabs((double)got[i] - (double)p->h[i]);

		if (!isfinite(got[i]))
			d = INFINITY;
		if (fabs(p->h[i]) > maxref)
			maxref = fabs(p->h[i]);
		if (d > maxdiff) {
			maxdiff = d;
			worst = i;
		}
	}
	err = maxref > 0.0 ? maxdiff / maxref : maxdiff;
	printf("cuda-vs-cpu %-4s %-24s %-6s max rel err %.3e (tol %.0e)%s\n",
	       prec_name, op, what, err, tol, err <= tol ? "" : "  FAIL");
	if (err > tol)
		printf("  worst element %zu: cuda %.9g cpu %.9g\n", worst,
		       (double)got[worst], (double)p->h[worst]);
	if (tol >= TOL_BF16 && err > worst_bf16)
		worst_bf16 = err;
	else if (tol < TOL_BF16 && err > worst_fp32)
		worst_fp32 = err;
	free(got);
	assert_true(err <= tol);
	return err;
}

static void check_int(const char *op, const char *what, const struct ipair *p)
{
	int *got = malloc(sizeof(int) * (p->n ? p->n : 1));
	size_t bad = 0;

	assert_non_null(got);
	gpu->to_host(got, p->d, sizeof(int) * p->n);
	for (size_t i = 0; i < p->n; i++)
		bad += got[i] != p->h[i];
	printf("cuda-vs-cpu %-4s %-24s %-6s %zu of %zu differ (exact)\n",
	       prec_name, op, what, bad, p->n);
	free(got);
	assert_int_equal(bad, 0);
}

/* ---- matrix products ----------------------------------------------------- */

static void test_matmul(void **state)
{
	int N = 70, C = 48, OC = 40;
	struct pair in = pair_new((size_t)N * C, 1.0f);
	struct pair w = pair_new((size_t)C * OC, 0.5f);
	struct pair out = pair_new((size_t)N * OC, 1.0f);
	struct pair dout = pair_new((size_t)N * OC, 1.0f);
	struct pair din = pair_new((size_t)N * C, 1.0f);
	struct pair dw = pair_new((size_t)C * OC, 1.0f);

	(void)state;
	for (int acc = 0; acc <= 1; acc++) {
		cpu->matmul_forward(out.h, in.h, w.h, N, C, OC, acc);
		gpu->matmul_forward(out.d, in.d, w.d, N, C, OC, acc);
		check(acc ? "matmul_forward(add)" : "matmul_forward", "out",
		      &out, tol_mm);
		cpu->matmul_backward(din.h, dw.h, dout.h, in.h, w.h, N, C, OC,
				     acc);
		gpu->matmul_backward(din.d, dw.d, dout.d, in.d, w.d, N, C, OC,
				     acc);
		check(acc ? "matmul_backward(add)" : "matmul_backward", "din",
		      &din, tol_mm);
		check(acc ? "matmul_backward(add)" : "matmul_backward", "dw",
		      &dw, tol_mm);
	}
	/* din NULL: only the weight gradient */
	cpu->matmul_backward(NULL, dw.h, dout.h, in.h, w.h, N, C, OC, 0);
	gpu->matmul_backward(NULL, dw.d, dout.d, in.d, w.d, N, C, OC, 0);
	check("matmul_backward(nodin)", "dw", &dw, tol_mm);
	pair_free(&in);
	pair_free(&w);
	pair_free(&out);
	pair_free(&dout);
	pair_free(&din);
	pair_free(&dw);
}

static void test_grouped_matmul(void **state)
{
	int G = 5, C = 40, OC = 24;
	int counts[5] = {17, 0, 33, 1, 29}; /* an empty expert, a single row */
	struct ipair offs = ipair_new((size_t)G + 1);
	int R;

	(void)state;
	offs.h[0] = 0;
	for (int g = 0; g < G; g++)
		offs.h[g + 1] = offs.h[g] + counts[g];
	R = offs.h[G];
	ipair_push(&offs);
	{
		struct pair in = pair_new((size_t)R * C, 1.0f);
		struct pair w = pair_new((size_t)G * C * OC, 0.5f);
		struct pair out = pair_new((size_t)R * OC, 1.0f);
		struct pair dout = pair_new((size_t)R * OC, 1.0f);
		struct pair din = pair_new((size_t)R * C, 1.0f);
		struct pair dw = pair_new((size_t)G * C * OC, 1.0f);

		cpu->grouped_matmul_forward(out.h, in.h, w.h, offs.h, G, C, OC);
		gpu->grouped_matmul_forward(out.d, in.d, w.d, offs.d, G, C, OC);
		check("grouped_matmul_forward", "out", &out, tol_mm);
		for (int acc = 0; acc <= 1; acc++) {
			cpu->grouped_matmul_backward(din.h, dw.h, dout.h, in.h,
						     w.h, offs.h, G, C, OC,
						     acc);
			gpu->grouped_matmul_backward(din.d, dw.d, dout.d, in.d,
						     w.d, offs.d, G, C, OC,
						     acc);
			check(acc ? "grouped_matmul_bwd(add)"
				  : "grouped_matmul_backward",
			      "din", &din, tol_mm);
			check(acc ? "grouped_matmul_bwd(add)"
				  : "grouped_matmul_backward",
			      "dw", &dw, tol_mm);
		}
		pair_free(&in);
		pair_free(&w);
		pair_free(&out);
		pair_free(&dout);
		pair_free(&din);
		pair_free(&dw);
	}
	ipair_free(&offs);
}

/*
 * The guardrails' bf16 tables: CUDA against CPU (the same rounding of the
 * inputs, products exact in fp32, outputs rounded to bf16: at most one bf16
 * step apart), the overflow count and the injection hook.
 */
static void test_bf16_tables(void **state)
{
	const struct sigma_bf16 *cb = &sigma_bf16_cpu, *gb = sigma_cuda_bf16();
	int N = 50, C = 40, OC = 30, G = 3;
	struct pair in = pair_new((size_t)N * C, 1.0f);
	struct pair w = pair_new((size_t)G * C * OC, 0.5f);
	struct pair out = pair_new((size_t)N * OC, 1.0f);
	struct ipair offs = ipair_new((size_t)G + 1);
	uint64_t oc = 0, og = 0;

	(void)state;
	assert_non_null(gb);
	for (int acc = 0; acc <= 1; acc++) {
		cb->begin(&oc, 0);
		cb->ops->matmul_forward(out.h, in.h, w.h, N, C, OC, acc);
		gb->begin(&og, 0);
		gb->ops->matmul_forward(out.d, in.d, w.d, N, C, OC, acc);
		check(acc ? "bf16 table matmul(add)" : "bf16 table matmul",
		      "out", &out, TOL_BF16);
	}
	offs.h[0] = 0;
	offs.h[1] = 20;
	offs.h[2] = 20;
	offs.h[3] = N;
	ipair_push(&offs);
	cb->begin(&oc, 0);
	cb->ops->grouped_matmul_forward(out.h, in.h, w.h, offs.h, G, C, OC);
	gb->begin(&og, 0);
	gb->ops->grouped_matmul_forward(out.d, in.d, w.d, offs.d, G, C, OC);
	check("bf16 table grouped", "out", &out, TOL_BF16);
	assert_int_equal(oc, 0);
	assert_int_equal(og, 0);
	/*
	 * overflow: rows 0..2 of the input near the top of the range and
	 * positive weights, so that every order of summation overflows
	 */
	for (int i = 0; i < 3 * C; i++)
		in.h[i] = 3e38f;
	for (size_t i = 0; i < w.n; i++)
		w.h[i] = fabsf(w.h[i]);
	gpu->from_host(in.d, in.h, sizeof(float) * in.n);
	gpu->from_host(w.d, w.h, sizeof(float) * w.n);
	cb->begin(&oc, 0);
	cb->ops->matmul_forward(out.h, in.h, w.h, N, C, OC, 0);
	gb->begin(&og, 0);
	gb->ops->matmul_forward(out.d, in.d, w.d, N, C, OC, 0);
	printf("cuda-vs-cpu bf16 %-24s %-6s cpu %llu cuda %llu\n",
	       "bf16 table overflows", "count", (unsigned long long)oc,
	       (unsigned long long)og);
	assert_int_equal(oc, 3 * OC);
	assert_int_equal(og, oc);
	/* the injection hook: first output +inf, counted once */
	oc = og = 0;
	for (int i = 0; i < 3 * C; i++)
		in.h[i] = 0.5f;
	gpu->from_host(in.d, in.h, sizeof(float) * in.n);
	gb->begin(&og, 1);
	gb->ops->matmul_forward(out.d, in.d, w.d, N, C, OC, 0);
	gpu->to_host(out.h, out.d, sizeof(float));
	assert_true(isinf(out.h[0]));
	assert_int_equal(og, 1);
	gb->begin(NULL, 0);
	cb->begin(NULL, 0);
	pair_free(&in);
	pair_free(&w);
	pair_free(&out);
	ipair_free(&offs);
}

/* ---- embedding, norms, rotary ------------------------------------------- */

static void test_embedding(void **state)
{
	int N = 90, V = 23, D = 37; /* many repeated tokens */
	struct ipair tok = ipair_new((size_t)N);
	struct pair emb = pair_new((size_t)V * D, 1.0f);
	struct pair out = pair_new((size_t)N * D, 1.0f);
	struct pair dout = pair_new((size_t)N * D, 1.0f);
	struct pair demb = pair_new((size_t)V * D, 1.0f);

	(void)state;
	for (int n = 0; n < N; n++)
		tok.h[n] = (int)((frand() + 1.0f) * 0.5f * (V - 1) + 0.5f);
	ipair_push(&tok);
	cpu->embedding_forward(out.h, tok.h, emb.h, N, D);
	gpu->embedding_forward(out.d, tok.d, emb.d, N, D);
	check("embedding_forward", "out", &out, TOL_FP32);
	cpu->embedding_backward(demb.h, dout.h, tok.h, N, V, D);
	gpu->embedding_backward(demb.d, dout.d, tok.d, N, V, D);
	check("embedding_backward", "demb", &demb, TOL_FP32);
	ipair_free(&tok);
	pair_free(&emb);
	pair_free(&out);
	pair_free(&dout);
	pair_free(&demb);
}

static void test_rmsnorm(void **state)
{
	int N = 300, D = 72; /* more rows than one column chunk */
	struct pair x = pair_new((size_t)N * D, 2.0f);
	struct pair g = pair_new((size_t)D, 1.0f);
	struct pair out = pair_new((size_t)N * D, 1.0f);
	struct pair rstd = pair_new((size_t)N, 1.0f);
	struct pair dout = pair_new((size_t)N * D, 1.0f);
	struct pair dx = pair_new((size_t)N * D, 1.0f);
	struct pair dg = pair_new((size_t)D, 1.0f);

	(void)state;
	cpu->rmsnorm_forward(out.h, rstd.h, x.h, g.h, N, D);
	gpu->rmsnorm_forward(out.d, rstd.d, x.d, g.d, N, D);
	check("rmsnorm_forward", "out", &out, TOL_FP32);
	check("rmsnorm_forward", "rstd", &rstd, TOL_FP32);
	/* backward adds into dx and dg: both start from the same values */
	cpu->rmsnorm_backward(dx.h, dg.h, dout.h, x.h, g.h, rstd.h, N, D);
	gpu->rmsnorm_backward(dx.d, dg.d, dout.d, x.d, g.d, rstd.d, N, D);
	check("rmsnorm_backward", "dx", &dx, TOL_FP32);
	check("rmsnorm_backward", "dg", &dg, TOL_FP32);
	pair_free(&x);
	pair_free(&g);
	pair_free(&out);
	pair_free(&rstd);
	pair_free(&dout);
	pair_free(&dx);
	pair_free(&dg);
}

static void test_rope(void **state)
{
	int B = 2, T = 45, H = 3, Dh = 16;
	size_t n = (size_t)B * T * H * Dh;
	struct pair x = pair_new(n, 1.0f);
	struct pair y = pair_new(n, 0.0f);

	(void)state;
	cpu->rope(y.h, x.h, B, T, H, Dh, 1);
	gpu->rope(y.d, x.d, B, T, H, Dh, 1);
	check("rope", "fwd", &y, TOL_FP32);
	/* in place, backwards */
	cpu->rope(x.h, x.h, B, T, H, Dh, -1);
	gpu->rope(x.d, x.d, B, T, H, Dh, -1);
	check("rope(in place)", "bwd", &x, TOL_FP32);
	pair_free(&x);
	pair_free(&y);
}

/* ---- attention ------------------------------------------------------------
 */

/* nobuf: the GPU op gets att and scratch NULL, as the model passes them
 * when attention_plan says 0 (the fused kernels recompute) */
static void attention_case_buf(int B, int T, int H, int Dh, double tol,
			       bool nobuf)
{
	size_t n = (size_t)B * T * H * Dh, nt = (size_t)B * H * T * T;
	struct pair q = pair_new(n, 1.0f), k = pair_new(n, 1.0f);
	struct pair v = pair_new(n, 1.0f), dout = pair_new(n, 1.0f);
	struct pair out = pair_new(n, 0.0f), att = pair_new(nt, 0.0f);
	struct pair dq = pair_new(n, 0.0f), dk = pair_new(n, 0.0f);
	struct pair dv = pair_new(n, 0.0f), scr = pair_new(nt, 0.0f);
	char name[64];

	snprintf(name, sizeof(name), "attention(%s%s) T%d Dh%d",
		 sigma_cuda_get_attention() == SIGMA_CUDA_ATT_CUBLAS ? "cublas"
								     : "fused",
		 nobuf ? ", no att" : "", T, Dh);
	cpu->attention_forward(out.h, att.h, q.h, k.h, v.h, B, T, H, Dh);
	gpu->attention_forward(out.d, nobuf ? NULL : att.d, q.d, k.d, v.d, B, T,
			       H, Dh);
	check(name, "out", &out, tol);
	if (!nobuf)
		check(name, "att", &att, tol);
	cpu->attention_backward(dq.h, dk.h, dv.h, scr.h, dout.h, q.h, k.h, v.h,
				att.h, B, T, H, Dh);
	gpu->attention_backward(dq.d, dk.d, dv.d, nobuf ? NULL : scr.d, dout.d,
				q.d, k.d, v.d, nobuf ? NULL : att.d, B, T, H,
				Dh);
	check(name, "dq", &dq, tol);
	check(name, "dk", &dk, tol);
	check(name, "dv", &dv, tol);
	pair_free(&q);
	pair_free(&k);
	pair_free(&v);
	pair_free(&dout);
	pair_free(&out);
	pair_free(&att);
	pair_free(&dq);
	pair_free(&dk);
	pair_free(&dv);
	pair_free(&scr);
}

static void attention_case(int B, int T, int H, int Dh, double tol)
{
	attention_case_buf(B, T, H, Dh, tol, false);
}

static void test_attention(void **state)
{
	static const enum sigma_cuda_attention modes[] = {
	    SIGMA_CUDA_ATT_FUSED, SIGMA_CUDA_ATT_CUBLAS};

	(void)state;
	for (int m = 0; m < 2; m++) {
		/* fused: fp32 always; cublas: the products' precision */
		double tol =
		    modes[m] == SIGMA_CUDA_ATT_CUBLAS && tol_mm > TOL_FP32
			? TOL_BF16_ATT
			: TOL_FP32;

		assert_int_equal(sigma_cuda_set_attention(modes[m]), 0);
		attention_case(2, 70, 3, 32,
			       tol); /* several tiles, a partial */
		attention_case(1, 33, 2, 80, tol); /* Dh not a multiple of 32 */
		attention_case(1, 1, 1, 8, tol);   /* one position */
		attention_case(1, 40, 1, 256, tol); /* the largest Dh */
		/* the model's sizes: many tiles of keys, Dh 128 */
		attention_case(1, 1024, 2, 128, tol);
	}
	sigma_cuda_set_attention(SIGMA_CUDA_ATT_AUTO);
}

/*
 * The fused kernels as the model calls them when attention_plan says 0:
 * att and scratch NULL, the same results as with them.
 */
static void test_attention_nobuffers(void **state)
{
	char err[256];

	(void)state;
	assert_int_equal(sigma_cuda_set_attention(SIGMA_CUDA_ATT_FUSED), 0);
	assert_int_equal(gpu->attention_plan(2, 300, 2, 64, 1, err, sizeof(err)),
			 0);
	attention_case_buf(2, 300, 2, 64, TOL_FP32, true);
	sigma_cuda_set_attention(SIGMA_CUDA_ATT_AUTO);
}

/* ---- mixture of experts ----------------------------------------------------
 */

static void test_softmax(void **state)
{
	int N = 50, C = 45;
	struct pair l = pair_new((size_t)N * C, 4.0f);
	struct pair p = pair_new((size_t)N * C, 0.0f);
	struct pair dp = pair_new((size_t)N * C, 1.0f);
	struct pair dl = pair_new((size_t)N * C, 0.0f);

	(void)state;
	cpu->softmax_forward(p.h, l.h, N, C);
	gpu->softmax_forward(p.d, l.d, N, C);
	check("softmax_forward", "p", &p, TOL_FP32);
	cpu->softmax_backward(dl.h, dp.h, p.h, N, C);
	gpu->softmax_backward(dl.d, dp.d, p.d, N, C);
	check("softmax_backward", "dlogit", &dl, TOL_FP32);
	/* in place, as the trainer calls it */
	cpu->softmax_forward(l.h, l.h, N, C);
	gpu->softmax_forward(l.d, l.d, N, C);
	check("softmax_forward(in place)", "p", &l, TOL_FP32);
	pair_free(&l);
	pair_free(&p);
	pair_free(&dp);
	pair_free(&dl);
}

static void test_moe(void **state)
{
	int N = 77, E = 6, K = 2, D = 33, NK = 77 * 2;
	struct pair lg = pair_new((size_t)N * E, 3.0f);
	struct pair p = pair_new((size_t)N * E, 0.0f);
	struct pair gate = pair_new((size_t)NK, 0.0f);
	struct ipair idx = ipair_new((size_t)NK), counts = ipair_new((size_t)E);
	struct ipair offs = ipair_new((size_t)E + 1);
	struct ipair perm = ipair_new((size_t)NK), pos = ipair_new((size_t)NK);
	struct pair aux = pair_new(1, 0.0f);
	struct pair m = pair_new((size_t)N * D, 1.0f);
	struct pair xe = pair_new((size_t)NK * D, 0.0f);
	struct pair dxe = pair_new((size_t)NK * D, 1.0f);
	struct pair dm = pair_new((size_t)N * D, 0.0f);
	struct pair x = pair_new((size_t)N * D, 1.0f);
	struct pair eout = pair_new((size_t)NK * D, 1.0f);
	struct pair deout = pair_new((size_t)NK * D, 0.0f);
	struct pair dgate = pair_new((size_t)NK, 0.0f);
	struct pair dx = pair_new((size_t)N * D, 1.0f);
	struct pair dp = pair_new((size_t)N * E, 0.0f);

	(void)state;
	/* probabilities; rows 0 and 1 tie everywhere: lower indices win */
	for (int e = 0; e < E; e++) {
		lg.h[e] = 0.25f;
		lg.h[E + e] = e >= 2 ? 0.5f : -1.0f;
	}
	gpu->from_host(lg.d, lg.h, sizeof(float) * lg.n);
	cpu->softmax_forward(p.h, lg.h, N, E);
	gpu->from_host(p.d, p.h, sizeof(float) * p.n); /* same bits both */

	cpu->moe_route(idx.h, gate.h, counts.h, offs.h, perm.h, pos.h, p.h, N,
		       E, K);
	gpu->moe_route(idx.d, gate.d, counts.d, offs.d, perm.d, pos.d, p.d, N,
		       E, K);
	assert_int_equal(idx.h[0], 0);
	assert_int_equal(idx.h[1], 1);
	assert_int_equal(idx.h[K], 2);
	assert_int_equal(idx.h[K + 1], 3);
	check_int("moe_route", "idx", &idx);
	check("moe_route", "gate", &gate, TOL_FP32);
	check_int("moe_route", "counts", &counts);
	check_int("moe_route", "offs", &offs);
	check_int("moe_route", "perm", &perm);
	check_int("moe_route", "pos", &pos);

	cpu->moe_aux_loss(aux.h, p.h, counts.h, N, E, K);
	gpu->moe_aux_loss(aux.d, p.d, counts.d, N, E, K);
	check("moe_aux_loss", "aux", &aux, TOL_FP32);

	cpu->moe_gather(xe.h, m.h, perm.h, N, K, D);
	gpu->moe_gather(xe.d, m.d, perm.d, N, K, D);
	check("moe_gather", "xe", &xe, TOL_FP32);
	cpu->moe_gather_backward(dm.h, dxe.h, pos.h, N, K, D);
	gpu->moe_gather_backward(dm.d, dxe.d, pos.d, N, K, D);
	check("moe_gather_backward", "dm", &dm, TOL_FP32);

	cpu->moe_combine(x.h, eout.h, gate.h, pos.h, N, K, D);
	gpu->moe_combine(x.d, eout.d, gate.d, pos.d, N, K, D);
	check("moe_combine", "x", &x, TOL_FP32);
	cpu->moe_combine_backward(deout.h, dgate.h, dx.h, eout.h, gate.h, pos.h,
				  N, K, D);
	gpu->moe_combine_backward(deout.d, dgate.d, dx.d, eout.d, gate.d, pos.d,
				  N, K, D);
	check("moe_combine_backward", "deout", &deout, TOL_FP32);
	check("moe_combine_backward", "dgate", &dgate, TOL_FP32);

	cpu->moe_router_backward(dp.h, dgate.h, p.h, idx.h, gate.h, counts.h,
				 0.01f / 2, N, E, K);
	gpu->moe_router_backward(dp.d, dgate.d, p.d, idx.d, gate.d, counts.d,
				 0.01f / 2, N, E, K);
	check("moe_router_backward", "dp", &dp, TOL_FP32);

	pair_free(&lg);
	pair_free(&p);
	pair_free(&gate);
	ipair_free(&idx);
	ipair_free(&counts);
	ipair_free(&offs);
	ipair_free(&perm);
	ipair_free(&pos);
	pair_free(&aux);
	pair_free(&m);
	pair_free(&xe);
	pair_free(&dxe);
	pair_free(&dm);
	pair_free(&x);
	pair_free(&eout);
	pair_free(&deout);
	pair_free(&dgate);
	pair_free(&dx);
	pair_free(&dp);
}

/*
 * Routing alone at the shapes test_moe does not reach: N = 0, K = 1,
 * K = E, 32 and 64 experts, an expert no token picks, and enough rows
 * that the stable sort spans many tiles.
 */
/* free the NULL-terminated lists of pairs */
static void pairs_free(struct pair *const *f, struct ipair *const *i)
{
	for (; *f; f++)
		pair_free(*f);
	for (; *i; i++)
		ipair_free(*i);
}

static void route_case(int N, int E, int K, int empty)
{
	size_t ne = (size_t)N * E, nk = (size_t)N * K;
	struct pair lg = pair_new(ne ? ne : 1, 3.0f);
	struct pair p = pair_new(ne ? ne : 1, 0.0f);
	struct pair gate = pair_new(nk ? nk : 1, 0.0f);
	struct ipair idx = ipair_new(nk ? nk : 1), counts = ipair_new(E);
	struct ipair offs = ipair_new((size_t)E + 1);
	struct ipair perm = ipair_new(nk ? nk : 1),
		     pos = ipair_new(nk ? nk : 1);
	char name[64];

	/* the last expert never among the top K: its logit far below */
	if (empty)
		for (int n = 0; n < N; n++)
			lg.h[(size_t)n * E + E - 1] = -30.0f;
	if (N > 0) {
		cpu->softmax_forward(p.h, lg.h, N, E);
		gpu->from_host(p.d, p.h, sizeof(float) * ne);
	}
	snprintf(name, sizeof(name), "moe_route N%d E%d K%d%s", N, E, K,
		 empty ? " empty" : "");
	cpu->moe_route(idx.h, gate.h, counts.h, offs.h, perm.h, pos.h, p.h, N,
		       E, K);
	gpu->moe_route(idx.d, gate.d, counts.d, offs.d, perm.d, pos.d, p.d, N,
		       E, K);
	if (empty)
		assert_int_equal(counts.h[E - 1], 0);
	assert_int_equal(offs.h[E], N * K);
	check_int(name, "counts", &counts);
	check_int(name, "offs", &offs);
	if (N > 0) {
		check_int(name, "idx", &idx);
		check_int(name, "perm", &perm);
		check_int(name, "pos", &pos);
		check(name, "gate", &gate, TOL_FP32);
	}
	pairs_free((struct pair *[]){&lg, &p, &gate, NULL},
		   (struct ipair *[]){&idx, &counts, &offs, &perm, &pos, NULL});
}

static void test_route_shapes(void **state)
{
	(void)state;
	route_case(0, 8, 2, 0);	     /* no tokens */
	route_case(97, 8, 1, 0);     /* top-1 */
	route_case(61, 8, 8, 0);     /* every expert */
	route_case(200, 32, 2, 1);   /* 32 experts, one empty */
	route_case(300, 64, 4, 1);   /* 64 experts */
	route_case(40000, 16, 2, 1); /* 80000 rows: a sort of many tiles */
}

/* more partial sums than the reduction's 1024 blocks hold: each block
 * takes several spans, still in a fixed order */
static void test_reduce_blocks(void **state)
{
	size_t n = (size_t)12 * 1000 * 1000 + 5;
	struct pair x = pair_new(n, 1.0f);
	double a, b, c, sa, sb;

	(void)state;
	cpu->sumsq(&a, x.h, n);
	gpu->sumsq(&b, x.d, n);
	gpu->sumsq(&c, x.d, n);
	cpu->sum(&sa, x.h, n);
	gpu->sum(&sb, x.d, n);
	printf("cuda-vs-cpu %-4s %-24s %-6s rel err %.3e / %.3e (tol 1e-12)\n",
	       prec_name, "sum, sumsq(12M)", "double", fabs(b - a) / a,
	       fabs(sb - sa) / fabs(sa));
	assert_true(fabs(b - a) <= 1e-12 * a);
	assert_true(fabs(sb - sa) <= 1e-9 * (fabs(sa) + sqrt((double)n)));
	assert_true(b == c);
	pair_free(&x);
}

static void test_swiglu(void **state)
{
	size_t n = 1000;
	struct pair a = pair_new(n, 4.0f), b = pair_new(n, 2.0f);
	struct pair h = pair_new(n, 0.0f), dh = pair_new(n, 1.0f);
	struct pair da = pair_new(n, 0.0f), db = pair_new(n, 0.0f);

	(void)state;
	cpu->swiglu_forward(h.h, a.h, b.h, n);
	gpu->swiglu_forward(h.d, a.d, b.d, n);
	check("swiglu_forward", "h", &h, TOL_FP32);
	cpu->swiglu_backward(da.h, db.h, dh.h, a.h, b.h, n);
	gpu->swiglu_backward(da.d, db.d, dh.d, a.d, b.d, n);
	check("swiglu_backward", "da", &da, TOL_FP32);
	check("swiglu_backward", "db", &db, TOL_FP32);
	pair_free(&a);
	pair_free(&b);
	pair_free(&h);
	pair_free(&dh);
	pair_free(&da);
	pair_free(&db);
}

/* ---- loss, reductions, optimizer ----------------------------------------- */

static void test_crossentropy(void **state)
{
	int N = 37, V = 300;
	struct pair lg = pair_new((size_t)N * V, 6.0f);
	struct pair probs = pair_new((size_t)N * V, 0.0f);
	struct pair losses = pair_new((size_t)N, 0.0f);
	struct pair dl = pair_new((size_t)N * V, 0.0f);
	struct ipair tg = ipair_new((size_t)N);
	double s_cpu, s_gpu, q_cpu, q_gpu;

	(void)state;
	for (int n = 0; n < N; n++)
		tg.h[n] = (n * 97 + 5) % V;
	ipair_push(&tg);
	cpu->crossentropy_forward(losses.h, probs.h, lg.h, tg.h, N, V);
	gpu->crossentropy_forward(losses.d, probs.d, lg.d, tg.d, N, V);
	check("crossentropy_forward", "losses", &losses, TOL_FP32);
	check("crossentropy_forward", "probs", &probs, TOL_FP32);
	cpu->crossentropy_backward(dl.h, probs.h, tg.h, 1.0f / N, N, V);
	gpu->crossentropy_backward(dl.d, probs.d, tg.d, 1.0f / N, N, V);
	check("crossentropy_backward", "dlogit", &dl, TOL_FP32);
	/* the ordered reductions: double results in host memory */
	cpu->sum(&s_cpu, losses.h, losses.n);
	gpu->sum(&s_gpu, losses.d, losses.n);
	cpu->sumsq(&q_cpu, lg.h, lg.n);
	gpu->sumsq(&q_gpu, lg.d, lg.n);
	printf("cuda-vs-cpu %-4s %-24s %-6s rel err %.3e / %.3e (tol 1e-12)\n",
	       prec_name, "sum, sumsq", "double",
	       fabs(s_gpu - s_cpu) / fabs(s_cpu),
	       fabs(q_gpu - q_cpu) / fabs(q_cpu));
	/* losses differ by TOL_FP32 at most; sumsq sees identical inputs */
	assert_true(fabs(s_gpu - s_cpu) <= TOL_FP32 * fabs(s_cpu));
	assert_true(fabs(q_gpu - q_cpu) <= 1e-12 * fabs(q_cpu));
	pair_free(&lg);
	pair_free(&probs);
	pair_free(&losses);
	pair_free(&dl);
	ipair_free(&tg);
}

static void test_reduce_large(void **state)
{
	/* more than one block of the device reduction, and a ragged end */
	size_t n = 3 * 1000 * 1000 + 17;
	struct pair x = pair_new(n, 1.0f);
	double a, b, c;

	(void)state;
	cpu->sumsq(&a, x.h, n);
	gpu->sumsq(&b, x.d, n);
	gpu->sumsq(&c, x.d, n);
	printf("cuda-vs-cpu %-4s %-24s %-6s rel err %.3e (tol 1e-12)\n",
	       prec_name, "sumsq(3M)", "double", fabs(b - a) / a);
	assert_true(fabs(b - a) <= 1e-12 * a);
	assert_true(b == c); /* deterministic: the same bits twice */
	pair_free(&x);
}

static void test_adamw(void **state)
{
	size_t n = 5000;
	struct pair pr = pair_new(n, 1.0f), m = pair_new(n, 0.1f);
	struct pair v = pair_new(n, 0.0f), g = pair_new(n, 1.0f);

	(void)state;
	for (size_t i = 0; i < n; i++)
		v.h[i] = 0.01f * (1.0f + frand());
	gpu->from_host(v.d, v.h, sizeof(float) * n);
	for (long t = 1; t <= 3; t++) {
		cpu->adamw(pr.h, m.h, v.h, g.h, n, 1e-3f, 0.9f, 0.95f, 1e-8f,
			   0.1f, 0.5f, t);
		gpu->adamw(pr.d, m.d, v.d, g.d, n, 1e-3f, 0.9f, 0.95f, 1e-8f,
			   0.1f, 0.5f, t);
	}
	check("adamw", "param", &pr, TOL_FP32);
	check("adamw", "m", &m, TOL_FP32);
	check("adamw", "v", &v, TOL_FP32);
	pair_free(&pr);
	pair_free(&m);
	pair_free(&v);
	pair_free(&g);
}

static void test_scale(void **state)
{
	size_t n = 3 * 1000 * 1000 + 17; /* many blocks, a ragged end */
	struct pair x = pair_new(n, 1.0f);

	(void)state;
	cpu->scale(x.h, 1.0f / 3.0f, n);
	gpu->scale(x.d, 1.0f / 3.0f, n);
	check("scale", "x", &x, 0.0f); /* one fp32 product each: exact */
	pair_free(&x);
}

static void test_memory(void **state)
{
	float h[100], back[100];
	float *d = gpu->alloc(sizeof(h)), *e = gpu->alloc(sizeof(h));

	(void)state;
	assert_non_null(d);
	assert_non_null(e);
	gpu->to_host(back, d, sizeof(back)); /* alloc zeroes */
	for (int i = 0; i < 100; i++) {
		assert_true(back[i] == 0.0f);
		h[i] = (float)i - 50.5f;
	}
	gpu->from_host(d, h, sizeof(h));
	gpu->copy(e, d, 100);
	gpu->to_host(back, e, sizeof(back));
	assert_memory_equal(back, h, sizeof(h));
	gpu->zero(e, 60);
	gpu->to_host(back, e, sizeof(back));
	assert_true(back[59] == 0.0f && back[60] == h[60]);
	gpu->free(d);
	gpu->free(e);
}

static int set_fp32(void **state)
{
	(void)state;
	prec_name = "fp32";
	tol_mm = TOL_FP32;
	return sigma_cuda_set_precision(SIGMA_CUDA_FP32);
}

static int set_bf16(void **state)
{
	(void)state;
	prec_name = "bf16";
	tol_mm = TOL_BF16;
	return sigma_cuda_set_precision(SIGMA_CUDA_BF16);
}

int main(void)
{
	const struct CMUnitTest fp32[] = {
	    cmocka_unit_test(test_memory),
	    cmocka_unit_test(test_matmul),
	    cmocka_unit_test(test_grouped_matmul),
	    cmocka_unit_test(test_embedding),
	    cmocka_unit_test(test_rmsnorm),
	    cmocka_unit_test(test_rope),
	    cmocka_unit_test(test_attention),
	    cmocka_unit_test(test_attention_nobuffers),
	    cmocka_unit_test(test_softmax),
	    cmocka_unit_test(test_moe),
	    cmocka_unit_test(test_route_shapes),
	    cmocka_unit_test(test_swiglu),
	    cmocka_unit_test(test_crossentropy),
	    cmocka_unit_test(test_reduce_large),
	    cmocka_unit_test(test_reduce_blocks),
	    cmocka_unit_test(test_adamw),
	    cmocka_unit_test(test_scale),
	};
	const struct CMUnitTest bf16[] = {
	    cmocka_unit_test(test_matmul),
	    cmocka_unit_test(test_grouped_matmul),
	    cmocka_unit_test(test_bf16_tables),
	    cmocka_unit_test(test_attention),
	};
	char why[256] = "";
	int rc;

	/*
	 * No driver device node (Linux /dev/nvidiactl, WSL /dev/dxg): no GPU,
	 * and no need to let cudart dlopen a driver that is not there (under
	 * valgrind, ld.so's string functions then report false errors).
	 */
	if (access("/dev/nvidiactl", F_OK) && access("/dev/dxg", F_OK)) {
		printf(
		    "test_kernels_cuda: skipped: no CUDA device (no NVIDIA driver: /dev/nvidiactl absent)\n");
		return 77;
	}
	if (sigma_cuda_device_count(why, sizeof(why)) < 1) {
		printf("test_kernels_cuda: skipped: no CUDA device (%s)\n",
		       why[0] ? why : "none visible");
		return 77;
	}
	gpu = sigma_ops_select("cuda", why, sizeof(why));
	if (!gpu) {
		printf("test_kernels_cuda: %s\n", why);
		return 1;
	}
	if (cpu->init(0) || gpu->init(0)) {
		printf("test_kernels_cuda: cannot initialise the op tables\n");
		return 1;
	}
	gpu->describe(why, sizeof(why));
	printf("test_kernels_cuda: %s\n", why);
	rc = cmocka_run_group_tests_name("cuda fp32", fp32, set_fp32, NULL);
	rc += cmocka_run_group_tests_name("cuda bf16", bf16, set_bf16, NULL);
	printf(
	    "test_kernels_cuda: worst rel err fp32 %.3e (tol %.0e), bf16 matmul %.3e (tol %.0e)\n",
	    worst_fp32, TOL_FP32, worst_bf16, TOL_BF16);
	return rc ? 1 : 0;
}
