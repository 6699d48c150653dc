/*
 * ops.h - the one op interface of sigma's compute kernels.
 *
 * Every layer of the model in docs/model.md is a free function here, with
 * outputs first, then inputs, then sizes. An implementation fills a
 * struct sigma_ops: the CPU path (kernels/cpu/, BLAS for matrices, OpenMP C
 * for the rest) is sigma_ops_cpu; a CUDA path fills the same table with
 * device pointers and kernels, so the model code never changes.
 *
 * Conventions
 *   - All tensors are fp32, row-major, contiguous. Shapes are written
 *     [rows, cols]; N is a number of tokens (B*T), NK = N*K rows of
 *     token-to-expert assignments.
 *   - Pointers are in the implementation's memory space (host for CPU,
 *     device for CUDA); allocate them with ops->alloc.
 *   - "writes" overwrites its output; "adds" accumulates into it (+=).
 *     Every weight gradient adds, so the trainer zeroes them once per step.
 *   - Results are deterministic for a given implementation, size and thread
 *     count: no atomics, reductions in a fixed order.
 */
#ifndef SIGMA_OPS_H
#define SIGMA_OPS_H

#include <stddef.h>
#include <stdint.h>

struct sigma_ops {
	const char *name; /* "cpu", "cuda" */

	/* Set up the implementation (threads, handles); 0 or -errno. */
	int (*init)(int threads);
	/* Human-readable description of the backend (BLAS, threads). */
	void (*describe)(char *buf, size_t len);

	/* ---- memory ---------------------------------------------------- */
	/* n bytes, 64-byte aligned, zeroed; NULL on failure. */
	void *(*alloc)(size_t n);
	/* p is freed now, or (the CUDA path) at the next release */
	void (*free)(void *p);
	/*
	 * Free what free() put off. The CUDA path does not free inside a
	 * step: cudaFree waits for every stream, a collective's too, and
	 * could hang the ranks. Call it where no collective is in flight
	 * (after a step, at the end). NULL: free() frees at once.
	 */
	void (*release)(void);
	/* dst[n] = 0 */
	void (*zero)(float *dst, size_t n);
	/* dst[n] = src[n] (same memory space) */
	void (*copy)(float *dst, const float *src, size_t n);
	/* host <-> implementation memory */
	void (*to_host)(void *host, const void *src, size_t bytes);
	void (*from_host)(void *dst, const void *host, size_t bytes);
	/* After init: the free and total bytes of the device whose memory
	 * alloc gives; NULL where alloc gives host memory. 0 or -errno. */
	int (*mem_info)(uint64_t *free_bytes, uint64_t *total_bytes);

	/* ---- dense layers ---------------------------------------------- */
	/*
	 * out[N,OC] (writes, or adds when accumulate) = in[N,C] w[C,OC]
	 */
	void (*matmul_forward)(float *out, const float *in, const float *w,
			       int N, int C, int OC, int accumulate);
	/*
	 * din[N,C] (writes, or adds when accumulate; skipped when NULL)
	 *   = dout[N,OC] w[C,OC]^T
	 * dw[C,OC] (adds) += in[N,C]^T dout[N,OC]
	 */
	void (*matmul_backward)(float *din, float *dw, const float *dout,
				const float *in, const float *w, int N, int C,
				int OC, int accumulate);
	/*
	 * Grouped (per expert) products: rows offs[g]..offs[g+1]-1 of in
	 * multiply w + g*C*OC. offs has G+1 entries, offs[0] = 0.
	 * out[R,OC] (writes) = in[R,C] w[g][C,OC] per group
	 */
	void (*grouped_matmul_forward)(float *out, const float *in,
				       const float *w, const int *offs, int G,
				       int C, int OC);
	/*
	 * din[R,C] (writes, or adds when accumulate) = dout w[g]^T per group
	 * dw[G,C,OC] (adds) += in^T dout per group
	 */
	void (*grouped_matmul_backward)(float *din, float *dw,
					const float *dout, const float *in,
					const float *w, const int *offs, int G,
					int C, int OC, int accumulate);

	/* ---- embedding, normalisation, position -------------------------- */
	/* out[N,D] (writes) = emb[tok[n], :] */
	void (*embedding_forward)(float *out, const int32_t *tok,
				  const float *emb, int N, int D);
	/* demb[V,D] (adds) += dout[n] at row tok[n] */
	void (*embedding_backward)(float *demb, const float *dout,
				   const int32_t *tok, int N, int V, int D);
	/*
	 * out[N,D] (writes) = x / sqrt(mean(x^2) + 1e-5) * g[D];
	 * rstd[N] (writes) = the 1/sqrt(...) factor, kept for backward
	 */
	void (*rmsnorm_forward)(float *out, float *rstd, const float *x,
				const float *g, int N, int D);
	/* dx[N,D] (adds), dg[D] (adds), from dout[N,D] */
	void (*rmsnorm_backward)(float *dx, float *dg, const float *dout,
				 const float *x, const float *g,
				 const float *rstd, int N, int D);
	/*
	 * Rotary embedding, base 10000, rotate-half, on x[B,T,H,Dh] viewed as
	 * [B*T, H*Dh]; position t is the row's index within its sequence.
	 * out (writes; may equal in). dir = +1 rotates (forward), -1 rotates
	 * back (the backward pass: the transpose of a rotation).
	 */
	void (*rope)(float *out, const float *in, int B, int T, int H, int Dh,
		     int dir);

