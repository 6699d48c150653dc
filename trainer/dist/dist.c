/*
 * dist.c - what every layout shares (dist.h): the bootstrap, the layout
 * and its communicators (host ones, and NCCL twins for a model on a GPU),
 * the model's hooks, gradient buckets overlapped with the backward pass,
 * broadcasts and scalar reductions. The expert exchange is in dist_ep.c,
 * the pipeline schedule in dist_pipe.c.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sigma.h"
#include "select.h"
#include "dist_impl.h"
#include "tags.h"

/* the dp, ep, pp and expert_dp groups of world (NULL where the layout
 * has none) */
static int split_groups(struct dist *d, struct comm *world, struct comm **dp,
			struct comm **ep, struct comm **pp, struct comm **edp)
{
	static const enum layout_group g[4] = { LAYOUT_GROUP_DP,
						LAYOUT_GROUP_EP,
						LAYOUT_GROUP_PP,
						LAYOUT_GROUP_EXPERT_DP };
	struct comm **out[4] = { dp, ep, pp, edp };
	bool want[4] = { true, d->lp.ep > 1, d->lp.pp > 1,
			 d->lp.ep > 1 && d->lp.dp > d->lp.ep };
	int color, key, rc = 0;

	for (int i = 0; i < 4 && rc == 0; i++) {
		*out[i] = NULL;
		if (!want[i])
			continue;
		rc = layout_group_split(&d->lp, d->rank, g[i], &color, &key);
		if (rc == 0)
			rc = comm_split(world, color, key,
					layout_group_name(g[i]), out[i]);
	}
	return rc;
}

int dist_init(struct dist *d, int dp, int ep, int pp, int micro, int E, int L,
	      long batch, char *err, size_t len)
{
	struct comm_options o;
	enum comm_backend be;
	char why[512];
	int rc;

	memset(d, 0, sizeof(*d));
	d->bucket = DIST_BUCKET_FLOATS;
	/* MPI before the bootstrap's PMIx client: Open MPI 5 needs it so */
	rc = comm_start(why, sizeof(why));
	if (rc)
		return sigma_set_err(err, len, -rc, "%s", why);
	rc = boot_init(&d->boot, why, sizeof(why));
	if (rc) {
		comm_stop();
		return sigma_set_err(err, len, -rc, "bootstrap: %s", why);
	}
	d->rank = d->boot.rank;
	d->size = d->boot.size;
	d->lp.world = d->size;
	d->lp.pp = pp > 0 ? pp : 1;
	d->lp.dp = dp > 0 ? dp : d->size / d->lp.pp;
	d->lp.ep = ep > 0 ? ep : 1;
	d->lp.E = E;
	d->lp.L = L;
	d->lp.batch = batch;
	d->lp.micro = micro > 0 ? micro : 1;
	d->micro = d->lp.micro;
	d->weight = 1.0f;
	rc = layout_check(&d->lp, why, sizeof(why));
	if (rc) {
		sigma_set_err(err, len, EINVAL, "layout: %s", why);
		goto fail;
	}
	rc = layout_coords(&d->lp, d->rank, &d->me);
	if (rc) {
		sigma_set_err(err, len, EINVAL, "layout: bad rank %d", d->rank);
		goto fail;
	}
	rc = comm_options_default(&o, why, sizeof(why));
	if (rc) {
		sigma_set_err(err, len, -rc, "%s", why);
		goto fail;
	}
	be = d->size > 1 ? COMM_MPI : COMM_SELF;
	if (!comm_backend_available(be)) {
		rc = -ENOTSUP;
		sigma_set_err(
		    err, len, ENOTSUP,
		    "a job of %d ranks needs the MPI back end, which this build lacks",
		    d->size);
		goto fail;
	}
	if (o.timeout_s > 0) {
		rc = comm_watchdog_start(o.timeout_s);
		if (rc) {
			sigma_set_err(err, len, -rc,
				      "cannot start the watchdog: %s",
				      strerror(-rc));
			goto fail;
		}
	}
	rc = comm_create(&d->world, be, &d->boot, &o, why, sizeof(why));
	if (rc) {
		sigma_set_err(err, len, -rc, "%s", why);
		goto fail;
	}
	rc = split_groups(d, d->world, &d->dp, &d->ep, &d->pp, &d->edp);
	if (rc) {
		sigma_set_err(err, len, -rc, "cannot make the groups: %s",
			      strerror(-rc));
		goto fail;
	}
	/* tensors travel with the host communicators until dist_attach
	 * knows where the model lives */
	d->tworld = d->world, d->tdp = d->dp, d->tep = d->ep, d->tpp = d->pp;
	d->tedp = d->edp;
	rc = dist_pipe_plan(d, err, len);
	if (rc == 0)
		rc = dist_ep_plan(d, err, len);
	if (rc)
		goto fail;
	return 0;
fail:
	dist_fini(d);
	return rc;
}

