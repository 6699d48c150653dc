/*
 * slurm_compat.h - what libslurm's public API changed between the Slurm
 * releases sigma builds against (22.05, 24.11, 26.05), bridged once.
 *
 * Included only by the files that call libslurm (spank/slurm_api.c,
 * sbin/controller/slurm_api.c, sbin/controller/slurm_poll.c,
 * sbin/controller/slurm_base.c, sbin/probe/drain.c), after <slurm/slurm.h> and, where used,
 * <slurm/slurmdb.h>. Each bridge names the release that made it needed;
 * on 22.05 every one of them compiles to the call sigma made before.
 *
 * Errors: libslurm lost slurm_get_errno() in 24.05.5; it always returned
 * errno, which the adapters read directly.
 */
#ifndef SIGMA_SLURM_COMPAT_H
#define SIGMA_SLURM_COMPAT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include <slurm/slurm.h>
#include <slurm/slurm_version.h>

#define SLURM_COMPAT_AT_LEAST(a, b)                                            \
	(SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(a, b, 0))

/*
 * A plugin's RPCs: since 23.11 libslurm authenticates messages through its
 * hash plugins. slurmd and slurmstepd load them for their own work, but
 * not in the process that runs SPANK's job prolog and epilog, where an RPC
 * then dies with "fatal: No hash plugins loaded" and the prolog fails.
 * slurm_init() loads them, once; before 23.11 nothing is needed.
 */
static inline void slurm_compat_rpc_ready(void)
{
#if SLURM_COMPAT_AT_LEAST(23, 11)
	static int done;

	if (!done) {
		slurm_init(NULL);
		done = 1;
	}
#endif
}

/*
 * Lists: 23.02 named them list_t and list_itr_t, 24.11 removed List and
 * ListIterator (the pointer typedefs). The adapters use the new names.
 */
#if !SLURM_COMPAT_AT_LEAST(23, 2)
typedef struct xlist list_t;
typedef struct listIterator list_itr_t;
#endif

/*
 * Host lists: up to 23.02 hostlist_t was the pointer, since 23.11 it is the
 * struct (opaque). Either way the adapters hold a slurm_compat_hostlist_t *.
 */
#if SLURM_COMPAT_AT_LEAST(23, 11)
typedef hostlist_t slurm_compat_hostlist_t;
#else
typedef struct hostlist slurm_compat_hostlist_t;
#endif

/*
 * Since 26.05 slurm_load_job, slurm_kill_job and slurm_requeue name a job
 * by a slurm_step_id_t (its job id, or its sluid); step_id and
 * step_het_comp NO_VAL, as SLURM_STEP_ID_INITIALIZER sets them, mean the
 * whole job.
 */
#if SLURM_COMPAT_AT_LEAST(26, 5)
static inline slurm_step_id_t slurm_compat_job(uint32_t job_id)
{
	slurm_step_id_t id = SLURM_STEP_ID_INITIALIZER;

	id.job_id = job_id;
	return id;
}
#define SLURM_COMPAT_JOB(job_id) slurm_compat_job(job_id)
#else
#define SLURM_COMPAT_JOB(job_id) (job_id)
#endif

static inline int slurm_compat_load_job(job_info_msg_t **msg, uint32_t job_id,
					uint16_t show_flags)
{
	return slurm_load_job(msg, SLURM_COMPAT_JOB(job_id), show_flags);
}

static inline int slurm_compat_kill_job(uint32_t job_id, uint16_t sig,
					uint16_t flags)
{
	return slurm_kill_job(SLURM_COMPAT_JOB(job_id), sig, flags);
}

static inline int slurm_compat_requeue(uint32_t job_id, uint32_t flags)
{
	return slurm_requeue(SLURM_COMPAT_JOB(job_id), flags);
}

/*
 * Whether a job asked for expedited requeue (sbatch --requeue=expedite,
 * 25.11 and later): slurmctld then requeues it itself when a node of it
 * fails and restarts it at once, after the epilog on its nodes. Before
 * 25.11 no job can ask.
 */
static inline bool slurm_compat_job_expedited(const slurm_job_info_t *j)
{
#if SLURM_COMPAT_AT_LEAST(25, 11)
	return (j->bitflags & EXPEDITED_REQUEUE) != 0;
#else
	(void)j;
	return false;
#endif
}

/*
 * The job an update (slurm_update_job) applies to: job_desc_msg_t's job_id
 * became step_id.job_id in 25.11 (slurm_init_job_desc_msg leaves the rest
 * of step_id NO_VAL). desc was set up by slurm_init_job_desc_msg.
 */
static inline void slurm_compat_job_desc_id(job_desc_msg_t *desc,
					    uint32_t job_id)
{
#if SLURM_COMPAT_AT_LEAST(25, 11)
	desc->step_id.job_id = job_id;
#else
	desc->job_id = job_id;
#endif
}

/*
 * A node update's reason. update_node_msg_t lost reason_uid in 26.05:
 * slurmctld always recorded the requester's authenticated uid instead
 * (22.05 too), so uid only fills the field where it still exists.
 */
static inline void slurm_compat_node_reason(update_node_msg_t *msg,
					    char *reason, uid_t uid)
{
	msg->reason = reason;
#if !SLURM_COMPAT_AT_LEAST(26, 5)
	msg->reason_uid = uid;
#else
	(void)uid;
#endif
}

/* 26.05 renamed slurm_free_ctl_conf, slurm_load_ctl_conf's destructor */
static inline void slurm_compat_free_conf(slurm_conf_t *conf)
{
#if SLURM_COMPAT_AT_LEAST(26, 5)
	slurm_free_conf(conf);
#else
	slurm_free_ctl_conf(conf);
#endif
}

/*
 * The name slurm_create_reservation returns: strdup()'d up to 25.11,
 * xstrdup()'d since 26.05, whose header says "caller must xfree". free()
 * on it aborts ("free(): invalid size"). libslurm exports its xfree as
 * slurm_xfree_ptr, with no public prototype: declared here, for 26.05.
 */
#if SLURM_COMPAT_AT_LEAST(26, 5)
extern void slurm_xfree_ptr(void *ptr);
#endif
static inline void slurm_compat_free_resv_name(char *name)
{
#if SLURM_COMPAT_AT_LEAST(26, 5)
	slurm_xfree_ptr(name);
#else
	free(name);
#endif
}

#ifdef _SLURMDB_H
/*
 * An accounting record to modify (slurmdb_job_modify): only what is set
 * changes. NO_VAL marks the numbers left alone, as slurmdb_create_job_rec
 * does; 25.05 removed lft (associations lost lft/rgt).
 */
static inline void slurm_compat_job_rec_init(slurmdb_job_rec_t *rec)
{
	memset(rec, 0, sizeof(*rec));
	rec->array_task_id = NO_VAL;
	rec->derived_ec = NO_VAL;
#if !SLURM_COMPAT_AT_LEAST(25, 5)
	rec->lft = NO_VAL;
#endif
	rec->resvid = NO_VAL;
}
#endif

#endif /* SIGMA_SLURM_COMPAT_H */
