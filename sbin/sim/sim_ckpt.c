/*
 * sim_ckpt.c - sigma-sim's checkpoint tiers (sim.h): what a run of a job
 * keeps at each tier when it stops, and what its saves stall.
 *
 * A run trains in segments of seg seconds; a save follows each (seg_stall).
 * With tier 1 a segment is the tier-1 interval and every k-th save also
 * writes tier 2 (its own stall on top); without it a segment is the tier-2
 * interval. The schedule starts again with each run, as sigma-train's
 * does after a restore.
 */
#include <math.h>

#include "sim.h"

/* the tier-2 write: fixed cost plus state over bandwidth */
static double ckpt_tier2_write_s(const struct sim_trace *t)
{
	if (t->state_bytes <= 0.0 || t->tier2_write_bytes_s <= 0.0)
		return 0.0;
	return t->state_bytes / t->tier2_write_bytes_s;
}

void sim_ckpt_init(struct sim_ckpt *ck, const struct sim_trace *t, bool tier1)
{
	double write_s = ckpt_tier2_write_s(t);
	double interval2 = t->ckpt_interval_s;

	/* a background write must end before the next save may start */
	if (t->tier2_async && write_s > interval2)
		interval2 = write_s;
	ck->tier2_stall = t->ckpt_cost_s + (t->tier2_async ? 0.0 : write_s);
	ck->restore2 = t->state_bytes > 0.0 && t->tier2_read_bytes_s > 0.0
			   ? t->state_bytes / t->tier2_read_bytes_s
			   : 0.0;
	ck->restore1 = t->tier1_restore_s;
	ck->tier1 = tier1 && t->tier1_interval_s > 0.0;
	if (ck->tier1) {
		ck->seg = t->tier1_interval_s;
		ck->seg_stall = t->tier1_stall_s;
		ck->k = lround(interval2 / t->tier1_interval_s);
		if (ck->k < 1)
			ck->k = 1;
		ck->stall2 = ck->tier2_stall;
	} else {
		ck->seg = interval2;
		ck->seg_stall = ck->tier2_stall;
		ck->k = 1;
		ck->stall2 = 0.0;
	}
	ck->cycle = (double)ck->k * (ck->seg + ck->seg_stall) + ck->stall2;
}

double sim_ckpt_kept(const struct sim_ckpt *ck, double e, enum sim_level l)
{
	double n = floor(e / ck->cycle), rem = e - n * ck->cycle;
	double per = ck->seg + ck->seg_stall, m;
	double kept = n * (double)ck->k * ck->seg;

	if (l == SIM_TIER2)
		return kept;
	m = floor(rem / per);
	if (m >= (double)ck->k)
		return kept + (double)ck->k * ck->seg;
	if (l == SIM_TIER1)
		return kept + m * ck->seg;
	/* a flush keeps the segment under way too */
	rem -= m * per;
	return kept + m * ck->seg + (rem < ck->seg ? rem : ck->seg);
}

double sim_ckpt_efficiency(const struct sim_ckpt *ck)
{
	return (double)ck->k * ck->seg / ck->cycle;
}
