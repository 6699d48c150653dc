/*
 * dist_move.c - experts change ep ranks (dist.h, dist_move_experts): the
 * auto-tuner's placement, live or as a resumed run takes it up again.
 *
 * Every expert group holds every expert, in the same placement, so the
 * move happens in each expert group alike, over its ep communicator (in
 * the ops' memory). For every layer whose placement changed, each rank
 * sends every expert it held, parameters and both AdamW moments, to the
 * rank that holds it now (itself included), in one all-to-all; the order
 * on the wire is (layer, expert) ascending, which each receiver knows, and
 * it writes each into its new slot: the slots of a rank are its experts in
 * ascending order (layout.h). The gradients are not moved: every step
 * starts them at zero.
 *
 * dist_routed_take gives every rank the tokens routed to each expert of
 * every layer, which the auto-tuner's placement is decided from.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sigma.h"
#include "dist_impl.h"

/* the floats of one expert of layer l in params, m and v together: its
 * rows of the layer's expert tensors, in the tensor table's order, thrice */
static size_t expert_floats(const struct model *m, int l)
{
	size_t n = 0;

	for (int i = 0; i < m->ntensors; i++)
		if (m->tensors[i].expert && m->tensors[i].layer == l)
			n += m->tensors[i].n / (size_t)m->El;
	return 3 * n;
}

/* copy expert slot j of layer l between the model's arrays and buf (to:
 * into the model); U floats per array, params then m then v */
static void slot_copy(const struct model *m, int l, int j, float *buf, bool to)
{
	float *arr[3] = {m->params, m->m, m->v};
	size_t o = 0;

	for (int k = 0; k < 3; k++)
		for (int i = 0; i < m->ntensors; i++) {
			const struct model_tensor *t = &m->tensors[i];
			size_t row = t->n / (size_t)m->El;
			float *slot = arr[k] + t->offset + (size_t)j * row;

			if (!t->expert || t->layer != l)
				continue;
			if (to)
				m->ops->copy(slot, buf + o, row);
			else
				m->ops->copy(buf + o, slot, row);
			o += row;
		}
}

/* index of expert e among ep rank p's experts of layer l in owner */
static int slot_of(const int16_t *own, int E, int p, int e)
{
	int j = 0;

	for (int f = 0; f < e; f++)
		j += own[f] == p;
	return j;
}

/* the moved layer l: counts of what goes to and comes from each ep rank,
 * in experts; the buffers packed in (expert) order */
static void layer_plan(const int16_t *was, const int16_t *now, int E, int me,
		       size_t *sc, size_t *rc)
{
	for (int e = 0; e < E; e++) {
		if (was[e] == me)
			sc[now[e]]++;
		if (now[e] == me)
			rc[was[e]]++;
	}
}

/* one changed layer's exchange: U floats an expert, x the scratch */
static int move_layer(struct dist *d, struct model *m, int l,
		      const int16_t *was, const int16_t *now, size_t U)
{
	struct dist_ep_scratch *x = d->ep_tmp;
	int P = d->lp.ep, E = d->lp.E, me = d->me.ep_rank, El = E / P, rc;
	size_t *sc = x->sc, *sd = x->sd, *rcn = x->rc, *rd = x->rd;
	size_t *fill = calloc((size_t)P, sizeof(size_t));
	float *sbuf = m->ops->alloc((size_t)El * U * sizeof(float));
	float *rbuf = m->ops->alloc((size_t)El * U * sizeof(float));

	rc = fill && sbuf && rbuf ? 0 : -ENOMEM;
	memset(sc, 0, sizeof(size_t) * (size_t)P);
	memset(rcn, 0, sizeof(size_t) * (size_t)P);
	if (rc == 0) {
		layer_plan(was, now, E, me, sc, rcn);
		for (int p = 0; p < P; p++) {
			sd[p] = p ? sd[p - 1] + sc[p - 1] : 0;
			rd[p] = p ? rd[p - 1] + rcn[p - 1] : 0;
		}
		/* out, by destination then expert */
		for (int e = 0; e < E; e++)
			if (was[e] == me) {
				int q = now[e];

				slot_copy(m, l, slot_of(was, E, me, e),
					  sbuf + (sd[q] + fill[q]++) * U,
					  false);
			}
		for (int p = 0; p < P; p++) {
			sc[p] *= U, sd[p] *= U, rcn[p] *= U, rd[p] *= U;
		}
		rc = comm_alltoallv(d->tep, sbuf, sc, sd, rbuf, rcn, rd,
				    COMM_F32);
	}
	if (rc == 0) { /* in, by source then expert, into the new slots */
		memset(fill, 0, sizeof(size_t) * (size_t)P);
		for (int e = 0; e < E; e++)
			if (now[e] == me) {
				int p = was[e];

				slot_copy(m, l, slot_of(now, E, me, e),
					  rbuf + rd[p] + fill[p]++ * U, true);
			}
	}
	free(fill);
	if (sbuf)
		m->ops->free(sbuf);
	if (rbuf)
		m->ops->free(rbuf);
	return rc;
}

int dist_move_experts(struct dist *d, struct model *m, const int16_t *owner,
		      bool data)
{
	int P = d->lp.ep, E = d->lp.E, rc = 0;
	size_t n = (size_t)d->lp.L * E;
	struct layout_placement np;
	struct model_shard sh;
	char why[128];

	if (P <= 1 || !m->expert_ids)
		return -EINVAL;
	if (m->zero)
		return -ENOTSUP; /* the moments are split over expert_dp */
	/* every owner an ep rank, E / ep experts each in every layer */
	np = (struct layout_placement){d->lp.L, E, P, (int16_t *)owner};
	if ((rc = layout_placement_check(&np, why, sizeof(why))))
		return rc;
	for (int l = 0; data && rc == 0 && l < d->lp.L; l++) {
		const int16_t *was = d->pl.owner + (size_t)l * E;
		const int16_t *now = owner + (size_t)l * E;
		int held = m->tensors && l >= m->shard.layer_first &&
			   l < m->shard.layer_first + m->shard.layer_count;

		/* only the stage that holds the layer moves it */
		if (!held || !memcmp(was, now, sizeof(*now) * (size_t)E))
			continue;
		rc = move_layer(d, m, l, was, now, expert_floats(m, l));
	}
	if (rc)
		return rc;
	/* the tables that follow: each ep rank's experts, this rank's
	 * slots (the model's expert ids) */
	memcpy(d->pl.owner, owner, sizeof(*owner) * n);
	(void)dist_ep_locate(d); /* checked above: E / ep each */
	dist_shard_of(d, d->rank, &sh, m->expert_ids);
	return 0;
}

int dist_routed_take(struct dist *d, float *out)
{
	size_t n = (size_t)d->lp.L * d->lp.E;

	if (!d->routed)
		return -ENOMEM;
	/* a stage's counts are the same on its data-parallel ranks: one
	 * of them gives them */
	for (size_t i = 0; i < n; i++)
		out[i] = d->me.dp_index == 0 ? d->routed[i] : 0.0f;
	memset(d->routed, 0, sizeof(float) * n);
	return d->size > 1 ? comm_allreduce_f32(d->world, out, n) : 0;
}
