/*
 * comm_impl.h - what the front end (comm.c) and the back ends (comm_self.c,
 * comm_mpi.c, comm_nccl.c) share: the back-end table, struct comm, the
 * back ends' entry points. Not installed, not for the trainer; the
 * bootstrap (boot.h) knows nothing of it.
 *
 * The front end checks arguments, keeps the statistics and tells the
 * watchdog when a call starts and ends; a back end only moves data. A back
 * end missing from this build has stubs here that answer -ENOTSUP.
 */
#ifndef SIGMA_COMM_IMPL_H
#define SIGMA_COMM_IMPL_H

#include <errno.h>

#include "config.h"
#include "comm.h"
#include "watchdog.h"

#define COMM_NAME_MAX 32

struct comm_ops {
	/* fill out (zeroed, name set) as the color/key sub-communicator of
	 * c, or set *none when this rank joins none */
	int (*split)(struct comm *c, int color, int key, struct comm *out,
		     bool *none);
	void (*destroy)(struct comm *c);
	int (*allreduce_f32)(struct comm *c, float *buf, size_t n);
	int (*iallreduce_f32)(struct comm *c, float *buf, size_t n,
			      struct comm_request *req);
	int (*wait)(struct comm_request *req);
	/* counts[size] of comm.h's blocks, their sum already checked */
	int (*reduce_scatter_f32)(struct comm *c, float *buf,
				  const size_t *counts);
	int (*allgather_f32)(struct comm *c, float *buf, const size_t *counts);
	int (*bcast)(struct comm *c, void *buf, size_t n, enum comm_dtype t,
		     int root);
	int (*alltoallv)(struct comm *c, const void *send,
			 const size_t *scounts, const size_t *sdispls,
			 void *recv, const size_t *rcounts,
			 const size_t *rdispls, enum comm_dtype t);
	int (*send)(struct comm *c, const void *buf, size_t n,
		    enum comm_dtype t, int peer, int tag);
	int (*recv)(struct comm *c, void *buf, size_t n, enum comm_dtype t,
		    int peer, int tag);
	int (*sendrecv)(struct comm *c, const void *sbuf, size_t sn, int speer,
			void *rbuf, size_t rn, int rpeer, enum comm_dtype t,
			int tag);
	/* NULL: not offered (-ENOTSUP) */
	int (*isendrecv)(struct comm *c, const void *sbuf, size_t sn,
			 int speer, void *rbuf, size_t rn, int rpeer,
			 enum comm_dtype t, int tag, struct comm_request *req);
	int (*barrier)(struct comm *c);
	/* device memory; NULL for host back ends (comm.c uses the heap) */
	void *(*alloc)(struct comm *c, size_t n);
	void (*free)(struct comm *c, void *p);
	int (*to_host)(struct comm *c, void *host, const void *src, size_t n);
	int (*from_host)(struct comm *c, void *dst, const void *host, size_t n);
};

struct comm {
	const struct comm_ops *ops;
	enum comm_backend be;
	enum comm_memory mem;
	int rank, size;
	char name[COMM_NAME_MAX];
	struct comm_options opt;
	struct comm_stats stats;
	struct boot *boot;
	bool broken; /* a call failed with -EIO or -ETIMEDOUT */
	void *impl;
};

/* ---- back ends: fill c->ops, rank, size, mem, impl from the world ----- */

int comm_self_init(struct comm *c, char *err, size_t len);

#ifdef HAVE_MPI
/* MPI_Init_thread unless MPI runs already (comm_start); 0 or -errno */
int comm_mpi_start(char *err, size_t len);
/* MPI_Finalize when this file started MPI and no communicator uses it */
void comm_mpi_stop(void);
int comm_mpi_init(struct comm *c, struct boot *b, char *err, size_t len);
#else
static inline int comm_mpi_start(char *err, size_t len)
{
	(void)err;
	(void)len;
	return 0;
}
static inline void comm_mpi_stop(void)
{
}
static inline int comm_mpi_init(struct comm *c, struct boot *b, char *err,
				size_t len)
{
	(void)c;
	(void)b;
	(void)err;
	(void)len;
	return -ENOTSUP;
}
#endif

#ifdef HAVE_NCCL
int comm_nccl_init(struct comm *c, struct boot *b, char *err, size_t len);
#else
static inline int comm_nccl_init(struct comm *c, struct boot *b, char *err,
				 size_t len)
{
	(void)c;
	(void)b;
	(void)err;
	(void)len;
	return -ENOTSUP;
}
#endif

#endif /* SIGMA_COMM_IMPL_H */
