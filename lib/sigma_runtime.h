/*
 * sigma_runtime.h - sigma's runtime for a training loop that is not
 * sigma-train: what a trainer does to be protected by sigma under Slurm
 * (docs/job-protocol.md). Installed with libsigma-runtime and its
 * pkg-config file (sigma-runtime.pc); the Python package sigmatorch is
 * built on it.
 *
 * Lifecycle of a job handle, one per rank:
 *
 *   sigma_rt_job_open    once the rank is known: the start record
 *   sigma_rt_job_step    after each step (its checkpoint, if any, taken)
 *   sigma_rt_job_exit    just before the process exits, with its code
 *   sigma_rt_job_close   frees the handle (no record)
 *
 * Ownership: the handle is the caller's from open to close. Functions
 * that return int return 0 or a negative errno, with err (when given)
 * naming the problem. Nothing here installs a signal handler or exits:
 * the caller owns its signals (SIGUSR1 and SIGTERM ask for a checkpoint
 * and the exit code SIGMA_RT_EXIT_REQUEUE) and its exit.
 *
 * Thread safety: one thread calls step; exit may be called from another
 * thread that is about to end the process (a watchdog).
 */
#ifndef SIGMA_RUNTIME_H
#define SIGMA_RUNTIME_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SIGMA_RT_VERSION 1

/*
 * The exit codes of the job protocol (docs/job-protocol.md): the values of
 * contract.h, which sigmad, Slurm's RequeueExit and sigma-launch act on.
 */
#define SIGMA_RT_EXIT_OK	  0  /* every step done */
#define SIGMA_RT_EXIT_FAILURE	  1  /* anything else */
#define SIGMA_RT_EXIT_USAGE	  64 /* bad flags or settings */
#define SIGMA_RT_EXIT_DIVERGED	  70 /* not finite, the guard gave up */
#define SIGMA_RT_EXIT_CANTCREAT	  73 /* a checkpoint could not be written */
#define SIGMA_RT_EXIT_REQUEUE	  75 /* stopped on request, checkpointed */
#define SIGMA_RT_EXIT_PEER	  76 /* a peer rank failed */
#define SIGMA_RT_EXIT_HARDWARE	  79 /* a recomputed step differs */

/* the value of an exit code by its name ("ok", "requeue", "peer", ...,
 * the names above in lower case), or -1 */
int sigma_rt_exit_code(const char *name);

struct sigma_rt_job;

/*
 * A handle for rank, with its start record in $SIGMA_JOB_RECORDS (set by
 * sigma-launch; unset: a handle that records nothing). -ENOMEM, or the
 * record directory's problem (-EINVAL, -ENOTDIR, -EPERM, ...) with *job
 * NULL.
 */
int sigma_rt_job_open(struct sigma_rt_job **job, int rank, char *err,
		      size_t len);

/* whether the handle writes records (SIGMA_JOB_RECORDS was set) */
int sigma_rt_job_recording(const struct sigma_rt_job *job);

/* step done; written at most every 200 ms */
void sigma_rt_job_step(struct sigma_rt_job *job, long step);

/* the process leaves with code after step; written at once */
void sigma_rt_job_exit(struct sigma_rt_job *job, long step, int code);

void sigma_rt_job_close(struct sigma_rt_job *job);

#ifdef __cplusplus
}
#endif

#endif /* SIGMA_RUNTIME_H */
