/*
 * cpu.h - the CPU implementation of kernels/ops.h, one function per op.
 * Only ops_cpu.c, which fills sigma_ops_cpu, and the kernel tests use these
 * names directly; everything else goes through the table.
 */
#ifndef SIGMA_KERNELS_CPU_H
#define SIGMA_KERNELS_CPU_H

#include <stddef.h>
#include <stdint.h>

/* row chunk that one OpenMP task multiplies with one sgemm call */
#define CPU_ROW_CHUNK 128

/* matmul.c */
void cpu_matmul_forward(float *out, const float *in, const float *w, int N,
			int C, int OC, int accumulate);
void cpu_matmul_backward(float *din, float *dw, const float *dout,
			 const float *in, const float *w, int N, int C, int OC,
			 int accumulate);
void cpu_grouped_matmul_forward(float *out, const float *in, const float *w,
				const int *offs, int G, int C, int OC);
void cpu_grouped_matmul_backward(float *din, float *dw, const float *dout,
				 const float *in, const float *w,
				 const int *offs, int G, int C, int OC,
				 int accumulate);

/* layers.c */
void cpu_embedding_forward(float *out, const int32_t *tok, const float *emb,
			   int N, int D);
void cpu_embedding_backward(float *demb, const float *dout,
			    const int32_t *tok, int N, int V, int D);
void cpu_rmsnorm_forward(float *out, float *rstd, const float *x,
			 const float *g, int N, int D);
void cpu_rmsnorm_backward(float *dx, float *dg, const float *dout,
			  const float *x, const float *g, const float *rstd,
			  int N, int D);
void cpu_rope(float *out, const float *in, int B, int T, int H, int Dh,
	      int dir);
void cpu_softmax_forward(float *p, const float *logits, int N, int C);
void cpu_softmax_backward(float *dlogits, const float *dp, const float *p,
			  int N, int C);
void cpu_swiglu_forward(float *h, const float *a, const float *b, size_t n);
void cpu_swiglu_backward(float *da, float *db, const float *dh,
			 const float *a, const float *b, size_t n);

/* attention.c */
void cpu_attention_forward(float *out, float *att, const float *q,
			   const float *k, const float *v, int B, int T, int H,
			   int Dh);
void cpu_attention_backward(float *dq, float *dk, float *dv, float *scratch,
			    const float *dout, const float *q, const float *k,
			    const float *v, const float *att, int B, int T,
			    int H, int Dh);

/* moe.c */
void cpu_moe_route(int *idx, float *gate, int *counts, int *offs, int *perm,
		   int *pos, const float *p, int N, int E, int K);
void cpu_moe_aux_loss(float *aux, const float *p, const int *counts, int N,
		      int E, int K);
void cpu_moe_gather(float *xe, const float *m, const int *perm, int N, int K,
		    int D);
void cpu_moe_gather_backward(float *dm, const float *dxe, const int *pos,
			     int N, int K, int D);
void cpu_moe_combine(float *x, const float *eout, const float *gate,
		     const int *pos, int N, int K, int D);
void cpu_moe_combine_backward(float *deout, float *dgate, const float *dx,
			      const float *eout, const float *gate,
			      const int *pos, int N, int K, int D);
void cpu_moe_router_backward(float *dp, const float *dgate, const float *p,
			     const int *idx, const float *gate,
			     const int *counts, float aux_scale, int N, int E,
			     int K);

/* loss.c */
void cpu_crossentropy_forward(float *losses, float *probs,
			      const float *logits, const int32_t *targets,
			      int N, int V);
void cpu_crossentropy_backward(float *dlogits, const float *probs,
			       const int32_t *targets, float scale, int N,
			       int V);
void cpu_sum(double *out, const float *x, size_t n);
void cpu_sumsq(double *out, const float *x, size_t n);
void cpu_scale(float *x, float s, size_t n);
void cpu_adamw(float *param, float *m, float *v, const float *g, size_t n,
	       float lr, float beta1, float beta2, float eps, float wd,
	       float gscale, long t);

#endif /* SIGMA_KERNELS_CPU_H */
