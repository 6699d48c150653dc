/*
 * test_trainer_guard.c - the numerical guardrails as units: the detectors
 * over synthetic loss and gradient-norm series, the escalation state
 * machine, the fault-injection parser, the saved state (its windows through
 * a real checkpoint file), and the bf16 products against fp32.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "bf16.h"
#include "ckpt.h"
#include "seal.h"
#include "model.h"
#include "guard_run.h"
#include "ops.h"
#include "rng.h"

#define NSLOTS 3

static struct guard g;
static uint64_t st = 12345;

static int setup(void **state)
{
	struct guard_config c;

	(void)state;
	guard_config_default(&c);
	st = 12345;
	return guard_init(&g, &c, NSLOTS, true);
}

static int teardown(void **state)
{
	(void)state;
	guard_free(&g);
	return 0;
}

/* a normal curve: loss decays, both carry noise (gnorm heavy-tailed) */
static void normal_step(long s, double *loss, double *gn)
{
	*loss = 2.0 + 3.5 * exp(-s / 60.0) + 0.08 * rng_normal(&st);
	*gn = 2.5 * exp(0.3 * rng_normal(&st));
}

static unsigned step(long s, double loss, double gn, struct guard_event *ev)
{
	struct guard_obs o = {
	    .step = s, .loss = loss, .gnorm = gn, .imbalance = NAN};
	unsigned a = guard_check(&g, &o, ev);

	if (a & GUARD_ACT_RECOMPUTE) {
		o.recomputed = true; /* deterministic: the same again */
		a = guard_check(&g, &o, ev);
	}
	return a;
}

static void feed_normal(long from, long to)
{
	struct guard_event ev;

	for (long s = from; s <= to; s++) {
		double l, n;

		normal_step(s, &l, &n);
		assert_int_equal(step(s, l, n, &ev), 0);
		assert_int_equal(ev.cause, GUARD_CAUSE_NONE);
	}
}

static void test_no_false_positive(void **state)
{
	(void)state;
	/* 2000 steps of a noisy curve: not one event */
	feed_normal(1, 2000);
	assert_int_equal(g.acts[1], 0);
	assert_int_equal(g.causes[GUARD_CAUSE_LOSS_SPIKE], 0);
	assert_int_equal(g.causes[GUARD_CAUSE_GNORM_SPIKE], 0);
}

static void test_spikes_caught(void **state)
{
	struct guard_event ev;
	struct guard_obs o = {
	    .step = 101, .loss = 40.0, .gnorm = 2.5, .imbalance = NAN};
	unsigned a;

	(void)state;
	feed_normal(1, 100);
	/* a loss spike: recomputed first, then skipped with a lower LR */
	a = guard_check(&g, &o, &ev);
	assert_int_equal(a, GUARD_ACT_RECOMPUTE);
	o.recomputed = true;
	a = guard_check(&g, &o, &ev);
	assert_int_equal(a, GUARD_ACT_SKIP | GUARD_ACT_LOWER_LR);
	assert_int_equal(ev.cause, GUARD_CAUSE_LOSS_SPIKE);
	assert_true(ev.z > 6.0);
	assert_true(guard_lr_scale(&g, 101) < 1.0);
	assert_true(guard_lr_scale(&g, 101 + g.cfg.lr_steps) < 1.0);
	assert_true(guard_lr_scale(&g, 102 + g.cfg.lr_steps) == 1.0);
	/* a gradient-norm spike */
	a = step(102, 2.5, 250.0, &ev);
	assert_int_equal(ev.cause, GUARD_CAUSE_GNORM_SPIKE);
	assert_true(a & GUARD_ACT_SKIP);
	/* the spikes did not enter the window: normal steps stay normal */
	feed_normal(103, 140);
	/* a zero gradient norm is no fault */
	assert_int_equal(step(141, 2.5, 0.0, &ev), 0);
	assert_int_equal(ev.cause, GUARD_CAUSE_NONE);
}

