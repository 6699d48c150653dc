/*
 * model.h - the MoE model of docs/model.md: configuration, one arena for
 * parameters, gradients, AdamW moments and activations, forward and
 * backward through the op interface (kernels/ops.h), and the optimizer.
 */
#ifndef SIGMA_TRAIN_MODEL_H
#define SIGMA_TRAIN_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bf16.h"
#include "ops.h"

struct model;

/* Shapes and loss settings: what a checkpoint must match. */
struct model_config {
	int V; /* vocabulary */
	int D; /* width */
	int L; /* layers */
	int H; /* heads, Dh = D / H */
	int T; /* sequence length */
	int E; /* experts per layer */
	int K; /* experts per token */
	int F; /* expert hidden width */
	float aux_coef; /* load-balancing loss weight */
};

/* Limits checked by model_config_check (and so by the command line). */
#define MODEL_MAX_V (1 << 20)
#define MODEL_MAX_D 16384
#define MODEL_MAX_L 256
#define MODEL_MAX_T 65536
#define MODEL_MAX_E 256
#define MODEL_MAX_F 65536

/* small test config, demo config and large config of docs/model.md */
void model_config_small(struct model_config *c);
void model_config_demo(struct model_config *c);
void model_config_large(struct model_config *c);
/* 0, or -EINVAL with the reason in err */
int model_config_check(const struct model_config *c, char *err, size_t len);

/* Tensors, in arena order. Per-layer kinds repeat L times. */
enum model_tensor_kind {
	MT_TOK_EMB,
	MT_ATTN_NORM,
	MT_WQ,
	MT_WK,
	MT_WV,
	MT_WO,
	MT_MOE_NORM,
	MT_ROUTER,
	MT_W1,
	MT_W3,
	MT_W2,
	MT_FINAL_NORM,
	MT_W_OUT,
};

#define MODEL_NAME_MAX 48

/*
 * One tensor this rank holds. shape is what it holds: an expert tensor of
 * a rank that holds E / ep experts is [E / ep, ...], its local slot j
 * being the model's expert model_tensor_row(m, t, j); rows is the whole
 * tensor's first dimension (E, or shape[0]).
 */
struct model_tensor {
	char name[MODEL_NAME_MAX]; /* canonical name, e.g. "layers.0.wq" */
	enum model_tensor_kind kind;
	int layer; /* -1 for global tensors */
	int ndim;
	uint64_t shape[3];
	uint64_t rows; /* first dimension of the whole tensor */
	size_t offset; /* in floats from the start of the parameter block */
	size_t n;
	bool decay; /* weight decay applies (matrices, not gains) */
	bool expert; /* w1, w3, w2: one row per expert */
	/* normal draws of model_init_weights before this tensor's first
	 * element, over the whole model: a shard draws its rows alone */
	uint64_t stream;
};

/*
 * What one rank holds (docs/distributed.md): layers [layer_first,
 * layer_first + layer_count), the embedding with layer 0 and the final
 * norm and head with the last layer, and in each held layer E / ep
 * experts, local slot j of layer l holding expert experts[l * E / ep + j]
 * (experts: [L][E / ep]; NULL with ep 1, slot j is expert j). The whole
 * model: layer_count = L, ep = 1 (model_shard_whole).
 */
struct model_shard {
	int layer_first, layer_count;
	int ep;
	const int *experts;
	/*
	 * ZeRO-1: the AdamW moments of range k (0: the dense range, 1: the
	 * experts) are split over zsize[k] ranks, this one holding block
	 * zrank[k] (model_zero_block). zsize 0 or 1: all of them.
	 */
	int zrank[2], zsize[2];
	/* the whole placement, for the checkpoints' /experts: [L, E] the ep
	 * rank holding each expert, over owner_ep ranks (NULL: one holds
	 * all); not owned */
	const int16_t *owner;
	int owner_ep;
};

void model_shard_whole(struct model_shard *s, const struct model_config *c);

/* Pointers into one parameter-shaped block (params, grads, m or v). */
struct model_layer_ptrs {
	float *attn_norm; /* [D] */
	float *wq, *wk, *wv, *wo; /* [D, D] */
	float *moe_norm; /* [D] */
	float *router; /* [D, E] */
	float *w1, *w3; /* [E, D, F] */
	float *w2; /* [E, F, D] */
};

