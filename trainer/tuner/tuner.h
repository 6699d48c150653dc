/*
 * tuner.h - the auto-tuner (docs/tuner.md): every rank measures its compute
 * time and its time in each kind of collective per step; every K steps
 * (--tuner-every) the ranks share a summary (one small all-gather), and
 * every rank runs the same detection on the same numbers, so all take the
 * same decision at the same step without another message.
 *
 *   detection  per data-parallel rank, the median over a window of W
 *              exchanges (--tuner-window) of its compute time per
 *              sequence (its slowest pipeline stage), against the median
 *              over the ranks. A rank is slow when its median is above
 *              --tuner-slow times the ranks' median and above it by more
 *              than 3 of its own MADs (its noise); confirmed after C
 *              exchanges in a row (--tuner-confirm); cleared after C in a
 *              row below the middle of 1 and --tuner-slow.
 *   links      at each exchange every rank times a small message to each
 *              ring neighbour, one way round and then the other (the
 *              probe, dist_link_probe: 3 times each way while the window
 *              fills or a link's state may change, once when every link
 *              is settled, tuner_probe_rounds); a rank whose
 *              own sends are slow is late both ways, its neighbours one
 *              way each, so the lesser of the two is its link's time.
 *              Judged as compute is, over the same window, with a floor
 *              of TUNER_LINK_FLOOR.
 *   action     (--tuner on) the data-parallel shares: the sequences of each
 *              micro-batch of the global batch are split in proportion to
 *              the measured speeds, fewest for the slow rank, so that the
 *              slowest rank's time is least. The global batch, its order
 *              and the loss are unchanged: each rank's gradient is weighted
 *              by its share (tuner_weight), so the mean is over all
 *              sequences exactly. A slow link costs its rank a fixed time
 *              per step (its excess per message times the messages it
 *              sends a step), which the split adds to its compute time:
 *              with fewer sequences the rank reaches each collective
 *              sooner, and its held messages cost the others less.
 *   trial      every decision is a trial: once a window of W exchanges
 *              after it has measured the job's step time, a step more
 *              than 5% slower than before it reverts the shares, and the
 *              ranks it was for are left at even shares until they are
 *              no longer slow (a move that does not help is not kept).
 *   experts    (--tuner on, ep > 1) once a window of steps has counted
 *              the tokens routed to each expert (one extra all-reduce an
 *              exchange), the costliest ep rank of a layer (its tokens
 *              times its pace: a slow rank's is its slowdown) trades its
 *              hottest expert for a colder one of another rank, when that
 *              cuts the layer's highest cost by 10% (tuner_place.h);
 *              dist_move_experts moves their parameters and moments.
 *   buckets    (--tuner on, where the backward pass overlaps the
 *              gradient's all-reduce) once a window, the ranks time an
 *              all-reduce of one float and a large one; the bucket size
 *              whose predicted wait after the pass is least is taken on
 *              trial when it saves 5% of a step (tuner_comm.h).
 *   escalation (--tuner-escalate S) a rank still slow S seconds after its
 *              shares moved is reported once as an early warning for its
 *              node (tuner_escalate_due; slow_report.h), and sigmad's
 *              warning path moves the job off it.
 *   replay     --tuner-replay FILE applies the decisions a run printed
 *              ("tuner: step N: shares a,b,...", "... gradient buckets
 *              F floats", "... experts L:A-B,...") at the same steps, and
 *              decides nothing: a run that replays them is bitwise the
 *              same, resumed or not.
 *
 * The shares, placement and buckets in force are in the checkpoint
 * (tuner_state.h), so a resumed run goes on with them.
 */
#ifndef SIGMA_TRAIN_TUNER_H
#define SIGMA_TRAIN_TUNER_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dist.h" /* enum dist_comm: the kinds of collective */
#include "tuner_place.h"
#include "tuner_state.h"

enum tuner_mode { TUNER_OFF, TUNER_OBSERVE, TUNER_ON };