static void test_nonfinite_and_hardware(void **state)
{
	struct guard_event ev;
	struct guard_obs o = {
	    .step = 5, .loss = NAN, .gnorm = 1.0, .imbalance = NAN};

	(void)state;
	feed_normal(1, 4);
	assert_int_equal(guard_check(&g, &o, &ev), GUARD_ACT_RECOMPUTE);
	o.recomputed = true;
	/* the same NaN again: the data or the model, skip */
	assert_int_equal(guard_check(&g, &o, &ev), GUARD_ACT_SKIP);
	assert_int_equal(ev.cause, GUARD_CAUSE_NONFINITE);

	/* a NaN that goes away when recomputed: the hardware */
	o = (struct guard_obs){
	    .step = 6, .loss = 3.0, .gnorm = INFINITY, .imbalance = NAN};
	assert_int_equal(guard_check(&g, &o, &ev), GUARD_ACT_RECOMPUTE);
	o.gnorm = 2.0;
	o.recomputed = true;
	assert_int_equal(guard_check(&g, &o, &ev), GUARD_ACT_REQUEUE);
	assert_int_equal(ev.cause, GUARD_CAUSE_HARDWARE);

	/* a recomputed value that differs in the last bit: hardware too */
	feed_normal(7, 40);
	o = (struct guard_obs){
	    .step = 41, .loss = 3.0, .gnorm = 1e6, .imbalance = NAN};
	assert_int_equal(guard_check(&g, &o, &ev), GUARD_ACT_RECOMPUTE);
	o.gnorm = nextafter(1e6, 2e6);
	o.recomputed = true;
	assert_int_equal(guard_check(&g, &o, &ev), GUARD_ACT_REQUEUE);
	assert_int_equal(g.causes[GUARD_CAUSE_HARDWARE], 2);
}

static void test_overflow_fp32_window(void **state)
{
	struct guard_event ev;
	uint64_t ovf[NSLOTS] = {0, 7, 30};
	uint8_t prec[NSLOTS];
	struct guard_obs o = {.step = 10,
			      .loss = NAN,
			      .gnorm = NAN,
			      .overflow = ovf,
			      .imbalance = NAN};
	long fp32 = g.cfg.fp32_steps;

	(void)state;
	assert_int_equal(guard_precision(&g, 10, prec, &ev), 0);
	assert_int_equal(prec[0] + prec[1] + prec[2], 3);
	/* the first overflowing layer goes fp32; no recompute for it */
	assert_int_equal(guard_check(&g, &o, &ev),
			 GUARD_ACT_SKIP | GUARD_ACT_FP32);
	assert_int_equal(ev.cause, GUARD_CAUSE_OVERFLOW);
	assert_int_equal(ev.layer, 1);
	assert_int_equal(g.overflows, 37);
	for (long s = 11; s <= 10 + fp32; s++) {
		assert_int_equal(guard_precision(&g, s, prec, &ev), 0);
		assert_int_equal(prec[0], 1);
		assert_int_equal(prec[1], 0);
		assert_int_equal(prec[2], 1);
	}
	/* the window ends: bf16 again, one event */
	assert_int_equal(guard_precision(&g, 11 + fp32, prec, &ev),
			 GUARD_ACT_BF16);
	assert_int_equal(ev.layer, 1);
	assert_int_equal(ev.cause, GUARD_CAUSE_RESTORE);
	assert_int_equal(guard_precision(&g, 11 + fp32, prec, &ev), 0);
	assert_int_equal(prec[1], 1);
}

