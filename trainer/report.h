/*
 * report.h - what sigma-train tells: the configuration at start, the
 * progress line every --log-every steps, and the same series as a CSV
 * (--metrics; docs/sigma-train.md lists its columns).
 */
#ifndef SIGMA_TRAIN_REPORT_H
#define SIGMA_TRAIN_REPORT_H

struct trainer;

/* the config: lines, after the resume decided where the run starts */
void report_config(const struct trainer *t);

/* rank 0 with --metrics: open the CSV (a new one, with its header, at step
 * 0 or when there is none; else appended to). 0 or an exit code. */
int report_metrics_open(struct trainer *t);

/* the progress line and metrics row of step done, over the interval
 * since the last one */
void report_step(struct trainer *t, long done, double gn, float lr,
		 float scale, double val_ce);

#endif /* SIGMA_TRAIN_REPORT_H */
