/*
 * slurm_api.c - the controller's libslurm calls (see slurm_api.h), but the
 * poll's reading of the cluster (slurm_poll.c) and the helpers both use
 * (slurm_base.c); what differs between Slurm releases is bridged in
 * slurm_compat.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>
#include <slurm/slurmdb.h>

#include "sigma.h"
#include "contract.h"
#include "slurm_api.h"
#include "slurm_compat.h"

int ctl_slurm_init(void)
{
	slurm_init(NULL); /* honours SLURM_CONF */
	return 0;
}

void ctl_slurm_fini(void)
{
	ctl_slurm_poll_fini();
	slurm_fini();
}

static int update_node(const char *node, uint32_t state, const char *reason)
{
	update_node_msg_t m;

	slurm_init_update_node_msg(&m);
	m.node_names = (char *)node;
	m.node_state = state;
	if (reason)
		slurm_compat_node_reason(&m, (char *)reason, getuid());
	ctl_slurm_poll_changed(); /* read the nodes whole at the next poll */
	if (slurm_update_node(&m) != SLURM_SUCCESS)
		return ctl_slurm_fail("slurm_update_node", node);
	return 0;
}

int ctl_slurm_drain(const char *node, const char *reason)
{
	return update_node(node, NODE_STATE_DRAIN, reason);
}

int ctl_slurm_down(const char *node, const char *reason)
{
	return update_node(node, NODE_STATE_DOWN, reason);
}

int ctl_slurm_resume(const char *node)
{
	return update_node(node, NODE_RESUME, NULL);
}

int ctl_slurm_resv_set(const char *resv, const char *nodes, int exists)
{
	resv_desc_msg_t m;

	if (!*nodes) {
		reservation_name_msg_t d = {.name = (char *)resv};

		if (!exists)
			return 0;
		/* an empty node_list would let Slurm pick any nodes: delete */
		if (slurm_delete_reservation(&d) != SLURM_SUCCESS)
			return ctl_slurm_fail("slurm_delete_reservation", resv);
		return 0;
	}
	slurm_init_resv_desc_msg(&m);
	m.name = (char *)resv;
	m.node_list = (char *)nodes;
	if (exists) {
		if (slurm_update_reservation(&m) != SLURM_SUCCESS)
			return ctl_slurm_fail("slurm_update_reservation", resv);
		return 0;
	}
	m.start_time = time(NULL);
	m.duration = INFINITE;
	m.users = "root";
	/* IGNORE_JOBS: a busy node may join; no MAINT, so nodes show "resv" */
	m.flags = RESERVE_FLAG_IGN_JOBS;
	char *name = slurm_create_reservation(&m);
	if (!name)
		return ctl_slurm_fail("slurm_create_reservation", resv);
	slurm_compat_free_resv_name(name);
	return 0;
}

int ctl_slurm_requeue(uint32_t job)
{
	char id[16];

	snprintf(id, sizeof(id), "%u", job);
	if (slurm_compat_requeue(job, 0) == SLURM_SUCCESS)
		return 0;
	if (errno == ESLURM_JOB_PENDING) {
		/* Slurm requeued it first (a node sigmad set down) */
		sigma_debug("slurm_requeue %s: pending already", id);
		return 1;
	}
	return ctl_slurm_fail("slurm_requeue", id);
}

int ctl_slurm_pending_update(uint32_t job, const char *exc_nodes, int64_t begin)
{
	job_desc_msg_t j;
	char id[16];

	snprintf(id, sizeof(id), "%u", job);
	slurm_init_job_desc_msg(&j);
	slurm_compat_job_desc_id(&j, job);
	if (exc_nodes && *exc_nodes)
		j.exc_nodes = (char *)exc_nodes;
	if (slurm_update_job(&j) != SLURM_SUCCESS)
		return ctl_slurm_fail("slurm_update_job(exc_nodes)", id);
	if (!begin)
		return 0;
	/* begin_time alone, after exc_nodes: never earlier than now + 1 s */
	slurm_init_job_desc_msg(&j);
	slurm_compat_job_desc_id(&j, job);
	j.begin_time = (time_t)begin;
	if (slurm_update_job(&j) != SLURM_SUCCESS)
		return ctl_slurm_fail("slurm_update_job(begin_time)", id);
	return 0;
}

/*
 * The job's newest accounting record has ended: slurmdbd has applied the
 * job's own end, which slurmctld sends asynchronously and which carries the
 * controller's AdminComment. A write made before it would be overwritten.
 */
