/*
 * jobrec.h - the job protocol's records (docs/job-protocol.md): what a
 * rank of a training step tells the launcher that watches it, without
 * the launcher reading anybody's output text.
 *
 * The launcher names a directory in SIGMA_JOB_RECORDS, one per launch of
 * the step, on a filesystem it can read. Each rank keeps one file there,
 * rank-R, rewritten whole (a new file renamed over the old) as one line:
 *
 *   sigma-job 1 rank=R node=NODE launch=L step=S state=STATE code=C
 *
 * state is start (set up, no step yet), run (step S done) or exit (the
 * rank leaves with exit code C, one of contract.h's train_exit); code is
 * -1 until then. Progress is written at most every SIGMA_JOBREC_EVERY_MS,
 * a change of state at once. A record is a hint from the job's own
 * processes, to the job's own launcher: nothing that runs as root reads
 * it.
 *
 * Lifecycle: sigma_jobrec_open once the rank is known, sigma_jobrec_step
 * after each step, sigma_jobrec_exit before the process ends. Every call
 * is a no-op when SIGMA_JOB_RECORDS is unset or open failed. A record
 * that cannot be written is warned about once, never fatal: the job
 * trains on.
 */
#ifndef SIGMA_JOBREC_H
#define SIGMA_JOBREC_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#define SIGMA_JOBREC_VERSION  1
#define SIGMA_JOBREC_EVERY_MS 200
#define SIGMA_JOBREC_NODE_MAX 64

struct sigma_jobrec {
	bool on;
	bool warned;
	int rank, launch;
	char node[SIGMA_JOBREC_NODE_MAX + 1];
	char path[PATH_MAX], tmp[PATH_MAX];
	uint64_t last_ms; /* the last progress written */
};

/*
 * Read SIGMA_JOB_RECORDS (an absolute directory the caller owns),
 * SLURMD_NODENAME (else the host name) and the launch (attempt.h), and
 * write the start record of rank. 0 (also when unset: r stays off), or
 * -errno with err naming the variable and the problem; r is then off.
 */
int sigma_jobrec_open(struct sigma_jobrec *r, int rank, char *err,
		      size_t len);

/* step done: written when SIGMA_JOBREC_EVERY_MS have passed */
void sigma_jobrec_step(struct sigma_jobrec *r, long step);

/* the rank leaves with code after step; written at once */
void sigma_jobrec_exit(struct sigma_jobrec *r, long step, int code);

#endif /* SIGMA_JOBREC_H */