static void test_escalation_rollback(void **state)
{
	struct guard_event ev;
	unsigned a;

	(void)state;
	feed_normal(1, 30);
	assert_int_equal(step(31, NAN, NAN, &ev), GUARD_ACT_SKIP);
	assert_int_equal(step(33, 3.0, 1e5, &ev),
			 GUARD_ACT_SKIP | GUARD_ACT_LOWER_LR);
	/* the third trouble within trouble_steps: roll back */
	a = step(35, NAN, 1.0, &ev);
	assert_int_equal(a, GUARD_ACT_SKIP | GUARD_ACT_ROLLBACK);
	guard_rolled_back(&g, 20, 35);
	assert_int_equal(g.skip_lo, 31);
	assert_int_equal(g.skip_hi, 35);
	assert_false(guard_skip_data(&g, 30));
	assert_true(guard_skip_data(&g, 31));
	assert_true(guard_skip_data(&g, 35));
	assert_false(guard_skip_data(&g, 36));
	assert_int_equal(g.causes[GUARD_CAUSE_DATA], 2);

	/* troubles far apart never escalate */
	feed_normal(36, 60);
	assert_int_equal(step(61, NAN, NAN, &ev), GUARD_ACT_SKIP);
	feed_normal(62, 140);
	assert_int_equal(step(141, NAN, NAN, &ev), GUARD_ACT_SKIP);
	feed_normal(142, 220);
	assert_int_equal(step(221, NAN, NAN, &ev), GUARD_ACT_SKIP);

	/* after max_rollbacks, give up */
	g.rollbacks = g.cfg.max_rollbacks;
	step(222, NAN, NAN, &ev);
	step(223, NAN, NAN, &ev);
	assert_true(step(224, NAN, NAN, &ev) & GUARD_ACT_STOP);
}

static void test_collapse(void **state)
{
	int bal[4] = {50, 50, 50, 50}, one[4] = {100, 100, 0, 0};
	int worse[4] = {100, 90, 5, 5};
	struct guard_event ev;
	struct guard_obs o = {.loss = 3.0, .gnorm = 2.0};
	unsigned a = 0;

	(void)state;
	assert_true(fabs(guard_imbalance(bal, 4, 2)) < 1e-12);
	assert_true(fabs(guard_imbalance(one, 4, 2) - 1.0) < 1e-12);
	assert_true(guard_imbalance(worse, 4, 2) > 0.8);
	assert_true(guard_imbalance(one, 2, 2) == 0.0);

	/* balanced for a window: nothing; collapsed for a window: event */
	for (int s = 1; s <= 2 * g.cfg.window; s++) {
		o.step = s;
		o.imbalance = 0.1;
		assert_int_equal(guard_check(&g, &o, &ev), 0);
	}
	for (int s = 1; s <= g.cfg.window && !a; s++) {
		o.step = 1000 + s;
		o.imbalance = 0.95;
		a = guard_check(&g, &o, &ev);
	}
	assert_int_equal(a, GUARD_ACT_LOWER_LR);
	assert_int_equal(ev.cause, GUARD_CAUSE_COLLAPSE);
	assert_true(ev.value > g.cfg.collapse);
}

static void test_disabled(void **state)
{
	struct guard_config c;
	struct guard off;
	struct guard_event ev;
	uint64_t ovf[NSLOTS] = {5, 0, 0};
	struct guard_obs o = {.step = 3,
			      .loss = NAN,
			      .gnorm = NAN,
			      .overflow = ovf,
			      .imbalance = 1.0};

	(void)state;
	guard_config_default(&c);
	c.enabled = false;
	assert_int_equal(guard_init(&off, &c, NSLOTS, true), 0);
	assert_int_equal(guard_check(&off, &o, &ev), 0);
	assert_false(guard_skip_data(&off, 3));
	assert_true(guard_lr_scale(&off, 3) == 1.0);
	guard_free(&off);
}

static void test_config_and_names(void **state)
{
	struct guard_config c;
	char err[256], buf[128];

	(void)state;
	guard_config_default(&c);
	assert_int_equal(guard_config_check(&c, err, sizeof(err)), 0);
	c.window = 1;
	assert_int_equal(guard_config_check(&c, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "window"));
	guard_config_default(&c);
	c.lr_factor = 0;
	assert_int_equal(guard_config_check(&c, err, sizeof(err)), -EINVAL);
	guard_actions_str(GUARD_ACT_SKIP | GUARD_ACT_FP32, buf, sizeof(buf));
	assert_string_equal(buf, "skip+fp32");
	guard_actions_str(0, buf, sizeof(buf));
	assert_string_equal(buf, "none");
	assert_string_equal(guard_cause_name(GUARD_CAUSE_OVERFLOW),
			    "bf16-overflow");
}

