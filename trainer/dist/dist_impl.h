/*
 * dist_impl.h - what the three files of the distributed trainer share
 * behind dist.h: dist.c (boot, communicators, gradient buckets, scalar
 * reductions), dist_ep.c (expert parallelism) and dist_pipe.c (the 1F1B
 * pipeline schedule). Not a contract for the rest of the trainer; the
 * expert exchange's steps are here so that a unit test can drive them
 * over the self back end.
 */
#ifndef SIGMA_TRAIN_DIST_IMPL_H
#define SIGMA_TRAIN_DIST_IMPL_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "dist.h"

static inline uint64_t dist_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* a wait in a collective of kind k that began at t0 is over */
static inline void dist_comm_done(struct dist *d, enum dist_comm k,
				  uint64_t t0)
{
	uint64_t dt = dist_now_ns() - t0;

	d->comm_ns += dt;
	d->comm_kind_ns[k] += dt;
}

/* ---- dist_zero.c --------------------------------------------------------- */

/* the block sizes of a model whose moments are split: 0 or -ENOMEM */
int dist_zero_attach(struct dist *d, struct model *m);
void dist_zero_fini(struct dist *d);
/* each rank's block of the gradients summed over its group, / dp */
int dist_zero_reduce(struct dist *d, struct model *m);

/* ---- dist_ep.c ---------------------------------------------------------- */

/* A buffer of floats in the ops' memory that only grows. */
struct dist_fbuf {
	float *p;
	size_t cap; /* floats */
};

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
	struct dist_fbuf xr, h1, h3, hs; /* [rows, D], [rows, F] x 3 */
};

struct dist_ep_scratch {
	struct dist_fbuf sbuf, rbuf; /* rows in peer order, as exchanged */
	struct dist_fbuf a, b;	     /* [rows, D] */
	struct dist_fbuf dhs, dh1, dh3; /* [rows, F] */
	int *scnt;			/* [ep][E / ep] */
	size_t *sc, *sd, *rc, *rd;	/* [ep] */
};

/* The expert placement and each ep rank's experts (d->ep_loc); nothing
 * with ep = 1. 0 or -errno, err says why. */
int dist_ep_plan(struct dist *d, char *err, size_t len);
/* Each ep rank's experts (d->ep_loc) from the placement d->pl: 0, or
 * -(l + 1) when layer l does not give every ep rank E / ep experts. */
int dist_ep_locate(struct dist *d);
/* The per-layer state of every activation set, and the model's expert
 * hooks pointed at this rank's experts. 0 or -ENOMEM. */
int dist_ep_attach(struct dist *d, struct model *m);
/* Free what dist_ep_plan and dist_ep_attach made. */
void dist_ep_fini(struct dist *d);

/*
 * The steps of one layer's exchange (loc: [ep][E / ep] experts of each ep
 * rank). route: from st->offs (this rank's expert-sorted routing offsets)
 * the rows every ep rank sends for each of this rank's experts, into
 * st->rcnt and st->roff. dispatch: this rank's rows src [NK, width] to the
 * ep ranks of their experts, and their rows for this rank's experts into
 * dst [rows, width], expert-major. combine: the way back, src [rows,
 * width] expert-major to dst [NK, width] in this rank's expert-sorted
 * order. 0 or -errno of the exchange.
 */
int dist_ep_route(struct dist *d, struct dist_ep *st, const int *loc);
int dist_ep_dispatch(struct dist *d, struct dist_ep *st, const int *offs,
		     const int *loc, const float *src, size_t width,
		     struct dist_fbuf *dst);
int dist_ep_combine(struct dist *d, struct dist_ep *st, const int *offs,
		    const int *loc, const float *src, size_t width,
		    float *dst);

/* ---- dist_pipe.c -------------------------------------------------------- */

/* The stage's 1F1B schedule (d->sched); 0 or -errno, err says why. */
int dist_pipe_plan(struct dist *d, char *err, size_t len);
void dist_pipe_fini(struct dist *d);

#endif /* SIGMA_TRAIN_DIST_IMPL_H */
