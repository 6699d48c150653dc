/*
 * test_trainer_cli.c - sigma-train as a program: exit codes and messages
 * for bad input, bitwise-identical resume in a fresh process, SIGUSR1 and
 * SIGTERM giving a checkpoint and exit 75, the metrics file.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
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
#include "ckpt.h"
#include "data.h"
#include "model.h"

/* the scratch directory and sigma-train (train_cli.c) */
static const char *const dir = train_cli_dir;
static const char *const prog = train_cli_prog;
static char train_tok[PATH_MAX + 16], val_tok[PATH_MAX + 16];

/* small config, few steps: each run takes well under a second */
#define SMALL "--preset small --batch 2 --seq-len 16 --threads 2 --warmup 3 --log-every 5 "

static int setup(void **state)
{
	(void)state;
	if (train_cli_setup("/tmp/sigma-test-cli.XXXXXX"))
		return -1;
	snprintf(train_tok, sizeof(train_tok), "%s/train.tok", dir);
	snprintf(val_tok, sizeof(val_tok), "%s/val.tok", dir);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return train_cli_teardown();
}

static void test_prepare_and_usage(void **state)
{
	(void)state;
	assert_int_equal(train_cli_run("%s prepare --train-out train.tok --val-out val.tok text.txt",
			     prog),
			 0);
	assert_true(train_cli_out_has("prepared"));
	assert_int_equal(train_cli_run("%s prepare --val-out v.tok text.txt", prog), 64);
	assert_int_equal(train_cli_run("%s prepare --train-out a --val-out b nothere.txt",
			     prog),
			 66);
	assert_int_equal(train_cli_run("%s prepare --train-out a --val-out b --val-fraction 2 text.txt",
			     prog),
			 64);
	/* usage errors: 64 with a message naming the problem */
	assert_int_equal(train_cli_run("%s --train train.tok --batch -3", prog), 64);
	assert_true(train_cli_out_has("--batch -3 is out of range"));
	assert_int_equal(train_cli_run("%s --train train.tok --batch 0", prog), 64);
	assert_int_equal(train_cli_run("%s --train train.tok --lr abc", prog), 64);
	assert_true(train_cli_out_has("not a number"));
	assert_int_equal(train_cli_run("%s --train train.tok --dim 63 --heads 4", prog),
			 64);
	assert_true(train_cli_out_has("not a multiple"));
	assert_int_equal(train_cli_run("%s --batch 2", prog), 64);
	assert_true(train_cli_out_has("--train FILE is required"));
	assert_int_equal(train_cli_run("%s --train train.tok --bogus", prog), 64);
	assert_int_equal(train_cli_run("SIGMA_CKPT_EVERY=-5 %s --train train.tok", prog),
			 64);
	assert_true(train_cli_out_has("SIGMA_CKPT_EVERY"));
	/* the flag and the variable: one range, the plugin's */
	assert_int_equal(train_cli_run("%s --train train.tok " SMALL "--steps 3 --ckpt-every 100000000",
			     prog),
			 0);
	assert_int_equal(train_cli_run("SIGMA_CKPT_EVERY=100000000 %s --train train.tok " SMALL "--steps 3",
			     prog),
			 0);
	assert_int_equal(train_cli_run("%s --train train.tok --ckpt-every 100000001", prog),
			 64);
	assert_true(train_cli_out_has("--ckpt-every 100000001 is out of range"));
	assert_int_equal(train_cli_run("SIGMA_CKPT_EVERY=100000001 %s --train train.tok", prog),
			 64);
	assert_int_equal(train_cli_run("%s --help", prog), 0);
}

