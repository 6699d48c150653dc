/*
 * test_lib_runtime_ckpt.c - libsigma-runtime's checkpoints of tensor
 * tables through its public header alone (lib/sigma_runtime.h): a table
 * of every dtype written in the background and read back bit for bit,
 * the tensors written without a copy (copy=no, fence), retention,
 * hostile tables (bad names, duplicates, shapes that overflow, shards
 * outside their tensor), files that are refused (of
 * another run, another shape, damaged, unsealed), and a checkpoint of 4
 * ranks loaded by 3 that split it another way.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "sigma_runtime.h"
#include "scratch.h"

static char dir[256];

static int setup(void **state)
{
	(void)state;
	return scratch_make(dir, sizeof(dir), "rtckpt");
}

static int teardown(void **state)
{
	(void)state;
	return scratch_remove(dir);
}

/* a rank's state: weights (f32, a shard), moments (bf16), a step count
 * (i64 scalar), RNG bytes (u8), a mask (bool), nothing (an empty f16) */
struct state {
	float w[6];
	uint16_t m[6];
	int64_t count;
	uint8_t rng[17];
	uint8_t mask[3];
	double f64[2];
	int32_t i32[2];
	uint16_t none[1];
};

static const int64_t w_shape[] = { 2, 3 }, w_global[] = { 4, 3 },
		     w_off[] = { 2, 0 }, m_shape[] = { 6 }, rng_shape[] = { 17 },
		     mask_shape[] = { 3 }, two[] = { 2 }, empty[] = { 0, 5 };

static size_t table(struct state *s, struct sigma_rt_tensor *t)
{
	const struct sigma_rt_tensor tab[] = {
		{ "model.w", SIGMA_RT_F32, 2, w_shape, s->w, w_global, w_off },
		{ "optim.m", SIGMA_RT_BF16, 1, m_shape, s->m, NULL, NULL },
		{ "optim.step", SIGMA_RT_I64, 0, NULL, &s->count, NULL, NULL },
		{ "rng:cpu", SIGMA_RT_U8, 1, rng_shape, s->rng, NULL, NULL },
		{ "mask", SIGMA_RT_BOOL, 1, mask_shape, s->mask, NULL, NULL },
		{ "f64", SIGMA_RT_F64, 1, two, s->f64, NULL, NULL },
		{ "i32", SIGMA_RT_I32, 1, two, s->i32, NULL, NULL },
		{ "empty", SIGMA_RT_F16, 2, empty, s->none, NULL, NULL },
	};

	memcpy(t, tab, sizeof(tab));
	return sizeof(tab) / sizeof(tab[0]);
}

static void fill(struct state *s, int seed)
{
	memset(s, 0, sizeof(*s));
	for (int i = 0; i < 6; i++) {
		s->w[i] = (float)(seed * 10 + i) / 3.0f;
		s->m[i] = (uint16_t)(0x3f80 + seed + i);
	}
	s->count = 1000000000000LL + seed;
	for (int i = 0; i < 17; i++)
		s->rng[i] = (uint8_t)(seed * 7 + i);
	s->mask[seed % 3] = 1;
	s->f64[0] = 1.0 / (seed + 3);
	s->f64[1] = -2.5 * seed;
	s->i32[0] = -seed;
	s->i32[1] = seed << 20;
}

static struct sigma_rt_ckpt *open_ok(const char *run, int rank,
				     const char *settings)
{
	struct sigma_rt_ckpt *ck = NULL;
	char err[256] = "";

	assert_int_equal(sigma_rt_ckpt_open(&ck, dir, run, rank, settings,
					    err, sizeof(err)), 0);
	assert_non_null(ck);
	return ck;
}

static void save_ok(struct sigma_rt_ckpt *ck, long step, int seed)
{
	struct state s;
	struct sigma_rt_tensor t[8];
	size_t n;
	char err[256] = "";

	fill(&s, seed);
	n = table(&s, t);
	assert_int_equal(sigma_rt_ckpt_save(ck, step, t, n, err, sizeof(err)),
			 0);
	/* the copy is the library's: changing the state now changes nothing */
	memset(&s, 0xee, sizeof(s));
}

