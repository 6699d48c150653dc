/*
 * contract.h - the one definition of what sigma's parts say to each other
 * through Slurm: the job's options block in its AdminComment, the reason a
 * node is drained with, the probe's and the trainer's exit codes, and the
 * environment the plugin gives a job's tasks. The plugin, the probe, sigmad
 * and the trainer all format and parse these here, with one set of limits
 * (docs/interfaces.md).
 */
#ifndef SIGMA_CONTRACT_H
#define SIGMA_CONTRACT_H

#include <stdbool.h>
#include <stddef.h>

/* ---- probe levels ---------------------------------------------------------- */

enum sigma_level {
	SIGMA_LEVEL_OFF = 0,
	SIGMA_LEVEL_QUICK = 1,
	SIGMA_LEVEL_FULL = 2,
};

/* "off", "quick", "full", NULL */
extern const char *const sigma_level_names[];
/* the level's name, "?" when out of range */
const char *sigma_level_name(int level);

/* ---- the probe's exit codes ------------------------------------------------ */

enum sigma_probe_exit {
	SIGMA_PROBE_EXIT_OK = 0,      /* healthy */
	SIGMA_PROBE_EXIT_FAIL = 1,    /* the node's own fault: drain */
	SIGMA_PROBE_EXIT_WARN = 2,    /* an early sign: move work off */
	SIGMA_PROBE_EXIT_ERROR = 3,   /* the probe could not run: drain */
	SIGMA_PROBE_EXIT_UNJUDGED = 4, /* cannot judge (busy, full): never
					  drains */
};

/* ---- the trainer's exit codes (Slurm's RequeueExit, sigmad) ---------------- */

/* The values follow sysexits.h where one fits. */
enum train_exit {
	TRAIN_EXIT_OK = 0,	    /* finished every step */
	TRAIN_EXIT_FAILURE = 1,	    /* anything not listed below */
	TRAIN_EXIT_USAGE = 64,	    /* bad command line or SIGMA_* value */
	TRAIN_EXIT_DATAERR = 65,    /* bad token file or checkpoint */
	TRAIN_EXIT_NOINPUT = 66,    /* an input file cannot be opened */
	TRAIN_EXIT_UNAVAILABLE = 69, /* stop requested, no checkpoint dir */
	TRAIN_EXIT_DIVERGED = 70,   /* loss or gradient not finite */
	TRAIN_EXIT_OSERR = 71,	    /* out of memory, other system error */
	TRAIN_EXIT_CANTCREAT = 73,  /* cannot write a checkpoint or output */
	TRAIN_EXIT_REQUEUE = 75,    /* stopped on request, checkpoint written */
	TRAIN_EXIT_PEER = 76,	    /* a peer rank failed or a collective timed
				       out (docs/distributed.md) */
	TRAIN_EXIT_HARDWARE = 79,   /* a recomputed step differs: requeue
				       elsewhere */
};

/* ---- what a warning does to a job (--sigma-on-warning) ---------------------- */

enum sigma_on_warning {
	/* the job finishes on the warned node, which drains after it */
	SIGMA_WARN_DRAIN_AFTER = 0,
	/* SIGUSR1: the job checkpoints and exits 75; sigmad moves it */
	SIGMA_WARN_CHECKPOINT = 1,
	/* nothing is done to the job */
	SIGMA_WARN_IGNORE = 2,
};

/* "drain-after", "checkpoint", "ignore", NULL */
extern const char *const sigma_on_warning_names[];

/* ---- who restarts a failed job (--sigma-restart) ---------------------------- */

enum sigma_restart {
	/* sigmad requeues it, onto the pool's spares */
	SIGMA_RESTART_REQUEUE = 0,
	/* its launcher (sigma-launch) relaunches it inside the allocation,
	 * onto in-allocation spares; sigmad drains and records, and requeues
	 * only once the job exits asking for it */
	SIGMA_RESTART_IN_JOB = 1,
};

/* "requeue", "in-job", NULL */
extern const char *const sigma_restart_names[];

/*
 * ---- the job block ---------------------------------------------------------
 * "sigma[probe=..,spares=..,max_restarts=..,ckpt_every=..,on_warning=..]",
 * and for an in-job restart ",restart=in-job,job_spares=N" before the ']'
 */

#define SIGMA_BLOCK_PREFIX	 "sigma["
#define SIGMA_SPARES_MAX	 1024
#define SIGMA_RESTARTS_MAX	 10000
#define SIGMA_CKPT_EVERY_MAX	 100000000L
#define SIGMA_CKPT_EVERY_DEFAULT 100
/* the longest block, every field at its maximum, with its NUL */
#define SIGMA_BLOCK_MAX 144

struct sigma_block {
	int probe;	   /* enum sigma_level */
	long spares;	   /* 0..SIGMA_SPARES_MAX */
	long max_restarts; /* 0..SIGMA_RESTARTS_MAX */
	long ckpt_every;   /* 1..SIGMA_CKPT_EVERY_MAX */
	int on_warning;	   /* enum sigma_on_warning */
	int restart;	   /* enum sigma_restart */
	long job_spares;   /* in-allocation spares, 0..SIGMA_SPARES_MAX */
};

/*
 * probe off, no spares, no restarts, the default interval, drain-after (a
 * job that has not said it handles SIGUSR1 is not sent one)
 */
