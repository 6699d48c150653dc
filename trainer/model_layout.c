/*
 * model_layout.c - the model's memory (docs/model.md): its configurations,
 * the one arena (four parameter-shaped blocks: params, grads, m, v, then
 * the activations for a batch of B x T tokens), the tensor table and a
 * shard's layout, the weights' initialisation and the moments' copies.
 * The arithmetic on it is model.c's.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sigma.h"
#include "model.h"
#include "rng.h"

#define ALIGN_FLOATS 16 /* 64 bytes */

void model_config_small(struct model_config *c)
{
	*c = (struct model_config){ .V = 256, .D = 64, .L = 2, .H = 4,
				    .T = 32, .E = 4, .K = 2, .F = 128,
				    .aux_coef = 0.01f };
}

void model_config_demo(struct model_config *c)
{
	*c = (struct model_config){ .V = 256, .D = 256, .L = 4, .H = 8,
				    .T = 256, .E = 8, .K = 2, .F = 512,
				    .aux_coef = 0.01f };
}

/* 32 experts of 512 x 2048: 407 M parameters, 6.5 GB of weights,
 * gradients and moments, which only fit on a rank in parts */
void model_config_large(struct model_config *c)
{
	*c = (struct model_config){ .V = 256, .D = 512, .L = 4, .H = 8,
				    .T = 128, .E = 32, .K = 2, .F = 2048,
				    .aux_coef = 0.01f };
}

int model_config_check(const struct model_config *c, char *err, size_t len)
{
#define RANGE(f, lo, hi)                                                      \
	do {                                                                  \
		if (c->f < (lo) || c->f > (hi))                               \
			return sigma_set_err(err, len, EINVAL,                \
					     #f " = %d is out of range [%d, %d]", \
					     c->f, (lo), (hi));               \
	} while (0)
	RANGE(V, 2, MODEL_MAX_V);
	RANGE(D, 2, MODEL_MAX_D);
	RANGE(L, 1, MODEL_MAX_L);
	RANGE(H, 1, c->D);
	RANGE(T, 1, MODEL_MAX_T);
	RANGE(E, 1, MODEL_MAX_E);
	RANGE(K, 1, c->E);
	RANGE(F, 1, MODEL_MAX_F);
#undef RANGE
	if (c->D % c->H)
		return sigma_set_err(err, len, EINVAL,
				     "D = %d is not a multiple of H = %d",
				     c->D, c->H);
	if ((c->D / c->H) % 2)
		return sigma_set_err(err, len, EINVAL,
				     "head dim D/H = %d must be even (rotary)",
				     c->D / c->H);
	if (!(c->aux_coef >= 0.0f && c->aux_coef <= 100.0f))
		return sigma_set_err(err, len, EINVAL,
				     "aux_coef = %g is out of range [0, 100]",
				     (double)c->aux_coef);
	return 0;
}

void optim_config_default(struct optim_config *o)
{
	*o = (struct optim_config){ .lr = 3e-3f, .lr_min_ratio = 0.1f,
				    .warmup = 20, .steps = 1000,
				    .beta1 = 0.9f, .beta2 = 0.95f,
				    .eps = 1e-8f, .weight_decay = 0.1f,
				    .clip = 1.0f };
}

static size_t align_up(size_t n)
{
	return (n + ALIGN_FLOATS - 1) / ALIGN_FLOATS * ALIGN_FLOATS;
}

/* ---- layout --------------------------------------------------------------- */

void model_shard_whole(struct model_shard *s, const struct model_config *c)
{
	*s = (struct model_shard){ .layer_first = 0, .layer_count = c->L,
				   .ep = 1, .experts = NULL };
}

/* where layout() is: the next offsets of both ranges, the stream */
struct layout_pos {
	size_t dense, expert; /* floats of each range so far */
	uint64_t stream;      /* normal draws so far */
};

static bool is_expert_kind(enum model_tensor_kind k)
{
	return k == MT_W1 || k == MT_W3 || k == MT_W2;
}

static bool holds_layer(const struct model *m, int l)
{
	return l < 0 ? true
		     : l >= m->shard.layer_first &&
			       l < m->shard.layer_first + m->shard.layer_count;
}

