/*
 * test_sigmad_ctl.c - the controller (ctl*.c) over a fake slurmctld: the
 * libslurm adapter (slurm_api.h) is replaced by an in-memory cluster of six
 * nodes (n5, n6 spares), and evlog_append is wrapped (-Wl,--wrap) so that a
 * "crash" can stop both Slurm calls and log writes at any point.
 *
 * For the failure path and the early-warning path, sigmad is crashed after
 * its 1st, 2nd, ... operation (Slurm call or log write), then a new one is
 * started on the same event log: every time the job must end up running on
 * a spare, requeued once, signalled at most once, with one account in its
 * AdminComment.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "conf.h"
#include "ctl.h"
#include "ctl_internal.h" /* the metrics text */
#include "eventlog.h"
#include "proc.h"
#include "server.h"
#include "sigma.h"
#include "slurm_api.h"
#include "view.h"

#define NNODES 6

struct fnode {
	char name[8];
	unsigned flags;
	char reason[CTL_REASON_MAX];
	int64_t reason_time;
	int failed_steps; /* the job's ended steps that failed here */
	uint32_t other_job; /* another user's job running here, 0 none */
};

struct fjob {
	uint32_t id, uid;
	int state;
	int restart_cnt;
	int64_t begin;
	char comment[CTL_COMMENT_MAX];
	char exc[CTL_LIST_MAX];
	int nodes[4];
	bool exits_on_usr1;
	bool node_fail;
	bool failed; /* ended FAILED with exit_code */
	bool cancelled; /* ended CANCELLED (scancel) */
	bool requeue_on_down; /* slurmctld requeues it when a node goes down */
	bool expedited;	      /* asked for expedited requeue */
	int64_t epilog_s;     /* ... and may start again after this long */
	int exit_code;
	int64_t end;
	const char *unprotected; /* Slurm cannot requeue it: why */
};

static struct {
	struct fnode n[NNODES];
	struct fjob job;
	bool resv_exists;
	int64_t now;
	int budget; /* operations left before the crash; <0: none */
	bool crashed;
	int requeues, signals, comments, drains[NNODES];
	int requeue_refusals; /* slurmctld refuses this many requeues */
	int enospc; /* the event log's disk is full for this many appends */
} M;

/* Spend one operation; false once crashed (the operation does not happen). */
static bool op(void)
{
	if (M.crashed)
		return false;
	if (M.budget > 0 && --M.budget == 0)
		M.crashed = true; /* this one happens, nothing after it */
	return true;
}

int __real_evlog_append(struct evlog *log, const struct evlog_event *ev);
int __wrap_evlog_append(struct evlog *log, const struct evlog_event *ev);
int __wrap_evlog_append(struct evlog *log, const struct evlog_event *ev)
{
	if (M.enospc > 0) {
		M.enospc--;
		return -ENOSPC;
	}
	if (!op())
		return -EIO;
	return __real_evlog_append(log, ev);
}

static int fnode_idx(const char *name)
{
	for (int i = 0; i < NNODES; i++)
		if (!strcmp(M.n[i].name, name))
			return i;
	return -1;
}

/* the first node with the spare feature: n5 and n6 are spares */
static int spare_first = 4;

/* ---- the fake adapter ---------------------------------------------------- */

int ctl_slurm_init(void)
{
	return 0;
}
void ctl_slurm_fini(void)
{
}
int ctl_slurm_user(uint32_t *uid, bool *private_jobs)
{
	*uid = 64030;
	*private_jobs = true;
	return 0;
}

int ctl_slurm_expand(const char *list, int (*fn)(const char *name, void *arg),
		     void *arg)
{
	char tmp[CTL_LIST_MAX], *save = NULL, *tok;
	int rc = 0;

	sigma_strlcpy(tmp, list ? list : "", sizeof(tmp));
	for (tok = strtok_r(tmp, ",", &save); tok && !rc;
	     tok = strtok_r(NULL, ",", &save))
		rc = fn(tok, arg);
	return rc;
}

int ctl_slurm_load(struct ctl_view *v, const char *resv, const char *feature,
		   int64_t poll_s)
{
	struct ctl_job *j;

	memset(v, 0, sizeof(*v));
	v->now = M.now;
	v->nodes = calloc(NNODES, sizeof(*v->nodes));
	v->jobs = calloc(1, sizeof(*v->jobs));
	assert_non_null(v->nodes);
	assert_non_null(v->jobs);
	v->nnodes = NNODES;
	for (int i = 0; i < NNODES; i++) {
		struct ctl_node *c = &v->nodes[i];

		sigma_strlcpy(c->name, M.n[i].name, sizeof(c->name));
		c->flags = M.n[i].flags;
		if (i >= spare_first && feature && !strcmp(feature, "spare"))
			c->flags |= CTL_N_FEATURE;
		sigma_strlcpy(c->reason, M.n[i].reason, sizeof(c->reason));
		c->reason_time = M.n[i].reason_time;
		if (c->flags & CTL_N_RESERVED)
			v->nresv++;
	}
	v->resv_exists = M.resv_exists;
	j = &v->jobs[0];
	v->njobs = 1;
	j->id = M.job.id;
	j->uid = M.job.uid;
	j->state = M.job.state;
	j->restart_cnt = M.job.restart_cnt;
	j->begin_time = M.job.begin;
	j->node_fail = M.job.state == CTL_J_ENDED && M.job.node_fail;
	j->failed = M.job.state == CTL_J_ENDED && M.job.failed;
	j->cancelled = M.job.state == CTL_J_ENDED && M.job.cancelled;
	j->expedited = M.job.expedited;
	j->exit_code = M.job.exit_code;
	j->unprotected = M.job.unprotected;
	j->end_time = M.job.end;
	sigma_strlcpy(j->comment, M.job.comment, sizeof(j->comment));
	sigma_strlcpy(j->exc_nodes, M.job.exc, sizeof(j->exc_nodes));
	if (M.job.state == CTL_J_RUNNING) {
		j->nodes = calloc(4, sizeof(*j->nodes));
		assert_non_null(j->nodes);
		for (int k = 0; k < 4; k++)
			j->nodes[k] = M.job.nodes[k];
		j->nnodes = 4;
	}
	return 0;
}

static bool job_on(const char *name);

static void fjob_release_nodes(void)
{
	for (int k = 0; k < 4; k++) {
		M.n[M.job.nodes[k]].flags &= ~(unsigned)CTL_N_BUSY;
		M.n[M.job.nodes[k]].flags |= CTL_N_IDLE;
	}
}

/* the job's batch script fails with 76 (a peer rank died) now */
static void fjob_exit_76(void)
{
	fjob_release_nodes();
	M.job.state = CTL_J_ENDED;
	M.job.failed = true;
	M.job.exit_code = 76;
	M.job.end = M.now;
}

int ctl_slurm_drain(const char *node, const char *reason)
{
	int i = fnode_idx(node);

	if (i < 0 || !op())
		return -EIO;
	M.n[i].flags |= CTL_N_DRAIN;
	sigma_strlcpy(M.n[i].reason, reason, sizeof(M.n[i].reason));
	M.n[i].reason_time = M.now;
	M.drains[i]++;
	return 0;
}

int ctl_slurm_down(const char *node, const char *reason)
{
	int i = fnode_idx(node);

	if (i < 0 || !op())
		return -EIO;
	M.n[i].flags |= CTL_N_DOWN;
	if (M.job.requeue_on_down && M.job.state == CTL_J_RUNNING &&
	    job_on(node)) {
		/* expedited requeue: at once, eligible now */
		fjob_release_nodes();
		M.job.state = CTL_J_PENDING;
		M.job.restart_cnt++;
		M.job.begin = M.now + M.job.epilog_s;
	}
	return 0;
}

int ctl_slurm_resume(const char *node)
{
	int i = fnode_idx(node);

	if (i < 0 || !op())
		return -EIO;
	M.n[i].flags &= ~(unsigned)(CTL_N_DRAIN | CTL_N_DOWN);
	M.n[i].reason[0] = '\0';
	return 0;
}

int ctl_slurm_resv_set(const char *resv, const char *nodes, int exists)
{
	char tmp[CTL_LIST_MAX], *save = NULL, *tok;

	if (!op())
		return -EIO;
	for (int i = 0; i < NNODES; i++)
		M.n[i].flags &= ~(unsigned)CTL_N_RESERVED;
	sigma_strlcpy(tmp, nodes, sizeof(tmp));
	for (tok = strtok_r(tmp, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save))
		M.n[fnode_idx(tok)].flags |= CTL_N_RESERVED;
	M.resv_exists = nodes[0] != '\0';
	return 0;
}

int ctl_slurm_requeue(uint32_t job)
{
	if (!op())
		return -EIO;
	if (M.job.state == CTL_J_PENDING)
		return 1; /* as Slurm's ESLURM_JOB_PENDING */
	if (M.requeue_refusals > 0) {
		M.requeue_refusals--;
		return -EAGAIN;
	}
	if (M.job.state == CTL_J_RUNNING)
		fjob_release_nodes();
	M.job.state = CTL_J_PENDING;
	M.job.restart_cnt++;
	M.job.begin = M.now + 120; /* Slurm's requeue delay */
	M.requeues++;
	return 0;
}

int ctl_slurm_pending_update(uint32_t job, const char *exc, int64_t begin)
{
	if (M.job.state != CTL_J_PENDING || !op())
		return -EIO;
	sigma_strlcpy(M.job.exc, exc, sizeof(M.job.exc));
	if (begin)
		M.job.begin = begin;
	return 0;
}

int ctl_slurm_admin_comment(uint32_t job, const char *text)
{
	if (!op())
		return -EIO;
	sigma_strlcpy(M.job.comment, text, sizeof(M.job.comment));
	M.comments++;
	return 0;
}

int ctl_slurm_failed_steps(uint32_t job, const char *node)
{
	int i = fnode_idx(node);

	return job == M.job.id && i >= 0 ? M.n[i].failed_steps : 0;
}

long ctl_slurm_other_job(const char *node, uint32_t uid)
{
	int i = fnode_idx(node);

	(void)uid;
	return i >= 0 ? (long)M.n[i].other_job : 0;
}

int ctl_slurm_signal(uint32_t job, int sig)
{
	if (M.job.state != CTL_J_RUNNING || !op())
		return -EIO;
	M.signals++;
	if (M.job.exits_on_usr1) { /* checkpoint written, exit 75 */
		fjob_release_nodes();
		M.job.state = CTL_J_ENDED;
		M.job.failed = true;
		M.job.exit_code = 75;
	}
	return 0;
}

