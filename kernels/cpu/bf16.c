/*
 * bf16.c - bf16 matrix products on the CPU (kernels/bf16.h).
 *
 * With AVX-512 BF16 (VDPBF16PS) the weights are packed in pairs of rows
 * (the "VNNI" layout: for row pair p and column j, w[2p][j] then
 * w[2p+1][j]), each input row is rounded to bf16 once, and one
 * instruction multiplies 16 columns by a pair of inputs and adds into fp32
 * accumulators. Without it, the same arithmetic runs through the fp32
 * kernels on copies rounded to bf16: a product of two bf16 values is exact
 * in fp32, so only the order of the fp32 additions differs.
 *
 * Every output is rounded to bf16; a non-finite result counts as an
 * overflow. The rows are split over the OpenMP threads; the counts are
 * reduced per call, so they do not depend on the thread count.
 */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#define BF16_X86 1
#endif

#include "bf16.h"
#include "cpu.h"

static uint64_t *bf16_counter;
static int bf16_inject;
static int bf16_portable;

static uint16_t to_bf16(float x)
{
	uint32_t u;

	memcpy(&u, &x, sizeof(u));
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

static float from_bf16(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float x;

	memcpy(&x, &u, sizeof(x));
	return x;
}

float sigma_bf16_round(float x)
{
	return from_bf16(to_bf16(x));
}

void sigma_bf16_force_portable(int on)
{
	bf16_portable = on != 0;
}

int sigma_bf16_native(void)
{
#ifdef BF16_X86
	static int cached = -1;

	if (bf16_portable)
		return 0;
	if (cached < 0) {
		__builtin_cpu_init();
		cached = __builtin_cpu_supports("avx512bf16") &&
			 __builtin_cpu_supports("avx512vl");
	}
	return cached;
#else
	return 0;
#endif
}

static void bf16_begin(uint64_t *overflow, int inject)
{
	bf16_counter = overflow;
	bf16_inject = inject != 0;
}

/*
 * Round the fp32 product row r[OC] to bf16 and write or add it to out;
 * returns how many results are not finite.
 */
static uint64_t finish_row(float *out, const float *r, int OC, int accumulate)
{
	uint64_t bad = 0;

	for (int j = 0; j < OC; j++) {
		float y = sigma_bf16_round(r[j]);

		bad += !isfinite(y);
		if (accumulate)
			out[j] += y;
		else
			out[j] = y;
	}
	return bad;
}

/* the test hook and the counter, once per product */
static void account(float *out, int N, int accumulate, uint64_t bad)
{
	if (bf16_inject && N > 0) {
		out[0] = INFINITY;
		bad++;
		bf16_inject = 0;
	}
	if (bf16_counter)
		*bf16_counter += bad;
	(void)accumulate;
}

/* ---- portable path ------------------------------------------------------ */

static float *rounded_copy(const float *x, size_t n)
{
	float *y = malloc(sizeof(float) * (n ? n : 1));

	if (!y)
		return NULL;
	for (size_t i = 0; i < n; i++)
		y[i] = sigma_bf16_round(x[i]);
	return y;
}

static uint64_t emulated(float *out, const float *in, const float *w, int N,
			 int C, int OC, int accumulate)
{
	float *a = rounded_copy(in, (size_t)N * C);
	float *b = rounded_copy(w, (size_t)C * OC);
	float *r = malloc(sizeof(float) * ((size_t)N * OC + 1));
	uint64_t bad = 0;

	if (!a || !b || !r)
		abort(); /* like the fp32 kernels: no way to report ENOMEM */
	cpu_matmul_forward(r, a, b, N, C, OC, 0);
	for (int n = 0; n < N; n++)
		bad += finish_row(out + (size_t)n * OC, r + (size_t)n * OC, OC,
				  accumulate);
	free(a);
	free(b);
	free(r);
	return bad;
}

/* ---- AVX-512 BF16 -------------------------------------------------------- */

#ifdef BF16_X86
#define BF16_TARGET                                                            \
	__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

/* one output row: acc[j] = sum_p a2[p] . wp[p][j] (pairs), 16 at a time */
BF16_TARGET static void row_avx(float *acc, const uint32_t *a2,
				const uint16_t *wp, int C2, int OC)
{
	int j = 0;

	for (; j + 64 <= OC; j += 64) {
		__m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
		__m512 s2 = _mm512_setzero_ps(), s3 = _mm512_setzero_ps();

		for (int p = 0; p < C2; p++) {
			__m512i a = _mm512_set1_epi32((int)a2[p]);
			const uint16_t *b = wp + ((size_t)p * OC + j) * 2;

			s0 = _mm512_dpbf16_ps(s0, (__m512bh)a,
					      (__m512bh)_mm512_loadu_si512(b));
			s1 = _mm512_dpbf16_ps(
			    s1, (__m512bh)a,
			    (__m512bh)_mm512_loadu_si512(b + 32));
			s2 = _mm512_dpbf16_ps(
			    s2, (__m512bh)a,
			    (__m512bh)_mm512_loadu_si512(b + 64));
			s3 = _mm512_dpbf16_ps(
			    s3, (__m512bh)a,
			    (__m512bh)_mm512_loadu_si512(b + 96));
		}
		_mm512_storeu_ps(acc + j, s0);
		_mm512_storeu_ps(acc + j + 16, s1);
		_mm512_storeu_ps(acc + j + 32, s2);
		_mm512_storeu_ps(acc + j + 48, s3);
	}
	for (; j < OC; j += 16) {
		int rem = OC - j < 16 ? OC - j : 16;
		__mmask16 m16 = (__mmask16)((1u << rem) - 1u);
		__mmask32 m32 = (__mmask32)(rem == 16 ? 0xffffffffu
						      : (1u << (2 * rem)) - 1u);
		__m512 s = _mm512_setzero_ps();

		for (int p = 0; p < C2; p++) {
			__m512i a = _mm512_set1_epi32((int)a2[p]);
			const uint16_t *b = wp + ((size_t)p * OC + j) * 2;

			s = _mm512_dpbf16_ps(
			    s, (__m512bh)a,
			    (__m512bh)_mm512_maskz_loadu_epi16(m32, b));
		}
		_mm512_mask_storeu_ps(acc + j, m16, s);
	}
}

/*
 * Four output rows at once: each weight vector loaded serves four rows
 * and each broadcast input pair four column blocks (16 accumulators).
 */
BF16_TARGET static void rows4_avx(float *acc, const uint32_t *a2,
				  const uint16_t *wp, int C2, int OC)
{
	int j = 0;

	for (; j + 64 <= OC; j += 64) {
		__m512 s[4][4];

		for (int r = 0; r < 4; r++)
			for (int q = 0; q < 4; q++)
				s[r][q] = _mm512_setzero_ps();
		for (int p = 0; p < C2; p++) {
			const uint16_t *b = wp + ((size_t)p * OC + j) * 2;
			__m512i w0 = _mm512_loadu_si512(b);
			__m512i w1 = _mm512_loadu_si512(b + 32);
			__m512i w2 = _mm512_loadu_si512(b + 64);
			__m512i w3 = _mm512_loadu_si512(b + 96);

			for (int r = 0; r < 4; r++) {
				__m512i a = _mm512_set1_epi32(
				    (int)a2[(size_t)r * C2 + p]);

				s[r][0] = _mm512_dpbf16_ps(s[r][0], (__m512bh)a,
							   (__m512bh)w0);
				s[r][1] = _mm512_dpbf16_ps(s[r][1], (__m512bh)a,
							   (__m512bh)w1);
				s[r][2] = _mm512_dpbf16_ps(s[r][2], (__m512bh)a,
							   (__m512bh)w2);
				s[r][3] = _mm512_dpbf16_ps(s[r][3], (__m512bh)a,
							   (__m512bh)w3);
			}
		}
		for (int r = 0; r < 4; r++)
			for (int q = 0; q < 4; q++)
				_mm512_storeu_ps(
				    acc + (size_t)r * OC + j + 16 * q, s[r][q]);
	}
	for (; j < OC; j += 16) {
		int rem = OC - j < 16 ? OC - j : 16;
		__mmask16 m16 = (__mmask16)((1u << rem) - 1u);
		__mmask32 m32 = (__mmask32)(rem == 16 ? 0xffffffffu
						      : (1u << (2 * rem)) - 1u);
		__m512 s[4];

		for (int r = 0; r < 4; r++)
			s[r] = _mm512_setzero_ps();
		for (int p = 0; p < C2; p++) {
			__m512i b = _mm512_maskz_loadu_epi16(
			    m32, wp + ((size_t)p * OC + j) * 2);

			for (int r = 0; r < 4; r++) {
				__m512i a = _mm512_set1_epi32(
				    (int)a2[(size_t)r * C2 + p]);

				s[r] = _mm512_dpbf16_ps(s[r], (__m512bh)a,
							(__m512bh)b);
			}
		}
		for (int r = 0; r < 4; r++)
			_mm512_mask_storeu_ps(acc + (size_t)r * OC + j, m16,
					      s[r]);
	}
}

/*
 * Input row x[C] as bf16 pairs a2[C2]: the row in bf16, zero-padded to
 * even length. VCVTNEPS2BF16 rounds to nearest even like to_bf16 (and
 * treats denormals as zero).
 */
BF16_TARGET static void pack_row(uint32_t *a2, const float *x, int C, int C2)
{
	uint16_t *h = (uint16_t *)a2;
	int k = 0;

	for (; k < C; k += 16) {
		int rem = C - k < 16 ? C - k : 16;
		__mmask16 m = (__mmask16)((1u << rem) - 1u);
		__m512 v = _mm512_maskz_loadu_ps(m, x + k);
		__m256bh b = _mm512_cvtneps_pbh(v);

		_mm256_mask_storeu_epi16(h + k, m, (__m256i)b);
	}
	if (C & 1)
		h[C] = 0;
	(void)C2;
}

/* finish_row with AVX-512: round, count the non-finite, write or add */
BF16_TARGET static uint64_t finish_row_avx(float *out, const float *r, int OC,
					   int accumulate)
{
	const __m512i expo = _mm512_set1_epi32(0x7f800000);
	uint64_t bad = 0;

	for (int j = 0; j < OC; j += 16) {
		int rem = OC - j < 16 ? OC - j : 16;
		__mmask16 m = (__mmask16)((1u << rem) - 1u);
		__m512 v = _mm512_maskz_loadu_ps(m, r + j);
		__m256bh b = _mm512_cvtneps_pbh(v);
		__m512i u =
		    _mm512_slli_epi32(_mm512_cvtepu16_epi32((__m256i)b), 16);
		__m512 y = _mm512_castsi512_ps(u);
		__mmask16 inf = _mm512_mask_cmpeq_epi32_mask(
		    m, _mm512_and_si512(u, expo), expo);

		bad += (uint64_t)__builtin_popcount((unsigned)inf);
		if (accumulate)
			y = _mm512_add_ps(y, _mm512_maskz_loadu_ps(m, out + j));
		_mm512_mask_storeu_ps(out + j, m, y);
	}
	return bad;
}

static uint64_t native(float *out, const float *in, const float *w, int N,
		       int C, int OC, int accumulate)
{
	int C2 = (C + 1) / 2;
	uint16_t *wp = malloc(sizeof(uint16_t) * 2 * (size_t)C2 * OC + 64);
	uint64_t bad = 0;

	if (!wp)
		abort();
	for (int p = 0; p < C2; p++) {
		const float *r0 = w + (size_t)(2 * p) * OC;
		const float *r1 = 2 * p + 1 < C ? r0 + OC : NULL;
		uint16_t *d = wp + (size_t)p * OC * 2;

		for (int j = 0; j < OC; j++) {
			d[2 * j] = to_bf16(r0[j]);
			d[2 * j + 1] = r1 ? to_bf16(r1[j]) : 0;
		}
	}
#pragma omp parallel reduction(+ : bad)
	{
		uint32_t *a2 = malloc(sizeof(uint32_t) * 4 * (size_t)C2 + 64);
		float *acc = malloc(sizeof(float) * 4 * (size_t)OC + 64);
		int NB = (N + 3) / 4;

		if (!a2 || !acc)
			abort();
			/* blocks of four rows; the last block may be shorter */
#pragma omp for schedule(static)
		for (int nb = 0; nb < NB; nb++) {
			int n0 = 4 * nb, rows = N - n0 < 4 ? N - n0 : 4;

			for (int r = 0; r < rows; r++)
				pack_row(a2 + (size_t)r * C2,
					 in + (size_t)(n0 + r) * C, C, C2);
			if (rows == 4) {
				rows4_avx(acc, a2, wp, C2, OC);
			} else {
				for (int r = 0; r < rows; r++)
					row_avx(acc + (size_t)r * OC,
						a2 + (size_t)r * C2, wp, C2,
						OC);
			}
			for (int r = 0; r < rows; r++)
				bad += finish_row_avx(
				    out + (size_t)(n0 + r) * OC,
				    acc + (size_t)r * OC, OC, accumulate);
		}
		free(a2);
		free(acc);
	}
	free(wp);
	return bad;
}
#endif

static uint64_t product(float *out, const float *in, const float *w, int N,
			int C, int OC, int accumulate)
{
	if (N <= 0)
		return 0;
#ifdef BF16_X86
	if (sigma_bf16_native())
		return native(out, in, w, N, C, OC, accumulate);
#endif
	return emulated(out, in, w, N, C, OC, accumulate);
}

static void bf16_matmul_forward(float *out, const float *in, const float *w,
				int N, int C, int OC, int accumulate)
{
	account(out, N, accumulate, product(out, in, w, N, C, OC, accumulate));
}

static void bf16_grouped_matmul_forward(float *out, const float *in,
					const float *w, const int *offs, int G,
					int C, int OC)
{
	uint64_t bad = 0;

	for (int g = 0; g < G; g++) {
		int r0 = offs[g], rows = offs[g + 1] - offs[g];

		bad += product(out + (size_t)r0 * OC, in + (size_t)r0 * C,
			       w + (size_t)g * C * OC, rows, C, OC, 0);
	}
	account(out, offs[G], 0, bad);
}

/* ---- the table ----------------------------------------------------------- */

/* sigma_ops_cpu with the two forward products replaced, filled before
 * main runs so that it follows every change of the fp32 table */
static struct sigma_ops bf16_ops_cpu;

__attribute__((constructor)) static void bf16_fill_table(void)
{
	bf16_ops_cpu = sigma_ops_cpu;
	bf16_ops_cpu.name = "cpu-bf16";
	bf16_ops_cpu.matmul_forward = bf16_matmul_forward;
	bf16_ops_cpu.grouped_matmul_forward = bf16_grouped_matmul_forward;
}

const struct sigma_bf16 sigma_bf16_cpu = {
    .name = "cpu-bf16",
    .ops = &bf16_ops_cpu,
    .begin = bf16_begin,
};
