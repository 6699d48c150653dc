/*
 * test_spank_hooks.c - sigma.so's SPANK hooks end to end against a fake
 * Slurm (fake_spank.c): options registered; plugstack errors fail closed;
 * the prolog's decision for every probe exit code, a timeout and drain=no;
 * the probe's command line; the AdminComment block and the checkpoint
 * directory of a sigma job; task_init's SIGMA_* variables and its refusal of
 * a planted link.
 */
#include <errno.h>
#include <limits.h>
#include <pwd.h>
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
#include "sigma_spank.h"
#include "fake_spank.h"

static char tmp[200];
static char probe[300], args_file[300], ckpt_root[300];
static char arg_probe[400], arg_root[400];
static char user[64];

/* a fake probe: records its arguments, prints a summary, exits rc */
static void make_probe(const char *summary, int rc)
{
	FILE *f = fopen(probe, "w");

	assert_non_null(f);
	fprintf(f, "#!/bin/sh\necho \"$@\" > '%s'\necho '%s'\nexit %d\n",
		args_file, summary, rc);
	fclose(f);
	assert_int_equal(chmod(probe, 0755), 0);
}

static char *read_args(void)
{
	static char buf[1024];
	FILE *f = fopen(args_file, "r");

	buf[0] = '\0';
	if (f) {
		if (!fgets(buf, sizeof(buf), f))
			buf[0] = '\0';
		fclose(f);
	}
	buf[strcspn(buf, "\n")] = '\0';
	return buf;
}

static void option(const char *name, const char *value)
{
	fake.opt_names[fake.nopts] = name;
	fake.opt_values[fake.nopts++] = value;
}

static int hook(int (*fn)(spank_t, int, char **), int ac, ...)
{
	char *av[8];
	va_list ap;

	va_start(ap, ac);
	for (int i = 0; i < ac; i++)
		av[i] = va_arg(ap, char *);
	va_end(ap);
	return fn(NULL, ac, av);
}

static int setup(void **state)
{
	struct passwd *pw = getpwuid(getuid());

	snprintf(tmp, sizeof(tmp), "/tmp/test_spank_hooks.XXXXXX");
	if (!mkdtemp(tmp) || chmod(tmp, 0755) < 0 || !pw)
		return -1;
	sigma_strlcpy(user, pw->pw_name, sizeof(user));
	snprintf(probe, sizeof(probe), "%s/sigma-probe", tmp);
	snprintf(args_file, sizeof(args_file), "%s/args", tmp);
	snprintf(ckpt_root, sizeof(ckpt_root), "%s/ckpt", tmp);
	snprintf(arg_probe, sizeof(arg_probe), "probe=%s", probe);
	snprintf(arg_root, sizeof(arg_root), "ckpt_root=%s", ckpt_root);
	if (mkdir(ckpt_root, 01777) < 0)
		return -1;
	setenv("SLURMD_NODENAME", "n2", 1);
	setenv("SLURM_CONF", "/etc/slurm/test.conf", 1);
	setenv("SLURM_NODELIST", "n2,n3", 1);
	unsetenv("SLURM_JOB_NODELIST");
	unsetenv("SLURM_JOB_NAME");
	return 0;
}

static int teardown(void **state)
{
	char cmd[300];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	return system(cmd) == 0 ? 0 : -1;
}

static int each(void **state)
{
	fake_reset();
	unlink(args_file);
	return 0;
}

static void test_init(void **state)
{
	fake.context = S_CTX_ALLOCATOR;
	assert_int_equal(hook(slurm_spank_init, 1, arg_probe), 0);
	assert_int_equal(fake.registered, 8);
	/* a client never prints to the user's terminal on success */
	for (int i = 0; i < fake.nlog; i++)
		assert_non_null(strstr(fake.log[i], "verbose: "));
}

static void test_bad_plugstack(void **state)
{
	make_probe("sigma: probe quick: ok: n2", 0);
	fake.context = S_CTX_JOB_SCRIPT;
	assert_int_equal(hook(slurm_spank_job_prolog, 2, arg_probe,
			      "default_probe=sometimes"),
			 -1);
	assert_true(fake_logged(
	    "error: sigma: plugstack.conf: default_probe=sometimes: expected one of off|quick|full"));
	/* nothing ran */
	assert_string_equal(read_args(), "");
}

