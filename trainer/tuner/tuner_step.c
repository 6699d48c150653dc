/*
 * tuner_step.c - the auto-tuner after each step (tuner_after_step in
 * tuner.h): the one call the training loop makes. It runs the rungs in
 * their order; the job's collectives and the experts' move come in as
 * ops, so that nothing here talks to the ranks or touches the model.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tuner_impl.h"

/* the replayed decisions due after step done: shares, buckets, experts */
static int replay_step(struct tuner *tu, long done, const struct tuner_ops *ops,
		       bool print)
{
	(void)tuner_replay_due(tu, done, print);
	if (tuner_place_replay(tu, done, print) > 0)
		return ops->move_experts(ops->ctx);
	return 0;
}

/* the probes, then every rank's summary to every rank, and what the
 * shares, links and buckets decide from them */
static int exchange_step(struct tuner *tu, long done,
			 const struct tuner_ops *ops, bool print)
{
	struct tuner_sample *all = calloc((size_t)ops->ranks, sizeof(*all));
	int rc;

	if (!all)
		return -ENOMEM;
	rc = ops->link_probe(ops->ctx, tuner_probe_rounds(tu),
			     &tu->mine.probe_ns);
	if (rc == 0 && tuner_comm_due(tu))
		rc = ops->bucket_probe(ops->ctx, tuner_comm_probe_floats(tu),
				       &tu->mine.ar);
	tuner_clock_seal(tu);
	if (rc == 0 && ops->ranks > 1)
		rc = ops->gather(ops->ctx, &tu->mine, all);
	else
		all[0] = tu->mine;
	if (rc == 0)
		(void)tuner_exchange(tu, all, (size_t)ops->ranks, done, print);
	free(all);
	return rc;
}

/* the tokens routed since the last exchange, and the experts' move */
static int experts_step(struct tuner *tu, long done,
			const struct tuner_ops *ops, bool print)
{
	size_t n = (size_t)tu->experts.L * tu->experts.E;
	float *load = malloc(sizeof(float) * (n ? n : 1));
	int rc, moved;

	if (!load)
		return -ENOMEM;
	rc = ops->routed(ops->ctx, load);
	moved =
	    rc ? 0 : tuner_place_exchange(tu, load, tu->cfg.every, done, print);
	free(load);
	return rc ? rc : moved > 0 ? ops->move_experts(ops->ctx) : 0;
}

int tuner_after_step(struct tuner *tu, long done, const struct tuner_ops *ops,
		     bool print, struct tuner_actions *act)
{
	int rc;

	*act = (struct tuner_actions){ .escalate = -1 };
	if ((rc = replay_step(tu, done, ops, print)))
		return rc;
	if (!tuner_due(tu, done))
		return 0;
	if ((rc = exchange_step(tu, done, ops, print)))
		return rc;
	if (tuner_place_wants(tu) && (rc = experts_step(tu, done, ops, print)))
		return rc;
	act->exchanged = true;
	/* the last rung: the rank still slow, for its node's report (-1
	 * none) */
	(void)tuner_escalate_due(tu, &act->escalate, act->why,
				 sizeof(act->why));
	return 0;
}
