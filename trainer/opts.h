/*
 * opts.h - sigma-train's settings: struct train_opts, its defaults, the
 * SIGMA_* environment the plugin hands over, and the command line, which
 * wins. Every flag is one row of the table in opts.c.
 */
#ifndef SIGMA_TRAIN_OPTS_H
#define SIGMA_TRAIN_OPTS_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "ckpt.h" /* struct ckpt_state, for guard.h */
#include "guard_run.h"
#include "model.h"
#include "tuner.h"

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
	int attempt; /* SIGMA_ATTEMPT (else SLURM_RESTART_COUNT), plus
			SIGMA_LAUNCH: in names */
	int launch;  /* SIGMA_LAUNCH: sigma-launch's relaunch, 0 the first */
	long requeues; /* SLURM_RESTART_COUNT: Slurm's requeues, 0 none */
	long eval_every; /* 0: never */
	int eval_batches;
	long log_every;
	char metrics_path[PATH_MAX];
	char metrics_textfile[PATH_MAX]; /* rank 0's Prometheus textfile */
	char init_from[PATH_MAX];
	char init_untrusted[PATH_MAX]; /* --init-from-untrusted (untrusted.h) */
	long stop_at; /* 0: never; else stop as on SIGUSR1 after this step */
	bool resume;
	bool resume_flag; /* --resume itself (not implied by an attempt) */
	bool new_run;	  /* --new-run */
	bool vocab_set;
	struct guard_config guard; /* --guard*, guard.h */
	bool bf16; /* --precision bf16 */
	char device[32]; /* --device: cpu (empty), cuda, cuda:fp32, cuda:bf16 */
	int dp, ep, pp; /* layout; dp 0: the job size */
	int zero; /* 1: AdamW moments split over the data-parallel ranks */
	int micro;	/* micro-batches per step and rank */
	double bucket_mb; /* gradient all-reduce bucket */
	bool blas_pick; /* --blas-pick: blas_pick.h acts on it before this */
	struct tuner_config tuner; /* --tuner*, tuner.h */
};

/*
 * Defaults, then the environment, then the flags. 0, or -EINVAL after
 * printing why; --help prints the usage and exits 0.
 */
int train_opts_parse(struct train_opts *o, int argc, char **argv);

void train_usage(FILE *f);

/* "what value is out of range [lo, hi]" / "is not a ...": for every
 * command of sigma-train; 0 or -EINVAL (-ERANGE) after printing why */
int opt_long(const char *what, const char *s, long lo, long hi, long *out);
int opt_real(const char *what, const char *s, double lo, double hi,
	     double *out);
int opt_path(const char *what, const char *s, char *dst, size_t len);

#endif /* SIGMA_TRAIN_OPTS_H */
