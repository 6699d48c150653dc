/*
 * gemm-shapes.c - the trainer's matrix products, OpenBLAS against oneDNN.
 *
 * Every sgemm one training step of the demo config makes on one rank (D 256,
 * L 4, H 8, T 256, E 8, K 2, F 512, V 256, batch 8: kernels/cpu/matmul.c,
 * attention.c, trainer/model.c), with the trainer's M, N, K, transposes,
 * leading dimensions, alpha and beta, grouped into the products an op makes
 * (one op = its calls; grouped experts get N*K/E rows each). Each product is
 * timed with
 *
 *   openblas   cblas_sgemm
 *   dnnl_sgemm oneDNN's sgemm (row-major)
 *   matmul     oneDNN's matmul primitive, fp32, one primitive per shape
 *   gemm_bf16  dnnl_gemm_bf16bf16f32: bf16 inputs, fp32 accumulate and
 *              output (inputs rounded once beforehand, not timed); the
 *              library exports it, oneDNN 2.6's headers do not declare it
 *   matmul_bf16 the matmul primitive with bf16 inputs, f32 output
 *
 * in two ways: "trainer" is how the trainer calls BLAS (an OpenMP loop over
 * an op's calls, each library call single-threaded inside it), "lib2" hands
 * each whole product (all rows of a dense product, one expert, one head) to
 * the library with 2 library threads, outside any OpenMP region. The
 * libraries alternate sample by sample; each sample repeats the op until
 * it has run ~5 ms. Printed: GFLOP/s from the best and the median sample,
 * the max error relative to the largest element against a double-precision
 * reference, and the totals weighted by how often each product runs per
 * step.
 *
 *   OMP_NUM_THREADS=2 bench/gemm-shapes [--mode trainer|lib2] [-n SAMPLES]
 *
 * For lib2 run with OMP_WAIT_POLICY=passive: oneDNN's OpenMP threads would
 * otherwise spin on the cores OpenBLAS's own threads need next.
 *
 * Built on demand: make -C bench gemm-shapes (oneDNN columns only when
 * configure found it, --with-dnnl). Results: docs/cpu-blas.md.
 */
#include "config.h"

#include <cblas.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "sigma.h"

#ifdef HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>

/* exported by libdnnl 2.6 (its gtests declare it the same way), row-major */
dnnl_status_t dnnl_gemm_bf16bf16f32(char transa, char transb, dnnl_dim_t M,
				    dnnl_dim_t N, dnnl_dim_t K, float alpha,
				    const uint16_t *A, dnnl_dim_t lda,
				    const uint16_t *B, dnnl_dim_t ldb,
				    float beta, float *C, dnnl_dim_t ldc);
#endif

/* demo config, one rank */
#define CFG_B	  8
#define CFG_T	  256
#define CFG_D	  256
#define CFG_H	  8
#define CFG_E	  8
#define CFG_K	  2
#define CFG_F	  512
#define CFG_V	  256
#define CFG_L	  4
#define CFG_N	  (CFG_B * CFG_T)
#define CFG_R	  (CFG_N * CFG_K / CFG_E) /* rows per expert */
#define CFG_DH	  (CFG_D / CFG_H)
#define ROW_CHUNK 128 /* kernels/cpu/cpu.h CPU_ROW_CHUNK */

#define SAMPLES_MAX 200
#define MAX_THREADS 64
#define MAX_PRODS   24

enum lib {
	LIB_OPENBLAS,
	LIB_DNNL_SGEMM,
	LIB_MATMUL,
	LIB_GEMM_BF16,
	LIB_BF16,
	NLIB
};
static const char *const lib_name[NLIB] = {"openblas", "dnnl_sgemm", "matmul",
					   "gemm_bf16", "matmul_bf16"};

struct call {
	size_t a, b, c; /* element offsets into the product's buffers */
	int m, n, k;
};

struct prim {
	int m, n, k, used;
#ifdef HAVE_DNNL
	dnnl_primitive_t p;
	dnnl_memory_t ma, mb, mc;
#endif
};

struct prod {
	const char *name;
	char ta, tb;
	int lda, ldb, ldc;
	float alpha, beta;
	int per_step;
	size_t na, nb, nc;
	int ncalls;
	struct call *calls;
	double flops;
	float *A, *B, *C, *C0; /* C0: C's start, for beta 1 and checks */
	uint16_t *A16, *B16;
	/* one primitive per thread and library (matmul, bf16) */
	struct prim prim[MAX_THREADS][2];
	int bf16_ok;
};

