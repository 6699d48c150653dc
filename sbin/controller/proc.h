/*
 * proc.h - a child process that sigmad starts and collects without ever
 * waiting for it: the repair probe. The child runs in its own process
 * group with a clean start (no inherited descriptors, signal mask or
 * handlers), its stdout goes into a pipe, and the whole group is killed
 * at its deadline.
 */
#ifndef SIGMAD_PROC_H
#define SIGMAD_PROC_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define CTL_PROC_OUT_MAX 256

struct ctl_proc {
	pid_t pid; /* 0: nothing running */
	int fd;	   /* read end of its stdout */
	uint64_t deadline_ms;
	size_t got;
	char out[CTL_PROC_OUT_MAX]; /* its output, NUL-terminated */
};

/*
 * Start argv[0] (absolute, no shell) with the extra environment variables
 * env ("NAME=value", NULL-terminated; may be NULL). Returns 0 or -errno.
 */
int ctl_proc_start(struct ctl_proc *p, char *const argv[], char *const env[],
		   long timeout_s);
/*
 * Collect what is ready. Returns false while it runs; true once it has
 * ended, with *rc its exit code, or 3 when it was killed (its deadline, a
 * signal) or could not be executed. p is then free for the next start.
 */
bool ctl_proc_poll(struct ctl_proc *p, int *rc);
/* Kill the whole group and reap it (teardown). */
void ctl_proc_kill(struct ctl_proc *p);

#endif /* SIGMAD_PROC_H */
