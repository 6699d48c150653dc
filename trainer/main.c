/*
 * main.c - sigma-train: the command line, the training loop, signals.
 *
 *   sigma-train [OPTIONS]                        train
 *   sigma-train prepare [OPTIONS] TEXT...        make token files
 *
 * Reads straight down: defaults, SIGMA_* environment, flags (which win),
 * data, model, resume, loop, final checkpoint. Exit codes: exitcodes.h.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "sigma.h"
#include "ckpt.h"
#include "data.h"
#include "delta.h"
#include "dist.h"
#include "exitcodes.h"
#include "guard.h"
#include "model.h"
#include "resume.h"
#include "rollback.h"
#include "claim.h"
#include "rng.h"
#include "select.h"

struct train_opts {
	struct model_config model;
	struct optim_config optim;
	int batch;
	uint64_t seed;
	int threads;
	char train_path[PATH_MAX];
	char val_path[PATH_MAX];
	char ckpt_dir[PATH_MAX];
	long ckpt_every; /* 0: only at the end and on request */
	int ckpt_keep;
	bool ckpt_sync; /* --ckpt-sync: write in the loop, no writer thread */
	char local_dir[PATH_MAX]; /* tier 1, node-local; empty: off */
	long ckpt_full_every; /* with tier 1: shared every N steps; 0 end */
	long ckpt_diff_every; /* differential every N steps; 0: off */
	int local_keep; /* tier 1: newest copies kept per directory */
	int attempt; /* SIGMA_ATTEMPT (else SLURM_RESTART_COUNT): in names */
	long eval_every; /* 0: never */
	int eval_batches;
	long log_every;
	char metrics_path[PATH_MAX];
	char init_from[PATH_MAX];
	long stop_at; /* 0: never; else stop as on SIGUSR1 after this step */
	bool resume;
	bool resume_flag; /* --resume itself (not implied by an attempt) */
	bool new_run;	  /* --new-run */
	bool vocab_set;
	struct guard_config guard; /* --guard*, guard.h */
	bool bf16; /* --precision bf16 */
	char device[32]; /* --device: cpu (empty), cuda, cuda:fp32, cuda:bf16 */
	int dp, ep, pp; /* layout; dp 0: the job size */
	int micro;	/* micro-batches per step and rank */
	double bucket_mb; /* gradient all-reduce bucket */
};

static volatile sig_atomic_t stop_signal;

static void on_stop(int sig)
{
	stop_signal = sig;
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: sigma-train [OPTIONS]\n"
		"       sigma-train prepare --train-out FILE --val-out FILE [--val-fraction F] TEXT...\n"
		"       sigma-train sgemm [--size N] [--reps R] [--threads T]\n"
		"\n"
		"Data and checkpoints:\n"
		"  --train FILE          training token file (required)\n"
		"  --val FILE            validation token file\n"
		"  --ckpt-dir DIR        checkpoint directory ($SIGMA_CKPT_DIR)\n"
		"  --ckpt-every N        checkpoint every N steps ($SIGMA_CKPT_EVERY; 0: at the end)\n"
		"  --ckpt-keep N         keep the newest N checkpoints (default 3)\n"
		"  --ckpt-sync           write checkpoints in the loop, not in the background\n"
		"  --local-ckpt-dir DIR  node-local tier every --ckpt-every steps, replicated to\n"
		"                        a rank on another node ($SIGMA_LOCAL_CKPT_DIR)\n"
		"  --ckpt-full-every N   with --local-ckpt-dir: shared checkpoint every N steps\n"
		"                        (0: at the end and on a stop only)\n"
		"  --ckpt-diff-every N   between full checkpoints, a differential one against\n"
		"                        the newest full one every N steps (default 0: off)\n"
		"  --local-ckpt-keep N   keep the newest N node-local copies (default 2)\n"
		"  --resume              continue from the newest valid checkpoint\n"
		"                        (automatic when SIGMA_ATTEMPT or SLURM_RESTART_COUNT > 0)\n"
		"  --new-run             start a new run where another run's checkpoints are\n"
		"                        (they move to DIR/run-ID); without it that is refused\n"
		"  --init-from FILE      start from the weights of a checkpoint\n"
		"  --stop-at N           after step N, checkpoint and exit 75 as on SIGUSR1\n"
		"Model (default: --preset demo):\n"
		"  --preset small|demo   shapes of docs/model.md\n"
		"  --vocab V --dim D --layers L --heads H --seq-len T\n"
		"  --experts E --top-k K --ffn F --aux-coef C\n"
		"Training:\n"
		"  --batch B             sequences per step (default 8)\n"
		"  --steps N             total steps (default 1000)\n"
		"  --lr LR               peak learning rate (default 3e-3)\n"
		"  --warmup N            warm-up steps (default 20)\n"
		"  --lr-min-ratio R      cosine floor as a fraction of LR (default 0.1)\n"
		"  --weight-decay W      (default 0.1)  --clip C  (default 1.0, 0: off)\n"
		"  --seed S              weights and batch order (default 1)\n"
		"  --threads N           OpenMP threads (default: OMP_NUM_THREADS or all)\n"
		"  --device NAME         cpu (default), cuda, cuda:fp32, cuda:bf16 (docs/cuda.md)\n"
		"Parallel (one process per rank under srun --mpi=pmix):\n"
		"  --dp N                data-parallel ranks (default: all ranks); the\n"
		"                        global --batch is split evenly over them\n"
		"  --ep N                expert-parallel ranks (1): the experts of every\n"
		"                        layer are spread over groups of N data-parallel\n"
		"                        ranks, tokens exchanged all-to-all\n"
		"  --pp N                pipeline stages (1): L / N layers each, --dp x\n"
		"                        --pp = ranks\n"
		"  --micro N             micro-batches per step and rank (1), on the\n"
		"                        1F1B schedule; the loss is their mean\n"
		"  --grad-bucket-mb M    gradient all-reduce bucket (default 16)\n"
		GUARD_USAGE
		"Reporting:\n"
		"  --log-every N         progress line every N steps (default 10)\n"
		"  --eval-every N        validation loss every N steps (default 100; 0: never)\n"
		"  --eval-batches N      validation batches (default 4)\n"
		"  --metrics FILE        CSV of the progress series\n"
		"  -h, --help            this text\n"
		"\n"
		"Exit: 0 done, 64 usage, 65 bad data or checkpoint, 66 missing input,\n"
		"69 stop requested without a checkpoint dir, 70 diverged, 71 system error,\n"
		"73 cannot write, 75 stopped on request after a checkpoint (requeue),\n"
		"76 a peer rank failed or a collective timed out (requeue),\n"
		"79 a step's result changed when recomputed (requeue on other nodes).\n");
}

#define DIE(code, ...)                                                        \
	do {                                                                  \
		sigma_error(__VA_ARGS__);                                     \
		return (code);                                                \
	} while (0)

static int parse_int(const char *what, const char *s, long lo, long hi,
		     long *out)
{
	int rc = sigma_parse_long(s, lo, hi, out);

	if (rc == -ERANGE)
		sigma_error("%s %s is out of range [%ld, %ld]", what, s, lo, hi);
	else if (rc)
		sigma_error("%s \"%s\" is not a whole number", what, s);
	return rc;
}

static int parse_real(const char *what, const char *s, double lo, double hi,
		      double *out)
{
	int rc = sigma_parse_double(s, lo, hi, out);

	if (rc == -ERANGE)
		sigma_error("%s %s is out of range [%g, %g]", what, s, lo, hi);
	else if (rc)
		sigma_error("%s \"%s\" is not a number", what, s);
	return rc;
}

static int copy_path(const char *what, const char *s, char *dst, size_t len)
{
	if (sigma_strlcpy(dst, s, len) >= len || !*s) {
		sigma_error("%s: empty or too long path", what);
		return -EINVAL;
	}
	return 0;
}

/* ---- prepare ------------------------------------------------------------- */

static int cmd_prepare(int argc, char **argv)
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
			if (copy_path("--train-out", optarg, train, sizeof(train)))
				return TRAIN_EXIT_USAGE;
			break;
		case 'v':
			if (copy_path("--val-out", optarg, val, sizeof(val)))
				return TRAIN_EXIT_USAGE;
			break;
		case 'f':
			if (parse_real("--val-fraction", optarg, 1e-6, 0.9,
				       &frac))
				return TRAIN_EXIT_USAGE;
			break;
		case 'h':
			usage(stdout);
			return TRAIN_EXIT_OK;
		default:
			usage(stderr);
			return TRAIN_EXIT_USAGE;
		}
	}
	if (!*train || !*val || optind >= argc)
		DIE(TRAIN_EXIT_USAGE,
		    "prepare needs --train-out, --val-out and at least one text file");
	rc = data_prepare((const char *const *)argv + optind, argc - optind,
			  train, val, frac, &nt, &nv, err, sizeof(err));
	if (rc == -EBADMSG)
		DIE(TRAIN_EXIT_DATAERR, "%s", err);
	if (rc == -ENOENT || rc == -EACCES)
		DIE(TRAIN_EXIT_NOINPUT, "%s", err);
	if (rc)
		DIE(TRAIN_EXIT_CANTCREAT, "%s", err);
	printf("prepared %s: %llu tokens, %s: %llu tokens (V = 256, bytes)\n",
	       train, (unsigned long long)nt, val, (unsigned long long)nv);
	return TRAIN_EXIT_OK;
}

