/*
 * slurm_poll.c - what sigmad sees of the cluster at each poll
 * (ctl_slurm_load), asked of slurmctld at a cost that stays small on a
 * large cluster.
 *
 * A table is read in one of two ways:
 * - whole, passing the update time of the last reply: slurmctld answers
 *   SLURM_NO_CHANGE_IN_DATA, without packing anything, when nothing changed
 *   since (it compares with a second's slack, so no change is missed);
 * - one record at a time (slurm_load_node_single, slurm_load_job), for what
 *   sigmad acts on: the sigma jobs it saw pending or running, and their
 *   nodes.
 * While reading a whole table costs under POLL_BUDGET of the poll interval,
 * every poll reads it whole (a small cluster: the testbed always does).
 * When it costs more, it is read whole only as often as the budget allows,
 * and the polls in between read sigma's records one by one, when that costs
 * less than the whole table. The cost is the call's wall time, which is
 * slurmctld's time to serve it plus the transfer.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#include "sigma.h"
#include "contract.h"
#include "slurm_api.h"
#include "slurm_compat.h"

/* share of the wall time one table's reads may take of slurmctld */
#define POLL_BUDGET 0.005
/* a smaller table is read whole at every poll: its records one by one would
 * cost as many round trips, and its measured cost is the host's noise */
#define POLL_SPLIT_MIN 1000

/* what reading one table costs, when it was last read whole, and the
 * libslurm calls that read and free its reply */
struct table_cost {
	const char *name;
	double whole_ms;  /* the last whole read with data */
	double single_ms; /* mean of the one-record reads */
	double last_whole;
	bool split;	  /* polls between whole reads go record by record */
	const char *call;
	int (*load)(time_t since, void **reply);
	void (*free)(void *reply);
};

static int read_node_table(time_t since, void **reply)
{
	node_info_msg_t *m = NULL;
	int rc = slurm_load_node(since, &m, SHOW_ALL);

	*reply = m;
	return rc;
}

/* SHOW_DETAIL is not asked for: it packs every job's per-node resources,
 * and sigmad reads the node list only */
static int read_job_table(time_t since, void **reply)
{
	job_info_msg_t *m = NULL;
	int rc = slurm_load_jobs(since, &m, SHOW_ALL);

	*reply = m;
	return rc;
}

static void free_node_table(void *reply)
{
	slurm_free_node_info_msg(reply);
}

static void free_job_table(void *reply)
{
	slurm_free_job_info_msg(reply);
}

static struct {
	node_info_msg_t *nodes;
	job_info_msg_t *jobs;
	reserve_info_msg_t *resv;
	struct table_cost node_cost, job_cost;
	/* what the last view showed of sigma's jobs: refreshed one by one */
	char (*watch_nodes)[CTL_NAME_MAX];
	size_t nwatch_nodes;
	uint32_t *watch_jobs;
	size_t nwatch_jobs;
	unsigned long long whole, unchanged, single, failed;
} cache = {.node_cost = {.name = "node",
			  .single_ms = 1,
			  .call = "slurm_load_node",
			  .load = read_node_table,
			  .free = free_node_table},
	   .job_cost = {.name = "job",
			.single_ms = 1,
			.call = "slurm_load_jobs",
			.load = read_job_table,
			.free = free_job_table}};

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

void ctl_slurm_poll_changed(void)
{
	cache.node_cost.last_whole = 0;
}

void ctl_slurm_poll_fini(void)
{
	sigma_info("slurmctld reads: %llu whole tables, %llu unchanged, "
		   "%llu single records, %llu failed",
		   cache.whole, cache.unchanged, cache.single, cache.failed);
	slurm_free_node_info_msg(cache.nodes);
	slurm_free_job_info_msg(cache.jobs);
	slurm_free_reservation_info_msg(cache.resv);
	free(cache.watch_nodes);
	free(cache.watch_jobs);
	memset(&cache, 0, sizeof(cache));
}

