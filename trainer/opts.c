/*
 * opts.c - sigma-train's settings: defaults, the SIGMA_* environment, and
 * the flags, which win. One table holds every flag, the guard's included:
 * its name, what it sets and the range it accepts. Checks that involve
 * several settings come after the table, in train_opts_parse.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "sigma.h"
#include "attempt.h"
#include "ckpt.h"
#include "exitcodes.h"
#include "layout.h"
#include "opts.h"

/* clang-format off */
void train_usage(FILE *f)
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
		"  --init-from FILE      start from the weights of a checkpoint (sealed)\n"
		"  --init-from-untrusted FILE  from those of a file from elsewhere (no\n"
		"                        seal), read in a process of its own\n"
		"  --stop-at N           after step N, checkpoint and exit 75 as on SIGUSR1\n"
		"Model (default: --preset demo):\n"
		"  --preset small|demo|large  shapes of docs/model.md (large: only\n"
		"                        fits sharded: --ep, --pp)\n"
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
		"  --blas-pick on|off    run the best BLAS kernel this CPU allows (default on;\n"
		"                        $SIGMA_BLAS_PICK=off; docs/sigma-train.md)\n"
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
		"  --zero 0|1            1: the AdamW moments are split over the ranks\n"
		"                        that hold each tensor (ZeRO-1), gradients\n"
		"                        reduce-scattered, parameters all-gathered (0)\n"
		"Auto-tuner (docs/tuner.md):\n"
		"  --tuner off|observe|on  measure compute and communication per rank;\n"
		"                        observe: report slow ranks; on: move data-\n"
		"                        parallel shares off them (default off)\n"
		"  --tuner-every K       steps between the ranks' summaries (4)\n"
		"  --tuner-window W      summaries in the median window (5)\n"
		"  --tuner-confirm C     summaries in a row to call a rank slow or not (2)\n"
		"  --tuner-slow X        slow: above X times the ranks' median (1.25)\n"
		"  --tuner-escalate S    a rank still slow S seconds after its shares\n"
		"                        moved reports its node to sigmad as an early\n"
		"                        warning (sigmactl slow; 0: never, the default)\n"
		"  --tuner-replay FILE   apply the \"tuner: step N: shares\" lines of a\n"
		"                        run's output at their steps, decide nothing\n"
		"Precision and guardrails (docs/guardrails.md):\n"
		"  --precision fp32|bf16 forward matrix products (default fp32)\n"
		"  --guard on|off        numerical guardrails (default on)\n"
		"  --guard-window N      running window of the detectors (50)\n"
		"  --guard-z Z           spike threshold in standard deviations (6)\n"
		"  --guard-fp32-steps N  steps an overflowing layer stays fp32 (50)\n"
		"  --guard-lr-steps N --guard-lr-factor F  lowered LR window (50, 0.5)\n"
		"  --guard-rollback-after N  troubles within 50 steps before a rollback (3)\n"
		"  --guard-collapse U    router imbalance 0..1 that counts as collapse (0.8)\n"
		"  --guard-recompute on|off  recompute a bad step: the hardware check (on)\n"
		"Reporting:\n"
		"  --log-every N         progress line every N steps (default 10)\n"
		"  --eval-every N        validation loss every N steps (default 100; 0: never)\n"
		"  --eval-batches N      validation batches (default 4)\n"
		"  --metrics FILE        CSV of the progress series\n"
		"  --metrics-textfile F  rank 0's progress as a Prometheus textfile\n"
		"                        (node_exporter), rewritten at each progress line\n"
		"  -h, --help            this text\n"
		"\n"
		"Exit: 0 done, 64 usage, 65 bad data or checkpoint, 66 missing input,\n"
		"69 stop requested without a checkpoint dir, 70 diverged, 71 system error,\n"
		"73 cannot write, 75 stopped on request after a checkpoint (requeue),\n"
		"76 a peer rank failed or a collective timed out (requeue),\n"
		"79 a step's result changed when recomputed (requeue on other nodes).\n");
}
/* clang-format on */

