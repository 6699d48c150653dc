/*
 * test_comm_layout.c - layouts: every refusal and its reason, rank
 * coordinates, the groups the communicators are split into, expert
 * placement tables, the 1F1B schedule (per-stage properties, and all
 * stages run together with synchronous transfers without deadlock), and
 * the plan of gradient buckets.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sigma.h"
#include "layout.h"

static struct layout_params lp(int world, int dp, int ep, int pp, int E, int L)
{
	return (struct layout_params){
	    .world = world, .dp = dp, .ep = ep, .pp = pp, .E = E, .L = L};
}

/* check p is refused with a reason that contains why */
static void refused(struct layout_params p, const char *why)
{
	char err[256] = "";

	assert_int_equal(layout_check(&p, err, sizeof(err)), -EINVAL);
	if (!strstr(err, why))
		fail_msg("reason '%s' does not say '%s'", err, why);
}

static void test_check_accepts(void **state)
{
	static const int ok[][6] = {
	    /* world dp ep pp E L */
	    {1, 1, 1, 1, 4, 2}, {2, 2, 1, 1, 4, 2},    {2, 2, 2, 1, 4, 2},
	    {2, 1, 1, 2, 4, 2}, {4, 4, 2, 1, 4, 2},    {4, 2, 2, 2, 4, 2},
	    {8, 4, 4, 2, 8, 4}, {16, 8, 2, 2, 64, 32},
	};
	char err[256];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		struct layout_params p = lp(ok[i][0], ok[i][1], ok[i][2],
					    ok[i][3], ok[i][4], ok[i][5]);

		if (layout_check(&p, err, sizeof(err)) != 0)
			fail_msg("layout %zu refused: %s", i, err);
	}
}

static void test_check_refusals(void **state)
{
	struct layout_params p;

	(void)state;
	refused(lp(0, 1, 1, 1, 4, 2), "world size=0 is out of range");
	refused(lp(LAYOUT_MAX_RANKS + 1, 1, 1, 1, 4, 2), "world size");
	refused(lp(2, 0, 1, 2, 4, 2), "dp=0 is out of range");
	refused(lp(2, 2, 0, 1, 4, 2), "ep=0 is out of range");
	refused(lp(2, 2, 1, 0, 4, 2), "pp=0 is out of range");
	refused(lp(2, 2, 1, 1, 0, 2), "E (experts per layer)=0");
	refused(lp(2, 2, 1, 1, LAYOUT_MAX_EXPERTS + 1, 2),
		"E (experts per layer)");
	refused(lp(2, 2, 1, 1, 4, 0), "L (layers)=0");
	refused(lp(2, 2, 1, 1, 4, -3), "L (layers)=-3");
	/* dp x pp must be the job */
	refused(lp(4, 2, 1, 1, 4, 2),
		"dp 2 x pp 1 = 2 ranks, but the job has 4 ranks");
	refused(lp(3, 2, 1, 2, 4, 2), "must equal the number of tasks");
	/* expert groups inside data-parallel groups */
	refused(lp(4, 4, 3, 1, 6, 2), "ep 3 does not divide dp 4");
	refused(lp(2, 1, 2, 2, 4, 2), "ep 2 does not divide dp 1");
	/* experts shard evenly */
	refused(lp(4, 4, 4, 1, 6, 2),
		"6 experts per layer cannot be sharded evenly over ep 4");
	refused(lp(2, 2, 2, 1, 1, 2),
		"1 experts per layer cannot be sharded evenly over ep 2");
	/* layers split evenly over stages */
	refused(lp(4, 1, 1, 4, 4, 2),
		"2 layers cannot fill pp 4 pipeline stages");
	refused(lp(3, 1, 1, 3, 4, 4),
		"4 layers cannot be split evenly over pp 3");
	/* batch and micro-batches */
	p = lp(4, 4, 1, 1, 4, 2);
	p.batch = 6;
	refused(p,
		"global batch of 6 sequences cannot be split evenly over dp 4");
	p.batch = 8;
	p.micro = 3;
	refused(
	    p,
	    "per-rank batch of 2 sequences (batch 8 / dp 4) cannot be cut into 3");
	p.batch = -1;
	p.micro = 0;
	refused(p, "must not be negative");
	p.batch = 16;
	p.micro = 2;
	assert_int_equal(layout_check(&p, NULL, 0), 0);
}

