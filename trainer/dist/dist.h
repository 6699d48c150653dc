/*
 * dist.h - sigma-train as one rank of a job: the bootstrap (PMIx), the
 * layout (--dp --ep --pp --micro), the communicators, and what the training
 * loop needs from them:
 *
 *   dist_init -> dist_attach -> [ dist_sync_model ] -> per step:
 *       dist_step (the stage's forward and backward passes over its
 *                  micro-batches on the 1F1B schedule; experts through
 *                  all-to-all; with one stage and one micro-batch, gradient
 *                  buckets start as layers finish)
 *       -> dist_grad_finish (the rest, wait, average)
 *       -> dist_stage_mean (loss parts, stop flag)
 *   -> dist_fini
 *
 * A rank holds what it computes (model_shard, dist_shard_of): its stage's
 * layers, with the embedding on the first stage and the head on the last,
 * and of every MoE layer the E / ep experts of its ep rank. Gradients are
 * summed only over the ranks that hold the same tensor: the dense part of
 * the parameter block over the stage's data-parallel group, the experts
 * (with ep > 1) over the expert_dp group (same stage and ep rank), and no
 * collective carries a tensor that a rank does not hold. After the same
 * AdamW step every holder of a tensor has the same bits. The gradient norm
 * adds each distinct part once (the data-parallel rank 0 of a stage for
 * its dense part, the expert group 0 for the experts).
 *
 * Tensors (gradients, parameters at start-up, pipeline activations,
 * expert rows) travel where the model lives: with the CPU ops through the
 * MPI communicators, with a GPU's ops through NCCL communicators of the
 * same shape on the device the ops chose (made in dist_attach, the unique
 * id through PMIx). Counts, losses, flags and checkpoint copies are host
 * numbers and always take the MPI ones.
 *
 * A job of one process uses the self back end and costs nothing. Every
 * function that communicates returns 0 or -errno; -EIO and -ETIMEDOUT
 * mean a peer failed: the caller exits TRAIN_EXIT_PEER (76).
 *
 * Implemented in dist.c (boot, communicators, buckets, reductions),
 * dist_ep.c (the expert exchange), dist_move.c (experts changing ranks)
 * and dist_pipe.c (dist_step and dist_forward on the 1F1B schedule),
 * which share dist_impl.h.
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

/* values that may ride on the gradient norm's reduction */
#define DIST_RIDERS 8

/* Gradient bucket size in floats (16 MiB): big enough to reach the
 * back end's bandwidth, small enough to overlap with the backward pass. */
#define DIST_BUCKET_FLOATS ((size_t)4 << 20)

struct dist_ep;
struct dist_ep_scratch;

/* the kinds of collective a rank waits in, timed apart (the auto-tuner) */
enum dist_comm {
	DIST_C_ALLREDUCE, /* gradients, norms, losses, flags */
	DIST_C_ALLTOALL,  /* the expert exchange */
	DIST_C_PIPE,	  /* pipeline sends and receives */
	DIST_NCOMM
};

struct dist {
	struct boot boot;
	struct layout_params lp;
	struct layout_coords me;
	struct comm *world;
	struct comm *dp; /* data-parallel group (the world when pp = 1) */
	struct comm *ep; /* expert group (NULL when ep = 1) */
	struct comm *pp; /* pipeline: same dp_index, every stage (NULL: pp 1) */
	/* same stage and ep_rank: where expert gradients are summed (NULL:
	 * ep 1, or one expert group per stage) */
	struct comm *edp;
	/* the same groups for tensors in the ops' memory: the ones above
	 * (CPU ops), or NCCL twins of them (a model on a GPU: tworld is not
	 * world) */
	struct comm *tworld, *tdp, *tep, *tpp, *tedp;
	const struct sigma_ops *ops; /* the model's (dist_attach) */
	int rank, size;
	int micro; /* micro-batches per step on this rank */

	/* the stage's 1F1B schedule for one step */
	struct pipe_action *sched;
	size_t nsched;

	/* expert parallelism: placement, and per activation set and layer
	 * what the backward pass needs */
	struct layout_placement pl;
	int *ep_loc;	  /* [L][ep][E / ep] experts of each ep rank */
	struct dist_ep *ep_state; /* [micro][L] */
	struct dist_ep_scratch *ep_tmp;
	struct model_experts experts;
	int act;    /* activation set in use */
	int ep_err; /* an expert exchange failed */

