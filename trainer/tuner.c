/*
 * tuner.c - the auto-tuner's detection and decisions (tuner.h): the
 * window of the ranks' times per sequence, the slow ranks, the shares, the
 * replayed decisions, and what the checkpoint keeps. No communication
 * here: train.c gathers the summaries and hands them in.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sigma.h"
#include "tuner.h"

const char *const tuner_modes[] = { "off", "observe", "on", NULL };

void tuner_config_default(struct tuner_config *c)
{
	memset(c, 0, sizeof(*c));
	c->mode = TUNER_OFF;
	c->every = 4;
	c->window = 5;
	c->confirm = 2;
	c->slow = 1.25;
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
		tu->offs[r] = o;
		o += tu->shares[r];
	}
}

void tuner_split(int dp, int B, int Bmax, const double *v, int *shares)
{
	long left = (long)dp * B;
	double sum = 0.0;

	for (int r = 0; r < dp; r++)
		sum += v[r];
	/* the proportional floor, then one sequence at a time to the rank
	 * whose time after it is least (ties: the lower rank) */
	for (int r = 0; r < dp; r++) {
		int s = (int)floor((double)dp * B * v[r] / sum);

		shares[r] = s < 1 ? 1 : s > Bmax ? Bmax : s;
		left -= shares[r];
	}
	while (left > 0) {
		int best = -1;
		double bt = 0.0;

		for (int r = 0; r < dp; r++) {
			double t = (shares[r] + 1) / v[r];

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
			double t = shares[r] / v[r];

			if (shares[r] > 1 && (best < 0 || t > bt))
				best = r, bt = t;
		}
		shares[best]--;
		left++;
	}
}

double tuner_weight(const struct tuner *tu, int r)
{
	return (double)tu->shares[r] / (double)tu->B;
}

