/*
 * claim.h - which run a start of sigma-train continues, and claiming its
 * checkpoint directories for that run (docs/checkpoint-format.md,
 * "Runs"). A directory holds one run's checkpoints; DIR/run names it
 * (run.h).
 */
#ifndef SIGMA_CLAIM_H
#define SIGMA_CLAIM_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include "run.h"

/* how this instance was started */
enum claim_how {
	CLAIM_FRESH,   /* step 0, a new run: refused over another run */
	CLAIM_BESIDE,  /* --new-run: a new run; another moves to DIR/run-ID */
	CLAIM_RESUME,  /* --resume, or an attempt set by hand: DIR's run */
	CLAIM_RESTART, /* Slurm requeued this job: the run this job holds */
};

struct claim {
	char id[RUN_ID_MAX];	/* the run this instance continues or starts */
	int attempt;		/* this instance's attempt within the run */
	char aside[PATH_MAX];	/* where another run's files went, or "" */
	char note[PATH_MAX + 256]; /* what was decided, for the log, or "" */
};

/*
 * The shared directory dir (rank 0, before anything is read or written),
 * under an exclusive lock of dir against another start at the same time:
 * decide the run, write dir/run, and for CLAIM_BESIDE move the other
 * run's checkpoints into dir/run-ID. job: SLURM_JOB_ID or NULL; attempt:
 * the start's (lib/attempt.h). The instance's attempt is attempt, or
 * past the run's newest in dir when that is higher (sigma_attempt_past:
 * a run continued by a new job orders after all it wrote). Returns 0, or with err saying what to do:
 * -EEXIST (a fresh start where another run's checkpoints are),
 * -ESTALE (a restart of a job that no longer holds dir: another job took
 * it over), -EBADMSG (dir/run is damaged or not this user's), -errno.
 */
int claim_shared(const char *dir, enum claim_how how, const char *job,
		 int attempt, struct claim *c, char *err, size_t len);

/*
 * A node-local directory (tier 1) for run id: copies that another run
 * left there are removed (that run's record is its shared directory).
 * 1 when some were, 0 when none, or -errno with err.
 */
int claim_local(const char *dir, const char *id, const char *job, char *err,
		size_t len);

/* whether dir/run names run id (false when absent or unreadable) */
bool claim_holds(const char *dir, const char *id);

#endif /* SIGMA_CLAIM_H */