struct tuner_config {
	int mode;     /* enum tuner_mode (--tuner off|observe|on) */
	int every;    /* K: steps per exchange (4) */
	int window;   /* W: exchanges in the median window (5) */
	int confirm;  /* C: exchanges in a row to confirm or clear (2) */
	double slow;  /* a rank is slow above this ratio to the median (1.25) */
	int escalate; /* seconds slow after a rebalance to escalate; 0 never */
	char replay[PATH_MAX]; /* --tuner-replay: decisions to apply */
};

/* one rank's summary since the last exchange (what the ranks share) */
struct tuner_sample {
	double dp_index;
	double seqs;	    /* sequences it computed */
	double compute_ns;  /* forward and backward, waits excluded */
	double comm_ns[DIST_NCOMM];
	double steps;	    /* steps it measured */
	/* their wall time, all of each step: from the last exchange (or the
	 * loop's start) to this one, the gradient norm, the update, the
	 * checkpoints and the probes included */
	double step_ns;
	double messages;    /* messages it sent to peers in them */
	double probe_ns;    /* its link probe (0: none) */
	/* the bucket probe (dist_bucket_probe; all 0: none this exchange) */
	struct dist_bucket_cost ar;
	/* the buckets waited for after they had the backward pass's time
	 * to move (struct dist_overlap): how many, floats, ns waited */
	double ovl_waits, ovl_floats, ovl_ns;
};

/* a link is slow only when its probe is late by more than this (ns):
 * less costs under a millisecond a step at a few messages a step */
#define TUNER_LINK_FLOOR 100000.0

/* a decision of --tuner-replay: from step + 1 on, these shares or
 * (bucket > 0) gradient buckets of that many floats, or (in mplan) the
 * experts' swaps of text, parsed by tuner_place_init */
struct tuner_plan {
	long step;
	int *shares;
	long bucket;
	char *text;
	struct tuner_swap *swaps;
	int nswaps;
};

/* a decision on trial (each rung has one): the job's step times since
 * it ([W] ns, a ring of n at head) and their median before it; 0: none
 * on trial */
struct tuner_trial {
	double *win;
	int n, head;
	double before_ns;
};

/*
 * One measure judged per data-parallel rank (compute time per sequence,
 * or the link probe): its window ([W][dp], a ring at the tuner's head),
 * exchanges in a row slow (> 0) or not (< 0), confirmed slow, what the
 * shares were made from (a speed ratio, or a link's excess time per step
 * in even-share sequences), the world rank behind each rank's figure
 * (its slowest stage), and the rank slowest at the last exchange (-1:
 * none yet) with its figure over the ranks' median.
 */
struct tuner_watch {
	double *win;
	int *streak;
	bool *slow;
	double *basis;
	int *blame;
	int worst;
	double worst_x;
};

/* rung 1: the data-parallel shares, made from the speed and the links */
struct tuner_shares {
	int *n;		/* [dp] sequences per micro-batch in force */
	int *offs;	/* [dp] where each rank's sequences start */
	struct tuner_watch speed;
	/* the decision on trial, the shares and the bases (speeds, then
	 * links) before it; no_help: ranks whose move was reverted */
	struct tuner_trial trial;
	int *prev;
	double *prev_basis;
	bool *no_help;
	/* escalation: when each slow rank's shares last moved (monotonic
	 * seconds; 0: not since it became slow), whether it was reported,
	 * and the data-parallel rank to report now (-1: none) */
	double *moved_at;
	bool *escalated;
	int escalate;
};

/* the links, the shares' second input: the probe's watch and each
 * rank's messages per step at the last exchange */
struct tuner_links {
	struct tuner_watch probe;
	double *msgs;
};

/*
 * Rung 2: the experts (tuner_place.c; ep 0: not placed). L layers of E
 * over ep ranks, the ep rank of each data-parallel rank, the placement
 * in force [L][E], the tokens routed to each expert since the last
 * decision [L][E] over lsteps steps, each rank's pace at the last
 * exchange (its time per sequence over the median; 1: not slow), the
 * swaps since the run began, and whether they may move at all (not
 * with split moments). The move on trial and its swaps (ntried 0: none
 * on trial); exchanges left before another move after a revert.
 */