/* ---- values -------------------------------------------------------------- */

int opt_long(const char *what, const char *s, long lo, long hi, long *out)
{
	char err[4096];
	int rc = sigma_parse_long_named(what, s, lo, hi, out, err, sizeof(err));

	if (rc)
		sigma_error("%s", err);
	return rc;
}

int opt_real(const char *what, const char *s, double lo, double hi,
	     double *out)
{
	int rc = sigma_parse_double(s, lo, hi, out);

	if (rc == -ERANGE)
		sigma_error("%s %s is out of range [%g, %g]", what, s, lo, hi);
	else if (rc)
		sigma_error("%s \"%s\" is not a number", what, s);
	return rc;
}

int opt_path(const char *what, const char *s, char *dst, size_t len)
{
	if (sigma_strlcpy(dst, s, len) >= len || !*s) {
		sigma_error("%s: empty or too long path", what);
		return -EINVAL;
	}
	return 0;
}

/* ---- the table ----------------------------------------------------------- */

enum opt_kind {
	K_FLAG,	   /* bool, no argument */
	K_INT,	   /* int in [lo, hi] */
	K_LONG,	   /* long in [lo, hi] */
	K_U64,	   /* uint64_t in [lo, hi] */
	K_FLOAT,   /* float in [rlo, rhi] */
	K_DOUBLE,  /* double in [rlo, rhi] */
	K_PATH,	   /* char[PATH_MAX], not empty */
	K_WORD,	   /* bool: words[1] true, words[0] false */
	K_FN,	   /* fn parses the value */
	K_PRESET,  /* --preset: applied before every other flag */
};

struct opt_def {
	const char *name;
	enum opt_kind kind;
	size_t off; /* into struct train_opts */
	long lo, hi;
	double rlo, rhi;
	const char *const *words;
	int (*fn)(struct train_opts *o, const char *val);
};

#define OFF(f) offsetof(struct train_opts, f)
#define FLAG(n, f) { n, K_FLAG, OFF(f), 0, 0, 0, 0, NULL, NULL }
#define INT(n, f, lo, hi) { n, K_INT, OFF(f), lo, hi, 0, 0, NULL, NULL }
#define LONG(n, f, lo, hi) { n, K_LONG, OFF(f), lo, hi, 0, 0, NULL, NULL }
#define STEPS(n, f, lo) LONG(n, f, lo, 99999999)
#define U64(n, f, lo, hi) { n, K_U64, OFF(f), lo, hi, 0, 0, NULL, NULL }
#define FLOAT(n, f, lo, hi) { n, K_FLOAT, OFF(f), 0, 0, lo, hi, NULL, NULL }
#define DOUBLE(n, f, lo, hi) { n, K_DOUBLE, OFF(f), 0, 0, lo, hi, NULL, NULL }
#define PATH(n, f) { n, K_PATH, OFF(f), 0, 0, 0, 0, NULL, NULL }
#define WORD(n, f, w) { n, K_WORD, OFF(f), 0, 0, 0, 0, w, NULL }
#define FN(n, fn) { n, K_FN, 0, 0, 0, 0, 0, NULL, fn }

static const char *const onoff[] = { "off", "on", NULL };
static const char *const precisions[] = { "fp32", "bf16", NULL };

static int set_resume(struct train_opts *o, const char *val)
{
	(void)val;
	o->resume = o->resume_flag = true;
	return 0;
}

static int set_vocab(struct train_opts *o, const char *val)
{
	long v;

	if (opt_long("--vocab", val, 2, MODEL_MAX_V, &v))
		return -EINVAL;
	o->model.V = (int)v;
	o->vocab_set = true;
	return 0;
}

