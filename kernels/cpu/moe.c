/*
 * moe.c - top-K routing, token permutation to expert-sorted rows, combine,
 * and the router's gradient including the load-balancing loss.
 */
#include <string.h>

#include "cpu.h"

void cpu_moe_route(int *idx, float *gate, int *counts, int *offs, int *perm,
		   int *pos, const float *p, int N, int E, int K)
{
#pragma omp parallel for schedule(static)
	for (int n = 0; n < N; n++) {
		const float *pr = p + (size_t)n * E;
		int *ix = idx + (size_t)n * K;
		float *gt = gate + (size_t)n * K;
		float sum = 0.0f;

		for (int j = 0; j < K; j++) {
			int best = -1;

			/* strict > scanning upwards: ties go to the lower index */
			for (int e = 0; e < E; e++) {
				int taken = 0;

				for (int i = 0; i < j; i++)
					taken |= ix[i] == e;
				if (!taken && (best < 0 || pr[e] > pr[best]))
					best = e;
			}
			ix[j] = best;
			gt[j] = pr[best];
			sum += pr[best];
		}
		for (int j = 0; j < K; j++)
			gt[j] /= sum;
	}
	/* counting sort of the N*K assignments by expert, stable */
	memset(counts, 0, sizeof(int) * E);
	for (int a = 0; a < N * K; a++)
		counts[idx[a]]++;
	offs[0] = 0;
	for (int e = 0; e < E; e++)
		offs[e + 1] = offs[e] + counts[e];
	{
		int fill[E];

		memcpy(fill, offs, sizeof(int) * E);
		for (int a = 0; a < N * K; a++) {
			int r = fill[idx[a]]++;

			perm[r] = a;
			pos[a] = r;
		}
	}
}

void cpu_moe_aux_loss(float *aux, const float *p, const int *counts, int N,
		      int E, int K)
{
	double total = 0.0;

	for (int e = 0; e < E; e++) {
		double pe = 0.0, fe = (double)counts[e] / ((double)N * K);

		for (int n = 0; n < N; n++)
			pe += p[(size_t)n * E + e];
		total += fe * (pe / N);
	}
	*aux = (float)(E * total);
}

void cpu_moe_gather(float *xe, const float *m, const int *perm, int N, int K,
		    int D)
{
#pragma omp parallel for schedule(static)
	for (int r = 0; r < N * K; r++)
		memcpy(xe + (size_t)r * D, m + (size_t)(perm[r] / K) * D,
		       sizeof(float) * D);
}

void cpu_moe_gather_backward(float *dm, const float *dxe, const int *pos,
			     int N, int K, int D)
{
#pragma omp parallel for schedule(static)
	for (int n = 0; n < N; n++) {
		float *o = dm + (size_t)n * D;

		memcpy(o, dxe + (size_t)pos[n * K] * D, sizeof(float) * D);
		for (int j = 1; j < K; j++) {
			const float *g = dxe + (size_t)pos[n * K + j] * D;

			for (int d = 0; d < D; d++)
				o[d] += g[d];
		}
	}
}

void cpu_moe_combine(float *x, const float *eout, const float *gate,
		     const int *pos, int N, int K, int D)
{
#pragma omp parallel for schedule(static)
	for (int n = 0; n < N; n++) {
		float *o = x + (size_t)n * D;

		for (int j = 0; j < K; j++) {
			const float *e = eout + (size_t)pos[n * K + j] * D;
			float g = gate[(size_t)n * K + j];

			for (int d = 0; d < D; d++)
				o[d] += g * e[d];
		}
	}
}

void cpu_moe_combine_backward(float *deout, float *dgate, const float *dx,
			      const float *eout, const float *gate,
			      const int *pos, int N, int K, int D)
{
#pragma omp parallel for schedule(static)
	for (int n = 0; n < N; n++) {
		const float *g = dx + (size_t)n * D;

		for (int j = 0; j < K; j++) {
			int r = pos[n * K + j];
			const float *e = eout + (size_t)r * D;
			float *de = deout + (size_t)r * D;
			float gt = gate[(size_t)n * K + j], dot = 0.0f;

			for (int d = 0; d < D; d++) {
				dot += g[d] * e[d];
				de[d] = gt * g[d];
			}
			dgate[(size_t)n * K + j] = dot;
		}
	}
}

void cpu_moe_router_backward(float *dp, const float *dgate, const float *p,
			     const int *idx, const float *gate,
			     const int *counts, float aux_scale, int N, int E,
			     int K)
{
	/* d aux / d p[n,e] = E * f_e / N, f_e = counts[e] / (N K) */
	float daux[E];

	for (int e = 0; e < E; e++)
		daux[e] = aux_scale * (float)E *
			  ((float)counts[e] / ((float)N * (float)K)) /
			  (float)N;
#pragma omp parallel for schedule(static)
	for (int n = 0; n < N; n++) {
		const float *pr = p + (size_t)n * E;
		const float *dg = dgate + (size_t)n * K;
		const float *gt = gate + (size_t)n * K;
		const int *ix = idx + (size_t)n * K;
		float *o = dp + (size_t)n * E;
		float s = 0.0f, dot = 0.0f;

		for (int e = 0; e < E; e++)
			o[e] = daux[e];
		/* gate_j = p_j / s over the chosen: dp_m = (dg_m - dg.gate) / s */
		for (int j = 0; j < K; j++) {
			s += pr[ix[j]];
			dot += dg[j] * gt[j];
		}
		for (int j = 0; j < K; j++)
			o[ix[j]] += (dg[j] - dot) / s;
	}
}