static bool slurm_db_job_ended(void *db, slurmdb_job_cond_t *cond,
			       const char *text, bool *has)
{
	list_t *jobs = slurmdb_jobs_get(db, cond);
	list_itr_t *it;
	slurmdb_job_rec_t *rec;
	bool ended = false;

	if (!jobs)
		return false;
	it = slurm_list_iterator_create(jobs);
	/* without JOBCOND_FLAG_DUP: one record, the newest attempt */
	rec = it ? slurm_list_next(it) : NULL;
	if (rec) {
		uint32_t st = rec->state & JOB_STATE_BASE;

		ended = rec->end != 0 && st != JOB_PENDING &&
			st != JOB_RUNNING && st != JOB_SUSPENDED;
		*has = rec->admin_comment && !strcmp(rec->admin_comment, text);
	}
	if (it)
		slurm_list_iterator_destroy(it);
	slurm_list_destroy(jobs);
	return ended;
}

/*
 * A query of one job's newest accounting record in this cluster: the
 * configuration, the condition with the lists it points into, and the
 * connection to slurmdbd. It stays where the caller put it (cond points
 * at step). db_job_close frees it, whatever db_job_open returned.
 */
struct db_job {
	slurm_conf_t *conf;
	slurm_selected_step_t step;
	slurmdb_job_cond_t cond;
	list_t *steps, *clusters; /* our memory: no destructors */
	void *db;
};

/* 0 ready; 1 slurmdbd is not reachable; -EIO (said) no query to make */
static int db_job_open(struct db_job *q, uint32_t job, const char *id)
{
	memset(q, 0, sizeof(*q));
	if (slurm_load_ctl_conf((time_t)0, &q->conf) != SLURM_SUCCESS) {
		q->conf = NULL;
		return ctl_slurm_fail("slurm_load_ctl_conf", id);
	}
	q->step.array_task_id = NO_VAL;
	q->step.het_job_offset = NO_VAL;
	q->step.step_id.job_id = job;
	q->step.step_id.step_id = NO_VAL;
	q->step.step_id.step_het_comp = NO_VAL;
	q->steps = slurm_list_create(NULL);
	q->clusters = slurm_list_create(NULL);
	if (!q->steps || !q->clusters || !q->conf->cluster_name)
		return ctl_slurm_fail("the accounting query", id);
	slurm_list_append(q->steps, &q->step);
	slurm_list_append(q->clusters, q->conf->cluster_name);
	q->cond.step_list = q->steps;
	q->cond.cluster_list = q->clusters;
	q->cond.db_flags = SLURMDB_JOB_FLAG_NOTSET; /* 0 would match no job */
	/* as recorded: without it slurmdbd fills a missing end with "now" */
	q->cond.flags = JOBCOND_FLAG_NO_TRUNC;
	q->db = slurmdb_connection_get(NULL);
	return q->db ? 0 : 1;
}

static void db_job_close(struct db_job *q)
{
	if (q->db)
		slurmdb_connection_close(&q->db);
	if (q->steps)
		slurm_list_destroy(q->steps);
	if (q->clusters)
		slurm_list_destroy(q->clusters);
	if (q->conf)
		slurm_compat_free_conf(q->conf);
}

/* step ended failed, and node was one of its nodes */
static bool db_step_failed_on(const slurmdb_step_rec_t *st, const char *node)
{
	uint32_t base = st->state & JOB_STATE_BASE;
	slurm_compat_hostlist_t *hl;
	bool on;

	/* the batch script, the extern and interactive steps are not launches */
	if (st->step_id.step_id > SLURM_MAX_NORMAL_STEP_ID || !st->nodes)
		return false;
	/* a task killed by a signal (a crash) ends its step CANCELLED */
	if (base != JOB_FAILED && base != JOB_CANCELLED &&
	    base != JOB_NODE_FAIL && base != JOB_OOM)
		return false;
	hl = slurm_hostlist_create(st->nodes);
	if (!hl)
		return false;
	on = slurm_hostlist_find(hl, node) >= 0;
	slurm_hostlist_destroy(hl);
	return on;
}

int ctl_slurm_failed_steps(uint32_t job, const char *node)
{
	struct db_job q;
	list_t *jobs = NULL;
	list_itr_t *it;
	slurmdb_job_rec_t *rec;
	slurmdb_step_rec_t *st;
	char id[16];
	int n = -EIO, rc;

	snprintf(id, sizeof(id), "%u", job);
	rc = db_job_open(&q, job, id);
	if (rc == 1)
		sigma_warn("job %s: slurmdbd not reachable: no step records", id);
	if (rc)
		goto out;
	jobs = slurmdb_jobs_get(q.db, &q.cond);
	if (!jobs) {
		ctl_slurm_fail("slurmdb_jobs_get", id);
		goto out;
	}
	n = 0;
	/* without JOBCOND_FLAG_DUP: one record, the running attempt's */
	it = slurm_list_iterator_create(jobs);
	rec = it ? slurm_list_next(it) : NULL;
	if (it)
		slurm_list_iterator_destroy(it);
	it = rec && rec->steps ? slurm_list_iterator_create(rec->steps) : NULL;
	while (it && (st = slurm_list_next(it)))
		n += db_step_failed_on(st, node);
	if (it)
		slurm_list_iterator_destroy(it);
out:
	if (jobs)
		slurm_list_destroy(jobs);
	db_job_close(&q);
	return n;
}

