/*
 * comm_nccl.c - the only file that includes nccl.h: the collectives on GPU
 * memory through NCCL, one CUDA device per rank.
 *
 * The world communicator is made with ncclCommInitRankConfig from a unique
 * id that rank 0 draws and hands out through PMIx (boot_share);
 * sub-communicators with ncclCommSplit. Every communicator is
 * non-blocking (config.blocking = 0) so that no NCCL call can hold the
 * host forever: a call that answers ncclInProgress is polled with
 * ncclCommGetAsyncError, and the stream with sigma_cuda_side_query, both
 * until the timeout; then the communicator is aborted (ncclCommAbort,
 * which also stops the kernels waiting on the device) and the call
 * returns -ETIMEDOUT. An asynchronous error (a peer's connection lost)
 * aborts and returns -EIO.
 *
 * Each call first makes the communicator's stream wait for the work the
 * caller queued on its stream (options.stream, default the stream of the
 * ops: sigma_cuda_stream(), the legacy default stream) through an event,
 * and returns when the communicator's stream is idle, so the result is in
 * place for whatever runs next.
 *
 * The GPU belongs to kernels/cuda: the device is the one its ops made
 * current (or that sigma_cuda_device_claim makes current, once, in a
 * program without them), and the streams, events, device memory and
 * copies come from there (sigma_cuda.h). This file makes no CUDA call;
 * it names cudaStream_t only to hand NCCL a stream, a type that nccl.h
 * declares (nccl.h itself includes cuda_runtime.h).
 */
#include "config.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* nccl.h declares ncclGroupStart() and others without a prototype */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <nccl.h>
#pragma GCC diagnostic pop

#include "sigma.h"
#include "comm_impl.h"
#include "cuda/sigma_cuda.h"

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 18, 0)
#error                                                                         \
    "sigma needs NCCL 2.18 or later (ncclCommSplit, non-blocking communicators)"
#endif

struct nccl_state {
	ncclComm_t comm; /* NULL once aborted */
	void *stream;	 /* the communicator's own stream (cudaStream_t) */
	void *ready;	 /* recorded on the caller's stream (cudaEvent_t) */
	void *user;	 /* the caller's stream (options.stream) */
	int device;
	float *scratch; /* one float on the device, for the barrier */
};

/* the stream NCCL enqueues on */
static cudaStream_t nccl_stream(const struct nccl_state *st)
{
	return (cudaStream_t)st->stream;
}

static ncclDataType_t nccl_type(enum comm_dtype t)
{
	switch (t) {
	case COMM_F32:
		return ncclFloat32;
	case COMM_I32:
		return ncclInt32;
	case COMM_U8:
		return ncclUint8;
	}
	return ncclFloat32;
}

static uint64_t nccl_deadline(const struct comm *c)
{
	if (!(c->opt.timeout_s > 0))
		return UINT64_MAX;
	return comm_now_ns() + (uint64_t)(c->opt.timeout_s * 1e9);
}

static void nccl_pause(void)
{
	struct timespec ts = {0, 20000}; /* 20 us */

	nanosleep(&ts, NULL);
}

static void nccl_abort(struct nccl_state *st)
{
	if (st->comm) {
		ncclCommAbort(st->comm);
		st->comm = NULL;
	}
}

static int nccl_fail(struct nccl_state *st, const char *what, ncclResult_t r)
{
	sigma_error("%s: %s (%s)", what, ncclGetErrorString(r),
		    st->comm ? ncclGetLastError(st->comm) : "");
	nccl_abort(st);
	return -EIO;
}

static int cuda_fail(const char *what)
{
	sigma_error("%s: %s", what, sigma_cuda_error());
	return -EIO;
}

/*
 * After an NCCL call on a non-blocking communicator: r is its answer; on
 * ncclInProgress poll the communicator's state until it settles.
 */
static int nccl_settle(struct comm *c, struct nccl_state *st, ncclComm_t comm,
		       ncclResult_t r, const char *what)
{
	uint64_t deadline = nccl_deadline(c);
	ncclResult_t state = r;

	while (state == ncclInProgress) {
		if (ncclCommGetAsyncError(comm, &state) != ncclSuccess)
			state = ncclSystemError;
		if (state != ncclInProgress)
			break;
		if (comm_now_ns() > deadline) {
			sigma_error(
			    "%s: no progress in %.1f s, aborting the communicator",
			    what, c->opt.timeout_s);
			if (comm != st->comm)
				ncclCommAbort(comm);
			nccl_abort(st);
			return -ETIMEDOUT;
		}
		nccl_pause();
	}
	if (state != ncclSuccess) {
		if (comm != st->comm)
			ncclCommAbort(comm);
		return nccl_fail(st, what, state);
	}
	return 0;
}

