/*
 * dist.c - sigma-train's side of trainer/comm: boot, layout, communicators,
 * gradient buckets overlapped with the backward pass, scalar reductions.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sigma.h"
#include "select.h"
#include "dist.h"

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- expert parallelism ------------------------------------------------- */

/* MPI tag of the pipeline's transfers: a stage receives activations only
 * from the stage before it and gradients only from the one after it. */
#define PIPE_TAG 7300

struct fbuf {
	float *p;
	size_t cap; /* floats */
};

/* fb holds at least n floats of o's memory (what it held is not kept:
 * every caller writes it whole after growing it); 0 or -ENOMEM */
static int fbuf_grow(const struct sigma_ops *o, struct fbuf *fb, size_t n)
{
	float *p;

	if (n <= fb->cap && fb->p)
		return 0;
	n = n < 256 ? 256 : n + n / 4;
	p = o->alloc(n * sizeof(float));
	if (!p)
		return -ENOMEM;
	if (fb->p)
		o->free(fb->p);
	fb->p = p;
	fb->cap = n;
	return 0;
}

static void fbuf_free(const struct sigma_ops *o, struct fbuf *fb)
{
	if (fb->p)
		o->free(fb->p);
	fb->p = NULL;
	fb->cap = 0;
}

/*
 * What the backward pass of one layer of one activation set keeps on the
 * experts' side: the rows this rank received for its experts, expert-major
 * (all rows of its first expert, from ep rank 0 up, then the next expert),
 * and the experts' hidden activations. Counts and offsets are host
 * arrays; the rows are in the ops' memory (the device's on a GPU).
 */
struct dist_ep {
	int offs[MODEL_MAX_E + 1]; /* the layer's routing offsets (host) */
	int *rcnt; /* [ep][E / ep] rows from each ep rank per local expert */
	int *roff; /* [E / ep + 1] expert-major offsets */
	struct fbuf xr, h1, h3, hs; /* [rows, D], [rows, F] x 3 */
};

struct dist_ep_scratch {
	struct fbuf sbuf, rbuf; /* rows in peer order, as exchanged */
	struct fbuf a, b;	/* [rows, D] */
	struct fbuf dhs, dh1, dh3; /* [rows, F] */
	int *scnt;		/* [ep][E / ep] */
	size_t *sc, *sd, *rc, *rd; /* [ep] */
};

static void ep_free(struct dist *d)
{
	struct dist_ep_scratch *x = d->ep_tmp;

	const struct sigma_ops *o = d->ops;

	for (size_t i = 0; d->ep_state && i < (size_t)d->micro * d->lp.L;
	     i++) {
		struct dist_ep *st = &d->ep_state[i];

		free(st->rcnt), free(st->roff);
		fbuf_free(o, &st->xr), fbuf_free(o, &st->h1);
		fbuf_free(o, &st->h3), fbuf_free(o, &st->hs);
	}
	free(d->ep_state);
	d->ep_state = NULL;
	if (x) {
		fbuf_free(o, &x->sbuf), fbuf_free(o, &x->rbuf);
		fbuf_free(o, &x->a), fbuf_free(o, &x->b);
		fbuf_free(o, &x->dhs), fbuf_free(o, &x->dh1);
		fbuf_free(o, &x->dh3);
		free(x->scnt), free(x->sc), free(x->sd), free(x->rc);
		free(x->rd);
		free(x);
	}
	d->ep_tmp = NULL;
}

static int ep_alloc(struct dist *d)
{
	int P = d->lp.ep, El = d->lp.E / P;
	size_t n = (size_t)d->micro * d->lp.L;
	struct dist_ep_scratch *x;

	d->ep_state = calloc(n, sizeof(*d->ep_state));
	x = d->ep_tmp = calloc(1, sizeof(*x));
	if (!d->ep_state || !x)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		d->ep_state[i].rcnt = calloc((size_t)P * El, sizeof(int));
		d->ep_state[i].roff = calloc((size_t)El + 1, sizeof(int));
		if (!d->ep_state[i].rcnt || !d->ep_state[i].roff)
			return -ENOMEM;
	}
	x->scnt = calloc((size_t)P * El, sizeof(int));
	x->sc = calloc(P, sizeof(size_t));
	x->sd = calloc(P, sizeof(size_t));
	x->rc = calloc(P, sizeof(size_t));
	x->rd = calloc(P, sizeof(size_t));
	if (!x->scnt || !x->sc || !x->sd || !x->rc || !x->rd)
		return -ENOMEM;
	return 0;
}

