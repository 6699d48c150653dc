/*
 * slurm_api.c - the controller's only libslurm file (see slurm_api.h).
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

static int slurm_fail(const char *what, const char *obj)
{
	int e = slurm_get_errno();

	sigma_error("%s %s: %s (slurm errno %d)", what, obj, slurm_strerror(e),
		    e);
	return -EIO;
}

int ctl_slurm_init(void)
{
	slurm_init(NULL); /* honours SLURM_CONF */
	return 0;
}

void ctl_slurm_fini(void)
{
	slurm_fini();
}

int ctl_slurm_expand(const char *list, int (*fn)(const char *name, void *arg),
		     void *arg)
{
	hostlist_t hl;
	char *h;
	int rc = 0;

	if (!list || !*list)
		return 0;
	hl = slurm_hostlist_create(list);
	if (!hl)
		return -EINVAL;
	while ((h = slurm_hostlist_shift(hl))) {
		if (!rc)
			rc = fn(h, arg);
		free(h);
	}
	slurm_hostlist_destroy(hl);
	return rc;
}

void ctl_view_free(struct ctl_view *v)
{
	for (size_t i = 0; i < v->njobs; i++)
		free(v->jobs[i].nodes);
	free(v->jobs);
	free(v->nodes);
	memset(v, 0, sizeof(*v));
}

long ctl_view_node(const struct ctl_view *v, const char *name)
{
	for (size_t i = 0; i < v->nnodes; i++)
		if (!strcmp(v->nodes[i].name, name))
			return (long)i;
	return -1;
}

struct ctl_job *ctl_view_job(const struct ctl_view *v, uint32_t id)
{
	for (size_t i = 0; i < v->njobs; i++)
		if (v->jobs[i].id == id)
			return &v->jobs[i];
	return NULL;
}

static bool has_feature(const char *features, const char *feature)
{
	size_t n = strlen(feature);
	const char *p = features;

	if (!features || !n)
		return false;
	while ((p = strstr(p, feature))) {
		if ((p == features || p[-1] == ',') && (p[n] == ',' || !p[n]))
			return true;
		p += n;
	}
	return false;
}

static int load_nodes(struct ctl_view *v, const char *feature)
{
	node_info_msg_t *ni = NULL;

	if (slurm_load_node((time_t)0, &ni, SHOW_ALL) != SLURM_SUCCESS)
		return slurm_fail("slurm_load_node", "(all)");
	v->nodes =
	    calloc(ni->record_count ? ni->record_count : 1, sizeof(*v->nodes));
	if (!v->nodes) {
		slurm_free_node_info_msg(ni);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < ni->record_count; i++) {
		node_info_t *n = &ni->node_array[i];
		struct ctl_node *c = &v->nodes[v->nnodes];
		uint32_t base = n->node_state & NODE_STATE_BASE;

		if (!n->name)
			continue;
		sigma_strlcpy(c->name, n->name, sizeof(c->name));
		if (base == NODE_STATE_DOWN)
			c->flags |= CTL_N_DOWN;
		if (n->node_state & NODE_STATE_DRAIN)
			c->flags |= CTL_N_DRAIN;
		if (n->node_state & NODE_STATE_NO_RESPOND)
			c->flags |= CTL_N_NO_RESPOND;
		if (n->node_state & NODE_STATE_FAIL)
			c->flags |= CTL_N_FAIL;
		if (base == NODE_STATE_ALLOCATED || base == NODE_STATE_MIXED ||
		    (n->node_state & NODE_STATE_COMPLETING))
			c->flags |= CTL_N_BUSY;
		else if (base == NODE_STATE_IDLE)
			c->flags |= CTL_N_IDLE;
		if (has_feature(n->features, feature))
			c->flags |= CTL_N_FEATURE;
		sigma_strlcpy(c->reason, n->reason ? n->reason : "",
			      sizeof(c->reason));
		c->reason_time = (int64_t)n->reason_time;
		v->nnodes++;
	}
	slurm_free_node_info_msg(ni);
	return 0;
}

