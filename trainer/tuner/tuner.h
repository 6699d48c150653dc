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
 *              way each, so the lesser of the two is its link's time. Judged as compute
 *              is, over the same window, with a floor of TUNER_LINK_FLOOR.
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

struct tuner {
	struct tuner_config cfg;
	int dp, B, Bmax; /* ranks, sequences per micro-batch: even, most */
	int micro;	 /* micro-batches per step (1 until told) */
	int *shares;	 /* [dp] in force */
	int *offs;	 /* [dp] where each rank's sequences start */
	struct tuner_sample mine; /* this rank since the last exchange */
	uint64_t since_ns; /* when mine's steps began (monotonic) */
	/* the window: [W][dp] ns per sequence, ring at head, nwin held */
	double *win;
	int nwin, head;
	int *streak;   /* [dp] > 0: exchanges in a row slow, < 0: not */
	bool *slow;    /* [dp] confirmed slow */
	double *basis; /* [dp] the speed ratios the shares were made from */
	/* the links: [W][dp] probe ns, streaks, confirmed slow, the excess
	 * time per step (in even-share sequences) the shares were made
	 * from, and messages per step at the last exchange */
	double *lwin;
	int *lstreak;
	bool *lslow;
	double *lbasis, *msgs;
	/* the trial of the last decision, the shares and the bases (speeds,
	 * then links) before it. no_help: ranks whose move was reverted */
	struct tuner_trial strial;
	int *prev_shares;
	double *prev_basis;
	bool *no_help;
	/* the world rank behind each data-parallel rank's figure (its
	 * slowest stage), compute and link, at the last exchange */
	int *blame, *lblame;
	/* escalation: when each slow rank's shares last moved (monotonic
	 * seconds; 0: not since it became slow), and whether it was
	 * reported */
	double *moved_at;
	bool *escalated;
	int escalate; /* the data-parallel rank to report now, or -1 */

	/* the last exchange, for the progress line */
	int slowest;
	double slowest_x; /* its time per sequence / the median */
	int slowlink;	  /* the latest probe, or -1 */
	double slowlink_x; /* its probe / the median */
	double step_ns;	   /* the job's step time at the last exchange */
	double cc[DIST_NCOMM]; /* compute / communication per kind, or 0 */
	int decisions;
	struct tuner_plan *plan; /* --tuner-replay, in step order */
	size_t nplan, next;
	/* the experts (tuner_place.c; ep 0: not placed): L layers of E over
	 * ep ranks, the ep rank of each data-parallel rank, the placement
	 * in force [L][E], the tokens routed to each expert since the last
	 * decision [L][E] over lsteps steps, each rank's pace at the last
	 * exchange (its time per sequence over the median; 1: not slow),
	 * the replayed moves, in step order, and the next due */
	int L, E, ep;
	int *ep_of;
	int16_t *owner;
	double *load, *pace;
	int lsteps, moves;
	bool place_fixed; /* the experts may not move (--zero 1) */
	/* the trial of the last move, its swaps (ntried 0: none on trial);
	 * exchanges left before another move after a revert */
	struct tuner_trial ptrial;
	int ntried, pcool;
	struct tuner_swap *tried;
	struct tuner_plan *mplan;
	size_t nmplan, mnext;
	/* the gradient buckets (tuner_comm.c): floats per bucket in force
	 * and the options', the gradient that leaves in buckets during the
	 * backward pass (0: none, nothing to choose), exchanges before the
	 * next probe, whether this exchange probes, the bucket before the
	 * one on trial, its trial, exchanges left before another after a
	 * revert, and the bounds reverts set (tuner_comm_in.lo, hi) */
	long bucket, bucket0, span;
	int cwait, ccool;
	bool cprobe;
	long cprev, clo, chi;
	struct tuner_trial ctrial;
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
	return tu->shares[r];
}
static inline int tuner_offset(const struct tuner *tu, int r)
{
	return tu->offs[r];
}
double tuner_weight(const struct tuner *tu, int r);

/* this rank's step: what it measured */
/* what a rank measured of one step */
struct tuner_step {
	int dp_index;
	int seqs;	     /* sequences it computed */
	uint64_t compute_ns; /* forward and backward, waits excluded */
	uint64_t comm_ns[DIST_NCOMM];
	uint64_t messages;   /* sent to peers */
	struct dist_overlap ovl; /* its gradient buckets' waits */
};
void tuner_record(struct tuner *tu, const struct tuner_step *st);
/* the loop's first step starts: the steps' wall time counts from here */
void tuner_clock_start(struct tuner *tu);
/* before the summary is shared: its steps' wall time, up to now */
void tuner_clock_seal(struct tuner *tu);
/* an exchange is due after step done */
bool tuner_due(const struct tuner *tu, long done);

