/*
 * tools.c - sigma-train's two helper commands: "prepare" turns text into
 * token files (data.h), "sgemm" measures this machine's large-GEMM rate
 * through the same op and threading the model uses.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "sigma.h"
#include "blas_core.h"
#include "data.h"
#include "exitcodes.h"
#include "opts.h"
#include "select.h"
#include "tools.h"

/* ---- prepare ------------------------------------------------------------- */

int tool_prepare(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "train-out", required_argument, NULL, 't' },
		{ "val-out", required_argument, NULL, 'v' },
		{ "val-fraction", required_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char train[PATH_MAX] = "", val[PATH_MAX] = "", err[1024];
	double frac = 0.1;
	uint64_t nt = 0, nv = 0;
	int c, rc;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case 't':
			if (opt_path("--train-out", optarg, train, sizeof(train)))
				return TRAIN_EXIT_USAGE;
			break;
		case 'v':
			if (opt_path("--val-out", optarg, val, sizeof(val)))
				return TRAIN_EXIT_USAGE;
			break;
		case 'f':
			if (opt_real("--val-fraction", optarg, 1e-6, 0.9,
				       &frac))
				return TRAIN_EXIT_USAGE;
			break;
		case 'h':
			train_usage(stdout);
			return TRAIN_EXIT_OK;
		default:
			train_usage(stderr);
			return TRAIN_EXIT_USAGE;
		}
	}
	if (!*train || !*val || optind >= argc) {
		sigma_error("prepare needs --train-out, --val-out and at least one text file");
		return TRAIN_EXIT_USAGE;
	}
	rc = data_prepare((const char *const *)argv + optind, argc - optind,
			  train, val, frac, &nt, &nv, err, sizeof(err));
	if (rc) {
		sigma_error("%s", err);
		return exit_code_of(rc, PHASE_PREPARE);
	}
	printf("prepared %s: %llu tokens, %s: %llu tokens (V = 256, bytes)\n",
	       train, (unsigned long long)nt, val, (unsigned long long)nv);
	return TRAIN_EXIT_OK;
}

/* ---- sgemm --------------------------------------------------------------- */

/*
 * sgemm --check: the BLAS's products against exact integer answers, in the
 * three forms the model uses (in w, dout w^T, in^T dout). The matrices hold
 * small integers, so every sum is exact in float in any order: a result
 * that differs by any amount is a wrong kernel, never rounding. A few ms.
 */
#define KAT_N  67 /* rows: not a multiple of any kernel's block */
#define KAT_C  45
#define KAT_OC 38

static float kat(long i, long j, long salt)
{
	return (float)((i * 7 + j * 3 + salt) % 9 - 4);
}

static int kat_compare(const char *what, const float *got, long r, long c,
		       const float *x, const float *y, long k, bool xt,
		       bool yt)
{
	for (long i = 0; i < r; i++)
		for (long j = 0; j < c; j++) {
			long want = 0;

			for (long l = 0; l < k; l++)
				want += (long)(xt ? x[l * r + i] : x[i * k + l]) *
					(long)(yt ? y[j * k + l] : y[l * c + j]);
			if (got[i * c + j] != (float)want) {
				sigma_error("sgemm --check: %s [%ld][%ld] = %g, expected %ld",
					    what, i, j, (double)got[i * c + j],
					    want);
				return 1;
			}
		}
	return 0;
}

