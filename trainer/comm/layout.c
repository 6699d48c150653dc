/*
 * layout.c - parallel layouts: validation, rank coordinates, group
 * membership, expert placement and the 1F1B schedule (see layout.h).
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sigma.h"
#include "layout.h"

static const char *const group_names[LAYOUT_GROUP_COUNT] = {
    [LAYOUT_GROUP_DP] = "dp",
    [LAYOUT_GROUP_EP] = "ep",
    [LAYOUT_GROUP_EXPERT_DP] = "expert_dp",
    [LAYOUT_GROUP_PP] = "pp",
};

const char *layout_group_name(enum layout_group g)
{
	if ((int)g < 0 || g >= LAYOUT_GROUP_COUNT)
		return "?";
	return group_names[g];
}

static int check_range(const char *what, long v, long min, long max, char *err,
		       size_t len)
{
	if (v < min || v > max)
		return sigma_set_err(err, len, EINVAL,
				     "%s=%ld is out of range [%ld, %ld]", what,
				     v, min, max);
	return 0;
}

int layout_check(const struct layout_params *p, char *err, size_t len)
{
	int rc;

	if ((rc = check_range("world size", p->world, 1, LAYOUT_MAX_RANKS, err,
			      len)) ||
	    (rc = check_range("dp", p->dp, 1, LAYOUT_MAX_RANKS, err, len)) ||
	    (rc = check_range("ep", p->ep, 1, LAYOUT_MAX_RANKS, err, len)) ||
	    (rc = check_range("pp", p->pp, 1, LAYOUT_MAX_RANKS, err, len)) ||
	    (rc = check_range("E (experts per layer)", p->E, 1,
			      LAYOUT_MAX_EXPERTS, err, len)) ||
	    (rc = check_range("L (layers)", p->L, 1, LAYOUT_MAX_LAYERS, err,
			      len)))
		return rc;
	if ((long)p->dp * p->pp != p->world)
		return sigma_set_err(
		    err, len, EINVAL,
		    "dp %d x pp %d = %ld ranks, but the job has %d ranks: dp x pp must equal the number of tasks",
		    p->dp, p->pp, (long)p->dp * p->pp, p->world);
	if (p->dp % p->ep != 0)
		return sigma_set_err(
		    err, len, EINVAL,
		    "ep %d does not divide dp %d: expert groups are made of ep ranks of one data-parallel group",
		    p->ep, p->dp);
	if (p->E % p->ep != 0)
		return sigma_set_err(
		    err, len, EINVAL,
		    "%d experts per layer cannot be sharded evenly over ep %d ranks: E must be a multiple of ep",
		    p->E, p->ep);
	if (p->L < p->pp)
		return sigma_set_err(
		    err, len, EINVAL,
		    "%d layers cannot fill pp %d pipeline stages: every stage needs at least one layer",
		    p->L, p->pp);
	if (p->L % p->pp != 0)
		return sigma_set_err(
		    err, len, EINVAL,
		    "%d layers cannot be split evenly over pp %d pipeline stages: L must be a multiple of pp",
		    p->L, p->pp);
	if (p->batch < 0 || p->micro < 0)
		return sigma_set_err(
		    err, len, EINVAL,
		    "batch %ld and micro-batches %d must not be negative",
		    p->batch, p->micro);
	if (p->batch > 0) {
		if (p->batch % p->dp != 0)
			return sigma_set_err(
			    err, len, EINVAL,
			    "global batch of %ld sequences cannot be split evenly over dp %d ranks",
			    p->batch, p->dp);
		if (p->micro > 0 && (p->batch / p->dp) % p->micro != 0)
			return sigma_set_err(
			    err, len, EINVAL,
			    "per-rank batch of %ld sequences (batch %ld / dp %d) cannot be cut into %d equal micro-batches",
			    p->batch / p->dp, p->batch, p->dp, p->micro);
	}
	return 0;
}

int layout_coords(const struct layout_params *p, int rank,
		  struct layout_coords *c)
{
	if (rank < 0 || rank >= p->world || p->dp <= 0 || p->ep <= 0 ||
	    p->pp <= 0)
		return -EINVAL;
	c->rank = rank;
	c->stage = rank / p->dp;
	c->dp_index = rank % p->dp;
	c->ep_group = c->dp_index / p->ep;
	c->ep_rank = c->dp_index % p->ep;
	c->layer_count = p->L / p->pp;
	c->layer_first = c->stage * c->layer_count;
	return 0;
}

int layout_rank_of(const struct layout_params *p, int stage, int dp_index)
{
	if (stage < 0 || stage >= p->pp || dp_index < 0 || dp_index >= p->dp)
		return -EINVAL;
	return stage * p->dp + dp_index;
}

int layout_group_size(const struct layout_params *p, enum layout_group g)
{
	switch (g) {
	case LAYOUT_GROUP_DP:
		return p->dp;
	case LAYOUT_GROUP_EP:
		return p->ep;
	case LAYOUT_GROUP_EXPERT_DP:
		return p->dp / p->ep;
	case LAYOUT_GROUP_PP:
		return p->pp;
	default:
		return -EINVAL;
	}
}

int layout_group_split(const struct layout_params *p, int rank,
		       enum layout_group g, int *color, int *key)
{
	struct layout_coords c;
	int groups = p->dp / p->ep; /* expert groups per stage */

	if (layout_coords(p, rank, &c) < 0)
		return -EINVAL;
	switch (g) {
	case LAYOUT_GROUP_DP:
		*color = c.stage;
		*key = c.dp_index;
		return 0;
	case LAYOUT_GROUP_EP:
		*color = c.stage * groups + c.ep_group;
		*key = c.ep_rank;
		return 0;
	case LAYOUT_GROUP_EXPERT_DP:
		*color = c.stage * p->ep + c.ep_rank;
		*key = c.ep_group;
		return 0;
	case LAYOUT_GROUP_PP:
		*color = c.dp_index;
		*key = c.stage;
		return 0;
	default:
		return -EINVAL;
	}
}

