/*
 * dist_ep.c - expert parallelism (dist.h): the experts of a layer spread
 * over the ranks of an expert group, E / ep on each (the placement of
 * trainer/comm/layout.h), and the model's expert hooks that take every
 * token to its experts' rank and back.
 *
 * One layer's forward pass on a rank: route (the row counts of each of
 * its experts, exchanged over the host's ep communicator), dispatch (the
 * rows to their experts' ranks, one all-to-all in the ops' memory), the
 * products of this rank's experts, combine (their outputs back to the
 * ranks the tokens came from, in each one's expert-sorted order). The
 * backward pass sends the output gradients the same way, adds the weight
 * gradients of this rank's experts, and sends the input gradients back;
 * the routing counts and the rows it needs are kept per activation set
 * and layer (struct dist_ep).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sigma.h"
#include "dist_impl.h"

int dist_ep_plan(struct dist *d, char *err, size_t len)
{
	int rc, P = d->lp.ep, El = d->lp.E / P;

	if (P == 1)
		return 0;
	rc = layout_placement_init(&d->pl, d->lp.L, d->lp.E, P, err, len);
	if (rc)
		return rc;
	d->ep_loc = calloc((size_t)d->lp.L * P * El, sizeof(int));
	if (!d->ep_loc)
		return sigma_set_err(err, len, ENOMEM, "out of memory");
	rc = dist_ep_locate(d);
	if (rc >= 0)
		return 0;
	return sigma_set_err(err, len, EINVAL,
			     "expert placement of layer %d is uneven", -rc - 1);
}

int dist_ep_locate(struct dist *d)
{
	int P = d->lp.ep, El = d->lp.E / P;

	for (int l = 0; l < d->lp.L; l++)
		for (int p = 0; p < P; p++)
			if (layout_placement_local(
				&d->pl, l, p,
				&d->ep_loc[((size_t)l * P + p) * El], El) != El)
				return -l - 1;
	return 0;
}

/* fb holds at least n floats of o's memory (what it held is not kept:
 * every caller writes it whole after growing it); 0 or -ENOMEM */
static int fbuf_grow(const struct sigma_ops *o, struct dist_fbuf *fb, size_t n)
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

static void fbuf_free(const struct sigma_ops *o, struct dist_fbuf *fb)
{
	if (fb->p)
		o->free(fb->p);
	fb->p = NULL;
	fb->cap = 0;
}

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

static int ep_alltoallv(struct dist *d, const struct dist_fbuf *s,
			struct dist_fbuf *r)
{
	struct dist_ep_scratch *x = d->ep_tmp;
	uint64_t t0 = dist_now_ns();
	int rc = comm_alltoallv(d->tep, s->p, x->sc, x->sd, r->p, x->rc,
				x->rd, COMM_F32);

	dist_comm_done(d, DIST_C_ALLTOALL, t0);
	return rc;
}

int dist_ep_route(struct dist *d, struct dist_ep *st, const int *loc)
{
	struct dist_ep_scratch *x = d->ep_tmp;
	int P = d->lp.ep, El = d->lp.E / P;
	uint64_t t0;
	int rc;

	for (int i = 0; i < P * El; i++)
		x->scnt[i] = st->offs[loc[i] + 1] - st->offs[loc[i]];
	for (int p = 0; p < P; p++) {
		x->sc[p] = x->rc[p] = (size_t)El;
		x->sd[p] = x->rd[p] = (size_t)p * El;
	}
	t0 = dist_now_ns();
	rc = comm_alltoallv(d->ep, x->scnt, x->sc, x->sd, st->rcnt, x->rc,
			    x->rd, COMM_I32);
	dist_comm_done(d, DIST_C_ALLTOALL, t0);
	if (rc)
		return rc;
	st->roff[0] = 0;
	for (int j = 0; j < El; j++) {
		int n = 0;

		for (int q = 0; q < P; q++)
			n += st->rcnt[q * El + j];
		st->roff[j + 1] = st->roff[j] + n;
	}
	return 0;
}