static void test_round_trip(void **state)
{
	struct sigma_rt_ckpt *ck = open_ok("job-42.a", 1, NULL);
	struct state want, got;
	struct sigma_rt_tensor t[8];
	long steps[4];
	char err[256] = "";
	size_t n;

	(void)state;
	save_ok(ck, 7, 3);
	save_ok(ck, 8, 4);
	assert_int_equal(sigma_rt_ckpt_wait(ck, err, sizeof(err)), 0);
	assert_int_equal(sigma_rt_ckpt_steps(ck, steps, 4), 2);
	assert_int_equal(steps[0], 8);
	assert_int_equal(steps[1], 7);

	fill(&want, 3);
	memset(&got, 0, sizeof(got));
	n = table(&got, t);
	assert_int_equal(sigma_rt_ckpt_load(ck, 7, t, n, err, sizeof(err)), 0);
	assert_memory_equal(&got, &want, sizeof(want));
	fill(&want, 4);
	assert_int_equal(sigma_rt_ckpt_load(ck, 8, t, n, err, sizeof(err)), 0);
	assert_memory_equal(&got, &want, sizeof(want));
	/* what the file holds, for a caller that makes room first */
	{
		int dtype = 0, ndim = -1;
		int64_t shape[SIGMA_RT_NDIM_MAX];

		assert_int_equal(sigma_rt_ckpt_shape(ck, 8, "model.w", &dtype,
						     &ndim, shape, err,
						     sizeof(err)), 0);
		assert_int_equal(dtype, SIGMA_RT_F32);
		assert_int_equal(ndim, 2);
		assert_int_equal(shape[0], 2);
		assert_int_equal(shape[1], 3);
		assert_int_equal(sigma_rt_ckpt_shape(ck, 8, "optim.step",
						     &dtype, &ndim, shape, err,
						     sizeof(err)), 0);
		assert_int_equal(dtype, SIGMA_RT_I64);
		assert_int_equal(ndim, 0);
		assert_int_equal(sigma_rt_ckpt_shape(ck, 8, "nope", &dtype,
						     &ndim, shape, err,
						     sizeof(err)), -EBADMSG);
		assert_non_null(strstr(err, "nope is missing"));
	}
	/* a subset by name; the order of the table does not matter */
	assert_int_equal(sigma_rt_ckpt_load(ck, 8, t + 3, 2, err, sizeof(err)),
			 0);
	assert_int_equal(sigma_rt_ckpt_load(ck, 9, t, n, err, sizeof(err)),
			 -ENOENT);
	sigma_rt_ckpt_close(ck);
}

static void test_keep(void **state)
{
	struct sigma_rt_ckpt *ck = open_ok("keep", 0, "keep=3");
	long steps[8];

	(void)state;
	for (long s = 1; s <= 6; s++)
		save_ok(ck, s, (int)s);
	assert_int_equal(sigma_rt_ckpt_steps(ck, steps, 8), 3);
	assert_int_equal(steps[0], 6);
	assert_int_equal(steps[2], 4);
	sigma_rt_ckpt_close(ck);
}

/*
 * copy=no: save returns before the elements are read; once fence
 * returns they are the caller's again, and what changes then is not in
 * the step. A second save without a fence waits for the first's write.
 */
static void test_no_copy(void **state)
{
	struct sigma_rt_ckpt *ck = open_ok("no-copy", 0, "copy=no keep=3");
	struct state s, s7, want, got;
	struct sigma_rt_tensor t[8], t7[8], g[8];
	char err[256] = "";
	size_t n;

	(void)state;
	fill(&s, 5);
	n = table(&s, t);
	assert_int_equal(sigma_rt_ckpt_save(ck, 1, t, n, err, sizeof(err)), 0);
	sigma_rt_ckpt_fence(ck);
	memset(&s, 0xee, sizeof(s));
	fill(&s, 6);
	assert_int_equal(sigma_rt_ckpt_save(ck, 2, t, n, err, sizeof(err)), 0);
	/* no fence: the next save returns once step 2 is written */
	fill(&s7, 7);
	table(&s7, t7);
	assert_int_equal(sigma_rt_ckpt_save(ck, 3, t7, n, err, sizeof(err)),
			 0);
	memset(&s, 0xee, sizeof(s));
	sigma_rt_ckpt_fence(ck);
	sigma_rt_ckpt_fence(ck); /* twice is harmless */
	memset(&s7, 0xee, sizeof(s7));
	assert_int_equal(sigma_rt_ckpt_wait(ck, err, sizeof(err)), 0);

	n = table(&got, g);
	for (int step = 1; step <= 3; step++) {
		memset(&got, 0, sizeof(got));
		fill(&want, 4 + step);
		assert_int_equal(sigma_rt_ckpt_load(ck, step, g, n, err,
						    sizeof(err)), 0);
		assert_memory_equal(&got, &want, sizeof(want));
	}
	sigma_rt_ckpt_close(ck);
}