static int sgemm_check(void)
{
	const struct sigma_ops *ops = &sigma_ops_cpu;
	static float in[KAT_N * KAT_C], w[KAT_C * KAT_OC], dout[KAT_N * KAT_OC];
	static float out[KAT_N * KAT_OC], din[KAT_N * KAT_C], dw[KAT_C * KAT_OC];
	int bad;

	if (ops->init(0))
		return TRAIN_EXIT_USAGE;
	for (long i = 0; i < KAT_N * KAT_C; i++)
		in[i] = kat(i / KAT_C, i % KAT_C, 1);
	for (long i = 0; i < KAT_C * KAT_OC; i++)
		w[i] = kat(i / KAT_OC, i % KAT_OC, 2);
	for (long i = 0; i < KAT_N * KAT_OC; i++)
		dout[i] = kat(i / KAT_OC, i % KAT_OC, 5);
	memset(dw, 0, sizeof(dw));
	ops->matmul_forward(out, in, w, KAT_N, KAT_C, KAT_OC, 0);
	ops->matmul_backward(din, dw, dout, in, w, KAT_N, KAT_C, KAT_OC, 0);
	bad = kat_compare("in w", out, KAT_N, KAT_OC, in, w, KAT_C, false,
			  false) ||
	      kat_compare("dout w^T", din, KAT_N, KAT_C, dout, w, KAT_OC,
			  false, true) ||
	      kat_compare("in^T dout", dw, KAT_C, KAT_OC, in, dout, KAT_N,
			  true, false);
	printf("sgemm --check: %s\n", bad ? "FAIL" : "ok");
	return bad ? TRAIN_EXIT_FAILURE : TRAIN_EXIT_OK;
}

/*
 * The large-GEMM rate of this machine through the same op and threading
 * the model uses: the yardstick for the trainer's GFLOP/s.
 */
int tool_sgemm(int argc, char **argv)
{
	const struct sigma_ops *ops = &sigma_ops_cpu;
	long n = 2048, reps = 5, threads = 0;
	float *a, *b, *c;
	double best = 0.0;
	char be[256];

	if (argc == 2 && !strcmp(argv[1], "--check"))
		return sgemm_check();
	for (int i = 1; i < argc; i++) {
		long *dst = !strcmp(argv[i], "--size")	  ? &n
			    : !strcmp(argv[i], "--reps")    ? &reps
			    : !strcmp(argv[i], "--threads") ? &threads
							    : NULL;

		if (!dst || i + 1 >= argc) {
			sigma_error("sgemm [--size N] [--reps R] [--threads T] | sgemm --check");
			return TRAIN_EXIT_USAGE;
		}
		if (opt_long(argv[i], argv[i + 1], dst == &n ? 16 : 1,
			      dst == &n ? 16384 : 1000, dst))
			return TRAIN_EXIT_USAGE;
		i++;
	}
	if (ops->init((int)threads))
		return TRAIN_EXIT_USAGE;
	a = ops->alloc(sizeof(float) * n * n);
	b = ops->alloc(sizeof(float) * n * n);
	c = ops->alloc(sizeof(float) * n * n);
	if (!a || !b || !c) {
		sigma_error("sgemm: out of memory");
		return TRAIN_EXIT_OSERR;
	}
	for (long i = 0; i < n * n; i++) {
		a[i] = (float)(i % 7) * 0.1f;
		b[i] = (float)(i % 5) * 0.1f;
	}
	ops->matmul_forward(c, a, b, (int)n, (int)n, (int)n, 0); /* warm */
	for (long r = 0; r < reps; r++) {
		uint64_t t0 = sigma_now_ms();
		double dt;

		ops->matmul_forward(c, a, b, (int)n, (int)n, (int)n, 0);
		dt = (sigma_now_ms() - t0) / 1000.0;
		if (dt > 0 && 2.0 * n * n * n / dt / 1e9 > best)
			best = 2.0 * n * n * n / dt / 1e9;
	}
	ops->describe(be, sizeof(be));
	printf("sgemm %ldx%ldx%ld: %.1f GFLOP/s (best of %ld; %s)\n", n, n, n,
	       best, reps, be);
	{
		struct cpu_features f;
		char cpu[64];

		cpu_features_read(&f);
		cpu_features_describe(&f, cpu, sizeof(cpu));
		printf("sgemm: BLAS kernel %s, CPU %s, best kernel %s\n",
		       blas_core_now(), cpu, blas_core_best(&f));
	}
	ops->free(a);
	ops->free(b);
	ops->free(c);
	return TRAIN_EXIT_OK;
}