/* slurmctld's scheduler: start the pending job on 4 usable nodes */
static void fake_schedule(void)
{
	int got = 0, pick[4];

	if (M.job.state != CTL_J_PENDING || M.job.begin > M.now)
		return;
	for (int i = 0; i < NNODES && got < 4; i++) {
		const struct fnode *n = &M.n[i];

		if ((n->flags & (CTL_N_DRAIN | CTL_N_DOWN | CTL_N_RESERVED |
				 CTL_N_BUSY)) ||
		    strstr(M.job.exc, n->name))
			continue;
		pick[got++] = i;
	}
	if (got < 4)
		return;
	for (int k = 0; k < 4; k++) {
		M.job.nodes[k] = pick[k];
		M.n[pick[k]].flags =
		    (M.n[pick[k]].flags & ~(unsigned)CTL_N_IDLE) | CTL_N_BUSY;
	}
	M.job.state = CTL_J_RUNNING;
}

/* ---- scenarios ----------------------------------------------------------- */

static char dir[64];
static char conf_path[128];
static char log_path[160];
static struct sigmad_config cfg;

static int setup(void **state)
{
	FILE *f;
	char err[256];

	strcpy(dir, "/tmp/test_sigmad_ctl.XXXXXX");
	if (!mkdtemp(dir) ||
	    chmod(dir, 0755)) /* the socket test's user gets in */
		return -1;
	signal(SIGPIPE, SIG_IGN); /* as sigmad does */
	snprintf(conf_path, sizeof(conf_path), "%s/sigma.conf", dir);
	snprintf(log_path, sizeof(log_path), "%s/events.jsonl", dir);
	f = fopen(conf_path, "w");
	if (!f)
		return -1;
	fprintf(f,
		"sigmad_socket=%s/s.sock\nsigmad_state_dir=%s\n"
		"sigmad_spare_feature=spare\nsigmad_warn_grace=3\n"
		"sigmad_cooldown=1000\nsigmad_restart_delay=1\n",
		dir, dir);
	fclose(f);
	sigmad_config_init(&cfg);
	sigma_log_init("test", SIGMA_LOG_ERROR);
	return sigmad_config_load(&cfg, conf_path, err, sizeof(err)) ? -1 : 0;
}

static int teardown(void **state)
{
	unlink(log_path);
	unlink(conf_path);
	rmdir(dir);
	return 0;
}

/* A fresh cluster: job 7 of uid 1000 running on n1-n4, no reservation. */
/* the next cluster_reset's job cannot be requeued, for this reason */
static const char *next_unprotected;

static void cluster_reset(bool exits_on_usr1)
{
	memset(&M, 0, sizeof(M));
	spare_first = 4;
	M.job.unprotected = next_unprotected;
	M.now = (int64_t)time(NULL); /* the event log stamps real time */
	M.budget = -1;
	for (int i = 0; i < NNODES; i++) {
		snprintf(M.n[i].name, sizeof(M.n[i].name), "n%d", i + 1);
		M.n[i].flags = i < 4 ? CTL_N_BUSY : CTL_N_IDLE;
		M.n[i].failed_steps = 3; /* what a suspect report needs */
	}
	M.job.id = 7;
	M.job.uid = 1000;
	M.job.state = CTL_J_RUNNING;
	for (int k = 0; k < 4; k++)
		M.job.nodes[k] = k;
	M.job.exits_on_usr1 = exits_on_usr1;
	strcpy(M.job.comment,
	       "sigma[probe=quick,spares=1,max_restarts=3,ckpt_every=50,"
	       "on_warning=checkpoint]");
	unlink(log_path);
}

static void ticks(struct ctl *c, int n)
{
	for (int i = 0; i < n; i++) {
		M.now++;
		fake_schedule();
		assert_int_equal(ctl_tick(c), 0);
	}
}

struct count_arg {
	const char *type;
	int attempt;
	int n;
};

static int count_fn(const struct evlog_event *ev, void *arg)
{
	struct count_arg *a = arg;

	if (!strcmp(ev->type, a->type) && ev->job == 7 &&
	    ev->attempt == a->attempt)
		a->n++;
	return 0;
}

/* events of type for job 7's attempt */
static int logged_at(const char *type, int attempt)
{
	struct count_arg a = {type, attempt, 0};

	assert_int_equal(evlog_read(log_path, count_fn, &a, NULL), 0);
	return a.n;
}

static int logged(const char *type)
{
	return logged_at(type, 2);
}

static bool job_on(const char *name)
{
	if (M.job.state != CTL_J_RUNNING)
		return false;
	for (int k = 0; k < 4; k++)
		if (!strcmp(M.n[M.job.nodes[k]].name, name))
			return true;
	return false;
}

static int count_str(const char *s, const char *what)
{
	int n = 0;

	while ((s = strstr(s, what))) {
		n++;
		s += strlen(what);
	}
	return n;
}

/* a fresh cluster whose job 7 restarts itself in its allocation
 * (--sigma-restart=in-job), and sigmad on it for two ticks */
static struct ctl *in_job_start(bool exits_on_usr1)
{
	struct ctl *c = NULL;

	cluster_reset(exits_on_usr1);
	strcpy(M.job.comment, "sigma[probe=quick,spares=1,max_restarts=3,"
			      "ckpt_every=10,restart=in-job,job_spares=1]");
	assert_int_equal(ctl_create(&c, &cfg, conf_path), 0);
	ticks(c, 2);
	return c;
}

/*
 * Run a scenario, crashing sigmad after `crash_after` operations (0: never)
 * and starting a new one. inject() makes the node go bad. Returns whether
 * the crash happened (false: the run ended before the budget).
 */
static bool run(int crash_after, bool warning)
{
	struct ctl *c = NULL;
	bool crashed;

	cluster_reset(true);
	assert_int_equal(ctl_create(&c, &cfg, conf_path), 0);
	ticks(c, 2); /* the pool is set up */
	assert_true(M.resv_exists);
	assert_true(M.n[4].flags & CTL_N_RESERVED);
	if (warning) {
		M.n[1].flags |= CTL_N_DRAIN; /* the probe drains n2: warning */
		strcpy(M.n[1].reason,
		       "sigma: warning: probe quick: host temp_c=90 (warn 85)");
	} else {
		M.n[2].flags |= CTL_N_DRAIN; /* the probe drains n3: failure */
		strcpy(M.n[2].reason,
		       "sigma: probe quick: gpu0 ecc_uncorrected=2");
	}
	M.n[warning ? 1 : 2].reason_time = M.now;
	M.budget = crash_after;
	ticks(c, 8);
	crashed = M.crashed;
	ctl_destroy(c); /* sigmad dies here */
	M.crashed = false;
	M.budget = -1;
	assert_int_equal(ctl_create(&c, &cfg, conf_path), 0);
	ticks(c, 10); /* a new sigmad finishes */
	ctl_destroy(c);
	return crashed;
}

static void check_outcome(bool warning, int crash_after)
{
	const char *bad = warning ? "n2" : "n3";

	print_message(
	    "crash after %2d: job %s on n%d n%d n%d n%d, requeues %d signals %d comments %d\n",
	    crash_after,
	    M.job.state == CTL_J_RUNNING ? "running" : "NOT running",
	    M.job.nodes[0] + 1, M.job.nodes[1] + 1, M.job.nodes[2] + 1,
	    M.job.nodes[3] + 1, M.requeues, M.signals, M.comments);
	assert_int_equal(M.job.state, CTL_J_RUNNING);
	assert_false(job_on(bad));
	assert_true(job_on("n5")); /* the spare */
	assert_int_equal(M.job.restart_cnt, 1);
	assert_true(M.requeues <= 1); /* a job that exited is requeued once */
	assert_true(strstr(M.job.exc, bad) != NULL);
	assert_int_equal(count_str(M.job.comment, "sigma: attempt 2:"), 1);
	assert_int_equal(M.comments, 1);
	assert_true(!strncmp(M.job.comment, "sigma[probe=quick", 17));
	assert_int_equal(M.drains[warning ? 1 : 2], 0); /* already drained */
	assert_int_equal(logged("decide"), 1);
	assert_int_equal(logged("complete"), 1);
	assert_true(logged("requeue") <= 1);
	if (warning) {
		assert_true(M.signals <= 1);
		/* a crash that lost the signal: moved, but not a checkpoint */
		assert_true(strstr(M.job.comment,
				   M.signals ? "-> checkpointed, requeued onto n5"
					     : "-> still running after the grace, not a checkpoint, requeued onto n5") !=
			    NULL);
	} else {
		assert_int_equal(M.signals, 0);
		assert_true(
		    strstr(M.job.comment,
			   "n3 gpu0 ecc_uncorrected=2 -> requeued onto n5") !=
		    NULL);
	}
}

static void test_failure_no_crash(void **state)
{
	assert_false(run(0, false));
	check_outcome(false, 0);
	assert_int_equal(M.requeues, 1);
	assert_int_equal(logged("requeue"), 1);
	assert_int_equal(logged("release"), 1);
}

/* the requeued job starts sigmad_restart_delay seconds after the requeue,
 * not before (the last attempt's steps clean up on the nodes meanwhile) */
static void test_restart_delay(void **state)
{
	struct ctl *c = NULL;
	int64_t keep = cfg.restart_delay_s, t_req = -1;

	(void)state;
	assert_int_equal(keep, 1); /* the test configuration's value */
	cfg.restart_delay_s = 4;
	cluster_reset(true);
	assert_int_equal(ctl_create(&c, &cfg, conf_path), 0);
	ticks(c, 2);
	M.n[2].flags |= CTL_N_DRAIN;
	strcpy(M.n[2].reason, "sigma: probe quick: gpu0 ecc_uncorrected=2");
	for (int i = 0; i < 20; i++) {
		ticks(c, 1);
		if (t_req < 0 && M.requeues == 1)
			t_req = M.now;
		if (t_req >= 0 && M.now < t_req + 4)
			assert_true(M.job.state != CTL_J_RUNNING);
		if (t_req >= 0 && M.job.state == CTL_J_RUNNING)
			break;
	}
	ctl_destroy(c);
	cfg.restart_delay_s = keep;
	assert_true(t_req >= 0);
	/* begin_time is set once the job is pending again, a tick after
	 * the requeue; the job starts then and not before */
	assert_true(M.job.begin >= t_req + 4 && M.job.begin <= t_req + 5);
	assert_int_equal(M.job.state, CTL_J_RUNNING);
	assert_int_equal(M.now, M.job.begin);
}

