/*
 * probe.c - run sigma-probe for the job prolog or epilog and act on its
 * exit code (contract.h: 0 healthy, 1 failing, 2 warning, 3 could not
 * run, 4 cannot judge, which never fails the job or drains). With
 * drain=yes the probe drains the node itself (sigma-probe --drain), so the
 * rules about whose drain it is live in one place; only when the probe did
 * not run at all does the plugin drain here.
 */
#include "config.h"

#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <slurm/spank.h>

#include "sigma.h"
#include "sigma_spank.h"
#include "sigma_spank_slurm.h"

#define PROBE_ARGV_MAX 16

/*
 * The GPUs Slurm gave the job (SLURM_JOB_GPUS, "0,2"; empty: none): the
 * probe checks those only, so another job's GPUs are left alone. False
 * when Slurm says nothing (no gres/gpu): then every GPU is the job's.
 */
static bool probe_job_gpus(char *out, size_t size)
{
	const char *s = getenv("SLURM_JOB_GPUS");

	if (!s || strspn(s, "0123456789,") != strlen(s) ||
	    sigma_strlcpy(out, s, size) >= size)
		return false; /* not Slurm's list: every GPU, as without one */
	if (!s[0])
		sigma_strlcpy(out, "none", size);
	return true;
}

/*
 * No verdict: drain node with reason as sigma's one drain decision says
 * (a failure: never over someone else's reason, nor over sigma's own
 * failure). A node whose state cannot be read is left to Slurm: the failed
 * prolog drains it itself.
 */
static void probe_drain_unjudged(const char *node, const char *reason)
{
	char cur[256], why[320];
	struct sigma_node_now now = {.reason = cur};
	int rc = sigma_slurm_node_now(node, &now.drained, &now.down, cur,
				      sizeof(cur));

	if (rc) {
		slurm_error("sigma: %s: cannot read its state (%s): not drained",
			    node, strerror(-rc));
		return;
	}
	if (sigma_drain_decide(&now, SIGMA_ASK_FAILURE, SIGMA_LEVEL_QUICK,
			       false, why, sizeof(why)) != SIGMA_DRAIN_SET) {
		slurm_info("sigma: %s: %s", node, why);
		return;
	}
	if (sigma_slurm_drain(node, reason))
		slurm_error("sigma: %s: Slurm refused the drain", node);
}

int sigma_job_probe(spank_t sp, int level, const char *when, uint32_t job_id)
{
	const char *node = getenv("SLURMD_NODENAME");
	const char *slurm_conf = getenv("SLURM_CONF");
	const char *lname = sigma_level_names[level];
	char *argv[PROBE_ARGV_MAX], *envp[4];
	char env_conf[PATH_MAX + 16], env_node[128], reason[600], gpus[256];
	struct sigma_probe_result res;
	int argc = 0, envc = 0, rc;

	argv[argc++] = sigma_conf.probe;
	if (node && node[0]) {
		argv[argc++] = "--node";
		argv[argc++] = (char *)node;
	}
	if (sigma_conf.config[0]) {
		argv[argc++] = "--config";
		argv[argc++] = sigma_conf.config;
	}
	if (sigma_conf.ckpt_root[0]) {
		argv[argc++] = "--ckpt-root";
		argv[argc++] = sigma_conf.ckpt_root;
	}
	if (sigma_conf.drain)
		argv[argc++] = "--drain";
	if (probe_job_gpus(gpus, sizeof(gpus))) {
		argv[argc++] = "--gpus";
		argv[argc++] = gpus;
	}
	if (!strcmp(when, "epilog"))
		argv[argc++] = "--after-job"; /* the job's own heat */
	argv[argc++] = (char *)lname;
	argv[argc] = NULL;

	envp[envc++] = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";
	if (slurm_conf && snprintf(env_conf, sizeof(env_conf), "SLURM_CONF=%s",
				   slurm_conf) < (int)sizeof(env_conf))
		envp[envc++] = env_conf;
	if (node && snprintf(env_node, sizeof(env_node), "SLURMD_NODENAME=%s",
			     node) < (int)sizeof(env_node))
		envp[envc++] = env_node;
	envp[envc] = NULL;

	rc = sigma_probe_run(argv, envp, sigma_conf.probe_timeout, &res);
	if (rc == 0 &&
	    (res.status < 0 || res.status > SIGMA_PROBE_EXIT_UNJUDGED)) {
		/* not one of the probe's codes (a loader error exits 127) */
		char line[sizeof(res.line)];

		sigma_strlcpy(line, res.line, sizeof(line));
		snprintf(res.line, sizeof(res.line), "exit %d: %.400s",
			 res.status, line);
		rc = -EPROTO;
	}
	if (rc < 0) {
		/* no verdict: the node's health is unknown, fail closed */
		char what[sizeof(res.line) + 16];

		snprintf(what, sizeof(what), "could not run: %s", res.line);
		(void)sigma_reason_format(reason, sizeof(reason), false, level,
					  what);
		slurm_error("sigma: job %u %s on %s: %s", job_id, when,
			    node ? node : "?", reason);
		if (sigma_conf.drain && node)
			probe_drain_unjudged(node, reason);
		return rc;
	}
	switch (res.status) {
	case SIGMA_PROBE_EXIT_OK:
		slurm_info("sigma: job %u %s on %s: %s", job_id, when,
			   node ? node : "?", res.line);
		break;
	case SIGMA_PROBE_EXIT_UNJUDGED:
		slurm_info("sigma: job %u %s on %s: cannot judge: %s", job_id,
			   when, node ? node : "?", res.line);
		break;
	case SIGMA_PROBE_EXIT_WARN:
		slurm_info("sigma: job %u %s on %s: early warning: %s", job_id,
			   when, node ? node : "?", res.line);
		break;
	default:
		slurm_error("sigma: job %u %s on %s: probe exit %d: %s", job_id,
			    when, node ? node : "?", res.status, res.line);
		break;
	}
	return res.status;
}

int sigma_job_user(spank_t sp, uid_t *uid, gid_t *gid, char *name, size_t size)
{
	const char *s;
	long v;

	name[0] = '\0';
	if (spank_get_item(sp, S_JOB_UID, uid) != ESPANK_SUCCESS) {
		s = getenv("SLURM_JOB_UID");
		if (!s || sigma_parse_long(s, 0, 0x7fffffffL, &v) < 0)
			return -ENOENT;
		*uid = (uid_t)v;
	}
	if (spank_get_item(sp, S_JOB_GID, gid) != ESPANK_SUCCESS) {
		s = getenv("SLURM_JOB_GID");
		if (!s || sigma_parse_long(s, 0, 0x7fffffffL, &v) < 0)
			return -ENOENT;
		*gid = (gid_t)v;
	}
	s = getenv("SLURM_JOB_USER");
	if (s && s[0]) {
		sigma_strlcpy(name, s, size);
	} else {
		struct passwd pw, *res = NULL;
		char buf[4096];

		if (!getpwuid_r(*uid, &pw, buf, sizeof(buf), &res) && res)
			sigma_strlcpy(name, pw.pw_name, size);
	}
	return 0;
}