static void test_bad_data(void **state)
{
	(void)state;
	assert_int_equal(train_cli_run("%s --train missing.tok", prog), 66);
	assert_true(train_cli_out_has("missing.tok: cannot open"));
	/* truncated */
	assert_int_equal(train_cli_run("head -c 1000 train.tok > trunc.tok && %s --train trunc.tok " SMALL "--steps 5",
			     prog),
			 65);
	assert_true(train_cli_out_has("trunc.tok: truncated"));
	/* wrong magic */
	assert_int_equal(train_cli_run("cp train.tok magic.tok && printf XXXX | dd of=magic.tok conv=notrunc 2>/dev/null && %s --train magic.tok " SMALL "--steps 5",
			     prog),
			 65);
	assert_true(train_cli_out_has("magic.tok: bad magic"));
	/* not even a header */
	assert_int_equal(train_cli_run("echo hi > tiny.tok && %s --train tiny.tok", prog),
			 65);
	/* too short for the sequence length */
	assert_int_equal(train_cli_run("%s --train val.tok " SMALL "--seq-len 60000 --steps 5",
			     prog),
			 65);
	assert_true(train_cli_out_has("too few"));
}

static void load(const char *ckpt, struct model **m, struct ckpt_state *st)
{
	struct model_config c;
	char err[1024];

	model_config_small(&c);
	c.T = 16;
	assert_int_equal(model_create(m, &c, 2, &sigma_ops_cpu, err,
				      sizeof(err)),
			 0);
	if (ckpt_read(ckpt, *m, st, err, sizeof(err)))
		fail_msg("%s", err);
}

static void test_resume_bitwise(void **state)
{
	struct model *a, *b;
	struct ckpt_state sa, sb;
	char pa[PATH_MAX + 64], pb[PATH_MAX + 64];

	(void)state;
	/* 20 steps straight */
	assert_int_equal(train_cli_run("%s --train train.tok --val val.tok " SMALL "--steps 20 --ckpt-dir A --eval-every 10 --metrics A.csv",
			     prog),
			 0);
	assert_true(train_cli_out_has("step 20/20 loss"));
	assert_true(train_cli_out_has("val_ce"));
	/* 10 steps, checkpoint, exit 75; then a fresh process resumes */
	assert_int_equal(train_cli_run("%s --train train.tok --val val.tok " SMALL "--steps 20 --ckpt-dir B --eval-every 10 --stop-at 10",
			     prog),
			 75);
	assert_true(train_cli_out_has("checkpoint step 10"));
	assert_int_equal(train_cli_run("%s --train train.tok --val val.tok " SMALL "--steps 20 --ckpt-dir B --eval-every 10 --resume",
			     prog),
			 0);
	assert_true(train_cli_out_has("continuing at step 10"));
	snprintf(pa, sizeof(pa), "%s/A/ckpt-00000020.h5", dir);
	snprintf(pb, sizeof(pb), "%s/B/ckpt-00000020.h5", dir);
	load(pa, &a, &sa);
	load(pb, &b, &sb);
	assert_int_equal(sa.step, 20);
	assert_int_equal(sb.step, 20);
	/* weights and both moments, bitwise */
	assert_memory_equal(a->params, b->params, sizeof(float) * a->nparams);
	assert_memory_equal(a->m, b->m, sizeof(float) * a->nparams);
	assert_memory_equal(a->v, b->v, sizeof(float) * a->nparams);
	model_destroy(a);
	model_destroy(b);

	/* the same seed, again from scratch: the same final weights */
	assert_int_equal(train_cli_run("%s --train train.tok " SMALL "--steps 20 --ckpt-dir C",
			     prog),
			 0);
	snprintf(pb, sizeof(pb), "%s/C/ckpt-00000020.h5", dir);
	load(pa, &a, &sa);
	load(pb, &b, &sb);
	assert_memory_equal(a->params, b->params, sizeof(float) * a->nparams);
	model_destroy(a);
	model_destroy(b);

	/* written in the loop (--ckpt-sync) or in the background: the same
	 * bits; the stall of the checkpoint of step 5 in the row of step 10,
	 * its write (finished before the next one was staged) by step 15 */
	assert_int_equal(train_cli_run("%s --train train.tok " SMALL "--steps 20 --ckpt-dir SY --ckpt-every 5 --ckpt-sync",
			     prog),
			 0);
	snprintf(pb, sizeof(pb), "%s/SY/ckpt-00000020.h5", dir);
	load(pa, &a, &sa);
	load(pb, &b, &sb);
	assert_memory_equal(a->params, b->params, sizeof(float) * a->nparams);
	assert_memory_equal(a->m, b->m, sizeof(float) * a->nparams);
	assert_memory_equal(a->v, b->v, sizeof(float) * a->nparams);
	model_destroy(a);
	model_destroy(b);
	assert_int_equal(train_cli_run("%s --train train.tok " SMALL "--steps 20 --ckpt-dir AS --ckpt-every 5 --metrics AS.csv",
			     prog),
			 0);
	assert_int_equal(train_cli_run("awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }"
			     " $1 == 10 && $c[\"ckpt_stall_ms\"] != \"\" { s = 1 }"
			     " $1 >= 15 && $c[\"ckpt_write_ms\"] > 0 { w = 1 }"
			     " END { exit !(s && w) }' AS.csv"),
			 0);

	/* metrics: a header and one row per 5 steps */
	assert_int_equal(train_cli_run("grep -c '^[0-9]' A.csv | grep -qx 4 && head -1 A.csv | grep -q '^step,loss,ce,aux,lr,grad_norm'"),
			 0);
	/* resume under Slurm after a requeue: automatic, flags not needed */
	assert_int_equal(train_cli_run("SIGMA_ATTEMPT=1 SIGMA_CKPT_DIR=B %s --train train.tok " SMALL "--steps 25",
			     prog),
			 0);
	assert_true(train_cli_out_has("continuing at step 20"));
}