struct model_ptrs {
	float *tok_emb; /* [V, D] */
	struct model_layer_ptrs *layer; /* [L] */
	float *final_norm; /* [D] */
	float *w_out; /* [D, V] */
};

/* Forward activations kept for backward, for B sequences of T tokens. */
struct model_layer_acts {
	float *a; /* [N, D] attn rmsnorm out */
	float *a_rstd; /* [N] */
	float *q, *k, *v; /* [N, D] q and k rotated */
	float *att; /* [B, H, T, T], NULL unless m->att_tt */
	float *ao; /* [N, D] attention out, heads concatenated */
	float *xmid; /* [N, D] residual after attention */
	float *m; /* [N, D] moe rmsnorm out */
	float *m_rstd; /* [N] */
	float *p; /* [N, E] router probabilities */
	float *gate; /* [N, K] */
	int *idx; /* [N, K] */
	int *counts; /* [E] */
	int *gcounts; /* [E] counts summed over data-parallel ranks */
	int *offs; /* [E + 1] */
	int *perm; /* [NK] */
	int *pos; /* [NK] */
	float *xe; /* [NK, D] expert inputs, expert-sorted */
	float *h1, *h3, *hs; /* [NK, F] gate, up, silu(h1) * h3 */
	float *eo; /* [NK, D] expert outputs */
};

struct model_acts {
	int32_t *tokens; /* [N] inputs */
	int32_t *targets; /* [N] next tokens */
	float *x; /* [L + 1, N, D] residual stream entering each layer */
	struct model_layer_acts *layer; /* [L] */
	float *fn; /* [N, D] final rmsnorm out */
	float *fn_rstd; /* [N] */
	float *logits; /* [N, V], then dlogits in backward */
	float *probs; /* [N, V] */
	float *losses; /* [N] */
	float *aux; /* [L] */
	/* backward scratch, reused by every layer */
	float *dx; /* [N, D] */
	float *dmid; /* [N, D] */
	float *dtmp; /* [N, D] */
	float *dq, *dk, *dv, *dao; /* [N, D] */
	float *datt; /* [B, H, T, T], NULL unless m->att_tt */
	float *dp; /* [N, E] */
	float *dr; /* [N, E] */
	float *dgate; /* [N, K] */
	float *dxe, *deo; /* [NK, D] */
	float *dh1, *dh3, *dhs; /* [NK, F] */
};

/*
 * Expert parallelism: computes the experts of layer l for the assignments
 * of the current activation set. forward: from act.layer[l] (m, perm,
 * offs, counts) to act.layer[l].eo [NK, D] in this rank's expert-sorted
 * order, with o the table of the layer's forward products; backward: from
 * act.deo to act.dxe (same order), adding the weight gradients of the
 * experts this rank holds. Errors are the hook's to record (the trainer
 * asks after the pass).
 */
struct model_experts {
	void (*forward)(void *ctx, struct model *m, int l,
			const struct sigma_ops *o);
	void (*backward)(void *ctx, struct model *m, int l);
	void *ctx;
};

struct model {
	struct model_config cfg;
	int B; /* sequences per batch (per micro-batch) */
	const struct sigma_ops *ops;
	bool att_tt; /* the ops' attention uses att and datt (else NULL) */

	/* what this rank holds: the tensors, and expert ids [L][El] */
	struct model_shard shard;
	int El;		  /* experts held per layer: E / shard.ep */
	int *expert_ids;  /* [L * El], NULL with ep 1 */
	bool sharded;	  /* some tensor of the model is not held here */
	int ntensors;
	struct model_tensor *tensors;
	size_t nparams;
	/*
	 * The parameter block holds first the tensors every data-parallel
	 * rank of the stage holds ([0, ndense)), then, with ep > 1, the
	 * experts, which only the ranks of the same ep_rank hold: each
	 * range is reduced over its own group.
	 */
	size_t ndense;
	/*
	 * The moments this rank holds (all, unless model_shard splits them):
	 * parameters [mom_lo[k], mom_hi[k]) of range k, block 0's moments
	 * first, then block 1's, nmom floats in all. zero: some are not here.
	 */
	size_t mom_lo[2], mom_hi[2], nmom;
	bool zero;