/* release the device communicators, and point the tensor ones back at
 * the host's */
static void device_comms_fini(struct dist *d)
{
	if (d->tworld != d->world) { /* NCCL ones of their own */
		comm_destroy(d->tedp);
		comm_destroy(d->tpp);
		comm_destroy(d->tep);
		comm_destroy(d->tdp);
		comm_destroy(d->tworld);
	}
	d->tworld = d->world, d->tdp = d->dp, d->tep = d->ep, d->tpp = d->pp;
	d->tedp = d->edp;
}

/* fence: one last barrier over the job once the communicators are gone */
static void teardown(struct dist *d, bool fence)
{
	if (d->req.active)
		(void)comm_wait(&d->req);
	if (d->creq.active)
		(void)comm_wait(&d->creq);
	dist_ep_fini(d);
	dist_zero_fini(d);
	free(d->counts_f);
	d->counts_f = NULL;
	free(d->routed);
	d->routed = NULL;
	if (d->ops)
		d->ops->free(d->probe);
	d->probe = NULL;
	d->nprobe = 0;
	device_comms_fini(d);
	dist_pipe_fini(d);
	comm_destroy(d->edp);
	comm_destroy(d->pp);
	comm_destroy(d->ep);
	comm_destroy(d->dp);
	comm_destroy(d->world);
	d->dp = d->world = d->ep = d->pp = d->edp = NULL;
	d->tdp = d->tworld = d->tep = d->tpp = d->tedp = NULL;
	if (fence && d->size > 1)
		(void)boot_fence(&d->boot); /* the watchdog still watches */
	comm_watchdog_stop();
	boot_fini(&d->boot);
	comm_stop();
}

void dist_fini(struct dist *d)
{
	teardown(d, false);
}

void dist_end(struct dist *d)
{
	teardown(d, true);
}

void dist_shard_of(const struct dist *d, int rank, struct model_shard *s,
		   int *experts)
{
	struct layout_coords c;
	int P = d->lp.ep, El = d->lp.E / P;

	(void)layout_coords(&d->lp, rank, &c);
	*s = (struct model_shard){ .layer_first = c.layer_first,
				   .layer_count = c.layer_count,
				   .ep = P,
				   .experts = P > 1 ? experts : NULL,
				   .owner = P > 1 ? d->pl.owner : NULL,
				   .owner_ep = P };
	for (int l = 0; P > 1 && l < d->lp.L; l++)
		memcpy(experts + (size_t)l * El,
		       &d->ep_loc[((size_t)l * P + c.ep_rank) * El],
		       sizeof(int) * (size_t)El);
}

int dist_part_of(const struct dist *d, const struct model *m, int rank,
		 struct model **out, char *err, size_t len)
{
	int *ex = calloc((size_t)m->cfg.L * m->cfg.E, sizeof(int)), rc;
	struct model_shard sh;

