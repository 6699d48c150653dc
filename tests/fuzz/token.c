/*
 * token.c - the trainer's token files (trainer/data.c data_open, with the
 * batches drawn from them) and the text it makes them from (data_prepare:
 * UTF-8 check, split, write). The input is a token file, and the same
 * bytes as a text file.
 *
 * FUZZ_SOURCES: trainer/data.c lib/str.c lib/log.c lib/file.c
 *
 * To get past the checksum and the length, two bits of header byte 40 (in
 * the reserved part of the header, which data_open does not read) repair
 * the input before it is written: bit 0 sets the token count from the
 * length, bit 1 the checksum from the tokens.
 *
 * Invariants:
 * - data_open accepts exactly the files docs/token-format.md describes
 *   (checked by an independent reader of the header): magic, version 1,
 *   a 64-byte header, width 1, 2 or 4, a vocabulary of at least 2 that
 *   fits the width, the exact length, the FNV-1a checksum, every token
 *   below the vocabulary; anything else is -EBADMSG with a message, and
 *   nothing stays mapped;
 * - every batch drawn from an accepted file holds tokens below the
 *   vocabulary, each target the token after its input;
 * - data_prepare accepts text exactly when it is well-formed UTF-8 (an
 *   independent decoder: no overlong form, surrogate, or code point past
 *   U+10FFFF) long enough to split, and the two files it writes open
 *   cleanly and hold the text, split where it said.
 */
#include "fuzz.h"

#include <sys/mman.h>

#include "data.h"

static char tok_path[512], txt_path[512], train_path[512], val_path[512];

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static uint64_t le64(const uint8_t *p)
{
	return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t fnv(const uint8_t *p, size_t n)
{
	uint64_t h = 14695981039346656037ULL;

	while (n--) {
		h ^= *p++;
		h *= 1099511628211ULL;
	}
	return h;
}

/* docs/token-format.md, read independently of data.c */
static bool reference_valid(const uint8_t *f, size_t size)
{
	uint32_t vocab, width;
	uint64_t n;

	if (size < 64 || memcmp(f, "SIGMATOK", 8) || le32(f + 8) != 1 ||
	    le32(f + 12) != 64)
		return false;
	vocab = le32(f + 16);
	width = le32(f + 20);
	n = le64(f + 24);
	if (width != 1 && width != 2 && width != 4)
		return false;
	/* tokens are int32 to the model: no vocabulary past 2^31 - 1 */
	if (vocab < 2 || (width == 1 && vocab > 256) ||
	    (width == 2 && vocab > 65536) || vocab > 0x7fffffffu)
		return false;
	if ((size - 64) % width || (size - 64) / width != n)
		return false;
	if (fnv(f + 64, size - 64) != le64(f + 32))
		return false;
	for (uint64_t i = 0; i < n; i++) {
		uint32_t t = 0;

		for (uint32_t b = 0; b < width; b++)
			t |= (uint32_t)f[64 + i * width + b] << (8 * b);
		if (t >= vocab)
			return false;
	}
	return true;
}

static void fuzz_token_file(const uint8_t *data, size_t size)
{
	struct data_file df;
	char err[512];
	uint8_t *f = malloc(size ? size : 1);
	bool want;
	int rc;

	if (!f)
		abort();
	memcpy(f, data, size);
	if (size >= 64) {
		uint32_t width = le32(f + 20);

		if ((f[40] & 1) && (width == 1 || width == 2 || width == 4))
			put64(f + 24, (size - 64) / width);
		if (f[40] & 2)
			put64(f + 32, fnv(f + 64, size - 64));
	}
	want = reference_valid(f, size);
	fuzz_write_file(tok_path, f, size);
	memset(err, 0x55, sizeof(err));
	rc = data_open(&df, tok_path, err, sizeof(err));
	CHECK((rc == 0) == want);
	if (rc) {
		CHECK(rc == -EBADMSG);
		CHECK_ERR(err, sizeof(err));
		CHECK(df.map == NULL);
		free(f);
		return;
	}
	CHECK(df.map && df.map_len == size);
	CHECK(df.width == 1 || df.width == 2 || df.width == 4);
	CHECK(df.tokens == (const unsigned char *)df.map + DATA_HEADER_BYTES);
	CHECK(DATA_HEADER_BYTES + df.ntokens * df.width == size);
	for (uint64_t i = 0; i < df.ntokens; i++)
		CHECK(data_token(&df, i) < df.vocab);

	/* batches of sequences of T, for every T data_check_len allows
	 * near the file's length: in bounds (ASan), targets shifted by one */
	for (int c = 0; c < 5; c++) {
		long T = c == 0 ? 1 : c == 1 ? 8 : (long)df.ntokens - 4 + c;
		int32_t tok[3 * 64], tgt[3 * 64];
		const int B = 3;

		if (T < 1 || T > 64 ||
		    data_check_len(&df, (int)T, err, sizeof(err)) != 0)
			continue;
		CHECK(df.ntokens > (uint64_t)T);
		for (uint64_t step = 0; step < 3; step++) {
			data_batch(&df, le64(f + 48), step, B, (int)T, tok, tgt);
			for (int i = 0; i < B * T; i++) {
				CHECK(tok[i] >= 0 && (uint32_t)tok[i] < df.vocab);
				CHECK(tgt[i] >= 0 && (uint32_t)tgt[i] < df.vocab);
				if (i % T != T - 1)
					CHECK(tgt[i] == tok[i + 1]);
			}
		}
	}
	data_close(&df);
	CHECK(df.map == NULL);
	free(f);
}

/* ---- text ----------------------------------------------------------------- */

/* well-formed UTF-8 per the Unicode standard's table 3-7 */
static bool reference_utf8(const uint8_t *s, size_t n)
{
	size_t i = 0;

	while (i < n) {
		uint8_t c = s[i];
		uint8_t lo = 0x80, hi = 0xbf;
		int more;

		if (c <= 0x7f) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf)
			more = 1;
		else if (c == 0xe0)
			more = 2, lo = 0xa0;
		else if ((c >= 0xe1 && c <= 0xec) || c == 0xee || c == 0xef)
			more = 2;
		else if (c == 0xed)
			more = 2, hi = 0x9f;
		else if (c == 0xf0)
			more = 3, lo = 0x90;
		else if (c >= 0xf1 && c <= 0xf3)
			more = 3;
		else if (c == 0xf4)
			more = 3, hi = 0x8f;
		else
			return false;
		if (n - i <= (size_t)more)
			return false;
		if (s[i + 1] < lo || s[i + 1] > hi)
			return false;
		for (int k = 2; k <= more; k++)
			if (s[i + k] < 0x80 || s[i + k] > 0xbf)
				return false;
		i += (size_t)more + 1;
	}
	return true;
}

