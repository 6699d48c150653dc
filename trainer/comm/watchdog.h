/*
 * watchdog.h - what the watched calls tell the watchdog (watchdog.c): the
 * front end of the collectives (comm.c) and the bootstrap's fence
 * (boot.c) mark the start and end of each call, so that a call that never
 * returns ends the process. Starting and stopping the watchdog thread is
 * public, in comm.h. Not installed, not for the trainer.
 */
#ifndef SIGMA_COMM_WATCHDOG_H
#define SIGMA_COMM_WATCHDOG_H

#include <stdint.h>

/* monotonic nanoseconds */
uint64_t comm_now_ns(void);

/* A call on comm name starts / ends (what: a static string). */
void comm_watch_enter(const char *what, const char *name);
void comm_watch_leave(void);

#endif /* SIGMA_COMM_WATCHDOG_H */
