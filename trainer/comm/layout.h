/*
 * layout.h - parallel layouts of sigma-train, as pure functions: no
 * communication, no allocation except where a function says so.
 *
 * A layout is data parallel (dp) x pipeline parallel (pp) ranks, with
 * expert groups of ep ranks inside each data-parallel group:
 *
 *   world = dp * pp
 *   rank  = stage * dp + dp_index            stage in [0, pp), stage-major
 *   dp_index = ep_group * ep + ep_rank        ep_group in [0, dp / ep)
 *
 * so the ranks of one data-parallel group (and of one expert group, which
 * carries the heavy all-to-all) are consecutive: with ranks packed on nodes
 * by srun, they share a node when they fit. Pipeline neighbours are dp ranks
 * apart and exchange only one activation tensor per micro-batch.
 *
 * Experts of every MoE layer are sharded over the ep ranks of an expert
 * group (E / ep experts each, by the placement table); every expert group
 * holds all E experts, and the replicas of one expert in the dp / ep expert
 * groups of a stage average their gradients (the EXPERT_DP group). Layers
 * are split evenly over the stages (L / pp each).
 *
 * Functions that check return 0 or -EINVAL and write why into err.
 */
#ifndef SIGMA_COMM_LAYOUT_H
#define SIGMA_COMM_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#define LAYOUT_MAX_RANKS   65536
#define LAYOUT_MAX_EXPERTS 4096
#define LAYOUT_MAX_LAYERS  4096

/* What a layout is asked for, and what it must fit. */
struct layout_params {
	int world;	/* ranks in the job (PMIx job size) */
	int dp, ep, pp; /* --dp --ep --pp */
	int E;		/* experts per MoE layer */
	int L;		/* layers */
	/* optional (0: not checked): global batch in sequences per step and
	 * micro-batches per step and rank */
	long batch;
	int micro;
};

/* One rank's place in a checked layout. */
struct layout_coords {
	int rank;
	int stage;	 /* pipeline stage, [0, pp) */
	int dp_index;	 /* index in the stage's data-parallel group, [0, dp) */
	int ep_group;	 /* expert group within the stage, [0, dp / ep) */
	int ep_rank;	 /* index within the expert group, [0, ep) */
	int layer_first; /* first layer of the stage */
	int layer_count; /* L / pp */
};

/* The communicators a layout needs; each rank is in exactly one of each. */
enum layout_group {
	LAYOUT_GROUP_DP, /* the dp ranks of a stage: dense gradients */
	LAYOUT_GROUP_EP, /* the ep ranks of an expert group: all-to-all */
	LAYOUT_GROUP_EXPERT_DP, /* same stage and ep_rank: expert gradients */
	LAYOUT_GROUP_PP,	/* same dp_index, every stage: the pipeline */
	LAYOUT_GROUP_COUNT,
};

/* "dp", "ep", "expert_dp", "pp" */
const char *layout_group_name(enum layout_group g);

/*
 * Check p: every number in range, dp * pp == world, ep divides dp, E
 * divisible by ep, L divisible by pp (at least one layer per stage), and,
 * when set, batch divisible by dp and the per-rank batch by micro.
 */
int layout_check(const struct layout_params *p, char *err, size_t len);

/* Coordinates of rank in a checked layout; -EINVAL for a bad rank. */
int layout_coords(const struct layout_params *p, int rank,
		  struct layout_coords *c);
/* The rank at (stage, dp_index); -EINVAL when out of range. */
int layout_rank_of(const struct layout_params *p, int stage, int dp_index);

/*
 * Color and key that split the world communicator into group g: ranks
 * with the same color form one group, ordered by key (the rank's index in
 * the group).
 */
int layout_group_split(const struct layout_params *p, int rank,
		       enum layout_group g, int *color, int *key);
/* Size of group g. */
int layout_group_size(const struct layout_params *p, enum layout_group g);
/*
 * World ranks of rank's group g, in key order, into members[max]; returns
 * the count or -EINVAL (max too small, bad rank).
 */
int layout_group_members(const struct layout_params *p, int rank,
			 enum layout_group g, int *members, int max);

/* ---- expert placement --------------------------------------------------- */

/*
 * Which ep_rank of an expert group holds each expert of each layer; the
 * same in every expert group and every stage (a stage reads the rows of
 * its own layers). Every ep_rank holds exactly E / ep experts of a layer,
 * so every rank's expert tensors have the same shape. The trainer keeps it
 * and checkpoints it; the auto-tuner may move experts between ep ranks.
 */
struct layout_placement {
	int L, E, ep;
	int16_t *owner; /* [L, E]: ep_rank holding expert e of layer l */
};