static struct prod prods[MAX_PRODS];
static int nprods;
static int whole; /* lib2: whole products, library threads */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *xmalloc(size_t n)
{
	void *p = aligned_alloc(64, (n + 63) & ~(size_t)63);

	if (!p) {
		fprintf(stderr, "gemm-shapes: out of memory\n");
		exit(1);
	}
	return p;
}

static uint16_t to_bf16(float x)
{
	uint32_t u;

	memcpy(&u, &x, sizeof(u));
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

static void add_call(struct prod *p, size_t a, size_t b, size_t c, int m, int n,
		     int k)
{
	p->calls = realloc(p->calls, sizeof(*p->calls) * (p->ncalls + 1));
	if (!p->calls) {
		fprintf(stderr, "gemm-shapes: out of memory\n");
		exit(1);
	}
	p->calls[p->ncalls++] = (struct call){a, b, c, m, n, k};
	p->flops += 2.0 * m * n * k;
}

static struct prod *new_prod(const char *name, char ta, char tb, int lda,
			     int ldb, int ldc, float alpha, float beta,
			     int per_step, size_t na, size_t nb, size_t nc)
{
	struct prod *p = &prods[nprods++];

	*p = (struct prod){.name = name,
			   .ta = ta,
			   .tb = tb,
			   .lda = lda,
			   .ldb = ldb,
			   .ldc = ldc,
			   .alpha = alpha,
			   .beta = beta,
			   .per_step = per_step,
			   .na = na,
			   .nb = nb,
			   .nc = nc};
	return p;
}

static int min_int(int a, int b)
{
	return a < b ? a : b;
}

/*
 * A product over G groups of R rows (dense: one group of all N rows),
 * split in 128-row chunks: out[rows] (+)= in[rows, k] w[g], w[g] [k, n]
 * (tb 'N': cpu_matmul_forward, cpu_grouped_matmul_forward) or [n, k]
 * (tb 'T': the input gradients of their backward).
 */
static void rows(const char *name, char tb, int R, int G, int k, int n,
		 float beta, int per_step)
{
	struct prod *p = new_prod(name, 'N', tb, k, tb == 'T' ? k : n, n, 1.0f,
				  beta, per_step, (size_t)R * G * k,
				  (size_t)G * k * n, (size_t)R * G * n);
	int ch = whole ? R : ROW_CHUNK;

	for (int g = 0; g < G; g++)
		for (int r0 = 0; r0 < R; r0 += ch)
			add_call(p, ((size_t)g * R + r0) * k, (size_t)g * k * n,
				 ((size_t)g * R + r0) * n, min_int(ch, R - r0),
				 n, k);
}

/*
 * The weight gradients: dw[g][i0:, :] += in[rows of g, i0:]^T dout[rows of
 * g], split in wch-row pieces of dw (32 dense, 64 grouped).
 */
static void weight_grad(const char *name, int R, int G, int C, int OC, int wch,
			int per_step)
{
	struct prod *p =
	    new_prod(name, 'T', 'N', C, OC, OC, 1.0f, 1.0f, per_step,
		     (size_t)R * G * C, (size_t)R * G * OC, (size_t)G * C * OC);

	if (whole)
		wch = C;
	for (int g = 0; g < G; g++)
		for (int i0 = 0; i0 < C; i0 += wch)
			add_call(p, (size_t)g * R * C + i0, (size_t)g * R * OC,
				 (size_t)g * C * OC + (size_t)i0 * OC,
				 min_int(wch, C - i0), OC, R);
}

/*
 * cpu_attention_*: per (batch, head), q k v dout are [B*T, D] with the head
 * at column h*Dh, scores and probabilities [T, T] per (batch, head).
 * kind 0: s = q k^T (NT), 1: out = p v (NN), 2: dv = p^T dout (TN).
 */
static void attention(const char *name, int kind, float alpha, int per_step)
{
	int B = CFG_B, T = CFG_T, H = CFG_H, Dh = CFG_DH, D = CFG_D;
	size_t nqkv = (size_t)B * T * D, ntt = (size_t)B * H * T * T;
	struct prod *p;

	if (kind == 0)
		p = new_prod(name, 'N', 'T', D, D, T, alpha, 0.0f, per_step,
			     nqkv, nqkv, ntt);
	else
		p = new_prod(name, kind == 1 ? 'N' : 'T', 'N', T, D, D, alpha,
			     0.0f, per_step, ntt, nqkv, nqkv);
	for (int bh = 0; bh < B * H; bh++) {
		size_t base = (size_t)(bh / H) * T * D + (size_t)(bh % H) * Dh;
		size_t tt = (size_t)bh * T * T;

		if (kind == 0)
			add_call(p, base, base, tt, T, T, Dh);
		else
			add_call(p, tt, base, base, T, Dh, T);
	}
}

static void build(void)
{
	int N = CFG_N, D = CFG_D, F = CFG_F, E = CFG_E, R = CFG_R, L = CFG_L;
	int V = CFG_V;
	float sc = 1.0f / sqrtf((float)CFG_DH);

	/* forward */
	rows("q,k,v fwd", 'N', N, 1, D, D, 0.0f, 3 * L);
	rows("wo fwd (beta 1)", 'N', N, 1, D, D, 1.0f, L);
	rows("router fwd", 'N', N, 1, D, E, 0.0f, L);
	rows("head fwd", 'N', N, 1, D, V, 0.0f, 1);
	rows("w1,w3 fwd", 'N', R, E, D, F, 0.0f, 2 * L);
	rows("w2 fwd", 'N', R, E, F, D, 0.0f, L);
	attention("att q k^T, dp", 0, sc, 2 * L);
	attention("att p v, dq, fwd+bwd", 1, sc, 2 * L);
	/* backward */
	rows("q,k,v,wo,head din", 'T', N, 1, D, D, 0.0f, 4 * L + 1);
	weight_grad("q,k,v,wo,head dw", N, 1, D, D, 32, 4 * L + 1);
	rows("router din", 'T', N, 1, E, D, 1.0f, L);
	weight_grad("router dw", N, 1, D, E, 32, L);
	rows("w2 din", 'T', R, E, D, F, 0.0f, L);
	weight_grad("w2 dw", R, E, F, D, 64, L);
	rows("w1,w3 din", 'T', R, E, F, D, 0.0f, 2 * L);
	weight_grad("w1,w3 dw", R, E, D, F, 64, 2 * L);
	attention("att p^T dout, ds^T q", 2, sc, 2 * L);
}

static void fill(float *x, size_t n, uint64_t seed)
{
	uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;

	for (size_t i = 0; i < n; i++) {
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		x[i] = (float)((double)(s >> 11) / 9007199254740992.0 - 0.5);
	}
}

static void alloc_prod(struct prod *p, int idx)
{
	p->A = xmalloc(sizeof(float) * p->na);
	p->B = xmalloc(sizeof(float) * p->nb);
	p->C = xmalloc(sizeof(float) * p->nc);
	p->C0 = xmalloc(sizeof(float) * p->nc);
	p->A16 = xmalloc(sizeof(uint16_t) * p->na);
	p->B16 = xmalloc(sizeof(uint16_t) * p->nb);
	fill(p->A, p->na, 3 * idx + 1);
	fill(p->B, p->nb, 3 * idx + 2);
	fill(p->C0, p->nc, 3 * idx + 3);
	memcpy(p->C, p->C0, sizeof(float) * p->nc);
	for (size_t i = 0; i < p->na; i++)
		p->A16[i] = to_bf16(p->A[i]);
	for (size_t i = 0; i < p->nb; i++)
		p->B16[i] = to_bf16(p->B[i]);
}

/* ---- oneDNN ------------------------------------------------------------- */

#ifdef HAVE_DNNL
static dnnl_engine_t eng;
static dnnl_stream_t streams[MAX_THREADS];

#define DNNL_OK(x)                                                             \
	do {                                                                   \
		dnnl_status_t st_ = (x);                                       \
		if (st_ != dnnl_success) {                                     \
			fprintf(stderr, "gemm-shapes: %s:%d: %s: status %d\n", \
				__FILE__, __LINE__, #x, (int)st_);             \
			exit(1);                                               \
		}                                                              \
	} while (0)

/* row-major [rows, cols] with leading dimension ld, transposed if t */
static void md_2d(dnnl_memory_desc_t *md, int rows, int cols, int ld, char t,
		  dnnl_data_type_t dt)
{
	dnnl_dims_t dims = {rows, cols};
	dnnl_dims_t strides = {ld, 1};

	if (t == 'T') {
		strides[0] = 1;
		strides[1] = ld;
	}
	DNNL_OK(dnnl_memory_desc_init_by_strides(md, 2, dims, dt, strides));
}

/* the matmul primitive for one shape; status, not exit, for bf16 */
static dnnl_status_t prim_make(struct prim *pr, const struct prod *p,
			       const struct call *c, int bf16, char *impl,
			       size_t impl_len)
{
	dnnl_data_type_t dt = bf16 ? dnnl_bf16 : dnnl_f32;
	dnnl_memory_desc_t ma, mb, mc;
	dnnl_matmul_desc_t md;
	dnnl_primitive_attr_t attr;
	dnnl_post_ops_t po;
	dnnl_primitive_desc_t pd;
	dnnl_status_t st;
	const char *info = NULL;

	md_2d(&ma, c->m, c->k, p->lda, p->ta, dt);
	md_2d(&mb, c->k, c->n, p->ldb, p->tb, dt);
	md_2d(&mc, c->m, c->n, p->ldc, 'N', dnnl_f32);
	DNNL_OK(dnnl_matmul_desc_init(&md, &ma, &mb, NULL, &mc));
	DNNL_OK(dnnl_primitive_attr_create(&attr));
	if (p->alpha != 1.0f)
		DNNL_OK(dnnl_primitive_attr_set_output_scales(attr, 1, 0,
							      &p->alpha));
	if (p->beta != 0.0f) {
		DNNL_OK(dnnl_post_ops_create(&po));
		DNNL_OK(dnnl_post_ops_append_sum(po, p->beta));
		DNNL_OK(dnnl_primitive_attr_set_post_ops(attr, po));
		dnnl_post_ops_destroy(po);
	}
	st = dnnl_primitive_desc_create(&pd, &md, attr, eng, NULL);
	dnnl_primitive_attr_destroy(attr);
	if (st != dnnl_success)
		return st;
	dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &info);
	if (impl && info)
		snprintf(impl, impl_len, "%s", info);
	DNNL_OK(dnnl_primitive_create(&pr->p, pd));
	dnnl_primitive_desc_destroy(pd);
	DNNL_OK(dnnl_memory_create(&pr->ma, &ma, eng, DNNL_MEMORY_NONE));
	DNNL_OK(dnnl_memory_create(&pr->mb, &mb, eng, DNNL_MEMORY_NONE));
	DNNL_OK(dnnl_memory_create(&pr->mc, &mc, eng, DNNL_MEMORY_NONE));
	pr->m = c->m;
	pr->n = c->n;
	pr->k = c->k;
	pr->used = 1;
	return dnnl_success;
}

static void prim_free(struct prim *pr)
{
	if (!pr->used)
		return;
	dnnl_primitive_destroy(pr->p);
	dnnl_memory_destroy(pr->ma);
	dnnl_memory_destroy(pr->mb);
	dnnl_memory_destroy(pr->mc);
	pr->used = 0;
}

static void run_matmul(struct prod *p, const struct call *c, int tid, int bf16)
{
	struct prim *pr = &p->prim[tid][bf16];
	dnnl_exec_arg_t args[3];

	if (!pr->used || pr->m != c->m || pr->n != c->n || pr->k != c->k) {
		prim_free(pr);
		DNNL_OK(prim_make(pr, p, c, bf16, NULL, 0));
	}
	if (bf16) {
		DNNL_OK(dnnl_memory_set_data_handle(pr->ma, p->A16 + c->a));
		DNNL_OK(dnnl_memory_set_data_handle(pr->mb, p->B16 + c->b));
	} else {
		DNNL_OK(dnnl_memory_set_data_handle(pr->ma, p->A + c->a));
		DNNL_OK(dnnl_memory_set_data_handle(pr->mb, p->B + c->b));
	}
	DNNL_OK(dnnl_memory_set_data_handle(pr->mc, p->C + c->c));
	args[0] = (dnnl_exec_arg_t){DNNL_ARG_SRC, pr->ma};
	args[1] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, pr->mb};
	args[2] = (dnnl_exec_arg_t){DNNL_ARG_DST, pr->mc};
	DNNL_OK(dnnl_primitive_execute(pr->p, streams[tid], 3, args));
	DNNL_OK(dnnl_stream_wait(streams[tid]));
}
#endif

