/*
 * report.h - what sigma-train tells: the configuration at start, the
 * progress line every --log-every steps, and the same series as a CSV
 * (--metrics; docs/sigma-train.md lists its columns).
 */
#ifndef SIGMA_TRAIN_REPORT_H
#define SIGMA_TRAIN_REPORT_H

#include <stdint.h>
#include <stdio.h>

#include "ckpt.h"
#include "data.h"
#include "dist.h"
#include "guard_run.h"
#include "model.h"
#include "opts.h"
#include "tiers.h"

/* the progress series: its file and the interval since the last row */
struct report {
	FILE *metrics; /* rank 0, with --metrics */
	double flops_tok;
	long start; /* the first step of this start */
	/* nanoseconds, monotonic, and the communication clock then: set by
	 * the caller when the first step starts, so that what setup waited
	 * on peers counts in neither */
	uint64_t t_start, t_last, comm_start, comm_last;
	long s_last;
};

/* one row: step done and what its update did */
struct report_row {
	long done;
	double gn;
	float lr, scale;
	double val_ce; /* NAN: not evaluated at this step */
	const struct tuner *tu; /* the auto-tuner's state */
};

/* the config: lines, after the resume decided where the run starts */
void report_config(const struct train_opts *o, const struct model *m,
		   const struct data_file *train);

/*
 * The series from step start on: rank 0 with --metrics opens the CSV (a
 * new one, with its header, at step 0 or when there is none; else
 * appended to). 0 or an exit code.
 */
int report_open(struct report *r, const struct train_opts *o,
		const struct model *m, const struct dist *d, long start);

/* the progress line and metrics row of a step; tr: the checkpoint
 * tiers, whose writers' timings the row carries */
void report_step(struct report *r, const struct report_row *row,
		 const struct train_opts *o, const struct model *m,
		 const struct dist *d, const struct guard_run *gr,
		 struct tiers *tr);

/* what rank 0's textfile tells (report_prom.c) */
struct report_prom {
	long step;
	double loss, tokens_s; /* tokens_s: the job's */
	double step_s, comm_s; /* per step over the interval */
};

/* --metrics-textfile: p, the guard's actions and the checkpoint steps of
 * the writers aw (shared) and a1 (tier 1), written atomically to path; a
 * failure is warned about, never fatal */
void report_textfile(const char *path, const struct report_prom *p,
		     const struct guard_run *gr, struct ckpt_async *aw,
		     struct ckpt_async *a1);

/* 0, or an exit code when the metrics file could not be written */
int report_close(struct report *r);

#endif /* SIGMA_TRAIN_REPORT_H */