/* Contiguous blocks: experts [r E/ep, (r+1) E/ep) on ep_rank r. Allocates. */
int layout_placement_init(struct layout_placement *pl, int L, int E, int ep,
			  char *err, size_t len);
void layout_placement_fini(struct layout_placement *pl);
/* Every owner in [0, ep) and E / ep experts per ep_rank in every layer. */
int layout_placement_check(const struct layout_placement *pl, char *err,
			   size_t len);
/* ep_rank holding expert e of layer l, or -EINVAL. */
int layout_placement_owner(const struct layout_placement *pl, int l, int e);
/*
 * Experts of layer l held by ep_rank, ascending (that is the order of the
 * rank's local expert slots), into experts[max]; returns the count (E / ep).
 */
int layout_placement_local(const struct layout_placement *pl, int l,
			   int ep_rank, int *experts, int max);
/*
 * Serialise as key=value lines ("L=2", "E=8", "ep=2",
 * "layer.0=0,0,0,0,1,1,1,1", ...) into a new NUL-terminated string (the
 * caller frees *out). Returns 0 or -ENOMEM.
 */
int layout_placement_format(const struct layout_placement *pl, char **out);
/* Parse what layout_placement_format wrote, strictly; allocates pl. */
int layout_placement_parse(struct layout_placement *pl, const char *text,
			   char *err, size_t len);

/* ---- 1F1B pipeline schedule -----------------------------------------------
 */

/*
 * The actions of one stage for one step of m micro-batches, in order. The
 * non-interleaved 1F1B schedule: min(pp - stage - 1, m) warm-up forwards,
 * then one forward and one backward in turn, then the remaining backwards,
 * so at most pp - stage micro-batches are in flight on a stage.
 *
 * Transfers between neighbours are part of the schedule so that every stage
 * posts them in an order that cannot deadlock even with synchronous sends:
 * in the steady phase a send and the next receive go to one peer together
 * (SEND_ACT_RECV_GRAD, SEND_GRAD_RECV_ACT: one sendrecv). The first stage
 * has no RECV_ACT / SEND_GRAD, the last no SEND_ACT / RECV_GRAD; with one
 * stage the schedule is m forwards each followed by its backward.
 */
enum pipe_op {
	PIPE_FWD,	/* forward of micro */
	PIPE_BWD,	/* backward of micro */
	PIPE_RECV_ACT,	/* receive micro's input activation from stage - 1 */
	PIPE_SEND_ACT,	/* send micro's output activation to stage + 1 */
	PIPE_RECV_GRAD, /* receive micro's output gradient from stage + 1 */
	PIPE_SEND_GRAD, /* send micro's input gradient to stage - 1 */
	PIPE_SEND_ACT_RECV_GRAD, /* to/from stage + 1: act of micro, grad of
				    micro2 */
	PIPE_SEND_GRAD_RECV_ACT, /* to/from stage - 1: grad of micro, act of
				    micro2 */
};

struct pipe_action {
	enum pipe_op op;
	int micro;  /* the computed or sent micro-batch */
	int micro2; /* the received micro-batch of a fused op, else -1 */
};

/* "fwd", "bwd", "recv_act", ... */
const char *pipe_op_name(enum pipe_op op);

/* Upper bound of the actions of any stage for m micro-batches: 6 m. */
size_t pipe_schedule_max(int micro);
/*
 * Fill out[max] with stage's schedule; *n gets the count. -EINVAL when
 * stage, stages or micro is out of range, -ENOSPC when max is too small.
 */
int pipe_schedule_1f1b(int stage, int stages, int micro,
		       struct pipe_action *out, size_t max, size_t *n);

/* ---- gradient buckets -----------------------------------------------------
 */

/*
 * The backward pass reports the gradients [off, n) final at offsets (in
 * floats) ready[0] > ready[1] > ... > ready[k - 1] = 0: the head first,
 * then each layer from the last, the embedding last. A bucket [off,
 * sent_to) is started as soon as at least `bucket` floats are final and
 * not yet started (layout_bucket_due); what remains after the last report
 * is the last bucket. The data-parallel trainer follows exactly this rule.
 */
struct layout_bucket {
	size_t off, len; /* floats [off, off + len) */
};

static inline int layout_bucket_due(size_t sent_to, size_t off,
				    size_t bucket)
{
	return off < sent_to && sent_to - off >= bucket;
}

/*
 * The buckets of n gradients reported at ready[k], in the order they
 * start, into out[max]; returns their count, -EINVAL (bucket 0, offsets
 * not strictly decreasing, above n, or not ending at 0) or -ENOSPC.
 */
int layout_bucket_plan(size_t n, const size_t *ready, size_t k, size_t bucket,
		       struct layout_bucket *out, size_t max);

#endif /* SIGMA_COMM_LAYOUT_H */