/* ---- one call, one op --------------------------------------------------- */

static void run_call(struct prod *p, const struct call *c, enum lib lib,
		     int tid)
{
	switch (lib) {
	case LIB_OPENBLAS:
		cblas_sgemm(CblasRowMajor,
			    p->ta == 'T' ? CblasTrans : CblasNoTrans,
			    p->tb == 'T' ? CblasTrans : CblasNoTrans, c->m,
			    c->n, c->k, p->alpha, p->A + c->a, p->lda,
			    p->B + c->b, p->ldb, p->beta, p->C + c->c, p->ldc);
		break;
#ifdef HAVE_DNNL
	case LIB_DNNL_SGEMM:
		DNNL_OK(dnnl_sgemm(p->ta, p->tb, c->m, c->n, c->k, p->alpha,
				   p->A + c->a, p->lda, p->B + c->b, p->ldb,
				   p->beta, p->C + c->c, p->ldc));
		break;
	case LIB_MATMUL:
		run_matmul(p, c, tid, 0);
		break;
	case LIB_GEMM_BF16:
		DNNL_OK(dnnl_gemm_bf16bf16f32(p->ta, p->tb, c->m, c->n, c->k,
					      p->alpha, p->A16 + c->a, p->lda,
					      p->B16 + c->b, p->ldb, p->beta,
					      p->C + c->c, p->ldc));
		break;
	case LIB_BF16:
		run_matmul(p, c, tid, 1);
		break;
#endif
	default:
		break;
	}
}

