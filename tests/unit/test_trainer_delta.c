/*
 * test_trainer_delta.c - lossless per-tensor deltas (trainer/ckpt/delta.c) and
 * differential checkpoints (trainer/ckpt.c): bitwise round trips on random
 * and adversarial tensors, the per-tensor choice, a real HDF5 base +
 * differential read back bitwise, refusal of a damaged differential or of
 * a missing or replaced base with fall back to an older valid checkpoint,
 * and retention that keeps the bases of kept differentials.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "sigma.h"
#include "scratch.h"
#include "ckpt.h"
#include "delta.h"
#include "model.h"
#include "rng.h"

static char dir[64];

static int setup(void **state)
{
	(void)state;
	return scratch_make(dir, sizeof(dir), "delta");
}

static int teardown(void **state)
{
	(void)state;
	return scratch_remove(dir);
}

static float from_bits(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

static uint32_t to_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

/* encode, decode (out of place and in place): the same bits */
static void round_trip(const float *cur, const float *base, size_t n)
{
	uint32_t *enc = malloc(sizeof(uint32_t) * n);
	float *out = malloc(sizeof(float) * n), *inplace;

	assert_non_null(enc);
	assert_non_null(out);
	inplace = malloc(sizeof(float) * n);
	assert_non_null(inplace);
	delta_encode(enc, cur, base, n);
	memset(out, 0xa5, sizeof(float) * n);
	delta_decode(out, enc, base, n);
	assert_memory_equal(out, cur, sizeof(float) * n);
	memcpy(inplace, base, sizeof(float) * n);
	delta_decode(inplace, enc, inplace, n);
	assert_memory_equal(inplace, cur, sizeof(float) * n);
	free(enc), free(out), free(inplace);
}

static void test_round_trip_random(void **state)
{
	const size_t n = 100003;
	float *a = malloc(sizeof(float) * n), *b = malloc(sizeof(float) * n);
	uint64_t r = 12345;

	(void)state;
	assert_non_null(a);
	assert_non_null(b);
	/* any 32-bit patterns at all: every class of float */
	for (size_t i = 0; i < n; i++) {
		a[i] = from_bits((uint32_t)rng_next(&r));
		b[i] = from_bits((uint32_t)rng_next(&r));
	}
	round_trip(a, b, n);
	round_trip(b, a, n);
	/* a training step: small moves of either sign, some none */
	for (size_t i = 0; i < n; i++) {
		uint64_t x = rng_next(&r);

		b[i] = ((float)(x % 20001) - 10000.0f) * 1e-4f;
		a[i] =
		    (x >> 20) % 5 == 0
			? b[i]
			: b[i] * (1.0f +
				  ((float)((x >> 32) % 201) - 100.0f) * 1e-6f);
	}
	round_trip(a, b, n);
	/* equal: all zero codes */
	{
		uint32_t *enc = malloc(sizeof(uint32_t) * n);

		assert_non_null(enc);
		delta_encode(enc, b, b, n);
		for (size_t i = 0; i < n; i++)
			assert_int_equal(enc[i], 0);
		free(enc);
	}
	free(a), free(b);
}

static void test_round_trip_adversarial(void **state)
{
	static const uint32_t special[] = {
	    0x00000000,		    /* +0 */
	    0x80000000,		    /* -0 */
	    0x00000001,		    /* smallest denormal */
	    0x80000001, 0x007fffff, /* largest denormal */
	    0x807fffff, 0x00800000, /* smallest normal */
	    0x7f7fffff,		    /* FLT_MAX */
	    0xff7fffff, 0x7f800000, /* +inf */
	    0xff800000,		    /* -inf */
	    0x7fc00000,		    /* quiet NaN */
	    0xffc00000,		    /* negative quiet NaN */
	    0x7f800001,		    /* signalling NaN, payload 1 */
	    0x7fc12345,		    /* NaN payloads */
	    0xffbfffff, 0x3f800000, /* 1.0 */
	    0xbf800000,
	};
	const size_t k = sizeof(special) / sizeof(special[0]);
	float *a = malloc(sizeof(float) * k * k);
	float *b = malloc(sizeof(float) * k * k);

	(void)state;
	assert_non_null(a);
	assert_non_null(b);
	/* every special value against every other as the base */
	for (size_t i = 0; i < k; i++) {
		for (size_t j = 0; j < k; j++) {
			a[i * k + j] = from_bits(special[i]);
			b[i * k + j] = from_bits(special[j]);
		}
	}
	round_trip(a, b, k * k);
	round_trip(b, a, k * k);
	/* the bits come back, not merely equal values */
	{
		uint32_t enc[1];
		float out[1];

		delta_encode(enc, &a[13 * k], &b[13 * k], 1);
		delta_decode(out, enc, &b[13 * k], 1);
		assert_int_equal(to_bits(out[0]), 0x7f800001);
	}
	free(a), free(b);
}