static void test_coords(void **state)
{
	struct layout_params p = lp(8, 4, 2, 2, 8, 6);
	struct layout_coords c;
	int r;

	(void)state;
	assert_int_equal(layout_check(&p, NULL, 0), 0);
	assert_int_equal(layout_coords(&p, 5, &c), 0);
	assert_int_equal(c.rank, 5);
	assert_int_equal(c.stage, 1);
	assert_int_equal(c.dp_index, 1);
	assert_int_equal(c.ep_group, 0);
	assert_int_equal(c.ep_rank, 1);
	assert_int_equal(c.layer_first, 3);
	assert_int_equal(c.layer_count, 3);
	assert_int_equal(layout_coords(&p, 2, &c), 0);
	assert_int_equal(c.stage, 0);
	assert_int_equal(c.ep_group, 1);
	assert_int_equal(c.ep_rank, 0);
	assert_int_equal(c.layer_first, 0);
	assert_int_equal(layout_coords(&p, 8, &c), -EINVAL);
	assert_int_equal(layout_coords(&p, -1, &c), -EINVAL);
	for (r = 0; r < 8; r++) {
		assert_int_equal(layout_coords(&p, r, &c), 0);
		assert_int_equal(layout_rank_of(&p, c.stage, c.dp_index), r);
		assert_int_equal(c.dp_index, c.ep_group * p.ep + c.ep_rank);
	}
	assert_int_equal(layout_rank_of(&p, 2, 0), -EINVAL);
	assert_int_equal(layout_rank_of(&p, 0, 4), -EINVAL);
}

/* same value of the coordinate that defines group g */
static bool same_group(const struct layout_coords *a,
		       const struct layout_coords *b, enum layout_group g)
{
	switch (g) {
	case LAYOUT_GROUP_DP:
		return a->stage == b->stage;
	case LAYOUT_GROUP_EP:
		return a->stage == b->stage && a->ep_group == b->ep_group;
	case LAYOUT_GROUP_EXPERT_DP:
		return a->stage == b->stage && a->ep_rank == b->ep_rank;
	case LAYOUT_GROUP_PP:
		return a->dp_index == b->dp_index;
	default:
		return false;
	}
}

static void check_groups(const struct layout_params *p)
{
	int members[64], seen[64];
	enum layout_group g;
	int r, i;

	for (g = 0; g < LAYOUT_GROUP_COUNT; g++) {
		int size = layout_group_size(p, g);

		memset(seen, 0, sizeof(seen));
		for (r = 0; r < p->world; r++) {
			struct layout_coords cr, cm;
			int color, key, n;

			assert_int_equal(
			    layout_group_split(p, r, g, &color, &key), 0);
			n = layout_group_members(p, r, g, members, 64);
			assert_int_equal(n, size);
			assert_true(key >= 0 && key < size);
			assert_int_equal(members[key], r);
			layout_coords(p, r, &cr);
			for (i = 0; i < n; i++) {
				int c2, k2;

				layout_group_split(p, members[i], g, &c2, &k2);
				assert_int_equal(c2, color);
				assert_int_equal(k2, i);
				layout_coords(p, members[i], &cm);
				assert_true(same_group(&cr, &cm, g));
				if (g == LAYOUT_GROUP_PP)
					assert_int_equal(cm.stage, i);
			}
			seen[r]++;
		}
		/* every rank in exactly one group of each kind, group count */
		for (r = 0; r < p->world; r++)
			assert_int_equal(seen[r], 1);
		assert_int_equal(p->world % size, 0);
	}
	assert_int_equal(layout_group_size(p, LAYOUT_GROUP_DP), p->dp);
	assert_int_equal(layout_group_size(p, LAYOUT_GROUP_EP), p->ep);
	assert_int_equal(layout_group_size(p, LAYOUT_GROUP_EXPERT_DP),
			 p->dp / p->ep);
	assert_int_equal(layout_group_size(p, LAYOUT_GROUP_PP), p->pp);
}

