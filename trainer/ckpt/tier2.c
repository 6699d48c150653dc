/*
 * tier2.c - the shared tier from the training loop (tier2.h): hand a
 * checkpoint to the background writer, or write it here and prune.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <stdbool.h>
#include <stdio.h>

#include "sigma.h"
#include "delta.h"
#include "tier2.h"

/* hand a full or differential checkpoint to the background writer: the
 * stall is the copy; a failure of its previous write surfaces here */
static int tier2_submit(struct ckpt_async *aw, const struct model *m,
			const struct ckpt_state *st, bool diff,
			struct ckpt_times *ct)
{
	struct ckpt_async_stats cs;
	char err[1024];
	int rc = diff ? ckpt_async_submit_diff(aw, m, st, err, sizeof(err))
		      : ckpt_async_submit(aw, m, st, err, sizeof(err));

	if (rc) {
		sigma_error("checkpoint failed: %s", err);
		return rc;
	}
	ckpt_async_stats(aw, &cs);
	ct->stall_ms = cs.stall_ms;
	return 0;
}

int tier2_submit_gathered(struct ckpt_async *aw, struct dist *d,
			  const struct model *m, const struct ckpt_state *st,
			  double *stall_ms, char *err, size_t len)
{
	const size_t n = m->nparams;
	uint64_t t0 = sigma_now_ms();
	float *s = NULL;
	int rc;

	if (aw) {
		s = ckpt_async_claim(aw, err, len);
		if (!s) /* its previous write failed */
			return -ECANCELED;
		m->ops->to_host(s, m->params, sizeof(float) * n);
	}
	rc = dist_moments_gather(d, m, s ? s + n : NULL, s ? s + 2 * n : NULL);
	if (rc)
		return sigma_set_err(err, len, -rc,
				     "step %ld: gathering the moments: %s",
				     st->step, strerror(-rc));
	if (aw)
		ckpt_async_commit(aw, st);
	*stall_ms = (double)(sigma_now_ms() - t0);
	return 0;
}

/* In the background (aw) or, with --ckpt-sync or no writer, in the loop. */
int tier2_save(const struct tiers_conf *o, struct ckpt_async *aw,
	       struct ckpt_base *base, const struct model *m,
	       struct ckpt_state *st, struct ckpt_times *ct)
{
	char path[PATH_MAX], err[1024];
	uint64_t t0 = sigma_now_ms();
	int rc;

	if (aw)
		return tier2_submit(aw, m, st, false, ct);
	rc = ckpt_write(o->ckpt_dir, m, st, path, sizeof(path), err,
			sizeof(err));
	if (rc) {
		sigma_error("checkpoint failed: %s", err);
		return rc;
	}
	if (base && base->state)
		ckpt_base_set(base, m, NULL, st->step, path);
	ckpt_prune(o->ckpt_dir, o->ckpt_keep);
	ct->stall_ms = ct->write_ms = (double)(sigma_now_ms() - t0);
	printf("checkpoint step %ld: %s (%.2f s)\n", st->step, path,
	       (sigma_now_ms() - t0) / 1000.0);
	fflush(stdout);
	return 0;
}

/*
 * A differential checkpoint against the newest full one: in the
 * background (aw), else in the loop against base; with no base yet (a
 * run resumed from a differential or from tier 1), a full one.
 */
int tier2_save_diff(const struct tiers_conf *o, struct ckpt_async *aw,
		    struct ckpt_base *base, const struct model *m,
		    struct ckpt_state *st, struct ckpt_times *ct)
{
	struct ckpt_diff_stats ds;
	char path[PATH_MAX], err[1024];
	uint64_t t0 = sigma_now_ms();
	int rc;

	if (aw)
		return tier2_submit(aw, m, st, true, ct);
	if (base->step < 0) {
		printf("checkpoint step %ld: no full checkpoint of this run to difference against: a full one instead\n",
		       st->step);
		return tier2_save(o, NULL, base, m, st, ct);
	}
	rc = ckpt_write_diff(o->ckpt_dir, m, NULL, st, base, &ds, path,
			     sizeof(path), err, sizeof(err));
	if (rc) {
		sigma_error("checkpoint failed: %s", err);
		return rc;
	}
	ckpt_prune(o->ckpt_dir, o->ckpt_keep);
	ct->stall_ms = ct->write_ms = (double)(sigma_now_ms() - t0);
	printf("checkpoint step %ld: %s (%.2f s; %d tensors same, %d delta, %d whole)\n",
	       st->step, path, (sigma_now_ms() - t0) / 1000.0,
	       ds.tensors[DELTA_SAME], ds.tensors[DELTA_ZIGZAG],
	       ds.tensors[DELTA_WHOLE]);
	fflush(stdout);
	return 0;
}

int tier2_wait(struct ckpt_async *aw)
{
	char err[1024];
	int rc;

	if (!aw)
		return 0;
	rc = ckpt_async_wait(aw, err, sizeof(err));
	if (rc)
		sigma_error("checkpoint failed: %s", err);
	return rc;
}