/* Wait until the communicator's stream is idle, watching for errors. */
static int nccl_sync(struct comm *c, struct nccl_state *st, const char *what)
{
	uint64_t deadline = nccl_deadline(c);
	ncclResult_t ae;
	int e;

	for (;;) {
		e = sigma_cuda_side_query(st->stream);
		if (e == 0)
			return 0;
		if (e != -EAGAIN) {
			nccl_abort(st);
			return cuda_fail(what);
		}
		if (ncclCommGetAsyncError(st->comm, &ae) != ncclSuccess)
			ae = ncclSystemError;
		if (ae != ncclSuccess && ae != ncclInProgress)
			return nccl_fail(st, what, ae);
		if (comm_now_ns() > deadline) {
			sigma_error(
			    "%s: not finished after %.1f s, aborting the communicator",
			    what, c->opt.timeout_s);
			nccl_abort(st);
			return -ETIMEDOUT;
		}
		nccl_pause();
	}
}

/* Order the communicator's stream after the caller's queued work. */
static int nccl_prepare(struct nccl_state *st)
{
	if (!st->comm)
		return -EIO;
	if (sigma_cuda_side_after(st->stream, st->ready, st->user))
		return cuda_fail("ordering after the caller's stream");
	return 0;
}

static int nccl_state_new(struct comm *c, ncclComm_t comm, int device,
			  struct nccl_state **out)
{
	struct nccl_state *st = calloc(1, sizeof(*st));

	*out = NULL;
	if (!st)
		return -ENOMEM;
	st->comm = comm;
	st->device = device;
	st->user = c->opt.stream ? c->opt.stream : sigma_cuda_stream();
	if (sigma_cuda_side_create(&st->stream, &st->ready))
		goto out_free;
	st->scratch = sigma_cuda_malloc(sizeof(float));
	if (!st->scratch)
		goto out_side;
	*out = st;
	return 0;

out_side:
	sigma_cuda_side_destroy(st->stream, st->ready);
out_free:
	free(st);
	return cuda_fail("NCCL communicator stream and event");
}

static void nccl_state_free(struct nccl_state *st)
{
	sigma_cuda_release(st->scratch);
	sigma_cuda_side_destroy(st->stream, st->ready);
	free(st);
}

static ncclConfig_t nccl_config(const char *name)
{
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;

	cfg.blocking = 0;
	cfg.commName = name;
	return cfg;
}

static int nccl_split(struct comm *c, int color, int key, struct comm *out,
		      bool *none)
{
	struct nccl_state *st = c->impl, *ns;
	ncclConfig_t cfg = nccl_config(out->name);
	ncclComm_t nc = NULL;
	ncclResult_t r;
	int rc;

	if ((rc = nccl_prepare(st)) < 0)
		return rc;
	r = ncclCommSplit(st->comm,
			  color == COMM_COLOR_NONE ? NCCL_SPLIT_NOCOLOR : color,
			  key, &nc, &cfg);
	if (r != ncclSuccess && r != ncclInProgress)
		return nccl_fail(st, "ncclCommSplit", r);
	/* the parent settles first, then the new communicator */
	rc = nccl_settle(c, st, st->comm, r, "ncclCommSplit");
	if (rc < 0)
		return rc;
	if (!nc) {
		*none = true;
		return 0;
	}
	rc = nccl_settle(c, st, nc, ncclInProgress, "ncclCommSplit (new)");
	if (rc < 0)
		return rc;
	if (ncclCommUserRank(nc, &out->rank) != ncclSuccess ||
	    ncclCommCount(nc, &out->size) != ncclSuccess) {
		ncclCommAbort(nc);
		return -EIO;
	}
	rc = nccl_state_new(out, nc, st->device, &ns);
	if (rc < 0) {
		ncclCommAbort(nc);
		return rc;
	}
	out->impl = ns;
	return 0;
}