	*out = NULL;
	if (!ex)
		return sigma_set_err(err, len, ENOMEM, "out of memory");
	dist_shard_of(d, rank, &sh, ex);
	rc = model_create_layout(out, &m->cfg, &sh, err, len);
	free(ex);
	if (rc == 0)
		(*out)->ops = m->ops; /* its name, for the provenance */
	return rc;
}

int dist_sync_model(struct dist *d, struct model *m, void *state, size_t n)
{
	int rc = 0;

	if (d->size == 1)
		return 0;
	if (m->sharded)
		return -EINVAL;
	if (n)
		rc = comm_bcast(d->world, state, n, COMM_U8, 0);
	if (rc == 0)
		rc = comm_bcast(d->tworld, m->params, m->nparams, COMM_F32, 0);
	if (rc == 0)
		rc = comm_bcast(d->tworld, m->m, m->nparams, COMM_F32, 0);
	if (rc == 0)
		rc = comm_bcast(d->tworld, m->v, m->nparams, COMM_F32, 0);
	return rc;
}

int dist_bcast_int(struct dist *d, int *v)
{
	int32_t x = *v;
	int rc;

	if (d->size == 1)
		return 0;
	rc = comm_bcast(d->world, &x, 1, COMM_I32, 0);
	*v = x;
	return rc;
}

int dist_bcast_bytes(struct dist *d, void *buf, size_t n)
{
	if (d->size == 1)
		return 0;
	return comm_bcast(d->world, buf, n, COMM_U8, 0);
}

static double on_norm(void *ctx, const double ss[2]);

/* the counts on the wire as floats: 0, or -ENOMEM (a model's counts
 * that do not fit) */
static int counts_load(struct dist *d, const int *counts, int n)
{
	if (!d->counts_f || n > d->ncounts_f)
		return -ENOMEM;
	for (int e = 0; e < n; e++)
		d->counts_f[e] = (float)counts[e]; /* exact below 2^24 */
	return 0;
}

/* the sum started once the pass's last layer is routed */
static void on_counts_start(void *ctx, const int *counts, int n)
{
	struct dist *d = ctx;
	uint64_t t0;
	int rc;

	if (d->fwd_err || d->creq.active)
		return;
	rc = counts_load(d, counts, n);
	t0 = dist_now_ns();
	if (rc == 0)
		rc = comm_iallreduce_f32(d->dp, d->counts_f, (size_t)n,
					 &d->creq);
	dist_comm_done(d, DIST_C_ALLREDUCE, t0);
	if (rc)
		d->fwd_err = rc;
}

/* the sum, started or not: completed, into counts */
static void on_counts(void *ctx, int *counts, int n)
{
	struct dist *d = ctx;
	float *f = d->counts_f;
	uint64_t t0 = dist_now_ns();
	int rc;

	if (d->creq.active)
		rc = comm_wait(&d->creq);
	else if (d->fwd_err)
		return;
	else if ((rc = counts_load(d, counts, n)) == 0)
		rc = comm_allreduce_f32(d->dp, f, (size_t)n);
	dist_comm_done(d, DIST_C_ALLREDUCE, t0);
	if (rc && !d->fwd_err)
		d->fwd_err = rc;
	if (d->fwd_err)
		return;
	for (int e = 0; e < n; e++)
		counts[e] = (int)f[e];
	if (d->routed && d->routed_on) {
		float *r = d->routed + (size_t)d->me.layer_first * d->lp.E;

		for (int e = 0; e < n; e++)
			r[e] += f[e];
	}
}

/* What names one GPU across the job: the node and the device's PCI
 * address. */
#define DEVICE_ID_MAX (BOOT_NODE_MAX + 64)

/*
 * NCCL refuses two ranks on one GPU, and its refusal would look like a
 * peer's failure: every rank learns every rank's GPU (over the host
 * world), and all refuse alike, naming the pair, before NCCL starts.
 */
