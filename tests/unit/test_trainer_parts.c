/*
 * test_trainer_parts.c - a model no rank holds whole (model_shard), and
 * its checkpoints in parts (trainer/ckpt/ckpt_shard.c), in one process:
 *
 *   - a shard draws exactly the whole model's rows, in its slot order;
 *   - model_bytes counts what model_create_shard allocates;
 *   - the parts of two expert ranks, joined by an index, read back whole
 *     into one model, and into shards of another placement (resharding);
 *   - a part replaced after the index was written, or missing, is
 *     refused with a message that names it;
 *   - split moments (ZeRO-1): the blocks cover each range once, and the
 *     blocks' AdamW steps together are the whole model's step.
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "sigma.h"
#include "ckpt.h"
#include "model.h"
#include "scratch.h"

static struct model *zero_part(int ep, const int *ids, int P, int k);

/* shard of the small model holding experts ids[L][E / ep] */
static struct model *part(int ep, const int *ids)
{
	return zero_part(ep, ids, 1, 0);
}

/* every row of every tensor of p is the whole model's row it names,
 * in the parameters and both moments */
static void assert_rows_of(const struct model *p, const struct model *w)
{
	const float *pb[3] = { p->params, p->m, p->v };
	const float *wb[3] = { w->params, w->m, w->v };

	for (int b = 0; b < 3; b++)
		for (int i = 0; i < p->ntensors; i++) {
			const struct model_tensor *t = &p->tensors[i];
			const struct model_tensor *u = model_find_tensor(w, t->name);
			size_t row = t->n / t->shape[0];

			assert_non_null(u);
			for (uint64_t j = 0; j < t->shape[0]; j++)
				assert_memory_equal(
				    pb[b] + t->offset + j * row,
				    wb[b] + u->offset +
					model_tensor_row(p, t, j) * row,
				    sizeof(float) * row);
		}
}

/* moments that differ from row to row, so that a misplaced row shows */
static void fake_moments(struct model *whole, struct model **parts, int n)
{
	for (size_t i = 0; i < whole->nparams; i++) {
		whole->m[i] = 1e-3f * (float)(i % 977);
		whole->v[i] = 1e-6f * (float)(i % 613);
	}
	for (int k = 0; k < n; k++) {
		struct model *p = parts[k];

		for (int i = 0; i < p->ntensors; i++) {
			const struct model_tensor *t = &p->tensors[i];
			const struct model_tensor *u =
			    model_find_tensor(whole, t->name);
			size_t row = t->n / t->shape[0];

			for (uint64_t j = 0; j < t->shape[0]; j++) {
				size_t to = t->offset + j * row;
				size_t from = u->offset +
					      model_tensor_row(p, t, j) * row;

				memcpy(p->m + to, whole->m + from,
				       sizeof(float) * row);
				memcpy(p->v + to, whole->v + from,
				       sizeof(float) * row);
			}
		}
	}
}

static void test_shard_draws_the_whole_models_rows(void **state)
{
	static const int ids[2 * 2] = { 3, 1, 0, 2 };
	struct model *w = part(1, NULL), *p = part(2, ids);
	struct model_shard sh;
	size_t pb = 0;

	(void)state;
	assert_false(w->sharded);
	assert_true(p->sharded);
	/* the experts follow the dense range */
	assert_true(p->ndense < p->nparams);
	assert_int_equal(w->ndense, w->nparams);
	assert_rows_of(p, w);
	model_shard_whole(&sh, &p->cfg);
	sh.ep = 2;
	sh.experts = ids;
	assert_int_equal(model_bytes(&p->cfg, 1, 1, &sh, &sigma_ops_cpu, &pb),
			 p->arena_bytes);
	assert_int_equal(pb, sizeof(float) * p->nparams);
	/* a stage of one of the two layers holds half of them, no head */
	sh = (struct model_shard){ .layer_count = 1, .ep = 1 };
	assert_true(model_bytes(&p->cfg, 1, 1, &sh, &sigma_ops_cpu, &pb) <
		    w->arena_bytes);
	model_destroy(w);
	model_destroy(p);
}

static void test_zero_blocks_cover_each_range_once(void **state)
{
	static const size_t ns[] = { 0, 1, 7, 1000, 262977 };

	(void)state;
	for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++)
		for (int P = 1; P <= 9; P++) {
			size_t at = 0, lo, hi;

			for (int k = 0; k < P; k++) {
				model_zero_block(ns[i], k, P, &lo, &hi);
				assert_int_equal(lo, at);
				assert_true(hi - lo <= ns[i] / P + 1);
				at = hi;
			}
			assert_int_equal(at, ns[i]);
		}
}