int layout_group_members(const struct layout_params *p, int rank,
			 enum layout_group g, int *members, int max)
{
	int color, key, n = 0, r, c2, k2;

	if (layout_group_split(p, rank, g, &color, &key) < 0)
		return -EINVAL;
	if (layout_group_size(p, g) > max)
		return -EINVAL;
	/* the keys of a group are 0..size-1, so key order is slot order */
	for (r = 0; r < p->world; r++) {
		layout_group_split(p, r, g, &c2, &k2);
		if (c2 != color)
			continue;
		if (k2 < 0 || k2 >= max)
			return -EINVAL;
		members[k2] = r;
		n++;
	}
	return n;
}

/* ---- expert placement --------------------------------------------------- */

int layout_placement_init(struct layout_placement *pl, int L, int E, int ep,
			  char *err, size_t len)
{
	int l, e, per;

	memset(pl, 0, sizeof(*pl));
	if (L < 1 || L > LAYOUT_MAX_LAYERS || E < 1 || E > LAYOUT_MAX_EXPERTS ||
	    ep < 1 || ep > E || E % ep != 0)
		return sigma_set_err(
		    err, len, EINVAL,
		    "expert placement of L=%d E=%d over ep=%d: need 1 <= L <= %d, 1 <= E <= %d, E a multiple of ep",
		    L, E, ep, LAYOUT_MAX_LAYERS, LAYOUT_MAX_EXPERTS);
	pl->owner = calloc((size_t)L * E, sizeof(*pl->owner));
	if (!pl->owner)
		return sigma_set_err(err, len, ENOMEM,
				     "expert placement: out of memory");
	pl->L = L;
	pl->E = E;
	pl->ep = ep;
	per = E / ep;
	for (l = 0; l < L; l++)
		for (e = 0; e < E; e++)
			pl->owner[(size_t)l * E + e] = (int16_t)(e / per);
	return 0;
}

void layout_placement_fini(struct layout_placement *pl)
{
	if (!pl)
		return;
	free(pl->owner);
	memset(pl, 0, sizeof(*pl));
}