struct tuner_experts {
	int L, E, ep;
	int *ep_of;
	int16_t *owner;
	double *load, *pace;
	int lsteps, moves;
	bool fixed;
	struct tuner_trial trial;
	int ntried, cool;
	struct tuner_swap *tried;
};

/*
 * Rung 3: the gradient buckets (tuner_comm.c). Floats per bucket in
 * force and the options', the gradient that leaves in buckets during the
 * backward pass (0: none, nothing to choose), exchanges before the next
 * probe, whether this exchange probes, the bucket before the one on
 * trial, its trial, exchanges left before another after a revert, and
 * the bounds reverts set (tuner_comm_in.lo, hi).
 */
struct tuner_buckets {
	long now, opts, span;
	int wait, cool;
	bool probe;
	long prev, lo, hi;
	struct tuner_trial trial;
};

/* --tuner-replay: the shares' and buckets' decisions and the experts'
 * moves, each in step order, and the next of each due */
struct tuner_replay {
	struct tuner_plan *plan;
	size_t nplan, next;
	struct tuner_plan *mplan;
	size_t nmplan, mnext;
};

struct tuner {
	struct tuner_config cfg;
	int dp, B, Bmax; /* ranks, sequences per micro-batch: even, most */
	int micro;	 /* micro-batches per step (1 until told) */
	struct tuner_sample mine; /* this rank since the last exchange */
	uint64_t since_ns; /* when mine's steps began (monotonic) */
	int nwin, head;	   /* the watches' window: exchanges held, ring */
	double step_ns;	   /* the job's step time at the last exchange */
	double cc[DIST_NCOMM]; /* compute / communication per kind, or 0 */
	int decisions;
	struct tuner_shares shares;
	struct tuner_links links;
	struct tuner_experts experts;
	struct tuner_buckets buckets;
	struct tuner_replay replay;
	struct tuner_state st; /* the log, for the checkpoint */
};

void tuner_config_default(struct tuner_config *c);
/* mode names for --tuner, NULL-terminated */
extern const char *const tuner_modes[];

/*
 * Equal shares of B sequences for dp ranks; Bmax the most one rank may
 * take (its activations are sized for it). Reads --tuner-replay. 0 or
 * -errno with err.
 */
int tuner_init(struct tuner *tu, const struct tuner_config *cfg, int dp,
	       int B, int Bmax, char *err, size_t len);
void tuner_fini(struct tuner *tu);
/* the most sequences a rank's micro-batch holds under cfg */
int tuner_bmax(const struct tuner_config *cfg, int B);

/* the shares a checkpoint held: 0, or -EINVAL with err (kept as they were) */
int tuner_import(struct tuner *tu, const struct tuner_state *st, char *err,
		 size_t len);
void tuner_export(const struct tuner *tu, struct tuner_state *st);

/* rank r's sequences per micro-batch, where they start in it, its weight
 * in the mean (dp * share / the batch's sequences; 1 for equal shares) */
static inline int tuner_share(const struct tuner *tu, int r)
{
	return tu->shares.n[r];
}
static inline int tuner_offset(const struct tuner *tu, int r)
{
	return tu->shares.offs[r];
}
double tuner_weight(const struct tuner *tu, int r);

/* what a rank measured of one step */
struct tuner_step {
	int dp_index;
	int seqs;	     /* sequences it computed */
	uint64_t compute_ns; /* forward and backward, waits excluded */
	uint64_t comm_ns[DIST_NCOMM];
	uint64_t messages;   /* sent to peers */
	struct dist_overlap ovl; /* its gradient buckets' waits */
};
/* this rank's step: what it measured */
void tuner_record(struct tuner *tu, const struct tuner_step *st);
/* the loop's first step starts: the steps' wall time counts from here */
void tuner_clock_start(struct tuner *tu);

/*
 * What the tuner needs of the job after a step: the collectives, which
 * every rank calls alike, and the experts' move. Each returns 0, or a
 * code of the caller's (-errno, or its own exit code) that
 * tuner_after_step returns as it is. ranks: the job's ranks, whose
 * summaries gather returns in all[ranks].
 */