/* "a,b,c" of shares[n] into buf */
static void shares_str(const int *shares, int n, char *buf, size_t len)
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
static void apply(struct tuner *tu, const int *shares, long done, bool print,
		  const char *why)
{
	/* a share has at most 6 digits (1.5 x 65536), and its comma */
	size_t len = (size_t)tu->dp * 8 + 32, have, add;
	char *entry = malloc(len), *list = malloc(len);

	memcpy(tu->shares, shares, sizeof(int) * (size_t)tu->dp);
	set_offsets(tu);
	tu->decisions++;
	if (!entry || !list) {
		free(entry);
		free(list);
		return; /* in force, not logged */
	}
	shares_str(shares, tu->dp, list, len);
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

static int plan_read(struct tuner *tu, char *err, size_t len)
{
	FILE *f = fopen(tu->cfg.replay, "r");
	char line[8192], list[8192];
	int rc = 0, ln = 0;
	long step;

	if (!f)
		return sigma_set_err(err, len, errno, "--tuner-replay %s: %s",
				     tu->cfg.replay, strerror(errno));
	while (!rc && fgets(line, sizeof(line), f)) {
		struct tuner_plan *p;
		char e[256];

		ln++;
		if (sscanf(line, "tuner: step %ld: shares %8191[0-9,]", &step,
			   list) != 2)
			continue; /* other lines of a run's output */
		p = realloc(tu->plan, sizeof(*p) * (tu->nplan + 1));
		if (!p) {
			rc = -ENOMEM;
			break;
		}
		tu->plan = p;
		p = &tu->plan[tu->nplan];
		p->step = step;
		p->shares = malloc(sizeof(int) * (size_t)tu->dp);
		if (!p->shares) {
			rc = -ENOMEM;
			break;
		}
		tu->nplan++;
		if (shares_parse(tu, list, p->shares, e, sizeof(e)))
			rc = sigma_set_err(err, len, EINVAL,
					   "--tuner-replay %s:%d: %s",
					   tu->cfg.replay, ln, e);
		else if (step < 0 ||
			 (tu->nplan > 1 && step <= tu->plan[tu->nplan - 2].step))
			rc = sigma_set_err(err, len, EINVAL,
					   "--tuner-replay %s:%d: step %ld is not after the one before",
					   tu->cfg.replay, ln, step);
	}
	fclose(f);
	if (rc == -ENOMEM)
		sigma_set_err(err, len, ENOMEM, "out of memory");
	return rc;
}

bool tuner_replay_due(struct tuner *tu, long done, bool print)
{
	bool changed = false;

	/* decisions at or before a resumed run's step are in its shares */
	while (tu->next < tu->nplan && tu->plan[tu->next].step < done)
		tu->next++;
	if (tu->next < tu->nplan && tu->plan[tu->next].step == done) {
		apply(tu, tu->plan[tu->next].shares, done, print, "replayed");
		tu->next++;
		changed = true;
	}
	return changed;
}

/* ---- lifecycle and the checkpoint ----------------------------------------- */

int tuner_init(struct tuner *tu, const struct tuner_config *cfg, int dp,
	       int B, int Bmax, char *err, size_t len)
{
	size_t n = (size_t)dp;
	int rc;

	memset(tu, 0, sizeof(*tu));
	tu->cfg = *cfg;
	tu->dp = dp;
	tu->B = B;
	tu->Bmax = Bmax;
	tu->slowest = -1;
	tu->shares = calloc(n, sizeof(int));
	tu->offs = calloc(n, sizeof(int));
	tu->win = calloc(n * (size_t)cfg->window, sizeof(double));
	tu->streak = calloc(n, sizeof(int));
	tu->slow = calloc(n, sizeof(bool));
	tu->basis = calloc(n, sizeof(double));
	if (!tu->shares || !tu->offs || !tu->win || !tu->streak || !tu->slow ||
	    !tu->basis) {
		tuner_fini(tu);
		return sigma_set_err(err, len, ENOMEM, "out of memory");
	}
	for (int r = 0; r < dp; r++) {
		tu->shares[r] = B;
		tu->basis[r] = 1.0;
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
	for (size_t i = 0; i < tu->nplan; i++)
		free(tu->plan[i].shares);
	free(tu->plan);
	free(tu->shares);
	free(tu->offs);
	free(tu->win);
	free(tu->streak);
	free(tu->slow);
	free(tu->basis);
	memset(tu, 0, sizeof(*tu));
}

int tuner_import(struct tuner *tu, const struct tuner_state *st, char *err,
		 size_t len)
{
	long sum = 0;

	if (st->n == 0)
		return 0; /* equal shares */
	if (st->n != tu->dp)
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
	if (sum != (long)tu->dp * tu->B)
		return sigma_set_err(err, len, EINVAL,
				     "the shares sum to %ld sequences, the batch has %ld",
				     sum, (long)tu->dp * tu->B);
	memcpy(tu->shares, st->shares, sizeof(int) * (size_t)tu->dp);
	set_offsets(tu);
	sigma_strlcpy(tu->st.log, st->log, sizeof(tu->st.log));
	return 0;
}

void tuner_export(const struct tuner *tu, struct tuner_state *st)
{
	bool equal = true;

	for (int r = 0; r < tu->dp; r++)
		equal = equal && tu->shares[r] == tu->B;
	st->n = equal || tu->dp > TUNER_MAX_DP ? 0 : tu->dp;
	for (int r = 0; r < st->n; r++)
		st->shares[r] = tu->shares[r];
	sigma_strlcpy(st->log, tu->st.log, sizeof(st->log));
}

/* ---- measurement ----------------------------------------------------------- */

void tuner_record(struct tuner *tu, int dp_index, int seqs,
		  uint64_t compute_ns, const uint64_t comm_ns[DIST_NCOMM])
{
	tu->mine.dp_index = dp_index;
	tu->mine.seqs += seqs;
	tu->mine.compute_ns += (double)compute_ns;
	for (int k = 0; k < DIST_NCOMM; k++)
		tu->mine.comm_ns[k] += (double)comm_ns[k];
}

bool tuner_due(const struct tuner *tu, long done)
{
	return tu->cfg.mode != TUNER_OFF && done % tu->cfg.every == 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* the median of v[n] (sorted in place) */
static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* rank r's window: its median and MAD */
static void window_stats(const struct tuner *tu, int r, double *med,
			 double *mad)
{
	double v[64], d[64];
	int n = tu->nwin;

	for (int i = 0; i < n; i++)
		v[i] = tu->win[(size_t)i * tu->dp + r];
	*med = median(v, n);
	for (int i = 0; i < n; i++)
		d[i] = fabs(v[i] - *med);
	*mad = median(d, n);
}

/* the summaries into the window: per data-parallel rank, ns per sequence
 * of its slowest stage; compute over communication per kind */
static void window_push(struct tuner *tu, const struct tuner_sample *all,
			size_t n)
{
	double *row = &tu->win[(size_t)tu->head * tu->dp];
	double comp = 0.0, comm[DIST_NCOMM] = { 0 };

	for (int r = 0; r < tu->dp; r++)
		row[r] = 0.0;
	for (size_t i = 0; i < n; i++) {
		int r = (int)all[i].dp_index;

		if (r >= 0 && r < tu->dp && all[i].seqs > 0 &&
		    all[i].compute_ns / all[i].seqs > row[r])
			row[r] = all[i].compute_ns / all[i].seqs;
		comp += all[i].compute_ns;
		for (int k = 0; k < DIST_NCOMM; k++)
			comm[k] += all[i].comm_ns[k];
	}
	for (int k = 0; k < DIST_NCOMM; k++)
		tu->cc[k] = comm[k] > 0 ? comp / comm[k] : 0.0;
	tu->head = (tu->head + 1) % tu->cfg.window;
	if (tu->nwin < tu->cfg.window)
		tu->nwin++;
}

/* the confirmed slow ranks; true when the set changed */
static bool detect(struct tuner *tu, const double *med, const double *mad,
		   double M, long done, bool print)
{
	bool changed = false;

	tu->slowest = 0;
	for (int r = 0; r < tu->dp; r++) {
		/* a band: called slow above slow x M (and its noise), no
		 * longer slow only below the middle of 1 and slow */
		bool now = tu->slow[r] ? med[r] > (1.0 + tu->cfg.slow) / 2 * M
				       : med[r] > tu->cfg.slow * M &&
						 med[r] - M > 3 * mad[r];
		int *s = &tu->streak[r];

		if (med[r] > med[tu->slowest])
			tu->slowest = r;
		*s = now ? (*s > 0 ? *s + 1 : 1) : (*s < 0 ? *s - 1 : -1);
		if (tu->slow[r] != now &&
		    (now ? *s : -*s) >= tu->cfg.confirm) {
			tu->slow[r] = now;
			changed = true;
			if (print)
				printf("tuner: step %ld: rank %d %s (%.2fx the median compute time per sequence)\n",
				       done, r, now ? "slow" : "no longer slow",
				       med[r] / M);
		}
	}
	tu->slowest_x = M > 0 ? med[tu->slowest] / M : 0.0;
	return changed;
}

bool tuner_exchange(struct tuner *tu, const struct tuner_sample *all,
		    size_t n, long done, bool print)
{
	double *med, *mad, *v, M;
	bool changed = false, moved;
	int *shares;

	memset(&tu->mine, 0, sizeof(tu->mine));
	window_push(tu, all, n);
	if (tu->nwin < tu->cfg.window)
		return false; /* a full window first */
	med = calloc((size_t)tu->dp * 4, sizeof(double));
	shares = calloc((size_t)tu->dp, sizeof(int));
	if (!med || !shares) {
		free(med);
		free(shares);
		return false; /* measured next time */
	}
	mad = med + tu->dp;
	v = mad + tu->dp;
	for (int r = 0; r < tu->dp; r++)
		window_stats(tu, r, &med[r], &mad[r]);
	memcpy(v, med, sizeof(double) * (size_t)tu->dp);
	M = median(v, tu->dp);
	changed = detect(tu, med, mad, M, done, print);
	if (tu->cfg.mode != TUNER_ON || tu->cfg.replay[0] || !(M > 0)) {
		free(med);
		free(shares);
		return false;
	}
	/* speeds: a slow rank at what it measures, the others at the
	 * median; re-split when the slow set or a speed moved by 20% */
	moved = changed;
	for (int r = 0; r < tu->dp; r++) {
		v[r] = tu->slow[r] ? M / med[r] : 1.0;
		moved = moved || fabs(v[r] - tu->basis[r]) > 0.2 * tu->basis[r];
	}
	if (moved) {
		char why[96];

		memcpy(tu->basis, v, sizeof(double) * (size_t)tu->dp);
		tuner_split(tu->dp, tu->B, tu->Bmax, v, shares);
		changed = memcmp(shares, tu->shares,
				 sizeof(int) * (size_t)tu->dp) != 0;
		snprintf(why, sizeof(why), "slowest rank %d at %.2fx",
			 tu->slowest, tu->slowest_x);
		if (changed)
			apply(tu, shares, done, print, why);
	} else {
		changed = false;
	}
	free(med);
	free(shares);
	return changed;
}

void tuner_describe(const struct tuner *tu, char *buf, size_t len)
{
	char sh[128] = "even";
	bool even = true;

	buf[0] = '\0';
	if (tu->cfg.mode == TUNER_OFF && !tu->cfg.replay[0])
		return;
	for (int r = 0; r < tu->dp; r++)
		even = even && tu->shares[r] == tu->B;
	if (!even && tu->dp <= 16)
		shares_str(tu->shares, tu->dp, sh, sizeof(sh));
	else if (!even)
		snprintf(sh, sizeof(sh), "uneven");
	if (tu->slowest < 0)
		snprintf(buf, len, " tuner %s measuring shares %s",
			 tu->cfg.replay[0] ? "replay"
					   : tuner_modes[tu->cfg.mode],
			 sh);
	else
		snprintf(buf, len,
			 " tuner %s slowest %d %.2fx cc_ar %.1f cc_a2a %.1f cc_pp %.1f shares %s",
			 tu->cfg.replay[0] ? "replay"
					   : tuner_modes[tu->cfg.mode],
			 tu->slowest, tu->slowest_x, tu->cc[DIST_C_ALLREDUCE],
			 tu->cc[DIST_C_ALLTOALL], tu->cc[DIST_C_PIPE], sh);
}
