/*
 * tuner_watch.c - the auto-tuner's measurements and decisions (tuner.h):
 * this rank's summary, the window of the ranks' compute times per sequence
 * and link probes, the slow ranks and links, the shares decided from them,
 * and the progress line's words. No communication here:
 * train.c gathers the summaries and hands them in.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sigma.h"
#include "straggler.h"
#include "tuner_impl.h"

void tuner_record(struct tuner *tu, const struct tuner_step *st)
{
	tu->mine.dp_index = st->dp_index;
	tu->mine.seqs += st->seqs;
	tu->mine.compute_ns += (double)st->compute_ns;
	for (int k = 0; k < DIST_NCOMM; k++)
		tu->mine.comm_ns[k] += (double)st->comm_ns[k];
	tu->mine.steps++;
	tu->mine.messages += (double)st->messages;
	tu->mine.ovl_waits += (double)st->ovl.waits;
	tu->mine.ovl_floats += (double)st->ovl.floats;
	tu->mine.ovl_ns += (double)st->ovl.ns;
}

/*
 * The trials judge the whole step as the job lives it. The forward and
 * backward pass alone leave out the wait for the gradient norm, where a
 * late link's message lands, and the update: a move that slowed the job
 * there looked like a gain.
 */
void tuner_clock_start(struct tuner *tu)
{
	tu->since_ns = sigma_now_ns();
}

void tuner_clock_seal(struct tuner *tu)
{
	uint64_t now = sigma_now_ns();

	tu->mine.step_ns = tu->since_ns ? (double)(now - tu->since_ns) : 0.0;
	tu->since_ns = now;
}