	/* gradient buckets of the current backward pass */
	struct model *m;
	size_t bucket;	/* floats per bucket */
	size_t sent_to; /* grads [sent_to, nparams) are reduced or in flight */
	struct comm_request req;
	size_t req_floats; /* the bucket in flight */
	/* the buckets started in a backward pass and waited for later,
	 * since the start: how many, their floats, the time waited */
	struct dist_overlap {
		uint64_t waits, floats, ns;
	} ovl;
	int grad_err;
	int fwd_err;	  /* a forward-pass reduction failed */
	float *counts_f;  /* [L][E]: expert counts on the wire */
	int ncounts_f;
	struct comm_request creq; /* their sum, started (counts_start) */
	/* the tokens routed to each expert [L][E] of this stage's layers,
	 * the stage's (summed over dp), added up by forward passes while
	 * routed_on (the auto-tuner's placement; NULL: not counted) */
	float *routed;
	bool routed_on;
	uint64_t comm_ns; /* time spent waiting for communication */
	uint64_t comm_kind_ns[DIST_NCOMM]; /* the same, by kind */
	/* this rank's weight in the step's mean: its share of the batch
	 * over an even share (the auto-tuner's; 1 when even) */
	float weight;
	uint64_t buckets; /* buckets started in the last backward */
	/* the bucket probe's buffer, in the ops' memory (floats) */
	float *probe;
	size_t nprobe;
	/* dist_stage_mean_later: where the values go, how many (0: none) */
	double *riders;
	int nriders;

	/* --zero 1: the block sizes of the dense range over dp and of the
	 * experts over expert_dp (NULL: that range is not split) */
	size_t *zc[2];
};

/*
 * Boot, check the layout (dp, ep, pp against the job size and the model's
 * E and L, the global batch against dp), create the communicators and
 * start the watchdog. dp <= 0 means the job size. Returns 0, -EINVAL (a
 * layout that cannot work, err says why) or another -errno.
 */
int dist_init(struct dist *d, int dp, int ep, int pp, int micro, int E, int L,
	      long batch, char *err, size_t len);
void dist_fini(struct dist *d);
/*
 * dist_fini when every rank ends the same way (the run finished, or
 * stopped after its checkpoint): the teardown, then one last fence over
 * the job, so that the ranks leave within moments of each other. A rank
 * that exits non-zero (75) while its peers are still tearing down would
 * have srun --kill-on-bad-exit=1 terminate them, and the step would end
 * 143 instead of 75.
 */
void dist_end(struct dist *d);

/*
 * What rank holds in this layout (any rank of the job, not only this
 * one): experts[L * E / ep] receives the expert ids that s points to.
 */
void dist_shard_of(const struct dist *d, int rank, struct model_shard *s,
		   int *experts);
/*
 * The tensor table (no memory: model_create_layout) of what rank holds,
 * with m's configuration and kernels' name: for the checkpoint files of
 * another rank's part. 0 or -errno with err.
 */
int dist_part_of(const struct dist *d, const struct model *m, int rank,
		 struct model **out, char *err, size_t len);
/* Copy rank 0's parameters and AdamW moments, and state[n] bytes, to every
 * rank: a model held whole on every rank (m->sharded false) only. */
int dist_sync_model(struct dist *d, struct model *m, void *state, size_t n);
/* Rank 0's int to every rank. */
int dist_bcast_int(struct dist *d, int *v);
/* Rank 0's n bytes at buf to every rank. */
int dist_bcast_bytes(struct dist *d, void *buf, size_t n);

/* Hook the model's forward pass: expert token counts are summed over the
 * data-parallel ranks, so the load-balancing loss is the global batch's,
 * and with ep > 1 the experts run on their ep ranks. m must have micro
 * activation sets. With a model in device memory and several ranks, make
 * the NCCL communicators (-ENOTSUP in a build without NCCL). 0 or -errno,
 * err says why. */
int dist_attach(struct dist *d, struct model *m, char *err, size_t len);

/*
 * One step's passes on this rank: tok and tgt hold micro micro-batches of
 * m->B sequences each. Zeroes the gradients, then runs the stage's 1F1B
 * schedule; m->ce and m->aux are left as this rank's parts (means over the
 * micro-batches; ce 0 except on the last stage, aux over the stage's
 * layers), for dist_stage_mean. 0 or -errno of a failed transfer.
 */
int dist_step(struct dist *d, struct model *m, const int32_t *tok,
	      const int32_t *tgt);
/* The forward pass alone through every stage for one batch of m->B
 * sequences (activation set 0): m->ce is the last stage's, 0 elsewhere. */
int dist_forward(struct dist *d, struct model *m, const int32_t *tok,
		 const int32_t *tgt);
/* v[n] = sum over every rank / dp: the whole-model value of per-stage
 * parts, averaged over the data-parallel ranks. n <= 16. */