static int device_unique(struct dist *d, char *err, size_t len)
{
	size_t n = (size_t)d->size;
	char mine[DEVICE_ID_MAX] = "", *all, pci[32];
	int rc;

	all = calloc(n, DEVICE_ID_MAX);
	if (!all)
		return sigma_set_err(err, len, ENOMEM, "out of memory");
	if (sigma_ops_device_id(d->ops, pci, sizeof(pci)))
		sigma_strlcpy(pci, "unknown", sizeof(pci));
	snprintf(mine, sizeof(mine), "%s GPU %d (%s)",
		 *d->boot.node ? d->boot.node : "?", sigma_ops_device(d->ops),
		 pci);
	rc = dist_allgather(d, mine, sizeof(mine), all);
	if (rc) {
		sigma_set_err(err, len, -rc,
			      "exchanging the GPU of every rank: %s",
			      strerror(-rc));
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		all[i * DEVICE_ID_MAX + DEVICE_ID_MAX - 1] = '\0';
		if (strstr(all + i * DEVICE_ID_MAX, "(unknown)"))
			continue;
		for (size_t j = 0; j < i; j++)
			if (!strcmp(all + i * DEVICE_ID_MAX,
				     all + j * DEVICE_ID_MAX)) {
				rc = -EINVAL;
				sigma_set_err(
				    err, len, EINVAL,
				    "ranks %zu and %zu are both on %s: one GPU per rank (--gpus-per-task=1, or at most as many tasks per node as GPUs)",
				    j, i, all + i * DEVICE_ID_MAX);
				goto out;
			}
	}
	rc = 0;
out:
	free(all);
	return rc;
}

/*
 * A model in device memory (any ops but the CPU's) exchanges its tensors
 * through NCCL communicators of the same shape as the host ones, on the
 * device the ops chose; counts and scalars stay on the host's.
 */
static int device_comms(struct dist *d, char *err, size_t len)
{
	struct comm_options o;
	char why[512];
	int rc;

	if (d->ops == &sigma_ops_cpu || d->size == 1)
		return 0;
	if (!comm_backend_available(COMM_NCCL))
		return sigma_set_err(
		    err, len, ENOTSUP,
		    "a job of %d ranks on the %s kernels exchanges device memory through NCCL, which this build lacks (configure --with-cuda with NCCL installed)",
		    d->size, d->ops->name);
	rc = device_unique(d, err, len);
	if (rc)
		return rc;
	rc = comm_options_default(&o, why, sizeof(why));
	if (rc)
		return sigma_set_err(err, len, -rc, "%s", why);
	o.device = sigma_ops_device(d->ops);
	rc = comm_create(&d->tworld, COMM_NCCL, &d->boot, &o, why,
			 sizeof(why));
	if (rc) {
		d->tworld = d->world;
		return sigma_set_err(err, len, -rc, "%s", why);
	}
	d->tdp = d->tep = d->tpp = d->tedp = NULL;
	rc = split_groups(d, d->tworld, &d->tdp, &d->tep, &d->tpp, &d->tedp);
	if (rc) {
		sigma_set_err(err, len, -rc,
			      "cannot make the NCCL groups: %s",
			      strerror(-rc));
		device_comms_fini(d);
		return rc;
	}
	return 0;
}

int dist_attach(struct dist *d, struct model *m, char *err, size_t len)
{
	int rc;

	d->m = m;
	d->ops = m->ops;
	if (m->nacts < d->micro)
		return sigma_set_err(err, len, EINVAL,
				     "%d activation sets for %d micro-batches",
				     m->nacts, d->micro);
	rc = device_comms(d, err, len);
	if (rc)
		return rc;
	if (d->size > 1) {
		m->norm_reduce = on_norm;
		m->norm_ctx = d;
	}
	if (comm_size(d->dp) > 1) {
		d->ncounts_f = m->cfg.L * m->cfg.E;
		d->counts_f = calloc((size_t)d->ncounts_f, sizeof(float));
		if (!d->counts_f)
			return sigma_set_err(err, len, ENOMEM, "out of memory");
		m->counts_reduce = on_counts;
		m->counts_start = on_counts_start;
		m->counts_ctx = d;
		m->count_ranks = comm_size(d->dp);
	}
	if (dist_zero_attach(d, m))
		return sigma_set_err(err, len, ENOMEM, "out of memory");
	if (d->lp.ep > 1) {
		rc = dist_ep_attach(d, m);
		if (rc)
			return sigma_set_err(err, len, -rc,
					     "expert-parallel state: %s",
					     strerror(-rc));
	}
	return 0;
}


