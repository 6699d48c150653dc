/*
 * tuner_place.c - the experts' placement from the tokens routed to them
 * and the ranks' pace (tuner_place.h), and the tuner's part in it
 * (tuner.h): the tokens counted over a window, the decision, its log in
 * the checkpoint, and the replayed moves.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sigma.h"
#include "tuner_impl.h"

/* layer l's cost per ep rank into cost[ep]; the costliest rank */
static int layer_costs(int E, int ep, const int16_t *own, const double *load,
		       const double *pace, double *cost)
{
	int top = 0;

	for (int p = 0; p < ep; p++)
		cost[p] = 0.0;
	for (int e = 0; e < E; e++)
		cost[own[e]] += load[e];
	for (int p = 0; p < ep; p++) {
		cost[p] *= pace[p];
		if (cost[p] > cost[top])
			top = p;
	}
	return top;
}

/*
 * The best swap of layer l's costliest rank top with another: the one
 * whose pair's higher cost is least (ties: lowest experts); false when
 * none cuts cost[top] by TUNER_PLACE_GAIN.
 */
static int best_swap(int E, const int16_t *own, const double *load,
		     const double *pace, const double *cost, int top,
		     struct tuner_swap *s)
{
	double best = cost[top] * (1.0 - TUNER_PLACE_GAIN);
	int found = 0;

	for (int a = 0; a < E; a++) {
		if (own[a] != top)
			continue;
		for (int b = 0; b < E; b++) {
			int q = own[b];
			double d = load[b] - load[a], hi, cq;

			if (q == top)
				continue;
			hi = cost[top] + pace[top] * d;
			cq = cost[q] - pace[q] * d;
			if (cq > hi)
				hi = cq;
			if (hi < best) {
				best = hi;
				s->a = a;
				s->b = b;
				found = 1;
			}
		}
	}
	return found;
}

int tuner_place_decide(int L, int E, int ep, int16_t *owner, const double *load,
		       const double *pace, struct tuner_swap *out, int max)
{
	double *cost = calloc((size_t)ep, sizeof(double));
	int n = 0;

	if (!cost)
		return 0; /* decided next time */
	for (int l = 0; l < L && n < max; l++) {
		const double *ld = load + (size_t)l * E;
		int16_t *own = owner + (size_t)l * E;
		int top = layer_costs(E, ep, own, ld, pace, cost);
		struct tuner_swap s = {l, -1, -1};

		if (!best_swap(E, own, ld, pace, cost, top, &s))
			continue;
		tuner_place_swap(owner, E, &s);
		out[n++] = s;
	}
	free(cost);
	return n;
}

void tuner_place_swap(int16_t *owner, int E, const struct tuner_swap *s)
{
	int16_t *own = owner + (size_t)s->layer * E, t = own[s->a];

	own[s->a] = own[s->b];
	own[s->b] = t;
}

size_t tuner_swaps_format(const struct tuner_swap *s, int n, char *buf,
			  size_t len)
{
	size_t o = 0;

	if (len)
		buf[0] = '\0';
	for (int i = 0; i < n; i++) {
		int k = snprintf(o < len ? buf + o : NULL,
				 o < len ? len - o : 0, "%s%d:%d-%d",
				 i ? "," : "", s[i].layer, s[i].a, s[i].b);

		o += (size_t)k;
	}
	return o;
}

/* one decimal in [0, hi) at *p, moved past it; -1 when none */
static long parse_index(const char **p, long hi)
{
	char *end;
	long v;

	if (**p < '0' || **p > '9')
		return -1;
	v = strtol(*p, &end, 10);
	if (v >= hi)
		return -1;
	*p = end;
	return v;
}

int tuner_swaps_parse(const char *s, char sep, int L, int E,
		      struct tuner_swap *out, int max, char *err, size_t len)
{
	int n = 0;

	while (*s) {
		const char *item = s, *p = s;
		long l = parse_index(&p, L), a = -1, b = -1;

		if (l >= 0 && *p == ':' &&
		    (++p, (a = parse_index(&p, E)) >= 0) && *p == '-' &&
		    (++p, (b = parse_index(&p, E)) >= 0) && a != b &&
		    (*p == sep || *p == '\0') && n < max) {
			out[n++] = (struct tuner_swap){(int)l, (int)a, (int)b};
			s = *p ? p + 1 : p;
			continue;
		}
		return sigma_set_err(
		    err, len, EINVAL,
		    "expert swap \"%.32s\": want LAYER:A-B with a layer below %d, two experts below %d%s",
		    item, L, E, n == max ? ", and fewer swaps" : "");
	}
	return n;
}

/* ---- the tuner's placement ------------------------------------------------
 */

/* the most swaps of one decision or one replayed line */
#define PLACE_MAX_SWAPS 4096

/*
 * Swaps s[n] in force from the step after done: applied to tu->experts.owner,
 * logged in the checkpoint's moves ("L:A-B@STEP;" each) and printed with
 * why. False when the log cannot hold them: then none is made, since a
 * resumed run could not take the placement up again.
 */