static void test_failure_crash_everywhere(void **state)
{
	int k;

	for (k = 1; k < 60; k++) {
		bool crashed = run(k, false);

		check_outcome(false, k);
		if (!crashed)
			break;
	}
	assert_true(k > 3); /* it did crash mid-recovery several times */
}

/*
 * A job Slurm cannot requeue, whose node fails, with sigmad killed after
 * each of its operations: the job is never requeued and takes no spare,
 * and its account says once that sigma cannot protect it.
 */
static void test_unprotected_crash_everywhere(void **state)
{
	int k;

	for (k = 0; k < 60; k++) {
		bool crashed;

		next_unprotected = SIGMA_UNPROTECTED_NO_REQUEUE;
		crashed = run(k, false);
		next_unprotected = NULL;
		assert_int_equal(M.requeues, 0);
		assert_int_equal(M.job.restart_cnt, 0);
		assert_true(M.n[4].flags & CTL_N_RESERVED);
		assert_true(M.n[5].flags & CTL_N_RESERVED);
		assert_int_equal(count_str(M.job.comment,
					   "sigma cannot protect this job: "
					   SIGMA_UNPROTECTED_NO_REQUEUE),
				 1);
		assert_int_equal(logged_at("give_up", 1), 1);
		if (k && !crashed)
			break;
	}
	assert_true(k > 2);
}

static void test_warning_crash_everywhere(void **state)
{
	int k;

	assert_false(run(0, true));
	check_outcome(true, 0);
	assert_int_equal(M.signals, 1);
	assert_int_equal(logged("signal"), 1);
	for (k = 1; k < 60; k++) {
		bool crashed = run(k, true);

		check_outcome(true, k);
		if (!crashed)
			break;
	}
	assert_true(k > 3);
}

static void test_max_restarts(void **state)
{
	struct ctl *c = NULL;

	cluster_reset(true);
	M.job.restart_cnt = 3; /* max_restarts=3 used up */
	assert_int_equal(ctl_create(&c, &cfg, conf_path), 0);
	ticks(c, 1);
	M.n[0].flags |= CTL_N_NO_RESPOND;
	ticks(c, 3);
	ctl_destroy(c);
	assert_int_equal(M.requeues, 0);
	assert_true(M.n[0].flags & CTL_N_DOWN); /* down at once */
	assert_int_equal(M.drains[0], 1);
	assert_non_null(strstr(
	    M.job.comment,
	    "sigma: attempt 4: n1 not responding -> not requeued: max_restarts=3 reached"));
	assert_true(M.n[4].flags & CTL_N_RESERVED); /* no spare spent */
}

/* The job ended NODE_FAIL and Slurm did not requeue it: sigmad does. */
static void test_node_fail_end(void **state)
{
	struct ctl *c = NULL;

	cluster_reset(true);
	assert_int_equal(ctl_create(&c, &cfg, conf_path), 0);
	ticks(c, 2);
	M.n[3].flags |= CTL_N_DOWN;
	strcpy(M.n[3].reason, "Not responding");
	fjob_release_nodes();
	M.job.state = CTL_J_ENDED;
	M.job.node_fail = true;
	ticks(c, 6);
	ctl_destroy(c);
	assert_int_equal(M.requeues, 1);
	assert_int_equal(M.job.state, CTL_J_RUNNING);
	assert_false(job_on("n4"));
	assert_true(job_on("n5"));
	assert_true(M.n[3].flags & CTL_N_DRAIN);
	assert_non_null(
	    strstr(M.job.comment,
		   "sigma: attempt 2: n4 Not responding -> requeued onto n5"));
}

/*
 * Slurm starts the requeued job on an idle node of the partition, not on
 * the spare sigmad released for it (a released spare is not exclusive):
 * with n6 the only spare and n5 an idle primary, the job fails on n3 and
 * runs again on n1,n2,n4,n5. The account names the spare it was given;
 * once the job runs, sigmad says where it ran. It used to leave "requeued
 * onto n6" standing alone.
 */
static void test_requeued_elsewhere(void **state)
{
	struct ctl *c = NULL;
	const char *note =
	    "sigma: attempt 2: ran on n1,n2,n4,n5, not on the released spare n6";

	cluster_reset(true);
	spare_first = 5;
	assert_int_equal(ctl_create(&c, &cfg, conf_path), 0);
	ticks(c, 2);
	M.n[2].flags |= CTL_N_DRAIN;
	strcpy(M.n[2].reason, "sigma: probe quick: gpu0 ecc_uncorrected=2");
	ticks(c, 8);
	assert_int_equal(M.requeues, 1);
	assert_int_equal(M.job.state, CTL_J_RUNNING);
	assert_true(job_on("n5"));
	assert_false(job_on("n6"));
	assert_non_null(strstr(M.job.comment, "-> requeued onto n6"));
	assert_non_null(strstr(M.job.comment, note));
	/* said once, and by a restarted sigmad no more */
	assert_null(strstr(strstr(M.job.comment, note) + 1, note));
	ctl_destroy(c);
	c = NULL;
	assert_int_equal(ctl_create(&c, &cfg, conf_path), 0);
	ticks(c, 3);
	ctl_destroy(c);
	assert_null(strstr(strstr(M.job.comment, note) + 1, note));
}

/*
 * Two recoveries of one job. The first (n3 fails while the job runs) moves
 * it onto n5; while the node list still shows n5 idle under the running job,
 * n5 is not taken back into the pool. Then a rank dies: the script exits 76
 * and the job ends FAILED before the probe drains n2. sigmad requeues it
 * once n2 is drained, onto n6, keeping n5 (which the job needs again) out of
 * the pool, and the AdminComment tells both.
 */
static void test_second_failure_after_exit(void **state)
{
	struct ctl *c = NULL;

	cluster_reset(true);
	assert_int_equal(ctl_create(&c, &cfg, conf_path), 0);
	ticks(c, 2);
	M.n[2].flags |= CTL_N_DRAIN;
	strcpy(M.n[2].reason, "sigma: probe quick: gpu0 ecc_uncorrected=2");
	ticks(c, 8);
	assert_int_equal(M.job.restart_cnt, 1);
	assert_true(job_on("n5"));
	/* the node list lags: n5 looks idle, its job runs */
	M.n[4].flags = (M.n[4].flags & ~(unsigned)CTL_N_BUSY) | CTL_N_IDLE;
	ticks(c, 2);
	assert_false(M.n[4].flags & CTL_N_RESERVED);
	M.n[4].flags = (M.n[4].flags & ~(unsigned)CTL_N_IDLE) | CTL_N_BUSY;

	fjob_exit_76(); /* a rank died: exit 76 */
	ticks(c, 3);
	assert_int_equal(M.requeues, 1); /* no drained node yet: waits */
	assert_false(M.n[4].flags & CTL_N_RESERVED);
	M.n[1].flags |= CTL_N_DRAIN;
	strcpy(M.n[1].reason, "sigma: probe quick: host compute=fail");
	ticks(c, 8);
	ctl_destroy(c);
	assert_int_equal(M.requeues, 2);
	assert_int_equal(M.job.state, CTL_J_RUNNING);
	assert_int_equal(M.job.restart_cnt, 2);
	assert_false(job_on("n2"));
	assert_false(job_on("n3"));
	assert_true(job_on("n5"));
	assert_true(job_on("n6"));
	assert_non_null(strstr(M.job.exc, "n2"));
	assert_non_null(strstr(M.job.comment, "sigma: attempt 2: n3 gpu0 "
					      "ecc_uncorrected=2 -> requeued "
					      "onto n5"));
	assert_non_null(strstr(M.job.comment,
			       "sigma: attempt 3: n2 host compute=fail -> "
			       "requeued onto n6"));
}

/*
 * As above, but slurmctld refuses the second requeue for a few ticks, so
 * that sigma's recovery stays open while the job has ended: n5, which the
 * job ran on and needs again, stays out of the pool all along, and the job
 * runs on it once requeued (the demo's job was left pending for good when
 * the pool took its spare back in that window).
 */
static void test_lent_spare_while_requeue_waits(void **state)
{
	struct ctl *c = NULL;

	(void)state;
	cluster_reset(true);
	assert_int_equal(ctl_create(&c, &cfg, conf_path), 0);
	ticks(c, 2);
	M.n[2].flags |= CTL_N_DRAIN;
	strcpy(M.n[2].reason, "sigma: probe quick: gpu0 ecc_uncorrected=2");
	ticks(c, 8);
	assert_true(job_on("n5"));
	M.now += 400; /* long after the first recovery */
	fjob_exit_76(); /* a rank died: exit 76 */
	M.n[1].flags |= CTL_N_DRAIN;
	strcpy(M.n[1].reason, "sigma: probe quick: host compute=fail");
	M.requeue_refusals = 3;
	for (int t = 0; t < 10; t++) {
		ticks(c, 1);
		assert_false(M.n[4].flags & CTL_N_RESERVED);
	}
	ctl_destroy(c);
	assert_int_equal(M.requeues, 2);
	assert_int_equal(M.job.state, CTL_J_RUNNING);
	assert_true(job_on("n5"));
	assert_true(job_on("n6"));
}

/*
 * Slurm requeues the job itself once sigmad sets its lost node down
 * (expedited requeue: it runs again at once on the spare sigmad
 * released), and the user cancels it before sigmad's next tick. The job
 * was requeued: its account says so, not "cancelled: not requeued".
 */
static void test_cancelled_after_slurm_requeued(void **state)
{
	struct ctl *c = NULL;

	(void)state;
	cluster_reset(true);
	M.job.requeue_on_down = true;
	assert_int_equal(ctl_create(&c, &cfg, conf_path), 0);
	ticks(c, 2);
	M.n[1].flags |= CTL_N_NO_RESPOND;
	strcpy(M.n[1].reason, "Not responding");
	ticks(c, 1); /* decided, set down: Slurm requeued it */
	assert_int_equal(M.job.restart_cnt, 1);
	assert_int_equal(M.requeues, 0);
	M.now++;
	fake_schedule();
	assert_true(job_on("n5"));
	fjob_release_nodes();
	M.job.state = CTL_J_ENDED; /* the user's scancel */
	M.job.cancelled = true;
	M.job.end = M.now;
	assert_int_equal(ctl_tick(c), 0);
	ticks(c, 3);
	ctl_destroy(c);
	assert_int_equal(M.requeues, 0);
	assert_non_null(strstr(M.job.comment, "attempt 2: n2"));
	assert_non_null(strstr(M.job.comment, "-> requeued onto n5"));
	assert_null(strstr(M.job.comment, "cancelled"));
}