int dist_forward_error(struct dist *d)
{
	int rc = d->fwd_err;

	d->fwd_err = 0;
	return rc;
}

/* Wait for the bucket in flight, if any, and count the wait: what the
 * back end had not moved while the rank computed (the auto-tuner's
 * buckets, tuner_comm.h). 0 or -errno. */
static int bucket_wait(struct dist *d)
{
	uint64_t t0 = dist_now_ns();
	int rc;

	if (!d->req.active)
		return 0;
	rc = comm_wait(&d->req);
	dist_comm_done(d, DIST_C_ALLREDUCE, t0);
	d->ovl.waits++;
	d->ovl.floats += d->req_floats;
	d->ovl.ns += dist_now_ns() - t0;
	return rc;
}

/* Start the bucket [off, sent_to) once it is large enough; the rest of the
 * gradients (offset 0 at the end) is left to dist_grad_finish. */
static void on_grad_ready(void *ctx, size_t off)
{
	struct dist *d = ctx;
	uint64_t t0;
	int rc;

	if (d->grad_err || !layout_bucket_due(d->sent_to, off, d->bucket))
		return;
	if ((rc = bucket_wait(d))) {
		d->grad_err = rc;
		return;
	}
	t0 = dist_now_ns();
	rc = comm_iallreduce_f32(d->tdp, d->m->grads + off,
				 d->sent_to - off, &d->req);
	dist_comm_done(d, DIST_C_ALLREDUCE, t0);
	if (rc) {
		d->grad_err = rc;
		return;
	}
	d->req_floats = d->sent_to - off;
	d->sent_to = off;
	d->buckets++;
}

size_t dist_bucket_span(const struct dist *d, const struct model *m)
{
	/* buckets start during the backward pass only when it is the last
	 * one of the step for every gradient, and the block is one range:
	 * one stage, one micro-batch, no expert range of its own */
	if (comm_size(d->dp) > 1 && d->lp.pp == 1 && d->micro == 1 &&
	    m->ndense == m->nparams && !m->zero)
		return m->ndense;
	return 0;
}

void dist_grad_begin(struct dist *d, struct model *m)
{
	d->m = m;
	d->sent_to = m->ndense;
	d->grad_err = 0;
	d->buckets = 0;
	if (dist_bucket_span(d, m)) {
		m->grad_ready = on_grad_ready;
		m->grad_ready_ctx = d;
	} else {
		m->grad_ready = NULL;
	}
}

int dist_grad_finish(struct dist *d)
{
	struct model *m = d->m;
	int n = comm_size(d->dp), rc = d->grad_err;
	size_t ne = m->nparams - m->ndense;
	uint64_t t0 = dist_now_ns();

	m->grad_ready = NULL;
	if (n == 1)
		return 0;
	if (m->zero) {
		rc = dist_zero_reduce(d, m);
		dist_comm_done(d, DIST_C_ALLREDUCE, t0);
		return rc;
	}
	if (d->req.active) {
		int w = bucket_wait(d);

		if (!rc)
			rc = w;
	}
	/* the bucket's wait is counted by bucket_wait, the rest from here */
	t0 = dist_now_ns();
	if (!rc && d->sent_to > 0) {
		rc = comm_allreduce_f32(d->tdp, m->grads, d->sent_to);
		d->buckets++;
	}
	/* each expert's holders: its ep rank in every expert group */
	if (!rc && ne && d->tedp) {
		rc = comm_allreduce_f32(d->tedp, m->grads + m->ndense, ne);
		d->buckets++;
	}
	dist_comm_done(d, DIST_C_ALLREDUCE, t0);
	if (rc)
		return rc;
	/* an expert's gradient already sums the tokens of its ep group */
	m->ops->scale(m->grads, 1.0f / (float)n, m->nparams);
	return 0;
}

