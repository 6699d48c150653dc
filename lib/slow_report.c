/*
 * slow_report.c - a slow rank reports its node to sigmad (slow_report.h).
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sigma.h"
#include "slow_report.h"

extern char **environ;

/* the report in flight (0: none), its node and who asked */
static pid_t pending;
static char pending_node[256], pending_who[32];

/* the report's end: said when it failed */
static void report_status(int status)
{
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return;
	sigma_error("%s: sigmactl slow %s refused or failed (status %d)",
		    pending_who, pending_node, status);
}

void slow_report_reap(void)
{
	int status;
	pid_t r;

	if (pending <= 0)
		return;
	while ((r = waitpid(pending, &status, WNOHANG)) < 0 && errno == EINTR)
		;
	if (r == 0)
		return; /* still running: asked again later */
	if (r == pending)
		report_status(status);
	pending = 0;
}

/* spawn argv with its output on this rank's stderr and SIGUSR1 blocked:
 * sigmad's warning path signals the whole job, this child included, and
 * the report must not die of the move it asked for */
static int spawn(char **argv, pid_t *pid)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t mask;
	int rc;

	if ((rc = posix_spawn_file_actions_init(&fa)))
		return rc;
	if ((rc = posix_spawnattr_init(&at))) {
		posix_spawn_file_actions_destroy(&fa);
		return rc;
	}
	sigemptyset(&mask);
	sigaddset(&mask, SIGUSR1);
	rc = posix_spawn_file_actions_adddup2(&fa, STDERR_FILENO,
					      STDOUT_FILENO) ?:
	     posix_spawnattr_setsigmask(&at, &mask) ?:
	     posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK) ?:
	     posix_spawnp(pid, argv[0], &fa, &at, argv, environ);
	posix_spawnattr_destroy(&at);
	posix_spawn_file_actions_destroy(&fa);
	return rc;
}

int slow_report_node(const char *who, long step, const char *why)
{
	const char *node = getenv("SLURMD_NODENAME");
	const char *job = getenv("SLURM_JOB_ID");
	const char *ctl = getenv("SIGMACTL"), *conf = getenv("SIGMA_CONF");
	char *argv[8];
	int n = 0, rc;
	pid_t pid;

	/* on stderr: a rank other than 0 has no stdout (main.c) */
	if (!node || !*node || !job || !*job) {
		fprintf(
		    stderr,
		    "%s: step %ld: %s; not in a Slurm job, nothing reported\n",
		    who, step, why);
		return -ENOENT;
	}
	if (!conf || !*conf)
		conf = getenv("SIGMA_CONFIG"); /* the old name */
	slow_report_reap();
	if (pending > 0)
		return -EBUSY;
	argv[n++] = (char *)(ctl && *ctl ? ctl : "sigmactl");
	if (conf && *conf) {
		argv[n++] = (char *)"--config";
		argv[n++] = (char *)conf;
	}
	argv[n++] = (char *)"slow";
	argv[n++] = (char *)node;
	argv[n++] = (char *)"--job";
	argv[n++] = (char *)job;
	argv[n] = NULL;
	fprintf(
	    stderr,
	    "%s: step %ld: %s; reporting %s as an early warning (sigmactl slow)\n",
	    who, step, why, node);
	fflush(stderr);
	rc = spawn(argv, &pid);
	if (rc) {
		sigma_error("%s: cannot run %s: %s", who, argv[0],
			    strerror(rc));
		return -EIO;
	}
	/* not waited for here: the other ranks would wait for this one in
	 * the next collective while sigmad answers */
	pending = pid;
	sigma_strlcpy(pending_node, node, sizeof(pending_node));
	sigma_strlcpy(pending_who, who, sizeof(pending_who));
	return 0;
}