/* the small model holding experts ids with its moments split over P
 * ranks, block k of each range */
static struct model *zero_part(int ep, const int *ids, int P, int k)
{
	struct model_config c;
	struct model_shard sh;
	struct model *m = NULL;
	char err[256];

	model_config_small(&c);
	model_shard_whole(&sh, &c);
	sh.ep = ep;
	sh.experts = ids;
	sh.zrank[0] = sh.zrank[1] = k;
	sh.zsize[0] = sh.zsize[1] = P;
	assert_int_equal(model_create_shard(&m, &c, 1, 1, &sh, &sigma_ops_cpu,
					    err, sizeof(err)),
			 0);
	model_init_weights(m, 5);
	return m;
}

static void test_zero_blocks_step_like_the_whole(void **state)
{
	static const int ids[2 * 2] = { 3, 1, 0, 2 };
	struct model *w = zero_part(2, ids, 1, 0), *z[3];
	struct optim_config o;
	const size_t n = w->nparams;
	float *fm = calloc(n, sizeof(float)), *fv = calloc(n, sizeof(float));
	float *out = calloc(n, sizeof(float));
	struct model_shard sh;
	size_t covered = 0;

	(void)state;
	optim_config_default(&o);
	assert_false(w->zero);
	for (size_t i = 0; i < n; i++) { /* one gradient, some moments */
		w->grads[i] = 1e-2f * (float)((int)(i % 41) - 20);
		fm[i] = 1e-3f * (float)(i % 977);
		fv[i] = 1e-6f * (float)(i % 613);
	}
	model_moments_load(w, fm, fv);
	for (int k = 0; k < 3; k++) {
		z[k] = zero_part(2, ids, 3, k);
		assert_true(z[k]->zero && z[k]->sharded);
		assert_true(z[k]->nmom < n / 2);
		covered += z[k]->nmom;
		memcpy(z[k]->grads, w->grads, sizeof(float) * n);
		model_moments_load(z[k], fm, fv);
		optim_step(z[k], &o, 1.0, 1e-3f, 3);
	}
	assert_int_equal(covered, n);
	optim_step(w, &o, 1.0, 1e-3f, 3);
	/* each block's parameters and moments are the whole model's */
	for (int k = 0; k < 3; k++) {
		memset(fm, 0, sizeof(float) * n);
		memset(fv, 0, sizeof(float) * n);
		model_moments_store(z[k], fm, fv);
		for (int r = 0; r < 2; r++)
			for (size_t i = z[k]->mom_lo[r]; i < z[k]->mom_hi[r];
			     i++) {
				assert_true(fm[i] == w->m[i] && fv[i] == w->v[i]);
				out[i] = z[k]->params[i];
			}
	}
	assert_memory_equal(out, w->params, sizeof(float) * n);
	/* the arena is smaller by the moments it does not hold */
	model_shard_whole(&sh, &w->cfg);
	sh.ep = 2, sh.experts = ids, sh.zsize[0] = sh.zsize[1] = 3;
	assert_int_equal(model_bytes(&w->cfg, 1, 1, &sh, &sigma_ops_cpu, NULL),
			 z[0]->arena_bytes);
	assert_true(z[0]->arena_bytes < w->arena_bytes);
	for (int k = 0; k < 3; k++)
		model_destroy(z[k]);
	model_destroy(w);
	free(fm);
	free(fv);
	free(out);
}

struct fix {
	char dir[256];
	struct model *whole, *p[2];
	struct ckpt_writer w[2];
	struct ckpt_state st;
};

static const int place_a[2][2 * 2] = { { 0, 1, 0, 1 }, { 2, 3, 2, 3 } };