struct job_nodes_arg {
	const struct ctl_view *v;
	struct ctl_job *job;
	size_t cap;
};

static int job_node_add(const char *name, void *arg)
{
	struct job_nodes_arg *a = arg;
	long i = ctl_view_node(a->v, name);

	if (i < 0)
		return 0;
	if (a->job->nnodes == a->cap) {
		size_t ncap = a->cap ? a->cap * 2 : 8;
		int32_t *n = realloc(a->job->nodes, ncap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		a->job->nodes = n;
		a->cap = ncap;
	}
	a->job->nodes[a->job->nnodes++] = (int32_t)i;
	return 0;
}

static int load_jobs(struct ctl_view *v)
{
	job_info_msg_t *ji = NULL;
	int rc = 0;

	if (slurm_load_jobs((time_t)0, &ji, SHOW_ALL | SHOW_DETAIL) !=
	    SLURM_SUCCESS)
		return slurm_fail("slurm_load_jobs", "(all)");
	v->jobs =
	    calloc(ji->record_count ? ji->record_count : 1, sizeof(*v->jobs));
	if (!v->jobs) {
		slurm_free_job_info_msg(ji);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < ji->record_count && !rc; i++) {
		slurm_job_info_t *j = &ji->job_array[i];
		struct ctl_job *c = &v->jobs[v->njobs];
		uint32_t base = j->job_state & JOB_STATE_BASE;
		struct job_nodes_arg a = {v, c, 0};

		if (!j->admin_comment || strncmp(j->admin_comment, "sigma[", 6))
			continue;
		c->id = j->job_id;
		c->uid = j->user_id;
		c->state = base == JOB_PENDING ? CTL_J_PENDING
			   : (base == JOB_RUNNING || base == JOB_SUSPENDED)
			       ? CTL_J_RUNNING
			       : CTL_J_ENDED;
		c->completing = (j->job_state & JOB_COMPLETING) != 0;
		c->node_fail = base == JOB_NODE_FAIL;
		c->failed = base == JOB_FAILED;
		c->cancelled = base == JOB_CANCELLED;
		c->unprotected =
		    !j->requeue ? SIGMA_UNPROTECTED_NO_REQUEUE
		    : (j->het_job_offset != NO_VAL && j->het_job_offset > 0)
			? SIGMA_UNPROTECTED_HET
			: NULL;
		c->exit_code = WIFEXITED(j->exit_code)
				   ? (int)WEXITSTATUS(j->exit_code)
				   : -1;
		c->term_sig = WIFSIGNALED(j->exit_code)
				  ? (int)WTERMSIG(j->exit_code)
				  : 0;
		c->end_time = (int64_t)j->end_time;
		c->restart_cnt = j->restart_cnt;
		/* a pending job's earliest start: its begin time shows here */
		c->begin_time = (int64_t)(j->eligible_time > j->start_time
					      ? j->eligible_time
					      : j->start_time);
		sigma_strlcpy(c->comment, j->admin_comment, sizeof(c->comment));
		sigma_strlcpy(c->exc_nodes, j->exc_nodes ? j->exc_nodes : "",
			      sizeof(c->exc_nodes));
		if (c->state != CTL_J_PENDING)
			rc = ctl_slurm_expand(j->nodes, job_node_add, &a);
		v->njobs++;
	}
	slurm_free_job_info_msg(ji);
	return rc;
}

static int resv_mark(const char *name, void *arg)
{
	struct ctl_view *v = arg;
	long i = ctl_view_node(v, name);

	if (i >= 0 && !(v->nodes[i].flags & CTL_N_RESERVED)) {
		v->nodes[i].flags |= CTL_N_RESERVED;
		v->nresv++;
	}
	return 0;
}

static int load_resv(struct ctl_view *v, const char *resv)
{
	reserve_info_msg_t *ri = NULL;
	int rc = 0;

	if (slurm_load_reservations((time_t)0, &ri) != SLURM_SUCCESS)
		return slurm_fail("slurm_load_reservations", resv);
	for (uint32_t i = 0; i < ri->record_count; i++) {
		reserve_info_t *r = &ri->reservation_array[i];

		if (!r->name || strcmp(r->name, resv))
			continue;
		v->resv_exists = true;
		rc = ctl_slurm_expand(r->node_list, resv_mark, v);
	}
	slurm_free_reservation_info_msg(ri);
	return rc;
}

int ctl_slurm_load(struct ctl_view *v, const char *resv, const char *feature)
{
	int rc;

	memset(v, 0, sizeof(*v));
	v->now = (int64_t)time(NULL);
	rc = load_nodes(v, feature);
	if (!rc)
		rc = load_jobs(v);
	if (!rc)
		rc = load_resv(v, resv);
	if (rc)
		ctl_view_free(v);
	return rc;
}

static int update_node(const char *node, uint32_t state, const char *reason)
{
	update_node_msg_t m;

	slurm_init_update_node_msg(&m);
	m.node_names = (char *)node;
	m.node_state = state;
	if (reason) {
		m.reason = (char *)reason;
		m.reason_uid = getuid();
	}
	if (slurm_update_node(&m) != SLURM_SUCCESS)
		return slurm_fail("slurm_update_node", node);
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
			return slurm_fail("slurm_delete_reservation", resv);
		return 0;
	}
	slurm_init_resv_desc_msg(&m);
	m.name = (char *)resv;
	m.node_list = (char *)nodes;
	if (exists) {
		if (slurm_update_reservation(&m) != SLURM_SUCCESS)
			return slurm_fail("slurm_update_reservation", resv);
		return 0;
	}
	m.start_time = time(NULL);
	m.duration = INFINITE;
	m.users = "root";
	/* IGNORE_JOBS: a busy node may join; no MAINT, so nodes show "resv" */
	m.flags = RESERVE_FLAG_IGN_JOBS;
	char *name = slurm_create_reservation(&m);
	if (!name)
		return slurm_fail("slurm_create_reservation", resv);
	free(name);
	return 0;
}