/* the documented integers: the format, not only a round trip */
static void test_encoding_values(void **state)
{
	float base[4] = {1.0f, 1.0f, 0.0f, -2.0f};
	float cur[4];
	uint32_t enc[4];

	(void)state;
	cur[0] = nextafterf(1.0f, 2.0f); /* one step up: d = 1, zigzag 2 */
	cur[1] = nextafterf(1.0f, 0.0f); /* one step down: d = -1, 1 */
	cur[2] = -0.0f; /* +0 to -0 is one step down in the order */
	cur[3] = nextafterf(-2.0f, -3.0f); /* more negative: down, 1 */
	delta_encode(enc, cur, base, 4);
	assert_int_equal(enc[0], 2);
	assert_int_equal(enc[1], 1);
	assert_int_equal(enc[2], 1);
	assert_int_equal(enc[3], 1);
	/* the key orders floats as numbers */
	{
		const float v[] = {-INFINITY, -1e30f, -1.0f, -1e-40f, -0.0f,
				   0.0f,      1e-40f, 1.0f,  1e30f,   INFINITY};

		for (size_t i = 0; i + 1 < sizeof(v) / sizeof(v[0]); i++)
			assert_true(delta_key(to_bits(v[i])) <
				    delta_key(to_bits(v[i + 1])));
		for (uint32_t u = 0; u < 4000000000u; u += 999983)
			assert_int_equal(delta_unkey(delta_key(u)), u);
	}
}

static void test_hash(void **state)
{
	const float x[3] = {1.0f, -2.0f, 0.5f};
	float y[3];

	(void)state;
	/* the documented algorithm, as computed independently in Python */
	assert_true(delta_hash(x, 3, DELTA_HASH_SEED) == 0x903c5698613f205dULL);
	assert_true(delta_hash(x, 0, DELTA_HASH_SEED) == 0x425d841cd17e30c6ULL);
	memcpy(y, x, sizeof(y));
	y[2] = from_bits(to_bits(y[2]) ^ 1);
	assert_true(delta_hash(y, 3, DELTA_HASH_SEED) !=
		    delta_hash(x, 3, DELTA_HASH_SEED));
	y[2] = x[2];
	y[0] = -0.0f, y[1] = 0.0f;
	{
		float z[3] = {0.0f, -0.0f, 0.5f};

		assert_true(delta_hash(y, 3, DELTA_HASH_SEED) !=
			    delta_hash(z, 3, DELTA_HASH_SEED));
	}
}

/* an estimator that answers from a script: whole first, then delta */
struct fake_est {
	long answers[2];
	int calls;
};

static long fake_estimate(void *ctx, const uint32_t *w, size_t n)
{
	struct fake_est *f = ctx;

	(void)w, (void)n;
	return f->answers[f->calls++ % 2];
}

static void test_choice_margin(void **state)
{
	float a[8] = {1, 2, 3, 4, 5, 6, 7, 8}, b[8];
	uint32_t scratch[16];
	struct delta_choice ch;
	struct fake_est f = {{1000, 970}, 0};

	(void)state;
	memcpy(b, a, sizeof(b));
	assert_int_equal(delta_choose(a, b, 8, scratch, fake_estimate, &f, &ch),
			 0);
	assert_int_equal(ch.kind, DELTA_SAME);
	assert_int_equal(f.calls, 0); /* nothing to estimate */
	b[3] = 4.5f;
	assert_int_equal(delta_choose(a, b, 8, scratch, fake_estimate, &f, &ch),
			 0);
	assert_int_equal(ch.kind, DELTA_ZIGZAG); /* 97%: just enough */
	assert_int_equal(ch.sampled, 8);
	f.answers[1] = 971;
	assert_int_equal(delta_choose(a, b, 8, scratch, fake_estimate, &f, &ch),
			 0);
	assert_int_equal(ch.kind, DELTA_WHOLE);
	f.answers[0] = -EIO;
	assert_int_equal(delta_choose(a, b, 8, scratch, fake_estimate, &f, &ch),
			 -EIO);
	assert_string_equal(delta_kind_name(DELTA_ZIGZAG), "delta-zigzag-v1");
	assert_int_equal(delta_kind_parse("whole"), DELTA_WHOLE);
	assert_int_equal(delta_kind_parse("same"), DELTA_SAME);
	assert_int_equal(delta_kind_parse("zstd"), -1);
}