/* the tensor of the whole model (d0 x d1 x d2), added when held */
static void add_tensor(struct model *m, enum model_tensor_kind kind, int l,
		       const char *name, int ndim, uint64_t d0, uint64_t d1,
		       uint64_t d2, bool decay, struct layout_pos *pos)
{
	uint64_t whole = d0 * (ndim > 1 ? d1 : 1) * (ndim > 2 ? d2 : 1);
	bool held = holds_layer(m, l);
	struct model_tensor *t;

	if (kind == MT_TOK_EMB)
		held = m->shard.layer_first == 0;
	else if (kind == MT_FINAL_NORM || kind == MT_W_OUT)
		held = m->shard.layer_first + m->shard.layer_count == m->cfg.L;
	if (!held) {
		if (ndim > 1)
			pos->stream += whole;
		return;
	}
	t = &m->tensors[m->ntensors++];
	if (l >= 0)
		snprintf(t->name, sizeof(t->name), "layers.%d.%s", l, name);
	else
		sigma_strlcpy(t->name, name, sizeof(t->name));
	t->kind = kind;
	t->layer = l;
	t->ndim = ndim;
	t->expert = is_expert_kind(kind);
	t->rows = d0;
	t->shape[0] = t->expert ? (uint64_t)m->El : d0;
	t->shape[1] = d1;
	t->shape[2] = d2;
	t->n = (size_t)t->shape[0] * (ndim > 1 ? d1 : 1) * (ndim > 2 ? d2 : 1);
	t->decay = decay;
	t->stream = pos->stream;
	if (ndim > 1)
		pos->stream += whole;
	/* with ep > 1 the experts are a range of their own, placed after
	 * the dense one (offsets shifted once it is known) */
	if (t->expert && m->shard.ep > 1) {
		t->offset = pos->expert;
		pos->expert += align_up(t->n);
	} else {
		t->offset = pos->dense;
		pos->dense += align_up(t->n);
	}
}

static size_t layout(struct model *m)
{
	const struct model_config *c = &m->cfg;
	struct layout_pos pos = { 0, 0, 0 };
	uint64_t D = c->D, E = c->E, F = c->F, V = c->V;

	m->ntensors = 0;
	add_tensor(m, MT_TOK_EMB, -1, "tok_emb", 2, V, D, 0, true, &pos);
	for (int l = 0; l < c->L; l++) {
		add_tensor(m, MT_ATTN_NORM, l, "attn_norm", 1, D, 0, 0, false,
			   &pos);
		add_tensor(m, MT_WQ, l, "wq", 2, D, D, 0, true, &pos);
		add_tensor(m, MT_WK, l, "wk", 2, D, D, 0, true, &pos);
		add_tensor(m, MT_WV, l, "wv", 2, D, D, 0, true, &pos);
		add_tensor(m, MT_WO, l, "wo", 2, D, D, 0, true, &pos);
		add_tensor(m, MT_MOE_NORM, l, "moe_norm", 1, D, 0, 0, false,
			   &pos);
		add_tensor(m, MT_ROUTER, l, "router", 2, D, E, 0, true, &pos);
		add_tensor(m, MT_W1, l, "w1", 3, E, D, F, true, &pos);
		add_tensor(m, MT_W3, l, "w3", 3, E, D, F, true, &pos);
		add_tensor(m, MT_W2, l, "w2", 3, E, F, D, true, &pos);
	}
	add_tensor(m, MT_FINAL_NORM, -1, "final_norm", 1, D, 0, 0, false, &pos);
	add_tensor(m, MT_W_OUT, -1, "w_out", 2, D, V, 0, true, &pos);
	m->ndense = pos.dense;
	for (int i = 0; i < m->ntensors; i++)
		if (m->tensors[i].expert && m->shard.ep > 1)
			m->tensors[i].offset += pos.dense;
	return pos.dense + pos.expert;
}

uint64_t model_tensor_row(const struct model *m, const struct model_tensor *t,
			  uint64_t j)
{
	if (!t->expert || !m->expert_ids)
		return j;
	return (uint64_t)m->expert_ids[(size_t)t->layer * m->El + j];
}