static void test_groups(void **state)
{
	struct layout_params ps[] = {
	    lp(1, 1, 1, 1, 4, 2),  lp(4, 2, 2, 2, 4, 2),  lp(8, 4, 2, 2, 8, 4),
	    lp(12, 6, 3, 2, 6, 4), lp(16, 4, 4, 4, 8, 8), lp(6, 1, 1, 6, 2, 6),
	};
	struct layout_params p = lp(8, 4, 2, 2, 8, 4);
	int members[8];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(ps) / sizeof(ps[0]); i++) {
		assert_int_equal(layout_check(&ps[i], NULL, 0), 0);
		check_groups(&ps[i]);
	}
	/* stage-major: a data-parallel group is consecutive ranks */
	assert_int_equal(
	    layout_group_members(&p, 6, LAYOUT_GROUP_DP, members, 8), 4);
	assert_int_equal(members[0], 4);
	assert_int_equal(members[3], 7);
	assert_int_equal(
	    layout_group_members(&p, 6, LAYOUT_GROUP_EP, members, 8), 2);
	assert_int_equal(members[0], 6);
	assert_int_equal(members[1], 7);
	assert_int_equal(
	    layout_group_members(&p, 6, LAYOUT_GROUP_EXPERT_DP, members, 8), 2);
	assert_int_equal(members[0], 4);
	assert_int_equal(members[1], 6);
	assert_int_equal(
	    layout_group_members(&p, 6, LAYOUT_GROUP_PP, members, 8), 2);
	assert_int_equal(members[0], 2);
	assert_int_equal(members[1], 6);
	/* too small an array, a bad group, a bad rank */
	assert_int_equal(
	    layout_group_members(&p, 6, LAYOUT_GROUP_DP, members, 3), -EINVAL);
	assert_int_equal(
	    layout_group_members(&p, 8, LAYOUT_GROUP_DP, members, 8), -EINVAL);
	assert_int_equal(layout_group_size(&p, LAYOUT_GROUP_COUNT), -EINVAL);
	assert_string_equal(layout_group_name(LAYOUT_GROUP_EXPERT_DP),
			    "expert_dp");
	assert_string_equal(layout_group_name(LAYOUT_GROUP_COUNT), "?");
}

/* ---- expert placement --------------------------------------------------- */

static void test_placement_blocks(void **state)
{
	struct layout_placement pl;
	int experts[8], e, r, n;
	char err[256];

	(void)state;
	assert_int_equal(layout_placement_init(&pl, 3, 8, 4, err, sizeof(err)),
			 0);
	assert_int_equal(layout_placement_check(&pl, err, sizeof(err)), 0);
	for (e = 0; e < 8; e++)
		assert_int_equal(layout_placement_owner(&pl, 2, e), e / 2);
	for (r = 0; r < 4; r++) {
		n = layout_placement_local(&pl, 1, r, experts, 8);
		assert_int_equal(n, 2);
		assert_int_equal(experts[0], 2 * r);
		assert_int_equal(experts[1], 2 * r + 1);
	}
	assert_int_equal(layout_placement_owner(&pl, 3, 0), -EINVAL);
	assert_int_equal(layout_placement_owner(&pl, 0, 8), -EINVAL);
	assert_int_equal(layout_placement_local(&pl, 0, 4, experts, 8),
			 -EINVAL);
	assert_int_equal(layout_placement_local(&pl, 0, 0, experts, 1),
			 -EINVAL);

	/* a rebalanced table: experts 0 and 7 swap ep ranks in layer 1 */
	pl.owner[1 * 8 + 0] = 3;
	pl.owner[1 * 8 + 7] = 0;
	assert_int_equal(layout_placement_check(&pl, err, sizeof(err)), 0);
	n = layout_placement_local(&pl, 1, 0, experts, 8);
	assert_int_equal(n, 2);
	assert_int_equal(experts[0], 1);
	assert_int_equal(experts[1], 7);
	/* unbalanced: refused with the layer and the rank */
	pl.owner[2 * 8 + 0] = 1;
	assert_int_equal(layout_placement_check(&pl, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "layer 2 puts 1 experts on ep rank 0"));
	pl.owner[2 * 8 + 0] = 4;
	assert_int_equal(layout_placement_check(&pl, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "layer 2 expert 0 is on ep rank 4"));
	layout_placement_fini(&pl);
	layout_placement_fini(NULL);

	assert_int_equal(layout_placement_init(&pl, 2, 6, 4, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "E a multiple of ep"));
	assert_int_equal(layout_placement_init(&pl, 0, 8, 2, err, sizeof(err)),
			 -EINVAL);
	assert_int_equal(layout_placement_init(&pl, 2, 2, 4, err, sizeof(err)),
			 -EINVAL);
}