static int ep_alltoallv(struct dist *d, const struct fbuf *s,
			struct fbuf *r)
{
	struct dist_ep_scratch *x = d->ep_tmp;
	uint64_t t0 = now_ns();
	int rc = comm_alltoallv(d->tep, s->p, x->sc, x->sd, r->p, x->rc,
				x->rd, COMM_F32);

	d->comm_ns += now_ns() - t0;
	return rc;
}

/*
 * Send this rank's assignment rows src [NK, width] (expert-sorted, offs of
 * every expert) to the ep ranks holding their experts (loc: [ep][E / ep]
 * experts of each), and receive the rows of this rank's experts from every
 * ep rank into dst [rows, width], expert-major.
 */
static int ep_dispatch(struct dist *d, struct dist_ep *st, const int *offs,
		       const int *loc, const float *src, size_t width,
		       struct fbuf *dst)
{
	struct dist_ep_scratch *x = d->ep_tmp;
	const struct sigma_ops *o = d->ops;
	int P = d->lp.ep, El = d->lp.E / P;
	size_t k = 0, pos[MODEL_MAX_E];
	int rc;

	if (fbuf_grow(o, &x->sbuf, (size_t)offs[d->lp.E] * width) ||
	    fbuf_grow(o, &x->rbuf, (size_t)st->roff[El] * width) ||
	    fbuf_grow(o, dst, (size_t)st->roff[El] * width))
		return -ENOMEM;
	for (int p = 0; p < P; p++) {
		size_t first = k;

		for (int j = 0; j < El; j++) {
			int e = loc[p * El + j];
			size_t n = (size_t)(offs[e + 1] - offs[e]);

			o->copy(x->sbuf.p + k * width, src + offs[e] * width,
				n * width);
			k += n;
		}
		x->sd[p] = first * width;
		x->sc[p] = (k - first) * width;
	}
	k = 0;
	for (int q = 0; q < P; q++) {
		size_t first = k;

		for (int j = 0; j < El; j++)
			k += (size_t)st->rcnt[q * El + j];
		x->rd[q] = first * width;
		x->rc[q] = (k - first) * width;
	}
	rc = ep_alltoallv(d, &x->sbuf, &x->rbuf);
	if (rc)
		return rc;
	for (int j = 0; j < El; j++)
		pos[j] = (size_t)st->roff[j];
	k = 0;
	for (int q = 0; q < P; q++)
		for (int j = 0; j < El; j++) {
			size_t n = (size_t)st->rcnt[q * El + j];

			o->copy(dst->p + pos[j] * width, x->rbuf.p + k * width,
				n * width);
			pos[j] += n;
			k += n;
		}
	return 0;
}

/* The way back: src [rows, width] expert-major on the experts' side to
 * dst [NK, width] in this rank's expert-sorted order. */
static int ep_return(struct dist *d, struct dist_ep *st, const int *offs,
		     const int *loc, const float *src, size_t width,
		     float *dst)
{
	struct dist_ep_scratch *x = d->ep_tmp;
	const struct sigma_ops *o = d->ops;
	int P = d->lp.ep, El = d->lp.E / P;
	size_t k = 0, pos[MODEL_MAX_E];
	int rc;

	if (fbuf_grow(o, &x->sbuf, (size_t)st->roff[El] * width) ||
	    fbuf_grow(o, &x->rbuf, (size_t)offs[d->lp.E] * width))
		return -ENOMEM;
	for (int j = 0; j < El; j++)
		pos[j] = (size_t)st->roff[j];
	for (int q = 0; q < P; q++) {
		size_t first = k;

		for (int j = 0; j < El; j++) {
			size_t n = (size_t)st->rcnt[q * El + j];

			o->copy(x->sbuf.p + k * width, src + pos[j] * width,
				n * width);
			pos[j] += n;
			k += n;
		}
		x->sd[q] = first * width;
		x->sc[q] = (k - first) * width;
	}
	k = 0;
	for (int p = 0; p < P; p++) {
		size_t first = k;

		for (int j = 0; j < El; j++) {
			int e = loc[p * El + j];

			k += (size_t)(offs[e + 1] - offs[e]);
		}
		x->rd[p] = first * width;
		x->rc[p] = (k - first) * width;
	}
	rc = ep_alltoallv(d, &x->sbuf, &x->rbuf);
	if (rc)
		return rc;
	k = 0;
	for (int p = 0; p < P; p++)
		for (int j = 0; j < El; j++) {
			int e = loc[p * El + j];
			size_t n = (size_t)(offs[e + 1] - offs[e]);

			o->copy(dst + offs[e] * width, x->rbuf.p + k * width,
				n * width);
			k += n;
		}
	return 0;
}

