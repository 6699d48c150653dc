/*
 * tuner.c - the auto-tuner's shares (tuner.h): the split, the decisions
 * in force and their log, the replayed decisions, and what the checkpoint
 * keeps. What is measured and decided is in tuner_watch.c.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sigma.h"
#include "tuner_impl.h"

const char *const tuner_modes[] = { "off", "observe", "on", NULL };

void tuner_config_default(struct tuner_config *c)
{
	memset(c, 0, sizeof(*c));
	c->mode = TUNER_OFF;
	c->every = 4;
	c->window = 5;
	c->confirm = 2;
	c->slow = 1.25;
	c->escalate = 0;
}

int tuner_bmax(const struct tuner_config *cfg, int B)
{
	/* room for a fast rank to take half again its share */
	return cfg->mode == TUNER_ON || cfg->replay[0] ? B + (B + 1) / 2 : B;
}

/* ---- shares --------------------------------------------------------------- */

static void set_offsets(struct tuner *tu)
{
	int o = 0;

	for (int r = 0; r < tu->dp; r++) {
		tu->shares.offs[r] = o;
		o += tu->shares.n[r];
	}
}

/* rank r's time with share n */
static double split_time(const double *v, const double *fix, int r, int n)
{
	return n / v[r] + (fix ? fix[r] : 0.0);
}

/* each rank's most sequences within time T (in [1, Bmax]); their sum */
static long split_fill(int dp, int Bmax, const double *v, const double *fix,
		       double T, int *shares)
{
	long sum = 0;

	for (int r = 0; r < dp; r++) {
		double x = floor((T - (fix ? fix[r] : 0.0)) * v[r]);

		shares[r] = x < 1 ? 1 : x > Bmax ? Bmax : (int)x;
		sum += shares[r];
	}
	return sum;
}

void tuner_split(int dp, int B, int Bmax, const double *v, const double *fix,
		 int *shares)
{
	long left = (long)dp * B;
	double lo = 0.0, hi = 0.0;

	/* the longest time whose shares still fit in the batch (bisected),
	 * then one sequence at a time to the rank whose time after it is
	 * least (ties: the lower rank) */
	for (int r = 0; r < dp; r++)
		hi = fmax(hi, split_time(v, fix, r, Bmax));
	for (int i = 0; i < 64; i++) {
		double mid = 0.5 * (lo + hi);

		if (split_fill(dp, Bmax, v, fix, mid, shares) <= left)
			lo = mid;
		else
			hi = mid;
	}
	left -= split_fill(dp, Bmax, v, fix, lo, shares);
	while (left > 0) {
		int best = -1;
		double bt = 0.0;

		for (int r = 0; r < dp; r++) {
			double t = split_time(v, fix, r, shares[r] + 1);

			if (shares[r] < Bmax && (best < 0 || t < bt))
				best = r, bt = t;
		}
		shares[best]++;
		left--;
	}
	while (left < 0) { /* the floors of 1 took too many */
		int best = -1;
		double bt = 0.0;

		for (int r = 0; r < dp; r++) {
			double t = split_time(v, fix, r, shares[r]);

			if (shares[r] > 1 && (best < 0 || t > bt))
				best = r, bt = t;
		}
		shares[best]--;
		left++;
	}
}

double tuner_weight(const struct tuner *tu, int r)
{
	return (double)tu->shares.n[r] / (double)tu->B;
}

/* "a,b,c" of shares[n] into buf */
void tuner_shares_str(const int *shares, int n, char *buf, size_t len)
{
	size_t o = 0;

	buf[0] = '\0';
	for (int r = 0; r < n && o < len; r++)
		o += (size_t)snprintf(buf + o, len - o, "%s%d", r ? "," : "",
				      shares[r]);
}