static void test_placement_roundtrip(void **state)
{
	struct layout_placement pl, back;
	char err[256], *text = NULL;
	int l, e;

	(void)state;
	assert_int_equal(layout_placement_init(&pl, 2, 4, 2, err, sizeof(err)),
			 0);
	pl.owner[0] = 1; /* layer 0: 1,0,0,1 */
	pl.owner[3] = 1;
	pl.owner[1] = 0;
	pl.owner[2] = 0;
	assert_int_equal(layout_placement_format(&pl, &text), 0);
	assert_string_equal(
	    text, "L=2\nE=4\nep=2\nlayer.0=1,0,0,1\nlayer.1=0,0,1,1\n");
	assert_int_equal(layout_placement_parse(&back, text, err, sizeof(err)),
			 0);
	assert_int_equal(back.L, 2);
	assert_int_equal(back.E, 4);
	assert_int_equal(back.ep, 2);
	for (l = 0; l < 2; l++)
		for (e = 0; e < 4; e++)
			assert_int_equal(layout_placement_owner(&back, l, e),
					 layout_placement_owner(&pl, l, e));
	free(text);
	layout_placement_fini(&back);

	/* a big table survives too */
	layout_placement_fini(&pl);
	assert_int_equal(
	    layout_placement_init(&pl, 64, 256, 16, err, sizeof(err)), 0);
	assert_int_equal(layout_placement_format(&pl, &text), 0);
	assert_int_equal(layout_placement_parse(&back, text, err, sizeof(err)),
			 0);
	assert_memory_equal(back.owner, pl.owner, 64 * 256 * sizeof(int16_t));
	free(text);
	layout_placement_fini(&back);
	layout_placement_fini(&pl);
}

static void parse_refused(const char *text, const char *why)
{
	struct layout_placement pl;
	char err[256] = "";

	assert_int_equal(layout_placement_parse(&pl, text, err, sizeof(err)),
			 -EINVAL);
	assert_null(pl.owner);
	if (!strstr(err, why))
		fail_msg("reason '%s' does not say '%s'", err, why);
}

