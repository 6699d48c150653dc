/*
 * membudget.h - what a rank of sigma-train may use, and what it will use,
 * so that a layout that cannot fit is refused before anything is
 * allocated (exit 64 naming the figures) instead of ending under the OOM
 * killer.
 */
#ifndef SIGMA_TRAIN_MEMBUDGET_H
#define SIGMA_TRAIN_MEMBUDGET_H

#include <stddef.h>
#include <stdint.h>

#include "dist.h"
#include "model.h"

/* A rank's bytes, by kind. */
struct mem_need {
	uint64_t state;	      /* parameters, gradients, both moments */
	uint64_t acts;	      /* activations and scratch */
	uint64_t staging;     /* checkpoint copies: tier 2, tier 1, replica */
	uint64_t total;
};

/* What this rank may use, and where that figure comes from. */
struct mem_limit {
	uint64_t bytes;
	char why[256]; /* "SLURM_MEM_PER_NODE=8192 MiB over 2 ranks", ... */
};

/*
 * The bytes of a rank holding shard of cfg with nacts activation sets of
 * B sequences on ops: the model's own (model_bytes), plus stage_copies host
 * copies of its parameters and moments (3 floats each) for checkpoints,
 * plus replica_floats for the replica it keeps of its buddy's shard.
 */
void mem_need_of(struct mem_need *n, const struct model_config *cfg, int B,
		 int nacts, const struct model_shard *shard,
		 const struct sigma_ops *ops, int stage_copies,
		 size_t replica_floats);

/*
 * The bytes this rank may use: the job's Slurm memory limit
 * (SLURM_MEM_PER_NODE over the job's ranks on the node, or
 * SLURM_MEM_PER_CPU times SLURM_CPUS_PER_TASK) where one is set, and this
 * host's memory (MemTotal) over the job's ranks on the host, whichever is
 * smaller. Collective: the ranks learn which of them share a host. 0 or
 * -errno of the exchange.
 */
int mem_limit_of(struct dist *d, struct mem_limit *l);

/*
 * The bytes the kernels may use on their device (the GPU's free memory once
 * ops is initialised): 0 with l->bytes = 0 where ops allocates host memory,
 * or -errno where the device cannot say.
 */
int mem_device_limit(const struct sigma_ops *ops, struct mem_limit *l);

/*
 * The limit need does not fit in, or NULL: without a device limit
 * (dev->bytes 0), all of it against host's; with one, the model's state
 * and activations against dev's and the checkpoint copies (host memory)
 * against host's. A limit of 0 bytes is unknown and holds anything.
 * needed: the bytes held against the limit; what: "" or where they go
 * (" of device memory", ...).
 */
const struct mem_limit *mem_short(const struct mem_need *need,
				 const struct mem_limit *host,
				 const struct mem_limit *dev, uint64_t *needed,
				 const char **what);

#endif /* SIGMA_TRAIN_MEMBUDGET_H */
