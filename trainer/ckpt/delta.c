/*
 * delta.c - lossless per-tensor deltas of float32 tensors (delta.h).
 */
#include "config.h"

#include <string.h>

#include "delta.h"

/* float bits without aliasing trouble; the compiler makes it a load */
static inline uint32_t bits_of(const float *p)
{
	uint32_t u;

	memcpy(&u, p, sizeof(u));
	return u;
}

static inline uint32_t zigzag(uint32_t d)
{
	return (d << 1) ^ ((d & 0x80000000u) ? 0xffffffffu : 0u);
}

static inline uint32_t unzigzag(uint32_t z)
{
	return (z >> 1) ^ (0u - (z & 1u));
}

void delta_encode(uint32_t *out, const float *cur, const float *base, size_t n)
{
	for (size_t i = 0; i < n; i++)
		out[i] = zigzag(delta_key(bits_of(cur + i)) -
				delta_key(bits_of(base + i)));
}

void delta_decode(float *out, const uint32_t *enc, const float *base, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t u = delta_unkey(delta_key(bits_of(base + i)) +
					 unzigzag(enc[i]));

		memcpy(out + i, &u, sizeof(u));
	}
}

bool delta_equal(const float *a, const float *b, size_t n)
{
	return memcmp(a, b, n * sizeof(float)) == 0;
}

static inline uint64_t mix(uint64_t h, uint64_t w)
{
	h = (h ^ w) * 0x9e3779b97f4a7c15ULL;
	return h ^ (h >> 29);
}

uint64_t delta_hash(const float *x, size_t n, uint64_t h)
{
	size_t i = 0;

	for (; i + 1 < n; i += 2)
		h = mix(h, (uint64_t)bits_of(x + i) |
			       (uint64_t)bits_of(x + i + 1) << 32);
	if (i < n)
		h = mix(h, bits_of(x + i));
	return mix(h, (uint64_t)n);
}

/*
 * The sample the estimate looks at: the whole tensor when it is small,
 * else DELTA_SAMPLE_WINDOWS windows spread evenly over it. whole gets the
 * float bits, enc their delta.
 */
static size_t sample(const float *cur, const float *base, size_t n,
		     uint32_t *whole, uint32_t *enc)
{
	if (n <= DELTA_SAMPLE_MAX) {
		memcpy(whole, cur, n * sizeof(float));
		delta_encode(enc, cur, base, n);
		return n;
	}
	for (size_t w = 0; w < DELTA_SAMPLE_WINDOWS; w++) {
		/* window w starts at w/W of the way, the last ends at n */
		size_t at =
		    (n - DELTA_SAMPLE_WINDOW) * w / (DELTA_SAMPLE_WINDOWS - 1);
		size_t o = w * DELTA_SAMPLE_WINDOW;

		memcpy(whole + o, cur + at,
		       DELTA_SAMPLE_WINDOW * sizeof(float));
		delta_encode(enc + o, cur + at, base + at, DELTA_SAMPLE_WINDOW);
	}
	return DELTA_SAMPLE_MAX;
}

int delta_choose(const float *cur, const float *base, size_t n,
		 uint32_t *scratch, delta_size_fn est, void *ctx,
		 struct delta_choice *out)
{
	size_t k;

	memset(out, 0, sizeof(*out));
	if (delta_equal(cur, base, n)) {
		out->kind = DELTA_SAME;
		return 0;
	}
	k = sample(cur, base, n, scratch,
		   scratch + (n < DELTA_SAMPLE_MAX ? n : DELTA_SAMPLE_MAX));
	out->sampled = k;
	out->est_whole = est(ctx, scratch, k);
	if (out->est_whole < 0)
		return (int)out->est_whole;
	out->est_delta = est(ctx, scratch + k, k);
	if (out->est_delta < 0)
		return (int)out->est_delta;
	out->kind =
	    (double)out->est_delta <= DELTA_MARGIN * (double)out->est_whole
		? DELTA_ZIGZAG
		: DELTA_WHOLE;
	return 0;
}

const char *delta_kind_name(enum delta_kind k)
{
	switch (k) {
	case DELTA_SAME:
		return DELTA_ENCODING_SAME;
	case DELTA_ZIGZAG:
		return DELTA_ENCODING_ZIGZAG;
	case DELTA_WHOLE:
		return DELTA_ENCODING_WHOLE;
	}
	return "unknown";
}

int delta_kind_parse(const char *s)
{
	if (!strcmp(s, DELTA_ENCODING_SAME))
		return DELTA_SAME;
	if (!strcmp(s, DELTA_ENCODING_ZIGZAG))
		return DELTA_ZIGZAG;
	if (!strcmp(s, DELTA_ENCODING_WHOLE))
		return DELTA_WHOLE;
	return -1;
}