static bool place_apply(struct tuner *tu, const struct tuner_swap *s, int n,
			long done, bool print, const char *why)
{
	struct tuner_experts *ex = &tu->experts;
	size_t have = strlen(tu->st.moves), need = 0;
	char item[64];

	for (int i = 0; i < n; i++)
		need += (size_t)snprintf(item, sizeof(item), "%d:%d-%d@%ld;",
					 s[i].layer, s[i].a, s[i].b, done);
	if (have + need >= sizeof(tu->st.moves))
		return false;
	for (int i = 0; i < n; i++) {
		have += (size_t)snprintf(
		    tu->st.moves + have, sizeof(tu->st.moves) - have,
		    "%d:%d-%d@%ld;", s[i].layer, s[i].a, s[i].b, done);
		tuner_place_swap(ex->owner, ex->E, &s[i]);
	}
	ex->moves += n;
	tu->decisions++;
	if (print) {
		char *list = malloc((size_t)n * 24 + 1);

		if (list) {
			tuner_swaps_format(s, n, list, (size_t)n * 24 + 1);
			printf("tuner: step %ld: experts %s (%s)\n", done, list,
			       why);
			fflush(stdout);
		}
		free(list);
	}
	return true;
}

int tuner_place_init(struct tuner *tu, int L, int E, int ep, const int *ep_of,
		     const int16_t *owner, bool fixed, char *err, size_t len)
{
	struct tuner_experts *ex = &tu->experts;
	size_t n = (size_t)L * E;

	ex->fixed = fixed;
	ex->ep_of = malloc(sizeof(int) * (size_t)tu->dp);
	ex->owner = malloc(sizeof(int16_t) * n);
	ex->load = calloc(n, sizeof(double));
	ex->trial.win = calloc((size_t)tu->cfg.window, sizeof(double));
	ex->tried = malloc(sizeof(*ex->tried) * (size_t)L);
	if (!ex->ep_of || !ex->owner || !ex->load || !ex->trial.win ||
	    !ex->tried)
		return sigma_set_err(err, len, ENOMEM, "out of memory");
	memcpy(ex->ep_of, ep_of, sizeof(int) * (size_t)tu->dp);
	memcpy(ex->owner, owner, sizeof(int16_t) * n);
	ex->L = L, ex->E = E, ex->ep = ep;
	for (size_t i = 0; i < tu->replay.nmplan; i++) {
		struct tuner_plan *p = &tu->replay.mplan[i];
		char e[256];
		int k;

		p->swaps = malloc(sizeof(*p->swaps) * PLACE_MAX_SWAPS);
		if (!p->swaps)
			return sigma_set_err(err, len, ENOMEM, "out of memory");
		k = tuner_swaps_parse(p->text, ',', L, E, p->swaps,
				      PLACE_MAX_SWAPS, e, sizeof(e));
		if (k < 0)
			return sigma_set_err(err, len, EINVAL,
					     "--tuner-replay %s: step %ld: %s",
					     tu->cfg.replay, p->step, e);
		p->nswaps = k;
	}
	return 0;
}

bool tuner_place_wants(const struct tuner *tu)
{
	const struct tuner_experts *ex = &tu->experts;

	return ex->ep > 1 && !ex->fixed && tu->cfg.mode == TUNER_ON &&
	       !tu->cfg.replay[0];
}

/* each ep rank's pace: its slowest data-parallel rank's */
static void ep_pace(const struct tuner *tu, double *pace)
{
	const struct tuner_experts *ex = &tu->experts;

	for (int p = 0; p < ex->ep; p++)
		pace[p] = 1.0;
	for (int r = 0; r < tu->dp; r++)
		if (ex->pace[r] > pace[ex->ep_of[r]])
			pace[ex->ep_of[r]] = ex->pace[r];
}

/*
 * The last move on trial: once a whole window has measured the job's step
 * time since, a step more than 5% slower than before it takes the swaps
 * back (the same swaps, last first), and no expert moves for 4 windows.
 * The swaps taken back are in out; how many.
 */
static int place_judge(struct tuner *tu, long done, bool print,
		       struct tuner_swap *out)
{
	struct tuner_experts *ex = &tu->experts;
	double after, before;
	char why[128];
	int n = ex->ntried, r;

	tuner_trial_push(&ex->trial, tu->cfg.window, tu->step_ns);
	if (n == 0)
		return 0;
	r = tuner_trial_judge(&ex->trial, tu->cfg.window, &after, &before);
	if (r < 0 && ex->trial.before_ns > 0)
		return 0; /* still measuring */
	ex->ntried = 0; /* kept, or nothing measured before to judge by */
	if (r <= 0)
		return 0;
	for (int i = 0; i < n; i++)
		out[i] = ex->tried[n - 1 - i];
	snprintf(why, sizeof(why),
		 "reverted: %.1f ms a step with them, %.1f ms before",
		 after / 1e6, before / 1e6);
	if (!place_apply(tu, out, n, done, print, why))
		return 0;
	ex->cool = 4 * tu->cfg.window;
	return n;
}