/*
 * The ranks' summaries all[n] of the exchange after step done: detect,
 * and (--tuner on) decide, or apply the replayed decision due. Returns
 * true when the shares changed (they hold from step done + 1); a line
 * "tuner: step N: ..." tells it. Every rank calls it with the same
 * numbers and takes the same decision.
 */
bool tuner_exchange(struct tuner *tu, const struct tuner_sample *all,
		    size_t n, long done, bool print);
/*
 * After an exchange: the data-parallel rank that stayed slow (compute or
 * link) --tuner-escalate seconds after its shares moved, once per
 * slowdown, or -1; *world the rank of the job that is its slowest stage,
 * why[len] what was measured. Each rank keeps its own clock: only *world
 * acts on it.
 */
int tuner_escalate_due(struct tuner *tu, int *world, char *why, size_t len);
/* a replayed decision after step done (no exchange needed) */
bool tuner_replay_due(struct tuner *tu, long done, bool print);

/*
 * The experts' placement (tuner_place.c), with ep > 1: E experts of L
 * layers over ep ranks, ep_of[dp] the ep rank of each data-parallel rank,
 * owner[L][E] the layout's placement. Parses the replayed moves. 0, or
 * -EINVAL / -ENOMEM with err.
 */
int tuner_place_init(struct tuner *tu, int L, int E, int ep, const int *ep_of,
		     const int16_t *owner, char *err, size_t len);
/* this exchange wants the tokens routed to each expert (every rank
 * answers alike) */
bool tuner_place_wants(const struct tuner *tu);
/*
 * After the exchange of step done: load[L][E] the tokens routed to each
 * expert over steps steps, the job's. Decides, and returns the swaps made
 * (tu->owner is the new placement; logged, printed when print), 0 none.
 */
int tuner_place_exchange(struct tuner *tu, const float *load, int steps,
			 long done, bool print);
/* the replayed moves due after step done, applied to tu->owner: how many */
int tuner_place_replay(struct tuner *tu, long done, bool print);
/* the moves a checkpoint held (tuner_state.moves) into tu->owner and the
 * log: 0 (none: 0 too), or -EINVAL with err */
int tuner_place_import(struct tuner *tu, const char *moves, char *err,
		       size_t len);

/*
 * The gradient buckets (tuner_comm.c): bucket the floats per bucket the
 * options give, span the gradient that leaves in buckets during the
 * backward pass (dist_bucket_span; 0: none). Call after tuner_init.
 */
void tuner_comm_init(struct tuner *tu, long bucket, long span);
/* this exchange runs the bucket probe (every rank answers alike; call
 * once an exchange, before the summaries are gathered) */
bool tuner_comm_due(struct tuner *tu);
/* the floats of the probe's large all-reduce */
long tuner_comm_probe_floats(const struct tuner *tu);
/*
 * At the exchange of step done (from tuner_exchange, --tuner on): judge
 * the bucket size on trial, and after a probe choose it again, unless
 * busy (the shares changed at this exchange). True when tu->bucket
 * changed (it holds from step done + 1; logged, printed when print).
 */
bool tuner_comm_exchange(struct tuner *tu, const struct tuner_sample *all,
			 size_t n, long done, bool print, bool busy);
/* a replayed bucket size b from step done + 1: true when it changed */
bool tuner_comm_replay(struct tuner *tu, long b, long done, bool print);

/* the link probe's rounds each way at this exchange: 3 while the window
 * fills or a rank's link reads other than it is judged (slow or not), 1
 * once every link is settled (every rank answers alike) */
int tuner_probe_rounds(const struct tuner *tu);

/* the tuner's state for the progress line: " tuner on slowest 3 1.98x ..." */
void tuner_describe(const struct tuner *tu, char *buf, size_t len);

/*
 * The shares from speeds v[dp] (sequences per unit of time, > 0) and
 * fixed times fix[dp] (NULL: none), rank r taking shares[r] / v[r] +
 * fix[r]: S = dp * B sequences, each share in [1, Bmax], so that the
 * slowest rank's time is least. Pure, for the unit test.
 */
void tuner_split(int dp, int B, int Bmax, const double *v, const double *fix,
		 int *shares);

#endif /* SIGMA_TRAIN_TUNER_H */