static long real_estimate(void *ctx, const uint32_t *w, size_t n)
{
	(void)ctx;
	return ckpt_diff_estimate(w, n);
}

/* with HDF5's own shuffle + deflate measuring */
static void test_choice_real(void **state)
{
	const size_t n = DELTA_SAMPLE_MAX * 3 + 17; /* sampled */
	float *a = malloc(sizeof(float) * n), *b = malloc(sizeof(float) * n);
	uint32_t *scratch = malloc(sizeof(uint32_t) * 2 * DELTA_SAMPLE_MAX);
	struct delta_choice ch;
	uint64_t r = 99;

	(void)state;
	assert_non_null(a);
	assert_non_null(b);
	assert_non_null(scratch);
	/* weights moved by a few units in the last place: delta pays */
	for (size_t i = 0; i < n; i++) {
		uint64_t x = rng_next(&r);

		b[i] = ((float)(x % 1000001) - 500000.0f) * 1e-7f;
		a[i] = from_bits(to_bits(b[i]) + (uint32_t)((x >> 40) % 7) - 3);
	}
	assert_int_equal(
	    delta_choose(a, b, n, scratch, real_estimate, NULL, &ch), 0);
	print_message("near base: whole %ld delta %ld of %zu elements\n",
		      ch.est_whole, ch.est_delta, ch.sampled);
	assert_int_equal(ch.sampled, DELTA_SAMPLE_MAX);
	assert_int_equal(ch.kind, DELTA_ZIGZAG);
	assert_true(ch.est_delta < ch.est_whole / 2);
	/* a tensor that became nearly constant, far from a noisy base:
	 * whole pays */
	for (size_t i = 0; i < n; i++)
		a[i] = i % 1000 ? 0.25f : 0.5f;
	assert_int_equal(delta_choose(a, b, DELTA_SAMPLE_MAX / 2, scratch,
				      real_estimate, NULL, &ch),
			 0);
	print_message("constant vs noise: whole %ld delta %ld\n", ch.est_whole,
		      ch.est_delta);
	assert_int_equal(ch.sampled, DELTA_SAMPLE_MAX / 2);
	assert_int_equal(ch.kind, DELTA_WHOLE);
	free(a), free(b), free(scratch);
}

/* ---- checkpoints ----------------------------------------------------------
 */

static struct model *small(void)
{
	struct model_config c;
	struct model *m = NULL;
	char err[256];

	model_config_small(&c);
	c.D = 64;
	assert_int_equal(
	    model_create(&m, &c, 1, &sigma_ops_cpu, err, sizeof(err)), 0);
	model_init_weights(m, 3);
	return m;
}

static void fill_state(struct model *m, struct ckpt_state *st, long step)
{
	for (size_t i = 0; i < m->nparams; i++) {
		m->m[i] = (float)i * 1e-6f;
		m->v[i] = (float)(i % 97) * 1e-7f;
	}
	memset(st, 0, sizeof(*st));
	st->step = step;
	st->batch = 1;
	st->seed = 77;
	st->rng = 0x123456789abcdefULL;
	st->data_ntokens = 1000;
	st->data_checksum = 42;
	st->guard.n = 0;
	optim_config_default(&st->optim);
}

/*
 * A training step's worth of change: weights move by a few ulps, the
 * first moment becomes a few distinct values, the second moment of the
 * first tensor stays as it was.
 */
