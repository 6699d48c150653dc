/*
 * tuner_inject.h - fail-slow injection, for tests and benchmarks of the
 * auto-tuner only (docs/tuner.md): a rank made slower by a factor, or a
 * rank's sends held by a delay per message (a slow link), for all steps
 * or a range of them. The specification, a comma-separated list:
 *
 *     slow:RANK:FACTOR[@FROM-TO]      e.g. slow:3:2  slow:1:3@40-42
 *     link:RANK:USEC[@FROM-TO]        e.g. link:2:500
 *
 * comes from SIGMA_TUNER_INJECT, or from the file SIGMA_TUNER_INJECT_FILE
 * names (read again whenever it changes, so a slowdown can start and stop
 * while the job runs; a missing file injects nothing). A slow rank works
 * (FACTOR - 1) times the processor time of its forward and backward passes
 * more, after them: the time counts as compute, as a slower chip's would,
 * and on cores shared with other ranks it is slowed by them as the passes
 * were (a sleep would hand them its core and hide the slowdown). A slow
 * link holds every message the rank sends to a peer USEC microseconds
 * (comm_inject_send_delay): the time counts as the call's.
 */
#ifndef SIGMA_TRAIN_TUNER_INJECT_H
#define SIGMA_TRAIN_TUNER_INJECT_H

#include <limits.h>
#include <stdint.h>
#include <time.h>

#define TUNER_INJECT_MAX 8

enum tuner_fault_kind { TUNER_F_SLOW, TUNER_F_LINK };

struct tuner_fault {
	int kind; /* enum tuner_fault_kind */
	int rank;
	double factor; /* slow: >= 1; link: the microseconds per message */
	long from, to; /* the steps (1-based, inclusive) it holds */
};

struct tuner_inject {
	int n;
	struct tuner_fault f[TUNER_INJECT_MAX];
	char path[PATH_MAX]; /* SIGMA_TUNER_INJECT_FILE, "" none */
	struct timespec mtime;
	long long size;
};

/* parse spec into in: 0, or -EINVAL with err */
int tuner_inject_parse(struct tuner_inject *in, const char *spec, char *err,
		       size_t len);
/* from the environment: 0, or -EINVAL with err naming the variable */
int tuner_inject_init(struct tuner_inject *in, char *err, size_t len);
/* rank's faults at step (1-based): the compute factor (1 when none) and
 * the hold of each message it sends (0 when none); the file re-read when
 * it changed (a bad one is reported and injects nothing) */
void tuner_inject_at(struct tuner_inject *in, int rank, long step,
		     double *factor, uint64_t *link_ns);
/* this process's processor time so far, in ns */
uint64_t tuner_inject_cpu_ns(void);
/* spin until this process has used (factor - 1) * cpu_ns more processor
 * time; the wall-clock nanoseconds that took */
uint64_t tuner_inject_work(double factor, uint64_t cpu_ns);

#endif /* SIGMA_TRAIN_TUNER_INJECT_H */
