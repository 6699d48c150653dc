/* test_lib_kv.c - the key=value parser shared by plugstack.conf and sigma.conf. */
#include <errno.h>
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

struct seen {
	int n;
	char keys[8][SIGMA_KV_MAX_KEY + 1];
	char values[8][SIGMA_KV_MAX_VALUE + 1];
};

static int record(const char *key, const char *value, void *arg, char *err,
		  size_t errlen)
{
	struct seen *s = arg;

	if (!strcmp(key, "bad"))
		return sigma_set_err(err, errlen, EINVAL, "bad is refused");
	if (s->n < 8) {
		sigma_strlcpy(s->keys[s->n], key, sizeof(s->keys[0]));
		sigma_strlcpy(s->values[s->n], value, sizeof(s->values[0]));
	}
	s->n++;
	return 0;
}

static void test_word(void **state)
{
	struct seen s = { 0 };
	char err[256];

	(void)state;
	assert_int_equal(sigma_kv_parse_word("probe=/usr/sbin/sigma-probe", record, &s, err, sizeof(err)), 0);
	assert_int_equal(s.n, 1);
	assert_string_equal(s.keys[0], "probe");
	assert_string_equal(s.values[0], "/usr/sbin/sigma-probe");
	/* an empty value is the callback's business, not a syntax error */
	assert_int_equal(sigma_kv_parse_word("ckpt_root=", record, &s, err, sizeof(err)), 0);
	assert_string_equal(s.values[1], "");
	/* value may hold '=' */
	assert_int_equal(sigma_kv_parse_word("a=b=c", record, &s, err, sizeof(err)), 0);
	assert_string_equal(s.values[2], "b=c");
}

static void test_word_errors(void **state)
{
	struct seen s = { 0 };
	char err[256], big[2000];

	(void)state;
	assert_int_equal(sigma_kv_parse_word("novalue", record, &s, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "'novalue' is not key=value"));
	assert_int_equal(sigma_kv_parse_word("=x", record, &s, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "empty key"));
	assert_int_equal(sigma_kv_parse_word("ke y=x", record, &s, err, sizeof(err)), -EINVAL);
	assert_int_equal(sigma_kv_parse_word("bad=1", record, &s, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "bad is refused");
	memset(big, 'v', sizeof(big));
	memcpy(big, "k=", 2);
	big[sizeof(big) - 1] = '\0';
	assert_int_equal(sigma_kv_parse_word(big, record, &s, err, sizeof(err)), -ENAMETOOLONG);
	memset(big, 'k', 100);
	strcpy(big + 100, "=1");
	assert_int_equal(sigma_kv_parse_word(big, record, &s, err, sizeof(err)), -ENAMETOOLONG);
	assert_int_equal(sigma_kv_parse_word("k=a\tb", record, &s, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "control character"));
	assert_int_equal(s.n, 0);
}

static void test_argv_stops_at_first_error(void **state)
{
	char *argv[] = { "a=1", "bad=2", "c=3" };
	struct seen s = { 0 };
	char err[256];

	(void)state;
	assert_int_equal(sigma_kv_parse_argv(3, argv, record, &s, err, sizeof(err)), -EINVAL);
	assert_int_equal(s.n, 1);
}

static void test_buf(void **state)
{
	const char *conf = "# comment\n\n  temp_warn_c = 85  \n\tname=a b c\nlast=1";
	struct seen s = { 0 };
	char err[256];

	(void)state;
	assert_int_equal(sigma_kv_parse_buf(conf, strlen(conf), "sigma.conf", record, &s, err, sizeof(err)), 0);
	assert_int_equal(s.n, 3);
	assert_string_equal(s.keys[0], "temp_warn_c");
	assert_string_equal(s.values[0], "85");
	assert_string_equal(s.values[1], "a b c");
	assert_string_equal(s.keys[2], "last");
}

static void test_buf_error_names_line(void **state)
{
	const char *conf = "a=1\n\n# x\nbad=2\n";
	const char nul[] = "a=1\nb\0=2\n";
	struct seen s = { 0 };
	char err[256];

	(void)state;
	assert_int_equal(sigma_kv_parse_buf(conf, strlen(conf), "sigma.conf", record, &s, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "sigma.conf:4: bad is refused");
	assert_int_equal(sigma_kv_parse_buf(nul, sizeof(nul) - 1, "f", record, &s, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "f:2: NUL byte in line");
}

static void test_file(void **state)
{
	char path[] = "/tmp/sigma-test-kv.XXXXXX";
	struct seen s = { 0 };
	char err[256];
	FILE *f;
	int fd;

	(void)state;
	fd = mkstemp(path);
	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	fputs("x=1\ny = two\n", f);
	fclose(f);
	assert_int_equal(sigma_kv_parse_file(path, record, &s, err, sizeof(err)), 0);
	assert_int_equal(s.n, 2);
	assert_string_equal(s.values[1], "two");
	unlink(path);
	assert_int_equal(sigma_kv_parse_file(path, record, &s, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "No such file"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_word),
		cmocka_unit_test(test_word_errors),
		cmocka_unit_test(test_argv_stops_at_first_error),
		cmocka_unit_test(test_buf),
		cmocka_unit_test(test_buf_error_names_line),
		cmocka_unit_test(test_file),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