int layout_placement_check(const struct layout_placement *pl, char *err,
			   size_t len)
{
	int l, e, r, per;
	int *count;

	if (!pl->owner || pl->L < 1 || pl->L > LAYOUT_MAX_LAYERS || pl->E < 1 ||
	    pl->E > LAYOUT_MAX_EXPERTS || pl->ep < 1 || pl->ep > pl->E ||
	    pl->E % pl->ep != 0)
		return sigma_set_err(
		    err, len, EINVAL,
		    "expert placement: bad shape L=%d E=%d ep=%d", pl->L, pl->E,
		    pl->ep);
	count = calloc((size_t)pl->ep, sizeof(*count));
	if (!count)
		return sigma_set_err(err, len, ENOMEM,
				     "expert placement: out of memory");
	per = pl->E / pl->ep;
	for (l = 0; l < pl->L; l++) {
		memset(count, 0, (size_t)pl->ep * sizeof(*count));
		for (e = 0; e < pl->E; e++) {
			r = pl->owner[(size_t)l * pl->E + e];
			if (r < 0 || r >= pl->ep) {
				free(count);
				return sigma_set_err(
				    err, len, EINVAL,
				    "expert placement: layer %d expert %d is on ep rank %d, outside [0, %d)",
				    l, e, r, pl->ep);
			}
			count[r]++;
		}
		for (r = 0; r < pl->ep; r++) {
			if (count[r] != per) {
				int c = count[r];

				free(count);
				return sigma_set_err(
				    err, len, EINVAL,
				    "expert placement: layer %d puts %d experts on ep rank %d, every ep rank must hold E/ep = %d",
				    l, c, r, per);
			}
		}
	}
	free(count);
	return 0;
}

int layout_placement_owner(const struct layout_placement *pl, int l, int e)
{
	if (!pl->owner || l < 0 || l >= pl->L || e < 0 || e >= pl->E)
		return -EINVAL;
	return pl->owner[(size_t)l * pl->E + e];
}

int layout_placement_local(const struct layout_placement *pl, int l,
			   int ep_rank, int *experts, int max)
{
	int e, n = 0;

	if (!pl->owner || l < 0 || l >= pl->L || ep_rank < 0 ||
	    ep_rank >= pl->ep)
		return -EINVAL;
	for (e = 0; e < pl->E; e++) {
		if (pl->owner[(size_t)l * pl->E + e] != ep_rank)
			continue;
		if (n >= max)
			return -EINVAL;
		experts[n++] = e;
	}
	return n;
}

int layout_placement_format(const struct layout_placement *pl, char **out)
{
	/* a layer line: "layer.NNNN=" and up to 5 characters per expert */
	size_t cap = 64 + (size_t)pl->L * (24 + (size_t)pl->E * 6), off = 0;
	char *buf;
	int l, e, n;

	*out = NULL;
	if (!pl->owner)
		return -EINVAL;
	buf = malloc(cap);
	if (!buf)
		return -ENOMEM;
	n = snprintf(buf, cap, "L=%d\nE=%d\nep=%d\n", pl->L, pl->E, pl->ep);
	off = (size_t)n;
	for (l = 0; l < pl->L; l++) {
		n = snprintf(buf + off, cap - off, "layer.%d=", l);
		off += (size_t)n;
		for (e = 0; e < pl->E; e++) {
			n = snprintf(buf + off, cap - off, "%s%d", e ? "," : "",
				     pl->owner[(size_t)l * pl->E + e]);
			off += (size_t)n;
		}
		buf[off++] = '\n';
		buf[off] = '\0';
	}
	*out = buf;
	return 0;
}

struct placement_parse {
	struct layout_placement *pl;
	int L, E, ep;
	bool *seen; /* [L] */
};

