/*
 * sim_slow.c - sigma-sim's fail-slow episodes (sim.h): the progress a job
 * loses while one of its nodes or links is slow.
 *
 * During an episode a step takes failslow_slowdown times as long, so the
 * job makes 1/slowdown of its progress. sigma's auto-tuner acts
 * failslow_detect_s after the episode starts and cuts the excess
 * (slowdown - 1) by failslow_mitigation for the rest of it.
 */
#include "sim.h"

double sim_slow_loss(const struct sim_trace *t, double x, bool mitigated)
{
	double s = t->failslow_slowdown;
	double sm = 1.0 + (s - 1.0) * (1.0 - t->failslow_mitigation);
	double a = x;

	if (x <= 0.0 || s <= 1.0)
		return 0.0;
	if (mitigated && t->failslow_detect_s < x)
		a = t->failslow_detect_s;
	return a * (1.0 - 1.0 / s) + (x - a) * (1.0 - 1.0 / sm);
}