static void test_inject_parse(void **state)
{
	struct guard_inject in;
	char err[256];
	int layer = -1;

	(void)state;
	assert_int_equal(guard_inject_parse(
			     &in, "nan-grad@5,spike@10-12,flaky@7,overflow@9:2",
			     2, err, sizeof(err)),
			 0);
	assert_int_equal(in.n, 4);
	assert_true(
	    guard_inject_hits(&in, GUARD_FAULT_NAN_GRAD, 5, true, NULL));
	assert_false(
	    guard_inject_hits(&in, GUARD_FAULT_NAN_GRAD, 6, false, NULL));
	assert_true(guard_inject_hits(&in, GUARD_FAULT_SPIKE, 11, false, NULL));
	assert_false(
	    guard_inject_hits(&in, GUARD_FAULT_SPIKE, 13, false, NULL));
	/* flaky: only the first computation */
	assert_true(guard_inject_hits(&in, GUARD_FAULT_FLAKY, 7, false, NULL));
	assert_false(guard_inject_hits(&in, GUARD_FAULT_FLAKY, 7, true, NULL));
	assert_true(
	    guard_inject_hits(&in, GUARD_FAULT_OVERFLOW, 9, false, &layer));
	assert_int_equal(layer, 2);

	assert_int_equal(guard_inject_parse(&in, "melt@5", 2, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "melt"));
	assert_int_equal(
	    guard_inject_parse(&in, "overflow@5", 2, err, sizeof(err)),
	    -EINVAL);
	assert_int_equal(
	    guard_inject_parse(&in, "overflow@5:3", 2, err, sizeof(err)),
	    -EINVAL);
	assert_int_equal(
	    guard_inject_parse(&in, "spike@9-3", 2, err, sizeof(err)), -EINVAL);
	assert_int_equal(guard_inject_parse(&in, "spike", 2, err, sizeof(err)),
			 -EINVAL);
}

static void test_state_roundtrip(void **state)
{
	struct guard_event ev;
	struct guard other;
	struct guard_state v, w;

	(void)state;
	feed_normal(1, 20);
	step(21, NAN, NAN, &ev);
	step(22, NAN, NAN, &ev);
	step(23, NAN, NAN, &ev);
	guard_rolled_back(&g, 10, 23);
	guard_state_export(&g, &v);
	assert_int_equal(guard_init(&other, &g.cfg, NSLOTS, true), 0);
	guard_state_import(&other, &v);
	guard_state_export(&other, &w);
	assert_memory_equal(v.v, w.v, sizeof(v.v));
	assert_int_equal(other.skip_lo, 21);
	assert_int_equal(other.skip_hi, 23);
	assert_int_equal(other.rollbacks, 1);
	assert_int_equal(other.causes[GUARD_CAUSE_NONFINITE], 3);
	guard_free(&other);
}

/*
 * The windows travel through a real checkpoint file: a guard that resumes
 * from it takes exactly the decisions of the guard that never stopped
 * (here: the collapse judged on a window that began before the save).
 */
