/*
 * view.h - what sigmad sees of the cluster at one moment, filled by the
 * libslurm adapter (slurm_api.c) and read by the daemon. No Slurm types here.
 */
#ifndef SIGMAD_VIEW_H
#define SIGMAD_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "contract.h"

#define CTL_NAME_MAX	64
#define CTL_REASON_MAX	256
#define CTL_COMMENT_MAX 4096
#define CTL_LIST_MAX	1024

enum ctl_node_flag {
	CTL_N_DOWN = 1 << 0,  /* base state DOWN */
	CTL_N_DRAIN = 1 << 1, /* DRAIN flag (draining or drained) */
	CTL_N_NO_RESPOND = 1 << 2,
	CTL_N_IDLE = 1 << 3, /* base state IDLE, not completing */
	CTL_N_BUSY = 1 << 4, /* allocated, mixed or completing */
	CTL_N_FAIL = 1 << 5,
	CTL_N_FEATURE = 1 << 6,	 /* has the spare feature */
	CTL_N_RESERVED = 1 << 7, /* in sigma's spare reservation */
};

struct ctl_node {
	char name[CTL_NAME_MAX];
	unsigned flags;
	char reason[CTL_REASON_MAX];
	int64_t reason_time;
};

enum ctl_job_state {
	CTL_J_PENDING = 0,
	CTL_J_RUNNING, /* running or suspended */
	CTL_J_ENDED,   /* completed, failed, cancelled, node_fail, ... */
};

/* A sigma job: its AdminComment starts with "sigma[". */
struct ctl_job {
	uint32_t id;
	uint32_t uid;
	int state;
	bool completing;
	bool node_fail; /* ended NODE_FAIL */
	bool failed;	/* ended FAILED (non-zero exit of the batch script) */
	bool cancelled; /* ended CANCELLED (scancel): never requeued */
	/* asked for expedited requeue (25.11 and later): Slurm requeues and
	 * restarts it itself, once the epilog on its nodes has ended */
	bool expedited;
	/* why Slurm cannot requeue it (contract.h), NULL when it can */
	const char *unprotected;
	int exit_code;	/* the batch script's exit status (ended jobs) */
	int term_sig;	/* the signal that killed it, 0 if none */
	int64_t end_time;
	int restart_cnt;
	int64_t begin_time;
	char comment[CTL_COMMENT_MAX];
	char exc_nodes[CTL_LIST_MAX];
	size_t nnodes;
	int32_t *nodes; /* indexes into view.nodes */
};

struct ctl_view {
	int64_t now;
	struct ctl_node *nodes;
	size_t nnodes;
	struct ctl_job *jobs;
	size_t njobs;
	bool resv_exists;
	size_t nresv;	   /* nodes in the spare reservation */
	uint32_t *by_name; /* node indexes in name order (NULL: search all) */
};

void ctl_view_free(struct ctl_view *v);
/* Fill v->by_name from v->nodes (after the nodes change): 0 or -ENOMEM. */
int ctl_view_index_names(struct ctl_view *v);
/* Index of the node called name, or -1 (a binary search once indexed). */
long ctl_view_node(const struct ctl_view *v, const char *name);
struct ctl_job *ctl_view_job(const struct ctl_view *v, uint32_t id);
/* The names of job's nodes as a comma list into out (size bytes) */
void ctl_view_job_nodes(const struct ctl_view *v, const struct ctl_job *job,
			char *out, size_t size);

/* ---- what states mean ---------------------------------------------------- */

bool ctl_node_healthy(const struct ctl_node *n);
/* node i runs a sigma job that is running */
bool ctl_node_in_job(const struct ctl_view *v, size_t i);
/* sigma's one drain decision (lib/drain.c) for n as sigmad sees it */
enum sigma_drain_action ctl_drain_decide(const struct ctl_node *n,
					 enum sigma_drain_ask ask, char *why,
					 size_t whylen);
/* job ended a short while ago; ... with the trainer's "requeue me" codes */
bool ctl_job_just_ended(const struct ctl_job *job, int64_t now);
bool ctl_job_may_come_back(const struct ctl_job *job, int64_t now);

#endif /* SIGMAD_VIEW_H */
