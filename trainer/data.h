/*
 * data.h - token files (docs/token-format.md): writing, preparing from UTF-8
 * text, and a memory-mapped reader whose batches are fixed by (seed, step),
 * so a resumed run sees exactly the batches it would have seen.
 */
#ifndef SIGMA_TRAIN_DATA_H
#define SIGMA_TRAIN_DATA_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#define DATA_MAGIC "SIGMATOK"
#define DATA_VERSION 1
#define DATA_HEADER_BYTES 64

struct data_file {
	char path[PATH_MAX];
	void *map; /* whole file, read-only */
	size_t map_len;
	uint32_t vocab;
	uint32_t width; /* bytes per token: 1, 2 or 4 */
	uint64_t ntokens;
	uint64_t checksum; /* FNV-1a 64 of the token bytes */
	const unsigned char *tokens;
};

/*
 * Map and validate a token file: magic, version, header size, width,
 * vocabulary, exact length, checksum, every token < vocab.
 * Returns 0, -ENOENT/-EACCES (cannot open), or -EBADMSG (bad file); err
 * names the file and the problem.
 */
int data_open(struct data_file *df, const char *path, char *err, size_t len);
void data_close(struct data_file *df);

static inline uint32_t data_token(const struct data_file *df, uint64_t i)
{
	const unsigned char *p = df->tokens + i * df->width;

	switch (df->width) {
	case 1: return p[0];
	case 2: return (uint32_t)p[0] | (uint32_t)p[1] << 8;
	default:
		return (uint32_t)p[0] | (uint32_t)p[1] << 8 |
		       (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
	}
}

/*
 * Batch of step `step`: B windows of T + 1 tokens, sequence b starting at
 * rng_hash3(seed, step, b) mod (ntokens - T). tok[B*T] inputs, tgt[B*T]
 * the next tokens. Needs ntokens > T (checked by data_check_len).
 */
void data_batch(const struct data_file *df, uint64_t seed, uint64_t step,
		int B, int T, int32_t *tok, int32_t *tgt);
/*
 * Sequences [first, first + B) of the batch of step `step`, exactly as
 * data_batch draws them for a larger B: a data-parallel rank's share of
 * the global batch, the same whatever the number of ranks.
 */
void data_batch_range(const struct data_file *df, uint64_t seed,
		      uint64_t step, int first, int B, int T, int32_t *tok,
		      int32_t *tgt);
/* 0, or -EINVAL when the file is too short for sequences of T */
int data_check_len(const struct data_file *df, int T, char *err, size_t len);

/* FNV-1a 64 */
uint64_t data_fnv1a(const void *buf, size_t n);

/* Write tokens of one byte each (V <= 256) atomically. 0 or -errno. */
int data_write_bytes(const char *path, const unsigned char *tok, size_t n,
		     uint32_t vocab, char *err, size_t len);

/*
 * Concatenate UTF-8 text files, check they are valid UTF-8, split off the
 * last val_fraction as validation, write both as byte-level token files
 * (V = 256). Returns 0, -ENOENT (an input cannot be read), -EBADMSG (not
 * UTF-8, or too little text), or another -errno (cannot write).
 */
int data_prepare(const char *const *inputs, int ninputs, const char *train,
		 const char *val, double val_fraction, uint64_t *ntrain,
		 uint64_t *nval, char *err, size_t len);

#endif /* SIGMA_TRAIN_DATA_H */