	/* one allocation; everything below points into it */
	void *arena;
	size_t arena_bytes;
	float *params, *grads; /* [nparams] each */
	float *m, *v;	       /* [nmom] each */
	struct model_ptrs P, G;
	/* the activation set in use, one of acts[nacts] (model_use_acts):
	 * a pipeline stage keeps one per micro-batch in flight */
	struct model_acts act;
	struct model_acts *acts;
	int nacts;

	/* results of the last forward */
	double ce, aux, loss;

	/*
	 * Precision of the forward matrix products (docs/guardrails.md).
	 * bf16: a table whose products run in bf16 (kernels/bf16.h), NULL
	 * for fp32 only; prec[L + 1]: 1 where layer l (index L: the output
	 * head) uses it; overflow[L + 1]: bf16 outputs of each layer that
	 * overflowed (adds); inject_overflow: test hook, layer + 1 whose next
	 * bf16 forward is made to overflow, 0 none. All set by the guard.
	 */
	const struct sigma_bf16 *bf16;
	uint8_t *prec;
	uint64_t *overflow;
	int inject_overflow;

	/*
	 * Optional: called by model_backward each time the gradients of
	 * the parameters [offset, nparams) are final (after the head, after
	 * each layer from the last, after the embedding with offset 0), so a
	 * data-parallel trainer can start reducing them while the backward
	 * pass goes on. NULL: not called.
	 */
	void (*grad_ready)(void *ctx, size_t offset);
	void *grad_ready_ctx;
	/*
	 * Optional, data parallel over count_ranks ranks of equal batches:
	 * sums expert token counts (host ints [n]: E for each layer of the
	 * forward pass, all in one call after its last layer) over the
	 * ranks in place, so that the load-balancing loss and its gradient
	 * are those of the global batch. NULL or count_ranks <= 1: local
	 * counts.
	 */
	void (*counts_reduce)(void *ctx, int *counts, int n);
	/* Optional: start that sum once the last layer is routed, so that it
	 * travels while the pass goes on; counts_reduce then completes it.
	 * NULL: counts_reduce does all of it. */
	void (*counts_start)(void *ctx, const int *counts, int n);
	void *counts_ctx;
	int count_ranks;
	int *host_counts; /* [L][E]: the counts of one pass, for the call */
	/* this rank's tokens over an even share's (the auto-tuner's uneven
	 * shares; 1 when even): the global counts' f_e is over the whole
	 * batch, so this rank's load-balancing term and its gradient count
	 * by it */
	float count_weight;
	/* Optional: expert parallelism (NULL: every expert computed here). */
	const struct model_experts *experts;
	/*
	 * Optional: the squared gradient norm of the whole model from this
	 * rank's parts, ss[0] over [0, ndense) and ss[1] over [ndense,
	 * nparams), summed over the ranks that hold distinct parts. NULL:
	 * ss[0] + ss[1]. Returns the sum, NAN when the ranks cannot agree.
	 */
	double (*norm_reduce)(void *ctx, const double ss[2]);
	void *norm_ctx;
};

/* AdamW and schedule settings (docs/model.md defaults). */
struct optim_config {
	float lr; /* peak learning rate */
	float lr_min_ratio; /* cosine floor as a fraction of lr (0.1) */
	long warmup; /* linear warm-up steps */
	long steps; /* total steps (end of the cosine) */
	float beta1, beta2, eps;
	float weight_decay;
	float clip; /* global gradient-norm clip, 0 = off */
};

void optim_config_default(struct optim_config *o);

/*
 * Allocate the arena for batch B and lay the tensors out. Parameters are
 * zero until model_init_weights or a checkpoint fills them. Returns 0 or
 * -errno (err says why).
 */
int model_create(struct model **out, const struct model_config *cfg, int B,
		 const struct sigma_ops *ops, char *err, size_t len);
/* The same with nacts activation sets of B sequences each (micro-batches
 * in flight on a pipeline stage); set 0 is in use. */
int model_create_acts(struct model **out, const struct model_config *cfg,
		      int B, int nacts, const struct sigma_ops *ops, char *err,
		      size_t len);
/* The same for the part shard (NULL: the whole model) of cfg. */
int model_create_shard(struct model **out, const struct model_config *cfg,
		       int B, int nacts, const struct model_shard *shard,
		       const struct sigma_ops *ops, char *err, size_t len);
