/*
 * comm_mpi.c - the only file that includes mpi.h: the collectives on host
 * memory through MPI (Open MPI under srun --mpi=pmix).
 *
 * Errors return (MPI_ERRORS_RETURN on every communicator) instead of
 * aborting, so a dead peer seen by the transport becomes -EIO and the
 * trainer exits with COMM_EXIT_PEER. A peer that stops without closing its
 * connections is not seen by MPI: the watchdog ends that case. MPI counts
 * are int: larger operations are cut into chunks where the operation
 * allows, and refused with -EOVERFLOW where it does not (all-to-all,
 * point to point beyond 2^31 - 1 elements).
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "sigma.h"
#include "comm_impl.h"

#define MPI_CHUNK ((size_t)1 << 30)

struct mpi_state {
	MPI_Comm comm;
	int *counts; /* all-to-all scratch: [4 size] ints */
};

/* users of MPI in this process; the first initialises, the last finalises */
static int mpi_users;
static bool mpi_we_initialised;
static bool mpi_failed; /* after a failure MPI_Finalize may never return */

_Static_assert(sizeof(MPI_Request) <=
		   sizeof(((struct comm_request *)0)->handle),
	       "MPI_Request does not fit in comm_request");

static int mpi_fail(const char *what, int code)
{
	char msg[MPI_MAX_ERROR_STRING];
	int n = 0;

	if (MPI_Error_string(code, msg, &n) != MPI_SUCCESS)
		sigma_strlcpy(msg, "unknown MPI error", sizeof(msg));
	sigma_error("%s: %s", what, msg);
	mpi_failed = true;
	return -EIO;
}

static MPI_Datatype mpi_type(enum comm_dtype t)
{
	switch (t) {
	case COMM_F32:
		return MPI_FLOAT;
	case COMM_I32:
		return MPI_INT32_T;
	case COMM_U8:
		return MPI_UINT8_T;
	}
	return MPI_DATATYPE_NULL;
}

static MPI_Comm mpi_comm(const struct comm *c)
{
	return ((const struct mpi_state *)c->impl)->comm;
}

static int mpi_state_new(struct comm *c, MPI_Comm comm)
{
	struct mpi_state *st = calloc(1, sizeof(*st));
	int rc;

	if (!st)
		return -ENOMEM;
	st->counts = calloc(4 * (size_t)c->size, sizeof(int));
	if (!st->counts) {
		free(st);
		return -ENOMEM;
	}
	rc = MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
	if (rc != MPI_SUCCESS) {
		free(st->counts);
		free(st);
		return mpi_fail("MPI_Comm_set_errhandler", rc);
	}
	st->comm = comm;
	c->impl = st;
	return 0;
}

static int mpi_split(struct comm *c, int color, int key, struct comm *out,
		     bool *none)
{
	MPI_Comm nc = MPI_COMM_NULL;
	int rc;

	rc = MPI_Comm_split(mpi_comm(c),
			    color == COMM_COLOR_NONE ? MPI_UNDEFINED : color,
			    key, &nc);
	if (rc != MPI_SUCCESS)
		return mpi_fail("MPI_Comm_split", rc);
	if (nc == MPI_COMM_NULL) {
		*none = true;
		return 0;
	}
	MPI_Comm_rank(nc, &out->rank);
	MPI_Comm_size(nc, &out->size);
	rc = mpi_state_new(out, nc);
	if (rc < 0) {
		MPI_Comm_free(&nc);
		return rc;
	}
	mpi_users++;
	return 0;
}

static void mpi_destroy(struct comm *c)
{
	struct mpi_state *st = c->impl;

	if (!st)
		return;
	/* freeing is collective-free in MPI, but not after a failure */
	if (!mpi_failed)
		MPI_Comm_free(&st->comm);
	free(st->counts);
	free(st);
	c->impl = NULL;
	--mpi_users;
	comm_mpi_stop();
}

static int mpi_allreduce(struct comm *c, float *buf, size_t n)
{
	size_t off, k;
	int rc;

	for (off = 0; off < n; off += k) {
		k = n - off < MPI_CHUNK ? n - off : MPI_CHUNK;
		rc = MPI_Allreduce(MPI_IN_PLACE, buf + off, (int)k, MPI_FLOAT,
				   MPI_SUM, mpi_comm(c));
		if (rc != MPI_SUCCESS)
			return mpi_fail("MPI_Allreduce", rc);
	}
	return 0;
}

