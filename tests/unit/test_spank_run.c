/*
 * test_spank_run.c - what the job prolog does with processes and files:
 * running the probe (exit codes, captured summary, timeout, a probe that
 * cannot be executed) and creating the checkpoint directory as the user
 * (ownership, an existing directory, a planted symbolic link).
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
#include "sigma_spank.h"

static char tmpdir[256];

static void write_script(const char *path, const char *body)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fprintf(f, "#!/bin/sh\n%s\n", body);
	fclose(f);
	assert_int_equal(chmod(path, 0755), 0);
}

static int run_script(const char *body, long timeout,
		      struct sigma_probe_result *res)
{
	char path[PATH_MAX + 16];
	char *argv[] = {path, "--node", "n1", "quick", NULL};
	char *envp[] = {"PATH=/usr/bin:/bin", NULL};

	snprintf(path, sizeof(path), "%s/probe", tmpdir);
	write_script(path, body);
	return sigma_probe_run(argv, envp, timeout, res);
}

static void test_exit_codes(void **state)
{
	struct sigma_probe_result res;

	assert_int_equal(
	    run_script("echo 'sigma: probe quick: ok: n1'; exit 0", 10, &res),
	    0);
	assert_int_equal(res.status, 0);
	assert_string_equal(res.line, "sigma: probe quick: ok: n1");
	assert_int_equal(
	    run_script(
		"echo 'sigma: probe quick: host temp_c=97 (limit 95)'; exit 1",
		10, &res),
	    0);
	assert_int_equal(res.status, 1);
	assert_string_equal(res.line,
			    "sigma: probe quick: host temp_c=97 (limit 95)");
	assert_int_equal(run_script("exit 2", 10, &res), 0);
	assert_int_equal(res.status, 2);
	assert_string_equal(res.line, "");
	assert_int_equal(run_script("exit 3", 10, &res), 0);
	assert_int_equal(res.status, 3);
}

/* the arguments and the environment reach the probe as given */
static void test_argv_env(void **state)
{
	struct sigma_probe_result res;

	assert_int_equal(
	    run_script("echo \"sigma: $1 $2 $3 PATH=$PATH HOME=${HOME-unset}\"",
		       10, &res),
	    0);
	assert_string_equal(
	    res.line, "sigma: --node n1 quick PATH=/usr/bin:/bin HOME=unset");
}

/* messages on stderr before the summary do not hide it */
static void test_summary_line(void **state)
{
	struct sigma_probe_result res;

	assert_int_equal(
	    run_script(
		"echo 'sigma-probe: warning: injection refused' >&2; "
		"echo; echo 'sigma: warning: probe quick: host ecc_corrected_rate=40/h (limit 20)'; exit 2",
		10, &res),
	    0);
	assert_int_equal(res.status, 2);
	assert_string_equal(
	    res.line,
	    "sigma: warning: probe quick: host ecc_corrected_rate=40/h (limit 20)");
	/* without a summary, the first non-empty line */
	assert_int_equal(
	    run_script("printf '\\n\\nsomething broke\\n'; exit 3", 10, &res),
	    0);
	assert_string_equal(res.line, "something broke");
	/* a flood of output is cut, not blocking */
	assert_int_equal(
	    run_script(
		"i=0; while [ $i -lt 2000 ]; do echo xxxxxxxxxxxxxxxxxxxxxxxx; i=$((i+1)); done; exit 1",
		10, &res),
	    0);
	assert_int_equal(res.status, 1);
}

static void test_timeout(void **state)
{
	struct sigma_probe_result res;
	uint64_t t0 = sigma_now_ms();

	/* the probe and its child are both killed */
	assert_int_equal(run_script("sleep 30 & sleep 30", 1, &res),
			 -ETIMEDOUT);
	assert_true(res.timed_out);
	assert_int_equal(res.status, -1);
	assert_true(sigma_now_ms() - t0 < 20000);
	assert_non_null(strstr(res.line, "timed out after 1 s"));
	/* closing its output does not buy the probe more time */
	t0 = sigma_now_ms();
	assert_int_equal(run_script("exec >/dev/null 2>&1; sleep 30", 1, &res),
			 -ETIMEDOUT);
	assert_true(sigma_now_ms() - t0 < 20000);
	/* nor does it lose a verdict that comes after */
	assert_int_equal(
	    run_script(
		"echo 'sigma: probe quick: ok'; exec >&-; sleep 0.3; exit 2",
		10, &res),
	    0);
	assert_int_equal(res.status, 2);
	assert_string_equal(res.line, "sigma: probe quick: ok");
}