static void step_state(struct model *m, struct ckpt_state *st, uint64_t seed)
{
	const struct model_tensor *t0 = &m->tensors[0];
	uint64_t r = seed;

	for (size_t i = 0; i < m->nparams; i++) {
		uint64_t x = rng_next(&r);
		bool in0 = i >= t0->offset && i < t0->offset + t0->n;

		/* a few ulps, never across zero into NaN patterns */
		if ((to_bits(m->params[i]) & 0x7fffffffu) > 16)
			m->params[i] = from_bits(to_bits(m->params[i]) +
						 (uint32_t)(x % 5) - 2);
		/* a few distinct values: compresses better whole */
		m->m[i] = (float)((x >> 40) % 4) * 0.5f;
		if (!in0)
			m->v[i] += 1e-9f * (float)(x >> 60);
	}
	st->step++;
	st->rng = rng_next(&r);
}

static void copy_state(float *dst, const struct model *m)
{
	memcpy(dst, m->params, sizeof(float) * m->nparams);
	memcpy(dst + m->nparams, m->m, sizeof(float) * m->nparams);
	memcpy(dst + 2 * m->nparams, m->v, sizeof(float) * m->nparams);
}

static void assert_state(const struct model *m, const float *want)
{
	assert_memory_equal(m->params, want, sizeof(float) * m->nparams);
	assert_memory_equal(m->m, want + m->nparams,
			    sizeof(float) * m->nparams);
	assert_memory_equal(m->v, want + 2 * m->nparams,
			    sizeof(float) * m->nparams);
}

static void test_ckpt_diff_round_trip(void **state)
{
	struct model *a = small(), *b = small();
	struct ckpt_state st, got;
	struct ckpt_base base;
	struct ckpt_diff_stats ds;
	char ck[PATH_MAX], p[PATH_MAX], err[1024];
	float *want = malloc(sizeof(float) * 3 * a->nparams);

	(void)state;
	assert_non_null(want);
	snprintf(ck, sizeof(ck), "%s/rt", dir);
	fill_state(a, &st, 10);
	assert_int_equal(ckpt_write(ck, a, &st, p, sizeof(p), err, sizeof(err)),
			 0);
	assert_int_equal(ckpt_base_init(&base, a, err, sizeof(err)), 0);
	/* no base yet: refused, nothing written */
	assert_int_equal(ckpt_write_diff(ck, a, NULL, &st, &base, &ds, p,
					 sizeof(p), err, sizeof(err)),
			 -EINVAL);
	ckpt_base_set(&base, a, NULL, 10, p);
	assert_string_equal(base.file, "ckpt-00000010.h5");
	step_state(a, &st, 1);
	step_state(a, &st, 2);
	step_state(a, &st, 3);
	copy_state(want, a);
	assert_int_equal(ckpt_write_diff(ck, a, NULL, &st, &base, &ds, p,
					 sizeof(p), err, sizeof(err)),
			 0);
	print_message("%s: %d same %d delta %d whole, %llu bytes\n", p,
		      ds.tensors[DELTA_SAME], ds.tensors[DELTA_ZIGZAG],
		      ds.tensors[DELTA_WHOLE], (unsigned long long)ds.bytes);
	assert_non_null(strstr(p, "/diff-00000013-base-00000010.h5"));
	assert_int_equal(ds.tensors[DELTA_SAME], 1); /* v of tensor 0 */
	assert_true(ds.tensors[DELTA_ZIGZAG] >= a->ntensors);
	assert_true(ds.tensors[DELTA_WHOLE] >= 1);
	assert_int_equal(ds.tensors[0] + ds.tensors[1] + ds.tensors[2],
			 3 * a->ntensors);
	assert_int_equal(ds.base_step, 10);
	assert_true(ckpt_is_diff(p));
	/* read into another model: bitwise the state at step 13 */
	memset(b->params, 0, sizeof(float) * b->nparams);
	assert_int_equal(ckpt_read_diff(p, b, &got, err, sizeof(err)), 0);
	assert_state(b, want);
	assert_int_equal(got.step, 13);
	assert_true(got.rng == st.rng);
	assert_int_equal(got.seed, 77);
	assert_true(got.optim.beta2 == st.optim.beta2);
	/* a full reader refuses it rather than misreading it */
	assert_int_equal(ckpt_read(p, b, &got, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "sigma-checkpoint-diff"));
	/* the newest valid of the directory is the differential */
	memset(b->params, 0, sizeof(float) * b->nparams);
	assert_int_equal(
	    ckpt_load_latest_diff(ck, b, &got, p, sizeof(p), err, sizeof(err)),
	    0);
	assert_non_null(strstr(p, "diff-00000013"));
	assert_int_equal(got.step, 13);
	assert_state(b, want);
	assert_int_equal(ckpt_diff_newest_step(ck), 13);
	/* an old instance of the job, after a newer attempt published
	 * there, does not publish a differential either */
	st.attempt = 2;
	st.step = 14;
	assert_int_equal(ckpt_write(ck, a, &st, p, sizeof(p), err,
				    sizeof(err)),
			 0);
	st.attempt = 1;
	st.step = 15;
	assert_int_equal(ckpt_write_diff(ck, a, NULL, &st, &base, &ds, p,
					 sizeof(p), err, sizeof(err)),
			 -ESTALE);
	assert_non_null(strstr(err, "old instance"));
	assert_int_equal(ckpt_diff_newest_step(ck), 13);
	ckpt_base_fini(&base);
	free(want);
	model_destroy(a), model_destroy(b);
}