/* a shares list of dp values summing to dp * B, each in [1, Bmax] */
static int shares_parse(const struct tuner *tu, const char *s, int *out,
			char *err, size_t len)
{
	long sum = 0;
	int n = 0;

	while (*s) {
		char *end;
		long v = strtol(s, &end, 10);

		if (end == s || v < 1 || v > tu->Bmax || n == tu->dp)
			return sigma_set_err(err, len, EINVAL,
					     "shares \"%s\": want %d numbers in [1, %d]",
					     s, tu->dp, tu->Bmax);
		out[n++] = (int)v;
		sum += v;
		s = *end == ',' ? end + 1 : end;
		if (*end && *end != ',')
			break;
	}
	if (n != tu->dp || sum != (long)tu->dp * tu->B)
		return sigma_set_err(err, len, EINVAL,
				     "%d shares summing to %ld, want %d summing to %ld",
				     n, sum, tu->dp, (long)tu->dp * tu->B);
	return 0;
}

/* the shares in force from now on, and the decision in the log */
void tuner_apply(struct tuner *tu, const int *shares, long done, bool print,
		  const char *why)
{
	/* a share has at most 6 digits (1.5 x 65536), and its comma */
	size_t len = (size_t)tu->dp * 8 + 32, have, add;
	char *entry = malloc(len), *list = malloc(len);

	memcpy(tu->shares.n, shares, sizeof(int) * (size_t)tu->dp);
	set_offsets(tu);
	tu->decisions++;
	if (!entry || !list) {
		free(entry);
		free(list);
		return; /* in force, not logged */
	}
	tuner_shares_str(shares, tu->dp, list, len);
	snprintf(entry, len, "%ld:%s;", done, list);
	have = strlen(tu->st.log);
	add = strlen(entry);
	while (have && have + add >= sizeof(tu->st.log)) { /* oldest out */
		char *next = strchr(tu->st.log, ';');
		size_t drop = next ? (size_t)(next - tu->st.log) + 1 : have;

		memmove(tu->st.log, tu->st.log + drop, have - drop + 1);
		have -= drop;
	}
	if (add < sizeof(tu->st.log))
		memcpy(tu->st.log + have, entry, add + 1);
	if (print) {
		printf("tuner: step %ld: shares %s (%s)\n", done, list, why);
		fflush(stdout);
	}
	free(entry);
	free(list);
}

/* ---- --tuner-replay ------------------------------------------------------- */

/* a new entry at the end of *plan (grown); NULL: out of memory */
static struct tuner_plan *plan_add(struct tuner_plan **plan, size_t *n,
				   long step)
{
	struct tuner_plan *p = realloc(*plan, sizeof(*p) * (*n + 1));

	if (!p)
		return NULL;
	*plan = p;
	p += (*n)++;
	memset(p, 0, sizeof(*p));
	p->step = step;
	return p;
}

/* one "tuner: step N: shares a,b,...", "... gradient buckets F floats"
 * or "... experts L:A-B,..." line into the plans; other lines are
 * skipped */
static int plan_line(struct tuner *tu, const char *line, char *list,
		     char *err, size_t len)
{
	struct tuner_plan *p;
	long step, prev = -1, b;

	if (sscanf(line, "tuner: step %ld: gradient buckets %ld floats", &step,
		   &b) == 2) {
		if (b < 1)
			return sigma_set_err(err, len, EINVAL,
					     "gradient buckets of %ld floats",
					     b);
		/* a bucket size may come at the step of a share's change */
		prev = tu->replay.nplan ? tu->replay.plan[tu->replay.nplan - 1].step - 1 : -1;
		p = plan_add(&tu->replay.plan, &tu->replay.nplan, step);
		if (!p)
			return -ENOMEM;
		p->bucket = b;
	} else if (sscanf(line, "tuner: step %ld: experts %8191[0-9:,-]", &step,
		   list) == 2) {
		prev = tu->replay.nmplan ? tu->replay.mplan[tu->replay.nmplan - 1].step : -1;
		p = plan_add(&tu->replay.mplan, &tu->replay.nmplan, step);
		if (!p || !(p->text = strdup(list)))
			return -ENOMEM;
	} else if (sscanf(line, "tuner: step %ld: shares %8191[0-9,]", &step,
			  list) == 2) {
		prev = tu->replay.nplan ? tu->replay.plan[tu->replay.nplan - 1].step - 1 : -1;
		p = plan_add(&tu->replay.plan, &tu->replay.nplan, step);
		if (!p || !(p->shares = malloc(sizeof(int) * (size_t)tu->dp)))
			return -ENOMEM;
		if (shares_parse(tu, list, p->shares, err, len))
			return -EINVAL;
	} else {
		return 0; /* other lines of a run's output */
	}
	if (step < 0 || step <= prev)
		return sigma_set_err(err, len, EINVAL,
				     "step %ld is out of order",
				     step);
	return 0;
}