/* A whole-table read's outcome: 1 new data, 0 unchanged (the cached reply
 * stands), or a negative errno. t0 is when the call started. */
static int whole_read(int rc, const char *what, struct table_cost *tc,
		      double t0)
{
	if (rc == SLURM_SUCCESS) {
		double ms = now_ms() - t0;

		cache.whole++;
		/* smoothed: one slow reply on a busy host is not the table */
		if (tc)
			tc->whole_ms = tc->whole_ms ? 0.8 * tc->whole_ms + 0.2 * ms
						    : ms;
		return 1;
	}
	if (errno == SLURM_NO_CHANGE_IN_DATA) {
		cache.unchanged++;
		return 0;
	}
	cache.failed++;
	return ctl_slurm_fail(what, "(all)");
}

static void single_read(struct table_cost *tc, double t0)
{
	cache.single++;
	tc->single_ms = 0.9 * tc->single_ms + 0.1 * (now_ms() - t0);
}

/* Read the table whole at this poll? Else its sigma records, one by one,
 * when nwatch of them cost less than the whole table. */
static bool whole_due(struct table_cost *tc, double now, int64_t poll_s,
		      size_t records, size_t nwatch, bool *singles)
{
	double every_s = tc->whole_ms / 1e3 / POLL_BUDGET;
	/* hysteresis: a table near the budget does not flip at every poll */
	bool split = records >= POLL_SPLIT_MIN &&
		     (tc->split ? every_s > 0.8 * (double)poll_s
				: every_s > 1.25 * (double)poll_s);

	*singles = false;
	if (split != tc->split)
		sigma_info("slurmctld's %s table takes %.1f ms to read: %s",
			   tc->name, tc->whole_ms,
			   split ? "read whole less often, sigma's records "
				   "one by one in between"
				 : "read whole at every poll");
	tc->split = split;
	if (!tc->last_whole || !split || now - tc->last_whole >= every_s * 1e3)
		return true;
	*singles = (double)nwatch * tc->single_ms < tc->whole_ms;
	return false;
}

/*
 * Bring one table's cached reply (*cached, records long, as of
 * last_update) up to date: read whole when due, else *singles says
 * whether its nwatch sigma records are to be read one by one.
 */
static int fresh_table(struct table_cost *tc, void **cached,
		       uint32_t records, time_t last_update, size_t nwatch,
		       int64_t poll_s, bool *singles)
{
	void *reply = NULL;
	double t0 = now_ms();
	int rc;

	if (*cached &&
	    !whole_due(tc, t0, poll_s, records, nwatch, singles))
		return 0;
	*singles = false;
	rc = whole_read(tc->load(*cached ? last_update : 0, &reply), tc->call,
			tc, t0);
	tc->last_whole = t0;
	if (rc == 1) {
		tc->free(*cached);
		*cached = reply;
	}
	return rc < 0 ? rc : 0;
}

static int fresh_nodes(int64_t poll_s, bool *singles)
{
	void *t = cache.nodes;
	int rc = fresh_table(&cache.node_cost, &t,
			     cache.nodes ? cache.nodes->record_count : 0,
			     cache.nodes ? cache.nodes->last_update : 0,
			     cache.nwatch_nodes, poll_s, singles);

	cache.nodes = t;
	return rc;
}

static int fresh_jobs(int64_t poll_s, bool *singles)
{
	void *t = cache.jobs;
	int rc = fresh_table(&cache.job_cost, &t,
			     cache.jobs ? cache.jobs->record_count : 0,
			     cache.jobs ? cache.jobs->last_update : 0,
			     cache.nwatch_jobs, poll_s, singles);

	cache.jobs = t;
	return rc;
}

