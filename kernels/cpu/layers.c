/*
 * layers.c - embedding, RMSNorm, rotary embedding, softmax and SwiGLU on the
 * CPU: plain loops the compiler vectorises, split over rows with OpenMP.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"

#define RMS_EPS 1e-5f

void cpu_embedding_forward(float *out, const int32_t *tok, const float *emb,
			   int N, int D)
{
#pragma omp parallel for schedule(static)
	for (int n = 0; n < N; n++)
		memcpy(out + (size_t)n * D, emb + (size_t)tok[n] * D,
		       sizeof(float) * D);
}

void cpu_embedding_backward(float *demb, const float *dout,
			    const int32_t *tok, int N, int V, int D)
{
	/*
	 * Split over columns, tokens in order within each: no two threads
	 * touch the same element and the sum order is fixed.
	 */
	int cw = 16, nc = (D + cw - 1) / cw;

	(void)V;
#pragma omp parallel for schedule(static)
	for (int c = 0; c < nc; c++) {
		int d0 = c * cw, d1 = d0 + cw < D ? d0 + cw : D;

		for (int n = 0; n < N; n++) {
			float *row = demb + (size_t)tok[n] * D;
			const float *g = dout + (size_t)n * D;

			for (int d = d0; d < d1; d++)
				row[d] += g[d];
		}
	}
}

void cpu_rmsnorm_forward(float *out, float *rstd, const float *x,
			 const float *g, int N, int D)
{
#pragma omp parallel for schedule(static)
	for (int n = 0; n < N; n++) {
		const float *xr = x + (size_t)n * D;
		float *o = out + (size_t)n * D;
		float ss = 0.0f, r;

		for (int d = 0; d < D; d++)
			ss += xr[d] * xr[d];
		r = 1.0f / sqrtf(ss / (float)D + RMS_EPS);
		rstd[n] = r;
		for (int d = 0; d < D; d++)
			o[d] = xr[d] * r * g[d];
	}
}

void cpu_rmsnorm_backward(float *dx, float *dg, const float *dout,
			  const float *x, const float *g, const float *rstd,
			  int N, int D)
{
	int cw = 16, nc = (D + cw - 1) / cw;

#pragma omp parallel
	{
#pragma omp for schedule(static)
		for (int n = 0; n < N; n++) {
			const float *xr = x + (size_t)n * D;
			const float *dr = dout + (size_t)n * D;
			float *dxr = dx + (size_t)n * D;
			float r = rstd[n], dot = 0.0f, c;

			/* dot = sum_d dout*g*x */
			for (int d = 0; d < D; d++)
				dot += dr[d] * g[d] * xr[d];
			c = r * r * r * dot / (float)D;
			for (int d = 0; d < D; d++)
				dxr[d] += r * dr[d] * g[d] - c * xr[d];
		}
		/* dg[d] += sum_n dout * x * rstd, columns split, rows in order */
#pragma omp for schedule(static)
		for (int c = 0; c < nc; c++) {
			int d0 = c * cw, d1 = d0 + cw < D ? d0 + cw : D;

			for (int n = 0; n < N; n++) {
				const float *xr = x + (size_t)n * D;
				const float *dr = dout + (size_t)n * D;
				float r = rstd[n];

				for (int d = d0; d < d1; d++)
					dg[d] += dr[d] * xr[d] * r;
			}
		}
	}
}

void cpu_rope(float *out, const float *in, int B, int T, int H, int Dh,
	      int dir)
{
	int half = Dh / 2;
	int D = H * Dh;
	float *cs = malloc(sizeof(float) * 2 * (size_t)T * half);

	if (!cs)
		abort(); /* tiny; the arena holds everything large */
	/* cos/sin table [T, half, 2], angles in double as the reference */
	for (int t = 0; t < T; t++) {
		for (int i = 0; i < half; i++) {
			double theta = pow(10000.0, -2.0 * i / (double)Dh);
			double a = (double)t * theta;

			cs[((size_t)t * half + i) * 2] = (float)cos(a);
			cs[((size_t)t * half + i) * 2 + 1] =
				(float)(dir >= 0 ? sin(a) : -sin(a));
		}
	}
#pragma omp parallel for schedule(static)
	for (int bt = 0; bt < B * T; bt++) {
		const float *tab = cs + (size_t)(bt % T) * half * 2;

		for (int h = 0; h < H; h++) {
			const float *x = in + (size_t)bt * D + h * Dh;
			float *y = out + (size_t)bt * D + h * Dh;

			for (int i = 0; i < half; i++) {
				float c = tab[2 * i], s = tab[2 * i + 1];
				float x0 = x[i], x1 = x[i + half];

				y[i] = x0 * c - x1 * s;
				y[i + half] = x1 * c + x0 * s;
			}
		}
	}
	free(cs);
}

void cpu_softmax_forward(float *p, const float *logits, int N, int C)
{
#pragma omp parallel for schedule(static)
	for (int n = 0; n < N; n++) {
		const float *l = logits + (size_t)n * C;
		float *o = p + (size_t)n * C;
		float mx = l[0], s = 0.0f;

		for (int c = 1; c < C; c++)
			mx = l[c] > mx ? l[c] : mx;
		for (int c = 0; c < C; c++) {
			o[c] = expf(l[c] - mx);
			s += o[c];
		}
		for (int c = 0; c < C; c++)
			o[c] /= s;
	}
}

void cpu_softmax_backward(float *dlogits, const float *dp, const float *p,
			  int N, int C)
{
#pragma omp parallel for schedule(static)
	for (int n = 0; n < N; n++) {
		const float *pr = p + (size_t)n * C;
		const float *g = dp + (size_t)n * C;
		float *o = dlogits + (size_t)n * C;
		float dot = 0.0f;

		for (int c = 0; c < C; c++)
			dot += pr[c] * g[c];
		for (int c = 0; c < C; c++)
			o[c] = pr[c] * (g[c] - dot);
	}
}

void cpu_swiglu_forward(float *h, const float *a, const float *b, size_t n)
{
#pragma omp parallel for schedule(static)
	for (size_t i = 0; i < n; i++) {
		float s = 1.0f / (1.0f + expf(-a[i]));

		h[i] = a[i] * s * b[i];
	}
}

void cpu_swiglu_backward(float *da, float *db, const float *dh,
			 const float *a, const float *b, size_t n)
{
#pragma omp parallel for schedule(static)
	for (size_t i = 0; i < n; i++) {
		float s = 1.0f / (1.0f + expf(-a[i]));
		float silu = a[i] * s;

		db[i] = dh[i] * silu;
		da[i] = dh[i] * b[i] * s * (1.0f + a[i] * (1.0f - s));
	}
}
