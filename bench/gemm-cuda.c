/*
 * gemm-cuda.c - the cuBLAS rates the trainer's products get on this GPU.
 *
 * An MFU figure means little without the rate the GPU gives the products
 * that make it up. For the shapes of one sigma-train configuration (the
 * same shape flags: --dim --heads --seq-len --experts --top-k --ffn
 * --batch --vocab; docs/model.md) it times each product the trainer makes
 * (trainer/model.c, kernels/cuda/matmul.cu and attention.cu), in the four
 * ways cuBLAS can compute it:
 *
 *   f32-bf16  fp32 storage, CUBLAS_COMPUTE_32F_FAST_16BF: cuda:bf16's
 *             products, and its attention
 *   bf16      bf16 A and B, fp32 C, CUBLAS_COMPUTE_32F: the rounded-copy
 *             path of matmul.cu
 *   tf32      fp32 storage, CUBLAS_COMPUTE_32F_FAST_TF32
 *   f32       fp32 storage, CUBLAS_COMPUTE_32F: cuda (fp32)
 *
 * Each product runs until a sample takes 20 ms, five samples; the median
 * sample gives TFLOP/s (2 M N K per product, times its batch). Printed:
 * one row per product, then the rates weighted by each product's share of
 * a step's FLOPs. --csv FILE also writes "product,mode,m,n,k,batch,tflops"
 * rows (contrib/gpu-check keeps them).
 *
 *   gemm-cuda [--dim D] [--heads H] [--seq-len T] [--experts E]
 *             [--top-k K] [--ffn F] [--batch B] [--vocab V] [--layers L]
 *             [--csv FILE]
 *
 * Built on demand with CUDA: make -C bench gemm-cuda (contrib/gpu-prepare
 * carries it). Exit: 0 measured, 1 no usable GPU or a CUDA error (named),
 * 2 bad usage.
 */
#include "config.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum mode { M_F32_BF16, M_BF16, M_TF32, M_F32, NMODE };
static const char *const mode_name[NMODE] = {"f32-bf16", "bf16", "tf32",
					     "f32"};

struct shape {
	int dim, heads, seq, experts, topk, ffn, batch, vocab, layers;
};

/* one product: C[m x n] = A[m x k] B[k x n], batch of them */
struct prod {
	const char *name;
	long m, n, k, batch;
	double per_step; /* how often a step makes it (forward and backward) */
};

#define MAXPROD 16
static struct prod prods[MAXPROD];
static int nprods;

static void add(const char *name, long m, long n, long k, long batch,
		double per_step)
{
	prods[nprods++] = (struct prod){name, m, n, k, batch, per_step};
}

/*
 * The products of one step on one GPU, in cuBLAS's terms, N tokens and
 * R = N K / E rows per expert. A dense layer makes three of the same FLOPs:
 * forward and input gradient (timed as the forward's shape; the router and
 * the head all three) and the weight gradient, whose inner dimension is
 * the tokens; an expert's w2 weight gradient is timed as w1's.
 */
static void build(const struct shape *s)
{
	long N = (long)s->batch * s->seq, D = s->dim, F = s->ffn;
	long R = N * s->topk / s->experts, Dh = D / s->heads;
	long BH = (long)s->batch * s->heads, T = s->seq, L = s->layers;

	add("q,k,v,wo", N, D, D, 1, 2.0 * 4 * L);
	add("q,k,v,wo dw", D, D, N, 1, 4.0 * L);
	add("head", N, s->vocab, D, 1, 3.0);
	add("router", N, s->experts, D, 1, 3.0 * L);
	add("expert w1,w3", R, F, D, s->experts, 2.0 * 2 * L);
	add("expert w2", R, D, F, s->experts, 2.0 * L);
	add("expert dw", D, F, R, s->experts, 3.0 * L);
	add("att q k^T", T, T, Dh, BH, 2.0 * L);
	add("att p v", T, Dh, T, BH, 2.0 * L);
}