static int thread_id(void)
{
#ifdef _OPENMP
	return omp_get_thread_num();
#else
	return 0;
#endif
}

/* one op: its calls as the trainer makes them, or one after another */
static void run_op(struct prod *p, enum lib lib)
{
	if (whole) {
		for (int i = 0; i < p->ncalls; i++)
			run_call(p, &p->calls[i], lib, 0);
		return;
	}
#pragma omp parallel for schedule(dynamic, 1)
	for (int i = 0; i < p->ncalls; i++)
		run_call(p, &p->calls[i], lib, thread_id());
}

/* ---- checks ------------------------------------------------------------- */

/* C of every call in double from C0, then the max error of p->C */
static double *reference(const struct prod *p)
{
	double *r = xmalloc(sizeof(double) * p->nc);

	for (size_t i = 0; i < p->nc; i++)
		r[i] = p->C0[i];
#pragma omp parallel for schedule(dynamic, 1)
	for (int ci = 0; ci < p->ncalls; ci++) {
		const struct call *c = &p->calls[ci];

		for (int i = 0; i < c->m; i++)
			for (int j = 0; j < c->n; j++) {
				double s = 0.0;

				for (int l = 0; l < c->k; l++) {
					size_t ai =
					    p->ta == 'T'
						? (size_t)l * p->lda + i
						: (size_t)i * p->lda + l;
					size_t bi =
					    p->tb == 'T'
						? (size_t)j * p->ldb + l
						: (size_t)l * p->ldb + j;

					s += (double)p->A[c->a + ai] *
					     p->B[c->b + bi];
				}
				size_t o = c->c + (size_t)i * p->ldc + j;

				r[o] = p->alpha * s + p->beta * p->C0[o];
			}
	}
	return r;
}

