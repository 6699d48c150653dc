/*
 * model.c - the model's arithmetic (docs/model.md): forward and backward
 * over the tensors model_layout.c lays out, and AdamW with warm-up, cosine
 * decay and global clipping.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sigma.h"
#include "model.h"

/* ---- forward ------------------------------------------------------------- */

/* the table for layer l's forward (l = L: the output head) */
static const struct sigma_ops *layer_ops(struct model *m, int l)
{
	if (!m->bf16 || !m->prec || !m->prec[l])
		return m->ops;
	m->bf16->begin(m->overflow ? &m->overflow[l] : NULL,
		       m->inject_overflow == l + 1);
	if (m->inject_overflow == l + 1)
		m->inject_overflow = 0;
	return m->bf16->ops;
}

void model_forward(struct model *m, const int32_t *tokens,
		   const int32_t *targets)
{
	model_forward_part(m, 0, m->cfg.L, tokens, targets);
}

/*
 * The load-balancing loss of the global batch for layers [l0, l1): the
 * token counts of every layer summed over the data-parallel ranks in one
 * call (one message a pass, not one a layer), so f_e = counts / (ranks N
 * K); the mean of the ranks' losses is then the global one. Routing does
 * not depend on the counts, so waiting for them until the end of the pass
 * changes nothing computed: the sum starts once the last layer is routed
 * (counts_start) and is waited for after the head, so the last layer's
 * experts and the head hide its time.
 */
static void global_aux(struct model *m, int l0, int l1)
{
	struct model_acts *a = &m->act;
	int E = m->cfg.E, N = m->B * m->cfg.T;

	m->counts_reduce(m->counts_ctx, m->host_counts, (l1 - l0) * E);
	for (int l = l0; l < l1; l++) {
		struct model_layer_acts *la = &a->layer[l];
		const struct sigma_ops *o = layer_ops(m, l);

		o->from_host(la->gcounts, m->host_counts + (size_t)(l - l0) * E,
			     sizeof(int) * E);
		o->moe_aux_loss(&a->aux[l], la->p, la->gcounts, N, E,
				m->cfg.K * m->count_ranks);
	}
}

void model_forward_part(struct model *m, int l0, int l1,
			const int32_t *tokens, const int32_t *targets)
{
	const struct sigma_ops *o = m->ops;
	const struct model_config *c = &m->cfg;
	struct model_acts *a = &m->act;
	int B = m->B, T = c->T, D = c->D, H = c->H, E = c->E, K = c->K;
	int F = c->F, V = c->V, N = B * T, Dh = D / H;
	size_t ND = (size_t)N * D;
	double ce_sum = 0.0, aux_sum = 0.0;
	float auxl;

	if (l0 == 0) {
		o->from_host(a->tokens, tokens, sizeof(int32_t) * N);
		o->embedding_forward(a->x, a->tokens, m->P.tok_emb, N, D);
	}
	if (l1 == c->L)
		o->from_host(a->targets, targets, sizeof(int32_t) * N);

	for (int l = l0; l < l1; l++) {
		const struct model_layer_ptrs *w = &m->P.layer[l];
		struct model_layer_acts *la = &a->layer[l];
		float *x = a->x + l * ND, *xnext = a->x + (l + 1) * ND;

		o = layer_ops(m, l);
		/* attention block */
		o->rmsnorm_forward(la->a, la->a_rstd, x, w->attn_norm, N, D);
		o->matmul_forward(la->q, la->a, w->wq, N, D, D, 0);
		o->matmul_forward(la->k, la->a, w->wk, N, D, D, 0);
		o->matmul_forward(la->v, la->a, w->wv, N, D, D, 0);
		o->rope(la->q, la->q, B, T, H, Dh, 1);
		o->rope(la->k, la->k, B, T, H, Dh, 1);
		o->attention_forward(la->ao, la->att, la->q, la->k, la->v, B,
				     T, H, Dh);
		o->copy(la->xmid, x, ND);
		o->matmul_forward(la->xmid, la->ao, w->wo, N, D, D, 1);

		/* mixture of experts block */
		o->rmsnorm_forward(la->m, la->m_rstd, la->xmid, w->moe_norm, N,
				   D);
		o->matmul_forward(la->p, la->m, w->router, N, D, E, 0);
		o->softmax_forward(la->p, la->p, N, E);
		o->moe_route(la->idx, la->gate, la->counts, la->offs, la->perm,
			     la->pos, la->p, N, E, K);
		if (m->counts_reduce && m->count_ranks > 1) {
			/* the global counts after the last layer */
			o->to_host(m->host_counts + (size_t)(l - l0) * E,
				   la->counts, sizeof(int) * E);
			if (l == l1 - 1 && m->counts_start)
				m->counts_start(m->counts_ctx, m->host_counts,
						(l1 - l0) * E);
		} else
			o->moe_aux_loss(&a->aux[l], la->p, la->counts, N, E,
					K);
		if (m->experts) {
			m->experts->forward(m->experts->ctx, m, l, o);
		} else {
			o->moe_gather(la->xe, la->m, la->perm, N, K, D);
			o->grouped_matmul_forward(la->h1, la->xe, w->w1,
						  la->offs, E, D, F);
			o->grouped_matmul_forward(la->h3, la->xe, w->w3,
						  la->offs, E, D, F);
			o->swiglu_forward(la->hs, la->h1, la->h3,
					  (size_t)N * K * F);
			o->grouped_matmul_forward(la->eo, la->hs, w->w2,
						  la->offs, E, F, D);
		}
		o->copy(xnext, la->xmid, ND);
		o->moe_combine(xnext, la->eo, la->gate, la->pos, N, K, D);
	}

	if (l1 == c->L) {
		o = layer_ops(m, c->L);
		o->rmsnorm_forward(a->fn, a->fn_rstd,
				   a->x + (size_t)c->L * ND, m->P.final_norm,
				   N, D);
		o->matmul_forward(a->logits, a->fn, m->P.w_out, N, D, V, 0);
		o->crossentropy_forward(a->losses, a->probs, a->logits,
					a->targets, N, V);
		o->sum(&ce_sum, a->losses, N);
	}
	if (m->counts_reduce && m->count_ranks > 1)
		global_aux(m, l0, l1);
	for (int l = l0; l < l1; l++) {
		m->ops->to_host(&auxl, &a->aux[l], sizeof(float));
		if (m->counts_reduce && m->count_ranks > 1)
			auxl *= m->count_weight; /* f_e over the whole batch */
		aux_sum += auxl;
	}
	m->ce = ce_sum / N;
	m->aux = aux_sum / c->L;
	m->loss = m->ce + c->aux_coef * m->aux;
}

