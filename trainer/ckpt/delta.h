/*
 * delta.h - lossless per-tensor deltas of float32 tensors against a base
 * (differential checkpoints, docs/checkpoint-format.md).
 *
 * Encoding "delta-zigzag-v1" of a tensor x against its base b, element by
 * element, all in 32-bit unsigned arithmetic (wrapping):
 *
 *   key(u)  = u ^ 0x80000000 if the sign bit of u is clear, else ~u
 *             (u: the float's bits; the map orders keys as the floats)
 *   d       = key(bits(x)) - key(bits(b))
 *   stored  = (d << 1) ^ (d's top bit ? 0xffffffff : 0)      (zigzag)
 *
 * so small changes of either sign become small integers, whose high bytes
 * are zero and compress well once byte-shuffled. Every map is a bijection
 * of 32-bit patterns: decoding restores the exact bits of every value,
 * NaN payloads, infinities, denormals and signed zeros included. The
 * compression itself is left to HDF5's shuffle and deflate filters.
 *
 * Pure code: no I/O, no HDF5.
 */
#ifndef SIGMA_TRAIN_DELTA_H
#define SIGMA_TRAIN_DELTA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* how one tensor is stored in a differential checkpoint */
enum delta_kind {
	DELTA_SAME,   /* bit-identical to the base: nothing stored */
	DELTA_ZIGZAG, /* "delta-zigzag-v1" of the base, uint32 */
	DELTA_WHOLE,  /* the tensor itself, float32 */
};

#define DELTA_ENCODING_SAME   "same"
#define DELTA_ENCODING_ZIGZAG "delta-zigzag-v1"
#define DELTA_ENCODING_WHOLE  "whole"

/*
 * A delta is stored only when its estimated compressed size is at most
 * this fraction of the whole tensor's: the saving must exceed the error
 * of the sampled estimate (at most 0.5 points of the ratio on the demo
 * model's large tensors, bench/ckpt-diff) and pay for decoding against
 * the base on restore.
 */
#define DELTA_MARGIN 0.97

/* sampling of large tensors for the estimate: windows x elements */
#define DELTA_SAMPLE_WINDOWS 16
#define DELTA_SAMPLE_WINDOW  4096
#define DELTA_SAMPLE_MAX     (DELTA_SAMPLE_WINDOWS * DELTA_SAMPLE_WINDOW)

/* the order-preserving map of float bits and its inverse */
static inline uint32_t delta_key(uint32_t u)
{
	return (u & 0x80000000u) ? ~u : u ^ 0x80000000u;
}

static inline uint32_t delta_unkey(uint32_t k)
{
	return (k & 0x80000000u) ? k ^ 0x80000000u : ~k;
}

/* out[i] = encoding of cur[i] against base[i]; n elements */
void delta_encode(uint32_t *out, const float *cur, const float *base, size_t n);

/* out[i] = the value whose encoding against base[i] is enc[i]; out may
 * be base itself (decoded in place) but not enc */
void delta_decode(float *out, const uint32_t *enc, const float *base, size_t n);

/* whether a and b hold the same bits (NaN == NaN, -0 != +0) */
bool delta_equal(const float *a, const float *b, size_t n);

/*
 * "mix64-v1": a 64-bit checksum of the bits of n floats, chained through
 * h (start with DELTA_HASH_SEED). The elements are taken in pairs as
 * w = e[2i] | e[2i+1] << 32 (an odd last one alone), each w mixed as
 * h = (h ^ w) * 0x9e3779b97f4a7c15, h ^= h >> 29; at the end n is mixed
 * in the same way. Not cryptographic: it names a state, so that a
 * differential refuses a base that is not the one it was written against.
 */
#define DELTA_HASH_SEED 0x7369676d61636b70ULL /* "sigmackp" */
uint64_t delta_hash(const float *x, size_t n, uint64_t h);

/*
 * Compressed size, in bytes, of n 32-bit words stored as the checkpoint
 * stores them (byte shuffle, deflate); < 0 a -errno.
 */
typedef long (*delta_size_fn)(void *ctx, const uint32_t *words, size_t n);

struct delta_choice {
	enum delta_kind kind;
	size_t sampled; /* elements the estimate looked at (0: SAME) */
	long est_whole, est_delta; /* of the sample, bytes */
};

/*
 * The per-tensor choice: SAME when cur and base hold the same bits, else
 * ZIGZAG when the estimated compressed delta is at most DELTA_MARGIN of
 * the estimated compressed whole tensor, else WHOLE. A tensor of more
 * than DELTA_SAMPLE_MAX elements is estimated on DELTA_SAMPLE_WINDOWS
 * evenly spaced windows. scratch: 2 * min(n, DELTA_SAMPLE_MAX) words.
 * 0, or the estimator's -errno.
 */
int delta_choose(const float *cur, const float *base, size_t n,
		 uint32_t *scratch, delta_size_fn est, void *ctx,
		 struct delta_choice *out);

/* "same", "delta-zigzag-v1", "whole"; and back (-1: unknown) */
const char *delta_kind_name(enum delta_kind k);
int delta_kind_parse(const char *s);

#endif /* SIGMA_TRAIN_DELTA_H */