static int mpi_iallreduce(struct comm *c, float *buf, size_t n,
			  struct comm_request *req)
{
	MPI_Request r;
	int rc;

	if (n > INT_MAX)
		return -EOVERFLOW;
	rc = MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM,
			    mpi_comm(c), &r);
	if (rc != MPI_SUCCESS)
		return mpi_fail("MPI_Iallreduce", rc);
	memcpy(req->handle, &r, sizeof(r));
	return 0;
}

static int mpi_check_count(const MPI_Status *s, enum comm_dtype t, size_t n);

static int mpi_wait(struct comm_request *req)
{
	MPI_Request r[2];
	MPI_Status s[2];
	int rc;

	memcpy(r, req->handle, sizeof(r[0]) * (req->exchange ? 2 : 1));
	if (!req->exchange) {
		rc = MPI_Wait(&r[0], MPI_STATUS_IGNORE);
		if (rc != MPI_SUCCESS)
			return mpi_fail("MPI_Wait(MPI_Iallreduce)", rc);
		return 0;
	}
	rc = MPI_Waitall(2, r, s);
	if (rc == MPI_ERR_IN_STATUS && s[0].MPI_ERROR == MPI_ERR_TRUNCATE)
		return -EMSGSIZE;
	if (rc != MPI_SUCCESS)
		return mpi_fail("MPI_Waitall(MPI_Irecv, MPI_Isend)", rc);
	return mpi_check_count(&s[0], req->rtype, req->rn);
}

/* counts as MPI's ints in st->counts, displacements after them; false when
 * one is beyond an int */
static bool mpi_blocks(struct comm *c, const size_t *counts)
{
	struct mpi_state *st = c->impl;
	int *ic = st->counts, *id = ic + c->size;
	size_t off = 0;

	for (int p = 0; p < c->size; p++) {
		if (counts[p] > INT_MAX || off > INT_MAX)
			return false;
		ic[p] = (int)counts[p];
		id[p] = (int)off;
		off += counts[p];
	}
	return off <= INT_MAX;
}

static int mpi_reduce_scatter(struct comm *c, float *buf, const size_t *counts)
{
	struct mpi_state *st = c->impl;
	int me = c->rank, rc;

	if (!mpi_blocks(c, counts))
		return -EOVERFLOW;
	/* in place, the sum of this rank's block lands at the start of buf */
	rc = MPI_Reduce_scatter(MPI_IN_PLACE, buf, st->counts, MPI_FLOAT,
				MPI_SUM, st->comm);
	if (rc != MPI_SUCCESS)
		return mpi_fail("MPI_Reduce_scatter", rc);
	if (st->counts[c->size + me])
		memmove(buf + st->counts[c->size + me], buf,
			sizeof(float) * counts[me]);
	return 0;
}

static int mpi_allgather(struct comm *c, float *buf, const size_t *counts)
{
	struct mpi_state *st = c->impl;
	int rc;

	if (!mpi_blocks(c, counts))
		return -EOVERFLOW;
	rc = MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf,
			    st->counts, st->counts + c->size, MPI_FLOAT,
			    st->comm);
	if (rc != MPI_SUCCESS)
		return mpi_fail("MPI_Allgatherv", rc);
	return 0;
}

static int mpi_bcast(struct comm *c, void *buf, size_t n, enum comm_dtype t,
		     int root)
{
	size_t es = comm_dtype_size(t), off, k;
	int rc;

	for (off = 0; off < n; off += k) {
		k = n - off < MPI_CHUNK ? n - off : MPI_CHUNK;
		rc = MPI_Bcast((char *)buf + off * es, (int)k, mpi_type(t),
			       root, mpi_comm(c));
		if (rc != MPI_SUCCESS)
			return mpi_fail("MPI_Bcast", rc);
	}
	return 0;
}