/*
 * An expedited job (sbatch --requeue=expedite) that Slurm requeued itself
 * is pending a moment while the epilog on its nodes ends. sigmad excludes
 * the lost node but sets no begin time: the job starts on the spare as
 * soon as Slurm lets it, not sigmad_restart_delay later.
 */
static void test_expedited_requeue_not_held_back(void **state)
{
	struct ctl *c = NULL;
	int64_t keep = cfg.restart_delay_s;

	(void)state;
	cfg.restart_delay_s = 10;
	cluster_reset(true);
	M.job.requeue_on_down = true;
	M.job.expedited = true;
	M.job.epilog_s = 2;
	assert_int_equal(ctl_create(&c, &cfg, conf_path), 0);
	ticks(c, 2);
	M.n[1].flags |= CTL_N_NO_RESPOND;
	strcpy(M.n[1].reason, "Not responding");
	ticks(c, 2); /* decided and set down, then the pending job updated */
	assert_int_equal(M.job.state, CTL_J_PENDING);
	assert_non_null(strstr(M.job.exc, "n2"));
	ticks(c, 1);
	assert_int_equal(M.job.state, CTL_J_RUNNING);
	assert_true(job_on("n5"));
	ticks(c, 2);
	ctl_destroy(c);
	cfg.restart_delay_s = keep;
	assert_int_equal(M.requeues, 0);
	assert_non_null(strstr(M.job.comment, "-> requeued onto n5"));
}

/*
 * An in-job job's node dies and its launcher relaunches the step onto an
 * in-allocation spare; the job then completes before slurmctld calls the
 * dead node not responding (SlurmdTimeout). The launcher's report of the
 * relaunch (repeated, as it does until sigmad hears it) counts one restart
 * and writes one account; sigmad still drains the node for the job, once;
 * a node that fails long after the job ended is not the job's.
 */
static void test_in_job_node_down_after_end(void **state)
{
	struct ctl *c = NULL;
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);

	(void)state;
	assert_non_null(out);
	c = in_job_start(false);
	/* not the owner, not a node of the job: refused, nothing counted */
	assert_int_equal(ctl_cmd_relaunch(c, 7, 1, "n2", 1001, false, out),
			 -EPERM);
	assert_int_equal(ctl_cmd_relaunch(c, 7, 1, "n6", 1000, false, out),
			 -EPERM);
	assert_int_equal(ctl_cmd_relaunch(c, 7, 1, "n2,n99", 1000, false, out),
			 -EPERM);
	for (int k = 0; k < 3; k++)
		assert_int_equal(
		    ctl_cmd_relaunch(c, 7, 1, "n2", 1000, false, out), 0);
	fflush(out);
	assert_non_null(strstr(text, "no such job of yours"));
	assert_non_null(strstr(text, "not one of the job's"));
	assert_non_null(strstr(text, "launch 1 counted already"));
	assert_int_equal(logged_at("relaunch", 1), 1);
	assert_int_equal(count_str(M.job.comment,
				   "sigma: attempt 1: n2 failed in the job's "
				   "step -> relaunched in the allocation "
				   "(in-job)"),
			 1);
	fjob_release_nodes();
	M.job.state = CTL_J_ENDED; /* COMPLETED */
	M.job.end = M.now;
	ticks(c, 2);
	M.n[1].flags |= CTL_N_DOWN | CTL_N_NO_RESPOND;
	strcpy(M.n[1].reason, "Not responding");
	ticks(c, 3);
	assert_int_equal(M.drains[1], 1);
	assert_int_equal(M.requeues, 0);
	assert_int_equal(count_str(M.job.comment, "relaunched in the "
						  "allocation"),
			 1);
	M.now += 400;
	M.n[2].flags |= CTL_N_DOWN | CTL_N_NO_RESPOND;
	strcpy(M.n[2].reason, "Not responding");
	ticks(c, 3);
	ctl_destroy(c);
	fclose(out);
	free(text);
	assert_int_equal(M.drains[1], 1);
	assert_int_equal(M.drains[2], 0);
	assert_int_equal(M.requeues, 0);
	assert_int_equal(logged_at("in_job", 1), 1);
}

/*
 * An in-job job's node fails and its launcher finds no in-allocation spare
 * left: it exits 76 and sigmad requeues the job. The AdminComment tells
 * the requeue, and never that the node was relaunched in the allocation.
 */
static void test_in_job_fallback_account(void **state)
{
	struct ctl *c = NULL;

	(void)state;
	c = in_job_start(false);
	M.n[1].flags |= CTL_N_DRAIN;
	strcpy(M.n[1].reason, "sigma: probe quick: host compute=fail");
	ticks(c, 3); /* the launcher judges; sigmad leaves the job to it */
	assert_int_equal(M.requeues, 0);
	fjob_exit_76(); /* no spare left: exit 76 */
	ticks(c, 8);
	ctl_destroy(c);
	assert_int_equal(M.requeues, 1);
	assert_int_equal(M.drains[1], 0); /* the probe drained it */
	assert_null(strstr(M.job.comment, "relaunched in the allocation"));
	assert_non_null(strstr(M.job.comment, "sigma: attempt 2: n2 host "
					      "compute=fail -> requeued onto"));
	assert_int_equal(logged_at("in_job", 1), 0);
}

/*
 * An in-job job (SPARES of the pool) whose launcher moved off a failed
 * n2, reported to sigmad through out; then a rank on n3 dies with no
 * in-allocation spare left, and the job exits 76 before n3 drains.
 */
static struct ctl *in_job_second_failure(FILE *out, const char *spares)
{
	struct ctl *c = in_job_start(false);

	snprintf(M.job.comment, sizeof(M.job.comment),
		 "sigma[probe=quick,%s,max_restarts=3,ckpt_every=10,"
		 "restart=in-job,job_spares=1]",
		 spares);
	M.n[1].flags |= CTL_N_DRAIN;
	strcpy(M.n[1].reason, "sigma: probe quick: host compute=fail");
	ticks(c, 2);
	assert_int_equal(ctl_cmd_relaunch(c, 7, 1, "n2", 1000, false, out), 0);
	ticks(c, 5);
	fjob_exit_76();
	return c;
}

/*
 * An in-job job relaunches off a failed n2, which stays in its allocation,
 * drained. Later a rank on n3 dies, no in-allocation spare is left, and
 * the job exits 76 before the probe drains n3. sigmad waits for n3 and
 * requeues the job onto spares for both: requeued at once, for n2 alone,
 * it waited for good on a node it could not have (the demo's job, left
 * pending with n3 drained and one pool spare still reserved).
 */
static void test_in_job_second_failure_waits(void **state)
{
	struct ctl *c = NULL;
	FILE *out = fopen("/dev/null", "w");

	(void)state;
	assert_non_null(out);
	c = in_job_second_failure(out, "spares=2");
	ticks(c, 4); /* the probe has not drained n3 yet */
	assert_int_equal(M.requeues, 0);
	M.n[2].flags |= CTL_N_DRAIN;
	strcpy(M.n[2].reason, "sigma: probe quick: gpu0 ecc_uncorrected=2");
	ticks(c, 8);
	ctl_destroy(c);
	fclose(out);
	assert_int_equal(M.requeues, 1);
	assert_int_equal(M.job.state, CTL_J_RUNNING);
	assert_false(job_on("n2"));
	assert_false(job_on("n3"));
	assert_true(job_on("n5"));
	assert_true(job_on("n6"));
	assert_non_null(strstr(M.job.exc, "n2"));
	assert_non_null(strstr(M.job.exc, "n3"));
}

/*
 * The same, but n3 never drains (the probe found nothing): sigmad does not
 * wait forever, it requeues the job for n2 after a minute.
 */
static void test_in_job_second_failure_gives_up_waiting(void **state)
{
	struct ctl *c = NULL;
	FILE *out = fopen("/dev/null", "w");

	(void)state;
	assert_non_null(out);
	c = in_job_second_failure(out, "spares=1");
	ticks(c, 30);
	assert_int_equal(M.requeues, 0);
	M.now += 60;
	ticks(c, 3);
	ctl_destroy(c);
	fclose(out);
	assert_int_equal(M.requeues, 1);
	assert_non_null(strstr(M.job.exc, "n2"));
}

/*
 * An admin's drain stands against every drain path of sigmad: a user's
 * suspect or slow report on a node an admin drained (in Slurm, or through
 * sigmactl drain) leaves the reason as it is, and the failure path does not
 * replace an admin's DOWN reason of a node the job failed on.
 */
static void test_admin_drain_stands(void **state)
{
	const char *nhc = "NHC: ib0 link down - do not resume";
	const char *rma = "sigma: admin: RMA pending";
	struct ctl *c = NULL;
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);

	(void)state;
	assert_non_null(out);
	c = in_job_start(true);
	M.n[0].flags |= CTL_N_DRAIN;
	strcpy(M.n[0].reason, nhc);
	M.n[1].flags |= CTL_N_DRAIN;
	strcpy(M.n[1].reason, rma);
	ticks(c, 1);
	for (int i = 0; i < 2; i++) {
		char node[8];

		snprintf(node, sizeof(node), "n%d", i + 1);
		assert_int_equal(ctl_cmd_suspect(c, node, 7, 1000, false, out),
				 0);
		assert_int_equal(ctl_cmd_slow(c, node, 7, 1000, false, out), 0);
	}
	ticks(c, 3);
	fflush(out);
	assert_non_null(strstr(text, "left as it is"));
	assert_int_equal(M.drains[0] + M.drains[1], 0);
	assert_string_equal(M.n[0].reason, nhc);
	assert_string_equal(M.n[1].reason, rma);
	ctl_destroy(c);
	fclose(out);
	free(text);

	/* a plain job fails on a node an admin took DOWN: requeued, the
	 * admin's reason kept */
	cluster_reset(true);
	assert_int_equal(ctl_create(&c, &cfg, conf_path), 0);
	ticks(c, 2);
	M.n[3].flags |= CTL_N_DOWN;
	strcpy(M.n[3].reason, nhc);
	ticks(c, 8);
	ctl_destroy(c);
	assert_int_equal(M.requeues, 1);
	assert_int_equal(M.drains[3], 0);
	assert_string_equal(M.n[3].reason, nhc);
}

/*
 * sigmad drains a failed node of an in-job job once: should the drain not
 * hold in Slurm (the node returned by someone, slurmd restarted), the
 * node is not drained again for that job at every tick, nor logged so.
 */