static int set_device(struct train_opts *o, const char *val)
{
	if (sigma_strlcpy(o->device, val, sizeof(o->device)) >=
	    sizeof(o->device)) {
		sigma_error("--device %s: name too long", val);
		return -EINVAL;
	}
	return 0;
}

/* one threshold for both spike detectors */
static int set_guard_z(struct train_opts *o, const char *val)
{
	double d;

	if (opt_real("--guard-z", val, 0.5, 1000, &d))
		return -EINVAL;
	o->guard.loss_z = o->guard.gnorm_z = d;
	return 0;
}

static int set_tuner(struct train_opts *o, const char *val)
{
	int k = sigma_parse_enum(val, tuner_modes);

	if (k < 0) {
		sigma_error("--tuner \"%s\" is not off, observe or on", val);
		return -EINVAL;
	}
	o->tuner.mode = k;
	return 0;
}

static const struct opt_def opt_table[] = {
	/* data and checkpoints */
	PATH("train", train_path),
	PATH("val", val_path),
	PATH("ckpt-dir", ckpt_dir),
	LONG("ckpt-every", ckpt_every, 0, SIGMA_CKPT_EVERY_MAX),
	INT("ckpt-keep", ckpt_keep, 1, 1000),
	FLAG("ckpt-sync", ckpt_sync),
	PATH("local-ckpt-dir", local_dir),
	INT("local-ckpt-keep", local_keep, 1, 1000),
	STEPS("ckpt-full-every", ckpt_full_every, 0),
	STEPS("ckpt-diff-every", ckpt_diff_every, 0),
	{ "resume", K_FN, 0, 0, 0, 0, 0, NULL, set_resume }, /* no value */
	FLAG("new-run", new_run),
	PATH("init-from", init_from),
	PATH("init-from-untrusted", init_untrusted),
	STEPS("stop-at", stop_at, 1),
	/* model */
	{ "preset", K_PRESET, 0, 0, 0, 0, 0, NULL, NULL },
	FN("vocab", set_vocab),
	INT("dim", model.D, 2, MODEL_MAX_D),
	INT("layers", model.L, 1, MODEL_MAX_L),
	INT("heads", model.H, 1, MODEL_MAX_D),
	INT("seq-len", model.T, 1, MODEL_MAX_T),
	INT("experts", model.E, 1, MODEL_MAX_E),
	INT("top-k", model.K, 1, MODEL_MAX_E),
	INT("ffn", model.F, 1, MODEL_MAX_F),
	FLOAT("aux-coef", model.aux_coef, 0, 100),
	/* training */
	INT("batch", batch, 1, 65536),
	STEPS("steps", optim.steps, 1),
	FLOAT("lr", optim.lr, 0, 10),
	STEPS("warmup", optim.warmup, 0),
	FLOAT("lr-min-ratio", optim.lr_min_ratio, 0, 1),
	FLOAT("weight-decay", optim.weight_decay, 0, 10),
	FLOAT("clip", optim.clip, 0, 1e6),
	U64("seed", seed, 0, LONG_MAX),
	INT("threads", threads, 1, 1024),
	FN("device", set_device),
	WORD("blas-pick", blas_pick, onoff), /* read early: blas_pick.c */
	/* parallel */
	INT("dp", dp, 1, LAYOUT_MAX_RANKS),
	INT("ep", ep, 1, LAYOUT_MAX_RANKS),
	INT("pp", pp, 1, LAYOUT_MAX_RANKS),
	INT("micro", micro, 1, 4096),
	INT("zero", zero, 0, 1),
	DOUBLE("grad-bucket-mb", bucket_mb, 0.001, 4096),
	/* the auto-tuner (docs/tuner.md) */
	FN("tuner", set_tuner),
	INT("tuner-every", tuner.every, 1, 1000),
	INT("tuner-window", tuner.window, 3, 64),
	INT("tuner-confirm", tuner.confirm, 1, 64),
	DOUBLE("tuner-slow", tuner.slow, 1.01, 100),
	INT("tuner-escalate", tuner.escalate, 0, 86400 * 30),
	PATH("tuner-replay", tuner.replay),
	/* precision and guardrails (docs/guardrails.md) */
	WORD("precision", bf16, precisions),
	WORD("guard", guard.enabled, onoff),
	INT("guard-window", guard.window, 2, GUARD_MAX_WINDOW),
	FN("guard-z", set_guard_z),
	STEPS("guard-fp32-steps", guard.fp32_steps, 1),
	STEPS("guard-lr-steps", guard.lr_steps, 1),
	DOUBLE("guard-lr-factor", guard.lr_factor, 1e-6, 1),
	INT("guard-rollback-after", guard.rollback_after, 1, 64),
	DOUBLE("guard-collapse", guard.collapse, 0.01, 1),
	WORD("guard-recompute", guard.recompute, onoff),
	/* reporting */
	STEPS("log-every", log_every, 1),
	STEPS("eval-every", eval_every, 0),
	INT("eval-batches", eval_batches, 1, 100000),
	PATH("metrics", metrics_path),
	PATH("metrics-textfile", metrics_textfile),
};