/* ---- backward ------------------------------------------------------------ */

void model_backward(struct model *m)
{
	model_zero_grads(m);
	model_backward_part(m, 0, m->cfg.L, 1.0f);
}

void model_backward_part(struct model *m, int l0, int l1, float loss_scale)
{
	const struct sigma_ops *o = m->ops;
	const struct model_config *c = &m->cfg;
	struct model_acts *a = &m->act;
	int B = m->B, T = c->T, D = c->D, H = c->H, E = c->E, K = c->K;
	int F = c->F, V = c->V, N = B * T, Dh = D / H;
	size_t ND = (size_t)N * D;
	float aux_scale = c->aux_coef / (float)c->L * loss_scale;

	if (l1 == c->L) {
		/* head: dlogits overwrite the logits buffer */
		o->crossentropy_backward(a->logits, a->probs, a->targets,
					 loss_scale / (float)N, N, V);
		o->matmul_backward(a->dtmp, m->G.w_out, a->logits, a->fn,
				   m->P.w_out, N, D, V, 0);
		o->zero(a->dx, ND);
		o->rmsnorm_backward(a->dx, m->G.final_norm, a->dtmp,
				    a->x + (size_t)c->L * ND, m->P.final_norm,
				    a->fn_rstd, N, D);
		if (m->grad_ready)
			m->grad_ready(m->grad_ready_ctx,
				      (size_t)(m->G.final_norm - m->grads));
	}

	for (int l = l1 - 1; l >= l0; l--) {
		const struct model_layer_ptrs *w = &m->P.layer[l];
		const struct model_layer_ptrs *g = &m->G.layer[l];
		struct model_layer_acts *la = &a->layer[l];
		float *x = a->x + l * ND;

		/* experts: xnext = xmid + sum gate * expert(m) */
		o->moe_combine_backward(a->deo, a->dgate, a->dx, la->eo,
					la->gate, la->pos, N, K, D);
		if (m->experts) {
			m->experts->backward(m->experts->ctx, m, l);
		} else {
			o->grouped_matmul_backward(a->dhs, g->w2, a->deo,
						   la->hs, w->w2, la->offs, E,
						   F, D, 0);
			o->swiglu_backward(a->dh1, a->dh3, a->dhs, la->h1,
					   la->h3, (size_t)N * K * F);
			o->grouped_matmul_backward(a->dxe, g->w1, a->dh1,
						   la->xe, w->w1, la->offs, E,
						   D, F, 0);
			o->grouped_matmul_backward(a->dxe, g->w3, a->dh3,
						   la->xe, w->w3, la->offs, E,
						   D, F, 1);
		}
		o->moe_gather_backward(a->dtmp, a->dxe, la->pos, N, K, D);
		/* router: gates and the load-balancing loss */
		if (m->counts_reduce && m->count_ranks > 1)
			/* global counts: f_e scaled by 1 / ranks */
			o->moe_router_backward(a->dp, a->dgate, la->p, la->idx,
					       la->gate, la->gcounts,
					       aux_scale * m->count_weight /
						   (float)m->count_ranks,
					       N, E, K);
		else
			o->moe_router_backward(a->dp, a->dgate, la->p, la->idx,
					       la->gate, la->counts, aux_scale,
					       N, E, K);
		o->softmax_backward(a->dr, a->dp, la->p, N, E);
		o->matmul_backward(a->dtmp, g->router, a->dr, la->m, w->router,
				   N, D, E, 1);
		o->copy(a->dmid, a->dx, ND);
		o->rmsnorm_backward(a->dmid, g->moe_norm, a->dtmp, la->xmid,
				    w->moe_norm, la->m_rstd, N, D);

		/* attention: xmid = x + attn(rmsnorm(x)) Wo */
		o->matmul_backward(a->dao, g->wo, a->dmid, la->ao, w->wo, N, D,
				   D, 0);
		o->attention_backward(a->dq, a->dk, a->dv, a->datt, a->dao,
				      la->q, la->k, la->v, la->att, B, T, H,
				      Dh);
		o->rope(a->dq, a->dq, B, T, H, Dh, -1);
		o->rope(a->dk, a->dk, B, T, H, Dh, -1);
		o->matmul_backward(a->dtmp, g->wq, a->dq, la->a, w->wq, N, D,
				   D, 0);
		o->matmul_backward(a->dtmp, g->wk, a->dk, la->a, w->wk, N, D,
				   D, 1);
		o->matmul_backward(a->dtmp, g->wv, a->dv, la->a, w->wv, N, D,
				   D, 1);
		o->copy(a->dx, a->dmid, ND);
		o->rmsnorm_backward(a->dx, g->attn_norm, a->dtmp, x,
				    w->attn_norm, la->a_rstd, N, D);
		if (m->grad_ready)
			m->grad_ready(m->grad_ready_ctx,
				      (size_t)(g->attn_norm - m->grads));
	}
	if (l0 == 0) {
		o->embedding_backward(m->G.tok_emb, a->dx, a->tokens, N, V,
				      D);
		if (m->grad_ready)
			m->grad_ready(m->grad_ready_ctx, 0);
	}
}

