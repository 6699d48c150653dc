/*
 * comm.c - the front end of the collectives: argument checks, statistics,
 * the watchdog's bookkeeping, then the back end. See comm.h.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "sigma.h"
#include "comm_impl.h"

static const char *const backend_names[] = {"self", "mpi", "nccl", NULL};

const char *comm_backend_name(enum comm_backend be)
{
	if ((int)be < 0 || be > COMM_NCCL)
		return "?";
	return backend_names[be];
}

int comm_backend_parse(const char *s, enum comm_backend *be)
{
	int i = sigma_parse_enum(s, backend_names);

	if (i < 0)
		return -EINVAL;
	*be = (enum comm_backend)i;
	return 0;
}

bool comm_backend_available(enum comm_backend be)
{
	switch (be) {
	case COMM_SELF:
		return true;
	case COMM_MPI:
#ifdef HAVE_MPI
		return true;
#else
		return false;
#endif
	case COMM_NCCL:
#ifdef HAVE_NCCL
		return true;
#else
		return false;
#endif
	}
	return false;
}

size_t comm_dtype_size(enum comm_dtype t)
{
	switch (t) {
	case COMM_F32:
		return 4;
	case COMM_I32:
		return 4;
	case COMM_U8:
		return 1;
	}
	return 0;
}

int comm_options_default(struct comm_options *o, char *err, size_t len)
{
	const char *s = getenv("SIGMA_COMM_TIMEOUT");

	o->timeout_s = COMM_TIMEOUT_DEFAULT;
	o->device = -1;
	o->stream = NULL;
	if (s && *s &&
	    sigma_parse_double(s, 0, COMM_TIMEOUT_MAX, &o->timeout_s) < 0)
		return sigma_set_err(
		    err, len, EINVAL,
		    "SIGMA_COMM_TIMEOUT=%s: expected seconds in [0, %.0f] (0: no timeout)",
		    s, COMM_TIMEOUT_MAX);
	return 0;
}

int comm_start(char *err, size_t len)
{
	if (!comm_backend_available(COMM_MPI) || !boot_under_pmix())
		return 0;
	return comm_mpi_start(err, len);
}

void comm_stop(void)
{
	comm_mpi_stop();
}

int comm_create(struct comm **out, enum comm_backend be, struct boot *b,
		const struct comm_options *o, char *err, size_t len)
{
	struct comm *c;
	int rc;

	*out = NULL;
	if (!comm_backend_available(be))
		return sigma_set_err(
		    err, len, ENOTSUP,
		    "the %s back end is not in this build (configure found no %s)",
		    comm_backend_name(be), be == COMM_MPI ? "MPI" : "NCCL");
	if (be == COMM_SELF && b->size != 1)
		return sigma_set_err(
		    err, len, EINVAL,
		    "the self back end runs one process, the job has %d",
		    b->size);
	c = calloc(1, sizeof(*c));
	if (!c)
		return sigma_set_err(err, len, ENOMEM, "out of memory");
	c->be = be;
	c->boot = b;
	if (o)
		c->opt = *o;
	else
		c->opt = (struct comm_options){COMM_TIMEOUT_DEFAULT, -1, NULL};
	sigma_strlcpy(c->name, "world", sizeof(c->name));
	/* the PMIx fences of the back end's set-up follow the same timeout */
	b->fence_timeout_s =
	    c->opt.timeout_s > 0 ? (int)(c->opt.timeout_s + 0.999) : 0;
	switch (be) {
	case COMM_SELF:
		rc = comm_self_init(c, err, len);
		break;
	case COMM_MPI:
		rc = comm_mpi_init(c, b, err, len);
		break;
	case COMM_NCCL:
		rc = comm_nccl_init(c, b, err, len);
		break;
	default:
		rc = sigma_set_err(err, len, EINVAL, "unknown back end %d",
				   (int)be);
	}
	if (rc < 0) {
		free(c);
		return rc;
	}
	*out = c;
	return 0;
}

/* the process's messages to peers, and the injected hold of each */
static uint64_t messages, send_delay_ns;