/*
 * The squared norm's parts of every rank, each distinct part once, and
 * the values riding on it (dist_stage_mean_later), in one all-gather:
 * every rank sums the same numbers in rank order.
 */
static double on_norm(void *ctx, const double ss[2])
{
	struct dist *d = ctx;
	/* split moments: every rank's gradient blocks are its own */
	bool each = d->m && d->m->zero;
	int w = 1 + d->nriders;
	double mine[1 + DIST_RIDERS], sum[1 + DIST_RIDERS] = { 0 };
	double *all = calloc((size_t)d->size * w, sizeof(double));
	uint64_t t0 = dist_now_ns();
	int rc;

	mine[0] = (each || d->me.dp_index == 0 ? ss[0] : 0.0) +
		  (each || d->me.ep_group == 0 ? ss[1] : 0.0);
	for (int k = 1; k < w; k++)
		mine[k] = d->riders[k - 1];
	rc = all ? dist_allgather(d, mine, sizeof(double) * w, all) : -ENOMEM;
	dist_comm_done(d, DIST_C_ALLREDUCE, t0);
	for (int i = 0; rc == 0 && i < d->size; i++)
		for (int k = 0; k < w; k++)
			sum[k] += all[(size_t)i * w + k];
	free(all);
	d->nriders = 0;
	if (rc) {
		if (!d->fwd_err)
			d->fwd_err = rc;
		return NAN;
	}
	for (int k = 1; k < w; k++)
		d->riders[k - 1] = sum[k] / (double)d->lp.dp;
	return sum[0];
}

int dist_stage_mean_later(struct dist *d, double *v, int n)
{
	if (n < 0 || n > DIST_RIDERS)
		return -EINVAL;
	d->riders = v;
	d->nriders = d->size > 1 ? n : 0; /* alone: v is the mean already */
	return 0;
}

/* v[n] = sum over c of v[n] / div */
static int reduce_div(struct dist *d, struct comm *c, double *v, int n,
		      double div)
{
	float buf[MODEL_MAX_L + 2];
	uint64_t t0;
	int rc;

	if (n > MODEL_MAX_L + 2)
		return -EINVAL;
	for (int i = 0; i < n; i++)
		buf[i] = (float)v[i];
	t0 = dist_now_ns();
	rc = comm_allreduce_f32(c, buf, (size_t)n);
	dist_comm_done(d, DIST_C_ALLREDUCE, t0);
	if (rc)
		return rc;
	for (int i = 0; i < n; i++)
		v[i] = (double)buf[i] / div;
	return 0;
}

int dist_stage_mean(struct dist *d, double *v, int n)
{
	if (d->size == 1)
		return 0;
	return reduce_div(d, d->world, v, n, (double)d->lp.dp);
}

int dist_world_mean(struct dist *d, double *v, int n)
{
	if (d->size == 1)
		return 0;
	return reduce_div(d, d->world, v, n, (double)d->size);
}

int dist_allgather(struct dist *d, const void *mine, size_t bytes, void *all)
{
	size_t n = (size_t)d->size, *cnt, *dsp;
	char *send;
	int rc = -ENOMEM;

	/* an all-to-all that sends every rank the same block */
	cnt = calloc(n, sizeof(*cnt));
	dsp = calloc(n, sizeof(*dsp));
	send = calloc(n, bytes ? bytes : 1);
	if (cnt && dsp && send) {
		for (size_t i = 0; i < n; i++) {
			cnt[i] = bytes;
			dsp[i] = i * bytes;
			memcpy(send + i * bytes, mine, bytes);
		}
		rc = comm_alltoallv(d->world, send, cnt, dsp, all, cnt, dsp,
				    COMM_U8);
	}
	free(cnt), free(dsp), free(send);
	return rc;
}