/* the background writer: full, then differentials against it */
static void test_ckpt_diff_async(void **state)
{
	struct model *a = small(), *b = small();
	struct ckpt_async *w = NULL;
	struct ckpt_async_stats cs;
	struct ckpt_state st, got;
	char ck[PATH_MAX], p[PATH_MAX + 64], err[1024];
	float *want = malloc(sizeof(float) * 3 * a->nparams);

	(void)state;
	assert_non_null(want);
	snprintf(ck, sizeof(ck), "%s/async", dir);
	assert_int_equal(
	    ckpt_async_create(&w, ck, 2, 2, 1, a, err, sizeof(err)), 0);
	fill_state(a, &st, 20);
	assert_int_equal(ckpt_async_submit_diff(w, a, &st, err, sizeof(err)),
			 -EINVAL);
	assert_int_equal(ckpt_async_enable_diff(w, a, err, sizeof(err)), 0);
	/* a differential before any full one: written full, says so */
	assert_int_equal(ckpt_async_submit_diff(w, a, &st, err, sizeof(err)),
			 0);
	step_state(a, &st, 5);
	copy_state(want, a);
	assert_int_equal(ckpt_async_submit_diff(w, a, &st, err, sizeof(err)),
			 0);
	/* training goes on while it is written */
	step_state(a, &st, 6);
	assert_int_equal(ckpt_async_wait(w, err, sizeof(err)), 0);
	ckpt_async_stats(w, &cs);
	assert_int_equal(cs.writes, 2);
	assert_int_equal(cs.diff_writes, 1);
	assert_int_equal(cs.diff.base_step, 20);
	assert_true(cs.diff.bytes > 0);
	snprintf(p, sizeof(p), "%s/ckpt-00000020.h5", ck);
	assert_int_equal(access(p, F_OK), 0);
	snprintf(p, sizeof(p), "%s/diff-00000021-base-00000020.h5", ck);
	assert_int_equal(ckpt_read_diff(p, b, &got, err, sizeof(err)), 0);
	assert_int_equal(got.step, 21);
	assert_state(b, want);
	/* a base set from a resumed model */
	ckpt_async_set_base(w, b, 21, "ckpt-00000021.h5");
	ckpt_async_destroy(w);
	free(want);
	model_destroy(a), model_destroy(b);
}

static void flip_byte(const char *path, double where)
{
	struct stat sb;
	unsigned char c;
	int fd;

	assert_int_equal(stat(path, &sb), 0);
	fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &c, 1, (off_t)(sb.st_size * where)), 1);
	c ^= 0x5a;
	assert_int_equal(pwrite(fd, &c, 1, (off_t)(sb.st_size * where)), 1);
	close(fd);
}