/*
 * model.md's contract, the other way round from test_trainer_reference:
 * an independent program (data/reference.py, numpy) reads a checkpoint
 * written by sigma-train and gets the same loss on the same batch.
 */
static void test_checkpoint_read_by_numpy(void **state)
{
	const char *src = getenv("top_srcdir");
	char ck[PATH_MAX + 64], tf[PATH_MAX + 64], err[1024], out[PATH_MAX + 16];
	struct model *m;
	struct ckpt_state st;
	struct data_file df;
	int32_t tok[2 * 16], tgt[2 * 16];
	char *buf = NULL, *p;
	size_t len;
	double want;
	int rc;

	(void)state;
	rc = train_cli_run("for p in python3 /usr/bin/python3; do $p -c 'import h5py, numpy' 2>/dev/null && exec $p '%s/tests/unit/data/reference.py' loss A/ckpt-00000020.h5 train.tok 2; done; exit 77",
		 src ? src : "..");
	if (rc == 77)
		skip(); /* no python3 with h5py and numpy */
	assert_int_equal(rc, 0);
	snprintf(out, sizeof(out), "%s/out", dir);
	assert_int_equal(sigma_file_read(out, 1 << 20, &buf, &len), 0);
	p = strstr(buf, "loss ");
	assert_non_null(p);
	want = strtod(p + 5, NULL);
	free(buf);

	snprintf(ck, sizeof(ck), "%s/A/ckpt-00000020.h5", dir);
	snprintf(tf, sizeof(tf), "%s/train.tok", dir);
	load(ck, &m, &st);
	assert_int_equal(data_open(&df, tf, err, sizeof(err)), 0);
	for (int i = 0; i < 2 * 16; i++) {
		tok[i] = (int32_t)data_token(&df, (uint64_t)i);
		tgt[i] = (int32_t)data_token(&df, (uint64_t)i + 1);
	}
	data_close(&df);
	model_forward(m, tok, tgt);
	print_message("loss: sigma-train %.8f, numpy reading its checkpoint %.8f\n",
		      m->loss, want);
	assert_true(fabs(m->loss - want) < 1e-5 * fabs(want));
	model_destroy(m);
}

/*
 * The tier to resume from: the node-local one when it holds a newer step
 * than the shared directory, the shared one when that is newer, and an
 * older valid local step when the newest local file is damaged.
 */
