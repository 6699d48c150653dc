/*
 * fake_spank.h - a stand-in for the Slurm side of SPANK, for the plugin's
 * hook tests: the context, the options a job passed, its items and
 * environment, and what the plugin did (log lines, task variables,
 * AdminComment, drains). Replaces slurm_api.c as well.
 */
#ifndef FAKE_SPANK_H
#define FAKE_SPANK_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <slurm/spank.h>

#define FAKE_MAX 32

struct fake_spank {
	spank_context_t context;
	/* the job */
	const char *opt_names[FAKE_MAX]; /* options the job passed */
	const char *opt_values[FAKE_MAX];
	int nopts;
	const char *job_env[FAKE_MAX]; /* "VAR=value" */
	int njob_env;
	uint32_t job_id, restart_count;
	uid_t uid;
	gid_t gid;
	char admin_comment[512];
	const char *job_name;
	bool no_requeue; /* submitted with --no-requeue */
	/* what the plugin did */
	int registered;
	char task_env[FAKE_MAX][512];
	int ntask_env;
	char log[64][600];
	int nlog;
	char drained[512];
	/* the node's state before: drained, and its reason */
	bool node_drained;
	char node_reason[256];
	int comment_writes;
};

extern struct fake_spank fake;

void fake_reset(void);
/* the task variable VAR as the plugin set it, or NULL */
const char *fake_task_env(const char *var);
/* true when a log line contains text */
bool fake_logged(const char *text);

#endif /* FAKE_SPANK_H */
