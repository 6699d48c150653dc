/*
 * membudget.c - a rank's memory: what it needs for its layout, what it
 * may use (membudget.h).
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sigma.h"
#include "membudget.h"

void mem_need_of(struct mem_need *n, const struct model_config *cfg, int B,
		 int nacts, const struct model_shard *shard,
		 const struct sigma_ops *ops, int stage_copies,
		 size_t replica_floats)
{
	size_t pbytes = 0,
	       all = model_bytes(cfg, B, nacts, shard, ops, &pbytes);

	n->state = 4 * (uint64_t)pbytes;
	n->acts = all - n->state;
	n->staging = (uint64_t)stage_copies * 3 * pbytes +
		     sizeof(float) * (uint64_t)replica_floats;
	n->total = n->state + n->acts + n->staging;
}

/* MemTotal of /proc/meminfo in bytes, 0 when unknown */
static uint64_t host_total(void)
{
	FILE *f = fopen("/proc/meminfo", "re");
	unsigned long long kb = 0;
	char line[256];

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "MemTotal: %llu kB", &kb) == 1)
			break;
	fclose(f);
	return (uint64_t)kb * 1024;
}

/* the job's ranks whose host name is this rank's: 1 at least */
static int host_ranks(struct dist *d, int *n)
{
	char mine[HOST_NAME_MAX + 1] = "", *all;
	size_t w = sizeof(mine);
	int rc;

	*n = 1;
	if (gethostname(mine, sizeof(mine) - 1))
		return 0; /* unknown: this rank alone */
	if (d->size == 1)
		return 0;
	all = calloc((size_t)d->size, w);
	if (!all)
		return -ENOMEM;
	rc = dist_allgather(d, mine, w, all);
	if (rc == 0) {
		*n = 0;
		for (int i = 0; i < d->size; i++)
			*n += !strncmp(all + (size_t)i * w, mine, w);
	}
	free(all);
	return rc;
}

/* the Slurm limit of this rank in bytes, 0 none */
static uint64_t slurm_limit(const struct dist *d, char *why, size_t len)
{
	const char *node = getenv("SLURM_MEM_PER_NODE");
	const char *cpu = getenv("SLURM_MEM_PER_CPU");
	const char *cpt = getenv("SLURM_CPUS_PER_TASK");
	int ls = d->boot.local_size > 0 ? d->boot.local_size : 1;
	long mb = 0, cpus = 1;

	if (node && !sigma_parse_long(node, 1, LONG_MAX / 2, &mb)) {
		snprintf(why, len, "SLURM_MEM_PER_NODE=%ld MiB over %d rank%s on the node",
			 mb, ls, ls == 1 ? "" : "s");
		return ((uint64_t)mb << 20) / (uint64_t)ls;
	}
	if (cpu && !sigma_parse_long(cpu, 1, LONG_MAX / 2, &mb)) {
		if (!cpt || sigma_parse_long(cpt, 1, 4096, &cpus))
			cpus = 1;
		snprintf(why, len, "SLURM_MEM_PER_CPU=%ld MiB x %ld cpu%s per task",
			 mb, cpus, cpus == 1 ? "" : "s");
		return ((uint64_t)mb << 20) * (uint64_t)cpus;
	}
	return 0;
}

int mem_device_limit(const struct sigma_ops *ops, struct mem_limit *l)
{
	uint64_t avail = 0, total = 0;
	int rc;

	l->bytes = 0;
	l->why[0] = '\0';
	if (!ops->mem_info)
		return 0;
	rc = ops->mem_info(&avail, &total);
	if (rc)
		return rc;
	l->bytes = avail;
	snprintf(l->why, sizeof(l->why), "the %s device's %llu MiB free of %llu MiB",
		 ops->name, (unsigned long long)(avail >> 20),
		 (unsigned long long)(total >> 20));
	return 0;
}

const struct mem_limit *mem_short(const struct mem_need *need,
				 const struct mem_limit *host,
				 const struct mem_limit *dev, uint64_t *needed,
				 const char **what)
{
	uint64_t on_dev = need->state + need->acts;

	*what = "";
	*needed = need->total;
	if (!dev->bytes)
		return host->bytes && need->total > host->bytes ? host : NULL;
	if (on_dev > dev->bytes) {
		*needed = on_dev;
		*what = " of device memory";
		return dev;
	}
	*needed = need->staging;
	*what = " of host memory for checkpoint copies";
	return host->bytes && need->staging > host->bytes ? host : NULL;
}

int mem_limit_of(struct dist *d, struct mem_limit *l)
{
	uint64_t total = host_total(), slurm;
	char why[sizeof(l->why)] = "";
	int n = 1, rc = host_ranks(d, &n);

	if (rc)
		return rc;
	l->bytes = total / (uint64_t)(n > 0 ? n : 1);
	snprintf(l->why, sizeof(l->why), "this host's %llu MiB over %d rank%s on it",
		 (unsigned long long)(total >> 20), n, n == 1 ? "" : "s");
	slurm = slurm_limit(d, why, sizeof(why));
	if (slurm && (slurm < l->bytes || !total)) {
		l->bytes = slurm;
		sigma_strlcpy(l->why, why, sizeof(l->why));
	}
	return 0;
}