static void test_ckpt_diff_fallback(void **state)
{
	struct model *a = small(), *b = small();
	struct ckpt_state st, got;
	struct ckpt_base base;
	char ck[PATH_MAX], p[PATH_MAX], p12[PATH_MAX], p14[PATH_MAX];
	char full[PATH_MAX], err[1024];
	float *s12 = malloc(sizeof(float) * 3 * a->nparams);
	float *s10 = malloc(sizeof(float) * 3 * a->nparams);

	(void)state;
	assert_non_null(s12);
	assert_non_null(s10);
	snprintf(ck, sizeof(ck), "%s/fb", dir);
	assert_int_equal(ckpt_base_init(&base, a, err, sizeof(err)), 0);
	fill_state(a, &st, 10);
	copy_state(s10, a);
	assert_int_equal(
	    ckpt_write(ck, a, &st, full, sizeof(full), err, sizeof(err)), 0);
	ckpt_base_set(&base, a, NULL, 10, full);
	step_state(a, &st, 1);
	step_state(a, &st, 2);
	copy_state(s12, a);
	assert_int_equal(ckpt_write_diff(ck, a, NULL, &st, &base, NULL, p12,
					 sizeof(p12), err, sizeof(err)),
			 0);
	step_state(a, &st, 3);
	step_state(a, &st, 4);
	assert_int_equal(ckpt_write_diff(ck, a, NULL, &st, &base, NULL, p14,
					 sizeof(p14), err, sizeof(err)),
			 0);

	/* a flipped byte in the newest differential: the older one */
	flip_byte(p14, 0.5);
	assert_int_equal(ckpt_read_diff(p14, b, &got, err, sizeof(err)),
			 -EBADMSG);
	print_message("refused: %s\n", err);
	assert_non_null(strstr(err, p14));
	assert_int_equal(
	    ckpt_load_latest_diff(ck, b, &got, p, sizeof(p), err, sizeof(err)),
	    0);
	assert_string_equal(p, p12);
	assert_int_equal(got.step, 12);
	assert_state(b, s12);

	/* the base replaced by another state of the same step: refused */
	{
		struct model *c = small();
		struct ckpt_state cst;

		fill_state(c, &cst, 10);
		c->params[5] += 1.0f;
		assert_int_equal(
		    ckpt_write(ck, c, &cst, p, sizeof(p), err, sizeof(err)), 0);
		assert_int_equal(ckpt_read_diff(p12, b, &got, err, sizeof(err)),
				 -EBADMSG);
		print_message("refused: %s\n", err);
		assert_non_null(strstr(err, "base replaced"));
		assert_int_equal(ckpt_load_latest_diff(ck, b, &got, p,
						       sizeof(p), err,
						       sizeof(err)),
				 0);
		assert_string_equal(p, full);
		assert_true(b->params[5] == c->params[5]);
		model_destroy(c);
	}
	/* put the real base back: the differential is good again */
	assert_int_equal(ckpt_write(ck, a, &st, p, sizeof(p), err, sizeof(err)),
			 0); /* step 14, full: a newer full one */
	memcpy(a->params, s10, sizeof(float) * a->nparams);
	memcpy(a->m, s10 + a->nparams, sizeof(float) * a->nparams);
	memcpy(a->v, s10 + 2 * a->nparams, sizeof(float) * a->nparams);
	st.step = 10;
	assert_int_equal(ckpt_write(ck, a, &st, p, sizeof(p), err, sizeof(err)),
			 0);
	assert_int_equal(ckpt_read_diff(p12, b, &got, err, sizeof(err)), 0);
	assert_state(b, s12);
	/* a full checkpoint newer than every differential wins */
	assert_int_equal(
	    ckpt_load_latest_diff(ck, b, &got, p, sizeof(p), err, sizeof(err)),
	    0);
	assert_int_equal(got.step, 14);
	assert_true(!ckpt_is_diff(p));

	/* the base missing: the differential is refused and an older full
	 * one used */
	snprintf(ck, sizeof(ck), "%s/fb2", dir);
	fill_state(a, &st, 5);
	assert_int_equal(ckpt_write(ck, a, &st, p, sizeof(p), err, sizeof(err)),
			 0);
	st.step = 10;
	assert_int_equal(
	    ckpt_write(ck, a, &st, full, sizeof(full), err, sizeof(err)), 0);
	ckpt_base_set(&base, a, NULL, 10, full);
	step_state(a, &st, 7);
	assert_int_equal(ckpt_write_diff(ck, a, NULL, &st, &base, NULL, p12,
					 sizeof(p12), err, sizeof(err)),
			 0);
	assert_int_equal(unlink(full), 0);
	assert_int_equal(ckpt_read_diff(p12, b, &got, err, sizeof(err)),
			 -EBADMSG);
	print_message("refused: %s\n", err);
	assert_non_null(strstr(err, "base is unusable"));
	assert_int_equal(
	    ckpt_load_latest_diff(ck, b, &got, p, sizeof(p), err, sizeof(err)),
	    0);
	assert_int_equal(got.step, 5);
	ckpt_base_fini(&base);
	free(s10), free(s12);
	model_destroy(a), model_destroy(b);
}