static int plan_read(struct tuner *tu, char *err, size_t len)
{
	FILE *f = fopen(tu->cfg.replay, "r");
	char line[8192], list[8192], e[256];
	int rc = 0, ln = 0;

	if (!f)
		return sigma_set_err(err, len, errno, "--tuner-replay %s: %s",
				     tu->cfg.replay, strerror(errno));
	while (!rc && fgets(line, sizeof(line), f)) {
		ln++;
		rc = plan_line(tu, line, list, e, sizeof(e));
	}
	fclose(f);
	if (rc == -ENOMEM)
		return sigma_set_err(err, len, ENOMEM, "out of memory");
	if (rc)
		return sigma_set_err(err, len, EINVAL, "--tuner-replay %s:%d: %s",
				     tu->cfg.replay, ln, e);
	return 0;
}

bool tuner_replay_due(struct tuner *tu, long done, bool print)
{
	struct tuner_replay *rp = &tu->replay;
	bool changed = false;

	/* decisions at or before a resumed run's step are in its state */
	while (rp->next < rp->nplan && rp->plan[rp->next].step < done)
		rp->next++;
	for (; rp->next < rp->nplan && rp->plan[rp->next].step == done;
	     rp->next++) {
		const struct tuner_plan *p = &rp->plan[rp->next];

		if (p->bucket > 0) {
			(void)tuner_comm_replay(tu, p->bucket, done, print);
			continue;
		}
		tuner_apply(tu, p->shares, done, print, "replayed");
		changed = true;
	}
	return changed;
}

/* ---- lifecycle and the checkpoint ----------------------------------------- */

/* a watch of n ranks over a window of W exchanges; basis at b each */
static bool watch_init(struct tuner_watch *w, size_t n, size_t W, double b)
{
	w->worst = -1;
	w->win = calloc(n * W, sizeof(double));
	w->streak = calloc(n, sizeof(int));
	w->slow = calloc(n, sizeof(bool));
	w->basis = calloc(n, sizeof(double));
	w->blame = calloc(n, sizeof(int));
	for (size_t r = 0; w->basis && r < n; r++)
		w->basis[r] = b;
	return w->win && w->streak && w->slow && w->basis && w->blame;
}

static void watch_fini(struct tuner_watch *w)
{
	free(w->win);
	free(w->streak);
	free(w->slow);
	free(w->basis);
	free(w->blame);
}

/* even shares of B for n ranks, nothing on trial */
static bool shares_init(struct tuner_shares *sh, size_t n, size_t W, int B)
{
	sh->escalate = -1;
	sh->n = calloc(n, sizeof(int));
	sh->offs = calloc(n, sizeof(int));
	sh->trial.win = calloc(W, sizeof(double));
	sh->prev = calloc(n, sizeof(int));
	sh->prev_basis = calloc(2 * n, sizeof(double));
	sh->no_help = calloc(n, sizeof(bool));
	sh->moved_at = calloc(n, sizeof(double));
	sh->escalated = calloc(n, sizeof(bool));
	for (size_t r = 0; sh->n && r < n; r++)
		sh->n[r] = B;
	return watch_init(&sh->speed, n, W, 1.0) && sh->n && sh->offs &&
	       sh->trial.win && sh->prev && sh->prev_basis && sh->no_help &&
	       sh->moved_at && sh->escalated;
}

static void shares_fini(struct tuner_shares *sh)
{
	watch_fini(&sh->speed);
	free(sh->n);
	free(sh->offs);
	free(sh->trial.win);
	free(sh->prev);
	free(sh->prev_basis);
	free(sh->no_help);
	free(sh->moved_at);
	free(sh->escalated);
}

