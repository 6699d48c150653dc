/*
 * dist.c - sigma-train's side of trainer/comm: boot, layout, communicators,
 * gradient buckets overlapped with the backward pass, scalar reductions.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "sigma.h"
#include "dist.h"

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int dist_init(struct dist *d, int dp, int ep, int pp, int E, int L, long batch,
	      char *err, size_t len)
{
	struct comm_options o;
	enum comm_backend be;
	char why[512];
	int rc, color, key;

	memset(d, 0, sizeof(*d));
	d->bucket = DIST_BUCKET_FLOATS;
	rc = boot_init(&d->boot, why, sizeof(why));
	if (rc)
		return sigma_set_err(err, len, -rc, "bootstrap: %s", why);
	d->rank = d->boot.rank;
	d->size = d->boot.size;
	d->lp.world = d->size;
	d->lp.pp = pp > 0 ? pp : 1;
	d->lp.dp = dp > 0 ? dp : d->size / d->lp.pp;
	d->lp.ep = ep > 0 ? ep : 1;
	d->lp.E = E;
	d->lp.L = L;
	d->lp.batch = batch;
	rc = layout_check(&d->lp, why, sizeof(why));
	if (rc) {
		sigma_set_err(err, len, EINVAL, "layout: %s", why);
		goto fail;
	}
	if (d->lp.ep > 1 || d->lp.pp > 1) {
		rc = -ENOTSUP;
		sigma_set_err(
		    err, len, ENOTSUP,
		    "layout: --ep %d --pp %d: sigma-train runs data parallel only (--ep 1 --pp 1)",
		    d->lp.ep, d->lp.pp);
		goto fail;
	}
	rc = layout_coords(&d->lp, d->rank, &d->me);
	if (rc) {
		sigma_set_err(err, len, EINVAL, "layout: bad rank %d", d->rank);
		goto fail;
	}
	rc = comm_options_default(&o, why, sizeof(why));
	if (rc) {
		sigma_set_err(err, len, -rc, "%s", why);
		goto fail;
	}
	be = d->size > 1 ? COMM_MPI : COMM_SELF;
	if (!comm_backend_available(be)) {
		rc = -ENOTSUP;
		sigma_set_err(
		    err, len, ENOTSUP,
		    "a job of %d ranks needs the MPI back end, which this build lacks",
		    d->size);
		goto fail;
	}
	if (o.timeout_s > 0) {
		rc = comm_watchdog_start(o.timeout_s);
		if (rc) {
			sigma_set_err(err, len, -rc,
				      "cannot start the watchdog: %s",
				      strerror(-rc));
			goto fail;
		}
	}
	rc = comm_create(&d->world, be, &d->boot, &o, why, sizeof(why));
	if (rc) {
		sigma_set_err(err, len, -rc, "%s", why);
		goto fail;
	}
	rc = layout_group_split(&d->lp, d->rank, LAYOUT_GROUP_DP, &color, &key);
	if (rc == 0)
		rc = comm_split(d->world, color, key, "dp", &d->dp);
	if (rc) {
		sigma_set_err(err, len, -rc,
			      "cannot make the data-parallel group: %s",
			      strerror(-rc));
		goto fail;
	}
	return 0;
fail:
	dist_fini(d);
	return rc;
}

void dist_fini(struct dist *d)
{
	if (d->req.active)
		(void)comm_wait(&d->req);
	comm_destroy(d->dp);
	comm_destroy(d->world);
	d->dp = d->world = NULL;
	comm_watchdog_stop();
	boot_fini(&d->boot);
}

int dist_sync_model(struct dist *d, struct model *m, void *state, size_t n)
{
	int rc = 0;

	if (d->size == 1)
		return 0;
	if (n)
		rc = comm_bcast(d->world, state, n, COMM_U8, 0);
	if (rc == 0)
		rc = comm_bcast(d->world, m->params, m->nparams, COMM_F32, 0);
	if (rc == 0)
		rc = comm_bcast(d->world, m->m, m->nparams, COMM_F32, 0);
	if (rc == 0)
		rc = comm_bcast(d->world, m->v, m->nparams, COMM_F32, 0);
	return rc;
}

int dist_bcast_int(struct dist *d, int *v)
{
	int32_t x = *v;
	int rc;

	if (d->size == 1)
		return 0;
	rc = comm_bcast(d->world, &x, 1, COMM_I32, 0);
	*v = x;
	return rc;
}

static void on_counts(void *ctx, int *counts, int E)
{
	struct dist *d = ctx;
	float f[MODEL_MAX_E];
	uint64_t t0;
	int rc;

	if (d->fwd_err)
		return;
	for (int e = 0; e < E; e++)
		f[e] = (float)counts[e]; /* exact below 2^24 tokens */
	t0 = now_ns();
	rc = comm_allreduce_f32(d->dp, f, (size_t)E);
	d->comm_ns += now_ns() - t0;
	if (rc) {
		d->fwd_err = rc;
		return;
	}
	for (int e = 0; e < E; e++)
		counts[e] = (int)f[e];
}