#define NOPTS (sizeof(opt_table) / sizeof(opt_table[0]))

/* one flag's value into its field; 0 or -EINVAL after printing why */
static int opt_set(struct train_opts *o, const struct opt_def *d,
		   const char *val)
{
	char name[64];
	void *p = (char *)o + d->off;
	long v;
	double r;
	int k;

	snprintf(name, sizeof(name), "--%s", d->name);
	switch (d->kind) {
	case K_FLAG:
		*(bool *)p = true;
		return 0;
	case K_INT:
	case K_LONG:
	case K_U64:
		if (opt_long(name, val, d->lo, d->hi, &v))
			return -EINVAL;
		if (d->kind == K_INT)
			*(int *)p = (int)v;
		else if (d->kind == K_LONG)
			*(long *)p = v;
		else
			*(uint64_t *)p = (uint64_t)v;
		return 0;
	case K_FLOAT:
	case K_DOUBLE:
		if (opt_real(name, val, d->rlo, d->rhi, &r))
			return -EINVAL;
		if (d->kind == K_FLOAT)
			*(float *)p = (float)r;
		else
			*(double *)p = r;
		return 0;
	case K_PATH:
		return opt_path(name, val, p, PATH_MAX);
	case K_WORD:
		k = sigma_parse_enum(val, d->words);
		if (k < 0) {
			sigma_error("%s \"%s\" is not %s or %s", name, val,
				    d->words[0], d->words[1]);
			return -EINVAL;
		}
		*(bool *)p = k == 1;
		return 0;
	case K_FN:
		return d->fn(o, val);
	case K_PRESET:
		return 0; /* the first pass applied it */
	}
	return -EINVAL;
}

/* --preset: small, demo or large, before the shape flags whatever their
 * order */
static int opt_preset(struct train_opts *o, const char *val)
{
	static const char *const presets[] = { "small", "demo", "large", NULL };
	int p = sigma_parse_enum(val, presets);

	if (p < 0) {
		sigma_error("--preset \"%s\" is not small, demo or large", val);
		return -EINVAL;
	}
	if (p == 0)
		model_config_small(&o->model);
	else if (p == 1)
		model_config_demo(&o->model);
	else
		model_config_large(&o->model);
	return 0;
}

/*
 * getopt_long over the table: the first pass applies --preset only
 * (quietly; the second reports), the second every other flag.
 */