static bool exists(const char *d, const char *name)
{
	char p[PATH_MAX + 64];

	snprintf(p, sizeof(p), "%s/%s", d, name);
	return access(p, F_OK) == 0;
}

/* retention: a kept differential keeps its base, however old */
static void test_ckpt_diff_prune(void **state)
{
	struct model *a = small();
	struct ckpt_state st;
	struct ckpt_base base;
	char ck[PATH_MAX], p[PATH_MAX], err[1024];

	(void)state;
	snprintf(ck, sizeof(ck), "%s/prune", dir);
	assert_int_equal(ckpt_base_init(&base, a, err, sizeof(err)), 0);
	fill_state(a, &st, 10);
	assert_int_equal(ckpt_write(ck, a, &st, p, sizeof(p), err, sizeof(err)),
			 0);
	ckpt_base_set(&base, a, NULL, 10, p);
	for (long s = 11; s <= 13; s++) {
		step_state(a, &st, (uint64_t)s);
		assert_int_equal(ckpt_write_diff(ck, a, NULL, &st, &base, NULL,
						 p, sizeof(p), err,
						 sizeof(err)),
				 0);
	}
	for (long s = 20; s <= 30; s += 10) {
		st.step = s;
		assert_int_equal(
		    ckpt_write(ck, a, &st, p, sizeof(p), err, sizeof(err)), 0);
	}
	/* keep 2: full 20 and 30, differentials 13 and 12, and full 10,
	 * their base */
	assert_int_equal(ckpt_prune(ck, 2), 0);
	assert_true(exists(ck, "ckpt-00000030.h5"));
	assert_true(exists(ck, "ckpt-00000020.h5"));
	assert_true(exists(ck, "ckpt-00000010.h5"));
	assert_true(exists(ck, "diff-00000013-base-00000010.h5"));
	assert_true(exists(ck, "diff-00000012-base-00000010.h5"));
	assert_false(exists(ck, "diff-00000011-base-00000010.h5"));
	/* after a rollback to 12, 13 belongs to an abandoned run */
	assert_int_equal(ckpt_diff_discard_after(ck, 12), 1);
	assert_false(exists(ck, "diff-00000013-base-00000010.h5"));
	/* keep 1: differential 12 stays, so does its base */
	assert_int_equal(ckpt_prune(ck, 1), 0);
	assert_true(exists(ck, "ckpt-00000030.h5"));
	assert_false(exists(ck, "ckpt-00000020.h5"));
	assert_true(exists(ck, "ckpt-00000010.h5"));
	assert_true(exists(ck, "diff-00000012-base-00000010.h5"));
	/* a newer differential against 30 displaces it: 10 goes too */
	ckpt_base_set(&base, a, NULL, 30, "ckpt-00000030.h5");
	st.step = 31;
	assert_int_equal(ckpt_write_diff(ck, a, NULL, &st, &base, NULL, p,
					 sizeof(p), err, sizeof(err)),
			 0);
	assert_int_equal(ckpt_prune(ck, 1), 0);
	assert_true(exists(ck, "diff-00000031-base-00000030.h5"));
	assert_false(exists(ck, "diff-00000012-base-00000010.h5"));
	assert_false(exists(ck, "ckpt-00000010.h5"));
	assert_true(exists(ck, "ckpt-00000030.h5"));
	/* the same step against another base: the older one goes */
	st.step = 32;
	assert_int_equal(ckpt_write_diff(ck, a, NULL, &st, &base, NULL, p,
					 sizeof(p), err, sizeof(err)),
			 0);
	st.step = 31;
	assert_int_equal(ckpt_write(ck, a, &st, p, sizeof(p), err,
				    sizeof(err)),
			 0);
	ckpt_base_set(&base, a, NULL, 31, p);
	st.step = 32;
	assert_int_equal(ckpt_write_diff(ck, a, NULL, &st, &base, NULL, p,
					 sizeof(p), err, sizeof(err)),
			 0);
	assert_false(exists(ck, "diff-00000032-base-00000030.h5"));
	assert_true(exists(ck, "diff-00000032-base-00000031.h5"));
	/* a full checkpoint of its step supersedes a differential */
	assert_int_equal(ckpt_prune(ck, 3), 0);
	assert_false(exists(ck, "diff-00000031-base-00000030.h5"));
	assert_true(exists(ck, "diff-00000032-base-00000031.h5"));
	assert_true(exists(ck, "ckpt-00000030.h5"));
	ckpt_base_fini(&base);
	model_destroy(a);
}

