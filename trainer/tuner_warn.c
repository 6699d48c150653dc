/*
 * tuner_warn.c - a slow rank reports its node to sigmad (tuner_warn.h).
 */
#include "config.h"

#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sigma.h"
#include "tuner_warn.h"

extern char **environ;

int tuner_warn_node(long step, const char *why)
{
	const char *node = getenv("SLURMD_NODENAME");
	const char *job = getenv("SLURM_JOB_ID");
	const char *ctl = getenv("SIGMACTL"), *conf = getenv("SIGMA_CONFIG");
	char *argv[8];
	posix_spawn_file_actions_t fa;
	int n = 0, rc, status;
	pid_t pid;

	/* on stderr: a rank other than 0 has no stdout (main.c) */
	if (!node || !*node || !job || !*job) {
		fprintf(stderr,
			"tuner: step %ld: %s; not in a Slurm job, nothing reported\n",
			step, why);
		return -ENOENT;
	}
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
	fprintf(stderr,
		"tuner: step %ld: %s; reporting %s as an early warning (sigmactl slow)\n",
		step, why, node);
	/* its answer goes where this rank's messages go */
	if ((rc = posix_spawn_file_actions_init(&fa))) {
		sigma_error("tuner: posix_spawn: %s", strerror(rc));
		return -EIO;
	}
	rc = posix_spawn_file_actions_adddup2(&fa, STDERR_FILENO,
					      STDOUT_FILENO);
	if (rc == 0)
		rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc) {
		sigma_error("tuner: cannot run %s: %s", argv[0], strerror(rc));
		return -EIO;
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -EIO;
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		sigma_error("tuner: %s slow %s refused or failed (status %d)",
			    argv[0], node, status);
		return -EIO;
	}
	return 0;
}