/* ---- sgemm --------------------------------------------------------------- */

/*
 * The large-GEMM rate of this machine through the same op and threading
 * the model uses: the yardstick for the trainer's GFLOP/s.
 */
static int cmd_sgemm(int argc, char **argv)
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
		if (parse_int(argv[i], argv[i + 1], dst == &n ? 16 : 1,
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

/* ---- options ------------------------------------------------------------- */

enum {
	OPT_TRAIN = 256, OPT_VAL, OPT_CKPT_DIR, OPT_CKPT_EVERY, OPT_CKPT_KEEP,
	OPT_CKPT_SYNC, OPT_LOCAL_CKPT_DIR, OPT_CKPT_FULL_EVERY, OPT_LOCAL_KEEP,
	OPT_RESUME, OPT_INIT_FROM, OPT_PRESET, OPT_VOCAB, OPT_DIM, OPT_LAYERS,
	OPT_HEADS, OPT_SEQ, OPT_EXPERTS, OPT_TOPK, OPT_FFN, OPT_AUX, OPT_BATCH,
	OPT_STEPS, OPT_LR, OPT_WARMUP, OPT_LRMIN, OPT_WD, OPT_CLIP, OPT_SEED,
	OPT_THREADS, OPT_LOG, OPT_EVAL, OPT_EVALB, OPT_METRICS, OPT_STOP_AT,
	OPT_DP, OPT_EP, OPT_PP, OPT_MICRO, OPT_BUCKET, OPT_DEVICE,
	OPT_CKPT_DIFF_EVERY, OPT_NEW_RUN,
};

/* SIGMA_* defaults (the plugin's environment); flags parsed later win */
static int read_env(struct train_opts *o)
{
	const char *s;
	long v;

	s = getenv(SIGMA_ENV_CKPT_DIR);
	if (s && *s && copy_path(SIGMA_ENV_CKPT_DIR, s, o->ckpt_dir,
				 sizeof(o->ckpt_dir)))
		return -EINVAL;
	s = getenv("SIGMA_LOCAL_CKPT_DIR");
	if (s && *s && copy_path("SIGMA_LOCAL_CKPT_DIR", s, o->local_dir,
				 sizeof(o->local_dir)))
		return -EINVAL;
	s = getenv(SIGMA_ENV_CKPT_EVERY);
	if (s && *s) {
		if (parse_int(SIGMA_ENV_CKPT_EVERY, s, 0, SIGMA_CKPT_EVERY_MAX,
			      &v))
			return -EINVAL;
		o->ckpt_every = v;
	}
	s = getenv("SLURM_RESTART_COUNT");
	if (s && *s && sigma_parse_long(s, 1, LONG_MAX, &v) == 0) {
		o->resume = true;
		o->attempt = v > CKPT_ATTEMPT_MAX ? CKPT_ATTEMPT_MAX : (int)v;
	}
	/* the plugin's count wins over Slurm's own */
	s = getenv(SIGMA_ENV_ATTEMPT);
	if (s && *s) {
		if (parse_int(SIGMA_ENV_ATTEMPT, s, 0, CKPT_ATTEMPT_MAX, &v))
			return -EINVAL;
		o->resume |= v > 0;
		o->attempt = (int)v;
	}
	return 0;
}

static int parse_opts(struct train_opts *o, int argc, char **argv)
{
	static const struct option lo[] = {
		{ "train", required_argument, NULL, OPT_TRAIN },
		{ "val", required_argument, NULL, OPT_VAL },
		{ "ckpt-dir", required_argument, NULL, OPT_CKPT_DIR },
		{ "ckpt-every", required_argument, NULL, OPT_CKPT_EVERY },
		{ "ckpt-keep", required_argument, NULL, OPT_CKPT_KEEP },
		{ "ckpt-sync", no_argument, NULL, OPT_CKPT_SYNC },
		{ "local-ckpt-dir", required_argument, NULL, OPT_LOCAL_CKPT_DIR },
		{ "local-ckpt-keep", required_argument, NULL, OPT_LOCAL_KEEP },
		{ "ckpt-full-every", required_argument, NULL,
		  OPT_CKPT_FULL_EVERY },
		{ "ckpt-diff-every", required_argument, NULL,
		  OPT_CKPT_DIFF_EVERY },
		{ "resume", no_argument, NULL, OPT_RESUME },
		{ "new-run", no_argument, NULL, OPT_NEW_RUN },
		{ "init-from", required_argument, NULL, OPT_INIT_FROM },
		{ "preset", required_argument, NULL, OPT_PRESET },
		{ "vocab", required_argument, NULL, OPT_VOCAB },
		{ "dim", required_argument, NULL, OPT_DIM },
		{ "layers", required_argument, NULL, OPT_LAYERS },
		{ "heads", required_argument, NULL, OPT_HEADS },
		{ "seq-len", required_argument, NULL, OPT_SEQ },
		{ "experts", required_argument, NULL, OPT_EXPERTS },
		{ "top-k", required_argument, NULL, OPT_TOPK },
		{ "ffn", required_argument, NULL, OPT_FFN },
		{ "aux-coef", required_argument, NULL, OPT_AUX },
		{ "batch", required_argument, NULL, OPT_BATCH },
		{ "steps", required_argument, NULL, OPT_STEPS },
		{ "lr", required_argument, NULL, OPT_LR },
		{ "warmup", required_argument, NULL, OPT_WARMUP },
		{ "lr-min-ratio", required_argument, NULL, OPT_LRMIN },
		{ "weight-decay", required_argument, NULL, OPT_WD },
		{ "clip", required_argument, NULL, OPT_CLIP },
		{ "seed", required_argument, NULL, OPT_SEED },
		{ "threads", required_argument, NULL, OPT_THREADS },
		{ "log-every", required_argument, NULL, OPT_LOG },
		{ "eval-every", required_argument, NULL, OPT_EVAL },
		{ "eval-batches", required_argument, NULL, OPT_EVALB },
		{ "metrics", required_argument, NULL, OPT_METRICS },
		{ "stop-at", required_argument, NULL, OPT_STOP_AT },
		{ "device", required_argument, NULL, OPT_DEVICE },
		{ "dp", required_argument, NULL, OPT_DP },
		{ "ep", required_argument, NULL, OPT_EP },
		{ "pp", required_argument, NULL, OPT_PP },
		{ "micro", required_argument, NULL, OPT_MICRO },
		{ "grad-bucket-mb", required_argument, NULL, OPT_BUCKET },
		GUARD_LONG_OPTIONS,
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const char *const presets[] = { "small", "demo", NULL };
	/* shape flags apply after the preset, whatever their order */
	long shape[8] = { -1, -1, -1, -1, -1, -1, -1, -1 };
	double aux = -1;
	/* the plain integer options: range, and the long or int they set */
	const struct {
		int opt;
		const char *name;
		long lo, hi;
		long *l;
		int *i;
	} ints[] = {
		{ OPT_BATCH, "--batch", 1, 65536, NULL, &o->batch },
		{ OPT_STEPS, "--steps", 1, 99999999, &o->optim.steps, NULL },
		{ OPT_WARMUP, "--warmup", 0, 99999999, &o->optim.warmup, NULL },
		{ OPT_THREADS, "--threads", 1, 1024, NULL, &o->threads },
		{ OPT_CKPT_EVERY, "--ckpt-every", 0, 99999999, &o->ckpt_every,
		  NULL },
		{ OPT_CKPT_KEEP, "--ckpt-keep", 1, 1000, NULL, &o->ckpt_keep },
		{ OPT_CKPT_FULL_EVERY, "--ckpt-full-every", 0, 99999999,
		  &o->ckpt_full_every, NULL },
		{ OPT_CKPT_DIFF_EVERY, "--ckpt-diff-every", 0, 99999999,
		  &o->ckpt_diff_every, NULL },
		{ OPT_LOCAL_KEEP, "--local-ckpt-keep", 1, 1000, NULL,
		  &o->local_keep },
		{ OPT_STOP_AT, "--stop-at", 1, 99999999, &o->stop_at, NULL },
		{ OPT_DP, "--dp", 1, LAYOUT_MAX_RANKS, NULL, &o->dp },
		{ OPT_EP, "--ep", 1, LAYOUT_MAX_RANKS, NULL, &o->ep },
		{ OPT_PP, "--pp", 1, LAYOUT_MAX_RANKS, NULL, &o->pp },
		{ OPT_MICRO, "--micro", 1, 4096, NULL, &o->micro },
		{ OPT_LOG, "--log-every", 1, 99999999, &o->log_every, NULL },
		{ OPT_EVAL, "--eval-every", 0, 99999999, &o->eval_every, NULL },
		{ OPT_EVALB, "--eval-batches", 1, 100000, NULL,
		  &o->eval_batches },
	};
	size_t k;
	int c;
	long v;
	double d;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		for (k = 0; k < sizeof(ints) / sizeof(ints[0]); k++)
			if (ints[k].opt == c)
				break;
		if (k < sizeof(ints) / sizeof(ints[0])) {
			if (parse_int(ints[k].name, optarg, ints[k].lo,
				      ints[k].hi, &v))
				return -EINVAL;
			if (ints[k].l)
				*ints[k].l = v;
			else
				*ints[k].i = (int)v;
			continue;
		}
		switch (c) {
		case OPT_TRAIN:
			if (copy_path("--train", optarg, o->train_path,
				      sizeof(o->train_path)))
				return -EINVAL;
			break;
		case OPT_VAL:
			if (copy_path("--val", optarg, o->val_path,
				      sizeof(o->val_path)))
				return -EINVAL;
			break;
		case OPT_CKPT_DIR:
			if (copy_path("--ckpt-dir", optarg, o->ckpt_dir,
				      sizeof(o->ckpt_dir)))
				return -EINVAL;
			break;
		case OPT_INIT_FROM:
			if (copy_path("--init-from", optarg, o->init_from,
				      sizeof(o->init_from)))
				return -EINVAL;
			break;
		case OPT_METRICS:
			if (copy_path("--metrics", optarg, o->metrics_path,
				      sizeof(o->metrics_path)))
				return -EINVAL;
			break;
		case OPT_CKPT_SYNC:
			o->ckpt_sync = true;
			break;
		case OPT_LOCAL_CKPT_DIR:
			if (copy_path("--local-ckpt-dir", optarg, o->local_dir,
				      sizeof(o->local_dir)))
				return -EINVAL;
			break;
		case OPT_RESUME:
			o->resume = o->resume_flag = true;
			break;
		case OPT_NEW_RUN:
			o->new_run = true;
			break;
		case OPT_PRESET: {
			int p = sigma_parse_enum(optarg, presets);

			if (p < 0) {
				sigma_error("--preset \"%s\" is not small or demo",
					    optarg);
				return -EINVAL;
			}
			if (p == 0)
				model_config_small(&o->model);
			else
				model_config_demo(&o->model);
			break;
		}
#define SHAPE(opt, i, lo_, hi_, name)                                         \
	case opt:                                                             \
		if (parse_int(name, optarg, lo_, hi_, &shape[i]))             \
			return -EINVAL;                                       \
		if (i == 0)                                                   \
			o->vocab_set = true;                                  \
		break;
		SHAPE(OPT_VOCAB, 0, 2, MODEL_MAX_V, "--vocab")
		SHAPE(OPT_DIM, 1, 2, MODEL_MAX_D, "--dim")
		SHAPE(OPT_LAYERS, 2, 1, MODEL_MAX_L, "--layers")
		SHAPE(OPT_HEADS, 3, 1, MODEL_MAX_D, "--heads")
		SHAPE(OPT_SEQ, 4, 1, MODEL_MAX_T, "--seq-len")
		SHAPE(OPT_EXPERTS, 5, 1, MODEL_MAX_E, "--experts")
		SHAPE(OPT_TOPK, 6, 1, MODEL_MAX_E, "--top-k")
		SHAPE(OPT_FFN, 7, 1, MODEL_MAX_F, "--ffn")
#undef SHAPE
		case OPT_AUX:
			if (parse_real("--aux-coef", optarg, 0, 100, &aux))
				return -EINVAL;
			break;
		case OPT_LR:
			if (parse_real("--lr", optarg, 0, 10, &d))
				return -EINVAL;
			o->optim.lr = (float)d;
			break;
		case OPT_LRMIN:
			if (parse_real("--lr-min-ratio", optarg, 0, 1, &d))
				return -EINVAL;
			o->optim.lr_min_ratio = (float)d;
			break;
		case OPT_WD:
			if (parse_real("--weight-decay", optarg, 0, 10, &d))
				return -EINVAL;
			o->optim.weight_decay = (float)d;
			break;
		case OPT_CLIP:
			if (parse_real("--clip", optarg, 0, 1e6, &d))
				return -EINVAL;
			o->optim.clip = (float)d;
			break;
		case OPT_SEED:
			if (parse_int("--seed", optarg, 0, LONG_MAX, &v))
				return -EINVAL;
			o->seed = (uint64_t)v;
			break;
		case OPT_DEVICE:
			if (sigma_strlcpy(o->device, optarg, sizeof(o->device)) >=
			    sizeof(o->device)) {
				sigma_error("--device %s: name too long", optarg);
				return -EINVAL;
			}
			break;
		case OPT_BUCKET:
			if (parse_real("--grad-bucket-mb", optarg, 0.001, 4096,
				       &d))
				return -EINVAL;
			o->bucket_mb = d;
			break;
		case GUARD_OPT_FIRST ... GUARD_OPT_LAST:
			if (guard_option(&o->guard, &o->bf16, c, optarg))
				return -EINVAL;
			break;
		case 'h':
			usage(stdout);
			exit(TRAIN_EXIT_OK);
		default:
			usage(stderr);
			return -EINVAL;
		}
	}
	if (optind < argc) {
		sigma_error("unexpected argument \"%s\"", argv[optind]);
		return -EINVAL;
	}
	{
		int *f[8] = { &o->model.V, &o->model.D, &o->model.L,
			      &o->model.H, &o->model.T, &o->model.E,
			      &o->model.K, &o->model.F };

		for (int i = 0; i < 8; i++)
			if (shape[i] > 0)
				*f[i] = (int)shape[i];
	}
	if (aux >= 0)
		o->model.aux_coef = (float)aux;
	if (!*o->train_path) {
		sigma_error("--train FILE is required");
		return -EINVAL;
	}
	if (o->new_run && (o->resume_flag || !*o->ckpt_dir)) {
		sigma_error("%s",
			    o->resume_flag
				? "--new-run and --resume: a start either continues a run or begins one"
				: "--new-run: needs a checkpoint directory");
		return -EINVAL;
	}
	if (o->ckpt_diff_every > 0 && !*o->ckpt_dir) {
		sigma_error("--ckpt-diff-every %ld needs a checkpoint directory (--ckpt-dir or SIGMA_CKPT_DIR)",
			    o->ckpt_diff_every);
		return -EINVAL;
	}
	if (o->optim.warmup > o->optim.steps) {
		sigma_error("--warmup %ld is longer than --steps %ld",
			    o->optim.warmup, o->optim.steps);
		return -EINVAL;
	}
	return 0;
}

/* ---- reporting ----------------------------------------------------------- */

static double unigram_entropy(const struct data_file *df)
{
	uint64_t *cnt = calloc(df->vocab, sizeof(uint64_t));
	double h = 0.0;

	if (!cnt)
		return NAN;
	for (uint64_t i = 0; i < df->ntokens; i++)
		cnt[data_token(df, i)]++;
	for (uint32_t v = 0; v < df->vocab; v++) {
		if (cnt[v]) {
			double p = (double)cnt[v] / (double)df->ntokens;

			h -= p * log(p);
		}
	}
	free(cnt);
	return h;
}

static void print_config(const struct train_opts *o, const struct model *m,
			 const struct data_file *train, double entropy)
{
	const struct model_config *c = &m->cfg;
	char be[256], hv[64];

	m->ops->describe(be, sizeof(be));
	ckpt_library_version(hv, sizeof(hv));
	printf("sigma-train %s (git %s), %s, %s\n", PACKAGE_VERSION,
	       SIGMA_GIT_REVISION, be, hv);
	printf("config: V=%d D=%d L=%d H=%d T=%d E=%d K=%d F=%d aux_coef=%g\n",
	       c->V, c->D, c->L, c->H, c->T, c->E, c->K, c->F,
	       (double)c->aux_coef);
	printf("config: batch=%d (%d per micro-batch and rank) steps=%ld lr=%g warmup=%ld lr_min_ratio=%g weight_decay=%g clip=%g seed=%llu\n",
	       o->batch, m->B, o->optim.steps, (double)o->optim.lr, o->optim.warmup,
	       (double)o->optim.lr_min_ratio, (double)o->optim.weight_decay,
	       (double)o->optim.clip, (unsigned long long)o->seed);
	printf("config: params=%zu active_params/token=%.0f flops/token=%.4g arena=%.1f MiB\n",
	       m->nparams, model_active_params(c), model_flops_per_token(c),
	       (double)m->arena_bytes / (1 << 20));
	printf("config: train=%s (%llu tokens, unigram entropy %.4f nats) val=%s\n",
	       o->train_path, (unsigned long long)train->ntokens, entropy,
	       *o->val_path ? o->val_path : "none");
	printf("config: ckpt_dir=%s ckpt_every=%ld ckpt_keep=%d eval_every=%ld log_every=%ld metrics=%s resume=%s\n",
	       *o->ckpt_dir ? o->ckpt_dir : "none", o->ckpt_every,
	       o->ckpt_keep, o->eval_every, o->log_every,
	       *o->metrics_path ? o->metrics_path : "none",
	       o->resume ? "yes" : "no");
	fflush(stdout);
}

/* Mean validation cross-entropy; a data-parallel rank evaluates its share
 * of each batch. NAN when the ranks cannot agree (a peer failed). */
static double evaluate(struct model *m, struct dist *d,
		       const struct data_file *val, uint64_t seed, int nb,
		       int32_t *tok, int32_t *tgt)
{
	double s = 0.0;

	/* the same batches every time: a fixed stream of the seed */
	for (int i = 0; i < nb; i++) {
		data_batch_range(val, seed ^ 0x76616c69646174ULL, (uint64_t)i,
				 d->me.dp_index * m->B, m->B, m->cfg.T, tok,
				 tgt);
		if (dist_forward(d, m, tok, tgt))
			return NAN;
		s += m->ce; /* 0 but on the last stage */
	}
	s /= nb;
	if (dist_forward_error(d) || dist_stage_mean(d, &s, 1))
		return NAN;
	return s;
}

static void fmt_eta(char *buf, size_t len, double sec)
{
	long s = (long)(sec + 0.5);

	if (!(sec >= 0) || sec > 1e8)
		snprintf(buf, len, "--:--:--");
	else
		snprintf(buf, len, "%02ld:%02ld:%02ld", s / 3600,
			 s / 60 % 60, s % 60);
}

/* ---- main ---------------------------------------------------------------- */

/* checkpoint timings for the metrics file: NAN where none in the row */
struct ckpt_times {
	double stall_ms; /* training stopped for the last checkpoint */
	double write_ms; /* the last write that finished */
	long finished; /* writes finished (or given up) by the last row */
	long finished1; /* the same, of the tier-1 writer */
};

/* hand a full or differential checkpoint to the background writer: the
 * stall is the copy; a failure of its previous write surfaces here */
static int save_async(struct ckpt_async *aw, const struct model *m,
		      const struct ckpt_state *st, bool diff,
		      struct ckpt_times *ct)
{
	struct ckpt_async_stats cs;
	char err[1024];
	int rc = diff ? ckpt_async_submit_diff(aw, m, st, err, sizeof(err))
		      : ckpt_async_submit(aw, m, st, err, sizeof(err));

	if (rc) {
		sigma_error("checkpoint failed: %s", err);
		return rc;
	}
	ckpt_async_stats(aw, &cs);
	ct->stall_ms = cs.stall_ms;
	return 0;
}

/* In the background (aw) or, with --ckpt-sync or no writer, in the loop. */
static int save(const struct train_opts *o, struct ckpt_async *aw,
		struct ckpt_base *base, const struct model *m,
		struct ckpt_state *st, struct ckpt_times *ct)
{
	char path[PATH_MAX], err[1024];
	uint64_t t0 = sigma_now_ms();
	int rc;

	if (aw)
		return save_async(aw, m, st, false, ct);
	rc = ckpt_write(o->ckpt_dir, m, st, path, sizeof(path), err,
			sizeof(err));
	if (rc) {
		sigma_error("checkpoint failed: %s", err);
		return rc;
	}
	if (base && base->state)
		ckpt_base_set(base, m, NULL, st->step, path);
	ckpt_prune(o->ckpt_dir, o->ckpt_keep);
	ct->stall_ms = ct->write_ms = (double)(sigma_now_ms() - t0);
	printf("checkpoint step %ld: %s (%.2f s)\n", st->step, path,
	       (sigma_now_ms() - t0) / 1000.0);
	fflush(stdout);
	return 0;
}

/*
 * A differential checkpoint against the newest full one: in the
 * background (aw), else in the loop against base; with no base yet (a
 * run resumed from a differential or from tier 1), a full one.
 */
static int save_diff(const struct train_opts *o, struct ckpt_async *aw,
		     struct ckpt_base *base, const struct model *m,
		     struct ckpt_state *st, struct ckpt_times *ct)
{
	struct ckpt_diff_stats ds;
	char path[PATH_MAX], err[1024];
	uint64_t t0 = sigma_now_ms();
	int rc;

	if (aw)
		return save_async(aw, m, st, true, ct);
	if (base->step < 0) {
		printf("checkpoint step %ld: no full checkpoint of this run to difference against: a full one instead\n",
		       st->step);
		return save(o, NULL, base, m, st, ct);
	}
	rc = ckpt_write_diff(o->ckpt_dir, m, NULL, st, base, &ds, path,
			     sizeof(path), err, sizeof(err));
	if (rc) {
		sigma_error("checkpoint failed: %s", err);
		return rc;
	}
	ckpt_prune(o->ckpt_dir, o->ckpt_keep);
	ct->stall_ms = ct->write_ms = (double)(sigma_now_ms() - t0);
	printf("checkpoint step %ld: %s (%.2f s; %d tensors same, %d delta, %d whole)\n",
	       st->step, path, (sigma_now_ms() - t0) / 1000.0,
	       ds.tensors[DELTA_SAME], ds.tensors[DELTA_ZIGZAG],
	       ds.tensors[DELTA_WHOLE]);
	fflush(stdout);
	return 0;
}

/* the background write in flight, if any, is on disk or reported */
static int save_wait(struct ckpt_async *aw)
{
	char err[1024];
	int rc;

	if (!aw)
		return 0;
	rc = ckpt_async_wait(aw, err, sizeof(err));
	if (rc)
		sigma_error("checkpoint failed: %s", err);
	return rc;
}

/* aw: the shared tier's writer, a1: this rank's tier-1 one (or NULL) */
static void metrics_ckpt(FILE *f, struct ckpt_async *aw,
			 struct ckpt_async *a1, struct ckpt_times *ct)
{
	struct ckpt_async_stats cs;

	if (aw) {
		ckpt_async_stats(aw, &cs);
		if (cs.writes + cs.lost > ct->finished) {
			ct->write_ms = cs.write_ms;
			ct->finished = cs.writes + cs.lost;
		}
	}
	if (a1) {
		ckpt_async_stats(a1, &cs);
		if (cs.writes + cs.lost > ct->finished1) {
			if (isnan(ct->write_ms) || cs.write_ms > ct->write_ms)
				ct->write_ms = cs.write_ms;
			ct->finished1 = cs.writes + cs.lost;
		}
	}
	fputc(',', f);
	if (!isnan(ct->stall_ms))
		fprintf(f, "%.3f", ct->stall_ms);
	fputc(',', f);
	if (!isnan(ct->write_ms))
		fprintf(f, "%.3f", ct->write_ms);
	ct->stall_ms = ct->write_ms = NAN;
}

/* ---- the run ------------------------------------------------------------- */

/* SLURM_JOB_ID when it names a job, else NULL */
static const char *slurm_job(void)
{
	const char *j = getenv("SLURM_JOB_ID");

	return run_job_valid(j) ? j : NULL;
}

/*
 * Which run this start continues or begins (claim.h): rank 0 decides on
 * the shared directory, every rank learns the run id and the attempt
 * (st). 0 or an exit code: 64 for a start that would mix two runs, 65
 * for a damaged manifest.
 */
static int claim_run(struct train_opts *o, struct dist *d,
		     struct ckpt_state *st)
{
	const char *rq = getenv("SLURM_RESTART_COUNT");
	long requeues = 0;
	/* a requeue by Slurm (its own count), or an attempt set by hand */
	enum claim_how how =
	    o->attempt > 0 && rq && !sigma_parse_long(rq, 1, LONG_MAX, &requeues)
		? CLAIM_RESTART
	    : o->attempt > 0 || (o->resume && !o->new_run) ? CLAIM_RESUME
	    : o->new_run			     ? CLAIM_BESIDE
						     : CLAIM_FRESH;
	struct claim c;
	char err[PATH_MAX + 1024];
	int rc = 0;

	memset(&c, 0, sizeof(c));
	if (d->rank == 0)
		rc = claim_shared(o->ckpt_dir, how, slurm_job(), o->attempt,
				  &c, err, sizeof(err));
	if (dist_bcast_int(d, &rc))
		return TRAIN_EXIT_PEER;
	if (rc) {
		if (d->rank == 0)
			sigma_error("%s", err);
		return rc == -EEXIST || rc == -ESTALE ? TRAIN_EXIT_USAGE
		       : rc == -EBADMSG		      ? TRAIN_EXIT_DATAERR
						      : TRAIN_EXIT_CANTCREAT;
	}
	if (dist_bcast_bytes(d, &c, sizeof(c)))
		return TRAIN_EXIT_PEER;
	if (d->rank == 0)
		printf("%s (attempt %d)\n", c.note, c.attempt);
	sigma_strlcpy(st->run, c.id, sizeof(st->run));
	st->attempt = o->attempt = c.attempt;
	/* the run continues: resume, also where an attempt was implied */
	o->resume |= how == CLAIM_RESUME || how == CLAIM_RESTART;
	return 0;
}

/* ---- tier 1: node-local checkpoints replicated to a buddy ---------------- */

struct tier1 {
	struct ckpt_async *own, *rep; /* this rank's shard, the replica */
	char own_dir[PATH_MAX], rep_dir[PATH_MAX];
	char node_dir[PATH_MAX]; /* LOCAL/NODE: what resume lists */
	int buddy, from; /* sends to buddy, keeps from's replica; -1: none */
};

/*
 * LOCAL/NODE/rank-R and LOCAL/NODE/replica-F; the buddy is the rank at
 * the same place on the next node (ranks placed node by node, as srun
 * does by default), so it is on another node whenever there is one.
 */
static int tier1_open(struct tier1 *t, const struct train_opts *o,
		      const struct dist *d, const struct model *m,
		      const char *run)
{
	const char *node = getenv("SLURMD_NODENAME");
	int ls = d->boot.local_size > 0 ? d->boot.local_size : 1;
	char err[1024];
	int rc;

	memset(t, 0, sizeof(*t));
	if (!node || !*node)
		node = *d->boot.node ? d->boot.node : "localhost";
	t->buddy = t->from = -1;
	if (d->size > ls) {
		t->buddy = (d->rank + ls) % d->size;
		t->from = (d->rank - ls + d->size) % d->size;
	}
	if (sigma_snprintf(t->node_dir, sizeof(t->node_dir), "%s/%s",
			   o->local_dir, node) ||
	    sigma_snprintf(t->own_dir, sizeof(t->own_dir), "%s/%s/rank-%d",
			   o->local_dir, node, d->rank) ||
	    sigma_snprintf(t->rep_dir, sizeof(t->rep_dir),
			   "%s/%s/replica-%d", o->local_dir, node,
			   t->from < 0 ? d->rank : t->from)) {
		sigma_error("--local-ckpt-dir %s: path too long", o->local_dir);
		return -ENAMETOOLONG;
	}
	/* this run's directories: another run's copies go */
	for (int i = 0; i < (t->buddy >= 0 ? 2 : 1); i++) {
		const char *dir = i ? t->rep_dir : t->own_dir;

		rc = claim_local(dir, run, slurm_job(), err, sizeof(err));
		if (rc < 0) {
			sigma_error("tier 1: %s", err);
			return rc;
		}
		if (rc > 0)
			printf("tier 1: %s held another run's copies: removed\n",
			       dir);
	}
	rc = ckpt_async_create(&t->own, t->own_dir, o->local_keep, 3, 200, m,
			       err, sizeof(err));
	if (rc == 0 && t->buddy >= 0)
		rc = ckpt_async_create(&t->rep, t->rep_dir, o->local_keep, 3,
				       200, m, err, sizeof(err));
	if (rc)
		sigma_error("tier 1: %s", err);
	return rc;
}

static int tier1_wait(struct tier1 *t)
{
	int a = save_wait(t->own), b = save_wait(t->rep);

	return a ?: b;
}

static void tier1_close(struct tier1 *t)
{
	tier1_wait(t);
	ckpt_async_destroy(t->own);
	ckpt_async_destroy(t->rep);
	t->own = t->rep = NULL;
}

/* stage, write locally in the background, and send a copy to the buddy
 * while keeping the one from's buddy sends; an exit code or 0 */
static int tier1_save(struct tier1 *t, struct dist *d, const struct model *m,
		      const struct ckpt_state *st, struct ckpt_times *ct)
{
	struct ckpt_async_stats cs;
	uint64_t t0 = sigma_now_ms();
	const size_t n3 = 3 * m->nparams;
	struct ckpt_state rst;
	char err[1024];
	float *r;
	int rc;

	rc = ckpt_async_submit(t->own, m, st, err, sizeof(err));
	if (rc) {
		sigma_error("tier 1: %s", err);
		return TRAIN_EXIT_CANTCREAT;
	}
	ckpt_async_stats(t->own, &cs);
	ct->stall_ms = cs.stall_ms;
	if (t->buddy < 0)
		return 0;
	r = ckpt_async_claim(t->rep, err, sizeof(err));
	if (!r) {
		sigma_error("tier 1: replica: %s", err);
		return TRAIN_EXIT_CANTCREAT;
	}
	rc = comm_sendrecv(d->world, ckpt_async_staged(t->own), n3, t->buddy,
			   r, n3, t->from, COMM_F32, 7101);
	if (rc == 0)
		rc = comm_sendrecv(d->world, st, sizeof(*st), t->buddy, &rst,
				   sizeof(rst), t->from, COMM_U8, 7102);
	if (rc) {
		sigma_error("tier 1: step %ld: replication to rank %d failed: %s",
			    st->step, t->buddy, strerror(-rc));
		return TRAIN_EXIT_PEER;
	}
	ckpt_async_commit(t->rep, &rst);
	/* the replica's exchange stalls training too */
	ct->stall_ms = (double)(sigma_now_ms() - t0);
	return 0;
}

/*
 * Resume with tier 1 on: the restore planner (resume.c) chooses the step
 * and the tier and loads every rank; the log says which, and how many
 * checkpointed steps were lost. 0 with *start set (0: nothing anywhere),
 * or an exit code.
 */
static int tier1_resume(struct tier1 *t, const struct train_opts *o,
			struct dist *d, struct model *m, struct ckpt_state *rs,
			long *start, int *attempt, char *full, size_t flen)
{
	char layout[CKPT_LAYOUT_MAX], run[RUN_ID_MAX];
	struct resume_args a = { t->node_dir, o->ckpt_dir, layout, run };
	struct resume_result r;
	char err[1024];
	int rc;

	/* rs is overwritten by what is read */
	sigma_strlcpy(layout, rs->layout, sizeof(layout));
	sigma_strlcpy(run, rs->run, sizeof(run));
	rc = resume_restore(d, m, &a, rs, &r, err, sizeof(err));
	if (rc) {
		sigma_error("resume: %s", err);
		return rc == -EBADMSG ? TRAIN_EXIT_DATAERR : TRAIN_EXIT_PEER;
	}
	/* after every attempt that left a copy anywhere */
	if (r.max_attempt > *attempt)
		*attempt = r.max_attempt + 1;
	*start = r.tier == RESTORE_NONE ? 0 : rs->step;
	/* a full shared checkpoint is the differentials' base */
	if (r.tier == RESTORE_TIER2 && d->rank == 0 && !ckpt_is_diff(r.path))
		sigma_strlcpy(full, r.path, flen);
	if (r.tier == RESTORE_TIER1 && r.nshards == 1)
		printf("resume: tier 1, step %ld from rank 0's %s (newest shared checkpoint: %ld); %ld checkpointed steps lost; continuing at step %ld\n",
		       r.step, r.self_replica ? "replica" : "own copy",
		       r.shared_newest, r.lost, *start);
	else if (r.tier == RESTORE_TIER1)
		printf("resume: tier 1, step %ld (attempt %d): %d shards, %d from a buddy's replica, %d moved to their rank (newest shared checkpoint: %ld); %ld checkpointed steps lost; continuing at step %ld\n",
		       r.step, r.attempt, r.nshards, r.from_replica, r.nxfer,
		       r.shared_newest, r.lost, *start);
	else if (r.tier == RESTORE_TIER2)
		printf("resume: tier 2, %s (%s); %ld checkpointed steps lost; continuing at step %ld\n",
		       d->rank == 0 ? r.path : "rank 0's checkpoint", r.why,
		       r.lost, *start);
	else
		printf("resume: no valid checkpoint in either tier (%s), starting at step 0\n",
		       *r.why ? r.why : "none there");
	fflush(stdout);
	return 0;
}

/* the guard's per-rank observations, averaged over the ranks */
static int guard_agree(void *ctx, double *v, int n)
{
	return dist_world_mean(ctx, v, n);
}

static int guard_agree_max(void *ctx, double *v)
{
	return dist_world_max(ctx, v);
}

static int train(struct train_opts *o, struct dist *d)
{
	struct data_file train_df, val_df;
	struct model *m = NULL;
	const struct sigma_ops *ops;
	struct ckpt_state st = { 0 };
	struct sigaction sa;
	char err[1024];
	int32_t *tok = NULL, *tgt = NULL;
	FILE *metrics = NULL;
	int rc, code = TRAIN_EXIT_OK;
	bool have_val = false;
	long start = 0;
	double flops_tok, entropy;
	uint64_t t_start = 0, t_last, comm_last = 0;
	long s_last;
	int B;
	struct guard_run gr;
	bool gr_ready = false;
	struct ckpt_async *aw = NULL;
	struct ckpt_times ct = { NAN, NAN, 0, 0 };
	struct tier1 t1 = { .buddy = -1, .from = -1 };
	bool use_t1 = false, t1_resumed = false;
	struct ckpt_base sync_base = { .step = -1 }; /* --ckpt-sync diffs */
	char resumed_full[PATH_MAX] = ""; /* the base, when resumed from one */
	long resumed_step = -1;

	rc = data_open(&train_df, o->train_path, err, sizeof(err));
	if (rc)
		DIE(rc == -EBADMSG ? TRAIN_EXIT_DATAERR : TRAIN_EXIT_NOINPUT,
		    "%s", err);
	if (*o->val_path) {
		rc = data_open(&val_df, o->val_path, err, sizeof(err));
		if (rc) {
			data_close(&train_df);
			DIE(rc == -EBADMSG ? TRAIN_EXIT_DATAERR
					   : TRAIN_EXIT_NOINPUT,
			    "%s", err);
		}
		have_val = true;
	}
	if (!o->vocab_set)
		o->model.V = (int)train_df.vocab;
	if ((uint32_t)o->model.V < train_df.vocab ||
	    (have_val && (uint32_t)o->model.V < val_df.vocab)) {
		sigma_error("vocabulary %d is smaller than the token file's %u",
			    o->model.V, train_df.vocab);
		code = TRAIN_EXIT_DATAERR;
		goto out;
	}
	if (data_check_len(&train_df, o->model.T, err, sizeof(err)) ||
	    (have_val && data_check_len(&val_df, o->model.T, err, sizeof(err)))) {
		sigma_error("%s", err);
		code = TRAIN_EXIT_DATAERR;
		goto out;
	}
	rc = model_config_check(&o->model, err, sizeof(err));
	if (rc) {
		sigma_error("model: %s", err);
		code = TRAIN_EXIT_USAGE;
		goto out;
	}
	/* sequences per micro-batch; dist_init checked that they divide */
	B = (int)(o->batch / d->lp.dp / d->micro);
	ops = sigma_ops_select(*o->device ? o->device : "cpu", err,
			       sizeof(err));
	if (!ops) {
		sigma_error("--device: %s", err);
		code = TRAIN_EXIT_USAGE;
		goto out;
	}
	rc = ops->init(o->threads);
	if (rc) {
		sigma_error("--device %s: cannot initialise the %s kernels: %s",
			    *o->device ? o->device : "cpu", ops->name,
			    strerror(-rc));
		code = TRAIN_EXIT_USAGE;
		goto out;
	}
	rc = model_create_acts(&m, &o->model, B, d->micro, ops, err,
			       sizeof(err));
	if (rc) {
		sigma_error("model: %s", err);
		code = rc == -ENOMEM ? TRAIN_EXIT_OSERR : TRAIN_EXIT_USAGE;
		goto out;
	}
	m->bf16 = sigma_bf16_select(ops); /* for --precision bf16 */
	model_init_weights(m, o->seed);
	rc = dist_attach(d, m, err, sizeof(err));
	if (rc) {
		sigma_error("cannot set up the parallel layout: %s", err);
		code = rc == -EIO || rc == -ETIMEDOUT ? TRAIN_EXIT_PEER
		       : rc == -ENOMEM		      ? TRAIN_EXIT_OSERR
						      : TRAIN_EXIT_USAGE;
		goto out;
	}
	st.seed = o->seed;
	st.rng = o->seed;
	st.batch = o->batch;
	st.optim = o->optim;
	st.data_ntokens = train_df.ntokens;
	st.data_checksum = train_df.checksum;
	st.attempt = o->attempt;
	snprintf(st.layout, sizeof(st.layout), "ranks=%d dp=%d ep=%d pp=%d",
		 d->size, d->lp.dp, d->lp.ep, d->lp.pp);

	if (*o->init_from) {
		rc = d->rank == 0 ? ckpt_read_weights(o->init_from, m, err,
						       sizeof(err))
				  : 0;
		if (dist_bcast_int(d, &rc) || (rc == 0 &&
					       dist_sync_model(d, m, NULL, 0))) {
			code = TRAIN_EXIT_PEER;
			goto out;
		}
		if (rc && d->rank != 0)
			sigma_strlcpy(err, "rank 0 could not read the file",
				      sizeof(err));
		if (rc) {
			sigma_error("--init-from: %s", err);
			code = rc == -ENOENT ? TRAIN_EXIT_NOINPUT
					     : TRAIN_EXIT_DATAERR;
			goto out;
		}
		printf("weights from %s\n", o->init_from);
	}
	if (*o->ckpt_dir) {
		code = claim_run(o, d, &st);
		if (code)
			goto out;
	}
	if (*o->local_dir) {
		if (!*o->ckpt_dir) {
			sigma_error("--local-ckpt-dir: needs --ckpt-dir");
			code = TRAIN_EXIT_USAGE;
			goto out;
		}
		if (tier1_open(&t1, o, d, m, st.run)) {
			code = TRAIN_EXIT_CANTCREAT;
			goto out;
		}
		use_t1 = true;
	}
	if (o->resume && use_t1) {
		struct ckpt_state rs = st;

		code = tier1_resume(&t1, o, d, m, &rs, &start, &st.attempt,
				    resumed_full, sizeof(resumed_full));
		if (code)
			goto out;
		if (*resumed_full)
			resumed_step = start;
		if (start > 0) {
			st.seed = rs.seed;
			st.rng = rs.rng;
			st.guard = rs.guard;
			o->seed = rs.seed;
		}
		t1_resumed = true;
	}
	if (o->resume && *o->ckpt_dir && !t1_resumed) {
		char path[PATH_MAX] = "rank 0's checkpoint";
		struct ckpt_state rs;

		/* rank 0 reads the checkpoint; every rank gets its tensors
		 * and state (whatever layout wrote it: tensors are whole) */
		memset(&rs, 0, sizeof(rs));
		rc = d->rank == 0 ? ckpt_load_latest_diff(o->ckpt_dir, m, &rs,
							   path, sizeof(path),
							   err, sizeof(err))
				  : 0;
		if (dist_bcast_int(d, &rc) ||
		    (rc == 0 && dist_sync_model(d, m, &rs, sizeof(rs)))) {
			code = TRAIN_EXIT_PEER;
			goto out;
		}
		if (rc && d->rank != 0)
			sigma_strlcpy(err,
				      "rank 0 found no valid checkpoint there",
				      sizeof(err));
		if (rc == -ENOENT) {
			printf("resume: no checkpoint in %s, starting at step 0\n",
			       o->ckpt_dir);
		} else if (rc) {
			sigma_error("resume: %s", err);
			code = TRAIN_EXIT_DATAERR;
			goto out;
		} else {
			if (rs.batch != o->batch || rs.seed != o->seed)
				sigma_warn("resume: %s was written with batch %d seed %llu; continuing with its seed",
					   path, rs.batch,
					   (unsigned long long)rs.seed);
			if (rs.data_checksum != train_df.checksum)
				sigma_warn("resume: %s was written for another training file (checksum differs)",
					   path);
			start = rs.step;
			st.seed = rs.seed;
			st.rng = rs.rng;
			st.guard = rs.guard;
			o->seed = rs.seed;
			printf("resume: %s, continuing at step %ld\n", path,
			       start);
			if (d->rank == 0 && !ckpt_is_diff(path)) {
				sigma_strlcpy(resumed_full, path,
					      sizeof(resumed_full));
				resumed_step = start;
			}
		}
	} else if (o->resume && !*o->ckpt_dir) {
		sigma_warn("--resume without a checkpoint directory: starting at step 0");
	}
	entropy = unigram_entropy(&train_df);
	print_config(o, m, &train_df, entropy);
	rc = guard_run_init(&gr, &o->guard, o->bf16, m, err, sizeof(err));
	if (rc) {
		sigma_error("%s", err);
		code = rc == -ENOMEM ? TRAIN_EXIT_OSERR : TRAIN_EXIT_USAGE;
		goto out;
	}
	gr_ready = true;
	guard_state_import(&gr.g, &st.guard);
	if (d->size > 1) {
		gr.agree = guard_agree;
		gr.agree_max = guard_agree_max;
		gr.agree_ctx = d;
		gr.agree_size = d->size;
	}
	printf("guard: %s, precision %s%s\n", o->guard.enabled ? "on" : "off",
	       o->bf16 ? "bf16" : "fp32",
	       o->bf16 ? (sigma_bf16_native() ? " (AVX-512 BF16)"
					      : " (emulated)")
		       : "");

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	if (*o->metrics_path && d->rank == 0) {
		bool fresh = access(o->metrics_path, F_OK) != 0 || start == 0;

		metrics = fopen(o->metrics_path, fresh ? "w" : "a");
		if (!metrics) {
			sigma_error("%s: cannot open for writing: %s",
				    o->metrics_path, strerror(errno));
			code = TRAIN_EXIT_CANTCREAT;
			goto out;
		}
		if (fresh)
			fprintf(metrics,
				"step,loss,ce,aux,lr,grad_norm,clip_scale,tokens_per_s,gflops,val_ce,elapsed_s,step_ms,comm_ms,ckpt_stall_ms,ckpt_write_ms"
				GUARD_METRICS_HEADER "\n");
	}
	tok = malloc(sizeof(int32_t) * d->micro * m->B * m->cfg.T);
	tgt = malloc(sizeof(int32_t) * d->micro * m->B * m->cfg.T);
	if (!tok || !tgt) {
		code = TRAIN_EXIT_OSERR;
		goto out;
	}
	/* every rank holds the whole model: rank 0 writes, in the
	 * background unless asked otherwise */
	if (*o->ckpt_dir && d->rank == 0 && !o->ckpt_sync) {
		rc = ckpt_async_create(&aw, o->ckpt_dir, o->ckpt_keep, 3, 200,
				       m, err, sizeof(err));
		if (rc) {
			sigma_error("%s", err);
			code = TRAIN_EXIT_OSERR;
			goto out;
		}
	}
	if (o->ckpt_diff_every > 0) {
		long fe = use_t1 ? o->ckpt_full_every : o->ckpt_every;

		if (fe > 0 && o->ckpt_diff_every >= fe) {
			sigma_error("--ckpt-diff-every %ld: differentials come between full checkpoints, every %ld steps here: use a smaller interval",
				    o->ckpt_diff_every, fe);
			code = TRAIN_EXIT_USAGE;
			goto out;
		}
		rc = d->rank != 0 ? 0
		     : aw	  ? ckpt_async_enable_diff(aw, m, err, sizeof(err))
				  : ckpt_base_init(&sync_base, m, err,
						   sizeof(err));
		if (rc) {
			sigma_error("%s", err);
			code = TRAIN_EXIT_OSERR;
			goto out;
		}
		/* resumed from a full checkpoint: it is the base */
		if (resumed_step >= 0 && aw)
			ckpt_async_set_base(aw, m, resumed_step, resumed_full);
		else if (resumed_step >= 0 && sync_base.state)
			ckpt_base_set(&sync_base, m, NULL, resumed_step,
				      resumed_full);
		printf("config: ckpt_diff_every=%ld (differential checkpoints against the newest full one)\n",
		       o->ckpt_diff_every);
	}
	flops_tok = model_flops_per_token(&m->cfg);
	t_start = t_last = sigma_now_ms();
	s_last = start;

	for (long s = start; s < o->optim.steps; s++) {
		double gn, val_ce = NAN, red[3];
		float lr, scale;
		long done = s + 1;
		int stop, sig;
		unsigned gact;
		bool recomputed = false;

		if (guard_skip_data(&gr.g, done)) {
			printf("guard: step %ld: data-window: skip\n", done);
			st.step = done;
			continue;
		}
recompute:
		guard_run_begin(&gr, done);
		/* this rank's share of the global batch of step s: micro-batch
		 * i of every data-parallel rank together is the i-th slice of
		 * the batch, as with one rank */
		for (int i = 0; i < d->micro; i++) {
			size_t off = (size_t)i * m->B * m->cfg.T;

			data_batch_range(&train_df, st.seed, (uint64_t)s,
					 ((long)i * d->lp.dp +
					  d->me.dp_index) * m->B,
					 m->B, m->cfg.T, tok + off, tgt + off);
		}
		rc = dist_step(d, m, tok, tgt);
		if (rc == 0)
			rc = dist_forward_error(d);
		/* gradients and losses averaged over the data-parallel ranks,
		 * and whether any rank was asked to stop */
		red[0] = m->ce;
		red[1] = m->aux;
		/* every rank decides on the same flag: a signal arriving
		 * after this point counts at the next step */
		sig = stop_signal;
		red[2] = sig ? 1.0 : 0.0;
		if (rc == 0)
			rc = dist_grad_finish(d);
		if (rc == 0)
			rc = dist_stage_mean(d, red, 3);
		if (rc) {
			sigma_error("step %ld: gradient all-reduce failed: %s",
				    done, strerror(-rc));
			code = TRAIN_EXIT_PEER;
			goto out;
		}
		m->ce = red[0];
		m->aux = red[1];
		m->loss = m->ce + m->cfg.aux_coef * m->aux;
		gn = model_grad_norm(m);
		gact = guard_run_check(&gr, done, &gn, recomputed);
		if (gact & GUARD_ACT_RECOMPUTE) {
			recomputed = true;
			goto recompute;
		}
		if (gr.agree_rc) {
			code = TRAIN_EXIT_PEER;
			goto out;
		}
		if (gact & (GUARD_ACT_REQUEUE | GUARD_ACT_STOP)) {
			bool hw = gact & GUARD_ACT_REQUEUE;

			sigma_error("step %ld: %s: exit %d", done,
				    hw ? "the recomputed step differs, the hardware is suspect (requeue on other nodes)"
				       : "repeated numerical trouble",
				    hw ? TRAIN_EXIT_HARDWARE : TRAIN_EXIT_DIVERGED);
			code = hw ? TRAIN_EXIT_HARDWARE : TRAIN_EXIT_DIVERGED;
			goto out;
		}
		if (gact & GUARD_ACT_ROLLBACK) {
			long to;

			/* the newest checkpoint is on disk before any rank
			 * reads it */
			if (save_wait(aw)) {
				code = TRAIN_EXIT_CANTCREAT;
				goto out;
			}
			if (d->size > 1 && dist_barrier(d)) {
				code = TRAIN_EXIT_PEER;
				goto out;
			}
			to = rollback_to_latest(&gr, o->ckpt_dir, done);

			if (to < 0) {
				code = TRAIN_EXIT_DIVERGED;
				goto out;
			}
			/* differentials after it belong to the abandoned run */
			if (d->rank == 0 && o->ckpt_diff_every > 0) {
				int nr = ckpt_diff_discard_after(o->ckpt_dir,
								 to);

				if (nr > 0)
					printf("guard: %d differential checkpoint%s newer than step %ld removed\n",
					       nr, nr == 1 ? "" : "s", to);
			}
			s = to - 1; /* the loop continues at step to + 1 */
			continue;
		}
		if (!(gact & GUARD_ACT_SKIP) &&
		    (!isfinite(m->loss) || !isfinite(gn))) {
			sigma_error("step %ld: loss %g, gradient norm %g: diverged",
				    done, m->loss, gn);
			code = TRAIN_EXIT_DIVERGED;
			goto out;
		}
		lr = optim_lr(&o->optim, s) * (float)guard_lr_scale(&gr.g, done);
		scale = (gact & GUARD_ACT_SKIP) ? 0.0f
						: optim_step(m, &o->optim, gn, lr,
							     done);
		st.step = done;
		stop = red[2] > 0 ? (sig ? sig : -2) /* -2: another rank's */
				  : (o->stop_at == done ? -1 : 0);

		if (have_val && o->eval_every > 0 &&
		    (done % o->eval_every == 0 || done == o->optim.steps)) {
			double ce = m->ce, aux = m->aux, loss = m->loss;

			val_ce = evaluate(m, d, &val_df, st.seed,
					  o->eval_batches, tok, tgt);
			if (isnan(val_ce)) {
				code = TRAIN_EXIT_PEER;
				goto out;
			}
			printf("step %ld val_ce %.4f\n", done, val_ce);
			m->ce = ce, m->aux = aux, m->loss = loss;
		}
		if (done % o->log_every == 0 || done == o->optim.steps ||
		    !isnan(val_ce) || stop) {
			uint64_t now = sigma_now_ms();
			double dt = (now - t_last) / 1000.0;
			/* this rank's tokens (its data-parallel share) */
			double tps = dt > 0 ? (double)(done - s_last) *
						      d->micro * m->B *
						      m->cfg.T / dt
					    : 0.0;
			double el = (now - t_start) / 1000.0;
			double eta = (done > start)
					     ? el / (done - start) *
						       (o->optim.steps - done)
					     : NAN;
			char etas[32];
			/* per step over the interval: wall time and the part
			 * spent waiting for communication (this rank) */
			double nst = done > s_last ? (double)(done - s_last) : 1;
			double step_ms = dt * 1000.0 / nst;
			double comm_ms = (double)(d->comm_ns - comm_last) /
					 1e6 / nst;

			fmt_eta(etas, sizeof(etas), eta);
			printf("step %ld/%ld loss %.4f ce %.4f aux %.4f lr %.3e gnorm %.3f tok/s %.0f GFLOP/s %.1f eta %s step_ms %.1f comm_ms %.1f\n",
			       done, o->optim.steps, m->loss, m->ce, m->aux,
			       (double)lr, gn, tps, tps * flops_tok / 1e9,
			       etas, step_ms, comm_ms);
			fflush(stdout);
			if (metrics) {
				fprintf(metrics,
					"%ld,%.6f,%.6f,%.6f,%.6e,%.6f,%.6f,%.1f,%.3f,",
					done, m->loss, m->ce, m->aux,
					(double)lr, gn, (double)scale, tps,
					tps * flops_tok / 1e9);
				if (!isnan(val_ce))
					fprintf(metrics, "%.6f", val_ce);
				fprintf(metrics, ",%.3f,%.3f,%.3f", el,
					step_ms, comm_ms);
				metrics_ckpt(metrics, aw, t1.own, &ct);
				guard_run_metrics(&gr, metrics);
				fputc('\n', metrics);
				fflush(metrics);
			}
			comm_last = d->comm_ns;
			t_last = now;
			s_last = done;
		}
		bool t1_now = use_t1 && o->ckpt_every > 0 &&
			      done % o->ckpt_every == 0;
		long full_every = use_t1 ? o->ckpt_full_every : o->ckpt_every;
		bool full_now = *o->ckpt_dir &&
				((full_every > 0 && done % full_every == 0) ||
				 done == o->optim.steps || stop);
		bool diff_now = o->ckpt_diff_every > 0 && !full_now &&
				done % o->ckpt_diff_every == 0;

		if (t1_now || full_now || diff_now)
			guard_state_export(&gr.g, &st.guard);
		if (t1_now) {
			int c1 = tier1_save(&t1, d, m, &st, &ct);

			if (c1) {
				code = c1;
				goto out;
			}
		}
		if (full_now) {
			/* every rank holds the whole model: rank 0 writes */
			if (d->rank == 0 &&
			    save(o, aw, sync_base.state ? &sync_base : NULL, m,
				 &st, &ct)) {
				code = TRAIN_EXIT_CANTCREAT;
				goto out;
			}
			/* at the end or a stop the files are on disk first */
			if ((stop || done == o->optim.steps) &&
			    (save_wait(aw) || tier1_wait(&t1))) {
				code = TRAIN_EXIT_CANTCREAT;
				goto out;
			}
			/* no rank ends before the checkpoint is complete */
			if ((stop || done == o->optim.steps) &&
			    dist_barrier(d)) {
				code = TRAIN_EXIT_PEER;
				goto out;
			}
		}
		if (diff_now && d->rank == 0 &&
		    save_diff(o, aw, &sync_base, m, &st, &ct)) {
			code = TRAIN_EXIT_CANTCREAT;
			goto out;
		}
		if (stop && done < o->optim.steps) {
			const char *why = stop > 0    ? strsignal(stop)
					  : stop == -1 ? "--stop-at"
						       : "a signal to another rank";

			if (*o->ckpt_dir) {
				printf("stopped by %s at step %ld after a checkpoint: exit %d (requeue)\n",
				       why, done, TRAIN_EXIT_REQUEUE);
				code = TRAIN_EXIT_REQUEUE;
			} else {
				sigma_error("stopped by %s at step %ld with no checkpoint directory: nothing saved",
					    why, done);
				code = TRAIN_EXIT_UNAVAILABLE;
			}
			goto out;
		}
	}
	{
		struct rusage ru;

		getrusage(RUSAGE_SELF, &ru);
		printf("done: %ld steps, final loss %.4f ce %.4f, peak RSS %.1f MiB\n",
		       o->optim.steps, m->loss, m->ce, ru.ru_maxrss / 1024.0);
	}
out:
	/*
	 * The run is over (its last checkpoint, if any, is complete: every
	 * rank passed the barrier after it). From here a SIGTERM, Slurm
	 * ending the step while this rank still waits for peers that have
	 * left, ends the process at once instead of asking for a checkpoint
	 * again; the slurmstepd is then gone before a requeued attempt of
	 * the job starts the same step on this node.
	 */
	signal(SIGTERM, SIG_DFL);
	signal(SIGUSR1, SIG_IGN);
	if (d->size > 1 && t_start && st.step > start) {
		/* each rank's own split of its step time, on stderr: ranks of
		 * different stages and expert groups wait differently */
		double n = (double)(st.step - start);
		double ms = (double)(sigma_now_ms() - t_start) / n;
		double cm = (double)d->comm_ns / 1e6 / n;

		sigma_info("rank %d (stage %d, dp_index %d): %ld steps, %.2f ms per step: %.2f ms computing, %.2f ms waiting on communication (%.1f%%)",
			   d->rank, d->me.stage, d->me.dp_index,
			   st.step - start, ms, ms - cm, cm,
			   ms > 0 ? 100.0 * cm / ms : 0.0);
	}
	/* whatever happened, a write in flight is finished (or reported) */
	if (save_wait(aw) && code == TRAIN_EXIT_OK)
		code = TRAIN_EXIT_CANTCREAT;
	ckpt_async_destroy(aw);
	ckpt_base_fini(&sync_base);
	if (tier1_wait(&t1) && code == TRAIN_EXIT_OK)
		code = TRAIN_EXIT_CANTCREAT;
	tier1_close(&t1);
	if (gr_ready) {
		guard_summary(stdout, &gr.g);
		guard_run_free(&gr);
	}
	if (metrics && fclose(metrics) != 0 && code == TRAIN_EXIT_OK)
		code = TRAIN_EXIT_CANTCREAT;
	free(tok);
	free(tgt);
	model_destroy(m);
	if (have_val)
		data_close(&val_df);
	data_close(&train_df);
	fflush(stdout);
	return code;
}

int main(int argc, char **argv)
{
	struct train_opts o;

	struct dist d;
	char err[1024];
	int code;

	sigma_log_init("sigma-train", SIGMA_LOG_INFO);
	if (argc > 1 && !strcmp(argv[1], "prepare"))
		return cmd_prepare(argc - 1, argv + 1);
	if (argc > 1 && !strcmp(argv[1], "sgemm"))
		return cmd_sgemm(argc - 1, argv + 1);

	memset(&o, 0, sizeof(o));
	model_config_demo(&o.model);
	optim_config_default(&o.optim);
	o.batch = 8;
	o.seed = 1;
	o.ckpt_keep = 3;
	o.local_keep = 2;
	o.eval_every = 100;
	o.eval_batches = 4;
	o.log_every = 10;
	guard_config_default(&o.guard);
	o.bucket_mb = 16.0;
	if (read_env(&o) || parse_opts(&o, argc, argv))
		return TRAIN_EXIT_USAGE;
	code = dist_init(&d, o.dp, o.ep, o.pp, o.micro, o.model.E, o.model.L,
			 o.batch, err, sizeof(err));
	if (code) {
		sigma_error("%s", err);
		return code == -EINVAL || code == -ENOTSUP ? TRAIN_EXIT_USAGE
							   : TRAIN_EXIT_PEER;
	}
	d.bucket = (size_t)(o.bucket_mb * (1 << 20) / sizeof(float));
	if (d.bucket < 1)
		d.bucket = 1;
	if (d.size > 1)
		sigma_info("rank %d of %d on %s, pid %d: dp %d ep %d pp %d micro %d, stage %d (layers %d-%d), dp_index %d, ep_rank %d, %d of %d sequences per step",
			   d.rank, d.size, d.boot.node, (int)getpid(),
			   d.lp.dp, d.lp.ep, d.lp.pp, d.micro, d.me.stage,
			   d.me.layer_first,
			   d.me.layer_first + d.me.layer_count - 1,
			   d.me.dp_index, d.me.ep_rank, o.batch / d.lp.dp,
			   o.batch);
	/* progress and metrics come from rank 0 only; errors from every rank */
	if (d.rank != 0 && !freopen("/dev/null", "w", stdout))
		sigma_warn("cannot silence stdout of rank %d", d.rank);
	code = train(&o, &d);
	/* the communicators are torn down together only when every rank got
	 * here the same way; after a failure the process just ends */
	if (code == TRAIN_EXIT_OK || code == TRAIN_EXIT_REQUEUE ||
	    d.size == 1) {
		int ranks = d.size;

		dist_end(&d);
		/* every rank passed the last fence: leave at once, before
		 * srun can take a peer's 75 for a failure to kill this rank
		 * for (the exit handlers of the libraries take time) */
		if (ranks > 1 && code != TRAIN_EXIT_OK) {
			fflush(NULL);
			_exit(code);
		}
	}
	return code;
}