static int mpi_alltoallv(struct comm *c, const void *send,
			 const size_t *scounts, const size_t *sdispls,
			 void *recv, const size_t *rcounts,
			 const size_t *rdispls, enum comm_dtype t)
{
	struct mpi_state *st = c->impl;
	int *sc = st->counts, *sd = sc + c->size, *rc_ = sd + c->size;
	int *rd = rc_ + c->size;
	int p, rc;

	for (p = 0; p < c->size; p++) {
		if (scounts[p] > INT_MAX || sdispls[p] > INT_MAX ||
		    rcounts[p] > INT_MAX || rdispls[p] > INT_MAX)
			return -EOVERFLOW;
		sc[p] = (int)scounts[p];
		sd[p] = (int)sdispls[p];
		rc_[p] = (int)rcounts[p];
		rd[p] = (int)rdispls[p];
	}
	rc = MPI_Alltoallv(send, sc, sd, mpi_type(t), recv, rc_, rd,
			   mpi_type(t), st->comm);
	if (rc != MPI_SUCCESS)
		return mpi_fail("MPI_Alltoallv", rc);
	return 0;
}

static int mpi_check_count(const MPI_Status *s, enum comm_dtype t, size_t n)
{
	int got = 0;

	MPI_Get_count(s, mpi_type(t), &got);
	if (got < 0 || (size_t)got != n) {
		sigma_error("MPI receive: %d elements arrived, %zu expected",
			    got, n);
		return -EMSGSIZE;
	}
	return 0;
}

static int mpi_send(struct comm *c, const void *buf, size_t n,
		    enum comm_dtype t, int peer, int tag)
{
	int rc;

	if (n > INT_MAX)
		return -EOVERFLOW;
	rc = MPI_Send(buf, (int)n, mpi_type(t), peer, tag, mpi_comm(c));
	if (rc != MPI_SUCCESS)
		return mpi_fail("MPI_Send", rc);
	return 0;
}

static int mpi_recv(struct comm *c, void *buf, size_t n, enum comm_dtype t,
		    int peer, int tag)
{
	MPI_Status s;
	int rc;

	if (n > INT_MAX)
		return -EOVERFLOW;
	rc = MPI_Recv(buf, (int)n, mpi_type(t), peer, tag, mpi_comm(c), &s);
	if (rc == MPI_ERR_TRUNCATE)
		return -EMSGSIZE;
	if (rc != MPI_SUCCESS)
		return mpi_fail("MPI_Recv", rc);
	return mpi_check_count(&s, t, n);
}

static int mpi_sendrecv(struct comm *c, const void *sbuf, size_t sn, int speer,
			void *rbuf, size_t rn, int rpeer, enum comm_dtype t,
			int tag)
{
	MPI_Status s;
	int rc;

	if (sn > INT_MAX || rn > INT_MAX)
		return -EOVERFLOW;
	rc = MPI_Sendrecv(sbuf, (int)sn, mpi_type(t), speer, tag, rbuf, (int)rn,
			  mpi_type(t), rpeer, tag, mpi_comm(c), &s);
	if (rc == MPI_ERR_TRUNCATE)
		return -EMSGSIZE;
	if (rc != MPI_SUCCESS)
		return mpi_fail("MPI_Sendrecv", rc);
	return mpi_check_count(&s, t, rn);
}

_Static_assert(2 * sizeof(MPI_Request) <=
		   sizeof(((struct comm_request *)0)->handle),
	       "two MPI_Requests do not fit in comm_request");

static int mpi_isendrecv(struct comm *c, const void *sbuf, size_t sn,
			 int speer, void *rbuf, size_t rn, int rpeer,
			 enum comm_dtype t, int tag, struct comm_request *req)
{
	MPI_Request r[2];
	int rc;

	if (sn > INT_MAX || rn > INT_MAX)
		return -EOVERFLOW;
	rc = MPI_Irecv(rbuf, (int)rn, mpi_type(t), rpeer, tag, mpi_comm(c),
		       &r[0]);
	if (rc != MPI_SUCCESS)
		return mpi_fail("MPI_Irecv", rc);
	rc = MPI_Isend(sbuf, (int)sn, mpi_type(t), speer, tag, mpi_comm(c),
		       &r[1]);
	if (rc != MPI_SUCCESS) {
		MPI_Cancel(&r[0]);
		MPI_Request_free(&r[0]);
		return mpi_fail("MPI_Isend", rc);
	}
	memcpy(req->handle, r, sizeof(r));
	return 0;
}