static int placement_layer(struct placement_parse *pp, long l,
			   const char *value, char *err, size_t len)
{
	struct layout_placement *pl = pp->pl;
	const char *s = value;
	char num[16];
	long r;
	int e, rc;

	if (pp->seen[l])
		return sigma_set_err(err, len, EINVAL, "layer.%ld given twice",
				     l);
	for (e = 0; e < pl->E; e++) {
		size_t k = strcspn(s, ",");

		if (k == 0 || k >= sizeof(num))
			return sigma_set_err(
			    err, len, EINVAL,
			    "layer.%ld: expert %d: expected an ep rank", l, e);
		memcpy(num, s, k);
		num[k] = '\0';
		rc = sigma_parse_long(num, 0, pl->ep - 1, &r);
		if (rc < 0)
			return sigma_set_err(
			    err, len, EINVAL,
			    "layer.%ld: expert %d: '%s' is not an ep rank in [0, %d)",
			    l, e, num, pl->ep);
		pl->owner[(size_t)l * pl->E + e] = (int16_t)r;
		s += k;
		if (e + 1 < pl->E) {
			if (*s != ',')
				return sigma_set_err(
				    err, len, EINVAL,
				    "layer.%ld: %d owners for %d experts", l,
				    e + 1, pl->E);
			s++;
		}
	}
	if (*s != '\0')
		return sigma_set_err(err, len, EINVAL,
				     "layer.%ld: more than %d owners", l,
				     pl->E);
	pp->seen[l] = true;
	return 0;
}

static int placement_kv(const char *key, const char *value, void *arg,
			char *err, size_t len)
{
	struct placement_parse *pp = arg;
	struct layout_placement *pl = pp->pl;
	long v;
	int rc;

	if (!strcmp(key, "L") || !strcmp(key, "E") || !strcmp(key, "ep")) {
		int *dst = key[0] == 'L'   ? &pp->L
			   : key[0] == 'E' ? &pp->E
					   : &pp->ep;

		if (pl->owner)
			return sigma_set_err(err, len, EINVAL,
					     "%s after the first layer line",
					     key);
		if (*dst)
			return sigma_set_err(err, len, EINVAL, "%s given twice",
					     key);
		rc = sigma_parse_long(value, 1, LAYOUT_MAX_EXPERTS, &v);
		if (rc < 0)
			return sigma_set_err(err, len, EINVAL,
					     "%s=%s: not a positive count", key,
					     value);
		*dst = (int)v;
		return 0;
	}
	if (!strncmp(key, "layer.", 6)) {
		if (!pl->owner) {
			if (!pp->L || !pp->E || !pp->ep)
				return sigma_set_err(
				    err, len, EINVAL,
				    "L, E and ep must come before the layer lines");
			rc = layout_placement_init(pl, pp->L, pp->E, pp->ep,
						   err, len);
			if (rc < 0)
				return rc;
			pp->seen = calloc((size_t)pl->L, sizeof(*pp->seen));
			if (!pp->seen)
				return sigma_set_err(err, len, ENOMEM,
						     "out of memory");
		}
		rc = sigma_parse_long(key + 6, 0, pl->L - 1, &v);
		if (rc < 0)
			return sigma_set_err(err, len, EINVAL,
					     "%s: layer index outside [0, %d)",
					     key, pl->L);
		return placement_layer(pp, v, value, err, len);
	}
	return sigma_set_err(err, len, EINVAL, "unknown key '%s'", key);
}

int layout_placement_parse(struct layout_placement *pl, const char *text,
			   char *err, size_t len)
{
	struct placement_parse pp = {.pl = pl};
	int rc, l;

	memset(pl, 0, sizeof(*pl));
	rc = sigma_kv_parse_buf(text, strlen(text), "expert placement",
				placement_kv, &pp, err, len);
	if (rc < 0)
		goto out_fini;
	if (!pl->owner) {
		rc = sigma_set_err(err, len, EINVAL,
				   "expert placement: no layer lines");
		goto out_fini;
	}
	for (l = 0; l < pl->L; l++) {
		if (!pp.seen[l]) {
			rc = sigma_set_err(
			    err, len, EINVAL,
			    "expert placement: layer.%d is missing", l);
			goto out_fini;
		}
	}
	rc = layout_placement_check(pl, err, len);
	if (rc < 0)
		goto out_fini;
	free(pp.seen);
	return 0;

out_fini:
	free(pp.seen);
	layout_placement_fini(pl);
	return rc;
}

/* ---- 1F1B schedule --------------------------------------------------------
 */

