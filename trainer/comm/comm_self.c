/*
 * comm_self.c - the back end of a job of one process, in host memory:
 * reductions and broadcasts leave the buffer as it is, all-to-all copies
 * the block to itself, and a send to oneself waits in a queue for the
 * matching receive (same tag, first in first out).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sigma.h"
#include "comm_impl.h"

struct self_msg {
	struct self_msg *next;
	int tag;
	size_t bytes;
	unsigned char data[];
};

struct self_state {
	struct self_msg *head, *tail;
};

static int self_split(struct comm *c, int color, int key, struct comm *out,
		      bool *none)
{
	char err[64];

	(void)c;
	(void)key;
	if (color == COMM_COLOR_NONE) {
		*none = true;
		return 0;
	}
	return comm_self_init(out, err, sizeof(err));
}

static void self_destroy(struct comm *c)
{
	struct self_state *st = c->impl;
	struct self_msg *m, *next;

	if (!st)
		return;
	for (m = st->head; m; m = next) {
		next = m->next;
		free(m);
	}
	free(st);
	c->impl = NULL;
}

static int self_allreduce(struct comm *c, float *buf, size_t n)
{
	(void)c;
	(void)buf;
	(void)n;
	return 0;
}

static int self_iallreduce(struct comm *c, float *buf, size_t n,
			   struct comm_request *req)
{
	(void)req;
	return self_allreduce(c, buf, n);
}

/* one rank holds every block: nothing moves */
static int self_blocks(struct comm *c, float *buf, const size_t *counts)
{
	(void)c;
	(void)buf;
	(void)counts;
	return 0;
}

static int self_wait(struct comm_request *req)
{
	(void)req;
	return 0;
}

static int self_bcast(struct comm *c, void *buf, size_t n, enum comm_dtype t,
		      int root)
{
	(void)c;
	(void)buf;
	(void)n;
	(void)t;
	(void)root;
	return 0;
}

static int self_alltoallv(struct comm *c, const void *send,
			  const size_t *scounts, const size_t *sdispls,
			  void *recv, const size_t *rcounts,
			  const size_t *rdispls, enum comm_dtype t)
{
	size_t es = comm_dtype_size(t);

	(void)c;
	if (scounts[0] != rcounts[0])
		return -EINVAL;
	if (scounts[0])
		memmove((char *)recv + rdispls[0] * es,
			(const char *)send + sdispls[0] * es, scounts[0] * es);
	return 0;
}

static int self_send(struct comm *c, const void *buf, size_t n,
		     enum comm_dtype t, int peer, int tag)
{
	struct self_state *st = c->impl;
	size_t bytes = n * comm_dtype_size(t);
	struct self_msg *m;

	(void)peer;
	m = malloc(sizeof(*m) + bytes);
	if (!m)
		return -ENOMEM;
	m->next = NULL;
	m->tag = tag;
	m->bytes = bytes;
	if (bytes)
		memcpy(m->data, buf, bytes);
	if (st->tail)
		st->tail->next = m;
	else
		st->head = m;
	st->tail = m;
	return 0;
}

static int self_recv(struct comm *c, void *buf, size_t n, enum comm_dtype t,
		     int peer, int tag)
{
	struct self_state *st = c->impl;
	size_t bytes = n * comm_dtype_size(t);
	struct self_msg *m, *prev = NULL;

	(void)peer;
	for (m = st->head; m; prev = m, m = m->next)
		if (m->tag == tag)
			break;
	/* nobody else can ever send it: waiting would be forever */
	if (!m)
		return -EDEADLK;
	if (m->bytes != bytes)
		return -EMSGSIZE;
	if (bytes)
		memcpy(buf, m->data, bytes);
	if (prev)
		prev->next = m->next;
	else
		st->head = m->next;
	if (st->tail == m)
		st->tail = prev;
	free(m);
	return 0;
}

static int self_sendrecv(struct comm *c, const void *sbuf, size_t sn, int speer,
			 void *rbuf, size_t rn, int rpeer, enum comm_dtype t,
			 int tag)
{
	int rc = self_send(c, sbuf, sn, t, speer, tag);

	return rc < 0 ? rc : self_recv(c, rbuf, rn, t, rpeer, tag);
}

/* to oneself nothing waits: done at once, comm_wait has nothing left */
static int self_isendrecv(struct comm *c, const void *sbuf, size_t sn,
			  int speer, void *rbuf, size_t rn, int rpeer,
			  enum comm_dtype t, int tag, struct comm_request *req)
{
	(void)req;
	return self_sendrecv(c, sbuf, sn, speer, rbuf, rn, rpeer, t, tag);
}

static int self_barrier(struct comm *c)
{
	(void)c;
	return 0;
}

static const struct comm_ops self_ops = {
    .split = self_split,
    .destroy = self_destroy,
    .allreduce_f32 = self_allreduce,
    .iallreduce_f32 = self_iallreduce,
    .wait = self_wait,
    .reduce_scatter_f32 = self_blocks,
    .allgather_f32 = self_blocks,
    .bcast = self_bcast,
    .alltoallv = self_alltoallv,
    .send = self_send,
    .recv = self_recv,
    .sendrecv = self_sendrecv,
    .isendrecv = self_isendrecv,
    .barrier = self_barrier,
};

int comm_self_init(struct comm *c, char *err, size_t len)
{
	c->impl = calloc(1, sizeof(struct self_state));
	if (!c->impl)
		return sigma_set_err(err, len, ENOMEM, "out of memory");
	c->ops = &self_ops;
	c->be = COMM_SELF;
	c->mem = COMM_MEM_HOST;
	c->rank = 0;
	c->size = 1;
	return 0;
}
