/*
 * ctl_internal.h - what the parts of sigmad's controller share, for its
 * own files only (ctl.h is the contract with the daemon): the controller's
 * state and its records of recoveries, and the helpers more than one part
 * uses. Each part has a file:
 *
 *   ctl.c          lifecycle and the tick; the records, rebuilt from the
 *                  event log at start; comma lists, node and job helpers
 *   ctl_pool.c     the hot-spare pool and its reservation
 *   ctl_decide.c   failures and warnings seen, and the decisions on them
 *   ctl_recover.c  carrying a decision out, step by step
 *   ctl_repair.c   return to service: repair probes of drained nodes
 *   ctl_cmd.c      the commands of sigmactl
 *   ctl_suspect.c  a user's suspect report: checked, probed, judged
 *   ctl_metrics.c  the metrics file: counters from the event log, gauges
 */
#ifndef SIGMAD_CTL_INTERNAL_H
#define SIGMAD_CTL_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "conf.h"
#include "ctl.h"
#include "eventlog.h"
#include "proc.h"
#include "tries.h"
#include "view.h"

/* how a job sent SIGUSR1 stopped, for its account */
enum ctl_stop { STOP_UNKNOWN = 0, STOP_EXIT, STOP_SIGNAL, STOP_RUNNING };

/* the names of enum ctl_stop, in the event log */
extern const char *const ctl_stop_names[];

struct ctl_rec {
	uint32_t job, uid;
	int attempt;
	int verdict; /* enum policy_verdict */
	bool warning;
	char bad[EVLOG_NODE_MAX];
	char spares[EVLOG_NODE_MAX];
	char what[200];
	int64_t decided_at, signalled_at;
	int64_t logged_at; /* its decide event's time (metrics) */
	bool signalled, released, requeued, complete;
	/* in memory: where the requeued job ran was checked against its
	 * spares (ctl_check_placement) */
	bool placed;
	int errors; /* in memory: failed Slurm calls */
	int waits;  /* in memory: ticks its account waited for slurmdbd */
	/* in memory: ticks left to check that a finished job's accounting
	 * record keeps comment (a late record of slurmctld may replace it) */
	int verify;
	char comment[CTL_COMMENT_MAX];
	/* in memory: how a signalled job stopped, for its account */
	enum ctl_stop stop;
	int stop_code; /* its exit status, or the signal */
};


struct ctl_last {
	uint32_t job;
	char nodes[CTL_LIST_MAX];
	/* an in-job job: the failed nodes its account already tells, and
	 * the relaunches its launcher reported, and the newest launch number
	 * of those */
	char in_job[CTL_LIST_MAX];
	int relaunches;
	int launch;
	/* nodes its own rank reported slow (sigmactl slow): an early warning
	 * for this job alone */
	char slow[CTL_LIST_MAX];
	/* nodes sigmad drained for it, each once (its "drain" events) */
	char drained[CTL_LIST_MAX];
};

/* the counters of sigmad's metrics, counted from the event log */
#define CTL_VERDICTS	     6 /* enum policy_verdict */
#define CTL_DRAIN_CLASSES    3 /* failure, warning, admin */
#define CTL_DURATION_BUCKETS 10
extern const double ctl_duration_bounds[CTL_DURATION_BUCKETS];

struct ctl_counts {
	uint64_t recoveries[2][CTL_VERDICTS]; /* [warning][verdict] */
	uint64_t drains[CTL_DRAIN_CLASSES];
	uint64_t duration_le[CTL_DURATION_BUCKETS]; /* cumulative */
	uint64_t duration_count;
	double duration_sum;
};

/* a drain at a user's word (sigmactl suspect), for the hourly caps */
struct ctl_report {
	int64_t time;
	uint32_t job, uid;
};
#define CTL_REPORTS_MAX 256
/* suspect drains a job, and a user, may have in an hour */
#define CTL_SUSPECT_PER_JOB_HOUR  2
#define CTL_SUSPECT_PER_USER_HOUR 4

/*
 * A suspect report's probe of its node (ctl_suspect.c): running, or ended
 * and its result kept CTL_SUSPECT_REPROBE_S, in which a report of the
 * node is judged on that result instead of a new probe.
 */
struct ctl_suspect {
	char node[CTL_NAME_MAX];
	uint32_t job, uid;
	struct ctl_proc probe;
	int64_t ended; /* 0 while the probe runs */
	int rc;
	char out[CTL_PROC_OUT_MAX];
};
#define CTL_SUSPECTS_MAX      16
#define CTL_SUSPECT_REPROBE_S 600

