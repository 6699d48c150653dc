/*
 * test_trainer_runs.c - every checkpoint names its run, and a run never
 * resumes another's (docs/checkpoint-format.md, "Runs").
 *
 * Run A trains to step 60 over two attempts in D; a fresh run B in D is
 * refused before its first step, with both ways on; B started beside A
 * (--new-run) checkpoints, and its restart (SIGMA_ATTEMPT=1) resumes B's
 * own newest step, never A's; A, moved aside, is still whole and
 * resumable; a run continued by a new job orders after everything it
 * wrote before; the manifest is parsed strictly and must be the user's.
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
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "sigma.h"
#include "train_cli.h"
#include "run.h"

static const char *const prog = train_cli_prog;

static int setup(void **state)
{
	(void)state;
	return train_cli_setup_tokens("/tmp/sigma-test-runs.XXXXXX");
}

#define SMALL "--train train.tok --preset small --batch 2 --seq-len 16 --threads 2 --warmup 3 --log-every 5 --ckpt-every 10 "

/* the run id that DIR/run names */
static void run_of(const char *d, char *id, size_t len)
{
	struct run_manifest rm;
	char p[PATH_MAX], err[512];

	snprintf(p, sizeof(p), "%s/%s", train_cli_dir, d);
	if (run_read(p, &rm, err, sizeof(err)))
		fail_msg("%s", err);
	sigma_strlcpy(id, rm.id, len);
}

static void test_runs_never_mix(void **state)
{
	char a[RUN_ID_MAX], b[RUN_ID_MAX], cmd[PATH_MAX + 512];

	(void)state;
	/* run A: attempt 0 stops at 30, attempt 2 finishes at 60 */
	assert_int_equal(train_cli_run("SIGMA_ATTEMPT=0 %s " SMALL "--ckpt-dir D --steps 60 --stop-at 30",
				       prog),
			 75);
	assert_int_equal(train_cli_run("SIGMA_ATTEMPT=2 %s " SMALL "--ckpt-dir D --steps 60",
				       prog),
			 0);
	assert_true(train_cli_out_has("continuing at step 30"));
	run_of("D", a, sizeof(a));
	assert_true(run_id_valid(a));
	assert_int_equal(train_cli_run("ls D > A.ls"), 0);

	/* run B, fresh in D: refused before it trains, D untouched */
	assert_int_equal(train_cli_run("%s " SMALL "--ckpt-dir D --steps 30",
				       prog),
			 64);
	assert_true(train_cli_out_has(a));
	assert_true(train_cli_out_has("--resume"));
	assert_true(train_cli_out_has("--new-run"));
	assert_false(train_cli_out_has("step 5/30"));
	assert_int_equal(train_cli_run("ls D | cmp - A.ls"), 0);

	/* B beside A: A's files move to D/run-A, B checkpoints, stops */
	assert_int_equal(train_cli_run("%s " SMALL "--ckpt-dir D --steps 30 --new-run --stop-at 20",
				       prog),
			 75);
	assert_true(train_cli_out_has("checkpoint step 20"));
	run_of("D", b, sizeof(b));
	assert_string_not_equal(a, b);
	snprintf(cmd, sizeof(cmd), "ls D/run-%s | cmp - A.ls", a);
	assert_int_equal(train_cli_run("%s", cmd), 0);

	/* B's restart resumes B's step 20, never A's 60 */
	assert_int_equal(train_cli_run("SIGMA_ATTEMPT=1 %s " SMALL "--ckpt-dir D --steps 30",
				       prog),
			 0);
	assert_true(train_cli_out_has("continuing at step 20"));
	assert_true(train_cli_out_has("done: 30 steps"));
	assert_int_equal(train_cli_run("test -e D/ckpt-00000030-a1.h5"), 0);

	/* A, moved aside, resumes where it was; a new job continuing it
	 * (SIGMA_ATTEMPT 0, --resume) orders after attempt 2 */
	snprintf(cmd, sizeof(cmd),
		 "%s " SMALL "--ckpt-dir D/run-%s --steps 70 --resume", prog,
		 a);
	assert_int_equal(train_cli_run("%s", cmd), 0);
	assert_true(train_cli_out_has("continuing at step 60"));
	snprintf(cmd, sizeof(cmd), "test -e D/run-%s/ckpt-00000070-a3.h5", a);
	assert_int_equal(train_cli_run("%s", cmd), 0);
	snprintf(cmd, sizeof(cmd), "D/run-%s", a);
	{
		char again[RUN_ID_MAX];

		run_of(cmd, again, sizeof(again));
		assert_string_equal(again, a);
	}
}

/*
 * A requeue of Slurm job 2 (SLURM_RESTART_COUNT) in a directory that job 3
 * took over: refused. An attempt set by hand in another job continues the
 * directory's run, as --resume does.
 */