/* out[rows, oc] = in[rows, ic] w[e] for each local expert e of this rank
 * (mine[E / ep]) on its expert-major rows; w[e] at w + e ic oc. One dense
 * product per expert: the row offsets are host numbers here, and a
 * grouped product would want them in the ops' memory. */
static void ep_matmul(const struct sigma_ops *o, const struct dist_ep *st,
		      const int *mine, int El, float *out, const float *in,
		      const float *w, size_t ic, size_t oc)
{
	for (int j = 0; j < El; j++) {
		size_t r0 = (size_t)st->roff[j];
		int rows = st->roff[j + 1] - st->roff[j];

		if (rows)
			o->matmul_forward(out + r0 * oc, in + r0 * ic,
					  w + (size_t)mine[j] * ic * oc, rows,
					  (int)ic, (int)oc, 0);
	}
}

/* the model's expert hook, forward: tokens to their experts' ranks, the
 * experts of this rank, outputs back. The routing offsets come to the host
 * (they size every transfer); the rows stay in the ops' memory. */
static void ep_forward(void *ctx, struct model *m, int l,
		       const struct sigma_ops *o)
{
	struct dist *d = ctx;
	struct dist_ep *st = &d->ep_state[(size_t)d->act * d->lp.L + l];
	struct dist_ep_scratch *x = d->ep_tmp;
	struct model_layer_acts *la = &m->act.layer[l];
	const struct model_layer_ptrs *w = &m->P.layer[l];
	int P = d->lp.ep, El = d->lp.E / P, me = d->me.ep_rank;
	int N = m->B * m->cfg.T, K = m->cfg.K;
	size_t D = (size_t)m->cfg.D, F = (size_t)m->cfg.F, rows;
	const int *loc = &d->ep_loc[(size_t)l * P * El];
	uint64_t t0;
	int rc;

	o->moe_gather(la->xe, la->m, la->perm, N, K, (int)D);
	if (d->ep_err)
		return;
	o->to_host(st->offs, la->offs, sizeof(int) * (size_t)(d->lp.E + 1));
	for (int i = 0; i < P * El; i++)
		x->scnt[i] = st->offs[loc[i] + 1] - st->offs[loc[i]];
	for (int p = 0; p < P; p++) {
		x->sc[p] = x->rc[p] = (size_t)El;
		x->sd[p] = x->rd[p] = (size_t)p * El;
	}
	t0 = now_ns();
	rc = comm_alltoallv(d->ep, x->scnt, x->sc, x->sd, st->rcnt, x->rc,
			    x->rd, COMM_I32);
	d->comm_ns += now_ns() - t0;
	if (rc)
		goto fail;
	st->roff[0] = 0;
	for (int j = 0; j < El; j++) {
		int n = 0;

		for (int q = 0; q < P; q++)
			n += st->rcnt[q * El + j];
		st->roff[j + 1] = st->roff[j] + n;
	}
	rows = (size_t)st->roff[El];
	rc = ep_dispatch(d, st, st->offs, loc, la->xe, D, &st->xr);
	if (rc == 0 && (fbuf_grow(o, &st->h1, rows * F) ||
			fbuf_grow(o, &st->h3, rows * F) ||
			fbuf_grow(o, &st->hs, rows * F) ||
			fbuf_grow(o, &x->a, rows * D)))
		rc = -ENOMEM;
	if (rc)
		goto fail;
	ep_matmul(o, st, loc + me * El, El, st->h1.p, st->xr.p, w->w1, D, F);
	ep_matmul(o, st, loc + me * El, El, st->h3.p, st->xr.p, w->w3, D, F);
	o->swiglu_forward(st->hs.p, st->h1.p, st->h3.p, rows * F);
	ep_matmul(o, st, loc + me * El, El, x->a.p, st->hs.p, w->w2, F, D);
	rc = ep_return(d, st, st->offs, loc, x->a.p, D, la->eo);
	if (rc == 0)
		return;
fail:
	d->ep_err = rc;
}