int dist_stage_mean(struct dist *d, double *v, int n);
/*
 * dist_stage_mean of v[n] (n <= DIST_RIDERS), carried by the next
 * gradient norm's reduction (model_grad_norm) instead of a message of its
 * own: v holds the result once the norm is computed. A step's losses and
 * stop flag cost no blocking message then, and on a link that is late
 * per message that is one wait less a step. 0 or -EINVAL (n).
 */
int dist_stage_mean_later(struct dist *d, double *v, int n);
/* v[n] = mean over every rank. n <= MODEL_MAX_L + 1. */
int dist_world_mean(struct dist *d, double *v, int n);
/* all[size * bytes]: every rank's mine[bytes], in rank order (host
 * memory, the world communicator). */
int dist_allgather(struct dist *d, const void *mine, size_t bytes, void *all);
/* *v = the largest *v over every rank. */
int dist_world_max(struct dist *d, double *v);
/* The error of the forward-pass reductions since the last call (0: none),
 * cleared. */
int dist_forward_error(struct dist *d);

/*
 * The auto-tuner's expert placement (dist_move.c): owner[L][E] becomes the
 * placement of every expert group. With data, every layer whose placement
 * changed moves its experts' parameters and AdamW moments to their new ep
 * ranks (one all-to-all over the ep group); without, only the tables
 * change (the slots already hold that placement: a tier-1 restore). Every
 * rank of the job calls it with the same owner. 0, -EINVAL (not a
 * placement, or ep 1), -ENOTSUP (--zero 1: the moments are split) or the
 * exchange's -errno (a peer failed).
 */
int dist_move_experts(struct dist *d, struct model *m, const int16_t *owner,
		      bool data);
/*
 * The tokens routed to each expert since the last call, of every layer
 * (each stage's, summed over the job in one all-reduce), into out[L][E]
 * on every rank; counting starts again. 0, -ENOMEM or -errno of the
 * exchange.
 */
int dist_routed_take(struct dist *d, float *out);

/* Hook the model's backward pass: buckets of finished gradients are
 * all-reduced while the pass goes on (one stage, one micro-batch). */
void dist_grad_begin(struct dist *d, struct model *m);
/* Reduce what is left, wait for every bucket, average over dp. */
int dist_grad_finish(struct dist *d);

/*
 * ZeRO-1 (dist_zero.c): with --zero 1 the AdamW moments of the dense
 * range are split over the stage's data-parallel group and those of the
 * experts over their expert_dp group. dist_zero_of sets this rank's
 * blocks in s (dist_shard_of's, for model_create_shard). After the
 * optimizer step (dist_grad_finish reduce-scatters instead of
 * all-reducing), dist_params_gather hands every block's new parameters to
 * every holder. dist_moments_gather fills fm and fv (host, m->nparams
 * floats each; NULL: a scratch of its own) with every moment of what this
 * rank holds, for a checkpoint: collective over the groups, 0 or -errno.
 */
void dist_zero_of(const struct dist *d, struct model_shard *s);
int dist_params_gather(struct dist *d, struct model *m);
int dist_moments_gather(struct dist *d, const struct model *m, float *fm,
			float *fv);

/* Bytes this rank has sent through all its communicators so far. */
uint64_t dist_bytes_sent(const struct dist *d);

/* Every rank waits for every other. */
int dist_barrier(struct dist *d);

/*
 * The auto-tuner's link probe (collective over the job): after a
 * barrier, every rank sends a small message to the next rank and
 * receives one from the one before, then the other way round, rounds
 * times each (the same on every rank), timed. A rank whose sends are slow is late both ways, its two
 * neighbours one way each, so *ns is the lesser of the two ways' least
 * times. 0 (and *ns 0) under 3 ranks, where
 * the two ways are the same pair.
 */
int dist_link_probe(struct dist *d, int rounds, double *ns);
/* what the bucket probe measured of the gradient's all-reduce */
struct dist_bucket_cost {
	double lat_ns;	/* one float: what every all-reduce costs */
	double byte_ns; /* the time per byte beyond that */
};
/*
 * The auto-tuner's bucket probe (collective over the data-parallel
 * group, on the gradient's communicator): after a barrier, an all-reduce
 * of one float and one of n, twice each, timed (the least of each). 0
 * (and c all 0) with one data-parallel rank, or -errno.
 */
int dist_bucket_probe(struct dist *d, size_t n, struct dist_bucket_cost *c);
/* the gradient's floats that leave in buckets during the backward pass
 * (m->ndense, or 0 where the layout sends them all after it) */
size_t dist_bucket_span(const struct dist *d, const struct model *m);

#endif /* SIGMA_TRAIN_DIST_H */