static int mpi_barrier(struct comm *c)
{
	int rc = MPI_Barrier(mpi_comm(c));

	if (rc != MPI_SUCCESS)
		return mpi_fail("MPI_Barrier", rc);
	return 0;
}

static const struct comm_ops mpi_ops = {
    .split = mpi_split,
    .destroy = mpi_destroy,
    .allreduce_f32 = mpi_allreduce,
    .iallreduce_f32 = mpi_iallreduce,
    .wait = mpi_wait,
    .reduce_scatter_f32 = mpi_reduce_scatter,
    .allgather_f32 = mpi_allgather,
    .bcast = mpi_bcast,
    .alltoallv = mpi_alltoallv,
    .send = mpi_send,
    .recv = mpi_recv,
    .sendrecv = mpi_sendrecv,
    .isendrecv = mpi_isendrecv,
    .barrier = mpi_barrier,
};

int comm_mpi_start(char *err, size_t len)
{
	int inited = 0, provided = 0, rc;

	MPI_Initialized(&inited);
	if (inited)
		return 0;
	/*
	 * Open MPI 5 aborts every rank (exit 14) when one dies, unless its
	 * fault tolerance is on: then a call with the dead rank fails with
	 * MPI_ERR_PROC_FAILED, and the trainer exits 76 (a peer lost), as on
	 * Open MPI 4.1, which has no such parameter. A site's own setting
	 * wins.
	 */
	setenv("OMPI_MCA_mpi_ft_enable", "1", 0);
	rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
	if (rc != MPI_SUCCESS)
		return sigma_set_err(err, len, EIO,
				     "MPI_Init_thread failed (%d)", rc);
	mpi_we_initialised = true;
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	return 0;
}

void comm_mpi_stop(void)
{
	if (mpi_users == 0 && mpi_we_initialised && !mpi_failed) {
		MPI_Finalize();
		mpi_we_initialised = false;
	}
}

int comm_mpi_init(struct comm *c, struct boot *b, char *err, size_t len)
{
	MPI_Comm world;
	int rank, size, rc;

	rc = comm_mpi_start(err, len);
	if (rc < 0)
		return rc;
	/*
	 * No MPI message before every rank is out of MPI_Init_thread. Open
	 * MPI 4.1 lets a rank leave it while a slower one still makes
	 * progress inside it (in opal_progress, from ompi_mpi_init), before
	 * that one's PML has registered its fragment handlers. A TCP
	 * fragment from the fast rank then reaches a NULL handler
	 * (mca_btl_base_active_message_trigger[tag].cbfunc): SIGSEGV at
	 * address 0 under mca_btl_tcp, a few times in 100 starts of 4 ranks
	 * on a loaded machine (bench/pp-ep-stress). The PMIx fence is
	 * outside MPI: no rank passes it before every rank has returned.
	 */
	rc = boot_fence(b);
	if (rc < 0) {
		rc = sigma_set_err(err, len, -rc,
				   "the PMIx fence after MPI_Init_thread failed: %s",
				   strerror(-rc));
		goto out_fini;
	}
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (rank != b->rank || size != b->size) {
		rc = sigma_set_err(
		    err, len, EPROTO,
		    "MPI sees rank %d of %d, PMIx rank %d of %d: MPI and the bootstrap disagree (start with srun --mpi=pmix)",
		    rank, size, b->rank, b->size);
		goto out_fini;
	}
	rc = MPI_Comm_dup(MPI_COMM_WORLD, &world);
	if (rc != MPI_SUCCESS) {
		rc = sigma_set_err(err, len, EIO, "MPI_Comm_dup failed (%d)",
				   rc);
		goto out_fini;
	}
	c->rank = rank;
	c->size = size;
	rc = mpi_state_new(c, world);
	if (rc < 0) {
		MPI_Comm_free(&world);
		sigma_set_err(err, len, -rc, "MPI communicator: %s",
			      strerror(-rc));
		goto out_fini;
	}
	c->ops = &mpi_ops;
	c->be = COMM_MPI;
	c->mem = COMM_MEM_HOST;
	mpi_users++;
	return 0;

out_fini:
	comm_mpi_stop();
	return rc;
}