static void test_in_job_drain_once(void **state)
{
	struct ctl *c = NULL;

	(void)state;
	c = in_job_start(true);
	M.n[1].flags |= CTL_N_DOWN | CTL_N_NO_RESPOND;
	strcpy(M.n[1].reason, "Not responding");
	ticks(c, 2);
	assert_int_equal(M.drains[1], 1);
	for (int k = 0; k < 5; k++) {
		M.n[1].flags &= ~(unsigned)CTL_N_DRAIN; /* did not hold */
		ticks(c, 1);
	}
	assert_int_equal(M.drains[1], 1);
	assert_int_equal(logged_at("drain", 1), 1);
	ctl_destroy(c);
	/* nor after sigmad restarts */
	assert_int_equal(ctl_create(&c, &cfg, conf_path), 0);
	ticks(c, 3);
	assert_int_equal(M.drains[1], 1);
	ctl_destroy(c);
}

/*
 * A node that fails after an in-job job ended is not the job's: sigmad
 * drains it for the job only when the job's launcher moved off it
 * (its relaunch report) before the job ended.
 */
static void test_in_job_ended_not_blamed(void **state)
{
	struct ctl *c = NULL;

	(void)state;
	c = in_job_start(true);
	fjob_release_nodes();
	M.job.state = CTL_J_ENDED; /* COMPLETED */
	M.job.end = M.now;
	ticks(c, 2);
	M.n[0].flags |= CTL_N_DOWN | CTL_N_NO_RESPOND;
	strcpy(M.n[0].reason, "Not responding");
	ticks(c, 3);
	ctl_destroy(c);
	assert_int_equal(M.drains[0], 0);
	assert_int_equal(logged_at("drain", 1), 0);
}

/* the metrics file's text and the status reply of c, into buf */
static void state_text(struct ctl *c, char *buf, size_t size)
{
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);
	int n = ctl_metrics_format(c, buf, size);

	assert_true(n > 0);
	assert_non_null(out);
	ctl_cmd_status(c, out, 0, true);
	fclose(out);
	/* the status line but its "now" */
	assert_non_null(strstr(text, "\"jobs\""));
	assert_true((size_t)n + len < size);
	strcat(buf, strstr(text, "\"jobs\""));
	free(text);
}

/*
 * Past sigmad_event_log_max the event log is compacted: the history of
 * jobs slurmctld forgot goes to events.jsonl.1, what the state needs
 * stays, and a sigmad started on the compacted log has the same state
 * (its metrics counters and its status) as the one that compacted it.
 */
static void test_log_compact(void **state)
{
	static char before[1 << 16], after[1 << 16];
	char old[sizeof(log_path) + 4];
	struct evlog log;
	struct evlog_event ev;
	struct ctl *c = NULL;
	struct stat st;
	FILE *out = fopen("/dev/null", "w");

	(void)state;
	c = in_job_start(true);
	/* an in-job job's state: a relaunch counted, a suspect drained */
	assert_int_equal(ctl_cmd_relaunch(c, 7, 1, "n2", 1000, false, out), 0);
	assert_int_equal(ctl_cmd_suspect(c, "n3", 7, 1000, false, out), 0);
	ctl_destroy(c);
	/* two thousand recoveries of jobs slurmctld forgot long ago */
	assert_int_equal(evlog_open(&log, log_path), 0);
	for (uint32_t j = 0; j < 2000; j++) {
		memset(&ev, 0, sizeof(ev));
		ev.time = M.now - 86400;
		ev.job = 5000 + j;
		ev.attempt = 2;
		strcpy(ev.type, "decide");
		strcpy(ev.verdict, policy_verdict_name(POLICY_REQUEUE));
		strcpy(ev.kind, "failure");
		strcpy(ev.node, "n9");
		assert_int_equal(evlog_append(&log, &ev), 0);
		strcpy(ev.type, "complete");
		ev.time += 30;
		assert_int_equal(evlog_append(&log, &ev), 0);
	}
	evlog_close(&log);
	cfg.event_log_max = 64 << 10;
	assert_int_equal(ctl_create(&c, &cfg, conf_path), 0);
	state_text(c, before, sizeof(before));
	assert_non_null(strstr(before, "sigma_recoveries_total{kind=\"failure\",verdict=\"requeue\"} 2000"));
	ticks(c, 1); /* compacted */
	ctl_destroy(c);
	assert_int_equal(stat(log_path, &st), 0);
	assert_true(st.st_size < 4096);
	snprintf(old, sizeof(old), "%s.1", log_path);
	assert_int_equal(stat(old, &st), 0);
	assert_true(st.st_size > 64 << 10);
	/* a sigmad started on it */
	assert_int_equal(ctl_create(&c, &cfg, conf_path), 0);
	state_text(c, after, sizeof(after));
	assert_string_equal(before, after);
	/* and the state still acts: the job's relaunch is counted once, its
	 * suspect drain is in the hourly caps */
	ticks(c, 1);
	assert_int_equal(ctl_cmd_relaunch(c, 7, 1, "n2", 1000, false, out), 0);
	assert_int_equal(logged_at("relaunch", 1), 1);
	assert_int_equal(ctl_cmd_suspect(c, "n1", 7, 1000, false, out), 0);
	assert_int_equal(ctl_cmd_suspect(c, "n4", 7, 1000, false, out), -EBUSY);
	ctl_destroy(c);
	fclose(out);
	cfg.event_log_max = (int64_t)SIGMAD_DEFAULT_LOG_MAX_MB << 20;
	unlink(old);
}

/*
 * A full disk under the state directory loses no decision: while the
 * event log cannot take a line sigmad decides nothing (a decision is on
 * disk before it is acted on), and once it can, the job is recovered,
 * once. A compaction that cannot write its new file leaves the log as it
 * was, and sigmad appends to it still.
 */
static void test_full_disk(void **state)
{
	char tmp[sizeof(log_path) + 8];
	struct ctl *c = NULL;
	struct stat st0, st1;

	(void)state;
	cluster_reset(true);
	assert_int_equal(ctl_create(&c, &cfg, conf_path), 0);
	ticks(c, 2);
	M.enospc = 1000;
	M.n[3].flags |= CTL_N_DOWN;
	strcpy(M.n[3].reason, "Not responding");
	ticks(c, 5);
	assert_int_equal(M.requeues, 0);
	assert_int_equal(logged("decide"), 0);
	M.enospc = 0;
	ticks(c, 8);
	assert_int_equal(M.requeues, 1);
	assert_int_equal(logged("decide"), 1);
	ctl_destroy(c);

	/* the compaction's new file cannot be written */
	snprintf(tmp, sizeof(tmp), "%s.new", log_path);
	assert_int_equal(mkdir(tmp, 0700), 0);
	assert_int_equal(stat(log_path, &st0), 0);
	cfg.event_log_max = 1;
	assert_int_equal(ctl_create(&c, &cfg, conf_path), 0);
	ticks(c, 3);
	{
		FILE *out = fopen("/dev/null", "w");

		assert_non_null(out);
		assert_int_equal(ctl_cmd_spare_add(c, "n4", 0, out), 0);
		fclose(out);
	}
	ctl_destroy(c);
	cfg.event_log_max = (int64_t)SIGMAD_DEFAULT_LOG_MAX_MB << 20;
	assert_int_equal(stat(log_path, &st1), 0);
	assert_int_equal(st0.st_ino, st1.st_ino);
	assert_true(st1.st_size > st0.st_size); /* appended still */
	assert_int_equal(logged("decide"), 1);
	assert_int_equal(rmdir(tmp), 0);
}

/*
 * sigmad drains a suspect at a user's word only on its own count: Slurm's
 * records of the job's steps that failed with the node among theirs (3,
 * sigmad_suspect_crashes), and never a node another user's job runs on.
 */
static void test_suspect_verified(void **state)
{
	struct ctl *c = NULL;
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);

	(void)state;
	assert_non_null(out);
	c = in_job_start(true);
	M.n[0].failed_steps = 0; /* a report with no crash behind it */
	M.n[1].failed_steps = 2;
	M.n[2].other_job = 99; /* shared with another user's job */
	assert_int_equal(ctl_cmd_suspect(c, "n1", 7, 1000, false, out), -EPERM);
	assert_int_equal(ctl_cmd_suspect(c, "n2", 7, 1000, false, out), -EPERM);
	assert_int_equal(ctl_cmd_suspect(c, "n3", 7, 1000, false, out), -EPERM);
	assert_int_equal(M.drains[0] + M.drains[1] + M.drains[2], 0);
	fflush(out);
	assert_non_null(strstr(text, "Slurm records 0 failed steps of the job on n1, "
				     "sigmad drains at 3"));
	assert_non_null(strstr(text, "Slurm records 2 failed steps"));
	assert_non_null(strstr(text, "job 99 of another user runs on n3"));
	/* the third crash recorded: drained */
	M.n[1].failed_steps = 3;
	assert_int_equal(ctl_cmd_suspect(c, "n2", 7, 1000, false, out), 0);
	assert_int_equal(M.drains[1], 1);
	/* an admin's word needs no count */
	assert_int_equal(ctl_cmd_suspect(c, "n1", 7, 0, true, out), 0);
	assert_int_equal(M.drains[0], 1);
	ctl_destroy(c);
	fclose(out);
	free(text);
}

/* tick c until job 7 has n "suspect" verdicts (its probes ended) */
static void until_verdicts(struct ctl *c, int n)
{
	for (int k = 0; k < 200 && logged_at("suspect", 0) < n; k++) {
		ticks(c, 1);
		usleep(20000);
	}
	assert_int_equal(logged_at("suspect", 0), n);
}

/* counts n2's refused suspect verdicts that give Slurm's count as why */
static int n2_refused_fn(const struct evlog_event *ev, void *arg)
{
	*(int *)arg += !strcmp(ev->type, "suspect") &&
		       !strcmp(ev->node, "n2") &&
		       !strcmp(ev->verdict, "refused") &&
		       strstr(ev->text, "Slurm records 0 failed steps") != NULL;
	return 0;
}

/*
 * A suspect report gets sigmad's own probe of the node first, started
 * without waiting for it: a node whose probe fails is drained with the
 * probe's reason, whatever the count; one that probes healthy is drained
 * as a suspect only on Slurm's count (3 failed steps of the job there). A
 * report while the probe runs waits for its verdict; one soon after a
 * healthy probe is judged on the count at once.
 */