bool tuner_due(const struct tuner *tu, long done)
{
	return tu->cfg.mode != TUNER_OFF && done % tu->cfg.every == 0;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- the window ----------------------------------------------------------- */

/* the summaries into the windows: per data-parallel rank, ns per sequence
 * of its slowest stage and its slowest link probe (with that rank's
 * messages per step); compute over communication per kind */
static void window_push(struct tuner *tu, const struct tuner_sample *all,
			size_t n)
{
	struct tuner_watch *sp = &tu->shares.speed, *lk = &tu->links.probe;
	double *row = &sp->win[(size_t)tu->head * tu->dp];
	double *lrow = &lk->win[(size_t)tu->head * tu->dp];
	double comp = 0.0, comm[DIST_NCOMM] = { 0 }, step = 0.0;

	for (int r = 0; r < tu->dp; r++)
		row[r] = lrow[r] = tu->links.msgs[r] = 0.0;
	for (size_t i = 0; i < n; i++) {
		const struct tuner_sample *a = &all[i];
		int r = (int)a->dp_index;

		if (r >= 0 && r < tu->dp && a->seqs > 0 &&
		    a->compute_ns / a->seqs > row[r]) {
			row[r] = a->compute_ns / a->seqs;
			sp->blame[r] = (int)i;
		}
		if (r >= 0 && r < tu->dp && a->steps > 0 &&
		    a->probe_ns >= lrow[r]) {
			lrow[r] = a->probe_ns;
			tu->links.msgs[r] = a->messages / a->steps;
			lk->blame[r] = (int)i;
		}
		comp += a->compute_ns;
		for (int k = 0; k < DIST_NCOMM; k++)
			comm[k] += a->comm_ns[k];
		if (a->steps > 0 && a->step_ns / a->steps > step)
			step = a->step_ns / a->steps;
	}
	/* the job's step time: its slowest rank's */
	tu->step_ns = step;
	tuner_trial_push(&tu->shares.trial, tu->cfg.window, step);
	for (int k = 0; k < DIST_NCOMM; k++)
		tu->cc[k] = comm[k] > 0 ? comp / comm[k] : 0.0;
	tu->head = (tu->head + 1) % tu->cfg.window;
	if (tu->nwin < tu->cfg.window)
		tu->nwin++;
}

/* ---- detection ------------------------------------------------------------ */

/* how one watch is judged and told */
struct judged {
	const char *what; /* for the line: "compute time per sequence" */
	const char *name; /* "slow", "link slow" */
	double floor;	  /* the least excess over the median that counts */
};

/* the ranks that w's medians med[] (noise mad[], median M) confirm slow,
 * or no longer slow (straggler.h); true when the set changed */
static bool detect(struct tuner *tu, struct tuner_watch *w,
		   const struct judged *j, const double *med,
		   const double *mad, double M, long done, bool print)
{
	struct tuner_shares *sh = &tu->shares;
	struct straggler_band b = {tu->cfg.slow, tu->cfg.confirm, j->floor};
	/* a slow rank with a smaller share reads faster per sequence where
	 * its waits cost it (a node at a CPU quota: 1.12x at a share of 11,
	 * 1.9x at 16): it is cleared only below a quarter of the band, not
	 * the middle, or it flaps between even and moved. Only clearing:
	 * a rank given less for its link is found slow as any other */
	struct straggler_band bm = {1.0 + (tu->cfg.slow - 1.0) / 2,
				    tu->cfg.confirm, j->floor};
	bool changed = false;

	for (int r = 0; r < tu->dp; r++) {
		bool moved = w->slow[r] && sh->n[r] < tu->B;
		int now = straggler_judge(moved ? &bm : &b,
					  med[r], mad[r], M, &w->slow[r],
					  &w->streak[r]);

		if (!now)
			continue;
		sh->moved_at[r] = 0.0;
		sh->escalated[r] = false;
		if (!sh->speed.slow[r] && !tu->links.probe.slow[r])
			sh->no_help[r] = false;
		changed = true;
		if (print)
			printf("tuner: step %ld: rank %d %s (%.2fx the median %s)\n",
			       done, r, now > 0 ? j->name : "no longer slow",
			       M > 0 ? med[r] / M : 0.0, j->what);
	}
	return changed;
}

/* w's window medians into med[dp] and their MADs into mad[dp]; the
 * ranks' median M, by which its slowest rank is told */
static double watch_medians(struct tuner *tu, struct tuner_watch *w,
			    double *med, double *mad, double *scratch)
{
	int dp = tu->dp;
	double M;

	for (int r = 0; r < dp; r++)
		straggler_column(w->win, tu->nwin, dp, r, &med[r], &mad[r]);
	memcpy(scratch, med, sizeof(double) * (size_t)dp);
	M = straggler_median(scratch, (size_t)dp);
	w->worst = 0;
	for (int r = 1; r < dp; r++)
		if (med[r] > med[w->worst])
			w->worst = r;
	w->worst_x = M > 0 ? med[w->worst] / M : 0.0;
	return M;
}

/* the window's medians of both measures into med[4][dp] (compute, its
 * MAD, link, its MAD), and the ranks' medians M[2]; the slowest of each */
static void window_medians(struct tuner *tu, double *med, double M[2])
{
	size_t dp = (size_t)tu->dp;

	M[0] = watch_medians(tu, &tu->shares.speed, med, med + dp,
			     med + 4 * dp);
	M[1] = watch_medians(tu, &tu->links.probe, med + 2 * dp, med + 3 * dp,
			     med + 4 * dp);
}

/*
 * The last decision on trial: once a whole window has measured the step
 * time since, a step more than 5% slower than before it reverts it, with
 * the speeds it was made from. A first move off even shares that did not
 * help leaves its ranks even until they are no longer slow; a re-split
 * that did not help goes back to the split before it. True when the
 * shares changed.
 */
static bool judge(struct tuner *tu, long done, bool print)
{
	struct tuner_shares *sh = &tu->shares;
	struct tuner_watch *lk = &tu->links.probe;
	size_t dp = (size_t)tu->dp;
	double after, before;
	char why[128];

	if (tuner_trial_judge(&sh->trial, tu->cfg.window, &after, &before) <= 0)
		return false;
	for (size_t r = 0; r < dp; r++)
		if ((sh->speed.slow[r] || lk->slow[r]) && sh->prev[r] == tu->B)
			sh->no_help[r] = true;
	memcpy(sh->speed.basis, sh->prev_basis, sizeof(double) * dp);
	memcpy(lk->basis, sh->prev_basis + dp, sizeof(double) * dp);
	snprintf(why, sizeof(why),
		 "reverted: %.1f ms a step with them, %.1f ms before",
		 after / 1e6, before / 1e6);
	tuner_apply(tu, sh->prev, done, print, why);
	return true;
}

/* ---- decisions ------------------------------------------------------------ */

/*
 * The shares from what was measured: a slow rank at its speed, the others
 * at the median's; a slow link as a fixed time per step, its excess per
 * message times its messages, in the time of an even share's sequences
 * per micro-batch. Re-split when the sets changed or an input moved by
 * 20%; true when the shares changed.
 */
static bool decide(struct tuner *tu, const double *med, const double M[2],
		   bool changed, long done, bool print)
{
	struct tuner_shares *sh = &tu->shares;
	struct tuner_watch *sp = &sh->speed, *lk = &tu->links.probe;
	int dp = tu->dp, *shares;
	size_t bytes = sizeof(double) * (size_t)dp;
	double *v, *fix;
	bool moved = changed, any = false;
	char why[96];

	/* one decision at a time: the last is on trial until a window has
	 * measured it, and a window that still holds the steps before it
	 * would re-split on a mix of both. A rank found slow, or no longer
	 * slow, is decided on at once. */
	if (sh->trial.before_ns > 0 && !changed)
		return false;
	shares = calloc((size_t)dp, sizeof(int));
	v = calloc(2 * (size_t)dp, sizeof(double));
	if (!shares || !v) {
		free(shares);
		free(v);
		return false; /* decided next time */
	}
	fix = v + dp;
	for (int r = 0; r < dp; r++) {
		bool help = !sh->no_help[r];

		/* a slow rank that reads healthy again keeps its split until
		 * the reading is confirmed, and then goes back to even */
		v[r] = !help || !sp->slow[r] ? 1.0
		       : sp->streak[r] < 0   ? sp->basis[r]
					     : M[0] / med[r];
		fix[r] = !help || !lk->slow[r] ? 0.0
			 : lk->streak[r] < 0
			     ? lk->basis[r]
			     : (med[2 * dp + r] - M[1]) * tu->links.msgs[r] /
				   (tu->micro * M[0]);
		any = any || v[r] != 1.0 || fix[r] != 0.0;
		moved = moved || fabs(v[r] - sp->basis[r]) > 0.2 * sp->basis[r] ||
			fabs(fix[r] - lk->basis[r]) > 0.2 * lk->basis[r];
	}
	changed = false;
	if (moved) {
		/* a rank split before meets its new reading halfway: where
		 * its speed depends on its share (a node whose waits spend
		 * its CPU quota), the full step swings back and forth */
		for (int r = 0; r < dp; r++) {
			if (v[r] != 1.0 && sp->basis[r] != 1.0)
				v[r] = sqrt(v[r] * sp->basis[r]);
			if (fix[r] != 0.0 && lk->basis[r] != 0.0)
				fix[r] = 0.5 * (fix[r] + lk->basis[r]);
		}
		memcpy(sh->prev_basis, sp->basis, bytes);
		memcpy(sh->prev_basis + dp, lk->basis, bytes);
		memcpy(sp->basis, v, bytes);
		memcpy(lk->basis, fix, bytes);
		tuner_split(dp, tu->B, tu->Bmax, v, fix, shares);
		changed = memcmp(shares, sh->n, sizeof(int) * (size_t)dp);
		if (lk->slow[lk->worst] && !sp->slow[sp->worst])
			snprintf(why, sizeof(why), "slowest link rank %d at %.2fx",
				 lk->worst, lk->worst_x);
		else
			snprintf(why, sizeof(why), "slowest rank %d at %.2fx",
				 sp->worst, sp->worst_x);
		if (changed) {
			/* on trial: the step times from here on */
			memcpy(sh->prev, sh->n, sizeof(int) * (size_t)dp);
			tuner_trial_begin(&sh->trial);
			if (!any) /* a return to even stays */
				sh->trial.before_ns = 0.0;
			tuner_apply(tu, shares, done, print, why);
		}
	}
	for (int r = 0; r < dp && changed; r++)
		if (sp->slow[r] || lk->slow[r])
			sh->moved_at[r] = now_s();
	free(shares);
	free(v);
	return changed;
}

/* the first rank slow past --tuner-escalate seconds after its shares
 * moved, not yet reported */
static void escalate(struct tuner *tu)
{
	struct tuner_shares *sh = &tu->shares;
	double t = now_s();

	sh->escalate = -1;
	for (int r = 0; r < tu->dp && tu->cfg.escalate > 0; r++)
		if ((sh->speed.slow[r] || tu->links.probe.slow[r]) &&
		    !sh->escalated[r] && sh->moved_at[r] > 0 &&
		    t - sh->moved_at[r] >= tu->cfg.escalate) {
			sh->escalated[r] = true;
			sh->escalate = r;
			return;
		}
}

int tuner_escalate_due(struct tuner *tu, int *world, char *why, size_t len)
{
	const struct tuner_watch *sp = &tu->shares.speed;
	const struct tuner_watch *lk = &tu->links.probe;
	int r = tu->shares.escalate;

	tu->shares.escalate = -1;
	*world = -1;
	if (r < 0)
		return -1;
	*world = sp->slow[r] ? sp->blame[r] : lk->blame[r];
	snprintf(why, len,
		 "rank %d still %s %.0f s after its shares moved (%.2fx the median %s)",
		 r, sp->slow[r] ? "slow" : "link slow", (double)tu->cfg.escalate,
		 sp->slow[r] ? sp->basis[r] > 0 ? 1.0 / sp->basis[r] : 0.0
			     : lk->worst_x,
		 sp->slow[r] ? "compute time per sequence" : "link probe");
	return r;
}

bool tuner_exchange(struct tuner *tu, const struct tuner_sample *all,
		    size_t n, long done, bool print)
{
	static const struct judged cj = { "compute time per sequence", "slow",
					  0.0 };
	static const struct judged lj = { "link probe", "link slow",
					  TUNER_LINK_FLOOR };
	size_t dp = (size_t)tu->dp;
	double *med, M[2];
	bool changed;

	memset(&tu->mine, 0, sizeof(tu->mine));
	window_push(tu, all, n);
	if (tu->nwin < tu->cfg.window)
		return false; /* a full window first */
	med = calloc(dp * 5, sizeof(double));
	if (!med)
		return false; /* measured next time */
	window_medians(tu, med, M);
	changed = detect(tu, &tu->shares.speed, &cj, med, med + dp, M[0],
			 done, print);
	if (M[1] > 0)
		changed = detect(tu, &tu->links.probe, &lj, med + 2 * dp,
				 med + 3 * dp, M[1], done, print) ||
			  changed;
	/* the pace the experts' placement weighs the ranks by */
	for (size_t r = 0; r < dp; r++)
		tu->experts.pace[r] = tu->shares.speed.slow[r] && M[0] > 0
					  ? med[r] / M[0]
					  : 1.0;
	if (tu->cfg.mode == TUNER_ON && !tu->cfg.replay[0] && M[0] > 0) {
		changed = judge(tu, done, print) ||
			  decide(tu, med, M, changed, done, print);
		escalate(tu);
		(void)tuner_comm_exchange(tu, all, n, done, print, changed);
	} else {
		changed = false;
	}
	free(med);
	return changed;
}

int tuner_probe_rounds(const struct tuner *tu)
{
	const struct tuner_watch *lk = &tu->links.probe;

	if (tu->nwin < tu->cfg.window)
		return 3;
	for (int r = 0; r < tu->dp; r++)
		if ((lk->streak[r] > 0) != lk->slow[r])
			return 3; /* on its way to slow, or back */
	return 1;
}

/* ---- the progress line ---------------------------------------------------- */

void tuner_describe(const struct tuner *tu, char *buf, size_t len)
{
	const struct tuner_watch *sp = &tu->shares.speed, *lk = &tu->links.probe;
	const struct tuner_buckets *bk = &tu->buckets;
	const char *mode = tu->cfg.replay[0] ? "replay"
					     : tuner_modes[tu->cfg.mode];
	char sh[128] = "even";
	bool even = true;

	buf[0] = '\0';
	if (tu->cfg.mode == TUNER_OFF && !tu->cfg.replay[0])
		return;
	for (int r = 0; r < tu->dp; r++)
		even = even && tu->shares.n[r] == tu->B;
	if (!even && tu->dp <= 16)
		tuner_shares_str(tu->shares.n, tu->dp, sh, sizeof(sh));
	else if (!even)
		snprintf(sh, sizeof(sh), "uneven");
	if (sp->worst < 0)
		snprintf(buf, len, " tuner %s measuring shares %s", mode, sh);
	else
		snprintf(buf, len,
			 " tuner %s slowest %d %.2fx link %d %.2fx cc_ar %.1f cc_a2a %.1f cc_pp %.1f shares %s",
			 mode, sp->worst, sp->worst_x, lk->worst, lk->worst_x,
			 tu->cc[DIST_C_ALLREDUCE], tu->cc[DIST_C_ALLTOALL],
			 tu->cc[DIST_C_PIPE], sh);
	if (tu->experts.ep > 1) { /* the experts' swaps since the run began */
		size_t o = strlen(buf);

		snprintf(buf + o, len - o, " expert_swaps %d",
			 tu->experts.moves);
	}
	if (bk->span > 0) { /* floats per gradient bucket */
		size_t o = strlen(buf);

		snprintf(buf + o, len - o, " buckets %ld",
			 bk->now < bk->span ? bk->now : bk->span);
	}
}

void tuner_columns(const struct tuner *tu, char *buf, size_t len)
{
	const struct tuner_watch *w = &tu->shares.speed;

	if (w->worst < 0)
		snprintf(buf, len, ",,,,,,%d", tu->decisions);
	else
		snprintf(buf, len, ",%d,%.3f,%.3f,%.3f,%.3f,%d", w->worst,
			 w->worst_x, tu->cc[DIST_C_ALLREDUCE],
			 tu->cc[DIST_C_ALLTOALL], tu->cc[DIST_C_PIPE],
			 tu->decisions);
}
