/*
 * proc.c - a child process started and collected without blocking (see
 * proc.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proc.h"
#include "sigma.h"

int ctl_proc_start(struct ctl_proc *p, char *const argv[], char *const env[],
		   long timeout_s)
{
	int pfd[2];
	pid_t pid;

	memset(p, 0, sizeof(*p));
	p->fd = -1;
	if (!argv[0] || argv[0][0] != '/')
		return -EINVAL;
	if (pipe2(pfd, O_CLOEXEC | O_NONBLOCK) < 0)
		return -errno;
	pid = fork();
	if (pid < 0) {
		int e = errno;

		close(pfd[0]);
		close(pfd[1]);
		return -e;
	}
	if (pid == 0) {
		int null_fd = open("/dev/null", O_RDWR);

		setpgid(0, 0);
		if (null_fd < 0 || dup2(null_fd, 0) < 0 ||
		    dup2(pfd[1], 1) < 0 || sigma_child_reset(-1) < 0)
			_exit(127);
		fcntl(1, F_SETFL, 0); /* the child writes blocking */
		for (size_t i = 0; env && env[i]; i++)
			putenv(env[i]);
		execv(argv[0], argv);
		_exit(127);
	}
	/* both sides set the group, so a kill cannot race the child */
	setpgid(pid, pid);
	close(pfd[1]);
	p->pid = pid;
	p->fd = pfd[0];
	p->deadline_ms = sigma_now_ms() + (uint64_t)timeout_s * 1000;
	return 0;
}

/* read what the pipe holds now; keep the first CTL_PROC_OUT_MAX-1 bytes */
static void proc_drain(struct ctl_proc *p)
{
	char sink[512];

	for (;;) {
		ssize_t n;

		if (p->got + 1 < sizeof(p->out))
			n = read(p->fd, p->out + p->got,
				 sizeof(p->out) - 1 - p->got);
		else
			n = read(p->fd, sink, sizeof(sink));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (p->got + 1 < sizeof(p->out))
			p->got += (size_t)n;
	}
	p->out[p->got] = '\0';
}

static void proc_close(struct ctl_proc *p)
{
	if (p->fd >= 0)
		close(p->fd);
	p->fd = -1;
	p->pid = 0;
}

bool ctl_proc_poll(struct ctl_proc *p, int *rc)
{
	int status = 0;
	pid_t w;

	if (!p->pid) {
		*rc = 3;
		return true;
	}
	proc_drain(p);
	w = waitpid(p->pid, &status, WNOHANG);
	if (w == 0 && sigma_now_ms() < p->deadline_ms)
		return false;
	if (w == 0) {
		kill(-p->pid, SIGKILL);
		waitpid(p->pid, &status, 0);
		sigma_warn("probe %ld killed at its deadline", (long)p->pid);
		proc_drain(p);
		proc_close(p);
		*rc = 3;
		return true;
	}
	/* the probe has ended: nothing it left behind may linger */
	kill(-p->pid, SIGKILL);
	proc_drain(p);
	proc_close(p);
	if (w < 0 || !WIFEXITED(status) || WEXITSTATUS(status) == 127)
		*rc = 3;
	else
		*rc = WEXITSTATUS(status);
	return true;
}

void ctl_proc_kill(struct ctl_proc *p)
{
	if (!p->pid)
		return;
	kill(-p->pid, SIGKILL);
	waitpid(p->pid, NULL, 0);
	proc_close(p);
}