static void test_placement_parse_refusals(void **state)
{
	(void)state;
	parse_refused("L=1\nE=2\nep=2\n", "no layer lines");
	parse_refused("L=2\nE=2\nep=2\nlayer.0=0,1\n", "layer.1 is missing");
	parse_refused("L=1\nE=2\nep=2\nlayer.0=0,1\nlayer.0=1,0\n",
		      "layer.0 given twice");
	parse_refused("L=1\nE=2\nep=2\nlayer.0=0,2\n", "'2' is not an ep rank");
	parse_refused("L=1\nE=2\nep=2\nlayer.0=0\n", "1 owners for 2 experts");
	parse_refused("L=1\nE=2\nep=2\nlayer.0=0,1,1\n", "more than 2 owners");
	parse_refused("L=1\nE=2\nep=2\nlayer.0=0,,\n", "expected an ep rank");
	parse_refused("L=1\nE=2\nep=2\nlayer.0=0,0\n",
		      "puts 2 experts on ep rank 0");
	parse_refused("L=1\nE=2\nep=2\nlayer.1=0,1\n",
		      "layer index outside [0, 1)");
	parse_refused("L=1\nE=2\nlayer.0=0,1\n",
		      "must come before the layer lines");
	parse_refused("L=1\nE=2\nep=2\nlayer.0=0,1\nep=1\n",
		      "after the first layer line");
	parse_refused("L=1\nL=2\n", "L given twice");
	parse_refused("L=0\n", "not a positive count");
	parse_refused("L=1\nE=3\nep=2\nlayer.0=0,1,1\n", "E a multiple of ep");
	parse_refused("colour=blue\n", "unknown key 'colour'");
}

/* ---- 1F1B schedule --------------------------------------------------------
 */

static size_t sched(int s, int p, int m, struct pipe_action *out, size_t max)
{
	size_t n = 0;

	assert_int_equal(pipe_schedule_1f1b(s, p, m, out, max, &n), 0);
	return n;
}

static void expect_ops(int s, int p, int m, const char *want)
{
	struct pipe_action a[64];
	char got[1024] = "";
	size_t n = sched(s, p, m, a, 64), i;

	for (i = 0; i < n; i++) {
		char one[64];

		if (a[i].micro2 >= 0)
			snprintf(one, sizeof(one), "%s%s(%d,%d)", i ? " " : "",
				 pipe_op_name(a[i].op), a[i].micro,
				 a[i].micro2);
		else
			snprintf(one, sizeof(one), "%s%s(%d)", i ? " " : "",
				 pipe_op_name(a[i].op), a[i].micro);
		strcat(got, one);
	}
	assert_string_equal(got, want);
}

static void test_schedule_small(void **state)
{
	(void)state;
	expect_ops(0, 1, 2, "fwd(0) bwd(0) fwd(1) bwd(1)");
	expect_ops(0, 2, 3,
		   "fwd(0) send_act(0) fwd(1) send_act_recv_grad(1,0) bwd(0) "
		   "fwd(2) send_act_recv_grad(2,1) bwd(1) recv_grad(2) bwd(2)");
	expect_ops(1, 2, 3,
		   "recv_act(0) fwd(0) bwd(0) send_grad_recv_act(0,1) fwd(1) "
		   "bwd(1) send_grad_recv_act(1,2) fwd(2) bwd(2) send_grad(2)");
	/* fewer micro-batches than stages: all forwards, then all backwards */
	expect_ops(0, 4, 2,
		   "fwd(0) send_act(0) fwd(1) send_act(1) recv_grad(0) bwd(0) "
		   "recv_grad(1) bwd(1)");
	expect_ops(
	    1, 3, 1,
	    "recv_act(0) fwd(0) send_act(0) recv_grad(0) bwd(0) send_grad(0)");
}

static void test_schedule_errors(void **state)
{
	struct pipe_action a[16];
	size_t n = 99;

	(void)state;
	assert_int_equal(pipe_schedule_1f1b(2, 2, 4, a, 16, &n), -EINVAL);
	assert_int_equal(n, 0);
	assert_int_equal(pipe_schedule_1f1b(-1, 2, 4, a, 16, &n), -EINVAL);
	assert_int_equal(pipe_schedule_1f1b(0, 0, 4, a, 16, &n), -EINVAL);
	assert_int_equal(pipe_schedule_1f1b(0, 2, 0, a, 16, &n), -EINVAL);
	assert_int_equal(pipe_schedule_1f1b(0, 2, 4, a, 5, &n), -ENOSPC);
	assert_int_equal(n, 0);
	assert_int_equal(pipe_schedule_max(0), 0);
	assert_int_equal(pipe_schedule_max(3), 18);
	assert_string_equal(pipe_op_name(PIPE_SEND_GRAD_RECV_ACT),
			    "send_grad_recv_act");
	assert_string_equal(pipe_op_name((enum pipe_op)99), "?");
}