void sigma_block_init(struct sigma_block *b);
/* Returns 0, -ERANGE (a field out of its limits) or -ENAMETOOLONG. */
int sigma_block_format(const struct sigma_block *b, char *buf, size_t size);
/*
 * Parse the block at the start of an AdminComment. Returns 0, -ENOENT when
 * it does not start with "sigma[" (not a sigma job) or -EINVAL (malformed,
 * or a value out of its limits). *end gets the offset just past ']' (may be
 * NULL). Unknown keys are skipped (a newer plugin may add some);
 * job_spares without restart=in-job is malformed.
 */
int sigma_block_parse(const char *comment, struct sigma_block *b, size_t *end);

/* why sigma cannot requeue a job, in its AdminComment and sigmad's account */
#define SIGMA_UNPROTECTED_NO_REQUEUE "the job cannot be requeued (--no-requeue)"
#define SIGMA_UNPROTECTED_HET                                                  \
	"a component of a heterogeneous job other than its leader cannot be requeued"

/* ---- site caps (sigma.conf), enforced at submit and by sigmad -------------- */

struct sigma_site_caps {
	long spares_per_job;  /* sigmad_max_spares_per_job */
	long spares_per_user; /* sigmad_max_spares_per_user, held at once */
	long max_restarts;    /* sigmad_max_restarts */
};

/* no caps: every one at the contract's own limit */
void sigma_site_caps_init(struct sigma_site_caps *caps);
/*
 * One key=value of sigma.conf: 1 when it was a cap (stored), 0 when it is
 * not one, or -EINVAL with the reason in err.
 */
int sigma_site_caps_key(struct sigma_site_caps *caps, const char *key,
			const char *value, char *err, size_t errlen);
/* The caps of a sigma.conf file; every other key is skipped. */
int sigma_site_caps_load(struct sigma_site_caps *caps, const char *path,
			 char *err, size_t errlen);

/* ---- node reasons: "sigma: [warning: ]probe LEVEL: WHAT" ------------------- */

#define SIGMA_REASON_PREFIX "sigma: "
#define SIGMA_REASON_ADMIN_PREFIX "sigma: admin: "

enum sigma_reason {
	SIGMA_REASON_NONE = 0, /* empty, or not sigma's */
	SIGMA_REASON_FAILURE,  /* "sigma: probe LEVEL: WHAT" */
	SIGMA_REASON_WARNING,  /* "sigma: warning: probe LEVEL: WHAT" */
	SIGMA_REASON_ADMIN,    /* "sigma: admin: WHAT" (sigmactl drain) */
	SIGMA_REASON_SIGMA,    /* any other "sigma: WHAT" (sigmad's own) */
};

/*
 * "sigma: [warning: ]probe LEVEL: WHAT", WHAT cut to fit. Returns 0,
 * -EINVAL (a bad level) or -ENAMETOOLONG (cut).
 */
int sigma_reason_format(char *buf, size_t size, bool warning, int level,
			const char *what);
/*
 * What kind of reason this is; for a probe's, *level (may be NULL) gets its
 * level; *what (may be NULL) points at WHAT in reason (for SIGMA and ADMIN,
 * at what follows the prefix).
 */
enum sigma_reason sigma_reason_parse(const char *reason, int *level,
				     const char **what);

/* ---- the drain decision (drain.c): every path that drains asks it ---------- */

/* a node as Slurm has it now */
struct sigma_node_now {
	bool drained; /* DRAIN, DRAINING or DRAINED */
	bool down;    /* DOWN (NOT_RESPONDING with it) */
	const char *reason; /* may be NULL */
};
/* who asks to drain (or resume) a node */
enum sigma_drain_ask {
	SIGMA_ASK_FAILURE,    /* a probe failed it, or could not run */
	SIGMA_ASK_WARNING,    /* a probe's early warning */
	SIGMA_ASK_HEALTHY,    /* a probe found it healthy */
	SIGMA_ASK_JOB_FAILED, /* sigmad: a node a job failed on */
	SIGMA_ASK_USER,       /* a user's report through sigmad */
};
enum sigma_drain_action {
	SIGMA_DRAIN_NONE = 0,
	SIGMA_DRAIN_SET,    /* drain (or re-drain) with sigma's reason */
	SIGMA_DRAIN_RESUME, /* put it back in service */
};
/*
 * What to do with node n when ask asks (level: the asking probe's, for
 * SIGMA_ASK_HEALTHY; resume: the site's drain_resume). why gets a line for
 * the log. Never drains over a reason that is not sigma's own, nor lets a
 * user's report touch a node already out of service (drain.c).
 */
enum sigma_drain_action sigma_drain_decide(const struct sigma_node_now *n,
					   enum sigma_drain_ask ask, int level,
					   bool resume, char *why,
					   size_t whylen);

/* ---- the environment of a sigma job's tasks (read by sigma-train) ---------- */

#define SIGMA_ENV_CKPT_DIR   "SIGMA_CKPT_DIR"
#define SIGMA_ENV_CKPT_EVERY "SIGMA_CKPT_EVERY"
#define SIGMA_ENV_ATTEMPT    "SIGMA_ATTEMPT"
/* for sigma-launch: "requeue" or "in-job", and the in-allocation spares */
#define SIGMA_ENV_RESTART    "SIGMA_RESTART"
#define SIGMA_ENV_JOB_SPARES "SIGMA_JOB_SPARES"
#define SIGMA_ENV_MAX_RESTARTS "SIGMA_MAX_RESTARTS"
/* sigma-launch's relaunch of the step inside the allocation: 1, 2, ... */
#define SIGMA_ENV_LAUNCH     "SIGMA_LAUNCH"
/* the highest attempt a start may be (lib/attempt.h) */
#define SIGMA_ATTEMPT_MAX    1000000

#endif /* SIGMA_CONTRACT_H */
