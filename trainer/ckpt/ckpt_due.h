/*
 * ckpt_due.h - which checkpoints a finished step writes: tier 1 (the
 * node-local copy and its replica), a full shared one, a differential
 * shared one. Pure: the loop asks, the unit test checks the schedule.
 */
#ifndef SIGMA_TRAIN_CKPT_DUE_H
#define SIGMA_TRAIN_CKPT_DUE_H

#include <stdbool.h>

struct ckpt_sched {
	bool shared;	 /* a shared checkpoint directory is set */
	bool tier1;	 /* the node-local tier is on */
	long every;	 /* --ckpt-every: tier 1 if on, else the shared tier */
	long full_every; /* --ckpt-full-every: the shared tier beside tier 1 */
	long diff_every; /* --ckpt-diff-every; 0: none */
	long steps;	 /* the run's last step */
};

struct ckpt_due {
	bool tier1, full, diff;
};

/*
 * After step done (1-based); stop: the run stops after it (a signal or
 * --stop-at), which always writes a full shared checkpoint. A
 * differential is never due with a full one.
 */
struct ckpt_due ckpt_due(long done, bool stop, const struct ckpt_sched *c);

#endif /* SIGMA_TRAIN_CKPT_DUE_H */