static void carve_ptrs(struct model *m, struct model_ptrs *p, float *base)
{
	for (int i = 0; i < m->ntensors; i++) {
		const struct model_tensor *t = &m->tensors[i];
		float *x = base + t->offset;
		struct model_layer_ptrs *lp = t->layer >= 0 ? &p->layer[t->layer]
							    : NULL;

		switch (t->kind) {
		case MT_TOK_EMB: p->tok_emb = x; break;
		case MT_FINAL_NORM: p->final_norm = x; break;
		case MT_W_OUT: p->w_out = x; break;
		case MT_ATTN_NORM: lp->attn_norm = x; break;
		case MT_WQ: lp->wq = x; break;
		case MT_WK: lp->wk = x; break;
		case MT_WV: lp->wv = x; break;
		case MT_WO: lp->wo = x; break;
		case MT_MOE_NORM: lp->moe_norm = x; break;
		case MT_ROUTER: lp->router = x; break;
		case MT_W1: lp->w1 = x; break;
		case MT_W3: lp->w3 = x; break;
		case MT_W2: lp->w2 = x; break;
		}
	}
}

/* a bump allocator over the arena; with base NULL it only counts */
struct carver {
	char *base;
	size_t used;
};

static void *carve(struct carver *cv, size_t bytes)
{
	void *p = cv->base ? cv->base + cv->used : NULL;

	cv->used += (bytes + 63) & ~(size_t)63;
	return p;
}

#define CARVE_F(cv, n) ((float *)carve((cv), sizeof(float) * (size_t)(n)))
#define CARVE_I(cv, n) ((int *)carve((cv), sizeof(int) * (size_t)(n)))

static void carve_acts(struct model *m, struct model_acts *a,
		       struct carver *cv)
{
	const struct model_config *c = &m->cfg;
	size_t N = (size_t)m->B * c->T, NK = N * c->K;
	size_t D = c->D, E = c->E, F = c->F, V = c->V;
	size_t TT = m->att_tt ? (size_t)m->B * c->H * c->T * c->T : 0;

	a->tokens = (int32_t *)carve(cv, sizeof(int32_t) * N);
	a->targets = (int32_t *)carve(cv, sizeof(int32_t) * N);
	a->x = CARVE_F(cv, (c->L + 1) * N * D);
	for (int l = 0; l < c->L; l++) {
		struct model_layer_acts *la = &a->layer[l];

		la->a = CARVE_F(cv, N * D);
		la->a_rstd = CARVE_F(cv, N);
		la->q = CARVE_F(cv, N * D);
		la->k = CARVE_F(cv, N * D);
		la->v = CARVE_F(cv, N * D);
		la->att = TT ? CARVE_F(cv, TT) : NULL;
		la->ao = CARVE_F(cv, N * D);
		la->xmid = CARVE_F(cv, N * D);
		la->m = CARVE_F(cv, N * D);
		la->m_rstd = CARVE_F(cv, N);
		la->p = CARVE_F(cv, N * E);
		la->gate = CARVE_F(cv, N * c->K);
		la->idx = CARVE_I(cv, N * c->K);
		la->counts = CARVE_I(cv, E);
		la->gcounts = CARVE_I(cv, E);
		la->offs = CARVE_I(cv, E + 1);
		la->perm = CARVE_I(cv, NK);
		la->pos = CARVE_I(cv, NK);
		la->xe = CARVE_F(cv, NK * D);
		la->h1 = CARVE_F(cv, NK * F);
		la->h3 = CARVE_F(cv, NK * F);
		la->hs = CARVE_F(cv, NK * F);
		la->eo = CARVE_F(cv, NK * D);
	}
	a->fn = CARVE_F(cv, N * D);
	a->fn_rstd = CARVE_F(cv, N);
	a->logits = CARVE_F(cv, N * V);
	a->probs = CARVE_F(cv, N * V);
	a->losses = CARVE_F(cv, N);
	a->aux = CARVE_F(cv, c->L);
	a->dx = CARVE_F(cv, N * D);
	a->dmid = CARVE_F(cv, N * D);
	a->dtmp = CARVE_F(cv, N * D);
	a->dq = CARVE_F(cv, N * D);
	a->dk = CARVE_F(cv, N * D);
	a->dv = CARVE_F(cv, N * D);
	a->dao = CARVE_F(cv, N * D);
	a->datt = TT ? CARVE_F(cv, TT) : NULL;
	a->dp = CARVE_F(cv, N * E);
	a->dr = CARVE_F(cv, N * E);
	a->dgate = CARVE_F(cv, N * c->K);
	a->dxe = CARVE_F(cv, NK * D);
	a->deo = CARVE_F(cv, NK * D);
	a->dh1 = CARVE_F(cv, NK * F);
	a->dh3 = CARVE_F(cv, NK * F);
	a->dhs = CARVE_F(cv, NK * F);
}