static void test_suspect_probed(void **state)
{
	char probe[sizeof(dir) + 16], *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len), *f;
	struct ctl *c = NULL;
	int refused = 0;

	(void)state;
	assert_non_null(out);
	snprintf(probe, sizeof(probe), "%s/probe.sh", dir);
	f = fopen(probe, "w");
	assert_non_null(f);
	fputs("#!/bin/sh\nsleep 0.2\n"
	      "[ \"$1\" = n1 ] && { echo 'sigma: probe full: gpu0 ecc'; exit 1; }\n"
	      "echo 'sigma: probe full: healthy'\n",
	      f);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(chmod(probe, 0755), 0);
	snprintf(cfg.probe_command, sizeof(cfg.probe_command), "%s %%n",
		 probe);
	c = in_job_start(true);
	M.n[0].failed_steps = 0; /* n1: no crash recorded, but faulty */
	M.n[1].failed_steps = 0; /* n2: no crash recorded, healthy */
	/* n3: 3 crashes recorded, healthy */
	assert_int_equal(ctl_cmd_suspect(c, "n1", 7, 1000, false, out), 0);
	assert_int_equal(ctl_cmd_suspect(c, "n1", 7, 1000, false, out), 0);
	assert_int_equal(ctl_cmd_suspect(c, "n2", 7, 1000, false, out), 0);
	assert_int_equal(ctl_cmd_suspect(c, "n3", 7, 1000, false, out), 0);
	assert_int_equal(M.drains[0] + M.drains[1] + M.drains[2], 0);
	until_verdicts(c, 3);
	assert_int_equal(M.drains[0], 1);
	assert_string_equal(M.n[0].reason, "sigma: probe full: gpu0 ecc");
	assert_int_equal(M.drains[1], 0);
	assert_int_equal(M.drains[2], 1);
	assert_non_null(strstr(M.n[2].reason, "sigma: suspect: the rank of job 7"));
	/* n2 again, its third crash recorded: the count, no probe */
	M.n[1].failed_steps = 3;
	assert_int_equal(ctl_cmd_suspect(c, "n2", 7, 1000, false, out), 0);
	assert_int_equal(M.drains[1], 1);
	ctl_destroy(c);
	cfg.probe_command[0] = '\0';
	unlink(probe);
	fclose(out);
	assert_non_null(strstr(text, "ok: job 7, node n1: sigmad probes it first"));
	assert_non_null(strstr(text, "ok: job 7, node n1: being probed already"));
	assert_non_null(strstr(text, "ok: n2 drained: sigma: suspect:"));
	free(text);
	/* each verdict says why */
	assert_int_equal(evlog_read(log_path, n2_refused_fn, &refused, NULL), 0);
	assert_int_equal(refused, 1);
}

/*
 * A user's suspect reports drain few nodes: two a job in an hour (a third
 * is refused, and still after sigmad restarts), and a repeat on a node
 * drained already changes nothing. An admin's word is not capped.
 */
static void test_suspect_caps(void **state)
{
	struct ctl *c = NULL;
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);

	(void)state;
	assert_non_null(out);
	c = in_job_start(true);
	assert_int_equal(ctl_cmd_suspect(c, "n1", 7, 1000, false, out), 0);
	assert_int_equal(ctl_cmd_suspect(c, "n2", 7, 1000, false, out), 0);
	for (int k = 0; k < 20; k++) /* repeats: nothing more */
		assert_int_equal(ctl_cmd_suspect(c, "n1", 7, 1000, false, out),
				 0);
	assert_int_equal(ctl_cmd_suspect(c, "n3", 7, 1000, false, out),
			 -EBUSY);
	assert_int_equal(M.drains[0] + M.drains[1] + M.drains[2], 2);
	ctl_destroy(c);
	/* the count survives a restart of sigmad */
	assert_int_equal(ctl_create(&c, &cfg, conf_path), 0);
	ticks(c, 1);
	assert_int_equal(ctl_cmd_suspect(c, "n3", 7, 1000, false, out),
			 -EBUSY);
	assert_int_equal(M.drains[2], 0);
	assert_int_equal(ctl_cmd_suspect(c, "n3", 7, 0, true, out), 0);
	assert_int_equal(M.drains[2], 1);
	ctl_destroy(c);
	fclose(out);
	assert_non_null(strstr(text, "at most 2 suspect drains a job"));
	free(text);
}

/*
 * One sigmactl request from a child process running as uid (when this test
 * runs as root; otherwise as whoever runs it); the reply comes back here.
 */
