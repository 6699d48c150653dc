/*
 * test_trainer_data.c - token files (trainer/data.c): write, validate,
 * batch order, damage refused, and preparing them from text.
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
#include <unistd.h>

#include <cmocka.h>

#include "sigma.h"
#include "damage.h"
#include "scratch.h"
#include "data.h"

static char dir[64];

static int setup(void **state)
{
	(void)state;
	return scratch_make(dir, sizeof(dir), "data");
}

static int teardown(void **state)
{
	(void)state;
	return scratch_remove(dir);
}

static void path_of(char *buf, const char *name)
{
	snprintf(buf, PATH_MAX, "%s/%s", dir, name);
}

static void test_token_file(void **state)
{
	char p[PATH_MAX], err[1024];
	unsigned char tok[1000];
	struct data_file df;
	int32_t a[3 * 16], t1[3 * 16], b[3 * 16], t2[3 * 16];

	(void)state;
	for (int i = 0; i < 1000; i++)
		tok[i] = (unsigned char)(i * 7 % 200);
	path_of(p, "ok.tok");
	assert_int_equal(data_write_bytes(p, tok, sizeof(tok), 256, err,
					  sizeof(err)),
			 0);
	assert_int_equal(data_open(&df, p, err, sizeof(err)), 0);
	assert_int_equal(df.ntokens, 1000);
	assert_int_equal(df.vocab, 256);
	assert_int_equal(df.width, 1);
	assert_int_equal(data_token(&df, 5), 35);
	/* batches: fixed by (seed, step), different across steps */
	data_batch(&df, 9, 4, 3, 16, a, t1);
	data_batch(&df, 9, 4, 3, 16, b, t2);
	assert_memory_equal(a, b, sizeof(a));
	assert_memory_equal(t1, t2, sizeof(t1));
	for (int i = 0; i + 1 < 16; i++)
		assert_int_equal(t1[i], a[i + 1]);
	data_batch(&df, 9, 5, 3, 16, b, t2);
	assert_memory_not_equal(a, b, sizeof(a));
	/* a data-parallel share: sequences [1, 3) of the same batch */
	data_batch_range(&df, 9, 4, 1, 2, 16, b, t2);
	assert_memory_equal(b, a + 16, sizeof(int32_t) * 2 * 16);
	assert_memory_equal(t2, t1 + 16, sizeof(int32_t) * 2 * 16);
	assert_int_equal(data_check_len(&df, 16, err, sizeof(err)), 0);
	assert_int_equal(data_check_len(&df, 999, err, sizeof(err)), -EINVAL);
	data_close(&df);

	/* a vocabulary smaller than a token is refused */
	path_of(p, "small.tok");
	assert_int_equal(data_write_bytes(p, tok, sizeof(tok), 100, err,
					  sizeof(err)),
			 0);
	assert_int_equal(data_open(&df, p, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "outside the vocabulary"));
}

static void test_token_file_damage(void **state)
{
	char p[PATH_MAX], err[1024];
	unsigned char tok[500] = { 0 };
	struct data_file df;
	uint32_t v2 = 2;

	(void)state;
	path_of(p, "d.tok");
#define FRESH()                                                               \
	assert_int_equal(data_write_bytes(p, tok, sizeof(tok), 256, err,      \
					  sizeof(err)),                       \
			 0)
	FRESH();
	assert_int_equal(truncate(p, 64 + 499), 0);
	assert_int_equal(data_open(&df, p, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "truncated"));
	assert_non_null(strstr(err, p));
	FRESH();
	assert_int_equal(truncate(p, 10), 0);
	assert_int_equal(data_open(&df, p, err, sizeof(err)), -EBADMSG);
	FRESH();
	poke(p, 0, "SIGMATOX", 8);
	assert_int_equal(data_open(&df, p, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "magic"));
	FRESH();
	poke(p, 8, &v2, 4);
	assert_int_equal(data_open(&df, p, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "version"));
	FRESH();
	flip_bit(p, 64 + 250);
	assert_int_equal(data_open(&df, p, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "checksum"));
	path_of(p, "missing.tok");
	assert_int_equal(data_open(&df, p, err, sizeof(err)), -ENOENT);
#undef FRESH
}

static void test_prepare(void **state)
{
	char in1[PATH_MAX], in2[PATH_MAX], tr[PATH_MAX], va[PATH_MAX];
	char err[1024];
	const char *inputs[2] = { in1, in2 };
	const char *text = "h\xc3\xa9llo w\xc3\xb6rld, caf\xc3\xa9\n";
	uint64_t nt = 0, nv = 0;
	struct data_file df;

	(void)state;
	path_of(in1, "a.txt");
	path_of(in2, "b.txt");
	path_of(tr, "train.tok");
	path_of(va, "val.tok");
	assert_int_equal(sigma_file_write_atomic(in1, text, strlen(text), 0644),
			 0);
	assert_int_equal(sigma_file_write_atomic(in2, "0123456789", 10, 0644),
			 0);
	assert_int_equal(data_prepare(inputs, 2, tr, va, 0.25, &nt, &nv, err,
				      sizeof(err)),
			 0);
	assert_int_equal(nt + nv, strlen(text) + 10);
	assert_int_equal(nv, (strlen(text) + 10) / 4);
	assert_int_equal(data_open(&df, va, err, sizeof(err)), 0);
	/* the validation part is the tail: ends with the digits */
	assert_int_equal(data_token(&df, df.ntokens - 1), '9');
	data_close(&df);
	assert_int_equal(data_open(&df, tr, err, sizeof(err)), 0);
	assert_int_equal(data_token(&df, 1), 0xc3);
	data_close(&df);
	/* not UTF-8: refused with the offset */
	assert_int_equal(sigma_file_write_atomic(in2, "ab\xff", 3, 0644), 0);
	assert_int_equal(data_prepare(inputs, 2, tr, va, 0.25, &nt, &nv, err,
				      sizeof(err)),
			 -EBADMSG);
	assert_non_null(strstr(err, "offset 2"));
	assert_int_equal(sigma_file_write_atomic(in2, "ab\xc3", 3, 0644), 0);
	assert_int_equal(data_prepare(inputs, 2, tr, va, 0.25, &nt, &nv, err,
				      sizeof(err)),
			 -EBADMSG);
	path_of(in2, "nothere.txt");
	assert_int_equal(data_prepare(inputs, 2, tr, va, 0.25, &nt, &nv, err,
				      sizeof(err)),
			 -ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_token_file),
		cmocka_unit_test(test_token_file_damage),
		cmocka_unit_test(test_prepare),
	};

	sigma_log_init("test", SIGMA_LOG_ERROR);
	return cmocka_run_group_tests(tests, setup, teardown);
}