struct tuner_ops {
	void *ctx;
	int ranks;
	/* time rounds small messages each way round the ring: *ns */
	int (*link_probe)(void *ctx, int rounds, double *ns);
	/* time an all-reduce of one float and one of floats: *cost */
	int (*bucket_probe)(void *ctx, long floats,
			    struct dist_bucket_cost *cost);
	/* every rank's summary to every rank */
	int (*gather)(void *ctx, const struct tuner_sample *mine,
		      struct tuner_sample *all);
	/* the tokens routed to each expert since the last call, the job's:
	 * load[L][E] */
	int (*routed)(void *ctx, float *load);
	/* the placement changed (tuner_owner): move the experts */
	int (*move_experts)(void *ctx);
};

/* what the step's call leaves to the caller (the shares and buckets it
 * decided are in force from the next step: tuner_share, tuner_bucket) */
struct tuner_actions {
	bool exchanged;	  /* the ranks' summaries were shared */
	int escalate;	  /* the job's rank to report as slow, or -1 */
	char why[160];	  /* what was measured of it */
};

/*
 * The tuner after step done, on every rank alike: the replayed decisions
 * due, and every K steps the probes, the summaries, and what the rungs
 * decide from them (shares, links, experts, buckets), in that order; a
 * line "tuner: step N: ..." tells each decision (printed when print).
 * Returns 0, -ENOMEM, or the first non-zero return of an op (nothing
 * after it is done).
 */
int tuner_after_step(struct tuner *tu, long done, const struct tuner_ops *ops,
		     bool print, struct tuner_actions *act);

/*
 * The experts' placement (tuner_place.c), with ep > 1: E experts of L
 * layers over ep ranks, ep_of[dp] the ep rank of each data-parallel rank,
 * owner[L][E] the layout's placement; fixed: they may not move (split
 * moments). Parses the replayed moves. 0, or -EINVAL / -ENOMEM with err.
 */
int tuner_place_init(struct tuner *tu, int L, int E, int ep, const int *ep_of,
		     const int16_t *owner, bool fixed, char *err, size_t len);
/* the tuner may move experts (every rank answers alike) */
bool tuner_place_wants(const struct tuner *tu);
/* the moves a checkpoint held (tuner_state.moves) into the placement and
 * the log: 0 (none: 0 too), or -EINVAL with err */
int tuner_place_import(struct tuner *tu, const char *moves, char *err,
		       size_t len);
/* the placement in force [L][E], and the swaps made since the run began */
static inline const int16_t *tuner_owner(const struct tuner *tu)
{
	return tu->experts.owner;
}
static inline int tuner_swaps(const struct tuner *tu)
{
	return tu->experts.moves;
}
/* --tuner-replay moves experts */
static inline bool tuner_replays_moves(const struct tuner *tu)
{
	return tu->replay.nmplan > 0;
}

/*
 * The gradient buckets (tuner_comm.c): bucket the floats per bucket the
 * options give, span the gradient that leaves in buckets during the
 * backward pass (dist_bucket_span; 0: none). Call after tuner_init.
 */
void tuner_comm_init(struct tuner *tu, long bucket, long span);
/* floats per gradient bucket in force */
static inline long tuner_bucket(const struct tuner *tu)
{
	return tu->buckets.now;
}
/* micro-batches per step (1 until told): a slow link's time per step is
 * weighed against the sequences of all of them */
static inline void tuner_set_micro(struct tuner *tu, int micro)
{
	tu->micro = micro;
}

/* the tuner's state for the progress line: " tuner on slowest 3 1.98x ..." */
void tuner_describe(const struct tuner *tu, char *buf, size_t len);
/* the metrics file's tuner columns (",slowest,ratio,cc_ar,cc_a2a,cc_pp,
 * decisions"; the first five empty until the first full window) */
void tuner_columns(const struct tuner *tu, char *buf, size_t len);

#endif /* SIGMA_TRAIN_TUNER_H */
