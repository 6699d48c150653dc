/* test_lib_file.c - atomic writes, bounded reads, trust checks, mkdir -p. */
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
#include "scratch.h"

static char dir[64];

static int setup(void **state)
{
	(void)state;
	return scratch_make(dir, sizeof(dir), "file");
}

static int teardown(void **state)
{
	(void)state;
	return scratch_remove(dir);
}

static void test_write_atomic_then_read(void **state)
{
	char path[PATH_MAX], *buf = NULL;
	struct stat st;
	size_t len = 0;

	(void)state;
	snprintf(path, sizeof(path), "%s/a", dir);
	assert_int_equal(sigma_file_write_atomic(path, "hello", 5, 0640), 0);
	assert_int_equal(sigma_file_write_atomic(path, "bye", 3, 0600), 0);
	assert_int_equal(sigma_file_read(path, 100, &buf, &len), 0);
	assert_int_equal(len, 3);
	assert_string_equal(buf, "bye");
	free(buf);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(sigma_file_read(path, 2, &buf, &len), -EFBIG);
	assert_int_equal(sigma_file_read(dir, 100, &buf, &len), -EINVAL);
}

static void test_write_atomic_missing_dir(void **state)
{
	char path[PATH_MAX];

	(void)state;
	snprintf(path, sizeof(path), "%s/nodir/a", dir);
	assert_int_equal(sigma_file_write_atomic(path, "x", 1, 0644), -ENOENT);
}

static void test_trusted(void **state)
{
	char path[PATH_MAX], link[PATH_MAX], err[256];

	(void)state;
	snprintf(path, sizeof(path), "%s/t", dir);
	snprintf(link, sizeof(link), "%s/l", dir);
	assert_int_equal(sigma_file_write_atomic(path, "x", 1, 0644), 0);
	assert_true(sigma_file_is_trusted(path, getuid(), err, sizeof(err)));
	assert_false(sigma_file_is_trusted(path, getuid() + 1, err, sizeof(err)));
	assert_non_null(strstr(err, "owned by uid"));
	assert_int_equal(chmod(path, 0666), 0);
	assert_false(sigma_file_is_trusted(path, getuid(), err, sizeof(err)));
	assert_non_null(strstr(err, "world-writable"));
	assert_int_equal(symlink(path, link), 0);
	assert_false(sigma_file_is_trusted(link, getuid(), err, sizeof(err)));
	assert_non_null(strstr(err, "symbolic link"));
}

static void test_mkdir_p(void **state)
{
	char path[PATH_MAX];
	struct stat st;

	(void)state;
	snprintf(path, sizeof(path), "%s/x/y/z", dir);
	assert_int_equal(sigma_mkdir_p(path, 0755), 0);
	assert_int_equal(sigma_mkdir_p(path, 0755), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
}

/*
 * A directory root keeps its state or socket in: made when missing; one
 * found there already must be a directory of this user that no one else
 * may write, not a link to one, nor a file.
 */
static void test_mkdir_owned(void **state)
{
	char path[PATH_MAX], link[PATH_MAX], file[PATH_MAX], err[PATH_MAX + 128];
	FILE *f;

	(void)state;
	snprintf(path, sizeof(path), "%s/owned/state", dir);
	assert_int_equal(sigma_mkdir_owned(path, 0700, err, sizeof(err)), 0);
	assert_int_equal(sigma_mkdir_owned(path, 0700, err, sizeof(err)), 0);
	assert_int_equal(chmod(path, 0777), 0);
	assert_int_equal(sigma_mkdir_owned(path, 0700, err, sizeof(err)),
			 -EPERM);
	assert_non_null(strstr(err, "world-writable"));
	assert_int_equal(chmod(path, 0700), 0);
	snprintf(link, sizeof(link), "%s/owned/link", dir);
	assert_int_equal(symlink(path, link), 0);
	assert_int_equal(sigma_mkdir_owned(link, 0700, err, sizeof(err)),
			 -EPERM);
	assert_non_null(strstr(err, "symbolic link"));
	snprintf(file, sizeof(file), "%s/owned/file", dir);
	f = fopen(file, "w");
	assert_non_null(f);
	fclose(f);
	assert_true(sigma_mkdir_owned(file, 0700, err, sizeof(err)) < 0);
}

/*
 * A log file root opens: a link (soft or hard), a writable-by-others
 * file and, as root, a file another user owns are refused.
 */
static void test_log_file(void **state)
{
	char path[PATH_MAX], other[PATH_MAX], lnk[PATH_MAX];

	(void)state;
	snprintf(path, sizeof(path), "%s/log", dir);
	snprintf(other, sizeof(other), "%s/log.other", dir);
	snprintf(lnk, sizeof(lnk), "%s/log.link", dir);
	assert_int_equal(sigma_log_open_file(path), 0);
	sigma_log_close();
	assert_int_equal(symlink(path, lnk), 0);
	assert_int_equal(sigma_log_open_file(lnk), -ELOOP);
	assert_int_equal(unlink(lnk), 0);
	assert_int_equal(link(path, lnk), 0);
	assert_int_equal(sigma_log_open_file(lnk), -EPERM);
	assert_int_equal(sigma_log_open_file(path), -EPERM);
	assert_int_equal(unlink(lnk), 0);
	assert_int_equal(chmod(path, 0660), 0);
	assert_int_equal(sigma_log_open_file(path), -EPERM);
	assert_int_equal(chmod(path, 0640), 0);
	assert_int_equal(sigma_log_open_file(path), 0);
	sigma_log_close();
	if (getuid() == 0) {
		assert_int_equal(sigma_file_write_atomic(other, "", 0, 0644),
				 0);
		assert_int_equal(chown(other, 65534, 65534), 0);
		assert_int_equal(sigma_log_open_file(other), -EPERM);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_log_file),
		cmocka_unit_test(test_write_atomic_then_read),
		cmocka_unit_test(test_write_atomic_missing_dir),
		cmocka_unit_test(test_trusted),
		cmocka_unit_test(test_mkdir_p),
		cmocka_unit_test(test_mkdir_owned),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