int model_create(struct model **out, const struct model_config *cfg, int B,
		 const struct sigma_ops *ops, char *err, size_t len)
{
	return model_create_acts(out, cfg, B, 1, ops, err, len);
}

int model_create_acts(struct model **out, const struct model_config *cfg,
		      int B, int nacts, const struct sigma_ops *ops, char *err,
		      size_t len)
{
	return model_create_shard(out, cfg, B, nacts, NULL, ops, err, len);
}

/* the shard's numbers against cfg: 0 or -EINVAL */
static int shard_check(const struct model_config *cfg,
		       const struct model_shard *s, char *err, size_t len)
{
	if (s->layer_first < 0 || s->layer_count < 1 ||
	    s->layer_first + s->layer_count > cfg->L)
		return sigma_set_err(err, len, EINVAL,
				     "layers [%d, %d) of %d", s->layer_first,
				     s->layer_first + s->layer_count, cfg->L);
	for (int k = 0; k < 2; k++)
		if (s->zsize[k] < 0 || s->zsize[k] > 65536 || s->zrank[k] < 0 ||
		    (s->zsize[k] > 0 && s->zrank[k] >= s->zsize[k]))
			return sigma_set_err(err, len, EINVAL,
					     "moment block %d of %d",
					     s->zrank[k], s->zsize[k]);
	if (s->ep < 1 || cfg->E % s->ep || (s->ep > 1 && !s->experts))
		return sigma_set_err(err, len, EINVAL,
				     "%d experts over ep %d", cfg->E, s->ep);
	for (int i = 0; s->experts && i < cfg->L * (cfg->E / s->ep); i++)
		if (s->experts[i] < 0 || s->experts[i] >= cfg->E)
			return sigma_set_err(err, len, EINVAL,
					     "expert %d of %d", s->experts[i],
					     cfg->E);
	return 0;
}

void model_zero_block(size_t n, int k, int size, size_t *lo, size_t *hi)
{
	if (size <= 1) {
		*lo = 0, *hi = n;
		return;
	}
	/* balanced: the blocks differ by one float at most */
	*lo = (size_t)((unsigned __int128)n * (unsigned)k / (unsigned)size);
	*hi = (size_t)((unsigned __int128)n * (unsigned)(k + 1) /
		       (unsigned)size);
}

/* the moments m holds, from its shard's blocks */
static void moments_layout(struct model *m)
{
	const size_t base[2] = { 0, m->ndense };
	const size_t n[2] = { m->ndense, m->nparams - m->ndense };

	m->nmom = 0;
	for (int k = 0; k < 2; k++) {
		model_zero_block(n[k], m->shard.zrank[k], m->shard.zsize[k],
				 &m->mom_lo[k], &m->mom_hi[k]);
		m->mom_lo[k] += base[k];
		m->mom_hi[k] += base[k];
		m->nmom += m->mom_hi[k] - m->mom_lo[k];
		m->zero |= m->shard.zsize[k] > 1;
	}
	m->sharded |= m->zero;
}

/* m with its tensor table for shard (NULL: whole); no arena */
static int layout_new(struct model **out, const struct model_config *cfg,
		      const struct model_shard *shard, char *err, size_t len)
{
	struct model_shard whole;
	struct model *m;
	int rc;

	*out = NULL;
	rc = model_config_check(cfg, err, len);
	if (rc)
		return rc;
	if (!shard) {
		model_shard_whole(&whole, cfg);
		shard = &whole;
	}
	rc = shard_check(cfg, shard, err, len);
	if (rc)
		return rc;
	m = calloc(1, sizeof(*m));
	if (!m)
		return sigma_set_err(err, len, ENOMEM, "out of memory");
	m->cfg = *cfg;
	m->shard = *shard;
	m->El = cfg->E / shard->ep;
	m->sharded = shard->ep > 1 || shard->layer_count < cfg->L;
	m->tensors = calloc(3 + 10 * (size_t)cfg->L, sizeof(*m->tensors));
	if (!m->tensors)
		goto nomem;
	if (shard->experts) {
		size_t n = (size_t)cfg->L * m->El;

		m->expert_ids = malloc(sizeof(int) * n);
		if (!m->expert_ids)
			goto nomem;
		memcpy(m->expert_ids, shard->experts, sizeof(int) * n);
	}
	m->shard.experts = m->expert_ids;
	m->nparams = layout(m);
	moments_layout(m);
	*out = m;
	return 0;
nomem:
	model_destroy(m);
	return sigma_set_err(err, len, ENOMEM, "out of memory");
}