double model_grad_norm(struct model *m)
{
	double ss[2] = { 0.0, 0.0 };
	/* a sharded optimizer's gradients are summed in its blocks only */
	const size_t lo[2] = { m->zero ? m->mom_lo[0] : 0,
			       m->zero ? m->mom_lo[1] : m->ndense };
	const size_t hi[2] = { m->zero ? m->mom_hi[0] : m->ndense,
			       m->zero ? m->mom_hi[1] : m->nparams };

	for (int k = 0; k < 2; k++)
		if (hi[k] > lo[k])
			m->ops->sumsq(&ss[k], m->grads + lo[k], hi[k] - lo[k]);
	if (m->norm_reduce)
		return sqrt(m->norm_reduce(m->norm_ctx, ss));
	return sqrt(ss[0] + ss[1]);
}

/* ---- optimizer ----------------------------------------------------------- */

float optim_lr(const struct optim_config *o, long s)
{
	double peak = o->lr, floor_ = o->lr * o->lr_min_ratio, frac;

	if (s < o->warmup)
		return (float)(peak * (double)(s + 1) / (double)o->warmup);
	if (o->steps <= o->warmup)
		return (float)peak;
	frac = (double)(s - o->warmup) / (double)(o->steps - o->warmup);
	if (frac > 1.0)
		frac = 1.0;
	return (float)(floor_ + 0.5 * (peak - floor_) *
					(1.0 + cos(3.141592653589793 * frac)));
}

float optim_step(struct model *m, const struct optim_config *o, double gnorm,
		 float lr, long t)
{
	float scale = 1.0f;

	if (o->clip > 0.0f && gnorm > o->clip)
		scale = (float)(o->clip / gnorm);
	/* each tensor's part in the moments this rank holds */
	for (int i = 0; i < m->ntensors; i++) {
		const struct model_tensor *tn = &m->tensors[i];
		size_t a, b, mo = 0;

		for (int k = 0; k < 2; mo += m->mom_hi[k] - m->mom_lo[k], k++) {
			a = tn->offset > m->mom_lo[k] ? tn->offset : m->mom_lo[k];
			b = tn->offset + tn->n < m->mom_hi[k] ? tn->offset + tn->n
							      : m->mom_hi[k];
			if (a >= b)
				continue;
			m->ops->adamw(m->params + a, m->m + mo + a - m->mom_lo[k],
				      m->v + mo + a - m->mom_lo[k],
				      m->grads + a, b - a, lr, o->beta1,
				      o->beta2, o->eps,
				      tn->decay ? o->weight_decay : 0.0f,
				      scale, t);
		}
	}
	return scale;
}

double model_active_params(const struct model_config *c)
{
	double D = c->D, E = c->E, K = c->K, F = c->F, V = c->V;
	double layer = 4.0 * D * D + D * E + K * 3.0 * D * F;

	return c->L * layer + D * V;
}

double model_flops_per_token(const struct model_config *c)
{
	/* attention scores and weighted sum: 2 products of T x Dh per head,
	 * 3x for forward + backward, full (unmasked) T as computed */
	return 6.0 * model_active_params(c) +
	       12.0 * (double)c->L * (double)c->D * (double)c->T;
}
