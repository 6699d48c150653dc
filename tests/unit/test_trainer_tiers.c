/*
 * test_trainer_tiers.c - the checkpoint tiers through their door alone
 * (trainer/ckpt/tiers.h), on one rank over the self back end and real
 * files:
 *
 *   - tier 1 without a shared directory, and differentials no more
 *     frequent than the full checkpoints they refer to: refused, named;
 *   - a run's steps: tier 1 every step, the shared tier when due, every
 *     file on disk when the last step returns;
 *   - a background write not yet on disk: quiesce publishes it;
 *   - the guard's rollback: the newest checkpoint reloaded, the
 *     differentials after it dropped;
 *   - a shared directory that cannot be written: the last step's exit
 *     code says so, and close keeps the run's.
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
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "sigma.h"
#include "ckpt.h"
#include "dist.h"
#include "exitcodes.h"
#include "guard_run.h"
#include "model.h"
#include "scratch.h"
#include "tiers.h"

#define RUN "local-00112233aabbccdd"

struct fix {
	char dir[256], shared[PATH_MAX], local[PATH_MAX];
	struct dist d;
	struct model *m;
	struct ckpt_state st;
	struct tiers tr;
};

static int setup(void **state)
{
	struct fix *f = calloc(1, sizeof(*f));
	struct model_config c;
	char err[1024];

	unsetenv("PMIX_NAMESPACE");
	unsetenv("SLURM_NTASKS");
	setenv("SLURMD_NODENAME", "n1", 1);
	assert_non_null(f);
	assert_int_equal(scratch_make(f->dir, sizeof(f->dir), "tiers"), 0);
	snprintf(f->shared, sizeof(f->shared), "%s/shared", f->dir);
	snprintf(f->local, sizeof(f->local), "%s/local", f->dir);
	assert_int_equal(mkdir(f->shared, 0700), 0);
	assert_int_equal(mkdir(f->local, 0700), 0);
	assert_int_equal(dist_init(&f->d, 0, 1, 1, 1, 4, 2, 1, err,
				   sizeof(err)),
			 0);
	model_config_small(&c);
	assert_int_equal(model_create_acts(&f->m, &c, 1, 1, &sigma_ops_cpu,
					   err, sizeof(err)),
			 0);
	model_init_weights(f->m, 7);
	assert_int_equal(dist_attach(&f->d, f->m, err, sizeof(err)), 0);
	f->st.batch = 1;
	f->st.seed = 7;
	f->st.rng = 7;
	sigma_strlcpy(f->st.run, RUN, sizeof(f->st.run));
	snprintf(f->st.layout, sizeof(f->st.layout), "ranks=1 dp=1 ep=1 pp=1");
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

/* the tiers of f with shared (NULL: none) and local (NULL: off) */
static void init(struct fix *f, const char *shared, const char *local,
		 long every, long full_every, long diff_every, bool sync)
{
	tiers_init(&f->tr,
		   &(struct tiers_conf){ shared ? shared : "", 3, sync,
					 local ? local : "", 2, every,
					 full_every, diff_every, 4 },
		   &f->d);
}

/* step done of the run: the state advanced, then its checkpoints */
static int step(struct fix *f, long done)
{
	f->st.step = done;
	return tiers_after_step(&f->tr, done, false, done == 4, &f->st);
}

/* the step of dir's newest full checkpoint, read into a fresh model
 * whose first weight *p0 returns; -1 when there is none */
static long newest(struct fix *f, const char *dir, float *p0)
{
	struct model *m = NULL;
	struct ckpt_state st;
	char path[PATH_MAX], err[1024];
	long step = -1;

	assert_int_equal(model_create_acts(&m, &f->m->cfg, 1, 1,
					   &sigma_ops_cpu, err, sizeof(err)),
			 0);
	if (ckpt_load_latest(dir, m, &st, path, sizeof(path), err,
			     sizeof(err)) == 0) {
		step = st.step;
		*p0 = m->params[0];
	}
	model_destroy(m);
	return step;
}

static void test_refused(void **state)
{
	struct fix *f = *state;

	/* tier 1 keeps copies of a run the shared tier names */
	init(f, NULL, f->local, 1, 2, 0, false);
	assert_int_equal(tiers_open(&f->tr, f->m, RUN), TRAIN_EXIT_USAGE);
	assert_null(tiers_local_dir(&f->tr));
	assert_int_equal(tiers_close(&f->tr, 0), 0);

	/* a differential every 2 steps against full ones every 2 */
	init(f, f->shared, NULL, 2, 0, 2, false);
	assert_int_equal(tiers_open(&f->tr, f->m, RUN), 0);
	assert_int_equal(tiers_start(&f->tr, -1, NULL), TRAIN_EXIT_USAGE);
	assert_int_equal(tiers_close(&f->tr, 0), 0);
}