/*
 * The tensor table of a part of cfg without any memory (no ops, no
 * arena): what another rank holds, for the checkpoint code, which reads
 * and writes host buffers of its nparams.
 */
int model_create_layout(struct model **out, const struct model_config *cfg,
			const struct model_shard *shard, char *err,
			size_t len);
/*
 * Bytes model_create_shard allocates for it with ops (parameters,
 * gradients, both moments, nacts activation sets, the T x T attention
 * buffers only where ops use them; ops NULL: counted), without
 * allocating; pbytes gets the bytes of one parameter-shaped block.
 */
size_t model_bytes(const struct model_config *cfg, int B, int nacts,
		   const struct model_shard *shard,
		   const struct sigma_ops *ops, size_t *pbytes);
/* The model's row (expert id, or j) of local row j of t. */
uint64_t model_tensor_row(const struct model *m, const struct model_tensor *t,
			  uint64_t j);
/* Block k of n floats split over size ranks: [*lo, *hi). */
void model_zero_block(size_t n, int k, int size, size_t *lo, size_t *hi);
/*
 * The moments between host buffers of nparams floats (the parameter
 * block's positions, as checkpoints hold them) and the ones this rank
 * holds: load takes its ranges of fm and fv (NULL: zeroes), store puts
 * them into fm and fv and leaves the other positions as they are.
 */
void model_moments_load(struct model *m, const float *fm, const float *fv);
void model_moments_store(const struct model *m, float *fm, float *fv);

/* Make activation set i (0 <= i < nacts) the one in use. */
void model_use_acts(struct model *m, int i);
void model_destroy(struct model *m);

/* Normal(0, 0.02) matrices (Wo, W2 scaled by 1/sqrt(2L)), gains 1: one
 * stream over the whole model, so that every shard holds the same bits
 * as one process does. */
void model_init_weights(struct model *m, uint64_t seed);

/* Find a tensor by canonical name, NULL when absent. */
const struct model_tensor *model_find_tensor(const struct model *m,
					     const char *name);

/*
 * Forward pass on tokens[B*T] (inputs) and targets[B*T] (next tokens),
 * host arrays. Sets m->ce, m->aux, m->loss. Tokens must be < V.
 */
void model_forward(struct model *m, const int32_t *tokens,
		   const int32_t *targets);
/* Zero the gradients, then backpropagate the last forward into them. */
void model_backward(struct model *m);

/*
 * One pipeline stage: layers [l0, l1) of the active set. Forward: with l0
 * = 0 it embeds tokens, otherwise its input must be in model_act_x(m, l0);
 * with l1 = L it computes the head and sets m->ce, otherwise m->ce = 0 and
 * the output is model_act_x(m, l1). m->aux is the sum over [l0, l1) of the
 * layers' load-balancing losses over L (so the stages' values add up), and
 * m->loss = m->ce + aux_coef * m->aux. targets are read only with l1 = L.
 *
 * Backward adds into the gradients (zero them once per step): the loss is
 * scaled by loss_scale (1 / micro-batches for a mean over them). With l1 <
 * L the gradient of the output must be in m->act.dx; with l0 > 0 the
 * gradient of the input is left there.
 */
void model_forward_part(struct model *m, int l0, int l1,
			const int32_t *tokens, const int32_t *targets);
void model_backward_part(struct model *m, int l0, int l1, float loss_scale);
/* The residual stream entering layer l ([N, D], l = L: the head's input)
 * of the active set (its running gradient is m->act.dx). */
float *model_act_x(struct model *m, int l);
/* Zero the gradients. */
void model_zero_grads(struct model *m);
/* Global gradient L2 norm. */
double model_grad_norm(struct model *m);

/* Learning rate for 0-based step s. */
float optim_lr(const struct optim_config *o, long s);
/*
 * Clip (by norm gnorm), then one AdamW update at 1-based step t with
 * learning rate lr. Returns the clip scale used.
 */
float optim_step(struct model *m, const struct optim_config *o, double gnorm,
		 float lr, long t);

/* Model FLOPs per token for training: 6 x active params + attention. */
double model_flops_per_token(const struct model_config *c);
/* Active parameters per token (matrices a token passes through). */
double model_active_params(const struct model_config *c);

#endif /* SIGMA_TRAIN_MODEL_H */