static void request(struct ctl *c, struct srv *srv, uid_t uid,
		    const char *req, char *reply, size_t size)
{
	char sock[160];
	int pfd[2], status;
	size_t got = 0;
	ssize_t n;
	pid_t pid;

	snprintf(sock, sizeof(sock), "%s/s.sock", dir);
	assert_int_equal(pipe(pfd), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct sockaddr_un sa = {.sun_family = AF_UNIX};
		char buf[4096];
		int fd;

		close(pfd[0]);
		if (getuid() == 0 && uid != 0 && (setgid(uid) || setuid(uid)))
			_exit(2);
		strcpy(sa.sun_path, sock);
		fd = socket(AF_UNIX, SOCK_STREAM, 0);
		if (fd < 0 ||
		    connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
			_exit(3);
		if (write(fd, req, strlen(req)) < 0 || write(fd, "\n", 1) != 1)
			_exit(4);
		shutdown(fd, SHUT_WR);
		while ((n = read(fd, buf, sizeof(buf))) > 0)
			if (write(pfd[1], buf, (size_t)n) != n)
				_exit(5);
		_exit(0);
	}
	close(pfd[1]);
	/* serve until the client has its whole reply */
	for (int i = 0; i < 100; i++) {
		struct pollfd p = {pfd[0], POLLIN, 0};

		srv_run(srv, c, 50);
		if (poll(&p, 1, 0) == 1 && (p.revents & POLLHUP))
			break;
	}
	while (got + 1 < size &&
	       (n = read(pfd[0], reply + got, size - 1 - got)) > 0)
		got += (size_t)n;
	reply[got] = '\0';
	close(pfd[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail_msg("request child: status 0x%x", status);
}

/* the tuner's word (sigmactl slow): an early warning for the owner's
 * running job alone, which the warning path moves off the node; the node
 * is not drained; another user's word, or another node, is refused */
static void test_slow_moves_job(void **state)
{
	struct ctl *c = NULL;
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);

	(void)state;
	assert_non_null(out);
	cluster_reset(true);
	assert_int_equal(ctl_create(&c, &cfg, conf_path), 0);
	ticks(c, 2);
	assert_int_equal(ctl_cmd_slow(c, "n2", 7, 1001, false, out), -EPERM);
	assert_int_equal(ctl_cmd_slow(c, "n6", 7, 1000, false, out), -EPERM);
	assert_int_equal(ctl_cmd_slow(c, "n9", 7, 1000, false, out), -ENOENT);
	assert_int_equal(M.drains[1] + M.drains[5], 0);
	assert_int_equal(ctl_cmd_slow(c, "n2", 7, 1000, false, out), 0);
	/* said again: nothing more */
	assert_int_equal(ctl_cmd_slow(c, "n2", 7, 1000, false, out), 0);
	fflush(out);
	assert_non_null(strstr(text, "no such job of yours"));
	assert_non_null(strstr(text, "the node is not one of the job's"));
	assert_non_null(strstr(text, "reported slow already"));
	/* the job's word moves the job, not the node's other jobs: the
	 * node stays in service */
	assert_int_equal(logged_at("slow", 0), 1);
	ticks(c, 10);
	assert_int_equal(M.drains[1], 0);
	assert_false(M.n[1].flags & CTL_N_DRAIN);
	ctl_destroy(c);
	fclose(out);
	free(text);
	assert_int_equal(M.signals, 1); /* asked to checkpoint */
	assert_int_equal(M.requeues, 1);
	for (int k = 0; k < 4; k++)
		assert_int_not_equal(M.job.nodes[k], 1);
	assert_non_null(strstr(M.job.comment, "n2 warning"));
	assert_non_null(strstr(M.job.comment, "-> checkpointed, requeued onto"));
}

/* bytes of relaunch events of uid's job 9 into c's log */
static void flood_log(struct ctl *c, uint32_t uid, long bytes)
{
	struct evlog_event ev;

	ctl_ev_init(&ev, "relaunch");
	ev.job = 9;
	ev.uid = uid;
	memset(ev.text, 'x', sizeof(ev.text) - 1);
	for (long n = 0; n < bytes; n += (long)sizeof(ev.text)) {
		ev.launch++;
		assert_int_equal(ctl_log(c, &ev), 0);
	}
}

static void test_socket(void **state)
{
	struct ctl *c = NULL;
	char sock[160], reply[8192];
	bool root = getuid() == 0;
	/* who is "a normal user" and who is "SlurmUser" for this run */
	uid_t user = root ? 65534 : getuid();
	uid_t admin = root ? 0 : getuid();
	uid_t slurm_user = root ? 64030 : getuid();
	struct srv *srv = NULL, *srv2 = NULL;

	cluster_reset(true);
	M.job.uid = (uint32_t)user; /* the normal user owns job 7 */
	snprintf(sock, sizeof(sock), "%s/s.sock", dir);
	assert_int_equal(ctl_create(&c, &cfg, conf_path), 0);
	assert_int_equal(srv_create(&srv, sock, slurm_user, true), 0);
	/* a second server on a live socket is refused */
	assert_int_equal(srv_create(&srv2, sock, slurm_user, true),
			 -EADDRINUSE);
	/* its probing connection waits in the backlog: drop it */
	srv_run(srv, c, 50);
	ticks(c, 2);
	M.n[2].flags |= CTL_N_DRAIN;
	strcpy(M.n[2].reason, "sigma: probe quick: gpu0 ecc_uncorrected=2");
	ticks(c, 4);

	request(c, srv, user, "status", reply, sizeof(reply));
	/* one line of JSON: sigmactl shows it (test_sigmactl_show) */
	assert_non_null(strstr(reply, "\"spares\":{\"reservation\":"
				      "\"sigma_spares\",\"pool\":[\"n6\"],"
				      "\"members\":[\"n5\",\"n6\"]}"));
	assert_non_null(strstr(reply, "\"job\":7,"));
	assert_non_null(strstr(reply, "\"state\":\"RUNNING\",\"restarts\":1,"
				      "\"restarts_left\":"));
	assert_non_null(
	    strstr(reply, "\"nodes\":[\"n1\",\"n2\",\"n4\",\"n5\"]}"));
	assert_non_null(
	    strstr(reply, "{\"node\":\"n3\",\"state\":\"drained\",\"since\":"));
	assert_int_equal(strchr(reply, '\n') - reply + 1, strlen(reply));
	if (root) {
		/* PrivateData=jobs: another user sees no one else's job */
		request(c, srv, user - 1, "status", reply, sizeof(reply));
		assert_null(strstr(reply, "\"job\":7,"));
		assert_non_null(strstr(reply, "\"pool\":[\"n6\"]"));
		request(c, srv, admin, "status", reply, sizeof(reply));
		assert_non_null(strstr(reply, "\"job\":7,"));
	}

	if (root) {
		/* mutating requests: refused to a normal user */
		request(c, srv, user, "drain\tn1\tmaint", reply, sizeof(reply));
		assert_non_null(strstr(reply, "error: permission denied"));
		assert_int_equal(M.drains[0], 0);
		request(c, srv, user, "spares\tremove\tn6", reply,
			sizeof(reply));
		assert_non_null(strstr(reply, "error: permission denied"));
		assert_true(M.n[5].flags & CTL_N_RESERVED);
		/* history: a normal user sees their own job's events only */
		request(c, srv, user, "history", reply, sizeof(reply));
		assert_non_null(
		    strstr(reply, "\"type\":\"decide\",\"job\":7,"));
		assert_null(strstr(reply, "\"type\":\"pool\""));
	}
	/* root (or SlurmUser) may */
	request(c, srv, admin, "drain\tn1\tfan swap", reply, sizeof(reply));
	assert_non_null(
	    strstr(reply, "ok: n1 drained: sigma: admin: fan swap"));
	assert_int_equal(M.drains[0], 1);
	assert_string_equal(M.n[0].reason, "sigma: admin: fan swap");
	/* an admin's drain is not a node in repair */
	ticks(c, 1);
	request(c, srv, admin, "status", reply, sizeof(reply));
	{
		char *admins = strstr(reply, "\"admin_drained\":[");
		char *repair = strstr(reply, "\"repair\":[");

		assert_non_null(admins);
		assert_non_null(repair);
		assert_non_null(strstr(admins, "[{\"node\":\"n1\","));
		*admins = '\0'; /* the repair section alone */
		assert_null(strstr(repair, "\"n1\""));
		assert_non_null(
		    strstr(repair, "{\"node\":\"n3\",\"state\":\"drained\""));
	}
	request(c, srv, admin, "resume\tn1", reply, sizeof(reply));
	assert_false(M.n[0].flags & CTL_N_DRAIN);
	request(c, srv, admin, "drain\tn99\tx", reply, sizeof(reply));
	assert_non_null(strstr(reply, "error: no node called 'n99'"));
	request(c, srv, admin, "spares\tremove\tn6", reply, sizeof(reply));
	assert_non_null(strstr(reply, "ok: n6 left the spare pool"));
	assert_false(M.n[5].flags & CTL_N_RESERVED);
	request(c, srv, admin, "history\tnode=n1", reply, sizeof(reply));
	assert_non_null(strstr(reply, "\"type\":\"drain\""));
	/* job 7 ran on n1 (a "run" event), but nothing else of it was */
	assert_non_null(strstr(reply, "\"type\":\"run\",\"job\":7,"));
	assert_null(strstr(reply, "\"type\":\"decide\",\"job\":7"));
	request(c, srv, admin, "history\tjob=7", reply, sizeof(reply));
	assert_non_null(strstr(reply, "\"type\":\"complete\",\"job\":7,"));
	assert_null(strstr(reply, "\"type\":\"drain\",\"uid\""));
	request(c, srv, admin, "history\tsince=99999999999", reply,
		sizeof(reply));
	assert_string_equal(reply, "");
	if (root) {
		/* a user's history, behind 5 MB of another user's events */
		flood_log(c, (uint32_t)user - 1, 5 << 20);
		request(c, srv, user, "history", reply, sizeof(reply));
		assert_non_null(
		    strstr(reply, "\"type\":\"decide\",\"job\":7,"));
		assert_null(strstr(reply, "# history:"));
	}
	request(c, srv, admin, "bogus", reply, sizeof(reply));
	assert_non_null(strstr(reply, "error: unknown request 'bogus'"));
	srv_destroy(srv);
	assert_int_equal(access(sock, F_OK), -1);
	ctl_destroy(c);
}

static int connect_to(const char *sock)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);

	assert_true(fd >= 0);
	strcpy(sa.sun_path, sock);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

/* true when the server has closed fd (EOF after any reply) */
static bool closed_by_server(int fd, char *reply, size_t size)
{
	size_t got = 0;

	for (;;) {
		ssize_t n = read(fd, reply + got, size - 1 - got);

		if (n > 0 && got + (size_t)n < size - 1) {
			got += (size_t)n;
			continue;
		}
		reply[got] = '\0';
		/* closed with unread bytes: ECONNRESET after the reply */
		return n == 0 || (n < 0 && errno == ECONNRESET);
	}
}

/*
 * Clients that hold connections open: idle ones beyond the cap, one that
 * drips a byte at a time, one that sends more than a request may hold.
 * srv_run never takes longer than asked, every such connection is gone
 * after the deadline, and a real request is answered meanwhile.
 */
static void test_socket_abuse(void **state)
{
	enum { IDLE = SRV_CONN_MAX + 8 };
	struct ctl *c = NULL;
	struct srv *srv = NULL;
	char sock[160], reply[8192], big[SRV_REQ_MAX + 10];
	int idle[IDLE], drip, huge;
	uint64_t t0, worst = 0, dripped = 0;
	size_t refused = 0;

	cluster_reset(true);
	snprintf(sock, sizeof(sock), "%s/s.sock", dir); /* as request() */
	assert_int_equal(ctl_create(&c, &cfg, conf_path), 0);
	assert_int_equal(srv_create(&srv, sock, 64030, true), 0);
	drip = connect_to(sock);
	huge = connect_to(sock);
	for (int i = 0; i < IDLE; i++) {
		idle[i] = connect_to(sock);
		srv_run(srv, c, 0);
	}
	memset(big, 's', sizeof(big));
	assert_int_equal(write(huge, big, sizeof(big)), (ssize_t)sizeof(big));
	t0 = sigma_now_ms();
	while (sigma_now_ms() - t0 < SRV_DEADLINE_MS + 500) {
		uint64_t t = sigma_now_ms();

		if (t - dripped >= 100) {
			(void)!write(drip, "s", 1);
			dripped = t;
		}
		srv_run(srv, c, 100);
		if (sigma_now_ms() - t > worst)
			worst = sigma_now_ms() - t;
	}
	assert_true(worst < 300);
	/* the oversized request got its error; the others were cut off */
	assert_true(closed_by_server(huge, reply, sizeof(reply)));
	assert_non_null(strstr(reply, "error: request longer than 4096"));
	assert_true(closed_by_server(drip, reply, sizeof(reply)));
	assert_string_equal(reply, "");
	for (int i = 0; i < IDLE; i++) {
		assert_true(closed_by_server(idle[i], reply, sizeof(reply)));
		if (strstr(reply, "too many connections"))
			refused++;
		close(idle[i]);
	}
	/* beyond the cap, connections were answered and closed at once */
	assert_true(refused >= IDLE - SRV_CONN_MAX);
	close(drip);
	close(huge);
	/* and a real client is still served */
	request(c, srv, getuid(), "spares", reply, sizeof(reply));
	assert_non_null(strstr(reply, "members"));
	srv_destroy(srv);
	ctl_destroy(c);
}

/*
 * Eight users hold all the connections a user may have (8 each, 64 in
 * all, the socket's whole table before): root and SlurmUser still get
 * their answer, from the slots kept for them, and so does a ninth user's
 * one request (a launcher's report), for which the busiest user's oldest
 * connection makes room. As root only: the users are real uids.
 */
static void test_socket_fair(void **state)
{
	enum { USERS = 8, EACH = SRV_CONN_PER_USER };
	struct ctl *c = NULL;
	struct srv *srv = NULL;
	char sock[160], reply[8192];
	pid_t kid[USERS];
	int ready[2];

	(void)state;
	if (getuid() != 0)
		skip();
	cluster_reset(true);
	snprintf(sock, sizeof(sock), "%s/s.sock", dir);
	assert_int_equal(ctl_create(&c, &cfg, conf_path), 0);
	assert_int_equal(srv_create(&srv, sock, 64030, true), 0);
	assert_int_equal(pipe(ready), 0);
	for (int u = 0; u < USERS; u++) {
		kid[u] = fork();
		assert_true(kid[u] >= 0);
		if (kid[u] == 0) {
			int fds[EACH];

			close(ready[0]);
			if (setgid(2000 + u) || setuid(2000 + u))
				_exit(2);
			for (int i = 0; i < EACH; i++) {
				struct sockaddr_un sa = {.sun_family = AF_UNIX};

				strcpy(sa.sun_path, sock);
				fds[i] = socket(AF_UNIX, SOCK_STREAM, 0);
				/* blocks while the backlog is full */
				if (fds[i] < 0 ||
				    connect(fds[i], (struct sockaddr *)&sa,
					    sizeof(sa)) < 0)
					_exit(3);
			}
			(void)!write(ready[1], "x", 1);
			pause(); /* hold them */
			(void)fds;
			_exit(0);
		}
	}
	close(ready[1]);
	/* serve until every user holds its connections */
	for (int got = 0, n = 0; got < USERS; n++) {
		assert_true(n < 1000);
		struct pollfd p = {ready[0], POLLIN, 0};
		char x;

		srv_run(srv, c, 10);
		if (poll(&p, 1, 0) == 1 && read(ready[0], &x, 1) == 1)
			got++;
	}
	for (int i = 0; i < 20; i++)
		srv_run(srv, c, 5);
	request(c, srv, 0, "status", reply, sizeof(reply));
	assert_null(strstr(reply, "too many"));
	assert_non_null(strstr(reply, "spares"));
	request(c, srv, 64030, "spares", reply, sizeof(reply));
	assert_non_null(strstr(reply, "members"));
	request(c, srv, 3000, "spares", reply, sizeof(reply));
	assert_non_null(strstr(reply, "members"));
	for (int u = 0; u < USERS; u++) {
		kill(kid[u], SIGKILL);
		waitpid(kid[u], NULL, 0);
	}
	close(ready[0]);
	srv_destroy(srv);
	ctl_destroy(c);
}

/*
 * One user's flood of requests is cut to a rate (SRV_RATE_BURST at once,
 * then SRV_RATE_PER_S a second): a client of that user asks twice the
 * burst in a row, as fast as it can, and is refused with a clear error
 * before the end, while root is answered. (One client process for all the
 * requests: how long they take does not depend on forks.)
 */
static void test_socket_rate(void **state)
{
	struct ctl *c = NULL;
	struct srv *srv = NULL;
	char sock[160], reply[8192];
	uid_t user = getuid() == 0 ? 2000 : getuid();
	int counts[2] = {0, 0}, pfd[2], status;
	pid_t pid;

	(void)state;
	cluster_reset(true);
	snprintf(sock, sizeof(sock), "%s/s.sock", dir);
	assert_int_equal(ctl_create(&c, &cfg, conf_path), 0);
	assert_int_equal(srv_create(&srv, sock, 64030, true), 0);
	assert_int_equal(pipe(pfd), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int got[2] = {0, 0}; /* answered, refused */

		close(pfd[0]);
		if (getuid() == 0 && (setgid(user) || setuid(user)))
			_exit(2);
		for (int i = 0; i < 2 * SRV_RATE_BURST; i++) {
			struct sockaddr_un sa = {.sun_family = AF_UNIX};
			char buf[8192];
			size_t n = 0;
			ssize_t r;
			int fd = socket(AF_UNIX, SOCK_STREAM, 0);

			strcpy(sa.sun_path, sock);
			if (fd < 0 ||
			    connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
			    write(fd, "spares\n", 7) != 7)
				_exit(3);
			while (n < sizeof(buf) - 1 &&
			       (r = read(fd, buf + n, sizeof(buf) - 1 - n)) > 0)
				n += (size_t)r;
			buf[n] = '\0';
			close(fd);
			if (strstr(buf, "too many requests"))
				got[1]++;
			else if (strstr(buf, "members"))
				got[0]++;
		}
		_exit(write(pfd[1], got, sizeof(got)) == sizeof(got) ? 0 : 4);
	}
	close(pfd[1]);
	while (waitpid(pid, &status, WNOHANG) == 0)
		srv_run(srv, c, 5);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_int_equal(read(pfd[0], counts, sizeof(counts)), sizeof(counts));
	close(pfd[0]);
	assert_true(counts[0] >= SRV_RATE_BURST);
	assert_true(counts[1] > 0);
	assert_int_equal(counts[0] + counts[1], 2 * SRV_RATE_BURST);
	if (getuid() == 0) {
		request(c, srv, 0, "spares", reply, sizeof(reply));
		assert_non_null(strstr(reply, "members"));
	}
	srv_destroy(srv);
	ctl_destroy(c);
}

/* alive and not a zombie waiting for whoever inherited it */
static bool process_lives(pid_t pid)
{
	char path[64], line[512];
	bool lives = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	f = fopen(path, "r");
	if (!f)
		return false;
	if (fgets(line, sizeof(line), f)) {
		const char *st = strrchr(line, ')');

		lives = st && st[1] == ' ' && st[2] != 'Z' && st[2] != 'X';
	}
	fclose(f);
	return lives;
}

/*
 * The repair probe: started and collected without waiting. One that
 * hangs (with a child of its own) is killed as a group at its deadline;
 * one that answers gives its exit code and output.
 */
static void test_probe_async(void **state)
{
	char *hang[] = {"/bin/sh", "-c", "sleep 30 & echo $! > \"$PIDF\"; sleep 30",
			NULL};
	char *ok[] = {"/bin/sh", "-c", "echo \"sigma: probe full: $WHO\"; exit 1",
		      NULL};
	char pidf[200], envp[220], *env[] = {envp, NULL}, *env2[] = {"WHO=n3", NULL};
	struct ctl_proc p;
	uint64_t t0;
	long bg = 0;
	int rc = -1;
	FILE *f;

	snprintf(pidf, sizeof(pidf), "%s/bg.pid", dir);
	snprintf(envp, sizeof(envp), "PIDF=%s", pidf);
	assert_int_equal(ctl_proc_start(&p, hang, env, 1), 0);
	t0 = sigma_now_ms();
	assert_false(ctl_proc_poll(&p, &rc));
	assert_true(sigma_now_ms() - t0 < 100);
	while (!ctl_proc_poll(&p, &rc)) {
		assert_true(sigma_now_ms() - t0 < 5000);
		usleep(50 * 1000);
	}
	assert_int_equal(rc, 3);
	assert_true(sigma_now_ms() - t0 >= 1000);
	f = fopen(pidf, "r");
	assert_non_null(f);
	assert_int_equal(fscanf(f, "%ld", &bg), 1);
	fclose(f);
	usleep(100 * 1000);
	assert_false(process_lives((pid_t)bg)); /* its child went too */

	assert_int_equal(ctl_proc_start(&p, ok, env2, 10), 0);
	while (!ctl_proc_poll(&p, &rc))
		usleep(10 * 1000);
	assert_int_equal(rc, 1);
	assert_string_equal(p.out, "sigma: probe full: n3\n");
	assert_int_equal(p.pid, 0);
}

/*
 * The metrics file: after a recovery it counts one requeue decision, one
 * drain, one duration; a new sigmad counts the same from the event log
 * (the counters survive a restart, and nothing is counted twice). With
 * SIGMA_METRICS_OUT set the file is copied there (tests/unit/
 * test_metrics.sh runs promtool on it).
 */
static char *metrics_read(void)
{
	char path[300], *buf = NULL;

	snprintf(path, sizeof(path), "%s/sigmad.prom", dir);
	assert_int_equal(sigma_file_read(path, 1 << 20, &buf, NULL), 0);
	return buf;
}

static void check_metrics(const char *buf)
{
	static const char *const want[] = {
	    "sigma_recoveries_total{kind=\"failure\",verdict=\"requeue\"} 1\n",
	    "sigma_recoveries_total{kind=\"warning\",verdict=\"checkpoint\"} 0\n",
	    "sigma_drains_total{class=\"failure\"} 1\n",
	    "sigma_drains_total{class=\"admin\"} 0\n",
	    "sigma_recovery_duration_seconds_bucket{le=\"+Inf\"} 1\n",
	    "sigma_recovery_duration_seconds_count 1\n",
	    "sigma_job_restarts_left{job=\"7\"} 2\n",
	    "sigma_managed_jobs{state=\"running\"} 1\n",
	    "sigma_nodes_in_repair 1\n",
	    "sigma_spares{state=\"in_use\"} 1\n",
	    "# TYPE sigma_recovery_duration_seconds histogram\n",
	};

	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		if (!strstr(buf, want[i]))
			fail_msg("metrics lack %s in:\n%s", want[i], buf);
}

static void test_metrics(void **state)
{
	struct ctl *c = NULL;
	char *buf, path[300];
	const char *keep = getenv("SIGMA_METRICS_OUT");

	cluster_reset(true);
	sigma_strlcpy(cfg.metrics_dir, dir, sizeof(cfg.metrics_dir));
	assert_int_equal(ctl_create(&c, &cfg, conf_path), 0);
	ticks(c, 2);
	M.n[2].flags |= CTL_N_DRAIN;
	strcpy(M.n[2].reason, "sigma: probe quick: gpu0 ecc_uncorrected=2");
	M.n[2].reason_time = M.now;
	ticks(c, 8);
	buf = metrics_read();
	check_metrics(buf);
	free(buf);
	ctl_destroy(c); /* a new sigmad counts the same from the log */
	assert_int_equal(ctl_create(&c, &cfg, conf_path), 0);
	ticks(c, 1);
	buf = metrics_read();
	check_metrics(buf);
	if (keep)
		assert_int_equal(
		    sigma_file_write_atomic(keep, buf, strlen(buf), 0644), 0);
	free(buf);
	ctl_destroy(c);
	snprintf(path, sizeof(path), "%s/sigmad.prom", dir);
	unlink(path);
	cfg.metrics_dir[0] = '\0';
}

/* the name index finds every node, and only those, in any name order */
static void test_view_index(void **state)
{
	static const char *names[] = {"n10", "n2", "x1", "n1", "a9", "n20"};
	struct ctl_view v;
	char other[8];

	(void)state;
	memset(&v, 0, sizeof(v));
	v.nnodes = sizeof(names) / sizeof(names[0]);
	v.nodes = calloc(v.nnodes, sizeof(*v.nodes));
	assert_non_null(v.nodes);
	for (size_t i = 0; i < v.nnodes; i++)
		sigma_strlcpy(v.nodes[i].name, names[i], sizeof(v.nodes[i].name));
	/* unindexed: the linear search */
	assert_int_equal(ctl_view_node(&v, "x1"), 2);
	assert_int_equal(ctl_view_index_names(&v), 0);
	for (size_t i = 0; i < v.nnodes; i++)
		assert_int_equal(ctl_view_node(&v, names[i]), (long)i);
	for (int k = 0; k < 30; k++) {
		snprintf(other, sizeof(other), "n%d", k);
		if (strcmp(other, "n1") && strcmp(other, "n2") &&
		    strcmp(other, "n10") && strcmp(other, "n20"))
			assert_int_equal(ctl_view_node(&v, other), -1);
	}
	assert_int_equal(ctl_view_node(&v, ""), -1);
	assert_int_equal(ctl_view_node(&v, "zz"), -1);
	ctl_view_free(&v);
	assert_null(v.by_name);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_failure_no_crash),
	    cmocka_unit_test(test_failure_crash_everywhere),
	    cmocka_unit_test(test_restart_delay),
	    cmocka_unit_test(test_requeued_elsewhere),
	    cmocka_unit_test(test_warning_crash_everywhere),
	    cmocka_unit_test(test_unprotected_crash_everywhere),
	    cmocka_unit_test(test_max_restarts),
	    cmocka_unit_test(test_node_fail_end),
	    cmocka_unit_test(test_second_failure_after_exit),
	    cmocka_unit_test(test_lent_spare_while_requeue_waits),
	    cmocka_unit_test(test_cancelled_after_slurm_requeued),
	    cmocka_unit_test(test_expedited_requeue_not_held_back),
	    cmocka_unit_test(test_in_job_node_down_after_end),
	    cmocka_unit_test(test_in_job_fallback_account),
	    cmocka_unit_test(test_in_job_second_failure_waits),
	    cmocka_unit_test(test_in_job_second_failure_gives_up_waiting),
	    cmocka_unit_test(test_admin_drain_stands),
	    cmocka_unit_test(test_in_job_drain_once),
	    cmocka_unit_test(test_log_compact),
	    cmocka_unit_test(test_full_disk),
	    cmocka_unit_test(test_in_job_ended_not_blamed),
	    cmocka_unit_test(test_suspect_verified),
	    cmocka_unit_test(test_suspect_caps),
	    cmocka_unit_test(test_suspect_probed),
	    cmocka_unit_test(test_slow_moves_job),
	    cmocka_unit_test(test_socket),
	    cmocka_unit_test(test_socket_abuse),
	    cmocka_unit_test(test_socket_fair),
	    cmocka_unit_test(test_socket_rate),
	    cmocka_unit_test(test_probe_async),
	    cmocka_unit_test(test_metrics),
	    cmocka_unit_test(test_view_index),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
