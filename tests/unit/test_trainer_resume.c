/*
 * test_trainer_resume.c - resume_run (trainer/ckpt/resume.c), the one resume
 * path, on one rank over the self back end and real checkpoint files:
 *
 *   - tier 1 newer than the shared tier: the node-local copy is read;
 *   - that copy damaged: the shared tier's full checkpoint is read, and
 *     it becomes the differentials' base;
 *   - tier 1 off: the shared tier's newest, with its seed adopted;
 *   - a tier-1 copy of another run in this run's directory: passed over;
 *   - nothing anywhere: step 0.
 *
 * Which file was read shows in the weights: each was written from
 * weights of its own seed.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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
#include "ckpt.h"
#include "claim.h"
#include "dist.h"
#include "model.h"
#include "resume.h"
#include "scratch.h"

#define RUN   "local-00112233aabbccdd"
#define OTHER "local-99999999eeeeeeee"

struct fix {
	char dir[256], shared[PATH_MAX], node[PATH_MAX], own[PATH_MAX + 16];
	struct dist d;
	struct model *m;
	struct ckpt_state st; /* this start's state before the resume */
	float w_t1, w_t2;     /* params[0] as each tier's file holds it */
};

static struct model *small_model(uint64_t seed)
{
	struct model_config c;
	struct model *m = NULL;
	char err[256];

	model_config_small(&c);
	assert_int_equal(model_create_acts(&m, &c, 1, 1, &sigma_ops_cpu, err,
					   sizeof(err)),
			 0);
	model_init_weights(m, seed);
	return m;
}

/* a checkpoint of step in dir, of weights from seed; params[0] back */
static float write_ckpt(struct fix *f, const char *dir, long step,
			uint64_t seed, const char *run)
{
	struct model *w = small_model(seed);
	struct ckpt_state st = f->st;
	char path[PATH_MAX], err[1024];
	float p0 = w->params[0];

	st.step = step;
	st.seed = seed;
	sigma_strlcpy(st.run, run, sizeof(st.run));
	assert_int_equal(mkdir(dir, 0700) == 0 || errno == EEXIST, 1);
	assert_int_equal(ckpt_write(dir, w, &st, path, sizeof(path), err,
				    sizeof(err)),
			 0);
	model_destroy(w);
	return p0;
}

static int setup(void **state)
{
	struct fix *f = calloc(1, sizeof(*f));
	char err[1024];

	unsetenv("PMIX_NAMESPACE");
	unsetenv("SLURM_NTASKS");
	assert_non_null(f);
	assert_int_equal(scratch_make(f->dir, sizeof(f->dir), "resume"), 0);
	snprintf(f->shared, sizeof(f->shared), "%s/shared", f->dir);
	snprintf(f->node, sizeof(f->node), "%s/local-n1", f->dir);
	snprintf(f->own, sizeof(f->own), "%s/rank-0", f->node);
	assert_int_equal(mkdir(f->shared, 0700), 0);
	assert_int_equal(mkdir(f->node, 0700), 0);
	assert_int_equal(dist_init(&f->d, 0, 1, 1, 1, 4, 2, 1, err,
				   sizeof(err)),
			 0);
	f->m = small_model(1);
	assert_int_equal(dist_attach(&f->d, f->m, err, sizeof(err)), 0);
	f->st.batch = 1;
	f->st.seed = 1;
	f->st.rng = 1;
	sigma_strlcpy(f->st.run, RUN, sizeof(f->st.run));
	snprintf(f->st.layout, sizeof(f->st.layout),
		 "ranks=1 dp=1 ep=1 pp=1");
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fix *f = *state;

	model_destroy(f->m);
	dist_end(&f->d);
	scratch_remove(f->dir);
	free(f);
	return 0;
}

static int run(struct fix *f, bool tier1, struct ckpt_state *st,
	       struct resume_to *to)
{
	struct resume_from from = { tier1 ? f->node : NULL, f->shared, 1, 1,
				    0 };

	*st = f->st;
	return resume_run(&f->d, f->m, &from, st, to);
}

