/*
 * boot.h - how a sigma-train process learns who it is: rank, size, local
 * rank, local size and node name from the PMIx job data when it runs under
 * `srun --mpi=pmix` (or any PMIx server), or a job of one process when it
 * runs alone. Plus a small key/blob exchange over PMIx (put, commit, fence,
 * get) used to hand the NCCL unique id from rank 0 to every rank.
 *
 *   boot_init -> [boot_put ... boot_commit -> boot_fence -> boot_get ...] ->
 * boot_fini
 *
 * Nothing is parsed from SLURM_* variables when PMIx is there. Without a
 * PMIx server, a process that srun started as one of several tasks
 * (SLURM_NTASKS > 1) is refused: it would otherwise train alone, unseen.
 */
#ifndef SIGMA_COMM_BOOT_H
#define SIGMA_COMM_BOOT_H

#include <stdbool.h>
#include <stddef.h>

#define BOOT_NODE_MAX 256
#define BOOT_KEY_MAX  64 /* PMIx keys are at most 511 bytes; ours are short */
#define BOOT_BLOB_MAX 65536

/*
 * Default timeout of boot_fence in seconds, until comm_create sets the
 * communicators' timeout on it; the collectives' default too
 * (COMM_TIMEOUT_DEFAULT, comm.h).
 */
#define BOOT_TIMEOUT_DEFAULT 300

struct boot {
	int rank;		  /* [0, size) */
	int size;		  /* processes in the job */
	int local_rank;		  /* [0, local_size): index on this node */
	int local_size;		  /* processes of the job on this node */
	char node[BOOT_NODE_MAX]; /* node name (PMIX_HOSTNAME) */
	bool pmix;	     /* true when the values came from a PMIx server */
	int fence_timeout_s; /* boot_fence gives up after this (0: never) */
	unsigned long seq;   /* exchanges done, to make keys unique */
	void *impl;	     /* PMIx state, NULL without PMIx */
	void *store;	     /* single process: what boot_put stored */
};

/* this process runs under a PMIx server (PMIX_NAMESPACE is set) */
bool boot_under_pmix(void);

/*
 * Fill b. Under a PMIx server (PMIX_NAMESPACE in the environment) PMIx
 * must answer or this fails; without one, a job of one process. Returns 0
 * or -errno, err says why.
 */
int boot_init(struct boot *b, char *err, size_t len);
/* Finalize PMIx when boot_init started it. Safe on a zeroed struct. */
void boot_fini(struct boot *b);

/*
 * Publish data[len] under key for every rank of the job (scope global).
 * Visible to others after boot_commit and a boot_fence. Single process:
 * stored locally. Returns 0 or -errno.
 */
int boot_put(struct boot *b, const char *key, const void *data, size_t len);
int boot_commit(struct boot *b);
/* Barrier over the whole job that also collects the committed data. */
int boot_fence(struct boot *b);
/*
 * Read the blob rank published under key into data[max]; *got gets its
 * length. -ENOENT when absent, -EMSGSIZE when longer than max.
 */
int boot_get(struct boot *b, int rank, const char *key, void *data, size_t max,
	     size_t *got);

/*
 * Rank 0's data[len] handed to every rank: rank 0 puts it under a fresh
 * key derived from name, all commit and fence, the others get it into
 * data. Collective over the job; every rank passes the same name and len.
 */
int boot_share(struct boot *b, const char *name, void *data, size_t len);

#endif /* SIGMA_COMM_BOOT_H */