/* what an action sends and receives: kind 'a' (activation) or 'g' */
struct xfer {
	char kind;
	int micro;
	bool send; /* else receive */
};

static int action_xfers(const struct pipe_action *a, struct xfer x[2])
{
	switch (a->op) {
	case PIPE_RECV_ACT:
		x[0] = (struct xfer){'a', a->micro, false};
		return 1;
	case PIPE_SEND_ACT:
		x[0] = (struct xfer){'a', a->micro, true};
		return 1;
	case PIPE_RECV_GRAD:
		x[0] = (struct xfer){'g', a->micro, false};
		return 1;
	case PIPE_SEND_GRAD:
		x[0] = (struct xfer){'g', a->micro, true};
		return 1;
	case PIPE_SEND_ACT_RECV_GRAD:
		x[0] = (struct xfer){'a', a->micro, true};
		x[1] = (struct xfer){'g', a->micro2, false};
		return 2;
	case PIPE_SEND_GRAD_RECV_ACT:
		x[0] = (struct xfer){'g', a->micro, true};
		x[1] = (struct xfer){'a', a->micro2, false};
		return 2;
	default:
		return 0;
	}
}

/* the peer stage of a transfer of stage s */
static int xfer_peer(int s, const struct xfer *x)
{
	/* activations flow up the pipeline, gradients down */
	if (x->kind == 'a')
		return x->send ? s + 1 : s - 1;
	return x->send ? s - 1 : s + 1;
}

/*
 * Per-stage properties: each micro-batch forward once, backward once,
 * both in order, forward before backward, at most min(p - s, m) in
 * flight; the transfers a stage must make, each once, in the right place.
 */
static void check_stage(int s, int p, int m, const struct pipe_action *a,
			size_t n)
{
	int fwd_next = 0, bwd_next = 0, in_flight = 0, max_flight = 0, i;
	int *got_act = calloc((size_t)m, sizeof(int));
	int *sent_act = calloc((size_t)m, sizeof(int));
	int *got_grad = calloc((size_t)m, sizeof(int));
	int *sent_grad = calloc((size_t)m, sizeof(int));
	int limit = p - s < m ? p - s : m;
	size_t k;

	assert_non_null(got_act);
	assert_non_null(sent_act);
	assert_non_null(got_grad);
	assert_non_null(sent_grad);
	assert_true(n <= pipe_schedule_max(m));
	for (k = 0; k < n; k++) {
		struct xfer x[2];
		int nx = action_xfers(&a[k], x), j;

		if (a[k].op == PIPE_FWD) {
			assert_int_equal(a[k].micro, fwd_next);
			if (s > 0)
				assert_int_equal(got_act[fwd_next], 1);
			fwd_next++;
			in_flight++;
		} else if (a[k].op == PIPE_BWD) {
			assert_int_equal(a[k].micro, bwd_next);
			assert_true(bwd_next < fwd_next);
			if (s < p - 1)
				assert_int_equal(got_grad[bwd_next], 1);
			bwd_next++;
			in_flight--;
		}
		if (in_flight > max_flight)
			max_flight = in_flight;
		for (j = 0; j < nx; j++) {
			int peer = xfer_peer(s, &x[j]), mi = x[j].micro;

			assert_true(peer >= 0 && peer < p);
			assert_true(mi >= 0 && mi < m);
			if (x[j].kind == 'a' && x[j].send) {
				assert_true(mi <
					    fwd_next); /* after its forward */
				sent_act[mi]++;
			} else if (x[j].kind == 'a') {
				got_act[mi]++;
			} else if (x[j].send) {
				assert_true(mi <
					    bwd_next); /* after its backward */
				sent_grad[mi]++;
			} else {
				got_grad[mi]++;
			}
		}
	}
	assert_int_equal(fwd_next, m);
	assert_int_equal(bwd_next, m);
	assert_int_equal(in_flight, 0);
	assert_int_equal(max_flight, limit);
	for (i = 0; i < m; i++) {
		assert_int_equal(got_act[i], s > 0);
		assert_int_equal(sent_grad[i], s > 0);
		assert_int_equal(sent_act[i], s < p - 1);
		assert_int_equal(got_grad[i], s < p - 1);
	}
	free(got_act);
	free(sent_act);
	free(got_grad);
	free(sent_grad);
}