int dist_world_max(struct dist *d, double *v)
{
	float mine = (float)*v, *r;
	uint64_t t0;
	int rc;

	if (d->size == 1)
		return 0;
	r = calloc((size_t)d->size, sizeof(*r));
	if (!r)
		return -ENOMEM;
	t0 = dist_now_ns();
	rc = dist_allgather(d, &mine, sizeof(mine), r);
	dist_comm_done(d, DIST_C_ALLREDUCE, t0);
	for (int i = 0; rc == 0 && i < d->size; i++)
		if (r[i] > *v)
			*v = r[i];
	free(r);
	return rc;
}

uint64_t dist_bytes_sent(const struct dist *d)
{
	const struct comm *c[10] = { d->world, d->dp, d->ep, d->pp, d->edp };
	uint64_t sum = 0;
	int n = 5;

	if (d->tworld != d->world) { /* NCCL twins of their own */
		c[n++] = d->tworld, c[n++] = d->tdp, c[n++] = d->tep;
		c[n++] = d->tpp, c[n++] = d->tedp;
	}
	for (int i = 0; i < n; i++) {
		struct comm_stats st;

		if (!c[i])
			continue;
		comm_get_stats(c[i], &st);
		sum += st.bytes;
	}
	return sum;
}

int dist_barrier(struct dist *d)
{
	uint64_t t0 = dist_now_ns();
	int rc = comm_barrier(d->world);

	dist_comm_done(d, DIST_C_ALLREDUCE, t0);
	return rc;
}

int dist_bucket_probe(struct dist *d, size_t n, struct dist_bucket_cost *c)
{
	uint64_t t0, dt, t[2] = { UINT64_MAX, UINT64_MAX };
	int rc;

	memset(c, 0, sizeof(*c));
	if (comm_size(d->dp) < 2 || n < 2)
		return 0;
	if (d->nprobe < n) {
		d->ops->free(d->probe);
		d->probe = d->ops->alloc(sizeof(float) * n);
		d->nprobe = d->probe ? n : 0;
		if (!d->probe)
			return -ENOMEM;
	}
	if ((rc = comm_barrier(d->dp)))
		return rc;
	/* each size twice, the least of each: one float (what every
	 * all-reduce costs), then n (its time per byte beyond that); the
	 * buffer's zeros stay zeros */
	for (int i = 0; i < 4; i++) {
		int k = i % 2;

		t0 = dist_now_ns();
		rc = comm_allreduce_f32(d->tdp, d->probe, k ? n : 1);
		if (rc)
			return rc;
		dt = dist_now_ns() - t0;
		t[k] = dt < t[k] ? dt : t[k];
	}
	c->lat_ns = (double)t[0];
	if (t[1] > t[0])
		c->byte_ns = (double)(t[1] - t[0]) / (sizeof(float) * (n - 1));
	return 0;
}

int dist_link_probe(struct dist *d, int rounds, double *ns)
{
	float out[256] = { 0 }, in[256];
	int n = d->size, next = (d->rank + 1) % n, prev = (d->rank + n - 1) % n;
	uint64_t t0, dt, t[2] = { UINT64_MAX, UINT64_MAX };
	int rc;

	*ns = 0.0;
	if (n < 3)
		return 0;
	if ((rc = comm_barrier(d->world)))
		return rc;
	/* each way rounds times, the least of each: a late peer is late
	 * every time, a process the scheduler held back only now and then */
	for (int i = 0; i < 2 * rounds; i++) {
		int k = i % 2;

		t0 = dist_now_ns();
		rc = comm_sendrecv(d->world, out, 256, k ? prev : next, in, 256,
				   k ? next : prev, COMM_F32, SIGMA_TAG_PROBE);
		if (rc)
			return rc;
		dt = dist_now_ns() - t0;
		t[k] = dt < t[k] ? dt : t[k];
	}
	*ns = (double)(t[0] < t[1] ? t[0] : t[1]);
	return 0;
}