static const char *const pipe_op_names[] = {
    [PIPE_FWD] = "fwd",
    [PIPE_BWD] = "bwd",
    [PIPE_RECV_ACT] = "recv_act",
    [PIPE_SEND_ACT] = "send_act",
    [PIPE_RECV_GRAD] = "recv_grad",
    [PIPE_SEND_GRAD] = "send_grad",
    [PIPE_SEND_ACT_RECV_GRAD] = "send_act_recv_grad",
    [PIPE_SEND_GRAD_RECV_ACT] = "send_grad_recv_act",
};

const char *pipe_op_name(enum pipe_op op)
{
	if ((int)op < 0 || op > PIPE_SEND_GRAD_RECV_ACT)
		return "?";
	return pipe_op_names[op];
}

size_t pipe_schedule_max(int micro)
{
	return micro > 0 ? 6 * (size_t)micro : 0;
}

struct sched {
	struct pipe_action *out;
	size_t max, n;
	int err;
};

static void emit(struct sched *s, enum pipe_op op, int micro, int micro2)
{
	if (s->n >= s->max) {
		s->err = -ENOSPC;
		return;
	}
	s->out[s->n++] = (struct pipe_action){op, micro, micro2};
}

int pipe_schedule_1f1b(int stage, int stages, int micro,
		       struct pipe_action *out, size_t max, size_t *n)
{
	struct sched s = {.out = out, .max = max};
	bool first, last;
	int warmup, steady, i;

	*n = 0;
	if (stages < 1 || stages > LAYOUT_MAX_RANKS || stage < 0 ||
	    stage >= stages || micro < 1 || micro > 1 << 20)
		return -EINVAL;
	first = stage == 0;
	last = stage == stages - 1;
	warmup = stages - stage - 1;
	if (warmup > micro)
		warmup = micro;
	steady = micro - warmup;

	/* warm-up: forwards only */
	for (i = 0; i < warmup; i++) {
		if (!first)
			emit(&s, PIPE_RECV_ACT, i, -1);
		emit(&s, PIPE_FWD, i, -1);
		if (!last)
			emit(&s, PIPE_SEND_ACT, i, -1);
	}
	if (steady > 0 && !first)
		emit(&s, PIPE_RECV_ACT, warmup, -1);
	/* steady: forward of warmup + i, backward of i */
	for (i = 0; i < steady; i++) {
		int f = warmup + i;

		emit(&s, PIPE_FWD, f, -1);
		if (!last)
			emit(&s, PIPE_SEND_ACT_RECV_GRAD, f, i);
		emit(&s, PIPE_BWD, i, -1);
		if (!first) {
			if (i + 1 < steady)
				emit(&s, PIPE_SEND_GRAD_RECV_ACT, i, f + 1);
			else
				emit(&s, PIPE_SEND_GRAD, i, -1);
		}
	}
	/* cool-down: the backwards of the warm-up forwards */
	for (i = steady; i < micro; i++) {
		if (!last)
			emit(&s, PIPE_RECV_GRAD, i, -1);
		emit(&s, PIPE_BWD, i, -1);
		if (!first)
			emit(&s, PIPE_SEND_GRAD, i, -1);
	}
	if (s.err)
		return s.err;
	*n = s.n;
	return 0;
}

/* ---- gradient buckets ---------------------------------------------------- */

int layout_bucket_plan(size_t n, const size_t *ready, size_t k, size_t bucket,
		       struct layout_bucket *out, size_t max)
{
	size_t sent_to = n, cnt = 0;

	if (bucket == 0 || k == 0 || ready[k - 1] != 0)
		return -EINVAL;
	for (size_t i = 0; i < k; i++) {
		if (ready[i] > n || (i > 0 && ready[i] >= ready[i - 1]))
			return -EINVAL;
		if (!layout_bucket_due(sent_to, ready[i], bucket))
			continue;
		if (cnt == max)
			return -ENOSPC;
		out[cnt].off = ready[i];
		out[cnt++].len = sent_to - ready[i];
		sent_to = ready[i];
	}
	if (sent_to > 0) {
		if (cnt == max)
			return -ENOSPC;
		out[cnt].off = 0;
		out[cnt++].len = sent_to;
	}
	return (int)cnt;
}