static int fresh_resv(void)
{
	reserve_info_msg_t *ri = NULL;
	int rc = whole_read(slurm_load_reservations(
				cache.resv ? cache.resv->last_update : 0, &ri),
			    "slurm_load_reservations", NULL, 0);

	if (rc == 1) {
		slurm_free_reservation_info_msg(cache.resv);
		cache.resv = ri;
	}
	return rc < 0 ? rc : 0;
}

static void node_set(struct ctl_node *c, const node_info_t *n,
		     const char *feature)
{
	uint32_t base = n->node_state & NODE_STATE_BASE;

	memset(c, 0, sizeof(*c));
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
	if (sigma_list_has(n->features, feature))
		c->flags |= CTL_N_FEATURE;
	sigma_strlcpy(c->reason, n->reason ? n->reason : "",
		      sizeof(c->reason));
	c->reason_time = (int64_t)n->reason_time;
}

/* the watched nodes read one by one over the cached whole table */
static void nodes_refresh(struct ctl_view *v, const char *feature)
{
	for (size_t w = 0; w < cache.nwatch_nodes; w++) {
		node_info_msg_t *one = NULL;
		double t0 = now_ms();
		long i = ctl_view_node(v, cache.watch_nodes[w]);

		if (i < 0)
			continue;
		if (slurm_load_node_single(&one, cache.watch_nodes[w],
					   SHOW_ALL) != SLURM_SUCCESS) {
			cache.failed++;
			continue; /* the whole table's record stands */
		}
		single_read(&cache.node_cost, t0);
		if (one->record_count && one->node_array[0].name)
			node_set(&v->nodes[i], &one->node_array[0], feature);
		slurm_free_node_info_msg(one);
	}
}