static void expect_refused(const char *settings, const char *run, int rank,
			   const char *what)
{
	struct sigma_rt_ckpt *ck = (void *)1;
	char err[256] = "";

	assert_int_equal(sigma_rt_ckpt_open(&ck, dir, run, rank, settings,
					    err, sizeof(err)), -EINVAL);
	assert_null(ck);
	if (!strstr(err, what))
		fail_msg("error \"%s\" does not name %s", err, what);
}

static void test_open_refusals(void **state)
{
	(void)state;
	expect_refused("keep=0", "r", 0, "keep=0");
	expect_refused("keep=65", "r", 0, "keep=65");
	expect_refused("retain=3", "r", 0, "retain");
	expect_refused("copy=later", "r", 0, "copy=later");
	expect_refused(NULL, "../etc", 0, "run name ../etc");
	expect_refused(NULL, "a b", 0, "run name a b");
	expect_refused(NULL, "", 0, "run name");
	expect_refused(NULL, NULL, 0, "run name");
	expect_refused(NULL,
		       "x123456789012345678901234567890123456789012345678901234567890123456",
		       0, "run name");
	expect_refused(NULL, "r", -1, "rank -1");
}

/* t[i] changed by edit, then refused by save with err naming what */
static void expect_bad_table(void (*edit)(struct sigma_rt_tensor *t),
			     const char *what)
{
	struct sigma_rt_ckpt *ck = open_ok("hostile", 0, NULL);
	struct state s;
	struct sigma_rt_tensor t[8];
	long steps[2];
	char err[256] = "";
	size_t n;

	fill(&s, 1);
	n = table(&s, t);
	edit(t);
	assert_int_equal(sigma_rt_ckpt_save(ck, 1, t, n, err, sizeof(err)),
			 -EINVAL);
	if (!strstr(err, what))
		fail_msg("error \"%s\" does not name %s", err, what);
	/* nothing was written */
	assert_int_equal(sigma_rt_ckpt_steps(ck, steps, 2), 0);
	sigma_rt_ckpt_close(ck);
}

static void dup_name(struct sigma_rt_tensor *t) { t[5].name = "model.w"; }
static void no_name(struct sigma_rt_tensor *t) { t[2].name = NULL; }
static void slash_name(struct sigma_rt_tensor *t) { t[2].name = "a/b"; }
static void dot_name(struct sigma_rt_tensor *t) { t[2].name = ".."; }
static void bad_dtype(struct sigma_rt_tensor *t) { t[1].dtype = 99; }
static void too_many_dims(struct sigma_rt_tensor *t) { t[1].ndim = 9; }
static void negative_dim(struct sigma_rt_tensor *t)
{
	static const int64_t neg[] = { 2, -3 };

	t[0].shape = neg;
}
static void overflow(struct sigma_rt_tensor *t)
{
	static const int64_t huge[] = { INT64_MAX / 2, 4 };

	t[0].shape = huge;
	t[0].global_shape = NULL;
	t[0].offset = NULL;
}
static void shard_outside(struct sigma_rt_tensor *t)
{
	static const int64_t off[] = { 3, 0 };

	t[0].offset = off;
}
static void half_shard(struct sigma_rt_tensor *t) { t[0].offset = NULL; }
static void no_data(struct sigma_rt_tensor *t) { t[3].data = NULL; }