static void nccl_destroy(struct comm *c)
{
	struct nccl_state *st = c->impl;
	ncclResult_t r;

	if (!st)
		return;
	if (st->comm && !c->broken) {
		/* flush, wait until every peer is done, then free */
		r = ncclCommFinalize(st->comm);
		if (nccl_settle(c, st, st->comm, r, "ncclCommFinalize") == 0)
			ncclCommDestroy(st->comm);
		st->comm = NULL;
	}
	nccl_abort(st);
	nccl_state_free(st);
	c->impl = NULL;
}

/* r is an enqueued call's answer: settle it, then wait for the stream. */
static int nccl_run(struct comm *c, const char *what, ncclResult_t r)
{
	struct nccl_state *st = c->impl;
	int rc;

	if (r != ncclSuccess && r != ncclInProgress)
		return nccl_fail(st, what, r);
	rc = nccl_settle(c, st, st->comm, r, what);
	return rc < 0 ? rc : nccl_sync(c, st, what);
}

static int nccl_allreduce(struct comm *c, float *buf, size_t n)
{
	struct nccl_state *st = c->impl;
	int rc;

	if ((rc = nccl_prepare(st)) < 0)
		return rc;
	return nccl_run(c, "ncclAllReduce",
			ncclAllReduce(buf, buf, n, ncclFloat32, ncclSum,
				      st->comm, nccl_stream(st)));
}

static int nccl_iallreduce(struct comm *c, float *buf, size_t n,
			   struct comm_request *req)
{
	struct nccl_state *st = c->impl;
	ncclResult_t r;
	int rc;

	(void)req;
	if ((rc = nccl_prepare(st)) < 0)
		return rc;
	r = ncclAllReduce(buf, buf, n, ncclFloat32, ncclSum, st->comm,
			  nccl_stream(st));
	if (r != ncclSuccess && r != ncclInProgress)
		return nccl_fail(st, "ncclAllReduce", r);
	return nccl_settle(c, st, st->comm, r, "ncclAllReduce");
}

static int nccl_wait(struct comm_request *req)
{
	struct comm *c = req->c;

	return nccl_sync(c, c->impl, "ncclAllReduce (wait)");
}

static int nccl_bcast(struct comm *c, void *buf, size_t n, enum comm_dtype t,
		      int root)
{
	struct nccl_state *st = c->impl;
	int rc;

	if ((rc = nccl_prepare(st)) < 0)
		return rc;
	return nccl_run(c, "ncclBroadcast",
			ncclBroadcast(buf, buf, n, nccl_type(t), root, st->comm,
				      nccl_stream(st)));
}

/* End the group opened for r's calls (always), settle, wait. */
static int nccl_group_end(struct comm *c, const char *what, ncclResult_t r)
{
	ncclResult_t e = ncclGroupEnd();

	return nccl_run(c, what,
			r != ncclSuccess && r != ncclInProgress ? r : e);
}

static int nccl_alltoallv(struct comm *c, const void *send,
			  const size_t *scounts, const size_t *sdispls,
			  void *recv, const size_t *rcounts,
			  const size_t *rdispls, enum comm_dtype t)
{
	struct nccl_state *st = c->impl;
	size_t es = comm_dtype_size(t);
	ncclResult_t r = ncclSuccess;
	int p, rc;

	if ((rc = nccl_prepare(st)) < 0)
		return rc;
	r = ncclGroupStart();
	if (r != ncclSuccess)
		return nccl_fail(st, "ncclGroupStart", r);
	for (p = 0; p < c->size && (r == ncclSuccess || r == ncclInProgress);
	     p++) {
		/* both sides skip an empty block: counts are agreed */
		if (scounts[p])
			r = ncclSend((const char *)send + sdispls[p] * es,
				     scounts[p], nccl_type(t), p, st->comm,
				     nccl_stream(st));
		if (rcounts[p] && (r == ncclSuccess || r == ncclInProgress))
			r = ncclRecv((char *)recv + rdispls[p] * es, rcounts[p],
				     nccl_type(t), p, st->comm,
				     nccl_stream(st));
	}
	return nccl_group_end(c, "all-to-all (ncclSend/ncclRecv)", r);
}

/* the blocks' common size, 0 when they differ (or are all empty) */
static size_t nccl_equal_blocks(const struct comm *c, const size_t *counts)
{
	for (int p = 1; p < c->size; p++)
		if (counts[p] != counts[0])
			return 0;
	return counts[0];
}