/*
 * Run all stages together with synchronous (rendezvous) transfers: a
 * transfer completes only when the sender's and the receiver's current
 * actions both contain it. The schedule must finish: no deadlock, and
 * every transfer meets its match.
 */
static void run_pipeline(int p, int m)
{
	struct pipe_action *a[8];
	size_t n[8], pc[8];
	bool done[8][2];
	int s, moved, finished = 0, rounds = 0;

	assert_true(p <= 8);
	for (s = 0; s < p; s++) {
		a[s] = calloc(pipe_schedule_max(m), sizeof(struct pipe_action));
		assert_non_null(a[s]);
		n[s] = sched(s, p, m, a[s], pipe_schedule_max(m));
		check_stage(s, p, m, a[s], n[s]);
		pc[s] = 0;
		done[s][0] = done[s][1] = false;
	}
	while (finished < p) {
		moved = 0;
		for (s = 0; s < p; s++) {
			struct xfer x[2];
			int nx, j;

			if (pc[s] >= n[s])
				continue;
			nx = action_xfers(&a[s][pc[s]], x);
			for (j = 0; j < nx; j++) {
				int q = xfer_peer(s, &x[j]), k, ny;
				struct xfer y[2];

				if (done[s][j] || pc[q] >= n[q])
					continue;
				ny = action_xfers(&a[q][pc[q]], y);
				for (k = 0; k < ny; k++) {
					if (!done[q][k] &&
					    y[k].kind == x[j].kind &&
					    y[k].micro == x[j].micro &&
					    y[k].send != x[j].send &&
					    xfer_peer(q, &y[k]) == s) {
						done[s][j] = done[q][k] = true;
						moved++;
					}
				}
			}
		}
		for (s = 0; s < p; s++) {
			struct xfer x[2];
			int nx, j;
			bool all = true;

			if (pc[s] >= n[s])
				continue;
			nx = action_xfers(&a[s][pc[s]], x);
			for (j = 0; j < nx; j++)
				all = all && done[s][j];
			if (all) {
				pc[s]++;
				done[s][0] = done[s][1] = false;
				moved++;
				if (pc[s] == n[s])
					finished++;
			}
		}
		if (!moved)
			fail_msg(
			    "pipeline of %d stages, %d micro-batches deadlocks",
			    p, m);
		assert_true(++rounds < 100000);
	}
	for (s = 0; s < p; s++)
		free(a[s]);
}

static void test_schedule_properties(void **state)
{
	int p, m;

	(void)state;
	for (p = 1; p <= 8; p++)
		for (m = 1; m <= 12; m++)
			run_pipeline(p, m);
}

/* ---- gradient buckets ---------------------------------------------------- */

/* the plan of n floats reported at ready[k]: returns the count, checks the
 * buckets tile [0, n) downwards, each starting at a reported offset, and
 * each but the last holding at least bucket floats */
static int plan_ok(size_t n, const size_t *ready, size_t k, size_t bucket,
		   struct layout_bucket *b, size_t max)
{
	int cnt = layout_bucket_plan(n, ready, k, bucket, b, max);
	size_t top = n;

	assert_true(cnt > 0);
	for (int i = 0; i < cnt; i++) {
		bool reported = false;

		assert_int_equal(b[i].off + b[i].len, top);
		assert_true(b[i].len > 0);
		for (size_t j = 0; j < k; j++)
			reported |= ready[j] == b[i].off;
		assert_true(reported);
		if (i < cnt - 1)
			assert_true(b[i].len >= bucket);
		top = b[i].off;
	}
	assert_int_equal(top, 0);
	return cnt;
}

