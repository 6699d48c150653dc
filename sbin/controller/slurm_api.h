/*
 * slurm_api.h - sigmad's adapter to slurmctld: every libslurm call of the
 * controller is in slurm_api.c and slurm_poll.c (the poll's reading of the
 * cluster), so API drift between Slurm releases stays in two files.
 * Functions return 0 or a negative errno; failures are logged with Slurm's
 * own error text.
 */
#ifndef SIGMAD_SLURM_API_H
#define SIGMAD_SLURM_API_H

#include <stddef.h>
#include <stdint.h>

#include "view.h"

int ctl_slurm_init(void);
void ctl_slurm_fini(void);

/*
 * Load nodes, sigma jobs and the spare reservation resv into v (freed with
 * ctl_view_free). feature marks nodes with that feature (may be empty).
 * poll_s, the poll interval, sets how often a large cluster's whole tables
 * are read (slurm_poll.c).
 */
int ctl_slurm_load(struct ctl_view *v, const char *resv, const char *feature,
		   int64_t poll_s);
/* sigmad changed a node: the next poll reads the node table whole, so it
 * never acts twice on a record it changed itself. */
void ctl_slurm_poll_changed(void);
/* Free what slurm_poll.c keeps between polls (by ctl_slurm_fini). */
void ctl_slurm_poll_fini(void);
/* Log a failed libslurm call with Slurm's error text: -EIO. */
int ctl_slurm_fail(const char *what, const char *obj);

/* Expand a Slurm host list ("n[5-6],n9"); calls fn per name. */
int ctl_slurm_expand(const char *list, int (*fn)(const char *name, void *arg),
		     void *arg);

int ctl_slurm_drain(const char *node, const char *reason);
int ctl_slurm_down(const char *node, const char *reason);
int ctl_slurm_resume(const char *node);

/* Set the reservation to exactly nodes (comma list); "" deletes it. */
int ctl_slurm_resv_set(const char *resv, const char *nodes, int exists);

/* 0: requeued; 1: pending already (Slurm requeued it first); <0: failed */
int ctl_slurm_requeue(uint32_t job);
/* On a pending job: exclude nodes, start no earlier than begin (0: leave
 * its begin time as it is). */
int ctl_slurm_pending_update(uint32_t job, const char *exc_nodes,
			     int64_t begin);
/*
 * Set the job's AdminComment; on a finished job, its accounting record.
 * 1: not yet (slurmdbd unreachable, or the job's end not recorded there).
 */
int ctl_slurm_admin_comment(uint32_t job, const char *text);
int ctl_slurm_signal(uint32_t job, int sig);
/*
 * How many of job's ended steps Slurm's accounting records as failed with
 * node among their nodes (FAILED; CANCELLED, as a step a task's signal
 * ended is; NODE_FAIL; OUT_OF_MEMORY): >= 0, or a
 * negative errno when slurmdbd cannot be asked.
 */
int ctl_slurm_failed_steps(uint32_t job, const char *node);
/*
 * A running job on node whose owner is not uid: its id, 0 when there is
 * none, or a negative errno when slurmctld cannot be asked.
 */
long ctl_slurm_other_job(const char *node, uint32_t uid);
/* SlurmUser's uid and PrivateData=jobs from slurmctld's configuration. */
int ctl_slurm_user(uint32_t *uid, bool *private_jobs);

#endif /* SIGMAD_SLURM_API_H */