static void test_prolog_verdicts(void **state)
{
	fake.context = S_CTX_JOB_SCRIPT;
	make_probe("sigma: probe quick: ok: n2, no GPUs, host only, 3 readings",
		   0);
	assert_int_equal(hook(slurm_spank_job_prolog, 1, arg_probe), 0);
	assert_string_equal(read_args(), "--node n2 --drain quick");
	assert_true(fake_logged(
	    "info: sigma: job 42 prolog on n2: sigma: probe quick: ok: n2"));
	/* not a sigma job: no block, no directory */
	assert_int_equal(fake.comment_writes, 0);

	make_probe("sigma: probe quick: host temp_c=97 (limit 95)", 1);
	assert_int_equal(hook(slurm_spank_job_prolog, 1, arg_probe), -1);
	assert_true(fake_logged(
	    "error: sigma: job 42 prolog on n2: probe exit 1: sigma: probe quick: host temp_c=97 (limit 95)"));
	/* the probe drains (--drain); the plugin does not */
	assert_string_equal(fake.drained, "");

	make_probe(
	    "sigma: warning: probe quick: host ecc_corrected_rate=40/h (limit 20)",
	    2);
	assert_int_equal(hook(slurm_spank_job_prolog, 1, arg_probe), 0);
	make_probe("sigma: probe quick: could not run: bad sigma.conf", 3);
	assert_int_equal(hook(slurm_spank_job_prolog, 1, arg_probe), -1);
}

/* an exit code that is not the probe's is no verdict: fail closed */
static void test_prolog_strange_exit(void **state)
{
	fake.context = S_CTX_JOB_SCRIPT;
	make_probe("sigma-probe: error while loading shared libraries", 127);
	assert_int_equal(hook(slurm_spank_job_prolog, 1, arg_probe), -1);
	assert_string_equal(
	    fake.drained, "n2: sigma: probe quick: could not run: exit 127: "
			  "sigma-probe: error while loading shared libraries");
}

static void test_prolog_drain_no(void **state)
{
	fake.context = S_CTX_JOB_SCRIPT;
	make_probe("sigma: probe quick: host temp_c=97 (limit 95)", 1);
	/* report only: the job is not failed, the probe is not told to drain */
	assert_int_equal(hook(slurm_spank_job_prolog, 2, arg_probe, "drain=no"),
			 0);
	assert_string_equal(read_args(), "--node n2 quick");
}

static void test_prolog_timeout(void **state)
{
	FILE *f = fopen(probe, "w");

	fake.context = S_CTX_JOB_SCRIPT;
	assert_non_null(f);
	fputs("#!/bin/sh\nsleep 20\n", f);
	fclose(f);
	assert_int_equal(
	    hook(slurm_spank_job_prolog, 2, arg_probe, "probe_timeout=1"), -1);
	/* no verdict: the plugin drains with a sigma: reason itself */
	assert_string_equal(
	    fake.drained,
	    "n2: sigma: probe quick: could not run: timed out after 1 s");
}

/* no verdict on a node an admin drained: their reason stands */
static void test_prolog_unjudged_admin_drain(void **state)
{
	FILE *f = fopen(probe, "w");

	fake.context = S_CTX_JOB_SCRIPT;
	fake.node_drained = true;
	strcpy(fake.node_reason, "NHC: ib0 link down - do not resume");
	assert_non_null(f);
	fputs("#!/bin/sh\nsleep 20\n", f);
	fclose(f);
	assert_int_equal(
	    hook(slurm_spank_job_prolog, 2, arg_probe, "probe_timeout=1"), -1);
	assert_string_equal(fake.drained, "");
	/* nor over sigma's own admin drain */
	strcpy(fake.node_reason, "sigma: admin: RMA pending");
	assert_int_equal(
	    hook(slurm_spank_job_prolog, 2, arg_probe, "probe_timeout=1"), -1);
	assert_string_equal(fake.drained, "");
}

static void test_prolog_off(void **state)
{
	fake.context = S_CTX_JOB_SCRIPT;
	make_probe("sigma: probe quick: host temp_c=97 (limit 95)", 1);
	option("sigma-probe", "off");
	assert_int_equal(hook(slurm_spank_job_prolog, 1, arg_probe), 0);
	assert_string_equal(read_args(), "");
	/* and default_probe=off for jobs that do not ask */
	fake_reset();
	assert_int_equal(
	    hook(slurm_spank_job_prolog, 2, arg_probe, "default_probe=off"), 0);
	assert_string_equal(read_args(), "");
}