static void test_windows_roundtrip(void **state)
{
	struct model_config mc;
	struct model *m = NULL;
	struct ckpt_state *s = calloc(1, sizeof(*s)), *r = calloc(1, sizeof(*r));
	struct guard other, small;
	struct guard_config c = g.cfg;
	char dir[] = "/tmp/sigma-guard-XXXXXX", path[4096], err[256];
	struct guard_event ev, ev2;

	(void)state;
	assert_non_null(s);
	assert_non_null(r);
	assert_non_null(mkdtemp(dir));
	model_config_small(&mc);
	assert_int_equal(model_create(&m, &mc, 1, &sigma_ops_cpu, err,
				      sizeof(err)), 0);
	/* 70 steps: the rings wrap; the imbalance window holds 30 collapsed
	 * steps, not yet enough to judge a collapse */
	for (long i = 1; i <= 70; i++) {
		struct guard_obs o = {.step = i, .imbalance = i > 40 ? 0.95 : 0.1};

		normal_step(i, &o.loss, &o.gnorm);
		assert_int_equal(guard_check(&g, &o, &ev), 0);
	}
	s->step = 70;
	s->batch = 1;
	guard_state_export(&g, &s->guard);
	assert_int_equal(s->guard.win[0].n, g.cfg.window);
	assert_int_equal(s->guard.win[2].n, g.cfg.window);
	assert_int_equal(g.causes[GUARD_CAUSE_COLLAPSE], 0);
	assert_int_equal(ckpt_write(dir, m, s, path, sizeof(path), err,
				    sizeof(err)), 0);
	assert_int_equal(ckpt_read(path, m, r, err, sizeof(err)), 0);
	for (int i = 0; i < GUARD_STATE_WINDOWS; i++) {
		const struct guard_ring *rw = &r->guard.win[i];
		const struct guard_ring *sw = &s->guard.win[i];

		assert_int_equal(rw->n, sw->n);
		assert_int_equal(rw->head, sw->head);
		assert_memory_equal(rw->v, sw->v, sizeof(double) * (size_t)sw->n);
	}
	assert_int_equal(guard_init(&other, &c, NSLOTS, true), 0);
	guard_state_import(&other, &r->guard);
	/* the same observations from here: the same actions, the same step */
	for (long i = 71; i <= 130; i++) {
		struct guard_obs o = {.step = i, .imbalance = 0.95};
		unsigned a, b;

		normal_step(i, &o.loss, &o.gnorm);
		a = guard_check(&g, &o, &ev);
		b = guard_check(&other, &o, &ev2);
		assert_int_equal(a, b);
		assert_int_equal(ev.cause, ev2.cause);
	}
	assert_true(g.causes[GUARD_CAUSE_COLLAPSE] >= 1);
	assert_int_equal(other.causes[GUARD_CAUSE_COLLAPSE],
			 g.causes[GUARD_CAUSE_COLLAPSE]);
	/* a run with a smaller window cannot use them: it starts empty */
	c.window = 20;
	assert_int_equal(guard_init(&small, &c, NSLOTS, true), 0);
	guard_state_import(&small, &r->guard);
	assert_int_equal(small.loss.n, 0);
	assert_int_equal(small.imb.n, 0);
	guard_free(&small);
	guard_free(&other);
	model_destroy(m);
	assert_int_equal(unlink(path), 0);
	seal_remove(path);
	assert_int_equal(rmdir(dir), 0);
	free(s);
	free(r);
}

/* ---- bf16 products ------------------------------------------------------- */

static void test_bf16_round(void **state)
{
	(void)state;
	assert_true(sigma_bf16_round(1.0f) == 1.0f);
	/* 1 + 2^-8 is halfway between bf16 1 and 1 + 2^-7: to even, 1 */
	assert_true(sigma_bf16_round(1.0f + 0x1p-8f) == 1.0f);
	assert_true(sigma_bf16_round(1.0f + 0x1.8p-8f) == 1.0f + 0x1p-7f);
	assert_true(isnan(sigma_bf16_round(NAN)));
	assert_true(isinf(sigma_bf16_round(3.4e38f)));
	assert_true(isfinite(sigma_bf16_round(3.38e38f)));
}

