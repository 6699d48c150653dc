/* test_lib_str.c - bounded copies and whole-string number parsing. */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>

#include <cmocka.h>

#include "sigma.h"

static void test_strlcpy_truncates_and_terminates(void **state)
{
	char buf[4];

	(void)state;
	assert_int_equal(sigma_strlcpy(buf, "abcdef", sizeof(buf)), 6);
	assert_string_equal(buf, "abc");
	assert_int_equal(sigma_strlcpy(buf, "ab", sizeof(buf)), 2);
	assert_string_equal(buf, "ab");
}

static void test_snprintf_reports_truncation(void **state)
{
	char buf[8];

	(void)state;
	assert_int_equal(sigma_snprintf(buf, sizeof(buf), "%s", "1234567"), 0);
	assert_int_equal(sigma_snprintf(buf, sizeof(buf), "%s", "12345678"),
			 -ENAMETOOLONG);
}

static void test_parse_long(void **state)
{
	long v = 0;

	(void)state;
	assert_int_equal(sigma_parse_long("42", 0, 100, &v), 0);
	assert_int_equal(v, 42);
	assert_int_equal(sigma_parse_long("-1", -5, 5, &v), 0);
	assert_int_equal(v, -1);
	assert_int_equal(sigma_parse_long("101", 0, 100, &v), -ERANGE);
	assert_int_equal(sigma_parse_long("-1", 0, 100, &v), -ERANGE);
	assert_int_equal(sigma_parse_long("99999999999999999999", 0, LONG_MAX, &v), -ERANGE);
	assert_int_equal(sigma_parse_long("", 0, 100, &v), -EINVAL);
	assert_int_equal(sigma_parse_long(" 4", 0, 100, &v), -EINVAL);
	assert_int_equal(sigma_parse_long("4x", 0, 100, &v), -EINVAL);
	assert_int_equal(sigma_parse_long("0x10", 0, 100, &v), -EINVAL);
	assert_int_equal(sigma_parse_long(NULL, 0, 100, &v), -EINVAL);
	assert_int_equal(v, -1); /* untouched by failures */
}

static void test_parse_double(void **state)
{
	double v = 0;

	(void)state;
	assert_int_equal(sigma_parse_double("2.5e-3", 0, 1, &v), 0);
	assert_true(v == 2.5e-3);
	assert_int_equal(sigma_parse_double("nan", 0, 1, &v), -EINVAL);
	assert_int_equal(sigma_parse_double("1.5", 0, 1, &v), -ERANGE);
	assert_int_equal(sigma_parse_double("1e999", 0, 1e300, &v), -ERANGE);
	assert_int_equal(sigma_parse_double("1.0 ", 0, 2, &v), -EINVAL);
}

static void test_parse_bool(void **state)
{
	bool b = false;

	(void)state;
	assert_int_equal(sigma_parse_bool("YES", &b), 0);
	assert_true(b);
	assert_int_equal(sigma_parse_bool("off", &b), 0);
	assert_false(b);
	assert_int_equal(sigma_parse_bool("maybe", &b), -EINVAL);
	assert_int_equal(sigma_parse_bool("", &b), -EINVAL);
}

static void test_list(void **state)
{
	char l[12] = "";

	(void)state;
	assert_int_equal(sigma_list_count(l), 0);
	assert_int_equal(sigma_list_add(l, sizeof(l), "n1"), 0);
	assert_int_equal(sigma_list_add(l, sizeof(l), "n10"), 0);
	assert_int_equal(sigma_list_add(l, sizeof(l), "n1"), 0); /* kept once */
	assert_string_equal(l, "n1,n10");
	assert_int_equal(sigma_list_add(l, sizeof(l), "n2"), 0);
	/* "n1,n10,n2,n3" needs 13 bytes: refused, the list unchanged */
	assert_int_equal(sigma_list_add(l, sizeof(l), "n3"), -ENAMETOOLONG);
	assert_string_equal(l, "n1,n10,n2");
	assert_int_equal(sigma_list_count(l), 3);
	assert_true(sigma_list_has(l, "n10") && !sigma_list_has(l, "n"));
	sigma_list_del(l, "n1"); /* n10 is another word */
	assert_string_equal(l, "n10,n2");
	sigma_list_del(l, "n2");
	assert_string_equal(l, "n10");
	sigma_list_del(l, "n9");
	assert_string_equal(l, "n10");
	sigma_list_del(l, "n10");
	assert_string_equal(l, "");
	strcpy(l, "a,,b,a");
	sigma_list_del(l, "a");
	assert_string_equal(l, "b");
}