static void test_ckpt_tiers(void **state)
{
	(void)state;
	/* local 3, 6; shared 4 and 7 (the stop); 7 lost: tier 1 at 6 */
	assert_int_equal(train_cli_run("SLURMD_NODENAME=nx %s --train train.tok " SMALL "--steps 10 --ckpt-dir T2 --local-ckpt-dir T1 --ckpt-every 3 --ckpt-full-every 4 --stop-at 7",
			     prog),
			 75);
	assert_int_equal(train_cli_run("test -f T1/nx/rank-0/ckpt-00000006.h5 && test -f T2/ckpt-00000004.h5 && ! test -e T2/ckpt-00000003.h5 && rm T2/ckpt-00000007.h5"),
			 0);
	assert_int_equal(train_cli_run("SLURMD_NODENAME=nx %s --train train.tok " SMALL "--steps 10 --ckpt-dir T2 --local-ckpt-dir T1 --ckpt-every 3 --ckpt-full-every 4 --resume --stop-at 8",
			     prog),
			 75);
	assert_true(train_cli_out_has("resume: tier 1, step 6 from rank 0's own copy (newest shared checkpoint: 4)"));
	/* shared 8 damaged (in copies of both tiers): the shared read falls
	 * back to 4, and local 6, newer than that, still wins */
	assert_int_equal(train_cli_run("cp -r T1 U1 && cp -r T2 U2 && head -c 3000 U2/ckpt-00000008.h5 > x && mv x U2/ckpt-00000008.h5 && SLURMD_NODENAME=nx %s --train train.tok " SMALL "--steps 10 --ckpt-dir U2 --local-ckpt-dir U1 --ckpt-every 3 --ckpt-full-every 4 --resume --stop-at 7",
			     prog),
			 75);
	assert_true(train_cli_out_has("U2/ckpt-00000008.h5"));
	assert_true(train_cli_out_has("resume: tier 1, step 6 from rank 0's own copy (newest shared checkpoint: 8); 2 checkpointed steps lost"));
	/* now shared 8 is newer than local 6: the shared tier */
	assert_int_equal(train_cli_run("SLURMD_NODENAME=nx %s --train train.tok " SMALL "--steps 10 --ckpt-dir T2 --local-ckpt-dir T1 --ckpt-every 3 --ckpt-full-every 4 --resume",
			     prog),
			 0);
	assert_true(train_cli_out_has("the shared tier is newer"));
	assert_true(train_cli_out_has("continuing at step 8"));
	/* the newest local file damaged, the shared ones gone: local 6 */
	assert_int_equal(train_cli_run("rm T2/*.h5 && head -c 3000 T1/nx/rank-0/ckpt-00000009.h5 > x && mv x T1/nx/rank-0/ckpt-00000009.h5 && SLURMD_NODENAME=nx %s --train train.tok " SMALL "--steps 10 --ckpt-dir T2 --local-ckpt-dir T1 --ckpt-every 3 --resume",
			     prog),
			 0);
	assert_true(train_cli_out_has("resume: tier 1, step 6"));
	/* with no shared directory: refused */
	assert_int_equal(train_cli_run("%s --train train.tok " SMALL "--steps 2 --local-ckpt-dir T1",
			     prog),
			 64);
}

static void test_bad_checkpoints(void **state)
{
	(void)state;
	assert_int_equal(train_cli_run("%s --train train.tok " SMALL "--steps 6 --ckpt-dir D --ckpt-every 3",
			     prog),
			 0);
	/* another shape: every checkpoint refused, 65 */
	assert_int_equal(train_cli_run("%s --train train.tok " SMALL "--dim 32 --steps 8 --ckpt-dir D --resume",
			     prog),
			 65);
	assert_true(train_cli_out_has("config D = 64, this run has 32"));
	assert_true(train_cli_out_has("none of 2 checkpoints is valid"));
	/* the newest damaged: fall back to the older one */
	assert_int_equal(train_cli_run("head -c 300000 D/ckpt-00000006.h5 > D/x && mv D/x D/ckpt-00000006.h5 && %s --train train.tok " SMALL "--steps 8 --ckpt-dir D --resume",
			     prog),
			 0);
	assert_true(train_cli_out_has("ckpt-00000006.h5"));
	assert_true(train_cli_out_has("continuing at step 3"));
	/* SIGMA_* are defaults: the flag wins */
	assert_int_equal(train_cli_run("SIGMA_CKPT_DIR=E SIGMA_CKPT_EVERY=2 %s --train train.tok " SMALL "--steps 5 --ckpt-dir F --ckpt-every 0",
			     prog),
			 0);
	assert_int_equal(train_cli_run("test -f F/ckpt-00000005.h5 && ! test -e F/ckpt-00000002.h5 && ! test -e E"),
			 0);
	/* --init-from a file with no seal: refused before libhdf5 reads it;
	 * --init-from-untrusted reads it, in a child, and finds it is no
	 * checkpoint */
	assert_int_equal(train_cli_run("%s --train train.tok " SMALL "--steps 5 --init-from train.tok",
			     prog),
			 65);
	assert_true(train_cli_out_has("train.tok has no seal: a file from elsewhere is read only with --init-from-untrusted"));
	assert_int_equal(train_cli_run("%s --train train.tok " SMALL "--steps 5 --init-from-untrusted train.tok",
			     prog),
			 65);
	assert_true(train_cli_out_has("not an HDF5 file"));
	assert_int_equal(train_cli_run("%s --train train.tok " SMALL "--steps 5 --init-from E/x.h5 --init-from-untrusted train.tok",
			     prog),
			 64);
	assert_true(train_cli_out_has("--init-from and --init-from-untrusted: give one"));
}