static void test_hostile_tables(void **state)
{
	(void)state;
	expect_bad_table(dup_name, "model.w appears twice");
	expect_bad_table(no_name, "tensor 2: its name");
	expect_bad_table(slash_name, "tensor 2: its name");
	expect_bad_table(dot_name, "tensor 2: its name");
	expect_bad_table(bad_dtype, "dtype 99");
	expect_bad_table(too_many_dims, "9 dimensions");
	expect_bad_table(negative_dim, "shape[1] = -3");
	expect_bad_table(overflow, "too large");
	expect_bad_table(shard_outside, "outside its global shape");
	expect_bad_table(half_shard, "both its global shape and its offset");
	expect_bad_table(no_data, "rng:cpu): no data");
}

/* load of a good step 1 with t edited: refused, naming what */
static void expect_bad_load(const char *run, void (*edit)(struct state *,
					struct sigma_rt_tensor *),
			    const char *what)
{
	struct sigma_rt_ckpt *ck = open_ok(run, 0, NULL);
	struct state s;
	struct sigma_rt_tensor t[8];
	char err[512] = "";
	size_t n;

	n = table(&s, t);
	edit(&s, t);
	assert_int_equal(sigma_rt_ckpt_load(ck, 1, t, n, err, sizeof(err)),
			 -EBADMSG);
	if (!strstr(err, what))
		fail_msg("error \"%s\" does not name %s", err, what);
	sigma_rt_ckpt_close(ck);
}

static void nothing(struct state *s, struct sigma_rt_tensor *t)
{
	(void)s, (void)t;
}

static void other_shape(struct state *s, struct sigma_rt_tensor *t)
{
	static const int64_t shape[] = { 3, 2 };

	(void)s;
	t[0].shape = shape;
	t[0].global_shape = NULL;
	t[0].offset = NULL;
}

static void other_dtype(struct state *s, struct sigma_rt_tensor *t)
{
	(void)s;
	t[1].dtype = SIGMA_RT_F16;
}

static void missing(struct state *s, struct sigma_rt_tensor *t)
{
	(void)s;
	t[4].name = "not.there";
}

static void test_refused_files(void **state)
{
	struct sigma_rt_ckpt *ck = open_ok("mine", 0, NULL);
	char path[512], err[512];
	int fd;

	(void)state;
	save_ok(ck, 1, 1);
	sigma_rt_ckpt_close(ck);

	expect_bad_load("theirs", nothing, "run mine, not of this run (theirs)");
	expect_bad_load("mine", other_shape, "model.w has shape[0] = 2");
	expect_bad_load("mine", other_dtype, "optim.m is bf16");
	expect_bad_load("mine", missing, "not.there is missing");

	/* one byte changed after the seal: refused before HDF5 reads it */
	snprintf(path, sizeof(path), "%s/rank-0/step-1.h5", dir);
	fd = open(path, O_WRONLY);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, "X", 1, 2000), 1);
	close(fd);
	expect_bad_load("mine", nothing, "does not match its seal");

	/* a file without its seal is not a step */
	snprintf(path, sizeof(path), "%s/rank-0/step-1.h5.seal", dir);
	assert_int_equal(unlink(path), 0);
	ck = open_ok("mine", 0, NULL);
	assert_int_equal(sigma_rt_ckpt_steps(ck, NULL, 0), 0);
	assert_int_equal(sigma_rt_ckpt_load(ck, 1, NULL, 0, err, sizeof(err)),
			 -EBADMSG);
	sigma_rt_ckpt_close(ck);
}

/*
 * Resharding. A 6x4 f32 tensor "w" (element value its global index) and a
 * scalar "step" are saved by 4 ranks: 2 data-parallel replicas x 2 row
 * shards (rows 0-2, 3-5), the replicas holding the same rows. They are
 * loaded by 3 ranks that split the columns instead (4 = 2 + 1 + 1), and
 * by one rank whole: every element lands where it belongs, the scalar
 * once. A region the writers do not cover, another global shape, a
 * missing writer and overlapping shards are refused, saying so.
 */