static void test_prolog_sigma_job(void **state)
{
	char path[PATH_MAX];
	struct stat st;

	fake.context = S_CTX_JOB_SCRIPT;
	make_probe("sigma: probe full: ok: n2", 0);
	option("sigma-probe", "full");
	option("sigma-spares", "2");
	option("sigma-ckpt-every", "25");
	sigma_strlcpy(fake.admin_comment, "ticket 7",
		      sizeof(fake.admin_comment));
	assert_int_equal(hook(slurm_spank_job_prolog, 3, arg_probe, arg_root,
			      "config=/etc/sigma/sigma.conf"),
			 0);
	snprintf(
	    path, sizeof(path),
	    "--node n2 --config /etc/sigma/sigma.conf --ckpt-root %s --drain full",
	    ckpt_root);
	assert_string_equal(read_args(), path);
	assert_string_equal(
	    fake.admin_comment,
	    "sigma[probe=full,spares=2,max_restarts=0,ckpt_every=25,on_warning=drain-after] ticket 7");
	/* the directory, named after the job and owned by its user */
	snprintf(path, sizeof(path), "%s/%s/train", ckpt_root, user);
	assert_int_equal(lstat(path, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_uid, getuid());
	/* a requeue keeps the block as it is */
	assert_int_equal(hook(slurm_spank_job_prolog, 2, arg_probe, arg_root),
			 0);
	assert_int_equal(fake.comment_writes, 1);
	/* a job Slurm cannot requeue is told sigma cannot protect it */
	fake.admin_comment[0] = '\0';
	fake.no_requeue = true;
	assert_int_equal(hook(slurm_spank_job_prolog, 2, arg_probe, arg_root),
			 0);
	fake.no_requeue = false;
	assert_string_equal(
	    fake.admin_comment,
	    "sigma[probe=full,spares=2,max_restarts=0,ckpt_every=25,on_warning=drain-after] sigma: cannot protect: the job cannot be requeued (--no-requeue); --sigma-spares and --sigma-max-restarts have no effect");
}

static void test_prolog_not_first(void **state)
{
	fake.context = S_CTX_JOB_SCRIPT;
	make_probe("sigma: probe quick: ok: n3", 0);
	option("sigma-spares", "1");
	setenv("SLURMD_NODENAME", "n3", 1);
	assert_int_equal(hook(slurm_spank_job_prolog, 2, arg_probe, arg_root),
			 0);
	setenv("SLURMD_NODENAME", "n2", 1);
	/* only the first node writes the block */
	assert_int_equal(fake.comment_writes, 0);
}

static void test_epilog(void **state)
{
	fake.context = S_CTX_JOB_SCRIPT;
	make_probe("sigma: probe full: host memtest=fail", 1);
	option("sigma-probe", "full");
	assert_int_equal(hook(slurm_spank_job_epilog, 1, arg_probe), -1);
	/* after the job its heat is not judged */
	assert_string_equal(read_args(), "--node n2 --drain --after-job full");
	assert_true(fake_logged("job 42 epilog on n2: probe exit 1"));
	/* epilog_probe overrides the job's level */
	make_probe("sigma: probe quick: ok: n2", 0);
	assert_int_equal(
	    hook(slurm_spank_job_epilog, 2, arg_probe, "epilog_probe=quick"),
	    0);
	assert_string_equal(read_args(), "--node n2 --drain --after-job quick");
	/* only the GPUs Slurm gave the job; none when it gave none */
	{
		static const char *const gpus[][2] = {
		    {"1,3", "--node n2 --drain --gpus 1,3 --after-job quick"},
		    {"", "--node n2 --drain --gpus none --after-job quick"},
		    {"1;rm -rf /", "--node n2 --drain --after-job quick"},
		};

		for (size_t i = 0; i < sizeof(gpus) / sizeof(gpus[0]); i++) {
			setenv("SLURM_JOB_GPUS", gpus[i][0], 1);
			assert_int_equal(hook(slurm_spank_job_epilog, 2,
					      arg_probe, "epilog_probe=quick"),
					 0);
			assert_string_equal(read_args(), gpus[i][1]);
		}
	}
	unsetenv("SLURM_JOB_GPUS");
	unlink(args_file);
	assert_int_equal(
	    hook(slurm_spank_job_epilog, 2, arg_probe, "epilog_probe=off"), 0);
	assert_string_equal(read_args(), "");
}

static void test_task_env(void **state)
{
	char path[PATH_MAX], err[256];

	option("sigma-probe", "full");
	option("sigma-spares", "2");
	option("sigma-max-restarts", "5");
	option("sigma-ckpt-every", "25");
	fake.job_env[fake.njob_env++] = "SLURM_JOB_NAME=train";
	fake.job_env[fake.njob_env++] = "SLURM_RESTART_COUNT=3";
	fake.restart_count = 0;
	snprintf(path, sizeof(path), "%s/%s/train", ckpt_root, user);
	assert_int_equal(sigma_ckpt_create(path, ckpt_root, user, getuid(),
					   getgid(), 10, err, sizeof(err)),
			 0);
	assert_int_equal(hook(slurm_spank_task_init, 1, arg_root), 0);
	assert_string_equal(fake_task_env("SIGMA_CKPT_DIR"), path);
	assert_string_equal(fake_task_env("SIGMA_CKPT_EVERY"), "25");
	/* only what sigma-train reads is exported (docs/interfaces.md) */
	assert_null(fake_task_env("SIGMA_PROBE"));
	assert_null(fake_task_env("SIGMA_SPARES"));
	assert_null(fake_task_env("SIGMA_MAX_RESTARTS"));
	assert_string_equal(fake_task_env("SIGMA_ATTEMPT"), "3");
}

static void test_task_defaults(void **state)
{
	option("sigma-spares", "0");
	fake.restart_count = 1;
	/* no ckpt_root, no --sigma-ckpt-dir: no directory variable */
	assert_int_equal(hook(slurm_spank_task_init, 1, arg_probe), 0);
	assert_null(fake_task_env("SIGMA_CKPT_DIR"));
	assert_string_equal(fake_task_env("SIGMA_CKPT_EVERY"), "100");
	assert_string_equal(fake_task_env("SIGMA_ATTEMPT"), "1");
}

static void test_task_not_sigma(void **state)
{
	assert_int_equal(hook(slurm_spank_task_init, 1, arg_root), 0);
	assert_int_equal(fake.ntask_env, 0);
	/* nor outside the remote context */
	option("sigma-spares", "1");
	fake.context = S_CTX_LOCAL;
	assert_int_equal(hook(slurm_spank_task_init, 1, arg_root), 0);
	assert_int_equal(fake.ntask_env, 0);
}

/* what a user typed reaches slurmd's log escaped: no forged log lines */
static void test_task_escapes_values(void **state)
{
	option("sigma-probe", "full\n[2026-01-01T00:00:00] fake: drained n1");
	assert_int_equal(hook(slurm_spank_task_init, 1, arg_root), -1);
	assert_true(fake_logged("--sigma-probe=full\\x0a[2026-01-01T00:00:00] fake"));
	for (int i = 0; i < fake.nlog; i++)
		assert_null(strchr(fake.log[i], '\n'));
}

static void test_task_refuses_link(void **state)
{
	char link[PATH_MAX];

	option("sigma-ckpt-every", "10");
	fake.job_env[fake.njob_env++] = "SLURM_JOB_NAME=planted";
	snprintf(link, sizeof(link), "%s/%s/planted", ckpt_root, user);
	assert_int_equal(symlink(tmp, link), 0);
	assert_int_equal(hook(slurm_spank_task_init, 1, arg_root), -1);
	assert_true(fake_logged("sigma: checkpoint directory refused"));
	assert_true(fake_logged("is a symbolic link"));
	assert_null(fake_task_env("SIGMA_CKPT_DIR"));
	/* the user's own --sigma-ckpt-dir that does not exist: refused too */
	fake_reset();
	option("sigma-ckpt-dir", "/nonexistent/sigma/ckpt");
	assert_int_equal(hook(slurm_spank_task_init, 1, arg_root), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(test_init, each),
	    cmocka_unit_test_setup(test_bad_plugstack, each),
	    cmocka_unit_test_setup(test_prolog_verdicts, each),
	    cmocka_unit_test_setup(test_prolog_strange_exit, each),
	    cmocka_unit_test_setup(test_prolog_drain_no, each),
	    cmocka_unit_test_setup(test_prolog_timeout, each),
	    cmocka_unit_test_setup(test_prolog_unjudged_admin_drain, each),
	    cmocka_unit_test_setup(test_prolog_off, each),
	    cmocka_unit_test_setup(test_prolog_sigma_job, each),
	    cmocka_unit_test_setup(test_prolog_not_first, each),
	    cmocka_unit_test_setup(test_epilog, each),
	    cmocka_unit_test_setup(test_task_env, each),
	    cmocka_unit_test_setup(test_task_defaults, each),
	    cmocka_unit_test_setup(test_task_not_sigma, each),
	    cmocka_unit_test_setup(test_task_refuses_link, each),
	    cmocka_unit_test_setup(test_task_escapes_values, each),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