static int opt_pass(struct train_opts *o, int argc, char **argv, bool preset)
{
	static struct option lo[NOPTS + 2];
	int c;

	for (size_t i = 0; i < NOPTS; i++) {
		const struct opt_def *d = &opt_table[i];
		bool noarg = d->kind == K_FLAG || d->fn == set_resume;

		lo[i] = (struct option){ d->name, noarg ? no_argument
						    : required_argument,
					 NULL, 256 + (int)i };
	}
	lo[NOPTS] = (struct option){ "help", no_argument, NULL, 'h' };
	lo[NOPTS + 1] = (struct option){ NULL, 0, NULL, 0 };
	optind = 0;
	opterr = !preset;
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		const struct opt_def *d =
		    c >= 256 && c < 256 + (int)NOPTS ? &opt_table[c - 256]
						     : NULL;

		if (preset) {
			if (d && d->kind == K_PRESET && opt_preset(o, optarg))
				return -EINVAL;
			continue;
		}
		if (d) {
			if (opt_set(o, d, optarg))
				return -EINVAL;
			continue;
		}
		if (c == 'h') {
			train_usage(stdout);
			exit(TRAIN_EXIT_OK);
		}
		train_usage(stderr);
		return -EINVAL;
	}
	if (!preset && optind < argc) {
		sigma_error("unexpected argument \"%s\"", argv[optind]);
		return -EINVAL;
	}
	return 0;
}

/* ---- environment and defaults -------------------------------------------- */

static void opts_default(struct train_opts *o)
{
	memset(o, 0, sizeof(*o));
	model_config_demo(&o->model);
	optim_config_default(&o->optim);
	o->batch = 8;
	o->seed = 1;
	o->ckpt_keep = 3;
	o->local_keep = 2;
	o->eval_every = 100;
	o->eval_batches = 4;
	o->log_every = 10;
	guard_config_default(&o->guard);
	tuner_config_default(&o->tuner);
	o->bucket_mb = 16.0;
	o->blas_pick = true;
}

/* SIGMA_* defaults (the plugin's environment); flags parsed later win */
static int read_env(struct train_opts *o)
{
	struct sigma_attempt a;
	char err[256];
	const char *s;
	long v;

	s = getenv(SIGMA_ENV_CKPT_DIR);
	if (s && *s && opt_path(SIGMA_ENV_CKPT_DIR, s, o->ckpt_dir,
				sizeof(o->ckpt_dir)))
		return -EINVAL;
	s = getenv("SIGMA_LOCAL_CKPT_DIR");
	if (s && *s && opt_path("SIGMA_LOCAL_CKPT_DIR", s, o->local_dir,
				sizeof(o->local_dir)))
		return -EINVAL;
	s = getenv(SIGMA_ENV_CKPT_EVERY);
	if (s && *s) {
		if (opt_long(SIGMA_ENV_CKPT_EVERY, s, 0, SIGMA_CKPT_EVERY_MAX,
			     &v))
			return -EINVAL;
		o->ckpt_every = v;
	}
	/* which attempt of the run: lib/attempt.h alone decides */
	if (sigma_attempt_from_env(&a, err, sizeof(err))) {
		sigma_error("%s", err);
		return -EINVAL;
	}
	o->resume |= a.resume;
	o->attempt = a.attempt;
	o->launch = a.launch;
	o->requeues = a.requeues;
	return 0;
}

/* what no single flag can check: settings that go together */
static int opts_check(struct train_opts *o)
{
	if (o->guard.min_samples > o->guard.window)
		o->guard.min_samples = o->guard.window;
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
	if (*o->init_from && *o->init_untrusted) {
		sigma_error("--init-from and --init-from-untrusted: give one");
		return -EINVAL;
	}
	if (o->optim.warmup > o->optim.steps) {
		sigma_error("--warmup %ld is longer than --steps %ld",
			    o->optim.warmup, o->optim.steps);
		return -EINVAL;
	}
	return 0;
}

int train_opts_parse(struct train_opts *o, int argc, char **argv)
{
	opts_default(o);
	if (read_env(o) || opt_pass(o, argc, argv, true) ||
	    opt_pass(o, argc, argv, false))
		return -EINVAL;
	return opts_check(o);
}
