/*
 * test_probe_cli.c - the sigma-probe program as admins and Slurm run it:
 * exit codes and the summary line, --json, --metrics, configuration
 * discovery, bad arguments, and (as root) injected failures and warnings.
 * Runs the built binary.
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
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "sigma.h"

static char tmp[200], probe[PATH_MAX], conf[300], out[16384];

/* run the probe with argv (NULL-terminated) and env; stdout+stderr in out */
static int run(char *const env[], ...)
{
	char *argv[16];
	int pfd[2], status, n = 1;
	size_t used = 0;
	va_list ap;
	pid_t pid;

	argv[0] = probe;
	va_start(ap, env);
	while (n < 15 && (argv[n] = va_arg(ap, char *)))
		n++;
	va_end(ap);
	argv[n] = NULL;
	assert_int_equal(pipe(pfd), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(pfd[1], 1);
		dup2(pfd[1], 2);
		close(pfd[0]);
		execve(probe, argv, env);
		_exit(127);
	}
	close(pfd[1]);
	for (;;) {
		ssize_t r = read(pfd[0], out + used, sizeof(out) - 1 - used);

		if (r <= 0)
			break;
		used += (size_t)r;
	}
	out[used] = '\0';
	close(pfd[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

static void write_text(const char *path, const char *text, mode_t mode)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	assert_int_equal(chmod(path, mode), 0);
}

static int setup(void **state)
{
	const char *top = getenv("top_builddir");
	char text[600];

	snprintf(probe, sizeof(probe), "%s/sbin/sigma-probe", top ? top : "..");
	snprintf(tmp, sizeof(tmp), "/tmp/test_probe_cli.XXXXXX");
	if (!mkdtemp(tmp) || chmod(tmp, 0755) < 0)
		return -1;
	snprintf(conf, sizeof(conf), "%s/sigma.conf", tmp);
	snprintf(text, sizeof(text),
		 "state_dir=\ninject_dir=%s/inject\ngpus=no\nsigmad_poll_s=5\n",
		 tmp);
	snprintf(out, sizeof(out), "%s/inject", tmp);
	if (mkdir(out, 0755) < 0)
		return -1;
	write_text(conf, text, 0644);
	return access(probe, X_OK);
}

static int teardown(void **state)
{
	char cmd[300];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	return system(cmd) == 0 ? 0 : -1;
}

static void test_healthy(void **state)
{
	char *env[] = {NULL};

	assert_int_equal(
	    run(env, "--config", conf, "--node", "c1", "quick", NULL), 0);
	assert_non_null(strstr(
	    out,
	    "sigma: probe quick: ok: c1, no GPUs, host only (gpus=no in sigma.conf)"));
	/* SIGMA_CONF and SLURMD_NODENAME are the defaults */
	{
		char e1[400], *env2[] = {e1, "SLURMD_NODENAME=c7", NULL};

		snprintf(e1, sizeof(e1), "SIGMA_CONF=%s", conf);
		assert_int_equal(run(env2, "full", NULL), 0);
		assert_non_null(strstr(out, "sigma: probe full: ok: c7"));
	}
}

static void test_json_metrics(void **state)
{
	char *env[] = {NULL}, metrics[300], *buf = NULL;

	snprintf(metrics, sizeof(metrics), "%s/sigma.prom", tmp);
	assert_int_equal(run(env, "--config", conf, "--node", "c1", "--json",
			     "--metrics", metrics, NULL),
			 0);
	assert_true(out[0] == '{');
	assert_non_null(strstr(
	    out,
	    "\"node\":\"c1\",\"level\":\"quick\",\"verdict\":\"ok\",\"exit\":0"));
	assert_non_null(strstr(out, "\"key\":\"compute\",\"value\":1"));
	assert_int_equal(sigma_file_read(metrics, 1 << 20, &buf, NULL), 0);
	assert_non_null(strstr(
	    buf, "sigma_probe_verdict{node=\"c1\",level=\"quick\"} 0\n"));
	assert_non_null(strstr(
	    buf,
	    "sigma_probe_reading{node=\"c1\",component=\"host\",key=\"compute\"} 1\n"));
	free(buf);
}

static void test_errors(void **state)
{
	char *env[] = {NULL}, bad[300];

	assert_int_equal(run(env, "--config", conf, "slow", NULL), 3);
	assert_non_null(strstr(out, "level 'slow': expected quick or full"));
	assert_int_equal(run(env, "--config", conf, "--node", "../etc", NULL),
			 3);
	assert_non_null(strstr(out, "node name '../etc'"));
	assert_int_equal(run(env, "--config", conf, "--ckpt-root", "rel", NULL),
			 3);
	assert_int_equal(run(env, "--bogus", NULL), 3);
	assert_int_equal(run(env, "quick", "full", NULL), 3);
	/* a bad sigma.conf: the probe could not run, and says why */
	snprintf(bad, sizeof(bad), "%s/bad.conf", tmp);
	write_text(bad, "temp_fail_c=hot\n", 0644);
	assert_int_equal(run(env, "--config", bad, "--node", "c1", NULL), 3);
	assert_non_null(strstr(out, "sigma: probe quick: could not run: "));
	assert_non_null(strstr(out, "bad.conf:1: temp_fail_c=hot"));
	/* a --config that does not exist is an error too */
	assert_int_equal(run(env, "--config", "/nonexistent/sigma.conf", NULL),
			 3);
	assert_int_equal(run(env, "--help", NULL), 0);
	assert_non_null(
	    strstr(out, "Exit status: 0 healthy, 1 failing, 2 warning"));
}

/* injection needs a root-owned file: only as root */
static void test_injected(void **state)
{
	char *env[] = {NULL}, path[300];

	if (getuid() != 0)
		skip();
	snprintf(path, sizeof(path), "%s/inject/c2", tmp);
	write_text(path, "temp_c=97\n", 0644);
	assert_int_equal(run(env, "--config", conf, "--node", "c2", NULL), 1);
	assert_non_null(
	    strstr(out, "sigma: probe quick: host temp_c=97 (limit 95)"));
	write_text(path, "ecc_corrected_rate=40\n", 0644);
	assert_int_equal(run(env, "--config", conf, "--node", "c2", NULL), 2);
	assert_non_null(strstr(
	    out,
	    "sigma: warning: probe quick: host ecc_corrected_rate=40/h (limit 20)"));
	/* memtest is a full probe's reading */
	write_text(path, "memtest=fail\n", 0644);
	assert_int_equal(
	    run(env, "--config", conf, "--node", "c2", "quick", NULL), 0);
	assert_int_equal(
	    run(env, "--config", conf, "--node", "c2", "full", NULL), 1);
	assert_non_null(strstr(out, "sigma: probe full: host memtest=fail"));
	/* anyone could have written it: refused, measured as usual */
	write_text(path, "temp_c=97\n", 0646);
	assert_int_equal(run(env, "--config", conf, "--node", "c2", NULL), 0);
	assert_non_null(strstr(out, "injection refused"));
	/* a malformed file: the probe could not run */
	write_text(path, "temp=97\n", 0644);
	assert_int_equal(run(env, "--config", conf, "--node", "c2", NULL), 3);
	assert_non_null(strstr(out, "could not run: injection file"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_healthy),
	    cmocka_unit_test(test_json_metrics),
	    cmocka_unit_test(test_errors),
	    cmocka_unit_test(test_injected),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