struct ctl {
	struct sigmad_config cfg;
	char config_path[4096];
	char log_path[4096];
	struct evlog log;
	struct ctl_rec *recs;
	size_t nrecs, caprecs;
	char added[SIGMAD_LIST_MAX];   /* sigmactl spares add */
	char removed[SIGMAD_LIST_MAX]; /* sigmactl spares remove */
	struct ctl_tries_table tries; /* the nodes in repair */
	struct ctl_report reports[CTL_REPORTS_MAX]; /* the last hour's */
	size_t nreports;
	struct ctl_suspect suspects[CTL_SUSPECTS_MAX]; /* probes of reports */
	size_t nsuspects;
	struct ctl_last *last;
	size_t nlast;
	struct ctl_view view; /* the latest look, for status */
	struct ctl_counts counts;
	char *metrics_last; /* the text written last (malloc'd), or NULL */
	size_t metrics_len;
	int64_t metrics_written; /* when; -1 after a failed write */
};

/* ---- event log (ctl_events.c) -------------------------------------------- */

/* an event of type, stamped now */
void ctl_ev_init(struct evlog_event *ev, const char *type);
/* an event of type about r's job, attempt and bad node */
void ctl_ev_from_rec(struct evlog_event *ev, const char *type,
		     const struct ctl_rec *r);
/* append ev (fsync'd) and count it; a failure is logged and returned */
int ctl_log(struct ctl *c, const struct evlog_event *ev);
/* count ev (appended now, or replayed at start) */
void ctl_count_event(struct ctl *c, const struct evlog_event *ev);
/*
 * The counters as the text of a "counts" event, which a compacted event log
 * ends with (ctl_log_compact): its length, or -ENOSPC. Parsed back, they
 * replace the counters: 0, or -EINVAL.
 */
int ctl_counts_format(const struct ctl_counts *k, char *buf, size_t size);
int ctl_counts_parse(struct ctl_counts *k, const char *text);

/* ---- records (ctl_rec.c) ------------------------------------------------- */

/*
 * Records fall in three classes that may share an attempt number: a
 * recovery (requeue, checkpoint, drain only) names the attempt the job
 * restarts as, a give-up names the attempt that failed, a watch collects
 * warned nodes of the running attempt.
 */
enum ctl_rec_class { REC_RECOVERY = 0, REC_WATCH, REC_GIVE_UP };

enum ctl_rec_class ctl_rec_class(int verdict);
struct ctl_rec *ctl_rec_find(struct ctl *c, uint32_t job, int attempt,
			     enum ctl_rec_class cls);
/* a zeroed record at the end of c->recs, or NULL */
struct ctl_rec *ctl_rec_new(struct ctl *c);
/* a recovery or a give-up was decided for the job's current attempt */
bool ctl_decided(const struct ctl *c, const struct ctl_job *job);
/* node is a bad node of a recovery still open */
bool ctl_in_open_rec(const struct ctl *c, const char *node);

/* the nodes job ran on last (a comma list, "" when unknown) */
const char *ctl_last_nodes(const struct ctl *c, uint32_t job);
/* remember them (in memory; callers log them) */
void ctl_last_set(struct ctl *c, uint32_t job, const char *nodes);
/* the failed nodes of in-job job that sigmad recorded ("" when none) */
const char *ctl_in_job_told(const struct ctl *c, uint32_t job);
void ctl_in_job_tell(struct ctl *c, uint32_t job, const char *node);
/* a suspect drain at uid's word for job, at time; and how many of them
 * job (or, with by_user, uid) has had in the hour before now */
void ctl_report_note(struct ctl *c, int64_t time, uint32_t job, uint32_t uid);
int ctl_reports(const struct ctl *c, int64_t now, uint32_t job, uint32_t uid,
		bool by_user);
/* the nodes job's rank reported slow, and one more */
const char *ctl_slow_nodes(const struct ctl *c, uint32_t job);
/* the nodes sigmad drained for job, and one more */
const char *ctl_drained_nodes(const struct ctl *c, uint32_t job);
void ctl_drained_add(struct ctl *c, uint32_t job, const char *node);
void ctl_slow_add(struct ctl *c, uint32_t job, const char *node);
/* the relaunches inside its allocation that job's launcher reported */
int ctl_relaunches(const struct ctl *c, uint32_t job);
/* the newest launch number counted for job, 0 when none */
int ctl_relaunch_newest(const struct ctl *c, uint32_t job);
void ctl_relaunch_count(struct ctl *c, uint32_t job, int launch);
/* the account of node, one the launcher of in-job job moved its step off */
void ctl_in_job_relaunched(struct ctl *c, const struct ctl_job *job,
			   const char *node);