/* backward: output gradients to the experts' ranks, the experts' backward
 * (their weight gradients add up here), input gradients back */
static void ep_backward(void *ctx, struct model *m, int l)
{
	struct dist *d = ctx;
	struct dist_ep *st = &d->ep_state[(size_t)d->act * d->lp.L + l];
	struct dist_ep_scratch *x = d->ep_tmp;
	struct model_acts *a = &m->act;
	const struct model_layer_ptrs *w = &m->P.layer[l];
	const struct model_layer_ptrs *g = &m->G.layer[l];
	const struct sigma_ops *o = m->ops;
	int P = d->lp.ep, El = d->lp.E / P, me = d->me.ep_rank;
	size_t D = (size_t)m->cfg.D, F = (size_t)m->cfg.F;
	size_t rows = (size_t)st->roff[El];
	const int *loc = &d->ep_loc[(size_t)l * P * El];
	int rc;

	if (d->ep_err)
		return;
	if (fbuf_grow(o, &x->b, rows * D) || fbuf_grow(o, &x->dhs, rows * F) ||
	    fbuf_grow(o, &x->dh1, rows * F) || fbuf_grow(o, &x->dh3, rows * F)) {
		rc = -ENOMEM;
		goto fail;
	}
	rc = ep_dispatch(d, st, st->offs, loc, a->deo, D, &x->a);
	if (rc)
		goto fail;
	for (int j = 0; j < El; j++) {
		size_t e = (size_t)loc[me * El + j], r0 = (size_t)st->roff[j];
		int n = st->roff[j + 1] - st->roff[j];

		if (!n)
			continue;
		o->matmul_backward(x->dhs.p + r0 * F, g->w2 + e * F * D,
				   x->a.p + r0 * D, st->hs.p + r0 * F,
				   w->w2 + e * F * D, n, (int)F, (int)D, 0);
	}
	o->swiglu_backward(x->dh1.p, x->dh3.p, x->dhs.p, st->h1.p, st->h3.p,
			   rows * F);
	for (int j = 0; j < El; j++) {
		size_t e = (size_t)loc[me * El + j], r0 = (size_t)st->roff[j];
		int n = st->roff[j + 1] - st->roff[j];

		if (!n)
			continue;
		o->matmul_backward(x->b.p + r0 * D, g->w1 + e * D * F,
				   x->dh1.p + r0 * F, st->xr.p + r0 * D,
				   w->w1 + e * D * F, n, (int)D, (int)F, 0);
		o->matmul_backward(x->b.p + r0 * D, g->w3 + e * D * F,
				   x->dh3.p + r0 * F, st->xr.p + r0 * D,
				   w->w3 + e * D * F, n, (int)D, (int)F, 1);
	}
	rc = ep_return(d, st, st->offs, loc, x->b.p, D, a->dxe);
	if (rc == 0)
		return;
fail:
	d->ep_err = rc;
}

/* the stage's schedule and the expert placement */
static int dist_plan(struct dist *d, char *err, size_t len)
{
	size_t max = pipe_schedule_max(d->micro);
	int rc, P = d->lp.ep, El = d->lp.E / P;

	d->sched = calloc(max, sizeof(*d->sched));
	if (!d->sched)
		return sigma_set_err(err, len, ENOMEM, "out of memory");
	rc = pipe_schedule_1f1b(d->me.stage, d->lp.pp, d->micro, d->sched,
				max, &d->nsched);
	if (rc)
		return sigma_set_err(err, len, -rc,
				     "cannot plan the pipeline schedule: %s",
				     strerror(-rc));
	if (P == 1)
		return 0;
	rc = layout_placement_init(&d->pl, d->lp.L, d->lp.E, P, err, len);
	if (rc)
		return rc;
	d->ep_loc = calloc((size_t)d->lp.L * P * El, sizeof(int));
	if (!d->ep_loc)
		return sigma_set_err(err, len, ENOMEM, "out of memory");
	for (int l = 0; l < d->lp.L; l++)
		for (int p = 0; p < P; p++) {
			rc = layout_placement_local(
			    &d->pl, l, p, &d->ep_loc[((size_t)l * P + p) * El],
			    El);
			if (rc != El)
				return sigma_set_err(err, len, EINVAL,
						     "expert placement of layer %d is uneven",
						     l);
		}
	return 0;
}