int tuner_init(struct tuner *tu, const struct tuner_config *cfg, int dp,
	       int B, int Bmax, char *err, size_t len)
{
	size_t n = (size_t)dp, W = (size_t)cfg->window;
	bool ok;
	int rc;

	memset(tu, 0, sizeof(*tu));
	tu->cfg = *cfg;
	tu->dp = dp;
	tu->B = B;
	tu->Bmax = Bmax;
	tu->micro = 1;
	ok = shares_init(&tu->shares, n, W, B);
	ok = watch_init(&tu->links.probe, n, W, 0.0) && ok;
	tu->links.msgs = calloc(n, sizeof(double));
	/* the experts' pace: 1 for every rank until one is slow; the rest
	 * of their rung comes with tuner_place_init */
	tu->experts.pace = calloc(n, sizeof(double));
	for (size_t r = 0; tu->experts.pace && r < n; r++)
		tu->experts.pace[r] = 1.0;
	tu->buckets.trial.win = calloc(W, sizeof(double));
	if (!ok || !tu->links.msgs || !tu->experts.pace ||
	    !tu->buckets.trial.win) {
		tuner_fini(tu);
		return sigma_set_err(err, len, ENOMEM, "out of memory");
	}
	set_offsets(tu);
	if (cfg->replay[0] && (rc = plan_read(tu, err, len))) {
		tuner_fini(tu);
		return rc;
	}
	return 0;
}

void tuner_fini(struct tuner *tu)
{
	struct tuner_replay *rp = &tu->replay;
	struct tuner_experts *ex = &tu->experts;

	for (size_t i = 0; i < rp->nplan; i++)
		free(rp->plan[i].shares);
	free(rp->plan);
	for (size_t i = 0; i < rp->nmplan; i++) {
		free(rp->mplan[i].text);
		free(rp->mplan[i].swaps);
	}
	free(rp->mplan);
	shares_fini(&tu->shares);
	watch_fini(&tu->links.probe);
	free(tu->links.msgs);
	free(ex->ep_of);
	free(ex->owner);
	free(ex->load);
	free(ex->pace);
	free(ex->trial.win);
	free(ex->tried);
	free(tu->buckets.trial.win);
	memset(tu, 0, sizeof(*tu));
}

int tuner_import(struct tuner *tu, const struct tuner_state *st, char *err,
		 size_t len)
{
	long sum = 0;

	if (st->bucket < 0)
		return sigma_set_err(err, len, EINVAL,
				     "gradient buckets of %ld floats",
				     st->bucket);
	if (st->n != 0 && st->n != tu->dp)
		return sigma_set_err(err, len, EINVAL,
				     "the checkpoint holds %d data-parallel shares, this layout has %d ranks",
				     st->n, tu->dp);
	for (int r = 0; r < st->n; r++) {
		if (st->shares[r] < 1 || st->shares[r] > tu->Bmax)
			return sigma_set_err(err, len, EINVAL,
					     "share %d of rank %d is not in [1, %d]",
					     st->shares[r], r, tu->Bmax);
		sum += st->shares[r];
	}
	if (st->n != 0 && sum != (long)tu->dp * tu->B)
		return sigma_set_err(err, len, EINVAL,
				     "the shares sum to %ld sequences, the batch has %ld",
				     sum, (long)tu->dp * tu->B);
	if (st->bucket > 0)
		tu->buckets.now = st->bucket;
	if (st->n == 0)
		return 0; /* equal shares */
	memcpy(tu->shares.n, st->shares, sizeof(int) * (size_t)tu->dp);
	set_offsets(tu);
	sigma_strlcpy(tu->st.log, st->log, sizeof(tu->st.log));
	return 0;
}

void tuner_export(const struct tuner *tu, struct tuner_state *st)
{
	bool equal = true;

	for (int r = 0; r < tu->dp; r++)
		equal = equal && tu->shares.n[r] == tu->B;
	st->n = equal || tu->dp > TUNER_MAX_DP ? 0 : tu->dp;
	for (int r = 0; r < st->n; r++)
		st->shares[r] = tu->shares.n[r];
	sigma_strlcpy(st->log, tu->st.log, sizeof(st->log));
	sigma_strlcpy(st->moves, tu->st.moves, sizeof(st->moves));
	st->bucket = tu->buckets.now != tu->buckets.opts ? tu->buckets.now : 0;
}

