/*
 * loss.c - cross-entropy, ordered reductions, and the AdamW update.
 */
#include <math.h>
#include <stdlib.h>

#include "cpu.h"

void cpu_crossentropy_forward(float *losses, float *probs,
			      const float *logits, const int32_t *targets,
			      int N, int V)
{
#pragma omp parallel for schedule(static)
	for (int n = 0; n < N; n++) {
		const float *l = logits + (size_t)n * V;
		float *p = probs + (size_t)n * V;
		float mx = l[0], s = 0.0f, inv;

		for (int v = 1; v < V; v++)
			mx = l[v] > mx ? l[v] : mx;
		for (int v = 0; v < V; v++) {
			p[v] = expf(l[v] - mx);
			s += p[v];
		}
		inv = 1.0f / s;
		for (int v = 0; v < V; v++)
			p[v] *= inv;
		/* log-sum-exp form: exact even when the probability underflows */
		losses[n] = logf(s) + mx - l[targets[n]];
	}
}

void cpu_crossentropy_backward(float *dlogits, const float *probs,
			       const int32_t *targets, float scale, int N,
			       int V)
{
#pragma omp parallel for schedule(static)
	for (int n = 0; n < N; n++) {
		const float *p = probs + (size_t)n * V;
		float *d = dlogits + (size_t)n * V;

		for (int v = 0; v < V; v++)
			d[v] = scale * p[v];
		d[targets[n]] -= scale;
	}
}

/*
 * Reductions in fixed blocks: each block summed in order, the block sums
 * added in order, so the result is the same for any thread count.
 */
#define RED_BLOCK 4096

static void reduce(double *out, const float *x, size_t n, int square)
{
	size_t nb = (n + RED_BLOCK - 1) / RED_BLOCK;
	double stack[64], *part = nb <= 64 ? stack : malloc(sizeof(double) * nb);
	double total = 0.0;

	if (!part)
		abort(); /* a few kB; nothing sensible to do without it */
#pragma omp parallel for schedule(static)
	for (size_t b = 0; b < nb; b++) {
		size_t i1 = (b + 1) * RED_BLOCK < n ? (b + 1) * RED_BLOCK : n;
		double s = 0.0;

		for (size_t i = b * RED_BLOCK; i < i1; i++)
			s += square ? (double)x[i] * x[i] : (double)x[i];
		part[b] = s;
	}
	for (size_t b = 0; b < nb; b++)
		total += part[b];
	if (part != stack)
		free(part);
	*out = total;
}

void cpu_sum(double *out, const float *x, size_t n)
{
	reduce(out, x, n, 0);
}

void cpu_sumsq(double *out, const float *x, size_t n)
{
	reduce(out, x, n, 1);
}

void cpu_scale(float *x, float s, size_t n)
{
#pragma omp parallel for schedule(static)
	for (size_t i = 0; i < n; i++)
		x[i] *= s;
}

void cpu_adamw(float *param, float *m, float *v, const float *g, size_t n,
	       float lr, float beta1, float beta2, float eps, float wd,
	       float gscale, long t)
{
	float c1 = 1.0f / (1.0f - powf(beta1, (float)t));
	float c2 = 1.0f / (1.0f - powf(beta2, (float)t));

#pragma omp parallel for schedule(static)
	for (size_t i = 0; i < n; i++) {
		float gi = g[i] * gscale;
		float mi = beta1 * m[i] + (1.0f - beta1) * gi;
		float vi = beta2 * v[i] + (1.0f - beta2) * gi * gi;

		m[i] = mi;
		v[i] = vi;
		param[i] -= lr * (mi * c1 / (sqrtf(vi * c2) + eps) +
				  wd * param[i]);
	}
}
