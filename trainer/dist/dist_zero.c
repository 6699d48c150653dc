/*
 * dist_zero.c - the sharded optimizer (--zero 1, docs/distributed.md,
 * "ZeRO-1"): the AdamW moments of each range of the parameter block are
 * split over the ranks that hold the range, the dense range over the
 * stage's data-parallel group and the experts over their expert_dp group.
 * Per step the gradients are reduce-scattered, so that each rank receives
 * the sum of its block alone, each rank updates its block, and the
 * parameters are all-gathered. A checkpoint gathers the moments into its
 * stage, so the files hold whole tensors as without it.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include "dist_impl.h"

/* the host group (k 0: dense, 1: experts) over which range k is split;
 * NULL: one holder, nothing split */
static struct comm *zero_group(const struct dist *d, int k, bool ops_memory)
{
	if (k == 0)
		return ops_memory ? d->tdp : d->dp;
	return ops_memory ? d->tedp : d->edp;
}

void dist_zero_of(const struct dist *d, struct model_shard *s)
{
	for (int k = 0; k < 2; k++) {
		const struct comm *c = zero_group(d, k, false);

		s->zrank[k] = c ? comm_rank(c) : 0;
		s->zsize[k] = c ? comm_size(c) : 1;
	}
}

/* the block sizes of range k over its group, as model_zero_block cuts */
static int zero_counts(struct dist *d, const struct model *m, int k)
{
	const size_t n = k ? m->nparams - m->ndense : m->ndense;
	const int P = m->shard.zsize[k];

	if (d->zc[k] || P <= 1)
		return 0;
	d->zc[k] = calloc((size_t)P, sizeof(size_t));
	if (!d->zc[k])
		return -ENOMEM;
	for (int r = 0; r < P; r++) {
		size_t lo, hi;

		model_zero_block(n, r, P, &lo, &hi);
		d->zc[k][r] = hi - lo;
	}
	return 0;
}

int dist_zero_attach(struct dist *d, struct model *m)
{
	if (!m->zero)
		return 0;
	return zero_counts(d, m, 0) ?: zero_counts(d, m, 1);
}

void dist_zero_fini(struct dist *d)
{
	for (int k = 0; k < 2; k++) {
		free(d->zc[k]);
		d->zc[k] = NULL;
	}
}

/* range k's first float in the parameter block */
static size_t range_base(const struct model *m, int k)
{
	return k ? m->ndense : 0;
}

int dist_zero_reduce(struct dist *d, struct model *m)
{
	float inv = 1.0f / (float)comm_size(d->dp);
	int rc = 0;

	for (int k = 0; k < 2 && rc == 0; k++)
		if (d->zc[k])
			rc = comm_reduce_scatter_f32(zero_group(d, k, true),
						     m->grads + range_base(m, k),
						     d->zc[k]);
	if (rc)
		return rc;
	/* an expert's gradient already sums the tokens of its ep group */
	for (int k = 0; k < 2; k++)
		if (m->mom_hi[k] > m->mom_lo[k])
			m->ops->scale(m->grads + m->mom_lo[k], inv,
				      m->mom_hi[k] - m->mom_lo[k]);
	return 0;
}

int dist_params_gather(struct dist *d, struct model *m)
{
	uint64_t t0 = dist_now_ns();
	int rc = 0;

	for (int k = 0; k < 2 && rc == 0 && m->zero; k++)
		if (d->zc[k])
			rc = comm_allgather_f32(zero_group(d, k, true),
						m->params + range_base(m, k),
						d->zc[k]);
	dist_comm_done(d, DIST_C_ALLREDUCE, t0);
	return rc;
}

int dist_moments_gather(struct dist *d, const struct model *m, float *fm,
			float *fv)
{
	const size_t n = m->nparams;
	float *own = NULL;
	int rc = 0;

	if (!fm) {
		own = malloc(sizeof(float) * 2 * (n ? n : 1));
		if (!own)
			return -ENOMEM;
		fm = own, fv = own + n;
	}
	model_moments_store(m, fm, fv);
	for (int k = 0; k < 2 && rc == 0; k++) {
		struct comm *c = zero_group(d, k, false);
		size_t b = range_base(m, k);

		if (!d->zc[k])
			continue;
		rc = comm_allgather_f32(c, fm + b, d->zc[k]);
		if (rc == 0)
			rc = comm_allgather_f32(c, fv + b, d->zc[k]);
	}
	free(own);
	return rc;
}