static double max_rel(const float *x, const double *r, size_t n)
{
	double e = 0.0, mx = 0.0;

	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)x[i] - r[i]);

		if (d > e)
			e = d;
		if (fabs(r[i]) > mx)
			mx = fabs(r[i]);
	}
	return mx > 0.0 ? e / mx : e;
}

/* ---- timing ------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* seconds of one op run, best and median of the samples */
struct timing {
	double best, med;
};

static void set_blas_threads(int n)
{
#ifdef HAVE_OPENBLAS_SET_NUM_THREADS
	openblas_set_num_threads(n);
#else
	(void)n;
#endif
}

static int parse_int(const char *s, int lo, int hi, const char *what)
{
	long v;

	if (sigma_parse_long(s, lo, hi, &v)) {
		fprintf(stderr, "gemm-shapes: %s must be %d..%d, got '%s'\n",
			what, lo, hi, s);
		exit(2);
	}
	return (int)v;
}

/* model name, family, model and the bf16 features, from /proc/cpuinfo */
static void cpu_line(char *buf, size_t len)
{
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[8192], name[128] = "unknown CPU";
	int fam = -1, mod = -1, avx512 = 0, bf16 = 0, amx = 0;

	if (f) {
		while (fgets(line, sizeof(line), f)) {
			char *c = strchr(line, ':');

			if (!c)
				continue;
			if (!strncmp(line, "model name", 10)) {
				snprintf(name, sizeof(name), "%s", c + 2);
				name[strcspn(name, "\n")] = 0;
			} else if (!strncmp(line, "cpu family", 10)) {
				fam = atoi(c + 1);
			} else if (!strncmp(line, "model\t", 6)) {
				mod = atoi(c + 1);
			} else if (!strncmp(line, "flags", 5)) {
				avx512 = strstr(c, " avx512f") != NULL;
				bf16 = strstr(c, " avx512_bf16") != NULL;
				amx = strstr(c, " amx_bf16") != NULL;
				break;
			}
		}
		fclose(f);
	}
	snprintf(
	    buf, len,
	    "%s (family %d model %d), AVX-512 %s, AVX512_BF16 %s, AMX-BF16 %s",
	    name, fam, mod, avx512 ? "yes" : "no", bf16 ? "yes" : "no",
	    amx ? "yes" : "no");
}

