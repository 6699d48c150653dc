/*
 * test_trainer_diff_cli.c - sigma-train --ckpt-diff-every as a program:
 * a run stopped between full checkpoints resumes from its newest
 * differential (or, that one damaged, from the one before) and ends with
 * bitwise the weights and moments of an uninterrupted run; the same with
 * --ckpt-sync; a guard rollback removes the differentials of the run it
 * abandons; bad values are refused.
 */
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
#include "train_cli.h"
#include "ckpt.h"
#include "model.h"

static const char *const dir = train_cli_dir;
static const char *const prog = train_cli_prog;

/* small config, few steps: each run takes well under a second */
#define SMALL                                                                  \
	"--train train.tok --preset small --batch 2 --seq-len 16 --threads 2 --warmup 3 --log-every 4 --eval-every 0 --steps 12 "

static int setup(void **state)
{
	int rc;

	(void)state;
	if (train_cli_setup("/tmp/sigma-test-diff-cli.XXXXXX"))
		return -1;
	rc = train_cli_run("%s prepare --train-out train.tok --val-out val.tok text.txt",
			   prog);
	return rc == 0 ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	return train_cli_teardown();
}

static struct model *load(const char *name)
{
	struct model_config c;
	struct model *m = NULL;
	struct ckpt_state st;
	char path[PATH_MAX + 64], err[1024];

	model_config_small(&c);
	c.T = 16;
	assert_int_equal(
	    model_create(&m, &c, 2, &sigma_ops_cpu, err, sizeof(err)), 0);
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (ckpt_read(path, m, &st, err, sizeof(err)))
		fail_msg("%s", err);
	assert_int_equal(st.step, 12);
	return m;
}

/* weights and both moments of two final checkpoints, bitwise */
static void assert_same_final(const char *x, const char *y)
{
	struct model *a = load(x), *b = load(y);

	assert_memory_equal(a->params, b->params, sizeof(float) * a->nparams);
	assert_memory_equal(a->m, b->m, sizeof(float) * a->nparams);
	assert_memory_equal(a->v, b->v, sizeof(float) * a->nparams);
	model_destroy(a);
	model_destroy(b);
}

static void test_usage(void **state)
{
	(void)state;
	assert_int_equal(train_cli_run("%s " SMALL
				       "--ckpt-dir U --ckpt-diff-every -1",
				       prog),
			 64);
	assert_true(train_cli_out_has("--ckpt-diff-every -1 is out of range"));
	assert_int_equal(train_cli_run("%s " SMALL
				       "--ckpt-dir U --ckpt-diff-every two",
				       prog),
			 64);
	assert_true(train_cli_out_has("not a whole number"));
	assert_int_equal(train_cli_run("%s " SMALL "--ckpt-diff-every 2", prog),
			 64);
	assert_true(train_cli_out_has("needs a checkpoint directory"));
	assert_int_equal(
	    train_cli_run("%s " SMALL
			  "--ckpt-dir U --ckpt-every 4 --ckpt-diff-every 4",
			  prog),
	    64);
	assert_true(
	    train_cli_out_has("differentials come between full checkpoints"));
	assert_int_equal(
	    train_cli_run("%s --help | grep -q -- --ckpt-diff-every", prog), 0);
}