#define CK(x)                                                                 \
	do {                                                                  \
		cudaError_t e_ = (x);                                         \
		if (e_ != cudaSuccess) {                                      \
			fprintf(stderr, "gemm-cuda: %s: %s\n", #x,             \
				cudaGetErrorString(e_));                      \
			exit(1);                                              \
		}                                                             \
	} while (0)
#define CB(x)                                                                 \
	do {                                                                  \
		cublasStatus_t s_ = (x);                                      \
		if (s_ != CUBLAS_STATUS_SUCCESS) {                            \
			fprintf(stderr, "gemm-cuda: %s: %s\n", #x,             \
				cublasGetStatusString(s_));                   \
			return -1;                                            \
		}                                                             \
	} while (0)

/* device buffers big enough for every product, random in [-0.5, 0.5) */
struct bufs {
	float *a, *b, *c;
	uint16_t *a16, *b16;
};

static void fill(float *x, uint16_t *x16, size_t n, uint64_t seed)
{
	uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;

	for (size_t i = 0; i < n; i++) {
		uint32_t u;

		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		x[i] = (float)((double)(s >> 11) / 9007199254740992.0 - 0.5);
		memcpy(&u, &x[i], sizeof(u));
		x16[i] = (uint16_t)(u >> 16);
	}
}

static void alloc_bufs(struct bufs *b)
{
	size_t na = 0, nb = 0, nc = 0;

	for (int i = 0; i < nprods; i++) {
		const struct prod *p = &prods[i];
		size_t a = (size_t)(p->m * p->k * p->batch);
		size_t bb = (size_t)(p->k * p->n * p->batch);
		size_t c = (size_t)(p->m * p->n * p->batch);

		na = a > na ? a : na;
		nb = bb > nb ? bb : nb;
		nc = c > nc ? c : nc;
	}
	size_t nmax = na > nb ? na : nb;
	float *h = malloc(nmax * sizeof(float));
	uint16_t *h16 = malloc(nmax * sizeof(uint16_t));

	if (!h || !h16) {
		fprintf(stderr, "gemm-cuda: out of host memory (%zu elements)\n",
			nmax);
		exit(1);
	}
	CK(cudaMalloc((void **)&b->a, na * sizeof(float)));
	CK(cudaMalloc((void **)&b->b, nb * sizeof(float)));
	CK(cudaMalloc((void **)&b->c, nc * sizeof(float)));
	CK(cudaMalloc((void **)&b->a16, na * sizeof(uint16_t)));
	CK(cudaMalloc((void **)&b->b16, nb * sizeof(uint16_t)));
	fill(h, h16, na, 1);
	CK(cudaMemcpy(b->a, h, na * sizeof(float), cudaMemcpyHostToDevice));
	CK(cudaMemcpy(b->a16, h16, na * sizeof(uint16_t),
		      cudaMemcpyHostToDevice));
	fill(h, h16, nb, 2);
	CK(cudaMemcpy(b->b, h, nb * sizeof(float), cudaMemcpyHostToDevice));
	CK(cudaMemcpy(b->b16, h16, nb * sizeof(uint16_t),
		      cudaMemcpyHostToDevice));
	free(h);
	free(h16);
}

/* one run of product p in mode md */
static int gemm(cublasHandle_t h, const struct prod *p, enum mode md,
		const struct bufs *b)
{
	const float one = 1.0f, zero = 0.0f;
	int m = (int)p->m, n = (int)p->n, k = (int)p->k;
	cudaDataType_t tab = md == M_BF16 ? CUDA_R_16BF : CUDA_R_32F;
	const void *A = md == M_BF16 ? (const void *)b->a16 : b->a;
	const void *B = md == M_BF16 ? (const void *)b->b16 : b->b;
	cublasComputeType_t ct = md == M_F32_BF16 ? CUBLAS_COMPUTE_32F_FAST_16BF
				 : md == M_TF32	  ? CUBLAS_COMPUTE_32F_FAST_TF32
						  : CUBLAS_COMPUTE_32F;

	/* column-major: C (m x n) = A (m x k) B (k x n) */
	CB(cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k,
				      &one, A, tab, m, (long long)m * k, B,
				      tab, k, (long long)k * n, &zero, b->c,
				      CUDA_R_32F, m, (long long)m * n,
				      (int)p->batch, ct, CUBLAS_GEMM_DEFAULT));
	return 0;
}

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;

	return (a > b) - (a < b);
}