	/* ---- attention --------------------------------------------------- */
	/*
	 * Causal softmax attention per batch and head.
	 * q, k, v [B,T,H*Dh] (rotated q and k); out[B,T,H*Dh] (writes);
	 * att[B,H,T,T] (writes) = the softmax probabilities, 0 above the
	 * diagonal, kept for backward.
	 */
	void (*attention_forward)(float *out, float *att, const float *q,
				  const float *k, const float *v, int B, int T,
				  int H, int Dh);
	/*
	 * dq, dk, dv [B,T,H*Dh] (write); scratch[B,H,T,T] is overwritten.
	 */
	void (*attention_backward)(float *dq, float *dk, float *dv,
				   float *scratch, const float *dout,
				   const float *q, const float *k,
				   const float *v, const float *att, int B,
				   int T, int H, int Dh);

	/*
	 * Whether attention_forward and attention_backward at these sizes
	 * use att and scratch: 1 when they do (the caller passes both,
	 * B*H*T*T floats each), 0 when both may be NULL (the kernels
	 * recompute what they need), or -EINVAL with a message in err
	 * (bounded by len) naming the limit when no kernel of the
	 * implementation takes these sizes. nbuf: how many such buffers the
	 * model would keep (its layers, plus one for the gradient). Asked
	 * once, at configuration time, after init; a table without it
	 * (NULL) uses them.
	 */
	int (*attention_plan)(int B, int T, int H, int Dh, int nbuf,
			      char *err, size_t len);

	/* ---- mixture of experts ------------------------------------------ */
	/* p[N,C] (writes) = softmax over each row of logits[N,C] */
	void (*softmax_forward)(float *p, const float *logits, int N, int C);
	/* dlogits[N,C] (writes) from dp[N,C] and p */
	void (*softmax_backward)(float *dlogits, const float *dp,
				 const float *p, int N, int C);
	/*
	 * Top-K routing of p[N,E]: idx[N,K] the chosen experts (largest
	 * first, ties to the lower index), gate[N,K] = p at idx over their
	 * sum; counts[E] assignments per expert, offs[E+1] their prefix sum;
	 * perm[NK] the assignment (n*K + j) at each expert-sorted row (stable:
	 * token order within an expert); pos[NK] its inverse.
	 */
	void (*moe_route)(int *idx, float *gate, int *counts, int *offs,
			  int *perm, int *pos, const float *p, int N, int E,
			  int K);
	/* aux[1] (writes) = E * sum_e f_e P_e (Switch load-balancing loss) */
	void (*moe_aux_loss)(float *aux, const float *p, const int *counts,
			     int N, int E, int K);
	/* xe[NK,D] (writes): row r = m[perm[r] / K] */
	void (*moe_gather)(float *xe, const float *m, const int *perm, int N,
			   int K, int D);
	/* dm[N,D] (writes) = sum over j of dxe[pos[n*K + j]] */
	void (*moe_gather_backward)(float *dm, const float *dxe,
				    const int *pos, int N, int K, int D);
	/* x[N,D] (adds) += sum over j of gate[n,j] * eout[pos[n*K + j]] */
	void (*moe_combine)(float *x, const float *eout, const float *gate,
			    const int *pos, int N, int K, int D);
	/*
	 * deout[NK,D] (writes) = gate * dx at each assignment's row;
	 * dgate[N,K] (writes) = dot(dx[n], eout[pos[n*K + j]])
	 */
	void (*moe_combine_backward)(float *deout, float *dgate,
				     const float *dx, const float *eout,
				     const float *gate, const int *pos, int N,
				     int K, int D);
	/*
	 * dp[N,E] (writes): gradient of the router probabilities from the
	 * gate gradients (through the renormalisation over the top K) and
	 * from aux_scale * aux (aux_scale = aux_coef / L; f carries none).
	 */
	void (*moe_router_backward)(float *dp, const float *dgate,
				    const float *p, const int *idx,
				    const float *gate, const int *counts,
				    float aux_scale, int N, int E, int K);
	/* h[n] (writes) = silu(a[n]) * b[n], n elements */
	void (*swiglu_forward)(float *h, const float *a, const float *b,
			       size_t n);
	/* da, db (write) from dh */
	void (*swiglu_backward)(float *da, float *db, const float *dh,
				const float *a, const float *b, size_t n);

	/* ---- loss -------------------------------------------------------- */
	/*
	 * probs[N,V] (writes) = softmax(logits); losses[N] (writes) =
	 * -log probs[target]. Targets must lie in [0, V).
	 */
	void (*crossentropy_forward)(float *losses, float *probs,
				     const float *logits,
				     const int32_t *targets, int N, int V);
	/* dlogits[N,V] (writes) = scale * (probs - onehot(target)) */
	void (*crossentropy_backward)(float *dlogits, const float *probs,
				      const int32_t *targets, float scale,
				      int N, int V);
	/* out[1] (writes) = sum of x[n] in double, in a fixed order */
	void (*sum)(double *out, const float *x, size_t n);

	/* ---- optimizer --------------------------------------------------- */
	/* out[1] (writes) = sum of x[n]^2 in double, in a fixed order */
	void (*sumsq)(double *out, const float *x, size_t n);
	/* x[n] *= s (the mean of gradients summed over data-parallel ranks) */
	void (*scale)(float *x, float s, size_t n);
	/*
	 * One AdamW step on n elements (decoupled decay wd, already zero for
	 * gains). g is scaled by gscale (gradient clipping) before use; t is
	 * the 1-based step for bias correction. Writes param, m, v.
	 */
	void (*adamw)(float *param, float *m, float *v, const float *g,
		      size_t n, float lr, float beta1, float beta2, float eps,
		      float wd, float gscale, long t);
};

/* The CPU implementation (kernels/cpu/). */
extern const struct sigma_ops sigma_ops_cpu;

#endif /* SIGMA_OPS_H */