static void test_exec_failure(void **state)
{
	struct sigma_probe_result res;
	char *argv[] = {"/nonexistent/sigma-probe", NULL};
	char *rel[] = {"sigma-probe", NULL};
	char *envp[] = {NULL};

	assert_int_equal(sigma_probe_run(argv, envp, 5, &res), -ENOEXEC);
	assert_non_null(strstr(res.line, "cannot execute"));
	assert_int_equal(sigma_probe_run(rel, envp, 5, &res), -EINVAL);
}

static void test_ckpt_create(void **state)
{
	char root[300], path[PATH_MAX], err[512];
	uid_t uid = getuid();
	gid_t gid = getgid();
	struct stat st;

	snprintf(root, sizeof(root), "%s/ckpt", tmpdir);
	assert_int_equal(mkdir(root, 01777), 0);
	snprintf(path, sizeof(path), "%s/user/job1", root);
	assert_int_equal(
	    sigma_ckpt_create(path, root, "user", uid, gid, 10, err, sizeof(err)), 0);
	assert_int_equal(lstat(path, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_uid, uid);
	assert_int_equal(st.st_mode & 0777, 0700);
	assert_int_equal(sigma_ckpt_check(path, uid, 10, err, sizeof(err)), 0);
	/* again: an existing directory is fine */
	assert_int_equal(
	    sigma_ckpt_create(path, root, "user", uid, gid, 10, err, sizeof(err)), 0);
	/* a path outside ckpt_root, made whole by the user */
	snprintf(path, sizeof(path), "%s/own/a/b", tmpdir);
	assert_int_equal(
	    sigma_ckpt_create(path, root, "user", uid, gid, 10, err, sizeof(err)), 0);
	assert_int_equal(sigma_ckpt_check(path, uid, 10, err, sizeof(err)), 0);
	assert_int_equal(
	    sigma_ckpt_create("relative", root, "user", uid, gid, 10, err,
			      sizeof(err)),
	    -EINVAL);
}

static void test_ckpt_symlink(void **state)
{
	char root[300], path[PATH_MAX], target[400], err[512];
	uid_t uid = getuid();
	gid_t gid = getgid();

	snprintf(root, sizeof(root), "%s/ckpt", tmpdir);
	snprintf(target, sizeof(target), "%s/elsewhere", tmpdir);
	assert_int_equal(mkdir(target, 0755), 0);
	/* a link planted at the job's directory */
	snprintf(path, sizeof(path), "%s/user/planted", root);
	assert_int_equal(symlink(target, path), 0);
	assert_int_equal(
	    sigma_ckpt_create(path, root, "user", uid, gid, 10, err, sizeof(err)), -ELOOP);
	assert_non_null(strstr(err, "symbolic link"));
	assert_int_equal(sigma_ckpt_check(path, uid, 10, err, sizeof(err)), -ELOOP);
	/* a link planted at ckpt_root/USER: root refuses to follow it */
	snprintf(path, sizeof(path), "%s/victim", root);
	assert_int_equal(symlink(target, path), 0);
	snprintf(path, sizeof(path), "%s/victim/job", root);
	assert_true(sigma_ckpt_create(path, root, "victim", uid, gid, 10, err, sizeof(err)) <
		    0);
	assert_non_null(strstr(err, "symbolic link"));
	/* nothing was created through the links */
	snprintf(path, sizeof(path), "%s/job", target);
	assert_int_equal(access(path, F_OK), -1);
	/* a file where the directory should be */
	snprintf(path, sizeof(path), "%s/user/file", root);
	close(open(path, O_CREAT | O_WRONLY, 0600));
	assert_true(sigma_ckpt_create(path, root, "user", uid, gid, 10, err, sizeof(err)) <
		    0);
	assert_int_equal(sigma_ckpt_check(path, uid, 10, err, sizeof(err)),
			 -ENOTDIR);
	/* the owner is checked */
	assert_int_equal(sigma_ckpt_check(root, uid + 1, 10, err, sizeof(err)),
			 -EPERM);
}

/* as root: the directory belongs to the job's user, made with its ids */
static void test_ckpt_as_user(void **state)
{
	char root[300], path[PATH_MAX], err[512];
	const uid_t uid = 65534;
	const gid_t gid = 65534;
	struct stat st;

	if (getuid() != 0)
		skip();
	snprintf(root, sizeof(root), "%s/ckpt", tmpdir);
	snprintf(path, sizeof(path), "%s/nobody/run", root);
	assert_int_equal(sigma_ckpt_create(path, root, "nobody", uid, gid, 10,
					   err, sizeof(err)),
			 0);
	assert_int_equal(lstat(path, &st), 0);
	assert_int_equal(st.st_uid, uid);
	assert_int_equal(st.st_gid, gid);
	snprintf(path, sizeof(path), "%s/nobody", root);
	assert_int_equal(lstat(path, &st), 0);
	assert_int_equal(st.st_uid, uid);
	/* the user cannot create outside what it may write */
	assert_true(sigma_ckpt_create("/root/sigma-test-denied", root, "nobody",
				      uid, gid, 10, err, sizeof(err)) < 0);
	assert_int_equal(access("/root/sigma-test-denied", F_OK), -1);
	/* ckpt_root/OTHER owned by someone else is refused */
	snprintf(path, sizeof(path), "%s/user/x", root);
	assert_true(sigma_ckpt_create(path, root, "user", uid, gid, 10, err,
				      sizeof(err)) < 0);
}

static uid_t owner(const char *path)
{
	struct stat st;

	assert_int_equal(lstat(path, &st), 0);
	return st.st_uid;
}

/*
 * As root, what a user may ask for: root hands over nothing but the
 * user's own ckpt_root/USER, and only when it has just made it.
 */
static void test_ckpt_attacks(void **state)
{
	char root[300], path[PATH_MAX], err[512];
	const uid_t uid = 65534;
	const gid_t gid = 65534;

	if (getuid() != 0)
		skip();
	snprintf(root, sizeof(root), "%s/fresh", tmpdir);
	assert_int_equal(mkdir(root, 0755), 0);
	/* ckpt_root itself, through "." (a fresh, empty ckpt_root) */
	snprintf(path, sizeof(path), "%s/./x", root);
	assert_int_equal(sigma_ckpt_create(path, root, "nobody", uid, gid, 10,
					   err, sizeof(err)),
			 -EPERM);
	assert_non_null(strstr(err, "own directory"));
	assert_int_equal(owner(root), 0);
	assert_int_equal(sigma_ckpt_create(root, root, "nobody", uid, gid, 10,
					   err, sizeof(err)),
			 -EPERM);
	assert_int_equal(owner(root), 0);
	/* another user's name: not created */
	snprintf(path, sizeof(path), "%s/bob/x", root);
	assert_int_equal(sigma_ckpt_create(path, root, "nobody", uid, gid, 10,
					   err, sizeof(err)),
			 -EPERM);
	snprintf(path, sizeof(path), "%s/bob", root);
	assert_int_equal(access(path, F_OK), -1);
	/* an existing root-owned directory that holds only files */
	snprintf(path, sizeof(path), "%s/nobody", root);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/nobody/file", root);
	close(open(path, O_CREAT | O_WRONLY, 0600));
	snprintf(path, sizeof(path), "%s/nobody/x", root);
	assert_int_equal(sigma_ckpt_create(path, root, "nobody", uid, gid, 10,
					   err, sizeof(err)),
			 -EPERM);
	assert_non_null(strstr(err, "owned by uid 0"));
	snprintf(path, sizeof(path), "%s/nobody", root);
	assert_int_equal(owner(path), 0);
	snprintf(path, sizeof(path), "%s/nobody/x", root);
	assert_int_equal(access(path, F_OK), -1);
}

static int sleeper(void *arg, char *err, size_t errlen)
{
	sleep(30);
	return 0;
}

static int answers(void *arg, char *err, size_t errlen)
{
	/* the child starts with no descriptor above 2 but its reply pipe */
	if (fcntl(*(int *)arg, F_GETFD) != -1)
		return sigma_set_err(err, errlen, EBADF, "fd %d leaked",
				     *(int *)arg);
	return sigma_set_err(err, errlen, ENOSPC, "told %s", "why");
}

/* a child that hangs is killed at its deadline; one that answers is heard */
static void test_child_deadline(void **state)
{
	char err[256];
	uint64_t t0 = sigma_now_ms();
	int null_fd = open("/dev/null", O_RDONLY);
	int fd = fcntl(null_fd, F_DUPFD, 100);

	assert_int_equal(sigma_child_call(sleeper, NULL, 300, err, sizeof(err)),
			 -ETIMEDOUT);
	assert_true(sigma_now_ms() - t0 < 2500);
	assert_int_equal(sigma_child_call(answers, &fd, 5000, err, sizeof(err)),
			 -ENOSPC);
	assert_string_equal(err, "told why");
	close(fd);
	close(null_fd);
}

static int setup(void **state)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/test_spank_run.XXXXXX");
	if (!mkdtemp(tmpdir))
		return -1;
	return chmod(tmpdir, 0755);
}

static int teardown(void **state)
{
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_exit_codes),
	    cmocka_unit_test(test_argv_env),
	    cmocka_unit_test(test_summary_line),
	    cmocka_unit_test(test_timeout),
	    cmocka_unit_test(test_exec_failure),
	    cmocka_unit_test(test_ckpt_create),
	    cmocka_unit_test(test_ckpt_symlink),
	    cmocka_unit_test(test_ckpt_as_user),
	    cmocka_unit_test(test_ckpt_attacks),
	    cmocka_unit_test(test_child_deadline),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