static void tier1_newer(void **state)
{
	struct fix *f = *state;
	struct ckpt_state st;
	struct resume_to to;
	char err[1024];

	f->w_t2 = write_ckpt(f, f->shared, 4, 2, RUN);
	/* the directory is this run's, as tier1_open leaves it */
	assert_int_equal(mkdir(f->own, 0700), 0);
	assert_int_equal(claim_local(f->own, RUN, NULL, err, sizeof(err)), 0);
	f->w_t1 = write_ckpt(f, f->own, 6, 3, RUN);
	assert_true(f->w_t1 != f->w_t2);
	assert_int_equal(run(f, true, &st, &to), 0);
	assert_int_equal(to.start, 6);
	assert_int_equal(st.seed, 3);
	assert_true(f->m->params[0] == f->w_t1);
	assert_int_equal(to.full_step, -1); /* no base: it was tier 1 */
}

static void tier1_damaged(void **state)
{
	struct fix *f = *state;
	char path[PATH_MAX + 64];
	struct ckpt_state st;
	struct resume_to to;
	int fd;

	snprintf(path, sizeof(path), "%s/ckpt-00000006.h5", f->own);
	fd = open(path, O_WRONLY);
	assert_true(fd >= 0);
	/* a run of bytes in the middle of the tensors */
	assert_int_equal(pwrite(fd, "garbage!garbage!", 16, 40000), 16);
	close(fd);
	assert_int_equal(run(f, true, &st, &to), 0);
	assert_int_equal(to.start, 4);
	assert_int_equal(st.seed, 2);
	assert_true(f->m->params[0] == f->w_t2);
	assert_int_equal(to.full_step, 4);
	assert_non_null(strstr(to.full, "ckpt-00000004.h5"));
}

static void shared_only(void **state)
{
	struct fix *f = *state;
	struct ckpt_state st;
	struct resume_to to;

	model_init_weights(f->m, 1);
	assert_int_equal(run(f, false, &st, &to), 0);
	assert_int_equal(to.start, 4);
	assert_int_equal(st.seed, 2);
	assert_true(f->m->params[0] == f->w_t2);
	assert_int_equal(to.full_step, 4);
}

static void other_run(void **state)
{
	struct fix *f = *state;
	struct ckpt_state st;
	struct resume_to to;
	float other;

	char from[PATH_MAX + 64], to_[PATH_MAX + 64], elsewhere[300];

	model_init_weights(f->m, 1);
	/* another run's newer copy, moved in with its seal (a write there
	 * is refused: the directory's manifest names this run) */
	snprintf(elsewhere, sizeof(elsewhere), "%s/elsewhere", f->dir);
	other = write_ckpt(f, elsewhere, 9, 5, OTHER);
	for (int i = 0; i < 2; i++) {
		const char *sfx = i ? ".h5.seal" : ".h5";

		snprintf(from, sizeof(from), "%s/ckpt-00000009%s", elsewhere,
			 sfx);
		snprintf(to_, sizeof(to_), "%s/ckpt-00000009%s", f->own, sfx);
		assert_int_equal(rename(from, to_), 0);
	}
	assert_true(other != f->w_t2);
	assert_int_equal(run(f, true, &st, &to), 0);
	assert_int_equal(to.start, 4);
	assert_true(f->m->params[0] == f->w_t2);
}

static void nothing(void **state)
{
	struct fix *f = *state;
	struct ckpt_state st;
	struct resume_to to;
	char sub[300];

	snprintf(sub, sizeof(sub), "%s/empty", f->dir);
	assert_int_equal(mkdir(sub, 0700), 0);
	{
		struct resume_from from = { NULL, sub, 1, 1, 0 };

		st = f->st;
		assert_int_equal(resume_run(&f->d, f->m, &from, &st, &to), 0);
	}
	assert_int_equal(to.start, 0);
	assert_int_equal(to.full_step, -1);
}

int main(void)
{
	/* one fixture: the cases build on each other's files, in order */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(tier1_newer),
		cmocka_unit_test(tier1_damaged),
		cmocka_unit_test(shared_only),
		cmocka_unit_test(other_run),
		cmocka_unit_test(nothing),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