static void test_parse_enum(void **state)
{
	static const char *const levels[] = { "off", "quick", "full", NULL };
	char buf[32];

	(void)state;
	assert_int_equal(sigma_parse_enum("full", levels), 2);
	assert_int_equal(sigma_parse_enum("Full", levels), -EINVAL);
	assert_string_equal(sigma_enum_list(levels, buf, sizeof(buf)), "off|quick|full");
	assert_string_equal(sigma_enum_list(levels, buf, 8), "off");
}

static void test_escape(void **state)
{
	char out[32];

	(void)state;
	assert_string_equal(sigma_escape("plain n1,n2", out, sizeof(out)),
			    "plain n1,n2");
	assert_string_equal(sigma_escape("a\nb\x1b[2Jc\\", out, sizeof(out)),
			    "a\\x0ab\\x1b[2Jc\\x5c");
	/* truncated, never a half escape, always terminated */
	assert_string_equal(sigma_escape("abcd\n", out, 7), "abcd");
	assert_string_equal(sigma_escape(NULL, out, sizeof(out)), "");
}

static void test_format_duration(void **state)
{
	char out[24];

	(void)state;
	assert_string_equal(sigma_format_duration(0, out, sizeof(out)), "0s");
	assert_string_equal(sigma_format_duration(45, out, sizeof(out)), "45s");
	assert_string_equal(sigma_format_duration(60, out, sizeof(out)),
			    "1m00s");
	assert_string_equal(sigma_format_duration(192, out, sizeof(out)),
			    "3m12s");
	assert_string_equal(sigma_format_duration(3599, out, sizeof(out)),
			    "59m59s");
	assert_string_equal(sigma_format_duration(7500, out, sizeof(out)),
			    "2h05m");
	assert_string_equal(sigma_format_duration(86399, out, sizeof(out)),
			    "23h59m");
	assert_string_equal(
	    sigma_format_duration(3 * 86400 + 4 * 3600 + 59, out, sizeof(out)),
	    "3d04h");
	assert_string_equal(sigma_format_duration(-5, out, sizeof(out)), "0s");
	/* the longest there is fits 24 bytes */
	assert_string_equal(sigma_format_duration(INT64_MAX, out, sizeof(out)),
			    "106751991167300d15h");
	assert_string_equal(sigma_format_duration(192, out, 3), "3m");
}

static void test_format_time(void **state)
{
	char out[64];

	(void)state;
	setenv("TZ", "UTC", 1);
	tzset();
	assert_string_equal(sigma_format_time(1796108127, out, sizeof(out)),
			    "2026-12-01 06:55:27 UTC");
	setenv("TZ", "CET-1CEST,M3.5.0,M10.5.0/3", 1);
	tzset();
	assert_string_equal(sigma_format_time(1796108127, out, sizeof(out)),
			    "2026-12-01 07:55:27 CET");
	/* too small: the epoch, marked, rather than half a date */
	assert_string_equal(sigma_format_time(5, out, 8), "@5");
	unsetenv("TZ");
	tzset();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_escape),
		cmocka_unit_test(test_format_duration),
		cmocka_unit_test(test_format_time),
		cmocka_unit_test(test_strlcpy_truncates_and_terminates),
		cmocka_unit_test(test_snprintf_reports_truncation),
		cmocka_unit_test(test_parse_long),
		cmocka_unit_test(test_parse_double),
		cmocka_unit_test(test_parse_bool),
		cmocka_unit_test(test_parse_enum),
		cmocka_unit_test(test_list),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