static void test_bucket_plan(void **state)
{
	/* a head of 100, three layers of 50, an embedding of 30 */
	const size_t ready[] = { 180, 130, 80, 30, 0 }, n = 280;
	struct layout_bucket b[8];

	(void)state;
	/* smaller than any piece: one bucket per report */
	assert_int_equal(plan_ok(n, ready, 5, 1, b, 8), 5);
	assert_int_equal(b[0].off, 180);
	assert_int_equal(b[0].len, 100);
	assert_int_equal(b[4].len, 30);
	/* 100: the head alone, then two layers, then the rest */
	assert_int_equal(plan_ok(n, ready, 5, 100, b, 8), 3);
	assert_int_equal(b[0].off, 180);
	assert_int_equal(b[1].off, 80);
	assert_int_equal(b[1].len, 100);
	assert_int_equal(b[2].off, 0);
	assert_int_equal(b[2].len, 80);
	/* larger than everything: one bucket at the end */
	assert_int_equal(plan_ok(n, ready, 5, 1000, b, 8), 1);
	assert_int_equal(b[0].off, 0);
	assert_int_equal(b[0].len, n);
	/* exactly everything: started by the last report */
	assert_int_equal(plan_ok(n, ready, 5, n, b, 8), 1);
}

static void test_bucket_plan_random(void **state)
{
	uint64_t st = 12345;

	(void)state;
	for (int t = 0; t < 500; t++) {
		size_t ready[64], k, n, bucket;
		struct layout_bucket b[64];

		st = st * 6364136223846793005ULL + 1442695040888963407ULL;
		k = 1 + (size_t)(st >> 59);
		n = 0;
		for (size_t i = k; i-- > 0;) {
			/* pieces of 1 to 64 floats, built upwards from 0 */
			st = st * 6364136223846793005ULL +
			     1442695040888963407ULL;
			ready[i] = n;
			n += 1 + (size_t)(st >> 58);
		}
		bucket = 1 + (size_t)(st >> 40) % (n + 8);
		plan_ok(n, ready, k, bucket, b, 64);
	}
}

static void test_bucket_plan_refusals(void **state)
{
	struct layout_bucket b[4];
	const size_t up[] = { 10, 20, 0 }, nozero[] = { 20, 10 },
		     high[] = { 50, 0 }, ok[] = { 30, 20, 10, 0 };

	(void)state;
	assert_int_equal(layout_bucket_plan(40, ok, 4, 0, b, 4), -EINVAL);
	assert_int_equal(layout_bucket_plan(40, up, 3, 5, b, 4), -EINVAL);
	assert_int_equal(layout_bucket_plan(40, nozero, 2, 5, b, 4), -EINVAL);
	assert_int_equal(layout_bucket_plan(40, high, 2, 5, b, 4), -EINVAL);
	assert_int_equal(layout_bucket_plan(40, ok, 0, 5, b, 4), -EINVAL);
	assert_int_equal(layout_bucket_plan(40, ok, 4, 1, b, 3), -ENOSPC);
	assert_int_equal(layout_bucket_plan(40, ok, 4, 1, b, 4), 4);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_check_accepts),
	    cmocka_unit_test(test_check_refusals),
	    cmocka_unit_test(test_coords),
	    cmocka_unit_test(test_groups),
	    cmocka_unit_test(test_placement_blocks),
	    cmocka_unit_test(test_placement_roundtrip),
	    cmocka_unit_test(test_placement_parse_refusals),
	    cmocka_unit_test(test_schedule_small),
	    cmocka_unit_test(test_schedule_errors),
	    cmocka_unit_test(test_schedule_properties),
	    cmocka_unit_test(test_bucket_plan),
	    cmocka_unit_test(test_bucket_plan_random),
	    cmocka_unit_test(test_bucket_plan_refusals),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