int ctl_slurm_requeue(uint32_t job)
{
	char id[16];

	snprintf(id, sizeof(id), "%u", job);
	if (slurm_requeue(job, 0) != SLURM_SUCCESS)
		return slurm_fail("slurm_requeue", id);
	return 0;
}

int ctl_slurm_pending_update(uint32_t job, const char *exc_nodes, int64_t begin)
{
	job_desc_msg_t j;
	char id[16];

	snprintf(id, sizeof(id), "%u", job);
	slurm_init_job_desc_msg(&j);
	j.job_id = job;
	if (exc_nodes && *exc_nodes)
		j.exc_nodes = (char *)exc_nodes;
	if (slurm_update_job(&j) != SLURM_SUCCESS)
		return slurm_fail("slurm_update_job(exc_nodes)", id);
	/* begin_time alone, after exc_nodes: never earlier than now + 1 s */
	slurm_init_job_desc_msg(&j);
	j.job_id = job;
	j.begin_time = (time_t)begin;
	if (slurm_update_job(&j) != SLURM_SUCCESS)
		return slurm_fail("slurm_update_job(begin_time)", id);
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
	List jobs = slurmdb_jobs_get(db, cond);
	ListIterator it;
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
 * slurmctld refuses to change a job that has finished (a give-up is often
 * decided just after the job ended): write its accounting record instead,
 * as `sacctmgr modify job where jobid=ID set AdminComment=TEXT` does, so
 * that sacct tells the story. 1 when that cannot be done yet: slurmdbd is
 * not reachable, or has not recorded the job's end.
 */
static int slurm_admin_comment_db(uint32_t job, const char *text,
				  const char *id)
{
	slurm_selected_step_t step;
	slurmdb_job_cond_t cond;
	slurmdb_job_rec_t rec;
	slurm_conf_t *conf = NULL;
	void *db = NULL;
	List steps = NULL, clusters = NULL, ret = NULL;
	bool has = false;
	int rc = -EIO;

	if (slurm_load_ctl_conf((time_t)0, &conf) != SLURM_SUCCESS)
		return slurm_fail("slurm_load_ctl_conf", id);
	memset(&step, 0, sizeof(step));
	step.array_task_id = NO_VAL;
	step.het_job_offset = NO_VAL;
	step.step_id.job_id = job;
	step.step_id.step_id = NO_VAL;
	step.step_id.step_het_comp = NO_VAL;
	memset(&cond, 0, sizeof(cond));
	memset(&rec, 0, sizeof(rec));
	rec.array_task_id = NO_VAL;
	rec.derived_ec = NO_VAL;
	rec.lft = NO_VAL;
	rec.resvid = NO_VAL;
	rec.admin_comment = (char *)text;
	steps = slurm_list_create(NULL); /* our memory: no destructor */
	clusters = slurm_list_create(NULL);
	if (!steps || !clusters || !conf->cluster_name)
		goto out;
	slurm_list_append(steps, &step);
	slurm_list_append(clusters, conf->cluster_name);
	cond.step_list = steps;
	cond.cluster_list = clusters;
	cond.flags = JOBCOND_FLAG_NO_STEP;
	cond.db_flags = SLURMDB_JOB_FLAG_NOTSET; /* 0 would match no job */
	db = slurmdb_connection_get(NULL);
	if (!db) {
		sigma_debug("job %s: slurmdbd not reachable: account later", id);
		rc = 1;
		goto out;
	}
	if (!slurm_db_job_ended(db, &cond, text, &has)) {
		sigma_debug("job %s: its end is not recorded yet: account later",
			    id);
		rc = 1;
		goto out;
	}
	if (has) {
		rc = 0; /* there already: written before, and kept */
		goto out;
	}
	ret = slurmdb_job_modify(db, &cond, &rec);
	if (!ret || slurm_list_count(ret) == 0) {
		slurm_fail("slurmdb_job_modify(admin_comment)", id);
		slurmdb_connection_commit(db, false);
		goto out;
	}
	if (slurmdb_connection_commit(db, true) != SLURM_SUCCESS) {
		slurm_fail("slurmdb_connection_commit", id);
		goto out;
	}
	rc = 0;
out:
	if (ret)
		slurm_list_destroy(ret);
	if (db)
		slurmdb_connection_close(&db);
	if (steps)
		slurm_list_destroy(steps);
	if (clusters)
		slurm_list_destroy(clusters);
	slurm_free_ctl_conf(conf);
	return rc;
}

int ctl_slurm_admin_comment(uint32_t job, const char *text)
{
	job_desc_msg_t j;
	char id[16];

	snprintf(id, sizeof(id), "%u", job);
	slurm_init_job_desc_msg(&j);
	j.job_id = job;
	j.admin_comment = (char *)text;
	if (slurm_update_job(&j) == SLURM_SUCCESS)
		return 0;
	if (slurm_get_errno() == ESLURM_JOB_FINISHED)
		return slurm_admin_comment_db(job, text, id);
	return slurm_fail("slurm_update_job(admin_comment)", id);
}

int ctl_slurm_signal(uint32_t job, int sig)
{
	char id[16];

	snprintf(id, sizeof(id), "%u", job);
	if (slurm_kill_job(job, (uint16_t)sig, KILL_FULL_JOB) != SLURM_SUCCESS)
		return slurm_fail("slurm_kill_job", id);
	return 0;
}

int ctl_slurm_user(uint32_t *uid, bool *private_jobs)
{
	slurm_conf_t *conf = NULL;

	if (slurm_load_ctl_conf((time_t)0, &conf) != SLURM_SUCCESS)
		return slurm_fail("slurm_load_ctl_conf", "(SlurmUser)");
	*uid = conf->slurm_user_id;
	*private_jobs = (conf->private_data & PRIVATE_DATA_JOBS) != 0;
	slurm_free_ctl_conf(conf);
	return 0;
}
