/*
 * matmul.c - dense and per-expert matrix products through cblas_sgemm.
 *
 * BLAS runs single-threaded (ops_cpu.c sets it); the parallelism is ours:
 * each OpenMP task multiplies a block of rows (or, for weight gradients, a
 * block of the gradient's rows) with one sgemm, so tasks write disjoint
 * outputs and the result does not depend on scheduling.
 */
#include <cblas.h>

#include "cpu.h"

static int chunks(int n, int ch)
{
	return (n + ch - 1) / ch;
}

void cpu_matmul_forward(float *out, const float *in, const float *w, int N,
			int C, int OC, int accumulate)
{
	int nc = chunks(N, CPU_ROW_CHUNK);

#pragma omp parallel for schedule(static)
	for (int c = 0; c < nc; c++) {
		int r0 = c * CPU_ROW_CHUNK;
		int rn = N - r0 < CPU_ROW_CHUNK ? N - r0 : CPU_ROW_CHUNK;

		/* out[r0:r0+rn, :] = in[r0:r0+rn, :] w */
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rn, OC, C,
			    1.0f, in + (size_t)r0 * C, C, w, OC,
			    accumulate ? 1.0f : 0.0f, out + (size_t)r0 * OC, OC);
	}
}

void cpu_matmul_backward(float *din, float *dw, const float *dout,
			 const float *in, const float *w, int N, int C, int OC,
			 int accumulate)
{
	int nc_in = din ? chunks(N, CPU_ROW_CHUNK) : 0;
	int wch = 32;
	int nc_w = dw ? chunks(C, wch) : 0;

#pragma omp parallel for schedule(dynamic, 1)
	for (int c = 0; c < nc_in + nc_w; c++) {
		if (c < nc_in) {
			int r0 = c * CPU_ROW_CHUNK;
			int rn = N - r0 < CPU_ROW_CHUNK ? N - r0
							: CPU_ROW_CHUNK;

			/* din[rows] = dout[rows] w^T */
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans,
				    rn, C, OC, 1.0f, dout + (size_t)r0 * OC, OC,
				    w, OC, accumulate ? 1.0f : 0.0f,
				    din + (size_t)r0 * C, C);
		} else {
			int i0 = (c - nc_in) * wch;
			int in_ = C - i0 < wch ? C - i0 : wch;

			/* dw[i0:i0+in_, :] += in[:, i0:i0+in_]^T dout */
			cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans,
				    in_, OC, N, 1.0f, in + i0, C, dout, OC, 1.0f,
				    dw + (size_t)i0 * OC, OC);
		}
	}
}

static int max_rows(const int *offs, int G)
{
	int m = 0;

	for (int g = 0; g < G; g++)
		if (offs[g + 1] - offs[g] > m)
			m = offs[g + 1] - offs[g];
	return m;
}

void cpu_grouped_matmul_forward(float *out, const float *in, const float *w,
				const int *offs, int G, int C, int OC)
{
	int mc = chunks(max_rows(offs, G), CPU_ROW_CHUNK);

#pragma omp parallel for collapse(2) schedule(dynamic, 1)
	for (int g = 0; g < G; g++) {
		for (int c = 0; c < mc; c++) {
			int r0 = offs[g] + c * CPU_ROW_CHUNK;
			int rn = offs[g + 1] - r0;

			if (rn <= 0)
				continue;
			if (rn > CPU_ROW_CHUNK)
				rn = CPU_ROW_CHUNK;
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans,
				    rn, OC, C, 1.0f, in + (size_t)r0 * C, C,
				    w + (size_t)g * C * OC, OC, 0.0f,
				    out + (size_t)r0 * OC, OC);
		}
	}
}

void cpu_grouped_matmul_backward(float *din, float *dw, const float *dout,
				 const float *in, const float *w,
				 const int *offs, int G, int C, int OC,
				 int accumulate)
{
	int mc = din ? chunks(max_rows(offs, G), CPU_ROW_CHUNK) : 0;
	int wch = 64;
	int wc = dw ? chunks(C, wch) : 0;
	int per = mc + wc;

#pragma omp parallel for collapse(2) schedule(dynamic, 1)
	for (int g = 0; g < G; g++) {
		for (int c = 0; c < per; c++) {
			int n = offs[g + 1] - offs[g];
			const float *wg = w + (size_t)g * C * OC;

			if (c < mc) {
				int r0 = offs[g] + c * CPU_ROW_CHUNK;
				int rn = offs[g + 1] - r0;

				if (rn <= 0)
					continue;
				if (rn > CPU_ROW_CHUNK)
					rn = CPU_ROW_CHUNK;
				/* din[rows] = dout[rows] w[g]^T */
				cblas_sgemm(CblasRowMajor, CblasNoTrans,
					    CblasTrans, rn, C, OC, 1.0f,
					    dout + (size_t)r0 * OC, OC, wg, OC,
					    accumulate ? 1.0f : 0.0f,
					    din + (size_t)r0 * C, C);
			} else {
				int i0 = (c - mc) * wch;
				int in_ = C - i0 < wch ? C - i0 : wch;

				if (n == 0)
					continue;
				/* dw[g][i0:, :] += in[rows, i0:]^T dout[rows] */
				cblas_sgemm(CblasRowMajor, CblasTrans,
					    CblasNoTrans, in_, OC, n, 1.0f,
					    in + (size_t)offs[g] * C + i0, C,
					    dout + (size_t)offs[g] * OC, OC, 1.0f,
					    dw + (size_t)g * C * OC +
						    (size_t)i0 * OC,
					    OC);
			}
		}
	}
}
