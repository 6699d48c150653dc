/*
 * probe_run.c - run sigma-probe from the job prolog and epilog: fork and
 * execve (no shell), its own process group, stdin from /dev/null, stdout
 * and stderr into a pipe, killed after a timeout.
 *
 * Only async-signal-safe calls happen in the child: slurmd is threaded.
 */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sigma.h"
#include "sigma_spank.h"

#define PROBE_OUT_MAX 8192

static void probe_child(int out_fd, char *const argv[], char *const envp[])
{
	int null_fd;

	setpgid(0, 0);
	null_fd = open("/dev/null", O_RDONLY);
	if (null_fd < 0 || dup2(null_fd, STDIN_FILENO) < 0 ||
	    dup2(out_fd, STDOUT_FILENO) < 0 || dup2(out_fd, STDERR_FILENO) < 0)
		_exit(127);
	/*
	 * slurmd's and the plugin's descriptors must not leak into the probe,
	 * nor a signal mask or handler of slurmstepd
	 */
	if (sigma_child_reset(-1) < 0)
		_exit(127);
	execve(argv[0], argv, envp);
	_exit(127);
}

/*
 * The probe's summary into line: the first line that starts with "sigma: "
 * (messages on stderr may come before it), else the first non-empty line.
 */
static void probe_first_line(const char *out, size_t len, char *line,
			     size_t size)
{
	size_t i = 0, start = len, n = 0;

	for (size_t pos = 0; pos < len;) {
		const char *nl = memchr(out + pos, '\n', len - pos);
		size_t end = nl ? (size_t)(nl - out) : len;

		if (end - pos >= 7 && !memcmp(out + pos, "sigma: ", 7)) {
			start = pos;
			break;
		}
		if (start == len && end > pos)
			start =
			    pos; /* the first line, unless a summary follows */
		pos = end + 1;
	}
	for (i = start; i < len && out[i] != '\n' && n + 1 < size; i++) {
		char c = out[i];

		line[n++] = (c == '\t' || (unsigned char)c >= 0x20) ? c : '?';
	}
	while (n && (line[n - 1] == '\r' || line[n - 1] == ' '))
		n--;
	line[n] = '\0';
}

int sigma_probe_run(char *const argv[], char *const envp[], long timeout_s,
		    struct sigma_probe_result *res)
{
	char out[PROBE_OUT_MAX];
	size_t used = 0;
	uint64_t deadline;
	int pfd[2], status = 0, rc = 0;
	pid_t pid;

	memset(res, 0, sizeof(*res));
	res->status = -1;
	if (!argv || !argv[0] || argv[0][0] != '/') {
		snprintf(res->line, sizeof(res->line),
			 "probe path must be absolute");
		return -EINVAL;
	}
	if (pipe2(pfd, O_CLOEXEC) < 0) {
		rc = -errno;
		snprintf(res->line, sizeof(res->line), "pipe: %s",
			 strerror(errno));
		return rc;
	}
	pid = fork();
	if (pid < 0) {
		rc = -errno;
		snprintf(res->line, sizeof(res->line), "fork: %s",
			 strerror(errno));
		close(pfd[0]);
		close(pfd[1]);
		return rc;
	}
	if (pid == 0) {
		close(pfd[0]);
		probe_child(pfd[1], argv, envp);
	}
	/* both sides set the group, so a kill cannot race the child's setpgid
	 */
	setpgid(pid, pid);
	close(pfd[1]);
	deadline = sigma_now_ms() + (uint64_t)timeout_s * 1000;
	for (;;) {
		uint64_t now = sigma_now_ms();
		struct pollfd p = {.fd = pfd[0], .events = POLLIN};
		char sink[512];
		ssize_t n;
		int pr;

		if (now >= deadline) {
			res->timed_out = true;
			break;
		}
		pr = poll(&p, 1, (int)(deadline - now));
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr < 0) {
			rc = -errno;
			break;
		}
		if (pr == 0)
			continue;
		if (used < sizeof(out))
			n = read(pfd[0], out + used, sizeof(out) - used);
		else
			n = read(pfd[0], sink, sizeof(sink));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break; /* EOF: the probe closed its output */
		if (used < sizeof(out))
			used += (size_t)n;
	}
	close(pfd[0]);
	/* output closed: the probe still gets only what is left of its time */
	while (!res->timed_out && rc == 0) {
		struct timespec tick = {0, 10 * 1000 * 1000};
		pid_t w = waitpid(pid, &status, WNOHANG);

		if (w == pid)
			goto out_reaped;
		if (w < 0 && errno != EINTR) {
			rc = -errno;
			break;
		}
		if (sigma_now_ms() >= deadline)
			res->timed_out = true;
		else
			nanosleep(&tick, NULL);
	}
	kill(-pid, SIGKILL);
	kill(pid, SIGKILL);
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			rc = rc ? rc : -errno;
			break;
		}
	}
out_reaped:
	probe_first_line(out, used, res->line, sizeof(res->line));
	if (res->timed_out) {
		snprintf(res->line, sizeof(res->line), "timed out after %ld s",
			 timeout_s);
		return -ETIMEDOUT;
	}
	if (rc < 0)
		return rc;
	if (WIFSIGNALED(status)) {
		snprintf(res->line, sizeof(res->line), "killed by signal %d",
			 WTERMSIG(status));
		return -EINTR;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 127 && !used) {
		snprintf(res->line, sizeof(res->line), "cannot execute %s",
			 argv[0]);
		return -ENOEXEC;
	}
	res->status = WEXITSTATUS(status);
	return 0;
}
