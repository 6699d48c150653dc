/*
 * run.h - the identity of a training run, and the manifest that says
 * which run a checkpoint directory holds (docs/checkpoint-format.md,
 * "Runs").
 *
 * A run id is made once, when a run starts from step 0: the Slurm job
 * id (or "local") and 64 random bits, "1234-0123456789abcdef". It is
 * kept in every checkpoint the run writes (the run_id attribute) and in
 * DIR/run, one line:
 *
 *   sigma-run 1 <run id> <job id, or - without Slurm>
 *
 * naming the run the directory holds and the job that last started an
 * instance of it. A directory holds the checkpoints of one run only.
 */
#ifndef SIGMA_RUN_H
#define SIGMA_RUN_H

#include <stdbool.h>
#include <stddef.h>

#define RUN_FILE "run"
#define RUN_MAGIC "sigma-run"
#define RUN_VERSION 1
#define RUN_ID_MAX 48	/* with its terminating NUL */
#define RUN_JOB_MAX 24	/* a job id: digits, or "-" */
#define RUN_LINE_MAX 96
#define RUN_ASIDE "run-" /* DIR/run-ID: another run's files moved aside */

struct run_manifest {
	char id[RUN_ID_MAX];
	char job[RUN_JOB_MAX];
};

/*
 * A new run id for job (a Slurm job id; NULL or "": "local"), from the
 * kernel's random source. 0 or -errno.
 */
int run_new_id(char *id, size_t len, const char *job);

/* SLURM_JOB_ID when it names a job (run_job_valid), else NULL */
const char *run_slurm_job(void);

/* PREFIX-HEX16: PREFIX "local" or 1 to 20 digits, HEX16 lowercase */
bool run_id_valid(const char *id);

/* whether job names a Slurm job id (1 to 20 digits) */
bool run_job_valid(const char *job);

/*
 * Read dir/run (checked as a seal is: this user's or root's, written by
 * nobody else, one exact line). 0, -ENOENT (none), or -EBADMSG with err
 * naming the file and the problem.
 */
int run_read(const char *dir, struct run_manifest *rm, char *err, size_t len);

/* Write dir/run atomically (a temporary, fsync, rename). 0 or -errno. */
int run_write(const char *dir, const struct run_manifest *rm, char *err,
	      size_t len);

#endif /* SIGMA_RUN_H */