static void usage(FILE *f)
{
	fprintf(f, "usage: gemm-shapes [--mode trainer|lib2] [-n SAMPLES] "
		   "[--ms MS]\n");
}

/* the options: --mode sets whole; -n and --ms; exits on a bad one */
static void parse_args(int argc, char **argv, int *samples, int *ms)
{
	static const struct option opts[] = {
	    {"mode", required_argument, NULL, 'm'},
	    {"samples", required_argument, NULL, 'n'},
	    {"ms", required_argument, NULL, 's'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int ch;

	while ((ch = getopt_long(argc, argv, "m:n:s:h", opts, NULL)) != -1) {
		switch (ch) {
		case 'm':
			if (!strcmp(optarg, "trainer"))
				whole = 0;
			else if (!strcmp(optarg, "lib2"))
				whole = 1;
			else {
				usage(stderr);
				exit(2);
			}
			break;
		case 'n':
			*samples = parse_int(optarg, 1, SAMPLES_MAX, "-n");
			break;
		case 's':
			*ms = parse_int(optarg, 1, 10000, "--ms");
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			exit(2);
		}
	}
}

#ifdef HAVE_DNNL
/* oneDNN's engine and streams, and which of its paths this CPU runs
 * (have[]); why a bf16 path is refused into bf16_why and gemm16_why */
static void dnnl_setup(int nt, int *have, char *bf16_why, size_t blen,
		       char *gemm16_why, size_t glen)
{
	const dnnl_version_t *v = dnnl_version();
	char impl[256] = "?", impl16[256] = "";
	dnnl_status_t st;
	struct prim pr = {0};

	DNNL_OK(dnnl_engine_create(&eng, dnnl_cpu, 0));
	for (int t = 0; t < nt; t++)
		DNNL_OK(dnnl_stream_create(&streams[t], eng,
					   dnnl_stream_default_flags));
	have[LIB_DNNL_SGEMM] = have[LIB_MATMUL] = 1;
	st = prim_make(&pr, &prods[0], &prods[0].calls[0], 0, impl,
		       sizeof(impl));
	DNNL_OK(st);
	prim_free(&pr);
	st = prim_make(&pr, &prods[0], &prods[0].calls[0], 1, impl16,
		       sizeof(impl16));
	{
		struct prod *p = &prods[0];
		const struct call *c = &p->calls[0];
		dnnl_status_t s16 = dnnl_gemm_bf16bf16f32(
		    p->ta, p->tb, c->m, c->n, c->k, p->alpha, p->A16, p->lda,
		    p->B16, p->ldb, p->beta, p->C, p->ldc);

		if (s16 == dnnl_success)
			have[LIB_GEMM_BF16] = 1;
		else
			snprintf(gemm16_why, glen,
				 "dnnl_gemm_bf16bf16f32 refused (status %d%s)",
				 (int)s16,
				 s16 == dnnl_unimplemented ? ", unimplemented"
							   : "");
	}
	if (st == dnnl_success) {
		have[LIB_BF16] = 1;
		prim_free(&pr);
	} else {
		snprintf(
		    bf16_why, blen,
		    "bf16 matmul refused (dnnl_primitive_desc_create status %d%s) on ISA 0x%x",
		    (int)st, st == dnnl_unimplemented ? ", unimplemented" : "",
		    (int)dnnl_get_effective_cpu_isa());
	}
	printf(
	    "oneDNN: %d.%d.%d, effective ISA 0x%x (0x7 avx2, 0xe7 avx512_core_bf16), matmul fp32 impl %s, bf16 impl %s\n",
	    v->major, v->minor, v->patch, (int)dnnl_get_effective_cpu_isa(),
	    impl, have[LIB_BF16] ? impl16 : "none");
}
#endif

/* correctness: each library once from C0 against the reference */
static void check_all(const int *have, double err[][NLIB])
{
	for (int i = 0; i < nprods; i++) {
		struct prod *p = &prods[i];
		double *r = reference(p);

		for (int l = 0; l < NLIB; l++) {
			if (!have[l])
				continue;
			memcpy(p->C, p->C0, sizeof(float) * p->nc);
			run_op(p, (enum lib)l);
			err[i][l] = max_rel(p->C, r, p->nc);
		}
		free(r);
	}
}

/* one product's timing, libraries alternating sample by sample */
static void time_prod(struct prod *p, const int *have, int samples, int ms,
		      struct timing *tm)
{
	double s[NLIB][SAMPLES_MAX];
	int reps[NLIB];

	for (int l = 0; l < NLIB; l++) {
		double t0, t;

		if (!have[l])
			continue;
		run_op(p, (enum lib)l); /* warm: JIT, pages */
		t0 = now_s();
		run_op(p, (enum lib)l);
		t = now_s() - t0;
		reps[l] = (int)(ms * 1e-3 / (t > 1e-7 ? t : 1e-7)) + 1;
	}
	for (int k = 0; k < samples; k++)
		for (int j = 0; j < NLIB; j++) {
			int l = (j + k) % NLIB; /* rotate the order */
			double t0;

			if (!have[l])
				continue;
			t0 = now_s();
			for (int r = 0; r < reps[l]; r++)
				run_op(p, (enum lib)l);
			s[l][k] = (now_s() - t0) / reps[l];
		}
	for (int l = 0; l < NLIB; l++) {
		if (!have[l])
			continue;
		qsort(s[l], samples, sizeof(double), cmp_double);
		tm[l].best = s[l][0];
		tm[l].med = s[l][samples / 2];
	}
}

/* one row of the table per product */
static void print_products(const int *have, struct timing tm[][NLIB],
			   int samples)
{
	printf(
	    "\nGFLOP/s best / median of %d samples; err: max |x - ref| / max |ref|\n\n",
	    samples);
	printf("%-22s %-30s %4s", "product", "calls x (M N K ta tb)", "/stp");
	for (int l = 0; l < NLIB; l++)
		if (have[l])
			printf(" %15s", lib_name[l]);
	printf("\n");
	for (int i = 0; i < nprods; i++) {
		struct prod *p = &prods[i];
		const struct call *c = &p->calls[0];
		char shape[64];

		snprintf(shape, sizeof(shape), "%3d x (%d %d %d %c%c)",
			 p->ncalls, c->m, c->n, c->k, p->ta, p->tb);
		printf("%-22s %-30s %4d", p->name, shape, p->per_step);
		for (int l = 0; l < NLIB; l++)
			if (have[l])
				printf("     %5.1f/%5.1f",
				       p->flops / tm[i][l].best * 1e-9,
				       p->flops / tm[i][l].med * 1e-9);
		printf("\n");
	}
}

/* the step totals, weighted by calls per step, and the mixing bound */
static void print_totals(const int *have, struct timing tm[][NLIB])
{
	double fl = 0.0, tb[NLIB] = {0}, tmed[NLIB] = {0};

	for (int i = 0; i < nprods; i++) {
		fl += prods[i].flops * prods[i].per_step;
		for (int l = 0; l < NLIB; l++) {
			if (!have[l])
				continue;
			tb[l] += tm[i][l].best * prods[i].per_step;
			tmed[l] += tm[i][l].med * prods[i].per_step;
		}
	}
	printf("%-22s %-30s %4s", "step total (weighted)", "", "");
	for (int l = 0; l < NLIB; l++)
		if (have[l])
			printf("     %5.1f/%5.1f", fl / tb[l] * 1e-9,
			       fl / tmed[l] * 1e-9);
	printf("\n%-22s %-30s %4s", "step ms (weighted)", "", "");
	for (int l = 0; l < NLIB; l++)
		if (have[l])
			printf("     %5.1f/%5.1f", tb[l] * 1e3, tmed[l] * 1e3);
	printf("\n%-22s %-30s %4s", "vs openblas best/med", "", "");
	for (int l = 0; l < NLIB; l++)
		if (have[l])
			printf("     %5.2f/%5.2f", tb[0] / tb[l],
			       tmed[0] / tmed[l]);
	/* the bound on mixing: each product with the faster fp32 library
	 * (by median) */
	if (have[LIB_DNNL_SGEMM]) {
		double mix = 0.0;

		for (int i = 0; i < nprods; i++) {
			double t = tm[i][LIB_OPENBLAS].med;

			if (tm[i][LIB_DNNL_SGEMM].med < t)
				t = tm[i][LIB_DNNL_SGEMM].med;
			mix += t * prods[i].per_step;
		}
		printf("\nfaster of openblas and dnnl_sgemm per product: "
		       "%.1f ms/step (median), %.2fx openblas",
		       mix * 1e3, tmed[0] / mix);
	}
	printf("\n\nmax error per product:\n");
}

int main(int argc, char **argv)
{
	int samples = 15, ms = 5, nt = 1;
	int have[NLIB] = {1, 0, 0, 0, 0};
	struct timing tm[MAX_PRODS][NLIB];
	double err[MAX_PRODS][NLIB];
	char cpu[320], bf16_why[512] = "", gemm16_why[256] = "";

	parse_args(argc, argv, &samples, &ms);
#ifdef _OPENMP
	nt = omp_get_max_threads();
#endif
	if (nt > MAX_THREADS) {
		fprintf(stderr, "gemm-shapes: at most %d threads\n",
			MAX_THREADS);
		return 2;
	}
	/* trainer: single-threaded BLAS inside our OpenMP (ops_cpu.c) */
	set_blas_threads(whole ? nt : 1);
	build();
	for (int i = 0; i < nprods; i++)
		alloc_prod(&prods[i], i);

	cpu_line(cpu, sizeof(cpu));
	printf("gemm-shapes: %s, %d OpenMP thread%s, mode %s\n", cpu, nt,
	       nt == 1 ? "" : "s",
	       whole ? "lib2 (whole products, library threads)"
		     : "trainer (OpenMP over calls, library single-threaded)");
#ifdef HAVE_OPENBLAS_SET_NUM_THREADS
	printf("OpenBLAS: %s, core %s, %d thread%s per call\n",
	       openblas_get_config(), openblas_get_corename(), whole ? nt : 1,
	       (whole ? nt : 1) == 1 ? "" : "s");
#endif
#ifdef HAVE_DNNL
	dnnl_setup(nt, have, bf16_why, sizeof(bf16_why), gemm16_why,
		   sizeof(gemm16_why));
#else
	snprintf(bf16_why, sizeof(bf16_why),
		 "built without oneDNN (configure --with-dnnl)");
#endif
	if (gemm16_why[0])
		printf("bf16: %s\n", gemm16_why);
	if (bf16_why[0])
		printf("bf16: %s\n", bf16_why);

	check_all(have, err);
	for (int i = 0; i < nprods; i++)
		time_prod(&prods[i], have, samples, ms, tm[i]);
	print_products(have, tm, samples);
	print_totals(have, tm);
	for (int i = 0; i < nprods; i++) {
		printf("%-22s", prods[i].name);
		for (int l = 0; l < NLIB; l++)
			if (have[l])
				printf(" %s %.1e", lib_name[l], err[i][l]);
		printf("\n");
	}
	return 0;
}