/* the restarts job has used: Slurm's requeues and the relaunches */
int ctl_restarts_used(const struct ctl *c, const struct ctl_job *job);

/* ---- the hot-spare pool (ctl_pool.c) ------------------------------------- */

/* pool members: configured (list or feature) + added - removed */
void ctl_members(struct ctl *c, const struct ctl_view *v, char *out);
/* node was released to a recovery and is not back in the pool yet */
bool ctl_lent(const struct ctl *c, const struct ctl_view *v, const char *node);
/* the reservation's healthy nodes that run no job, as a comma list */
void ctl_pool_now(const struct ctl_view *v, char *out, size_t size);
/* set the reservation to exactly nodes, and v with it */
int ctl_resv_apply(struct ctl *c, struct ctl_view *v, const char *nodes);
/* keep the reservation at the configured spares */
void ctl_pool_sync(struct ctl *c, struct ctl_view *v);

/* ---- decisions (ctl_decide.c) -------------------------------------------- */

struct sigma_block;
/* the restarts a job may have: its --sigma-max-restarts within the cap */
int ctl_max_restarts(const struct ctl *c, const struct sigma_block *opts);

/* decide on every failure and warning v shows */
void ctl_detect(struct ctl *c, const struct ctl_view *v);
/* log the nodes each running sigma job runs on, when they changed */
void ctl_remember_nodes(struct ctl *c, const struct ctl_view *v);

/* ---- carrying a decision out (ctl_recover.c) ----------------------------- */

/* the next step of the open recovery r */
void ctl_step(struct ctl *c, struct ctl_view *v, struct ctl_rec *r);
/* keep a finished job's account in its accounting record (ctl_recover.c) */
void ctl_verify_account(struct ctl *c, struct ctl_rec *r);
/* once the requeued job of the complete recovery r runs: tell a spare it
 * did not get (ctl_recover.c) */
void ctl_check_placement(struct ctl *c, const struct ctl_view *v,
			 struct ctl_rec *r);

/* ---- commands (ctl_cmd.c) ------------------------------------------------- */

/*
 * node of uid's running job (in_job: one restarting itself), for a report
 * of its owner (admin: of anyone's job): its index, or -ENOENT or -EPERM,
 * told on out
 */
long ctl_job_node(struct ctl *c, const char *node, uint32_t job, uid_t uid,
		  bool admin, bool in_job, FILE *out);
/*
 * Drain node i of job with reason, on a report of its owner uid, if the
 * one drain decision says so for ask (as: what it is drained as, for
 * sigmad's log). The drain is logged for the job. 0 (drained, or left as
 * it is and told so on out), or -errno.
 */
int ctl_job_drain(struct ctl *c, long i, uint32_t job, uid_t uid,
		  enum sigma_drain_ask ask, const char *reason, const char *as,
		  FILE *out);

/* ---- return to service (ctl_repair.c) ------------------------------------ */

/* probe the drained nodes that are due, act on the results */
void ctl_repair(struct ctl *c, struct ctl_view *v);
/*
 * Start sigmad_probe_command for node into p (no shell, %n the node);
 * collected with ctl_proc_poll. 0, or -errno (no command: -ENOENT).
 */
int ctl_probe_start(struct ctl *c, const char *node, struct ctl_proc *p);

/* ---- suspect reports (ctl_suspect.c) ------------------------------------- */

/* judge the reports whose probe ended; forget the results gone stale */
void ctl_suspects(struct ctl *c);
/* kill the probes still running (teardown) */
void ctl_suspects_kill(struct ctl *c);

/* ---- metrics (ctl_metrics.c) -------------------------------------------- */

/* the metrics file's text into buf: its length, or -ENOSPC */
int ctl_metrics_format(struct ctl *c, char *buf, size_t size);
/* write the file when it changed or is due (sigmad_metrics_dir set) */
void ctl_metrics_tick(struct ctl *c, int64_t now);

#endif /* SIGMAD_CTL_INTERNAL_H */