/* a move from the window's tokens and the ranks' pace: its swaps in s */
static int place_decide(struct tuner *tu, long done, bool print,
			struct tuner_swap *s)
{
	struct tuner_experts *ex = &tu->experts;
	size_t n = (size_t)ex->L * ex->E;
	double *pace = malloc(sizeof(double) * (size_t)ex->ep);
	int16_t *next = malloc(sizeof(int16_t) * n);
	int k = 0, top = 0;
	char why[96];

	if (pace && next) {
		ep_pace(tu, pace);
		memcpy(next, ex->owner, sizeof(int16_t) * n);
		k = tuner_place_decide(ex->L, ex->E, ex->ep, next, ex->load,
				       pace, s, ex->L);
	}
	if (k > 0) {
		for (int p = 1; p < ex->ep; p++)
			top = pace[p] > pace[top] ? p : top;
		snprintf(
		    why, sizeof(why),
		    "balance the routed tokens; slowest ep rank %d at %.2fx",
		    top, pace[top]);
		if (!place_apply(tu, s, k, done, print, why))
			k = 0; /* the checkpoint could not replay more */
	}
	if (k > 0) {
		/* on trial: the step times from here on */
		memcpy(ex->tried, s, sizeof(*s) * (size_t)k);
		ex->ntried = k;
		tuner_trial_begin(&ex->trial);
	}
	free(pace);
	free(next);
	return k;
}

int tuner_place_exchange(struct tuner *tu, const float *load, int steps,
			 long done, bool print)
{
	struct tuner_experts *ex = &tu->experts;
	size_t n = (size_t)ex->L * ex->E;
	struct tuner_swap *s;
	int k;

	if (!tuner_place_wants(tu))
		return 0;
	for (size_t i = 0; i < n; i++)
		ex->load[i] += load[i];
	ex->lsteps += steps;
	s = malloc(sizeof(*s) * (size_t)ex->L);
	if (!s)
		return 0; /* decided next time */
	k = place_judge(tu, done, print, s);
	if (k > 0)
		; /* taken back: the cool-down starts with the next exchange */
	else if (ex->cool > 0)
		ex->cool--;
	/* a window's steps of tokens, the ranks' pace measured, and no
	 * move on trial */
	else if (ex->ntried == 0 && tu->nwin >= tu->cfg.window &&
		 ex->lsteps >= tu->cfg.window * tu->cfg.every) {
		k = place_decide(tu, done, print, s);
		memset(ex->load, 0, sizeof(double) * n);
		ex->lsteps = 0;
	}
	free(s);
	return k;
}

int tuner_place_replay(struct tuner *tu, long done, bool print)
{
	struct tuner_replay *rp = &tu->replay;
	const struct tuner_plan *p;

	/* moves at or before a resumed run's step are in its placement */
	while (rp->mnext < rp->nmplan && rp->mplan[rp->mnext].step < done)
		rp->mnext++;
	if (tu->experts.ep <= 1 || rp->mnext >= rp->nmplan ||
	    rp->mplan[rp->mnext].step != done)
		return 0;
	p = &rp->mplan[rp->mnext++];
	return place_apply(tu, p->swaps, p->nswaps, done, print, "replayed")
		   ? p->nswaps
		   : 0;
}

int tuner_place_import(struct tuner *tu, const char *moves, char *err,
		       size_t len)
{
	struct tuner_experts *ex = &tu->experts;
	size_t n = (size_t)ex->L * ex->E;
	int16_t *own = malloc(sizeof(int16_t) * (n ? n : 1));
	const char *p = moves;
	int k = 0, rc = 0;
	char e[256];

	if (!own)
		return sigma_set_err(err, len, ENOMEM, "out of memory");
	memcpy(own, ex->owner, sizeof(int16_t) * n);
	while (*p && rc == 0) {
		const char *at = strchr(p, '@'), *end = strchr(p, ';');
		struct tuner_swap sw;
		char item[64];
		long step;

		if (!at || !end || at > end ||
		    (size_t)(at - p) >= sizeof(item) ||
		    sscanf(at + 1, "%ld;", &step) != 1) {
			rc = sigma_set_err(
			    err, len, EINVAL,
			    "tuner/moves \"%.32s\" is not a list of L:A-B@STEP;",
			    p);
			break;
		}
		memcpy(item, p, (size_t)(at - p));
		item[at - p] = '\0';
		if (tuner_swaps_parse(item, ',', ex->L, ex->E, &sw, 1, e,
				      sizeof(e)) != 1) {
			rc = sigma_set_err(err, len, EINVAL, "tuner/moves: %s",
					   e);
			break;
		}
		tuner_place_swap(own, ex->E, &sw);
		k++;
		p = end + 1;
	}
	if (rc == 0) { /* all of them, or none */
		memcpy(ex->owner, own, sizeof(int16_t) * n);
		ex->moves += k;
		sigma_strlcpy(tu->st.moves, moves, sizeof(tu->st.moves));
	}
	free(own);
	return rc;
}
