/*
 * ckpt_due.c - the checkpoint schedule of a run (ckpt_due.h).
 */
#include "config.h"

#include "ckpt_due.h"

static bool every(long done, long n)
{
	return n > 0 && done % n == 0;
}

struct ckpt_due ckpt_due(long done, bool stop, const struct ckpt_sched *c)
{
	struct ckpt_due d;
	long full_every = c->tier1 ? c->full_every : c->every;

	d.tier1 = c->tier1 && every(done, c->every);
	d.full = c->shared &&
		 (every(done, full_every) || done == c->steps || stop);
	d.diff = !d.full && every(done, c->diff_every);
	return d;
}
