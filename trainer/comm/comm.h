/*
 * comm.h - the collectives of sigma-train behind one interface, with three
 * back ends:
 *
 *   COMM_SELF  one process, host memory: every collective is a copy or
 *              nothing; send/recv to oneself queue the message
 *   COMM_MPI   MPI (Open MPI) on host memory, across processes and nodes
 *   COMM_NCCL  NCCL on device memory (CUDA), its unique id handed out
 *              through PMIx (boot_share); one GPU per rank
 *
 * Lifecycle:
 *
 *   boot_init -> comm_create(world) -> comm_split(...) -> collectives
 *             -> comm_destroy(sub-communicators) -> comm_destroy(world)
 *             -> boot_fini
 *
 * Every collective is called by every rank of the communicator, in the same
 * order, with matching arguments (counts, root, dtype), from one thread at a
 * time. Each call returns when its result is in place (NCCL: the stream has
 * finished), except comm_iallreduce_f32, which returns at once and completes
 * in comm_wait. Buffers live in the back end's memory space
 * (comm_memory()).
 *
 * Failures: functions return 0 or a negative errno (-EINVAL bad argument,
 * -EOVERFLOW count too large for the back end, -EIO the back end failed,
 * e.g. a peer died, -ETIMEDOUT a collective exceeded the timeout). A
 * communicator that returned -EIO or -ETIMEDOUT is unusable: the caller
 * exits with COMM_EXIT_PEER so Slurm and the controller requeue the job.
 * The watchdog (comm_watchdog_start) is the backstop when a call cannot
 * return at all: it ends the process with COMM_EXIT_PEER once a
 * collective has run longer than the timeout.
 */
#ifndef SIGMA_COMM_H
#define SIGMA_COMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "boot.h"
#include "watchdog.h" /* COMM_EXIT_PEER, COMM_TIMEOUT_MAX */

/* Default collective timeout in seconds (SIGMA_COMM_TIMEOUT overrides). */
#define COMM_TIMEOUT_DEFAULT ((double)BOOT_TIMEOUT_DEFAULT)

enum comm_backend {
	COMM_SELF,
	COMM_MPI,
	COMM_NCCL,
};

enum comm_memory {
	COMM_MEM_HOST,
	COMM_MEM_DEVICE,
};

enum comm_dtype {
	COMM_F32,
	COMM_I32,
	COMM_U8,
};

/* Split color of a rank that joins no group (it gets NULL). */
#define COMM_COLOR_NONE (-1)

struct comm;

struct comm_options {
	/* seconds a collective may take before it is abandoned with
	 * -ETIMEDOUT where the back end can (NCCL), 0 = forever */
	double timeout_s;
	/* NCCL: CUDA device of this rank, -1 = local rank modulo the
	 * visible devices */
	int device;
	/* NCCL: the cudaStream_t the caller's kernels run on (NULL: the
	 * legacy default stream). Each call waits for the work queued there
	 * before it reads the buffers, without stopping the host. */
	void *stream;
};

/* timeout from SIGMA_COMM_TIMEOUT or the default, device -1, stream NULL */
int comm_options_default(struct comm_options *o, char *err, size_t len);

/* Cumulative accounting of one communicator. */
struct comm_stats {
	uint64_t calls; /* collectives and point-to-point calls */
	/* bytes this rank sends at the least: a point-to-point call or a
	 * broadcast its payload, an all-to-all its blocks, an all-reduce of
	 * n bytes over P ranks 2 n (P - 1) / P (as a ring does), of which
	 * a reduce-scatter is the first half and an all-gather the second */
	uint64_t bytes;
	uint64_t ns;	/* wall time spent inside calls */
};

/* "self", "mpi", "nccl" */
const char *comm_backend_name(enum comm_backend be);
/* Parse a back end name; -EINVAL when unknown. */
int comm_backend_parse(const char *s, enum comm_backend *be);
/* True when this build has the back end (MPI: HAVE_MPI, NCCL: HAVE_NCCL). */
bool comm_backend_available(enum comm_backend be);
size_t comm_dtype_size(enum comm_dtype t);

/*
 * Before boot_init: start the MPI library when this build has it and the
 * process runs under a PMIx server (srun --mpi=pmix). Open MPI 5 cannot
 * start after the process's own PMIx_Init (MPI_Init_thread fails "on a
 * NULL communicator"); Open MPI 4.1 starts either way. The MPI back end
 * then finds it started. 0, or -errno with err.
 */
int comm_start(char *err, size_t len);
/*
 * After the last comm_destroy and boot_fini: finalize what comm_start
 * started, when no MPI communicator was made (a job of one rank).
 */
void comm_stop(void);

/*
 * The world communicator of the job b describes (collective over the job).
 * COMM_SELF needs b->size == 1. Returns 0 or -errno, err says why.
 */
int comm_create(struct comm **out, enum comm_backend be, struct boot *b,
		const struct comm_options *o, char *err, size_t len);
/*
 * Collective over c: ranks with the same color >= 0 form a new
 * communicator, ranked by key (ties by rank in c); a rank passing
 * COMM_COLOR_NONE gets *out = NULL. name labels messages ("dp", "ep").
 */
int comm_split(struct comm *c, int color, int key, const char *name,
	       struct comm **out);
/* Release c (collective for MPI and NCCL). NULL is a no-op. */
void comm_destroy(struct comm *c);

