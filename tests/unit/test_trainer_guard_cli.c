/*
 * test_trainer_guard_cli.c - the guardrails in sigma-train itself, with
 * faults injected through SIGMA_GUARD_INJECT: a NaN gradient is skipped
 * and the run ends near a clean one; a bf16 overflow sends its layer to
 * fp32 and back; repeated spikes roll back and skip their data window; a
 * fault that goes away when recomputed exits 79; with --guard off the
 * same faults make the run diverge (exit 70).
 */
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "sigma.h"
#include "train_cli.h"

/* the scratch directory and sigma-train (train_cli.c) */
static const char *const dir = train_cli_dir;
static const char *const prog = train_cli_prog;

static int setup(void **state)
{
	(void)state;
	return train_cli_setup_tokens("/tmp/sigma-test-guard.XXXXXX");
}

/* small config: 40 steps take well under a second */
#define RUN                                                                    \
	"'%s' --train train.tok --val val.tok --preset small --batch 2 "       \
	"--seq-len 16 --threads 2 --warmup 3 --log-every 5 --steps 40 "        \
	"--eval-every 40 --eval-batches 4 "

static bool out_lacks(const char *what)
{
	char *buf = train_cli_slurp("out");
	bool miss = strstr(buf, what) == NULL;

	free(buf);
	return miss;
}

/* the validation cross-entropy at step 40 */
static double val_ce(void)
{
	char *buf = train_cli_slurp("out"), *p = strstr(buf, "step 40 val_ce ");
	double v = NAN;

	if (p)
		v = strtod(p + strlen("step 40 val_ce "), NULL);
	free(buf);
	return v;
}