/* ms: the time of reps runs of p in md, or -1 on a cuBLAS error */
static float time_reps(cublasHandle_t h, const struct prod *p, enum mode md,
		       const struct bufs *b, int reps, cudaEvent_t e0,
		       cudaEvent_t e1)
{
	float ms = 0;

	CK(cudaEventRecord(e0, 0));
	for (int r = 0; r < reps; r++)
		if (gemm(h, p, md, b))
			return -1;
	CK(cudaEventRecord(e1, 0));
	CK(cudaEventSynchronize(e1));
	CK(cudaEventElapsedTime(&ms, e0, e1));
	return ms;
}

/* TFLOP/s of p in md: the median of five samples of at least 20 ms */
static double rate(cublasHandle_t h, const struct prod *p, enum mode md,
		   const struct bufs *b)
{
	cudaEvent_t e0, e1;
	double flops = 2.0 * (double)p->m * p->n * p->k * p->batch;
	double samp[5];
	int reps = 1;
	float ms;

	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	/* warm up (heuristics, clocks), then grow the repeat count until
	 * one sample takes 20 ms */
	if (time_reps(h, p, md, b, 3, e0, e1) < 0)
		return -1;
	for (;;) {
		if ((ms = time_reps(h, p, md, b, reps, e0, e1)) < 0)
			return -1;
		if (ms >= 20.0f || reps >= (1 << 20))
			break;
		reps = ms > 0.5f ? (int)(reps * 22.0f / ms) + 1 : reps * 16;
	}
	for (int s = 0; s < 5; s++) {
		if ((ms = time_reps(h, p, md, b, reps, e0, e1)) < 0)
			return -1;
		samp[s] = flops * reps / (ms * 1e-3) / 1e12;
	}
	CK(cudaEventDestroy(e0));
	CK(cudaEventDestroy(e1));
	qsort(samp, 5, sizeof(samp[0]), cmp_double);
	return samp[2];
}

static void usage(void)
{
	fputs("usage: gemm-cuda [--dim D] [--heads H] [--seq-len T] "
	      "[--experts E] [--top-k K] [--ffn F] [--batch B] [--vocab V] "
	      "[--layers L] [--csv FILE]\n",
	      stderr);
	exit(2);
}

static int num(const char *flag, const char *s, int lo, int hi)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi) {
		fprintf(stderr, "gemm-cuda: --%s '%s': want an integer in [%d, %d]\n",
			flag, s, lo, hi);
		exit(2);
	}
	return (int)v;
}