/*
 * Equal blocks take NCCL's in-place reduce-scatter (the receive buffer at
 * the rank's block of the send buffer); unequal ones a group of in-place
 * reductions, one to each block's owner.
 */
static int nccl_reduce_scatter(struct comm *c, float *buf,
			       const size_t *counts)
{
	struct nccl_state *st = c->impl;
	size_t k = nccl_equal_blocks(c, counts), off = 0;
	ncclResult_t r = ncclSuccess;
	int rc;

	if ((rc = nccl_prepare(st)) < 0)
		return rc;
	if (k)
		return nccl_run(c, "ncclReduceScatter",
				ncclReduceScatter(buf, buf + (size_t)c->rank * k,
						  k, ncclFloat32, ncclSum,
						  st->comm, nccl_stream(st)));
	r = ncclGroupStart();
	if (r != ncclSuccess)
		return nccl_fail(st, "ncclGroupStart", r);
	for (int p = 0; p < c->size && (r == ncclSuccess || r == ncclInProgress);
	     off += counts[p++])
		if (counts[p])
			r = ncclReduce(buf + off, buf + off, counts[p],
				       ncclFloat32, ncclSum, p, st->comm,
				       nccl_stream(st));
	return nccl_group_end(c, "reduce-scatter (ncclReduce)", r);
}

/* the same shapes: ncclAllGather in place, or a group of broadcasts */
static int nccl_allgather(struct comm *c, float *buf, const size_t *counts)
{
	struct nccl_state *st = c->impl;
	size_t k = nccl_equal_blocks(c, counts), off = 0;
	ncclResult_t r = ncclSuccess;
	int rc;

	if ((rc = nccl_prepare(st)) < 0)
		return rc;
	if (k)
		return nccl_run(c, "ncclAllGather",
				ncclAllGather(buf + (size_t)c->rank * k, buf, k,
					      ncclFloat32, st->comm,
					      nccl_stream(st)));
	r = ncclGroupStart();
	if (r != ncclSuccess)
		return nccl_fail(st, "ncclGroupStart", r);
	for (int p = 0; p < c->size && (r == ncclSuccess || r == ncclInProgress);
	     off += counts[p++])
		if (counts[p])
			r = ncclBroadcast(buf + off, buf + off, counts[p],
					  ncclFloat32, p, st->comm,
					  nccl_stream(st));
	return nccl_group_end(c, "all-gather (ncclBroadcast)", r);
}

static int nccl_send(struct comm *c, const void *buf, size_t n,
		     enum comm_dtype t, int peer, int tag)
{
	struct nccl_state *st = c->impl;
	int rc;

	(void)tag;
	if ((rc = nccl_prepare(st)) < 0)
		return rc;
	return nccl_run(
	    c, "ncclSend",
	    ncclSend(buf, n, nccl_type(t), peer, st->comm, nccl_stream(st)));
}

static int nccl_recv(struct comm *c, void *buf, size_t n, enum comm_dtype t,
		     int peer, int tag)
{
	struct nccl_state *st = c->impl;
	int rc;

	(void)tag;
	if ((rc = nccl_prepare(st)) < 0)
		return rc;
	return nccl_run(
	    c, "ncclRecv",
	    ncclRecv(buf, n, nccl_type(t), peer, st->comm, nccl_stream(st)));
}

static int nccl_sendrecv(struct comm *c, const void *sbuf, size_t sn, int speer,
			 void *rbuf, size_t rn, int rpeer, enum comm_dtype t,
			 int tag)
{
	struct nccl_state *st = c->impl;
	ncclResult_t r;
	int rc;

	(void)tag;
	if ((rc = nccl_prepare(st)) < 0)
		return rc;
	r = ncclGroupStart();
	if (r != ncclSuccess)
		return nccl_fail(st, "ncclGroupStart", r);
	r = ncclSend(sbuf, sn, nccl_type(t), speer, st->comm,
		     nccl_stream(st));
	if (r == ncclSuccess || r == ncclInProgress)
		r = ncclRecv(rbuf, rn, nccl_type(t), rpeer, st->comm,
			     nccl_stream(st));
	return nccl_group_end(c, "sendrecv (ncclSend/ncclRecv)", r);
}