/* the last field of the metrics row of step */
/* the fp32_layers column of step's metrics row, found by its header */
static long metrics_last(const char *file, long step)
{
	char *buf = train_cli_slurp(file), *line, *save = NULL;
	long v = -1;
	int col = -1;

	for (line = strtok_r(buf, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		const char *f = line;

		if (col < 0) { /* the header */
			for (int k = 0; f; k++, f = strchr(f, ',') ? strchr(f, ',') + 1 : NULL)
				if (!strncmp(f, "fp32_layers", 11) &&
				    (f[11] == ',' || !f[11]))
					col = k;
			assert_true(col >= 0);
			continue;
		}
		if (strtol(line, NULL, 10) != step)
			continue;
		for (int k = 0; k < col && f; k++)
			f = strchr(f, ',') ? strchr(f, ',') + 1 : NULL;
		if (f)
			v = strtol(f, NULL, 10);
	}
	free(buf);
	return v;
}

static void test_nan_skipped(void **state)
{
	double clean, faulty;

	(void)state;
	assert_int_equal(train_cli_run(RUN, prog), 0);
	assert_true(train_cli_out_has("guard: on; non-finite 0"));
	clean = val_ce();
	assert_true(isfinite(clean));

	assert_int_equal(train_cli_run("SIGMA_GUARD_INJECT=nan-grad@15 " RUN, prog), 0);
	assert_true(train_cli_out_has("guard: step 15: non-finite value nan: recompute"));
	assert_true(train_cli_out_has("guard: step 15: non-finite value nan: skip"));
	assert_true(train_cli_out_has("skipped 1,"));
	faulty = val_ce();
	print_message("val_ce clean %.4f, one NaN step skipped %.4f\n", clean,
		      faulty);
	assert_true(fabs(faulty - clean) < 0.15);

	/* without the guard the same fault ends the run */
	assert_int_equal(
	    train_cli_run("SIGMA_GUARD_INJECT=nan-grad@15 " RUN "--guard off", prog), 70);
	assert_true(train_cli_out_has("step 15: loss"));
	assert_true(train_cli_out_has("diverged"));
}

static void test_overflow_fp32_and_back(void **state)
{
	(void)state;
	assert_int_equal(
	    train_cli_run("SIGMA_GUARD_INJECT=overflow@12:1 " RUN
		"--precision bf16 --guard-fp32-steps 5 --metrics m.csv",
		prog),
	    0);
	assert_true(train_cli_out_has("precision bf16"));
	assert_true(train_cli_out_has("guard: step 12: bf16-overflow layer 1"));
	assert_true(train_cli_out_has("skip+fp32"));
	assert_true(train_cli_out_has("guard: step 18: fp32-window-ended layer 1: bf16"));
	assert_true(out_lacks("window-ended layer 2"));
	assert_true(isfinite(val_ce()));
	/* the metrics count the layers in fp32: one at step 15, none at 20 */
	assert_int_equal(metrics_last("m.csv", 10), 0);
	assert_int_equal(metrics_last("m.csv", 15), 1);
	assert_int_equal(metrics_last("m.csv", 20), 0);

	/* without the guard the overflow poisons the loss */
	assert_int_equal(train_cli_run("SIGMA_GUARD_INJECT=overflow@12:1 " RUN
			     "--precision bf16 --guard off",
			     prog),
			 70);
	assert_true(train_cli_out_has("step 12: loss"));
}

static void test_spikes_roll_back(void **state)
{
	struct stat sb;
	char p[PATH_MAX];

	(void)state;
	assert_int_equal(train_cli_run("SIGMA_GUARD_INJECT=spike@22-24 " RUN
			     "--ckpt-dir ck --ckpt-every 10",
			     prog),
			 0);
	assert_true(train_cli_out_has("guard: step 22: gnorm-spike"));
	assert_true(train_cli_out_has("skip+lower-lr+rollback"));
	assert_true(train_cli_out_has("(step 20); data steps 22-24 skipped"));
	assert_true(train_cli_out_has("guard: step 22: data-window: skip"));
	assert_true(train_cli_out_has("guard: step 24: data-window: skip"));
	assert_true(train_cli_out_has("rollbacks 1, data steps skipped 3"));
	assert_true(isfinite(val_ce()));
	snprintf(p, sizeof(p), "%s/ck/ckpt-00000040.h5", dir);
	assert_int_equal(stat(p, &sb), 0);

	/* the guard's state lives in the checkpoint: stop after the
	 * rollback, resume in a fresh process, the counts go on */
	assert_int_equal(train_cli_run("rm -rf ck2 && SIGMA_GUARD_INJECT=spike@22-24 " RUN
			     "--ckpt-dir ck2 --ckpt-every 10 --stop-at 30",
			     prog),
			 75);
	assert_true(train_cli_out_has("rollbacks 1, data steps skipped 3"));
	assert_int_equal(train_cli_run(RUN "--ckpt-dir ck2 --resume", prog), 0);
	assert_true(train_cli_out_has("continuing at step 30"));
	assert_true(train_cli_out_has("gnorm spikes 3,"));
	assert_true(train_cli_out_has("rollbacks 1, data steps skipped 3"));

	/* no checkpoint to return to: repeated trouble ends as diverged */
	assert_int_equal(train_cli_run("SIGMA_GUARD_INJECT=spike@26-28 " RUN, prog), 70);
	assert_true(train_cli_out_has("no checkpoint directory to roll back to"));
}

static void test_hardware_requeue(void **state)
{
	(void)state;
	assert_int_equal(train_cli_run("SIGMA_GUARD_INJECT=flaky@15 " RUN, prog), 79);
	assert_true(train_cli_out_has("guard: step 15: hardware"));
	assert_true(train_cli_out_has("requeue on other nodes"));
	/* without the recomputation it is only a skipped step */
	assert_int_equal(train_cli_run("SIGMA_GUARD_INJECT=flaky@15 " RUN
			     "--guard-recompute off",
			     prog),
			 0);
	assert_true(train_cli_out_has("guard: step 15: non-finite value nan: skip"));
}

static void test_bad_options(void **state)
{
	(void)state;
	assert_int_equal(train_cli_run(RUN "--precision fp16", prog), 64);
	assert_true(train_cli_out_has("--precision \"fp16\" is not fp32 or bf16"));
	assert_int_equal(train_cli_run(RUN "--guard maybe", prog), 64);
	assert_int_equal(train_cli_run(RUN "--guard-window 1", prog), 64);
	assert_int_equal(train_cli_run("SIGMA_GUARD_INJECT=melt@3 " RUN, prog), 64);
	assert_true(train_cli_out_has("unknown fault \"melt\""));
	assert_int_equal(train_cli_run("SIGMA_GUARD_INJECT=overflow@3:9 " RUN, prog), 64);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_nan_skipped),
	    cmocka_unit_test(test_overflow_fp32_and_back),
	    cmocka_unit_test(test_spikes_roll_back),
	    cmocka_unit_test(test_hardware_requeue),
	    cmocka_unit_test(test_bad_options),
	};

	return cmocka_run_group_tests(tests, setup, train_cli_group_teardown);
}
