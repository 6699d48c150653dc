/*
 * tools.c - sigma-train's two helper commands: "prepare" turns text into
 * token files (data.h), "sgemm" measures this machine's large-GEMM rate
 * through the same op and threading the model uses.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "sigma.h"
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

	for (int i = 1; i < argc; i++) {
		long *dst = !strcmp(argv[i], "--size")	  ? &n
			    : !strcmp(argv[i], "--reps")    ? &reps
			    : !strcmp(argv[i], "--threads") ? &threads
							    : NULL;

		if (!dst || i + 1 >= argc) {
			sigma_error("sgemm [--size N] [--reps R] [--threads T]");
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
	ops->free(a);
	ops->free(b);
	ops->free(c);
	return TRAIN_EXIT_OK;
}