int model_create_layout(struct model **out, const struct model_config *cfg,
			const struct model_shard *shard, char *err,
			size_t len)
{
	return layout_new(out, cfg, shard, err, len);
}

/* the activation sets, counted (cv->base NULL) or carved */
static void carve_all_acts(struct model *m, struct carver *cv)
{
	cv->used = 2 * sizeof(float) * (m->nparams + m->nmom);
	for (int i = 0; i < m->nacts; i++)
		carve_acts(m, &m->acts[i], cv);
}

/* 1 when ops' attention uses the T x T buffers, 0 when not, or -errno
 * of a shape it refuses (err says why); no ops: 1 */
static int attention_tt(const struct sigma_ops *ops,
			const struct model_config *cfg,
			const struct model_shard *shard, int B, int nacts,
			char *err, size_t len)
{
	/* a buffer per layer of this rank and activation set, and one for
	 * the gradient */
	long nl = shard ? shard->layer_count : cfg->L;
	long nb = (long)nacts * nl + 1;
	int nbuf = nb > INT_MAX ? INT_MAX : (int)nb;

	if (!ops || !ops->attention_plan)
		return 1;
	return ops->attention_plan(B, cfg->T, cfg->H, cfg->D / cfg->H, nbuf,
				   err, len);
}

size_t model_bytes(const struct model_config *cfg, int B, int nacts,
		   const struct model_shard *shard,
		   const struct sigma_ops *ops, size_t *pbytes)
{
	struct model_layer_acts *la;
	struct model_acts a = { 0 };
	struct carver cv = { 0 };
	struct model *m;
	size_t n;

	if (layout_new(&m, cfg, shard, NULL, 0))
		return 0;
	la = calloc(cfg->L, sizeof(*la));
	if (!la) {
		model_destroy(m);
		return 0;
	}
	a.layer = la;
	m->B = B;
	m->count_weight = 1.0f;
	m->att_tt = attention_tt(ops, cfg, shard, B, nacts, NULL, 0) > 0;
	cv.used = 2 * sizeof(float) * (m->nparams + m->nmom);
	for (int i = 0; i < nacts; i++)
		carve_acts(m, &a, &cv);
	n = cv.used;
	if (pbytes)
		*pbytes = sizeof(float) * m->nparams;
	free(la);
	model_destroy(m);
	return n;
}

int model_create_shard(struct model **out, const struct model_config *cfg,
		       int B, int nacts, const struct model_shard *shard,
		       const struct sigma_ops *ops, char *err, size_t len)
{
	struct model *m;
	struct carver cv = { 0 };
	int rc;

	*out = NULL;
	rc = model_config_check(cfg, err, len);
	if (rc)
		return rc;
	if (B < 1 || (size_t)B * cfg->T > (1u << 30) / (size_t)cfg->K)
		return sigma_set_err(err, len, EINVAL,
				     "batch %d x T %d is out of range", B,
				     cfg->T);
	if (nacts < 1 || nacts > 4096)
		return sigma_set_err(err, len, EINVAL,
				     "%d activation sets is out of range [1, 4096]",
				     nacts);
	rc = layout_new(&m, cfg, shard, err, len);
	if (rc)
		return rc;
	m->B = B;
	m->count_weight = 1.0f;
	m->ops = ops;
	m->P.layer = calloc(cfg->L, sizeof(*m->P.layer));
	m->G.layer = calloc(cfg->L, sizeof(*m->G.layer));
	m->acts = calloc(nacts, sizeof(*m->acts));
	m->host_counts = calloc((size_t)cfg->L * cfg->E, sizeof(int));
	if (!m->P.layer || !m->G.layer || !m->acts || !m->host_counts) {
		rc = sigma_set_err(err, len, ENOMEM, "out of memory");
		goto out_free;
	}
	m->nacts = nacts;
	for (int i = 0; i < nacts; i++) {
		m->acts[i].layer = calloc(cfg->L, sizeof(*m->acts[i].layer));
		if (!m->acts[i].layer) {
			rc = sigma_set_err(err, len, ENOMEM, "out of memory");
			goto out_free;
		}
	}
	/* the T x T buffers only for an attention that uses them */
	rc = attention_tt(ops, cfg, shard, B, nacts, err, len);
	if (rc < 0)
		goto out_free;
	m->att_tt = rc > 0;
	/* count, allocate, carve for real */
	carve_all_acts(m, &cv);
	m->arena_bytes = cv.used;
	m->arena = ops->alloc(m->arena_bytes);
	if (!m->arena) {
		rc = sigma_set_err(err, len, ENOMEM,
				   "cannot allocate the %zu-byte arena",
				   m->arena_bytes);
		goto out_free;
	}
	m->params = (float *)m->arena;
	m->grads = m->params + m->nparams;
	m->m = m->grads + m->nparams;
	m->v = m->m + m->nmom;
	cv.base = m->arena;
	carve_all_acts(m, &cv);
	m->act = m->acts[0];
	carve_ptrs(m, &m->P, m->params);
	carve_ptrs(m, &m->G, m->grads);
	*out = m;
	return 0;

out_free:
	model_destroy(m);
	return rc;
}