static void test_resume_from_differential(void **state)
{
	(void)state;
	/* 12 steps straight */
	assert_int_equal(train_cli_run("%s " SMALL "--ckpt-dir A", prog), 0);

	/* full every 4, a differential every step between: full 4,
	 * differentials 5 and 6, full 7 at the stop */
	assert_int_equal(
	    train_cli_run(
		"%s " SMALL
		"--ckpt-dir B --ckpt-every 4 --ckpt-diff-every 1 --stop-at 7",
		prog),
	    75);
	assert_true(train_cli_out_has("diff-00000006-base-00000004.h5"));
	/* the stop's full checkpoint lost: the differential of step 6 */
	assert_int_equal(
	    train_cli_run(
		"test -f B/ckpt-00000004.h5 && test -f B/diff-00000005-base-00000004.h5 && rm B/ckpt-00000007.h5 && cp -r B C"),
	    0);
	assert_int_equal(
	    train_cli_run(
		"%s " SMALL
		"--ckpt-dir B --ckpt-every 4 --ckpt-diff-every 1 --resume",
		prog),
	    0);
	assert_true(train_cli_out_has(
	    "resume: B/diff-00000006-base-00000004.h5, continuing at step 6"));
	/* resumed from a differential: no base in memory until the next
	 * full checkpoint */
	assert_true(train_cli_out_has(
	    "checkpoint step 7: no full checkpoint of this run to difference against"));
	assert_true(train_cli_out_has("diff-00000011-base-00000008.h5"));
	assert_same_final("A/ckpt-00000012.h5", "B/ckpt-00000012.h5");

	/* the newest differential damaged (bytes in the data, which is
	 * most of the file): refused, the one before used */
	assert_int_equal(
	    train_cli_run(
		"f=C/diff-00000006-base-00000004.h5; s=$(stat -c %%s $f); for at in 3 5 7; do printf '\\377\\377\\377\\377' | dd of=$f bs=1 seek=$((s * at / 10)) conv=notrunc 2>/dev/null || exit 1; done"),
	    0);
	assert_int_equal(
	    train_cli_run(
		"%s " SMALL
		"--ckpt-dir C --ckpt-every 4 --ckpt-diff-every 1 --resume",
		prog),
	    0);
	assert_true(train_cli_out_has(
	    "differential checkpoint refused: C/diff-00000006-base-00000004.h5"));
	assert_true(train_cli_out_has(
	    "resume: C/diff-00000005-base-00000004.h5, continuing at step 5"));
	assert_same_final("A/ckpt-00000012.h5", "C/ckpt-00000012.h5");

	/* written in the loop: the same */
	assert_int_equal(
	    train_cli_run(
		"%s " SMALL
		"--ckpt-dir S --ckpt-every 4 --ckpt-diff-every 2 --ckpt-sync --stop-at 7; test $? = 75 && rm S/ckpt-00000007.h5",
		prog),
	    0);
	assert_true(train_cli_out_has(
	    "checkpoint step 6: S/diff-00000006-base-00000004.h5"));
	assert_int_equal(
	    train_cli_run(
		"%s " SMALL
		"--ckpt-dir S --ckpt-every 4 --ckpt-diff-every 2 --ckpt-sync --resume",
		prog),
	    0);
	assert_true(train_cli_out_has("continuing at step 6"));
	assert_same_final("A/ckpt-00000012.h5", "S/ckpt-00000012.h5");

	/* the base gone and nothing else: refused, nothing overwritten */
	assert_int_equal(
	    train_cli_run("rm C/ckpt-*.h5 && ls C/diff-*.h5 >/dev/null"), 0);
	assert_int_equal(
	    train_cli_run(
		"%s " SMALL
		"--ckpt-dir C --ckpt-every 4 --ckpt-diff-every 1 --resume",
		prog),
	    65);
	assert_true(
	    train_cli_out_has("differential checkpoints but no full one"));
}

/* a guard rollback to the full checkpoint of step 20 removes the
 * differentials of the run it abandons */
static void test_rollback(void **state)
{
	(void)state;
	assert_int_equal(train_cli_run("SIGMA_GUARD_INJECT=spike@22-24 %s --train train.tok --preset small --batch 2 --seq-len 16 --threads 2 --warmup 3 --log-every 5 --steps 30 --eval-every 0 --ckpt-dir R --ckpt-every 10 --ckpt-diff-every 1",
				       prog),
			 0);
	assert_true(train_cli_out_has("R/diff-00000021-base-00000020.h5"));
	assert_true(train_cli_out_has("(step 20); data steps 22-24 skipped"));
	assert_true(train_cli_out_has("guard: 3 differential checkpoints newer than step 20 removed"));
	/* the steps after it written again, against the same base */
	assert_int_equal(train_cli_run("test -f R/ckpt-00000030.h5 && test -f R/diff-00000029-base-00000020.h5"),
			 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_usage),
	    cmocka_unit_test(test_resume_from_differential),
	    cmocka_unit_test(test_rollback),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