uint64_t comm_messages(void)
{
	return messages;
}

void comm_inject_send_delay(uint64_t ns)
{
	send_delay_ns = ns;
}

static void comm_sleep(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000u),
			       (long)(ns % 1000000000u) };

	while (ns && nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* a message of bytes is about to leave over c: count it; the injected
 * hold (comm_inject_send_delay) to apply to it */
static uint64_t comm_message(const struct comm *c, size_t bytes)
{
	if (!bytes || c->size < 2)
		return 0;
	messages++;
	return send_delay_ns;
}

/* What every call does around the back end: refuse on a broken
 * communicator, tell the watchdog, count (a message of bytes). */
static int comm_begin(struct comm *c, const char *what, size_t bytes,
		      uint64_t *t0)
{
	*t0 = comm_now_ns();
	if (c->broken)
		return -EIO;
	comm_watch_enter(what, c->name);
	comm_sleep(comm_message(c, bytes));
	return 0;
}

static int comm_end(struct comm *c, const char *what, size_t bytes, uint64_t t0,
		    int rc)
{
	comm_watch_leave();
	if (rc == -EIO || rc == -ETIMEDOUT) {
		c->broken = true;
		sigma_error("comm %s (%s): %s failed: %s", c->name,
			    comm_backend_name(c->be), what, strerror(-rc));
		comm_watchdog_broken();
	}
	c->stats.calls++;
	c->stats.bytes += bytes;
	c->stats.ns += comm_now_ns() - t0;
	return rc;
}

#define COMM_CALL(c, what, bytes, expr)                                        \
	do {                                                                   \
		uint64_t t0_;                                                  \
		int rc_ = comm_begin((c), (what), (bytes), &t0_);                       \
		if (rc_ == 0)                                                  \
			rc_ = (expr);                                          \
		return comm_end((c), (what), (bytes), t0_, rc_);               \
	} while (0)

int comm_split(struct comm *c, int color, int key, const char *name,
	       struct comm **out)
{
	struct comm *s;
	bool none = false;
	uint64_t t0;
	int rc;

	*out = NULL;
	if (color < COMM_COLOR_NONE || !name)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->be = c->be;
	s->mem = c->mem;
	s->opt = c->opt;
	s->boot = c->boot;
	s->ops = c->ops;
	sigma_strlcpy(s->name, name, sizeof(s->name));
	rc = comm_begin(c, "split", 0, &t0);
	if (rc == 0)
		rc = c->ops->split(c, color, key, s, &none);
	rc = comm_end(c, "split", 0, t0, rc);
	if (rc < 0 || none) {
		free(s);
		return rc;
	}
	*out = s;
	return 0;
}

void comm_destroy(struct comm *c)
{
	if (!c)
		return;
	comm_watch_enter("destroy", c->name);
	c->ops->destroy(c);
	comm_watch_leave();
	free(c);
}

int comm_rank(const struct comm *c)
{
	return c->rank;
}

int comm_size(const struct comm *c)
{
	return c->size;
}

enum comm_backend comm_backend_of(const struct comm *c)
{
	return c->be;
}

enum comm_memory comm_memory(const struct comm *c)
{
	return c->mem;
}

const char *comm_name(const struct comm *c)
{
	return c->name;
}

void comm_get_stats(const struct comm *c, struct comm_stats *s)
{
	*s = c->stats;
}

void *comm_alloc(struct comm *c, size_t n)
{
	if (c->ops->alloc)
		return c->ops->alloc(c, n);
	return calloc(1, n ? n : 1);
}

void comm_free(struct comm *c, void *p)
{
	if (!p)
		return;
	if (c->ops->free)
		c->ops->free(c, p);
	else
		free(p);
}

int comm_to_host(struct comm *c, void *host, const void *src, size_t n)
{
	if (n && (!host || !src))
		return -EINVAL;
	if (c->ops->to_host)
		return c->ops->to_host(c, host, src, n);
	if (n)
		memmove(host, src, n);
	return 0;
}

int comm_from_host(struct comm *c, void *dst, const void *host, size_t n)
{
	if (n && (!host || !dst))
		return -EINVAL;
	if (c->ops->from_host)
		return c->ops->from_host(c, dst, host, n);
	if (n)
		memmove(dst, host, n);
	return 0;
}

static int check_buf(const void *buf, size_t n, enum comm_dtype t)
{
	size_t es = comm_dtype_size(t);

	if (!es || n > SIZE_MAX / es)
		return -EINVAL;
	if (n && !buf)
		return -EINVAL;
	return 0;
}

/* what an all-reduce of n floats must send from each rank: comm_stats */
static size_t ring_bytes(const struct comm *c, size_t n)
{
	return (size_t)((double)n * 8.0 * (c->size - 1) / c->size);
}

int comm_allreduce_f32(struct comm *c, float *buf, size_t n)
{
	if (check_buf(buf, n, COMM_F32) < 0)
		return -EINVAL;
	if (!n)
		return 0;
	COMM_CALL(c, "allreduce", ring_bytes(c, n),
		  c->ops->allreduce_f32(c, buf, n));
}

/* the blocks' total in *n, -EINVAL when counts cannot describe a buffer */
static int check_blocks(const struct comm *c, const float *buf,
			const size_t *counts, size_t *n)
{
	*n = 0;
	if (!counts)
		return -EINVAL;
	for (int r = 0; r < c->size; r++) {
		if (counts[r] > SIZE_MAX / 4 - *n)
			return -EINVAL;
		*n += counts[r];
	}
	return check_buf(buf, *n, COMM_F32);
}

int comm_reduce_scatter_f32(struct comm *c, float *buf, const size_t *counts)
{
	size_t n;

	if (check_blocks(c, buf, counts, &n) < 0)
		return -EINVAL;
	if (!n || c->size == 1)
		return 0;
	COMM_CALL(c, "reduce-scatter", (n - counts[c->rank]) * 4,
		  c->ops->reduce_scatter_f32(c, buf, counts));
}

int comm_allgather_f32(struct comm *c, float *buf, const size_t *counts)
{
	size_t n;

	if (check_blocks(c, buf, counts, &n) < 0)
		return -EINVAL;
	if (!n || c->size == 1)
		return 0;
	COMM_CALL(c, "all-gather", counts[c->rank] * 4 * (size_t)(c->size - 1),
		  c->ops->allgather_f32(c, buf, counts));
}

int comm_iallreduce_f32(struct comm *c, float *buf, size_t n,
			struct comm_request *req)
{
	int rc;

	memset(req, 0, sizeof(*req));
	if (check_buf(buf, n, COMM_F32) < 0)
		return -EINVAL;
	req->c = c;
	req->t0_ns = comm_now_ns();
	req->bytes = ring_bytes(c, n);
	if (!n)
		return 0;
	if (c->broken)
		return -EIO;
	req->hold_ns = comm_message(c, req->bytes);
	rc = c->ops->iallreduce_f32(c, buf, n, req);
	if (rc == 0)
		req->active = true;
	return rc;
}

int comm_wait(struct comm_request *req)
{
	struct comm *c = req->c;
	const char *what;
	uint64_t t0;
	int rc;

	if (!c)
		return -EINVAL;
	if (!req->active) {
		req->c = NULL;
		return 0;
	}
	what = req->exchange ? "wait(sendrecv)" : "wait(allreduce)";
	rc = comm_begin(c, what, 0, &t0);
	if (rc == 0)
		rc = c->ops->wait(req);
	if (rc == 0 && req->hold_ns) {
		uint64_t due = req->t0_ns + req->hold_ns, now = comm_now_ns();

		comm_sleep(due > now ? due - now : 0);
	}
	/* counted from the start, the time the transfer took */
	rc = comm_end(c, what, req->bytes, req->t0_ns, rc);
	req->active = false;
	req->c = NULL;
	return rc;
}

int comm_bcast(struct comm *c, void *buf, size_t n, enum comm_dtype t, int root)
{
	if (check_buf(buf, n, t) < 0 || root < 0 || root >= c->size)
		return -EINVAL;
	if (!n)
		return 0;
	COMM_CALL(c, "bcast", c->rank == root ? n * comm_dtype_size(t) : 0,
		  c->ops->bcast(c, buf, n, t, root));
}

int comm_alltoallv(struct comm *c, const void *send, const size_t *scounts,
		   const size_t *sdispls, void *recv, const size_t *rcounts,
		   const size_t *rdispls, enum comm_dtype t)
{
	size_t es = comm_dtype_size(t), sent = 0, stot = 0, rtot = 0;
	int p;

	if (!es || !scounts || !sdispls || !rcounts || !rdispls)
		return -EINVAL;
	for (p = 0; p < c->size; p++) {
		if (scounts[p] > SIZE_MAX / es || rcounts[p] > SIZE_MAX / es ||
		    sdispls[p] > SIZE_MAX / es - scounts[p] ||
		    rdispls[p] > SIZE_MAX / es - rcounts[p])
			return -EINVAL;
		if (sdispls[p] + scounts[p] > stot)
			stot = sdispls[p] + scounts[p];
		if (rdispls[p] + rcounts[p] > rtot)
			rtot = rdispls[p] + rcounts[p];
		if (p != c->rank)
			sent += scounts[p] * es;
	}
	if ((stot && !send) || (rtot && !recv))
		return -EINVAL;
	COMM_CALL(c, "alltoallv", sent,
		  c->ops->alltoallv(c, send, scounts, sdispls, recv, rcounts,
				    rdispls, t));
}

int comm_send(struct comm *c, const void *buf, size_t n, enum comm_dtype t,
	      int peer, int tag)
{
	if (check_buf(buf, n, t) < 0 || peer < 0 || peer >= c->size || tag < 0)
		return -EINVAL;
	COMM_CALL(c, "send", n * comm_dtype_size(t),
		  c->ops->send(c, buf, n, t, peer, tag));
}

int comm_recv(struct comm *c, void *buf, size_t n, enum comm_dtype t, int peer,
	      int tag)
{
	if (check_buf(buf, n, t) < 0 || peer < 0 || peer >= c->size || tag < 0)
		return -EINVAL;
	COMM_CALL(c, "recv", 0, c->ops->recv(c, buf, n, t, peer, tag));
}

int comm_sendrecv(struct comm *c, const void *sbuf, size_t sn, int speer,
		  void *rbuf, size_t rn, int rpeer, enum comm_dtype t, int tag)
{
	if (check_buf(sbuf, sn, t) < 0 || check_buf(rbuf, rn, t) < 0 ||
	    speer < 0 || speer >= c->size || rpeer < 0 || rpeer >= c->size ||
	    tag < 0)
		return -EINVAL;
	COMM_CALL(
	    c, "sendrecv", sn * comm_dtype_size(t),
	    c->ops->sendrecv(c, sbuf, sn, speer, rbuf, rn, rpeer, t, tag));
}

int comm_isendrecv(struct comm *c, const void *sbuf, size_t sn, int speer,
		   void *rbuf, size_t rn, int rpeer, enum comm_dtype t, int tag,
		   struct comm_request *req)
{
	int rc;

	memset(req, 0, sizeof(*req));
	if (check_buf(sbuf, sn, t) < 0 || check_buf(rbuf, rn, t) < 0 ||
	    speer < 0 || speer >= c->size || rpeer < 0 || rpeer >= c->size ||
	    tag < 0)
		return -EINVAL;
	if (!c->ops->isendrecv)
		return -ENOTSUP;
	if (c->broken)
		return -EIO;
	req->c = c;
	req->exchange = true;
	req->t0_ns = comm_now_ns();
	req->bytes = sn * comm_dtype_size(t);
	req->rn = rn;
	req->rtype = t;
	req->hold_ns = comm_message(c, req->bytes);
	rc = c->ops->isendrecv(c, sbuf, sn, speer, rbuf, rn, rpeer, t, tag,
			       req);
	if (rc == 0)
		req->active = true;
	return rc;
}

int comm_barrier(struct comm *c)
{
	COMM_CALL(c, "barrier", 0, c->ops->barrier(c));
}