static int nccl_barrier(struct comm *c)
{
	struct nccl_state *st = c->impl;
	int rc;

	/* NCCL has no barrier: a one-float all-reduce every rank must join */
	if ((rc = nccl_prepare(st)) < 0)
		return rc;
	return nccl_run(c, "ncclAllReduce (barrier)",
			ncclAllReduce(st->scratch, st->scratch, 1, ncclFloat32,
				      ncclSum, st->comm, nccl_stream(st)));
}

static void *nccl_alloc(struct comm *c, size_t n)
{
	(void)c;
	return sigma_cuda_zalloc(n ? n : 1);
}

static void nccl_free(struct comm *c, void *p)
{
	(void)c;
	sigma_cuda_release(p);
}

static int nccl_to_host(struct comm *c, void *host, const void *src, size_t n)
{
	(void)c;
	return sigma_cuda_to_host(host, src, n) ? cuda_fail("cudaMemcpy to host")
						: 0;
}

static int nccl_from_host(struct comm *c, void *dst, const void *host, size_t n)
{
	(void)c;
	return sigma_cuda_from_host(dst, host, n)
		   ? cuda_fail("cudaMemcpy from host")
		   : 0;
}

static const struct comm_ops nccl_ops = {
    .split = nccl_split,
    .destroy = nccl_destroy,
    .allreduce_f32 = nccl_allreduce,
    .iallreduce_f32 = nccl_iallreduce,
    .wait = nccl_wait,
    .reduce_scatter_f32 = nccl_reduce_scatter,
    .allgather_f32 = nccl_allgather,
    .bcast = nccl_bcast,
    .alltoallv = nccl_alltoallv,
    .send = nccl_send,
    .recv = nccl_recv,
    .sendrecv = nccl_sendrecv,
    .barrier = nccl_barrier,
    .alloc = nccl_alloc,
    .free = nccl_free,
    .to_host = nccl_to_host,
    .from_host = nccl_from_host,
};

int comm_nccl_init(struct comm *c, struct boot *b, char *err, size_t len)
{
	ncclConfig_t cfg = nccl_config("world");
	struct nccl_state *st;
	ncclUniqueId id;
	ncclComm_t nc = NULL;
	ncclResult_t r;
	char why[256];
	int dev, rc;

	/* the ops' device, or (no ops in this program) the one asked for
	 * or the local rank's, made current on this thread before NCCL */
	dev = sigma_cuda_device_claim(c->opt.device, b->local_rank, why,
				      sizeof(why));
	if (dev < 0)
		return sigma_set_err(err, len, -dev, "NCCL back end: %s", why);

	/* rank 0 draws the id, PMIx hands it to every rank */
	memset(&id, 0, sizeof(id));
	if (b->rank == 0) {
		r = ncclGetUniqueId(&id);
		if (r != ncclSuccess)
			return sigma_set_err(err, len, EIO,
					     "ncclGetUniqueId: %s",
					     ncclGetErrorString(r));
	}
	rc = boot_share(b, "nccl.id", &id, sizeof(id));
	if (rc < 0)
		return sigma_set_err(
		    err, len, -rc,
		    "handing out the NCCL unique id through PMIx: %s",
		    strerror(-rc));

	r = ncclCommInitRankConfig(&nc, b->size, id, b->rank, &cfg);
	if (r != ncclSuccess && r != ncclInProgress)
		return sigma_set_err(
		    err, len, EIO,
		    "ncclCommInitRankConfig (rank %d of %d, device %d): %s",
		    b->rank, b->size, dev, ncclGetErrorString(r));
	rc = nccl_state_new(c, nc, dev, &st);
	if (rc < 0) {
		ncclCommAbort(nc);
		return sigma_set_err(
		    err, len, -rc,
		    "NCCL back end: stream, event or scratch on device %d",
		    dev);
	}
	c->impl = st;
	rc = nccl_settle(c, st, nc, r, "ncclCommInitRankConfig");
	if (rc < 0) {
		nccl_state_free(st);
		c->impl = NULL;
		return sigma_set_err(
		    err, len, -rc,
		    "ncclCommInitRankConfig (rank %d of %d, device %d) did not complete",
		    b->rank, b->size, dev);
	}
	c->ops = &nccl_ops;
	c->be = COMM_NCCL;
	c->mem = COMM_MEM_DEVICE;
	c->rank = b->rank;
	c->size = b->size;
	return 0;
}