static void test_restart_of_another_job(void **state)
{
	(void)state;
	assert_int_equal(train_cli_run("SLURM_JOB_ID=2 %s " SMALL "--ckpt-dir J --steps 10",
				       prog),
			 0);
	assert_int_equal(train_cli_run("SLURM_JOB_ID=3 %s " SMALL "--ckpt-dir J --steps 20 --resume",
				       prog),
			 0);
	assert_true(train_cli_out_has("continuing at step 10"));
	assert_true(train_cli_out_has(": continued by job 3 (attempt 0)"));
	assert_int_equal(train_cli_run("SLURM_JOB_ID=2 SLURM_RESTART_COUNT=1 %s " SMALL "--ckpt-dir J --steps 10",
				       prog),
			 64);
	assert_true(train_cli_out_has("for job 3; this restart of job 2"));
	/* job 3's own requeue goes on */
	assert_int_equal(train_cli_run("SLURM_JOB_ID=3 SLURM_RESTART_COUNT=1 %s " SMALL "--ckpt-dir J --steps 30",
				       prog),
			 0);
	assert_true(train_cli_out_has("continuing at step 20"));
	/* by hand, in job 4 */
	assert_int_equal(train_cli_run("SLURM_JOB_ID=4 SIGMA_ATTEMPT=2 %s " SMALL "--ckpt-dir J --steps 40",
				       prog),
			 0);
	assert_true(train_cli_out_has("continuing at step 30"));
	assert_int_equal(train_cli_run("test -e J/ckpt-00000040-a2.h5"), 0);
}

/* a start decides under the directory's lock: it waits while it is held */
static void test_start_waits_for_lock(void **state)
{
	char p[PATH_MAX];
	int fd;

	(void)state;
	snprintf(p, sizeof(p), "%s/L", train_cli_dir);
	assert_int_equal(mkdir(p, 0755), 0);
	fd = open(p, O_RDONLY | O_DIRECTORY);
	assert_true(fd >= 0);
	assert_int_equal(flock(fd, LOCK_EX), 0);
	assert_int_equal(train_cli_run("timeout 3 %s " SMALL "--ckpt-dir L --steps 5",
				       prog),
			 124);
	assert_int_equal(train_cli_run("test -e L/run"), 1);
	close(fd);
	assert_int_equal(train_cli_run("%s " SMALL "--ckpt-dir L --steps 5", prog),
			 0);
	assert_int_equal(train_cli_run("test -e L/run"), 0);
}

static void write_at(const char *name, const char *text, mode_t mode)
{
	char p[PATH_MAX];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", train_cli_dir, name);
	f = fopen(p, "w");
	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(chmod(p, mode), 0);
}

static void test_manifest_strict(void **state)
{
	static const char *const bad[] = {
		"", "sigma-run 1 x-0123456789abcdef -\n",
		"sigma-run 2 local-0123456789abcdef -\n",
		"sigma-run 1 local-0123456789abcdef -", /* no newline */
		"sigma-run 1 local-0123456789abcdef - extra\n",
		"sigma-run 1 local-0123456789abcdef 12x\n",
		"sigma-run 1 ../etc -\n",
		"sigma-run 1 local-0123456789abcdef -\n\n",
	};
	struct run_manifest rm;
	char p[PATH_MAX], err[512];

	(void)state;
	assert_int_equal(train_cli_run("mkdir -p M"), 0);
	snprintf(p, sizeof(p), "%s/M", train_cli_dir);
	assert_int_equal(run_read(p, &rm, err, sizeof(err)), -ENOENT);
	write_at("M/run", "sigma-run 1 42-0123456789abcdef 42\n", 0644);
	assert_int_equal(run_read(p, &rm, err, sizeof(err)), 0);
	assert_string_equal(rm.id, "42-0123456789abcdef");
	assert_string_equal(rm.job, "42");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		write_at("M/run", bad[i], 0644);
		assert_int_equal(run_read(p, &rm, err, sizeof(err)), -EBADMSG);
		assert_non_null(strstr(err, "M/run"));
	}
	/* written by others: refused, and so is the run that names it */
	write_at("M/run", "sigma-run 1 local-0123456789abcdef -\n", 0666);
	assert_int_equal(run_read(p, &rm, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "writable by group or others"));
	assert_int_equal(train_cli_run("%s " SMALL "--ckpt-dir M --steps 5 --resume",
				       prog),
			 65);
	assert_true(train_cli_out_has("writable by group or others"));
	/* new ids: well formed, the job's number first, never twice */
	{
		char x[RUN_ID_MAX], y[RUN_ID_MAX];

		assert_int_equal(run_new_id(x, sizeof(x), "1234"), 0);
		assert_int_equal(run_new_id(y, sizeof(y), "1234"), 0);
		assert_true(run_id_valid(x) && run_id_valid(y));
		assert_int_equal(strncmp(x, "1234-", 5), 0);
		assert_string_not_equal(x, y);
		assert_int_equal(run_new_id(x, sizeof(x), NULL), 0);
		assert_int_equal(strncmp(x, "local-", 6), 0);
		assert_false(run_id_valid("local-0123456789abcdeg"));
		assert_false(run_id_valid("/x"));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_runs_never_mix),
		cmocka_unit_test(test_restart_of_another_job),
		cmocka_unit_test(test_start_waits_for_lock),
		cmocka_unit_test(test_manifest_strict),
	};

	return cmocka_run_group_tests(tests, setup, train_cli_group_teardown);
}