static int setup(void **state)
{
	struct fix *f = calloc(1, sizeof(*f));
	char err[1024], path[PATH_MAX];
	const float *stage;

	assert_non_null(f);
	assert_int_equal(scratch_make(f->dir, sizeof(f->dir), "parts"), 0);
	f->whole = part(1, NULL);
	for (int k = 0; k < 2; k++)
		f->p[k] = part(2, place_a[k]);
	fake_moments(f->whole, f->p, 2);
	f->st = (struct ckpt_state){ .step = 4, .batch = 2, .seed = 5,
				     .rng = 9 };
	optim_config_default(&f->st.optim);
	for (int k = 0; k < 2; k++) {
		float *s = malloc(sizeof(float) * 3 * f->p[k]->nparams);
		size_t n = f->p[k]->nparams;

		assert_non_null(s);
		memcpy(s, f->p[k]->params, sizeof(float) * n);
		memcpy(s + n, f->p[k]->m, sizeof(float) * n);
		memcpy(s + 2 * n, f->p[k]->v, sizeof(float) * n);
		stage = s;
		f->w[k] = (struct ckpt_writer){ k, f->p[k],
						k ? CKPT_EXPERTS : CKPT_ALL };
		assert_int_equal(ckpt_write_shard(f->dir, f->p[k], stage,
						  &f->st, k, f->w[k].which,
						  path, sizeof(path), err,
						  sizeof(err)),
				 0);
		free(s);
	}
	if (ckpt_write_index(f->dir, f->whole, f->w, 2, &f->st, path,
			     sizeof(path), err, sizeof(err)))
		fail_msg("index: %s", err);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fix *f = *state;

	model_destroy(f->whole);
	model_destroy(f->p[0]);
	model_destroy(f->p[1]);
	scratch_remove(f->dir);
	free(f);
	return 0;
}

/* a model of the same shape with other weights, to read into */
static struct model *blank(int ep, const int *ids)
{
	struct model *m = part(ep, ids);

	for (size_t i = 0; i < m->nparams; i++)
		m->params[i] = m->m[i] = m->v[i] = -7.0f;
	return m;
}

static void test_parts_read_whole_and_resharded(void **state)
{
	static const int place_b[2 * 1] = { 3, 1 }; /* ep 4: one expert */
	struct fix *f = *state;
	struct model *one = blank(1, NULL), *q = blank(4, place_b);
	struct ckpt_state st;
	char path[PATH_MAX], err[1024];

	assert_int_equal(ckpt_path(path, sizeof(path), f->dir, 4, 0), 0);
	if (ckpt_read(path, one, &st, err, sizeof(err)))
		fail_msg("whole: %s", err);
	assert_int_equal(st.step, 4);
	assert_rows_of(one, f->whole);
	if (ckpt_read(path, q, &st, err, sizeof(err)))
		fail_msg("ep 4: %s", err);
	assert_rows_of(q, f->whole);
	model_destroy(one);
	model_destroy(q);
}

static void test_part_replaced_or_missing_is_refused(void **state)
{
	struct fix *f = *state;
	struct model *one = blank(1, NULL);
	struct ckpt_state st;
	char path[PATH_MAX], p1[PATH_MAX], keep[PATH_MAX + 8], err[1024];
	char stp[PATH_MAX];

	assert_int_equal(ckpt_path(path, sizeof(path), f->dir, 4, 0), 0);
	assert_int_equal(ckpt_shard_path(p1, sizeof(p1), f->dir, 4, 0, 1), 0);
	/* another step's part under its name (sealed, but not this one) */
	f->st.step = 5;
	assert_int_equal(ckpt_write_shard(f->dir, f->p[1], f->p[1]->params,
					  &f->st, 1, CKPT_EXPERTS, stp,
					  sizeof(stp), err, sizeof(err)),
			 0);
	snprintf(keep, sizeof(keep), "%s.keep", p1);
	assert_int_equal(rename(p1, keep), 0);
	assert_int_equal(rename(stp, p1), 0);
	{
		char s1[PATH_MAX + 8], s2[PATH_MAX + 8];

		snprintf(s1, sizeof(s1), "%s.seal", stp);
		snprintf(s2, sizeof(s2), "%s.seal", p1);
		assert_int_equal(rename(s1, s2), 0);
	}
	assert_int_equal(ckpt_read(path, one, &st, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "shard-00000004-00001.h5 is not the one it was written with"));
	/* gone */
	assert_int_equal(unlink(p1), 0);
	assert_int_equal(ckpt_read(path, one, &st, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "shard-00000004-00001.h5"));
	model_destroy(one);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_shard_draws_the_whole_models_rows),
		cmocka_unit_test(test_zero_blocks_cover_each_range_once),
		cmocka_unit_test(test_zero_blocks_step_like_the_whole),
		cmocka_unit_test_setup_teardown(test_parts_read_whole_and_resharded,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_part_replaced_or_missing_is_refused,
						setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
