/*
 * child.c - what every child that root code forks needs: a clean start
 * (no inherited descriptors, signal mask or handlers) and, for work that
 * may touch a user's file system, a deadline after which it is killed.
 *
 * The callers live in threaded processes (slurmd, slurmstepd): between
 * fork and exit or exec the child makes only system calls and formats
 * plain strings.
 */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sigma.h"

/* close_range(2) is in glibc 2.34 and later; the system call is older */
static int child_close_from(unsigned int first)
{
#ifdef SYS_close_range
	if (syscall(SYS_close_range, first, ~0U, 0) == 0)
		return 0;
#endif
	for (long fd = first; fd < 65536; fd++)
		close((int)fd);
	return 0;
}

int sigma_child_reset(int keep_fd)
{
	sigset_t none;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	for (int sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			signal(sig, SIG_DFL);
	if (keep_fd >= 0 && keep_fd != 3) {
		if (dup2(keep_fd, 3) < 0)
			return -errno;
	}
	if (keep_fd >= 0)
		fcntl(3, F_SETFD, 0);
	return child_close_from(keep_fd >= 0 ? 4 : 3);
}

/* what the child sends back: its result, then its message */
struct child_reply {
	int rc;
	char err[1024];
};

static void child_run(int fd, sigma_child_fn fn, void *arg)
{
	struct child_reply r;
	const char *p = (const char *)&r;
	size_t left;

	memset(&r, 0, sizeof(r));
	if (sigma_child_reset(fd) < 0)
		_exit(127);
	r.rc = fn(arg, r.err, sizeof(r.err));
	for (left = sizeof(r); left;) {
		ssize_t n = write(3, p, left);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			_exit(126);
		p += n;
		left -= (size_t)n;
	}
	_exit(0);
}

/* reap pid for at most ms milliseconds; true when it was reaped */
static bool child_reap(pid_t pid, long ms, int *status)
{
	uint64_t end = sigma_now_ms() + (uint64_t)ms;
	struct timespec tick = {0, 5 * 1000 * 1000};

	for (;;) {
		pid_t w = waitpid(pid, status, WNOHANG);

		if (w == pid)
			return true;
		if (w < 0 && errno != EINTR)
			return false;
		if (sigma_now_ms() >= end)
			return false;
		nanosleep(&tick, NULL);
	}
}

int sigma_child_call(sigma_child_fn fn, void *arg, long timeout_ms, char *err,
		     size_t errlen)
{
	struct child_reply r;
	size_t got = 0;
	bool timed_out = false;
	uint64_t deadline;
	int pfd[2], status = 0;
	pid_t pid;

	if (pipe2(pfd, O_CLOEXEC) < 0)
		return sigma_set_err(err, errlen, errno, "pipe: %s",
				     strerror(errno));
	pid = fork();
	if (pid < 0) {
		int e = errno;

		close(pfd[0]);
		close(pfd[1]);
		return sigma_set_err(err, errlen, e, "fork: %s", strerror(e));
	}
	if (pid == 0) {
		close(pfd[0]);
		child_run(pfd[1], fn, arg);
	}
	close(pfd[1]);
	deadline = sigma_now_ms() + (uint64_t)timeout_ms;
	while (got < sizeof(r)) {
		uint64_t now = sigma_now_ms();
		struct pollfd p = {.fd = pfd[0], .events = POLLIN};
		ssize_t n;
		int pr;

		if (now >= deadline) {
			timed_out = true;
			break;
		}
		pr = poll(&p, 1, (int)(deadline - now));
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr <= 0) {
			timed_out = pr == 0;
			break;
		}
		n = read(pfd[0], (char *)&r + got, sizeof(r) - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(pfd[0]);
	if (timed_out) {
		/*
		 * No answer in time (a hung NFS or FUSE mount, say). A process
		 * stuck in the kernel may outlive SIGKILL for a while: it is
		 * not waited for beyond a second.
		 */
		kill(pid, SIGKILL);
		child_reap(pid, 1000, &status);
		return sigma_set_err(err, errlen, ETIMEDOUT,
				     "no answer within %ld ms", timeout_ms);
	}
	if (got < sizeof(r)) {
		if (!child_reap(pid, 1000, &status))
			kill(pid, SIGKILL);
		return sigma_set_err(err, errlen, ECHILD,
				     "the child ended without an answer (%s %d)",
				     WIFSIGNALED(status) ? "signal" : "exit",
				     WIFSIGNALED(status) ? WTERMSIG(status)
							 : WEXITSTATUS(status));
	}
	child_reap(pid, 1000, &status);
	r.err[sizeof(r.err) - 1] = '\0';
	if (r.rc < 0 && err && errlen)
		sigma_strlcpy(err, r.err, errlen);
	return r.rc < 0 ? r.rc : 0;
}