static void check_part(const char *path, const uint8_t *want, size_t n)
{
	struct data_file df;
	char err[512];

	CHECK(data_open(&df, path, err, sizeof(err)) == 0);
	CHECK(df.width == 1 && df.vocab == 256 && df.ntokens == n);
	CHECK(!memcmp(df.tokens, want, n));
	data_close(&df);
}

static void fuzz_text(const uint8_t *data, size_t size)
{
	const char *inputs[1] = {txt_path};
	uint64_t ntrain = 0, nval = 0;
	size_t nv = (size_t)((double)size * 0.25), nt = size - nv;
	bool want = reference_utf8(data, size) && nv >= 2 && nt >= 2;
	char err[512];
	int rc;

	fuzz_write_file(txt_path, data, size);
	unlink(train_path);
	unlink(val_path);
	memset(err, 0x55, sizeof(err));
	rc = data_prepare(inputs, 1, train_path, val_path, 0.25, &ntrain,
			  &nval, err, sizeof(err));
	CHECK((rc == 0) == want);
	if (rc) {
		CHECK(rc == -EBADMSG);
		CHECK_ERR(err, sizeof(err));
		return;
	}
	CHECK(ntrain == nt && nval == nv);
	check_part(train_path, data, nt);
	check_part(val_path, data + nt, nv);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *dir;

	(void)argc;
	(void)argv;
	fuzz_quiet();
	dir = fuzz_scratch();
	snprintf(tok_path, sizeof(tok_path), "%s/input.tok", dir);
	snprintf(txt_path, sizeof(txt_path), "%s/input.txt", dir);
	snprintf(train_path, sizeof(train_path), "%s/train.tok", dir);
	snprintf(val_path, sizeof(val_path), "%s/val.tok", dir);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_token_file(data, size);
	fuzz_text(data, size);
	return 0;
}