#define RS_ROWS 6
#define RS_COLS 4
static void rs_save(int writers, int split, int64_t row_shift)
{
	for (int r = 0; r < writers; r++) {
		struct sigma_rt_ckpt *ck = open_ok("reshard", r, NULL);
		int64_t rows = RS_ROWS / split, part = r % split;
		int64_t shape[] = { rows, RS_COLS }, global[] = { RS_ROWS, RS_COLS };
		int64_t off[] = { part * rows + (part ? row_shift : 0), 0 };
		float w[RS_ROWS * RS_COLS];
		int64_t step = 77;
		char err[256] = "";
		struct sigma_rt_tensor t[] = {
			{ "w", SIGMA_RT_F32, 2, shape, w, global, off },
			{ "step", SIGMA_RT_I64, 0, NULL, &step, NULL, NULL },
		};

		for (int64_t i = 0; i < rows; i++)
			for (int64_t j = 0; j < RS_COLS; j++)
				w[i * RS_COLS + j] =
				    (float)((part * rows + i) * RS_COLS + j);
		assert_int_equal(sigma_rt_ckpt_save(ck, 5, t, 2, err,
						    sizeof(err)), 0);
		assert_int_equal(sigma_rt_ckpt_wait(ck, err, sizeof(err)), 0);
		sigma_rt_ckpt_close(ck);
	}
}

/* load columns [c0, c0 + nc) as a shard of global_shape g: 0 or -errno */
static int rs_load(int writers, int64_t c0, int64_t nc, const int64_t *g,
		   float *w, int64_t *step, char *err, size_t len)
{
	struct sigma_rt_ckpt *ck = open_ok("reshard", 0, NULL);
	int64_t shape[] = { RS_ROWS, nc }, off[] = { 0, c0 };
	struct sigma_rt_tensor t[] = {
		{ "w", SIGMA_RT_F32, 2, shape, w, g, off },
		{ "step", SIGMA_RT_I64, 0, NULL, step, NULL, NULL },
	};
	int rc = sigma_rt_ckpt_load_resharded(ck, 5, writers, t, 2, err, len);

	sigma_rt_ckpt_close(ck);
	return rc;
}

static void test_reshard(void **state)
{
	const int64_t global[] = { RS_ROWS, RS_COLS }, other[] = { RS_ROWS, 5 };
	const int64_t cols[][2] = { { 0, 2 }, { 2, 1 }, { 3, 1 }, { 0, 4 } };
	float w[RS_ROWS * RS_COLS];
	int64_t step;
	char err[256] = "";

	(void)state;
	rs_save(4, 2, 0);
	for (size_t k = 0; k < sizeof(cols) / sizeof(cols[0]); k++) {
		int64_t c0 = cols[k][0], nc = cols[k][1];

		memset(w, 0xff, sizeof(w));
		step = -1;
		assert_int_equal(rs_load(4, c0, nc, global, w, &step, err,
					 sizeof(err)), 0);
		assert_int_equal(step, 77);
		for (int64_t i = 0; i < RS_ROWS; i++)
			for (int64_t j = 0; j < nc; j++)
				assert_true(w[i * nc + j] ==
					    (float)(i * RS_COLS + c0 + j));
	}
	/* two writers hold rows 0-2 only: rows 3-5 are not covered */
	assert_int_equal(rs_load(1, 0, 4, global, w, &step, err, sizeof(err)),
			 -EBADMSG);
	assert_non_null(strstr(err, "hold 12 of its 24 elements"));
	assert_int_equal(rs_load(4, 0, 4, other, w, &step, err, sizeof(err)),
			 -EBADMSG);
	assert_non_null(strstr(err, "global shape[1] = 4 in the file, 5 wanted"));
	assert_int_equal(rs_load(5, 0, 4, global, w, &step, err, sizeof(err)),
			 -ENOENT);
	assert_non_null(strstr(err, "by rank 4"));
	assert_int_equal(rs_load(0, 0, 4, global, w, &step, err, sizeof(err)),
			 -EINVAL);
	/* writers whose row shards overlap (rows 0-2 and 2-4) */
	rs_save(2, 2, -1);
	assert_int_equal(rs_load(2, 0, 4, global, w, &step, err, sizeof(err)),
			 -EBADMSG);
	assert_non_null(strstr(err, "overlaps another writer's"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_round_trip, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_keep, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_copy, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_open_refusals, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_hostile_tables, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_reshard, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refused_files, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