static void test_bf16_matmul(void **state)
{
	const struct sigma_ops *f = &sigma_ops_cpu, *b = sigma_bf16_cpu.ops;
	/* odd C and a remainder of columns exercise the padding and masks */
	int N = 7, C = 37, OC = 83, offs[3] = {0, 3, 7};
	float *in = malloc(sizeof(float) * N * C);
	float *w = malloc(sizeof(float) * 2 * C * OC);
	float *r32 = malloc(sizeof(float) * N * OC);
	float *r16 = malloc(sizeof(float) * N * OC);
	uint64_t ovf = 0;
	double maxrel = 0;

	(void)state;
	assert_non_null(in && w && r32 && r16);
	for (int i = 0; i < N * C; i++)
		in[i] = (float)rng_normal(&st);
	for (int i = 0; i < 2 * C * OC; i++)
		w[i] = (float)(0.1 * rng_normal(&st));
	f->matmul_forward(r32, in, w, N, C, OC, 0);
	sigma_bf16_cpu.begin(&ovf, 0);
	b->matmul_forward(r16, in, w, N, C, OC, 0);
	/*
	 * Rounding each input and weight costs at most 2^-9 of each product,
	 * rounding the output 2^-9 of it: the error is within 3 x 2^-9 of
	 * S = sum |in| |w| (fp32 accumulation adds far less)
	 */
	for (int n = 0; n < N; n++) {
		for (int j = 0; j < OC; j++) {
			double S = 0, d;

			for (int k = 0; k < C; k++)
				S += fabs(in[n * C + k]) * fabs(w[k * OC + j]);
			d = fabs(r16[n * OC + j] - r32[n * OC + j]) / S;
			if (d > maxrel)
				maxrel = d;
			/* each output is a bf16 value */
			assert_true(sigma_bf16_round(r16[n * OC + j]) ==
				    r16[n * OC + j]);
		}
	}
	print_message("bf16 vs fp32: max error %.2e of sum |in||w| (%s)\n",
		      maxrel,
		      sigma_bf16_native() ? "AVX-512 BF16" : "emulated");
	assert_true(maxrel <= 3.0 * 0x1p-9);
	assert_true(maxrel > 0); /* it did round */
	assert_int_equal(ovf, 0);

	/* accumulate adds the rounded product */
	memcpy(r32, r16, sizeof(float) * N * OC);
	b->matmul_forward(r16, in, w, N, C, OC, 1);
	for (int i = 0; i < N * OC; i++)
		assert_true(r16[i] == r32[i] + r32[i]);

	/* grouped: each group against its own weights */
	b->grouped_matmul_forward(r16, in, w, offs, 2, C, OC);
	f->grouped_matmul_forward(r32, in, w, offs, 2, C, OC);
	for (int i = 0; i < N * OC; i++)
		assert_true(fabs(r16[i] - r32[i]) <=
			    0.03 * (fabs(r32[i]) + 0.1));

	/* overflow: products past the bf16 range become inf and count */
	for (int i = 0; i < C; i++)
		in[i] = 1e30f;
	for (int i = 0; i < C * OC; i++)
		w[i] = 1e10f;
	b->matmul_forward(r16, in, w, 1, C, OC, 0);
	assert_int_equal(ovf, (uint64_t)OC);
	/* the injected fault: one inf, counted */
	ovf = 0;
	in[0] = 1.0f;
	for (int i = 0; i < C * OC; i++)
		w[i] = 0.0f;
	sigma_bf16_cpu.begin(&ovf, 1);
	b->matmul_forward(r16, in, w, 1, C, OC, 0);
	assert_true(isinf(r16[0]));
	assert_int_equal(ovf, 1);
	b->matmul_forward(r16, in, w, 1, C, OC, 0);
	assert_true(r16[0] == 0.0f);
	assert_int_equal(ovf, 1);
	sigma_bf16_cpu.begin(NULL, 0);

	/* the portable path: the same roundings, another order of the fp32
	 * additions (on a CPU without AVX-512 BF16 both runs take it) */
	for (int i = 0; i < N * C; i++)
		in[i] = (float)rng_normal(&st);
	for (int i = 0; i < C * OC; i++)
		w[i] = (float)(0.1 * rng_normal(&st));
	b->matmul_forward(r32, in, w, N, C, OC, 0);
	sigma_bf16_force_portable(1);
	assert_int_equal(sigma_bf16_native(), 0);
	b->matmul_forward(r16, in, w, N, C, OC, 0);
	sigma_bf16_force_portable(0);
	for (int i = 0; i < N * OC; i++) {
		assert_true(sigma_bf16_round(r16[i]) == r16[i]);
		/* at most one bf16 step apart, from the output rounding */
		assert_true(fabs(r16[i] - r32[i]) <=
			    0x1p-7 * fabs(r32[i]) + 1e-4);
	}
	free(in);
	free(w);
	free(r32);
	free(r16);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_no_false_positive, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_spikes_caught, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_nonfinite_and_hardware, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_overflow_fp32_window, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_escalation_rollback, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_collapse, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_state_roundtrip, setup,
					    teardown),
	    cmocka_unit_test(test_disabled),
	    cmocka_unit_test(test_config_and_names),
	    cmocka_unit_test(test_inject_parse),
	    cmocka_unit_test_setup_teardown(test_windows_roundtrip, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_bf16_round, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bf16_matmul, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