/* the dp, ep and pp groups of world (NULL where the layout has none) */
static int split_groups(struct dist *d, struct comm *world, struct comm **dp,
			struct comm **ep, struct comm **pp)
{
	static const enum layout_group g[3] = { LAYOUT_GROUP_DP,
						LAYOUT_GROUP_EP,
						LAYOUT_GROUP_PP };
	struct comm **out[3] = { dp, ep, pp };
	bool want[3] = { true, d->lp.ep > 1, d->lp.pp > 1 };
	int color, key, rc = 0;

	for (int i = 0; i < 3 && rc == 0; i++) {
		*out[i] = NULL;
		if (!want[i])
			continue;
		rc = layout_group_split(&d->lp, d->rank, g[i], &color, &key);
		if (rc == 0)
			rc = comm_split(world, color, key,
					layout_group_name(g[i]), out[i]);
	}
	return rc;
}

int dist_init(struct dist *d, int dp, int ep, int pp, int micro, int E, int L,
	      long batch, char *err, size_t len)
{
	struct comm_options o;
	enum comm_backend be;
	char why[512];
	int rc;

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
	d->lp.micro = micro > 0 ? micro : 1;
	d->micro = d->lp.micro;
	rc = layout_check(&d->lp, why, sizeof(why));
	if (rc) {
		sigma_set_err(err, len, EINVAL, "layout: %s", why);
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
	rc = split_groups(d, d->world, &d->dp, &d->ep, &d->pp);
	if (rc) {
		sigma_set_err(err, len, -rc, "cannot make the groups: %s",
			      strerror(-rc));
		goto fail;
	}
	d->grad = d->lp.pp > 1 ? d->world : d->dp;
	/* tensors travel with the host communicators until dist_attach
	 * knows where the model lives */
	d->tworld = d->world, d->tdp = d->dp, d->tep = d->ep, d->tpp = d->pp;
	d->tgrad = d->grad;
	rc = dist_plan(d, err, len);
	if (rc)
		goto fail;
	return 0;
fail:
	dist_fini(d);
	return rc;
}

/* release the device communicators, and point the tensor ones back at
 * the host's */
static void device_comms_fini(struct dist *d)
{
	if (d->tworld != d->world) { /* NCCL ones of their own */
		comm_destroy(d->tpp);
		comm_destroy(d->tep);
		comm_destroy(d->tdp);
		comm_destroy(d->tworld);
	}
	d->tworld = d->world, d->tdp = d->dp, d->tep = d->ep, d->tpp = d->pp;
	d->tgrad = d->grad;
}

/* fence: one last barrier over the job once the communicators are gone */
static void teardown(struct dist *d, bool fence)
{
	if (d->req.active)
		(void)comm_wait(&d->req);
	if (d->ops)
		ep_free(d);
	device_comms_fini(d);
	free(d->sched);
	free(d->ep_loc);
	layout_placement_fini(&d->pl);
	d->sched = NULL;
	d->ep_loc = NULL;
	comm_destroy(d->pp);
	comm_destroy(d->ep);
	comm_destroy(d->dp);
	comm_destroy(d->world);
	d->dp = d->world = d->ep = d->pp = d->grad = NULL;
	d->tdp = d->tworld = d->tep = d->tpp = d->tgrad = NULL;
	if (fence && d->size > 1)
		(void)boot_fence(&d->boot); /* the watchdog still watches */
	comm_watchdog_stop();
	boot_fini(&d->boot);
}

void dist_fini(struct dist *d)
{
	teardown(d, false);
}

void dist_end(struct dist *d)
{
	teardown(d, true);
}

int dist_sync_model(struct dist *d, struct model *m, void *state, size_t n)
{
	int rc = 0;

	if (d->size == 1)
		return 0;
	if (n)
		rc = comm_bcast(d->world, state, n, COMM_U8, 0);
	if (rc == 0)
		rc = comm_bcast(d->tworld, m->params, m->nparams, COMM_F32, 0);
	if (rc == 0)
		rc = comm_bcast(d->tworld, m->m, m->nparams, COMM_F32, 0);
	if (rc == 0)
		rc = comm_bcast(d->tworld, m->v, m->nparams, COMM_F32, 0);
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

int dist_bcast_bytes(struct dist *d, void *buf, size_t n)
{
	if (d->size == 1)
		return 0;
	return comm_bcast(d->world, buf, n, COMM_U8, 0);
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

/* What names one GPU across the job: the node and the device's PCI
 * address. */
#define DEVICE_ID_MAX (BOOT_NODE_MAX + 64)

/*
 * NCCL refuses two ranks on one GPU, and its refusal would look like a
 * peer's failure: every rank learns every rank's GPU (over the host
 * world), and all refuse alike, naming the pair, before NCCL starts.
 */
static int device_unique(struct dist *d, char *err, size_t len)
{
	size_t n = (size_t)d->size;
	char mine[DEVICE_ID_MAX] = "", *all, pci[32];
	int rc;

	all = calloc(n, DEVICE_ID_MAX);
	if (!all)
		return sigma_set_err(err, len, ENOMEM, "out of memory");
	if (sigma_ops_device_id(d->ops, pci, sizeof(pci)))
		sigma_strlcpy(pci, "unknown", sizeof(pci));
	snprintf(mine, sizeof(mine), "%s GPU %d (%s)",
		 *d->boot.node ? d->boot.node : "?", sigma_ops_device(d->ops),
		 pci);
	rc = dist_allgather(d, mine, sizeof(mine), all);
	if (rc) {
		sigma_set_err(err, len, -rc,
			      "exchanging the GPU of every rank: %s",
			      strerror(-rc));
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		all[i * DEVICE_ID_MAX + DEVICE_ID_MAX - 1] = '\0';
		if (strstr(all + i * DEVICE_ID_MAX, "(unknown)"))
			continue;
		for (size_t j = 0; j < i; j++)
			if (!strcmp(all + i * DEVICE_ID_MAX,
				     all + j * DEVICE_ID_MAX)) {
				rc = -EINVAL;
				sigma_set_err(
				    err, len, EINVAL,
				    "ranks %zu and %zu are both on %s: one GPU per rank (--gpus-per-task=1, or at most as many tasks per node as GPUs)",
				    j, i, all + i * DEVICE_ID_MAX);
				goto out;
			}
	}
	rc = 0;
out:
	free(all);
	return rc;
}

/*
 * A model in device memory (any ops but the CPU's) exchanges its tensors
 * through NCCL communicators of the same shape as the host ones, on the
 * device the ops chose; counts and scalars stay on the host's.
 */
static int device_comms(struct dist *d, char *err, size_t len)
{
	struct comm_options o;
	char why[512];
	int rc;

	if (d->ops == &sigma_ops_cpu || d->size == 1)
		return 0;
	if (!comm_backend_available(COMM_NCCL))
		return sigma_set_err(
		    err, len, ENOTSUP,
		    "a job of %d ranks on the %s kernels exchanges device memory through NCCL, which this build lacks (configure --with-cuda with NCCL installed)",
		    d->size, d->ops->name);
	rc = device_unique(d, err, len);
	if (rc)
		return rc;
	rc = comm_options_default(&o, why, sizeof(why));
	if (rc)
		return sigma_set_err(err, len, -rc, "%s", why);
	o.device = sigma_ops_device(d->ops);
	rc = comm_create(&d->tworld, COMM_NCCL, &d->boot, &o, why,
			 sizeof(why));
	if (rc) {
		d->tworld = d->world;
		return sigma_set_err(err, len, -rc, "%s", why);
	}
	d->tdp = d->tep = d->tpp = NULL;
	rc = split_groups(d, d->tworld, &d->tdp, &d->tep, &d->tpp);
	if (rc) {
		sigma_set_err(err, len, -rc,
			      "cannot make the NCCL groups: %s",
			      strerror(-rc));
		device_comms_fini(d);
		return rc;
	}
	d->tgrad = d->lp.pp > 1 ? d->tworld : d->tdp;
	return 0;
}

int dist_attach(struct dist *d, struct model *m, char *err, size_t len)
{
	int rc;

	d->m = m;
	d->ops = m->ops;
	if (m->nacts < d->micro)
		return sigma_set_err(err, len, EINVAL,
				     "%d activation sets for %d micro-batches",
				     m->nacts, d->micro);
	rc = device_comms(d, err, len);
	if (rc)
		return rc;
	if (comm_size(d->dp) > 1) {
		m->counts_reduce = on_counts;
		m->counts_ctx = d;
		m->count_ranks = comm_size(d->dp);
	}
	if (d->lp.ep > 1) {
		rc = ep_alloc(d);
		if (rc)
			return sigma_set_err(err, len, -rc,
					     "expert-parallel state: %s",
					     strerror(-rc));
		d->experts.forward = ep_forward;
		d->experts.backward = ep_backward;
		d->experts.ctx = d;
		m->experts = &d->experts;
	}
	return 0;
}

/* one transfer of the schedule, between neighbouring stages */
static int pipe_xfer(struct dist *d, struct model *m,
		     const struct pipe_action *a)
{
	size_t ND = (size_t)m->B * m->cfg.T * m->cfg.D;
	int s = d->me.stage, l0 = d->me.layer_first;
	int l1 = l0 + d->me.layer_count;
	struct model_acts *x = &m->acts[a->micro];
	struct model_acts *y = a->micro2 >= 0 ? &m->acts[a->micro2] : NULL;

	switch (a->op) {
	case PIPE_RECV_ACT:
		return comm_recv(d->tpp, x->x + l0 * ND, ND, COMM_F32, s - 1,
				 PIPE_TAG);
	case PIPE_SEND_ACT:
		return comm_send(d->tpp, x->x + l1 * ND, ND, COMM_F32, s + 1,
				 PIPE_TAG);
	case PIPE_RECV_GRAD:
		return comm_recv(d->tpp, x->dx, ND, COMM_F32, s + 1, PIPE_TAG);
	case PIPE_SEND_GRAD:
		return comm_send(d->tpp, x->dx, ND, COMM_F32, s - 1, PIPE_TAG);
	case PIPE_SEND_ACT_RECV_GRAD:
		return comm_sendrecv(d->tpp, x->x + l1 * ND, ND, s + 1, y->dx,
				     ND, s + 1, COMM_F32, PIPE_TAG);
	case PIPE_SEND_GRAD_RECV_ACT:
		return comm_sendrecv(d->tpp, x->dx, ND, s - 1, y->x + l0 * ND,
				     ND, s - 1, COMM_F32, PIPE_TAG);
	default:
		return -EINVAL;
	}
}

int dist_step(struct dist *d, struct model *m, const int32_t *tok,
	      const int32_t *tgt)
{
	size_t N = (size_t)m->B * m->cfg.T;
	int l0 = d->me.layer_first, l1 = l0 + d->me.layer_count, rc = 0;
	float scale = 1.0f / (float)d->micro;
	double ce = 0.0, aux = 0.0;

	d->ep_err = 0;
	model_zero_grads(m);
	dist_grad_begin(d, m);
	for (size_t i = 0; i < d->nsched && rc == 0; i++) {
		const struct pipe_action *a = &d->sched[i];
		uint64_t t0;

		if (a->op == PIPE_FWD || a->op == PIPE_BWD) {
			model_use_acts(m, a->micro);
			d->act = a->micro;
			if (a->op == PIPE_FWD) {
				model_forward_part(m, l0, l1,
						   tok + a->micro * N,
						   tgt + a->micro * N);
				ce += m->ce;
				aux += m->aux;
			} else {
				model_backward_part(m, l0, l1, scale);
			}
			rc = d->ep_err;
			continue;
		}
		t0 = now_ns();
		rc = pipe_xfer(d, m, a);
		d->comm_ns += now_ns() - t0;
	}
	m->ce = ce / d->micro;
	m->aux = aux / d->micro;
	m->loss = m->ce + m->cfg.aux_coef * m->aux;
	d->ep_err = 0;
	return rc;
}

int dist_forward(struct dist *d, struct model *m, const int32_t *tok,
		 const int32_t *tgt)
{
	size_t ND = (size_t)m->B * m->cfg.T * m->cfg.D;
	int s = d->me.stage, l0 = d->me.layer_first;
	int l1 = l0 + d->me.layer_count, rc = 0;
	uint64_t t0;

	d->ep_err = 0;
	model_use_acts(m, 0);
	d->act = 0;
	if (s > 0) {
		t0 = now_ns();
		rc = comm_recv(d->tpp, model_act_x(m, l0), ND, COMM_F32, s - 1,
			       PIPE_TAG);
		d->comm_ns += now_ns() - t0;
		if (rc)
			return rc;
	}
	model_forward_part(m, l0, l1, tok, tgt);
	rc = d->ep_err;
	d->ep_err = 0;
	if (rc == 0 && s < d->lp.pp - 1) {
		t0 = now_ns();
		rc = comm_send(d->tpp, model_act_x(m, l1), ND, COMM_F32, s + 1,
			       PIPE_TAG);
		d->comm_ns += now_ns() - t0;
	}
	return rc;
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

	if (d->grad_err || !layout_bucket_due(d->sent_to, off, d->bucket))
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
	rc = comm_iallreduce_f32(d->tgrad, d->m->grads + off,
				 d->sent_to - off, &d->req);
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
	/* buckets start during the backward pass only when it is the last
	 * one of the step for every gradient: one stage, one micro-batch */
	if (comm_size(d->grad) > 1 && d->lp.pp == 1 && d->micro == 1) {
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
	if (comm_size(d->grad) == 1)
		return 0;
	if (d->req.active) {
		int w = comm_wait(&d->req);

		if (!rc)
			rc = w;
	}
	if (!rc && d->sent_to > 0) {
		rc = comm_allreduce_f32(d->tgrad, m->grads, d->sent_to);
		d->buckets++;
	}
	d->comm_ns += now_ns() - t0;
	if (rc || n == 1)
		return rc;
	m->ops->scale(m->grads, 1.0f / (float)n, m->nparams);
	return 0;
}

/* v[n] = sum over c of v[n] / div */
static int reduce_div(struct dist *d, struct comm *c, double *v, int n,
		      double div)
{
	float buf[MODEL_MAX_L + 2];
	uint64_t t0;
	int rc;

	if (n > MODEL_MAX_L + 2)
		return -EINVAL;
	for (int i = 0; i < n; i++)
		buf[i] = (float)v[i];
	t0 = now_ns();
	rc = comm_allreduce_f32(c, buf, (size_t)n);
	d->comm_ns += now_ns() - t0;
	if (rc)
		return rc;
	for (int i = 0; i < n; i++)
		v[i] = (double)buf[i] / div;
	return 0;
}

int dist_stage_mean(struct dist *d, double *v, int n)
{
	if (d->size == 1)
		return 0;
	return reduce_div(d, d->world, v, n, (double)d->lp.dp);
}

int dist_world_mean(struct dist *d, double *v, int n)
{
	if (d->size == 1)
		return 0;
	return reduce_div(d, d->world, v, n, (double)d->size);
}

int dist_allgather(struct dist *d, const void *mine, size_t bytes, void *all)
{
	size_t n = (size_t)d->size, *cnt, *dsp;
	char *send;
	int rc = -ENOMEM;

	/* an all-to-all that sends every rank the same block */
	cnt = calloc(n, sizeof(*cnt));
	dsp = calloc(n, sizeof(*dsp));
	send = calloc(n, bytes ? bytes : 1);
	if (cnt && dsp && send) {
		for (size_t i = 0; i < n; i++) {
			cnt[i] = bytes;
			dsp[i] = i * bytes;
			memcpy(send + i * bytes, mine, bytes);
		}
		rc = comm_alltoallv(d->world, send, cnt, dsp, all, cnt, dsp,
				    COMM_U8);
	}
	free(cnt), free(dsp), free(send);
	return rc;
}

int dist_world_max(struct dist *d, double *v)
{
	float mine = (float)*v, *r;
	uint64_t t0;
	int rc;

	if (d->size == 1)
		return 0;
	r = calloc((size_t)d->size, sizeof(*r));
	if (!r)
		return -ENOMEM;
	t0 = now_ns();
	rc = dist_allgather(d, &mine, sizeof(mine), r);
	d->comm_ns += now_ns() - t0;
	for (int i = 0; rc == 0 && i < d->size; i++)
		if (r[i] > *v)
			*v = r[i];
	free(r);
	return rc;
}

int dist_barrier(struct dist *d)
{
	uint64_t t0 = now_ns();
	int rc = comm_barrier(d->world);

	d->comm_ns += now_ns() - t0;
	return rc;
}