static void test_steps(void **state)
{
	struct fix *f = *state;
	char own[PATH_MAX + 32];
	struct stat sb;
	float p0 = 0.0f;

	init(f, f->shared, f->local, 1, 2, 0, false);
	assert_int_equal(tiers_open(&f->tr, f->m, RUN), 0);
	assert_non_null(tiers_local_dir(&f->tr));
	assert_true(strstr(tiers_local_dir(&f->tr), "/local/n1") != NULL);
	assert_int_equal(tiers_start(&f->tr, -1, NULL), 0);
	for (long done = 1; done <= 4; done++) {
		assert_true(tiers_due(&f->tr, done, false));
		assert_int_equal(tiers_settle(&f->tr), 0);
		f->m->params[0] = (float)done;
		assert_int_equal(step(f, done), 0);
	}
	/* the last step returned with its files on disk */
	assert_int_equal(newest(f, f->shared, &p0), 4);
	assert_true(p0 == 4.0f);
	snprintf(own, sizeof(own), "%s/rank-0", tiers_local_dir(&f->tr));
	assert_int_equal(stat(own, &sb), 0);
	assert_true(S_ISDIR(sb.st_mode));
	assert_int_equal(newest(f, own, &p0), 4);
	assert_true(p0 == 4.0f);
	assert_non_null(tiers_writer(&f->tr, true));
	assert_non_null(tiers_writer(&f->tr, false));
	assert_int_equal(tiers_close(&f->tr, 0), 0);
}

static void test_quiesce(void **state)
{
	struct fix *f = *state;
	float p0 = 0.0f;

	/* no tier 1: the shared tier every 2 steps, in the background */
	init(f, f->shared, NULL, 2, 0, 0, false);
	assert_int_equal(tiers_open(&f->tr, f->m, RUN), 0);
	assert_null(tiers_local_dir(&f->tr));
	assert_int_equal(tiers_start(&f->tr, -1, NULL), 0);
	assert_false(tiers_due(&f->tr, 1, false));
	assert_true(tiers_due(&f->tr, 1, true)); /* a stop asks for one */
	assert_true(tiers_due(&f->tr, 2, false));
	f->m->params[0] = 2.0f;
	assert_int_equal(step(f, 2), 0);
	assert_int_equal(tiers_quiesce(&f->tr), 0);
	assert_int_equal(newest(f, f->shared, &p0), 2);
	assert_true(p0 == 2.0f);
	assert_int_equal(tiers_moved(&f->tr), 0); /* a whole model: no index */
	assert_int_equal(tiers_close(&f->tr, 0), 0);
}

static void test_rollback(void **state)
{
	struct fix *f = *state;
	struct guard_config gc;
	struct guard_run gr;
	char err[256];
	long to = -1;

	guard_config_default(&gc);
	assert_int_equal(guard_run_init(&gr, &gc, false, f->m, err,
					sizeof(err)),
			 0);
	/* full every 2 steps, a differential every step between, in the
	 * loop (--ckpt-sync) */
	init(f, f->shared, NULL, 2, 0, 1, true);
	assert_int_equal(tiers_open(&f->tr, f->m, RUN), 0);
	assert_int_equal(tiers_start(&f->tr, -1, NULL), 0);
	f->m->params[0] = 2.0f;
	assert_int_equal(step(f, 2), 0);
	f->m->params[0] = 3.0f;
	assert_int_equal(step(f, 3), 0);
	assert_int_equal(ckpt_diff_newest_step(f->shared), 3);
	/* trouble at step 3: back to the full checkpoint of step 2, and
	 * the differential after it belongs to the abandoned run */
	assert_int_equal(tiers_rollback(&f->tr, &gr, 3, &to), 0);
	assert_int_equal(to, 2);
	assert_true(f->m->params[0] == 2.0f);
	assert_int_equal(ckpt_diff_newest_step(f->shared), -1);
	assert_int_equal(tiers_close(&f->tr, 0), 0);
	guard_run_free(&gr);
}

static void test_unwritable(void **state)
{
	struct fix *f = *state;
	char file[PATH_MAX + 16];
	FILE *fp;

	/* the shared "directory" is a file: the last step's write fails */
	snprintf(file, sizeof(file), "%s/plain", f->dir);
	fp = fopen(file, "w");
	assert_non_null(fp);
	fclose(fp);
	init(f, file, NULL, 2, 0, 0, false);
	assert_int_equal(tiers_open(&f->tr, f->m, RUN), 0);
	assert_int_equal(tiers_start(&f->tr, -1, NULL), 0);
	assert_int_equal(step(f, 4), TRAIN_EXIT_CANTCREAT);
	assert_int_equal(tiers_close(&f->tr, 7), 7);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_steps, setup, teardown),
		cmocka_unit_test_setup_teardown(test_quiesce, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rollback, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unwritable, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