/*
 * Attempts: a requeued attempt's differentials carry it in their names;
 * its differential wins over a newer step of an old instance, which may
 * not publish one after the newer attempt did.
 */
static void test_ckpt_diff_attempts(void **state)
{
	struct model *a = small(), *b = small();
	struct ckpt_state st, got;
	struct ckpt_base base;
	char ck[PATH_MAX], p[PATH_MAX], p10[PATH_MAX], err[1024];
	float *s10 = malloc(sizeof(float) * 3 * a->nparams);

	(void)state;
	assert_non_null(s10);
	snprintf(ck, sizeof(ck), "%s/att", dir);
	assert_int_equal(ckpt_base_init(&base, a, err, sizeof(err)), 0);
	fill_state(a, &st, 8);
	assert_int_equal(ckpt_write(ck, a, &st, p, sizeof(p), err,
				    sizeof(err)),
			 0);
	ckpt_base_set(&base, a, NULL, 8, p);
	/* the old instance (attempt 0) gets to step 12 */
	for (int i = 0; i < 4; i++)
		step_state(a, &st, 100 + (uint64_t)i);
	assert_int_equal(ckpt_write_diff(ck, a, NULL, &st, &base, NULL, p,
					 sizeof(p), err, sizeof(err)),
			 0);
	assert_non_null(strstr(p, "/diff-00000012-base-00000008.h5"));
	/* attempt 1 resumed from 8, on other data: step 10 */
	memcpy(a->params, base.state, sizeof(float) * a->nparams);
	memcpy(a->m, base.state + a->nparams, sizeof(float) * a->nparams);
	memcpy(a->v, base.state + 2 * a->nparams, sizeof(float) * a->nparams);
	st.step = 8;
	st.attempt = 1;
	step_state(a, &st, 7);
	step_state(a, &st, 8);
	copy_state(s10, a);
	assert_int_equal(ckpt_write_diff(ck, a, NULL, &st, &base, NULL, p10,
					 sizeof(p10), err, sizeof(err)),
			 0);
	assert_non_null(strstr(p10, "/diff-00000010-base-00000008-a1.h5"));
	assert_int_equal(ckpt_read_diff(p10, b, &got, err, sizeof(err)), 0);
	assert_int_equal(got.attempt, 1);
	/* the newer attempt's differential, not the old instance's newer
	 * step */
	assert_int_equal(ckpt_load_latest_diff(ck, b, &got, p, sizeof(p), err,
					       sizeof(err)),
			 0);
	assert_string_equal(p, p10);
	assert_int_equal(got.step, 10);
	assert_state(b, s10);
	{
		int att = -1;

		assert_int_equal(ckpt_diff_newest(ck, &att), 10);
		assert_int_equal(att, 1);
	}
	/* the old instance may not publish any more */
	st.attempt = 0;
	st.step = 14;
	assert_int_equal(ckpt_write_diff(ck, a, NULL, &st, &base, NULL, p,
					 sizeof(p), err, sizeof(err)),
			 -ESTALE);
	print_message("refused: %s\n", err);
	assert_non_null(strstr(err, "attempt 1"));
	ckpt_base_fini(&base);
	free(s10);
	model_destroy(a), model_destroy(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_round_trip_random),
	    cmocka_unit_test(test_round_trip_adversarial),
	    cmocka_unit_test(test_encoding_values),
	    cmocka_unit_test(test_hash),
	    cmocka_unit_test(test_choice_margin),
	    cmocka_unit_test(test_choice_real),
	    cmocka_unit_test(test_ckpt_diff_round_trip),
	    cmocka_unit_test(test_ckpt_diff_async),
	    cmocka_unit_test(test_ckpt_diff_fallback),
	    cmocka_unit_test(test_ckpt_diff_prune),
	    cmocka_unit_test(test_ckpt_diff_attempts),
	};

	sigma_log_init("test_trainer_delta", SIGMA_LOG_WARN);
	return cmocka_run_group_tests(tests, setup, teardown);
}