/* until path holds a training step's line (the signal handlers are in
 * place by then), at most 120 s: a loaded machine starts slowly */
static void wait_for_step(const char *path)
{
	for (int i = 0; i < 1200; i++) {
		char *buf = NULL;
		size_t len = 0;
		bool hit = false;

		if (sigma_file_read(path, 1 << 20, &buf, &len) == 0) {
			hit = strstr(buf, "\nstep ") != NULL;
			free(buf);
		}
		if (hit)
			return;
		usleep(100 * 1000);
	}
	fail_msg("%s: no step line after 120 s", path);
}

static void test_signals(void **state)
{
	int sigs[2] = { SIGUSR1, SIGTERM };

	(void)state;
	for (int i = 0; i < 2; i++) {
		char cmd[PATH_MAX * 4], ck[PATH_MAX + 16], out[PATH_MAX + 16];
		pid_t pid;
		int st;

		snprintf(ck, sizeof(ck), "%s/S%d", dir, i);
		snprintf(cmd, sizeof(cmd),
			 "exec %s --train %s " SMALL
			 "--steps 99999 --ckpt-dir %s > %s/sig.out 2>&1",
			 prog, train_tok, ck, dir);
		snprintf(out, sizeof(out), "%s/sig.out", dir);
		unlink(out); /* the previous run's */
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
			_exit(127);
		}
		wait_for_step(out);
		assert_int_equal(kill(pid, sigs[i]), 0);
		assert_int_equal(waitpid(pid, &st, 0), pid);
		assert_true(WIFEXITED(st));
		assert_int_equal(WEXITSTATUS(st), 75);
		/* the checkpoint is whole: a resume picks it up */
		assert_int_equal(train_cli_run("%s --train train.tok " SMALL "--steps 99999 --ckpt-dir S%d --resume --stop-at 99998 2>&1 | head -20 | grep -q 'continuing at step'",
				     prog, i),
				 0);
	}
	/* without a checkpoint directory: 69, nothing saved */
	{
		char cmd[PATH_MAX * 4];
		pid_t pid;
		int st;

		snprintf(cmd, sizeof(cmd),
			 "exec %s --train %s " SMALL "--steps 99999 > %s/sig0.out 2>&1",
			 prog, train_tok, dir);
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
			_exit(127);
		}
		snprintf(cmd, sizeof(cmd), "%s/sig0.out", dir);
		wait_for_step(cmd);
		kill(pid, SIGUSR1);
		assert_int_equal(waitpid(pid, &st, 0), pid);
		assert_int_equal(WEXITSTATUS(st), 69);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_prepare_and_usage),
		cmocka_unit_test(test_bad_data),
		cmocka_unit_test(test_resume_bitwise),
		cmocka_unit_test(test_checkpoint_read_by_numpy),
		cmocka_unit_test(test_bad_checkpoints),
		cmocka_unit_test(test_ckpt_tiers),
		cmocka_unit_test(test_signals),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