long ctl_slurm_other_job(const char *node, uint32_t uid)
{
	job_info_msg_t *msg = NULL;
	long other = 0;

	if (slurm_load_jobs((time_t)0, &msg, SHOW_ALL) != SLURM_SUCCESS)
		return ctl_slurm_fail("slurm_load_jobs", node);
	for (uint32_t i = 0; i < msg->record_count && !other; i++) {
		const slurm_job_info_t *j = &msg->job_array[i];
		uint32_t base = j->job_state & JOB_STATE_BASE;
		slurm_compat_hostlist_t *hl;

		if (j->user_id == uid || !j->nodes ||
		    (base != JOB_RUNNING && base != JOB_SUSPENDED))
			continue;
		hl = slurm_hostlist_create(j->nodes);
		if (hl && slurm_hostlist_find(hl, node) >= 0)
			other = (long)j->job_id;
		if (hl)
			slurm_hostlist_destroy(hl);
	}
	slurm_free_job_info_msg(msg);
	return other;
}

/*
 * slurmctld refuses to change a job that has finished (a give-up is often
 * decided just after the job ended): write its accounting record instead,
 * as `sacctmgr modify job where jobid=ID set AdminComment=TEXT` does, so
 * that sacct tells the story. 1 when that cannot be done yet: slurmdbd is
 * not reachable, or has not recorded the job's end.
 */
static int slurm_admin_comment_db(uint32_t job, const char *text,
				  const char *id)
{
	struct db_job q;
	slurmdb_job_rec_t rec;
	list_t *ret = NULL;
	bool has = false;
	int rc;

	slurm_compat_job_rec_init(&rec);
	rec.admin_comment = (char *)text;
	rc = db_job_open(&q, job, id);
	if (rc == 1)
		sigma_debug("job %s: slurmdbd not reachable: account later", id);
	if (rc)
		goto out;
	q.cond.flags |= JOBCOND_FLAG_NO_STEP;
	rc = 1;
	if (!slurm_db_job_ended(q.db, &q.cond, text, &has)) {
		sigma_debug("job %s: its end is not recorded yet: account later",
			    id);
		goto out;
	}
	rc = 0;
	if (has)
		goto out; /* there already: written before, and kept */
	rc = -EIO;
	ret = slurmdb_job_modify(q.db, &q.cond, &rec);
	if (!ret || slurm_list_count(ret) == 0) {
		ctl_slurm_fail("slurmdb_job_modify(admin_comment)", id);
		slurmdb_connection_commit(q.db, false);
		goto out;
	}
	if (slurmdb_connection_commit(q.db, true) != SLURM_SUCCESS) {
		ctl_slurm_fail("slurmdb_connection_commit", id);
		goto out;
	}
	rc = 0;
out:
	if (ret)
		slurm_list_destroy(ret);
	db_job_close(&q);
	return rc;
}

int ctl_slurm_admin_comment(uint32_t job, const char *text)
{
	job_desc_msg_t j;
	char id[16];

	snprintf(id, sizeof(id), "%u", job);
	slurm_init_job_desc_msg(&j);
	slurm_compat_job_desc_id(&j, job);
	j.admin_comment = (char *)text;
	if (slurm_update_job(&j) == SLURM_SUCCESS)
		return 0;
	if (errno == ESLURM_JOB_FINISHED)
		return slurm_admin_comment_db(job, text, id);
	return ctl_slurm_fail("slurm_update_job(admin_comment)", id);
}

int ctl_slurm_signal(uint32_t job, int sig)
{
	char id[16];

	snprintf(id, sizeof(id), "%u", job);
	if (slurm_compat_kill_job(job, (uint16_t)sig, KILL_FULL_JOB) !=
	    SLURM_SUCCESS)
		return ctl_slurm_fail("slurm_kill_job", id);
	return 0;
}

int ctl_slurm_user(uint32_t *uid, bool *private_jobs)
{
	slurm_conf_t *conf = NULL;

	if (slurm_load_ctl_conf((time_t)0, &conf) != SLURM_SUCCESS)
		return ctl_slurm_fail("slurm_load_ctl_conf", "(SlurmUser)");
	*uid = conf->slurm_user_id;
	*private_jobs = (conf->private_data & PRIVATE_DATA_JOBS) != 0;
	slurm_compat_free_conf(conf);
	return 0;
}