/*
 * Send this rank's assignment rows src [NK, width] (expert-sorted, offs of
 * every expert) to the ep ranks holding their experts (loc: [ep][E / ep]
 * experts of each), and receive the rows of this rank's experts from every
 * ep rank into dst [rows, width], expert-major.
 */
int dist_ep_dispatch(struct dist *d, struct dist_ep *st, const int *offs,
		     const int *loc, const float *src, size_t width,
		     struct dist_fbuf *dst)
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
int dist_ep_combine(struct dist *d, struct dist_ep *st, const int *offs,
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

/* out[rows, oc] = in[rows, ic] w[j] for each local expert slot j of this
 * rank on its expert-major rows; w[j] at w + j ic oc (the rank holds its
 * E / ep experts only). One dense product per expert: the row offsets are
 * host numbers here, and a grouped product would want them in the ops'
 * memory. */
static void ep_matmul(const struct sigma_ops *o, const struct dist_ep *st,
		      int El, float *out, const float *in, const float *w,
		      size_t ic, size_t oc)
{
	for (int j = 0; j < El; j++) {
		size_t r0 = (size_t)st->roff[j];
		int rows = st->roff[j + 1] - st->roff[j];

		if (rows)
			o->matmul_forward(out + r0 * oc, in + r0 * ic,
					  w + (size_t)j * ic * oc, rows,
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
	int P = d->lp.ep, El = d->lp.E / P;
	int N = m->B * m->cfg.T, K = m->cfg.K;
	size_t D = (size_t)m->cfg.D, F = (size_t)m->cfg.F, rows;
	const int *loc = &d->ep_loc[(size_t)l * P * El];
	int rc;

	o->moe_gather(la->xe, la->m, la->perm, N, K, (int)D);
	if (d->ep_err)
		return;
	o->to_host(st->offs, la->offs, sizeof(int) * (size_t)(d->lp.E + 1));
	rc = dist_ep_route(d, st, loc);
	if (rc)
		goto fail;
	rows = (size_t)st->roff[El];
	rc = dist_ep_dispatch(d, st, st->offs, loc, la->xe, D, &st->xr);
	if (rc == 0 && (fbuf_grow(o, &st->h1, rows * F) ||
			fbuf_grow(o, &st->h3, rows * F) ||
			fbuf_grow(o, &st->hs, rows * F) ||
			fbuf_grow(o, &x->a, rows * D)))
		rc = -ENOMEM;
	if (rc)
		goto fail;
	ep_matmul(o, st, El, st->h1.p, st->xr.p, w->w1, D, F);
	ep_matmul(o, st, El, st->h3.p, st->xr.p, w->w3, D, F);
	o->swiglu_forward(st->hs.p, st->h1.p, st->h3.p, rows * F);
	ep_matmul(o, st, El, x->a.p, st->hs.p, w->w2, F, D);
	rc = dist_ep_combine(d, st, st->offs, loc, x->a.p, D, la->eo);
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
	int P = d->lp.ep, El = d->lp.E / P;
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
	rc = dist_ep_dispatch(d, st, st->offs, loc, a->deo, D, &x->a);
	if (rc)
		goto fail;
	for (int j = 0; j < El; j++) {
		size_t e = (size_t)j, r0 = (size_t)st->roff[j]; /* slot */
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
		size_t e = (size_t)j, r0 = (size_t)st->roff[j]; /* slot */
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
	rc = dist_ep_combine(d, st, st->offs, loc, x->b.p, D, a->dxe);
	if (rc == 0)
		return;
fail:
	d->ep_err = rc;
}

int dist_ep_attach(struct dist *d, struct model *m)
{
	int rc = ep_alloc(d);

	if (rc)
		return rc;
	d->experts.forward = ep_forward;
	d->experts.backward = ep_backward;
	d->experts.ctx = d;
	m->experts = &d->experts;
	return 0;
}

void dist_ep_fini(struct dist *d)
{
	if (d->ops)
		ep_free(d);
	free(d->ep_loc);
	d->ep_loc = NULL;
	layout_placement_fini(&d->pl);
}
