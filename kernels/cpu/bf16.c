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
		cached = __builtin_cpu_supports("avx512bf16") ? 1 : 0;
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

/* ---- portable path --------------------------------------------------------- */

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
#define BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512bf16")))

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
			s1 = _mm512_dpbf16_ps(s1, (__m512bh)a,
					      (__m512bh)_mm512_loadu_si512(b + 32));
			s2 = _mm512_dpbf16_ps(s2, (__m512bh)a,
					      (__m512bh)_mm512_loadu_si512(b + 64));
			s3 = _mm512_dpbf16_ps(s3, (__m512bh)a,
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

			s = _mm512_dpbf16_ps(s, (__m512bh)a,
					     (__m512bh)_mm512_maskz_loadu_epi16(m32,
										b));
		}
		_mm512_mask_storeu_ps(acc + j, m16, s);
	}
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
		uint32_t *a2 = malloc(sizeof(uint32_t) * (size_t)C2 + 64);
		float *acc = malloc(sizeof(float) * (size_t)OC + 64);

		if (!a2 || !acc)
			abort();
#pragma omp for schedule(static)
		for (int n = 0; n < N; n++) {
			const float *x = in + (size_t)n * C;

			for (int p = 0; p < C2; p++) {
				uint32_t lo = to_bf16(x[2 * p]);
				uint32_t hi = 2 * p + 1 < C ? to_bf16(x[2 * p + 1])
							    : 0;

				a2[p] = lo | hi << 16;
			}
			row_avx(acc, a2, wp, C2, OC);
			bad += finish_row(out + (size_t)n * OC, acc, OC,
					  accumulate);
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
