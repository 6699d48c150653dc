/*
 * watchdog.h - what the watched calls tell the watchdog (watchdog.c): the
 * front end of the collectives (comm.c) and the bootstrap's fence
 * (boot.c) mark the start and end of each call, so that a call that never
 * returns ends the process. comm.h includes this header: starting and
 * stopping the watchdog thread, and the exit status it ends with, are
 * part of the collectives' contract.
 */
#ifndef SIGMA_COMM_WATCHDOG_H
#define SIGMA_COMM_WATCHDOG_H

#include <stdint.h>

/* Exit status of a process whose communication failed: a peer died or a
 * collective timed out. Documented in docs/interfaces.md; requeue. */
#define COMM_EXIT_PEER 76

#define COMM_TIMEOUT_MAX 86400.0 /* seconds */

/* monotonic nanoseconds */
uint64_t comm_now_ns(void);

/* A call on comm name starts / ends (what: a static string). */
void comm_watch_enter(const char *what, const char *name);
void comm_watch_leave(void);

/*
 * Start the process's watchdog thread: when one collective (or boot_fence)
 * has been running for more than timeout_s seconds, it prints what was
 * stuck and ends the process with _exit(COMM_EXIT_PEER). timeout_s <= 0
 * starts nothing. Returns 0 or -errno. Calling it again changes the
 * timeout.
 */
int comm_watchdog_start(double timeout_s);
void comm_watchdog_stop(void);

/*
 * fn(COMM_EXIT_PEER, arg) runs on the watchdog's thread just before it
 * ends the process, so that the process can say how it left (the job
 * protocol's exit record, jobrec.h). It must not block or take a lock
 * the stuck call may hold. NULL: none.
 */
void comm_watchdog_on_exit(void (*fn)(int code, void *arg), void *arg);
/*
 * A communicator broke (a peer lost, a call timed out): the process will
 * leave with COMM_EXIT_PEER. Runs the comm_watchdog_on_exit function now,
 * on the caller's thread, once per process: the teardown that would say
 * so may block on the lost peer, or srun (--kill-on-bad-exit) may kill the
 * process first, and the launcher would then find two ranks without an
 * exit record and no node to blame.
 */
void comm_watchdog_broken(void);

/*
 * The process was asked to stop (SIGTERM, SIGUSR1; async-signal-safe):
 * from now on a call that has run longer than COMM_HURRY_MIN_S, and four
 * times the longest call so far, ends the process as the timeout does. A
 * step cancelled because a peer died (srun --kill-on-bad-exit) then ends
 * at once, not after Slurm's KillWait, while a healthy step still gets to
 * its checkpoint.
 */
void comm_watchdog_hurry(void);
#define COMM_HURRY_MIN_S 2.0

#endif /* SIGMA_COMM_WATCHDOG_H */