void model_destroy(struct model *m)
{
	if (!m)
		return;
	if (m->arena)
		m->ops->free(m->arena);
	free(m->tensors);
	free(m->expert_ids);
	free(m->P.layer);
	free(m->G.layer);
	for (int i = 0; m->acts && i < m->nacts; i++)
		free(m->acts[i].layer);
	free(m->acts);
	free(m->host_counts);
	free(m);
}

void model_use_acts(struct model *m, int i)
{
	m->act = m->acts[i];
}

float *model_act_x(struct model *m, int l)
{
	return m->act.x + (size_t)l * m->B * m->cfg.T * m->cfg.D;
}

void model_zero_grads(struct model *m)
{
	m->ops->zero(m->grads, m->nparams);
}

const struct model_tensor *model_find_tensor(const struct model *m,
					     const char *name)
{
	for (int i = 0; i < m->ntensors; i++)
		if (!strcmp(m->tensors[i].name, name))
			return &m->tensors[i];
	return NULL;
}

/* the 0.02-scaled normal draws of rows of t, from its place in the
 * stream of seed (two uniform draws per value) */
static void init_tensor(const struct model *m, const struct model_tensor *t,
			uint64_t seed, float *x)
{
	double sd = 0.02;
	size_t row = t->n / t->shape[0];

	if (t->kind == MT_WO || t->kind == MT_W2)
		sd *= 1.0 / sqrt(2.0 * m->cfg.L);
	for (uint64_t j = 0; j < t->shape[0]; j++) {
		uint64_t at = t->stream + model_tensor_row(m, t, j) * row;
		uint64_t st = seed + 2 * at * 0x9e3779b97f4a7c15ULL;

		for (size_t k = 0; k < row; k++)
			x[j * row + k] = (float)(sd * rng_normal(&st));
	}
}

void model_init_weights(struct model *m, uint64_t seed)
{
	float *host = malloc(sizeof(float) * m->nparams);

	if (!host)
		abort();
	memset(host, 0, sizeof(float) * m->nparams);
	for (int i = 0; i < m->ntensors; i++) {
		const struct model_tensor *t = &m->tensors[i];
		float *x = host + t->offset;

		if (t->ndim == 1)
			for (size_t j = 0; j < t->n; j++)
				x[j] = 1.0f;
		else
			init_tensor(m, t, seed, x);
	}
	m->ops->from_host(m->params, host, sizeof(float) * m->nparams);
	model_moments_load(m, NULL, NULL);
	free(host);
}

void model_moments_load(struct model *m, const float *fm, const float *fv)
{
	size_t mo = 0;

	for (int k = 0; k < 2; k++) {
		size_t n = m->mom_hi[k] - m->mom_lo[k];

		if (!n)
			continue;
		if (fm) {
			m->ops->from_host(m->m + mo, fm + m->mom_lo[k],
					  sizeof(float) * n);
			m->ops->from_host(m->v + mo, fv + m->mom_lo[k],
					  sizeof(float) * n);
		} else {
			m->ops->zero(m->m + mo, n);
			m->ops->zero(m->v + mo, n);
		}
		mo += n;
	}
}

void model_moments_store(const struct model *m, float *fm, float *fv)
{
	size_t mo = 0;

	for (int k = 0; k < 2; k++) {
		size_t n = m->mom_hi[k] - m->mom_lo[k];

		if (!n)
			continue;
		m->ops->to_host(fm + m->mom_lo[k], m->m + mo, sizeof(float) * n);
		m->ops->to_host(fv + m->mom_lo[k], m->v + mo, sizeof(float) * n);
		mo += n;
	}
}
