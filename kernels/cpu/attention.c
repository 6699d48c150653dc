/*
 * attention.c - causal softmax attention, one OpenMP task per (batch, head),
 * the four products of each through single-threaded sgemm.
 *
 * The full T x T score matrix is multiplied (BLAS has no triangular product
 * of this shape); the upper triangle is then masked to probability 0.
 */
#include <cblas.h>
#include <math.h>

#include "cpu.h"

void cpu_attention_forward(float *out, float *att, const float *q,
			   const float *k, const float *v, int B, int T, int H,
			   int Dh)
{
	int D = H * Dh;
	float scale = 1.0f / sqrtf((float)Dh);

#pragma omp parallel for schedule(dynamic, 1)
	for (int bh = 0; bh < B * H; bh++) {
		int b = bh / H, h = bh % H;
		size_t base = (size_t)b * T * D + (size_t)h * Dh;
		float *s = att + (size_t)bh * T * T; /* [T, T] */

		/* s = q k^T / sqrt(Dh) */
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, Dh,
			    scale, q + base, D, k + base, D, 0.0f, s, T);
		for (int i = 0; i < T; i++) {
			float *row = s + (size_t)i * T;
			float mx = row[0], sum = 0.0f, inv;

			for (int j = 1; j <= i; j++)
				mx = row[j] > mx ? row[j] : mx;
			for (int j = 0; j <= i; j++) {
				row[j] = expf(row[j] - mx);
				sum += row[j];
			}
			inv = 1.0f / sum;
			for (int j = 0; j <= i; j++)
				row[j] *= inv;
			for (int j = i + 1; j < T; j++)
				row[j] = 0.0f;
		}
		/* out = att v */
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, Dh, T,
			    1.0f, s, T, v + base, D, 0.0f, out + base, D);
	}
}

void cpu_attention_backward(float *dq, float *dk, float *dv, float *scratch,
			    const float *dout, const float *q, const float *k,
			    const float *v, const float *att, int B, int T,
			    int H, int Dh)
{
	int D = H * Dh;
	float scale = 1.0f / sqrtf((float)Dh);

#pragma omp parallel for schedule(dynamic, 1)
	for (int bh = 0; bh < B * H; bh++) {
		int b = bh / H, h = bh % H;
		size_t base = (size_t)b * T * D + (size_t)h * Dh;
		const float *p = att + (size_t)bh * T * T;
		float *ds = scratch + (size_t)bh * T * T;

		/* dp = dout v^T */
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, Dh,
			    1.0f, dout + base, D, v + base, D, 0.0f, ds, T);
		/* dv = p^T dout */
		cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, Dh, T,
			    1.0f, p, T, dout + base, D, 0.0f, dv + base, D);
		/* ds = p * (dp - sum_j p dp), masked entries stay 0 */
		for (int i = 0; i < T; i++) {
			const float *pr = p + (size_t)i * T;
			float *dr = ds + (size_t)i * T;
			float dot = 0.0f;

			for (int j = 0; j <= i; j++)
				dot += pr[j] * dr[j];
			for (int j = 0; j <= i; j++)
				dr[j] = pr[j] * (dr[j] - dot);
			for (int j = i + 1; j < T; j++)
				dr[j] = 0.0f;
		}
		/* dq = ds k / sqrt(Dh); dk = ds^T q / sqrt(Dh) */
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, Dh, T,
			    scale, ds, T, k + base, D, 0.0f, dq + base, D);
		cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, Dh, T,
			    scale, ds, T, q + base, D, 0.0f, dk + base, D);
	}
}