int comm_rank(const struct comm *c);
int comm_size(const struct comm *c);
enum comm_backend comm_backend_of(const struct comm *c);
enum comm_memory comm_memory(const struct comm *c);
const char *comm_name(const struct comm *c);
void comm_get_stats(const struct comm *c, struct comm_stats *s);

/*
 * Messages this process has sent to other ranks so far: every call that
 * carries a payload to a peer (a point-to-point send, a collective this
 * rank contributes bytes to), over every communicator of more than one
 * rank. The auto-tuner's count of what a slow link costs per step.
 */
uint64_t comm_messages(void);
/*
 * Fault injection for the auto-tuner's tests (docs/tuner.md): each such
 * message arrives ns nanoseconds late, as over a slow link: a blocking
 * call waits that long before it starts, a started one (comm_iallreduce,
 * comm_isendrecv) is done no sooner than ns after it started, so that
 * work overlapped with it hides the delay as it would a slow transfer.
 * The time counts as the call's. 0 (the default) holds nothing.
 */
void comm_inject_send_delay(uint64_t ns);

/*
 * Memory in the back end's space: n bytes, zeroed (NULL on failure), and
 * copies between it and host memory. For the self and MPI back ends this
 * is host memory; for NCCL, device memory on the communicator's device.
 */
void *comm_alloc(struct comm *c, size_t n);
void comm_free(struct comm *c, void *p);
int comm_to_host(struct comm *c, void *host, const void *src, size_t n);
int comm_from_host(struct comm *c, void *dst, const void *host, size_t n);

/* buf[n] = sum over ranks of buf[n], in place. */
int comm_allreduce_f32(struct comm *c, float *buf, size_t n);

/* A started all-reduce or exchange; complete it with comm_wait. */
struct comm_request {
	struct comm *c;
	bool active;
	bool exchange; /* comm_isendrecv's: handle[0] receives, [1] sends */
	uint64_t t0_ns;
	size_t bytes;
	size_t rn;		 /* an exchange: elements it receives */
	enum comm_dtype rtype;	 /* and their type */
	uint64_t hold_ns; /* injected: done no sooner than t0_ns + hold_ns */
	uint64_t handle[2]; /* back end's handle (MPI_Request, cudaEvent_t) */
};

/*
 * Start buf[n] = sum over ranks, in place; buf must not be touched until
 * comm_wait returns. At most one request per communicator at a time is
 * guaranteed to progress without comm_wait being called (MPI progresses
 * inside MPI calls).
 */
int comm_iallreduce_f32(struct comm *c, float *buf, size_t n,
			struct comm_request *req);
int comm_wait(struct comm_request *req);

/*
 * Blocks of a buffer split over the ranks (ZeRO-style sharding): rank r's
 * block is buf[displ(r) .. + counts[r]), displ(r) the sum of the counts
 * before it. counts[size] is the same on every rank.
 *
 * reduce_scatter: buf is summed over the ranks and this rank's block
 * receives its part of the sum; the rest of buf is left undefined.
 * allgather: every rank's block of buf, in place, to every rank.
 */
int comm_reduce_scatter_f32(struct comm *c, float *buf, const size_t *counts);
int comm_allgather_f32(struct comm *c, float *buf, const size_t *counts);

/* buf[n] of root copied to every rank. */
int comm_bcast(struct comm *c, void *buf, size_t n, enum comm_dtype t,
	       int root);

/*
 * All-to-all with per-peer counts and displacements, in elements of t:
 * this rank sends send[sdispls[p] .. + scounts[p]) to rank p and receives
 * rank p's block into recv[rdispls[p] .. + rcounts[p]). scounts[p] here
 * must equal rcounts[me] on rank p. Blocks must not overlap; send and
 * recv must not overlap.
 */
int comm_alltoallv(struct comm *c, const void *send, const size_t *scounts,
		   const size_t *sdispls, void *recv, const size_t *rcounts,
		   const size_t *rdispls, enum comm_dtype t);

/*
 * Point to point. Tags must match (MPI); NCCL ignores them and matches in
 * call order per peer pair. A blocking send may wait for its receive:
 * when two ranks exchange, use comm_sendrecv.
 */
int comm_send(struct comm *c, const void *buf, size_t n, enum comm_dtype t,
	      int peer, int tag);
int comm_recv(struct comm *c, void *buf, size_t n, enum comm_dtype t, int peer,
	      int tag);
/* Send sbuf[sn] to speer and receive rbuf[rn] from rpeer together. */
int comm_sendrecv(struct comm *c, const void *sbuf, size_t sn, int speer,
		  void *rbuf, size_t rn, int rpeer, enum comm_dtype t, int tag);
/*
 * The same, started: it goes on while the caller computes (MPI moves it
 * inside the caller's other MPI calls) and completes in comm_wait; sbuf
 * and rbuf must not be touched until then. Host back ends only (self,
 * MPI): -ENOTSUP on NCCL.
 */
int comm_isendrecv(struct comm *c, const void *sbuf, size_t sn, int speer,
		   void *rbuf, size_t rn, int rpeer, enum comm_dtype t, int tag,
		   struct comm_request *req);

int comm_barrier(struct comm *c);

/* ---- watchdog ---------------------------------------------------------------
 */

/* the watchdog (comm_watchdog_start, _stop): watchdog.h */

#endif /* SIGMA_COMM_H */