void dist_attach(struct dist *d, struct model *m)
{
	d->m = m;
	if (comm_size(d->dp) > 1) {
		m->counts_reduce = on_counts;
		m->counts_ctx = d;
		m->count_ranks = comm_size(d->dp);
	}
}

int dist_forward_error(struct dist *d)
{
	int rc = d->fwd_err;

	d->fwd_err = 0;
	return rc;
}

/* Start the bucket [off, sent_to) once it is large enough; the rest of the
 * gradients (offset 0 at the end) is left to dist_grad_finish. */
static void on_grad_ready(void *ctx, size_t off)
{
	struct dist *d = ctx;
	uint64_t t0;
	int rc;

	if (d->grad_err || d->sent_to - off < d->bucket)
		return;
	if (d->req.active) {
		t0 = now_ns();
		rc = comm_wait(&d->req);
		d->comm_ns += now_ns() - t0;
		if (rc) {
			d->grad_err = rc;
			return;
		}
	}
	t0 = now_ns();
	rc = comm_iallreduce_f32(d->dp, d->m->grads + off, d->sent_to - off,
				 &d->req);
	d->comm_ns += now_ns() - t0;
	if (rc) {
		d->grad_err = rc;
		return;
	}
	d->sent_to = off;
	d->buckets++;
}

void dist_grad_begin(struct dist *d, struct model *m)
{
	d->m = m;
	d->sent_to = m->nparams;
	d->grad_err = 0;
	d->buckets = 0;
	if (comm_size(d->dp) > 1) {
		m->grad_ready = on_grad_ready;
		m->grad_ready_ctx = d;
	} else {
		m->grad_ready = NULL;
	}
}

int dist_grad_finish(struct dist *d)
{
	struct model *m = d->m;
	int n = comm_size(d->dp), rc = d->grad_err;
	uint64_t t0 = now_ns();

	m->grad_ready = NULL;
	if (n == 1)
		return 0;
	if (d->req.active) {
		int w = comm_wait(&d->req);

		if (!rc)
			rc = w;
	}
	if (!rc && d->sent_to > 0) {
		rc = comm_allreduce_f32(d->dp, m->grads, d->sent_to);
		d->buckets++;
	}
	d->comm_ns += now_ns() - t0;
	if (rc)
		return rc;
	{
		float s = 1.0f / (float)n;

		for (size_t i = 0; i < m->nparams; i++)
			m->grads[i] *= s;
	}
	return 0;
}

int dist_mean(struct dist *d, double *v, int n)
{
	float buf[16];
	int k = comm_size(d->dp), rc;
	uint64_t t0;

	if (k == 1)
		return 0;
	if (n > 16)
		return -EINVAL;
	for (int i = 0; i < n; i++)
		buf[i] = (float)v[i];
	t0 = now_ns();
	rc = comm_allreduce_f32(d->dp, buf, (size_t)n);
	d->comm_ns += now_ns() - t0;
	if (rc)
		return rc;
	for (int i = 0; i < n; i++)
		v[i] = (double)buf[i] / k;
	return 0;
}

int dist_barrier(struct dist *d)
{
	uint64_t t0 = now_ns();
	int rc = comm_barrier(d->world);

	d->comm_ns += now_ns() - t0;
	return rc;
}