static int load_nodes(struct ctl_view *v, const char *feature,
		      int64_t poll_s)
{
	node_info_msg_t *ni;
	bool singles;
	int rc = fresh_nodes(poll_s, &singles);

	if (rc)
		return rc;
	ni = cache.nodes;
	v->nodes =
	    calloc(ni->record_count ? ni->record_count : 1, sizeof(*v->nodes));
	if (!v->nodes)
		return -ENOMEM;
	for (uint32_t i = 0; i < ni->record_count; i++)
		if (ni->node_array[i].name)
			node_set(&v->nodes[v->nnodes++], &ni->node_array[i],
				 feature);
	rc = ctl_view_index_names(v);
	if (!rc && singles)
		nodes_refresh(v, feature);
	return rc;
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

static bool is_sigma_job(const slurm_job_info_t *j)
{
	return j->admin_comment &&
	       !strncmp(j->admin_comment, SIGMA_BLOCK_PREFIX,
			strlen(SIGMA_BLOCK_PREFIX));
}

/* c from Slurm's record j (c is empty or holds the job's older record) */
static int job_set(const struct ctl_view *v, struct ctl_job *c,
		   const slurm_job_info_t *j)
{
	uint32_t base = j->job_state & JOB_STATE_BASE;
	struct job_nodes_arg a = {v, c, 0};

	free(c->nodes);
	memset(c, 0, sizeof(*c));
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
	c->expedited = slurm_compat_job_expedited(j);
	c->unprotected =
	    !j->requeue ? SIGMA_UNPROTECTED_NO_REQUEUE
	    : (j->het_job_offset != NO_VAL && j->het_job_offset > 0)
		? SIGMA_UNPROTECTED_HET
		: NULL;
	c->exit_code =
	    WIFEXITED(j->exit_code) ? (int)WEXITSTATUS(j->exit_code) : -1;
	c->term_sig = WIFSIGNALED(j->exit_code) ? (int)WTERMSIG(j->exit_code)
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
	if (c->state == CTL_J_PENDING)
		return 0;
	return ctl_slurm_expand(j->nodes, job_node_add, &a);
}

/* The watched jobs read one by one over the cached whole table. A job
 * slurmctld no longer knows leaves the view, as it would leave the table. */
static int jobs_refresh(struct ctl_view *v)
{
	int rc = 0;

	for (size_t w = 0; w < cache.nwatch_jobs && !rc; w++) {
		job_info_msg_t *one = NULL;
		double t0 = now_ms();
		struct ctl_job *c = ctl_view_job(v, cache.watch_jobs[w]);

		if (!c)
			continue;
		if (slurm_compat_load_job(&one, cache.watch_jobs[w],
					  SHOW_ALL) != SLURM_SUCCESS) {
			if (errno != ESLURM_INVALID_JOB_ID) {
				cache.failed++;
				continue;
			}
			free(c->nodes);
			*c = v->jobs[--v->njobs];
			memset(&v->jobs[v->njobs], 0, sizeof(*c));
			continue;
		}
		single_read(&cache.job_cost, t0);
		if (one->record_count && is_sigma_job(&one->job_array[0]))
			rc = job_set(v, c, &one->job_array[0]);
		slurm_free_job_info_msg(one);
	}
	return rc;
}

static int load_jobs(struct ctl_view *v, int64_t poll_s)
{
	job_info_msg_t *ji;
	bool singles;
	int rc = fresh_jobs(poll_s, &singles);

	if (rc)
		return rc;
	ji = cache.jobs;
	v->jobs =
	    calloc(ji->record_count ? ji->record_count : 1, sizeof(*v->jobs));
	if (!v->jobs)
		return -ENOMEM;
	for (uint32_t i = 0; i < ji->record_count && !rc; i++)
		if (is_sigma_job(&ji->job_array[i]))
			rc = job_set(v, &v->jobs[v->njobs++], &ji->job_array[i]);
	if (!rc && singles)
		rc = jobs_refresh(v);
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
	int rc = fresh_resv();

	if (rc)
		return rc;
	for (uint32_t i = 0; i < cache.resv->record_count && !rc; i++) {
		reserve_info_t *r = &cache.resv->reservation_array[i];

		if (!r->name || strcmp(r->name, resv))
			continue;
		v->resv_exists = true;
		rc = ctl_slurm_expand(r->node_list, resv_mark, v);
	}
	return rc;
}

/* What the next poll reads one by one: the sigma jobs not ended, and the
 * nodes of those running. */
static int watch_update(const struct ctl_view *v)
{
	size_t nn = 0, nj = 0;
	void *p;

	for (size_t j = 0; j < v->njobs; j++)
		if (v->jobs[j].state != CTL_J_ENDED) {
			nj++;
			nn += v->jobs[j].nnodes;
		}
	p = realloc(cache.watch_jobs, (nj ? nj : 1) * sizeof(uint32_t));
	if (!p)
		return -ENOMEM;
	cache.watch_jobs = p;
	p = realloc(cache.watch_nodes, (nn ? nn : 1) * CTL_NAME_MAX);
	if (!p)
		return -ENOMEM;
	cache.watch_nodes = p;
	cache.nwatch_jobs = cache.nwatch_nodes = 0;
	for (size_t j = 0; j < v->njobs; j++) {
		const struct ctl_job *job = &v->jobs[j];

		if (job->state == CTL_J_ENDED)
			continue;
		cache.watch_jobs[cache.nwatch_jobs++] = job->id;
		for (size_t k = 0; k < job->nnodes; k++)
			memcpy(cache.watch_nodes[cache.nwatch_nodes++],
			       v->nodes[job->nodes[k]].name, CTL_NAME_MAX);
	}
	return 0;
}

int ctl_slurm_load(struct ctl_view *v, const char *resv, const char *feature,
		   int64_t poll_s)
{
	int rc;

	memset(v, 0, sizeof(*v));
	v->now = (int64_t)time(NULL);
	rc = load_nodes(v, feature, poll_s);
	if (!rc)
		rc = load_jobs(v, poll_s);
	if (!rc)
		rc = load_resv(v, resv);
	if (!rc)
		rc = watch_update(v);
	if (rc)
		ctl_view_free(v);
	return rc;
}
