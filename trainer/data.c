/*
 * data.c - token files: prepare, write, map, validate, draw batches.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sigma.h"
#include "data.h"
#include "rng.h"

#define PREPARE_MAX_INPUT ((size_t)1 << 32) /* 4 GiB per input file */

uint64_t data_fnv1a(const void *buf, size_t n)
{
	const unsigned char *p = buf;
	uint64_t h = 0xcbf29ce484222325ULL;

	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

static uint32_t get32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static uint64_t get64(const unsigned char *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

static void put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v)
{
	put32(p, (uint32_t)v);
	put32(p + 4, (uint32_t)(v >> 32));
}

int data_open(struct data_file *df, const char *path, char *err, size_t len)
{
	const unsigned char *h;
	struct stat st;
	uint32_t version, hbytes;
	uint64_t want;
	int fd, rc;

	memset(df, 0, sizeof(*df));
	sigma_strlcpy(df->path, path, sizeof(df->path));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return sigma_set_err(err, len, errno, "%s: cannot open: %s",
				     path, strerror(errno));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return sigma_set_err(err, len, EBADMSG,
				     "%s: not a regular file", path);
	}
	if ((size_t)st.st_size < DATA_HEADER_BYTES) {
		close(fd);
		return sigma_set_err(err, len, EBADMSG,
				     "%s: truncated: %lld bytes, shorter than the %d-byte header",
				     path, (long long)st.st_size,
				     DATA_HEADER_BYTES);
	}
	df->map_len = (size_t)st.st_size;
	df->map = mmap(NULL, df->map_len, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (df->map == MAP_FAILED) {
		df->map = NULL;
		return sigma_set_err(err, len, errno, "%s: cannot map: %s",
				     path, strerror(errno));
	}
	h = df->map;
	rc = -EBADMSG;
	if (memcmp(h, DATA_MAGIC, 8)) {
		sigma_set_err(err, len, EBADMSG,
			      "%s: bad magic (not a sigma token file)", path);
		goto out_unmap;
	}
	version = get32(h + 8);
	hbytes = get32(h + 12);
	df->vocab = get32(h + 16);
	df->width = get32(h + 20);
	df->ntokens = get64(h + 24);
	df->checksum = get64(h + 32);
	if (version != DATA_VERSION) {
		sigma_set_err(err, len, EBADMSG,
			      "%s: format version %u, this program reads %d",
			      path, version, DATA_VERSION);
		goto out_unmap;
	}
	if (hbytes != DATA_HEADER_BYTES) {
		sigma_set_err(err, len, EBADMSG, "%s: header size %u, want %d",
			      path, hbytes, DATA_HEADER_BYTES);
		goto out_unmap;
	}
	if (df->width != 1 && df->width != 2 && df->width != 4) {
		sigma_set_err(err, len, EBADMSG,
			      "%s: token width %u is not 1, 2 or 4", path,
			      df->width);
		goto out_unmap;
	}
	/* tokens are int32 to the model: a 4-byte vocabulary stops at 2^31 */
	if (df->vocab < 2 ||
	    (df->width < 4 && df->vocab > (1u << (8 * df->width))) ||
	    df->vocab > 0x7fffffffu) {
		sigma_set_err(err, len, EBADMSG,
			      "%s: vocabulary %u does not fit %u-byte tokens",
			      path, df->vocab, df->width);
		goto out_unmap;
	}
	want = (df->map_len - DATA_HEADER_BYTES) / df->width;
	if (df->ntokens > want ||
	    DATA_HEADER_BYTES + df->ntokens * df->width != df->map_len) {
		sigma_set_err(err, len, EBADMSG,
			      "%s: truncated or padded: header says %llu tokens, the file holds %zu bytes",
			      path, (unsigned long long)df->ntokens,
			      df->map_len);
		goto out_unmap;
	}
	df->tokens = h + DATA_HEADER_BYTES;
	if (data_fnv1a(df->tokens, df->ntokens * df->width) != df->checksum) {
		sigma_set_err(err, len, EBADMSG,
			      "%s: checksum mismatch: the tokens are damaged",
			      path);
		goto out_unmap;
	}
	for (uint64_t i = 0; df->width > 1 && i < df->ntokens; i++) {
		if (data_token(df, i) >= df->vocab) {
			sigma_set_err(err, len, EBADMSG,
				      "%s: token %llu = %u is outside the vocabulary %u",
				      path, (unsigned long long)i,
				      data_token(df, i), df->vocab);
			goto out_unmap;
		}
	}
	if (df->width == 1 && df->vocab < 256) {
		for (uint64_t i = 0; i < df->ntokens; i++) {
			if (df->tokens[i] >= df->vocab) {
				sigma_set_err(err, len, EBADMSG,
					      "%s: token %llu = %u is outside the vocabulary %u",
					      path, (unsigned long long)i,
					      df->tokens[i], df->vocab);
				goto out_unmap;
			}
		}
	}
	return 0;

out_unmap:
	munmap(df->map, df->map_len);
	df->map = NULL;
	return rc;
}

void data_close(struct data_file *df)
{
	if (df && df->map) {
		munmap(df->map, df->map_len);
		df->map = NULL;
	}
}

int data_check_len(const struct data_file *df, int T, char *err, size_t len)
{
	if (df->ntokens <= (uint64_t)T + 1)
		return sigma_set_err(err, len, EINVAL,
				     "%s: %llu tokens, too few for sequences of %d",
				     df->path, (unsigned long long)df->ntokens,
				     T);
	return 0;
}

void data_batch(const struct data_file *df, uint64_t seed, uint64_t step,
		int B, int T, int32_t *tok, int32_t *tgt)
{
	data_batch_range(df, seed, step, 0, B, T, tok, tgt);
}

void data_batch_range(const struct data_file *df, uint64_t seed,
		      uint64_t step, int first, int B, int T, int32_t *tok,
		      int32_t *tgt)
{
	uint64_t span = df->ntokens - (uint64_t)T;

	for (int b = 0; b < B; b++) {
		uint64_t start = rng_hash3(seed, step,
					   (uint64_t)first + (uint64_t)b) %
				 span;

		for (int t = 0; t < T; t++) {
			tok[b * T + t] = (int32_t)data_token(df, start + t);
			tgt[b * T + t] = (int32_t)data_token(df, start + t + 1);
		}
	}
}

int data_write_bytes(const char *path, const unsigned char *tok, size_t n,
		     uint32_t vocab, char *err, size_t len)
{
	unsigned char *buf;
	int rc;

	if (vocab < 2 || vocab > 256)
		return sigma_set_err(err, len, EINVAL,
				     "vocabulary %u does not fit one byte",
				     vocab);
	buf = malloc(DATA_HEADER_BYTES + n);
	if (!buf)
		return sigma_set_err(err, len, ENOMEM, "out of memory");
	memset(buf, 0, DATA_HEADER_BYTES);
	memcpy(buf, DATA_MAGIC, 8);
	put32(buf + 8, DATA_VERSION);
	put32(buf + 12, DATA_HEADER_BYTES);
	put32(buf + 16, vocab);
	put32(buf + 20, 1);
	put64(buf + 24, n);
	put64(buf + 32, data_fnv1a(tok, n));
	memcpy(buf + DATA_HEADER_BYTES, tok, n);
	rc = sigma_file_write_atomic(path, buf, DATA_HEADER_BYTES + n, 0644);
	free(buf);
	if (rc)
		return sigma_set_err(err, len, -rc, "%s: cannot write: %s",
				     path, strerror(-rc));
	return 0;
}

/* offset of the first byte that is not well-formed UTF-8, or n */
static size_t utf8_bad(const unsigned char *s, size_t n)
{
	size_t i = 0;

	while (i < n) {
		unsigned char c = s[i];
		size_t k;
		uint32_t cp;

		if (c < 0x80) {
			i++;
			continue;
		} else if (c >= 0xc2 && c <= 0xdf) {
			k = 1, cp = c & 0x1f;
		} else if (c >= 0xe0 && c <= 0xef) {
			k = 2, cp = c & 0x0f;
		} else if (c >= 0xf0 && c <= 0xf4) {
			k = 3, cp = c & 0x07;
		} else {
			return i;
		}
		if (i + k >= n)
			return i;
		for (size_t j = 1; j <= k; j++) {
			if ((s[i + j] & 0xc0) != 0x80)
				return i;
			cp = cp << 6 | (s[i + j] & 0x3f);
		}
		/* overlong, surrogate or beyond U+10FFFF */
		if ((k == 2 && cp < 0x800) || (k == 3 && cp < 0x10000) ||
		    (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
			return i;
		i += k + 1;
	}
	return n;
}

int data_prepare(const char *const *inputs, int ninputs, const char *train,
		 const char *val, double val_fraction, uint64_t *ntrain,
		 uint64_t *nval, char *err, size_t len)
{
	unsigned char *all = NULL;
	size_t total = 0, nv, nt;
	int rc = 0;

	if (ninputs < 1)
		return sigma_set_err(err, len, EINVAL, "no input files");
	if (!(val_fraction > 0.0 && val_fraction < 1.0))
		return sigma_set_err(err, len, EINVAL,
				     "validation fraction %g is not in (0, 1)",
				     val_fraction);
	for (int i = 0; i < ninputs; i++) {
		char *buf = NULL;
		size_t n = 0, bad;
		unsigned char *grown;

		rc = sigma_file_read(inputs[i], PREPARE_MAX_INPUT, &buf, &n);
		if (rc) {
			sigma_set_err(err, len, rc == -EFBIG ? EBADMSG : -rc,
				      "%s: cannot read: %s", inputs[i],
				      strerror(-rc));
			rc = rc == -EFBIG ? -EBADMSG : rc;
			goto out;
		}
		bad = utf8_bad((unsigned char *)buf, n);
		if (bad < n) {
			rc = sigma_set_err(err, len, EBADMSG,
					   "%s: not UTF-8 text: invalid byte 0x%02x at offset %zu",
					   inputs[i],
					   ((unsigned char *)buf)[bad], bad);
			free(buf);
			goto out;
		}
		grown = realloc(all, total + n + 1);
		if (!grown) {
			free(buf);
			rc = sigma_set_err(err, len, ENOMEM, "out of memory");
			goto out;
		}
		all = grown;
		memcpy(all + total, buf, n);
		total += n;
		free(buf);
	}
	nv = (size_t)((double)total * val_fraction);
	nt = total - nv;
	if (nv < 2 || nt < 2) {
		rc = sigma_set_err(err, len, EBADMSG,
				   "only %zu bytes of text: too little to split",
				   total);
		goto out;
	}
	rc = data_write_bytes(train, all, nt, 256, err, len);
	if (rc)
		goto out;
	rc = data_write_bytes(val, all + nt, nv, 256, err, len);
	if (rc)
		goto out;
	*ntrain = nt;
	*nval = nv;
out:
	free(all);
	return rc;
}