int main(int argc, char **argv)
{
	/* the throughput run of contrib/gpu-check on a GPU of 60 GiB or more */
	struct shape s = {2048, 16, 1024, 8, 2, 4096, 16, 256, 4};
	static const struct option lo[] = {
	    {"dim", required_argument, NULL, 'd'},
	    {"heads", required_argument, NULL, 'H'},
	    {"seq-len", required_argument, NULL, 'T'},
	    {"experts", required_argument, NULL, 'E'},
	    {"top-k", required_argument, NULL, 'K'},
	    {"ffn", required_argument, NULL, 'F'},
	    {"batch", required_argument, NULL, 'B'},
	    {"vocab", required_argument, NULL, 'V'},
	    {"layers", required_argument, NULL, 'L'},
	    {"csv", required_argument, NULL, 'c'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0}};
	const char *csv = NULL;
	int c, ndev = 0;

	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		const char *f = lo[0].name;

		for (int i = 0; lo[i].name; i++)
			if (lo[i].val == c)
				f = lo[i].name;
		switch (c) {
		case 'd': s.dim = num(f, optarg, 1, 65536); break;
		case 'H': s.heads = num(f, optarg, 1, 1024); break;
		case 'T': s.seq = num(f, optarg, 1, 1 << 20); break;
		case 'E': s.experts = num(f, optarg, 1, 4096); break;
		case 'K': s.topk = num(f, optarg, 1, 4096); break;
		case 'F': s.ffn = num(f, optarg, 1, 1 << 20); break;
		case 'B': s.batch = num(f, optarg, 1, 1 << 20); break;
		case 'V': s.vocab = num(f, optarg, 1, 1 << 24); break;
		case 'L': s.layers = num(f, optarg, 1, 4096); break;
		case 'c': csv = optarg; break;
		default: usage();
		}
	}
	if (optind < argc)
		usage();
	if (s.dim % s.heads || s.topk > s.experts) {
		fprintf(stderr, "gemm-cuda: --dim must be a multiple of --heads, "
				"--top-k at most --experts\n");
		return 2;
	}
	cudaError_t e = cudaGetDeviceCount(&ndev);
	if (e != cudaSuccess || ndev < 1) {
		fprintf(stderr, "gemm-cuda: no usable CUDA device: %s\n",
			e != cudaSuccess ? cudaGetErrorString(e) : "none found");
		return 1;
	}

	struct cudaDeviceProp prop;
	cublasHandle_t h;
	struct bufs b;
	FILE *out = NULL;
	double rates[MAXPROD][NMODE], total[NMODE] = {0}, fl = 0;
	int ver = 0;

	CK(cudaGetDeviceProperties(&prop, 0));
	if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) {
		fprintf(stderr, "gemm-cuda: cublasCreate failed\n");
		return 1;
	}
	cublasGetVersion(h, &ver);
	build(&s);
	alloc_bufs(&b);
	if (csv && !(out = fopen(csv, "w"))) {
		fprintf(stderr, "gemm-cuda: %s: %s\n", csv, strerror(errno));
		return 1;
	}
	if (out)
		fprintf(out, "product,mode,m,n,k,batch,tflops\n");
	printf("gemm-cuda: %s (sm_%d%d), cuBLAS %d; --dim %d --heads %d "
	       "--seq-len %d --experts %d --top-k %d --ffn %d --batch %d "
	       "--vocab %d --layers %d\n",
	       prop.name, prop.major, prop.minor, ver, s.dim, s.heads, s.seq,
	       s.experts, s.topk, s.ffn, s.batch, s.vocab, s.layers);
	printf("%-16s %6s %6s %6s %5s", "product", "M", "N", "K", "batch");
	for (int md = 0; md < NMODE; md++)
		printf(" %9s", mode_name[md]);
	printf("   TFLOP/s\n");
	for (int i = 0; i < nprods; i++) {
		const struct prod *p = &prods[i];

		printf("%-16s %6ld %6ld %6ld %5ld", p->name, p->m, p->n, p->k,
		       p->batch);
		for (int md = 0; md < NMODE; md++) {
			rates[i][md] = rate(h, p, md, &b);
			if (rates[i][md] < 0)
				return 1;
			printf(" %9.1f", rates[i][md]);
			if (out)
				fprintf(out, "%s,%s,%ld,%ld,%ld,%ld,%.2f\n",
					p->name, mode_name[md], p->m, p->n,
					p->k, p->batch, rates[i][md]);
		}
		printf("\n");
		fflush(stdout);
	}
	/* a step's time at these rates: the FLOP-weighted harmonic mean */
	for (int i = 0; i < nprods; i++) {
		double f = 2.0 * prods[i].m * prods[i].n * prods[i].k *
			   prods[i].batch * prods[i].per_step;

		fl += f;
		for (int md = 0; md < NMODE; md++)
			total[md] += f / rates[i][md];
	}
	printf("%-16s %26s", "step (weighted)", "");
	for (int md = 0; md < NMODE; md++) {
		printf(" %9.1f", fl / total[md]);
		if (out)
			fprintf(out, "step,%s,0,0,0,0,%.2f\n", mode_name[md],
				fl / total[md]);
	}
	printf("\n");
	if (out && fclose(out)) {
		fprintf(stderr, "gemm-cuda: %s: %s\n", csv, strerror(errno));
		return 1;
	}
	cublasDestroy(h);
	return 0;
}
