/*
 * dist.h - sigma-train as one rank of a job: the bootstrap (PMIx), the
 * layout (--dp), the world and data-parallel communicators, and what the
 * training loop needs from them:
 *
 *   dist_init -> [ dist_sync_model ] -> per step:
 *       dist_grad_begin -> model_backward (buckets start as layers finish)
 *       -> dist_grad_finish (the rest, wait, average)
 *       -> dist_reduce_scalars (loss, stop flag)
 *   -> dist_fini
 *
 * Gradients, counts and scalars are reduced in host memory through the MPI
 * back end: the model must run on the CPU ops (sigma_ops_cpu), as
 * sigma-train does; the NCCL back end is for device-resident tensors.
 *
 * A job of one process uses the self back end and costs nothing. Every
 * function that communicates returns 0 or -errno; -EIO and -ETIMEDOUT
 * mean a peer failed: the caller exits TRAIN_EXIT_PEER (76).
 */
#ifndef SIGMA_TRAIN_DIST_H
#define SIGMA_TRAIN_DIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "boot.h"
#include "comm.h"
#include "layout.h"
#include "model.h"

/* Gradient bucket size in floats (16 MiB): big enough to reach the
 * back end's bandwidth, small enough to overlap with the backward pass. */
#define DIST_BUCKET_FLOATS ((size_t)4 << 20)

struct dist {
	struct boot boot;
	struct layout_params lp;
	struct layout_coords me;
	struct comm *world;
	struct comm *dp; /* data-parallel group (the world when pp = 1) */
	int rank, size;

	/* gradient buckets of the current backward pass */
	struct model *m;
	size_t bucket;	/* floats per bucket */
	size_t sent_to; /* grads [sent_to, nparams) are reduced or in flight */
	struct comm_request req;
	int grad_err;
	int fwd_err;	  /* a forward-pass reduction failed */
	uint64_t comm_ns; /* time spent waiting for communication */
	uint64_t buckets; /* buckets started in the last backward */
};

/*
 * Boot, check the layout (dp, ep, pp against the job size and the model's
 * E and L, the global batch against dp), create the communicators and
 * start the watchdog. dp <= 0 means the job size. Returns 0, -EINVAL (a
 * layout that cannot work, err says why) or another -errno.
 */
int dist_init(struct dist *d, int dp, int ep, int pp, int E, int L, long batch,
	      char *err, size_t len);
void dist_fini(struct dist *d);

/* Copy rank 0's parameters and AdamW moments, and state[n] bytes, to every
 * rank. */
int dist_sync_model(struct dist *d, struct model *m, void *state, size_t n);
/* Rank 0's int to every rank. */
int dist_bcast_int(struct dist *d, int *v);

/* Hook the model's forward pass: expert token counts are summed over the
 * data-parallel ranks, so the load-balancing loss is the global batch's. */
void dist_attach(struct dist *d, struct model *m);
/* The error of the forward-pass reductions since the last call (0: none),
 * cleared. */
int dist_forward_error(struct dist *d);

/* Hook the model's backward pass: buckets of finished gradients are
 * all-reduced while the pass goes on. */
void dist_grad_begin(struct dist *d, struct model *m);
/* Reduce what is left, wait for every bucket, average over dp. */
int dist_grad_finish(struct dist *d);

/* v[n] = mean over the data-parallel ranks (sum / dp) of v[n]. */
int dist_mean(struct dist *d, double *v, int n);
/* Every rank waits for every other. */
int dist_barrier(struct dist *d);

#endif /* SIGMA_TRAIN_DIST_H */
