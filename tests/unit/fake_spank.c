/*
 * fake_spank.c - see fake_spank.h.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sigma.h"
#include "sigma_spank.h"
#include "fake_spank.h"

struct fake_spank fake;

void fake_reset(void)
{
	memset(&fake, 0, sizeof(fake));
	fake.context = S_CTX_REMOTE;
	fake.job_id = 42;
	fake.uid = getuid();
	fake.gid = getgid();
	fake.job_name = "train";
}

const char *fake_task_env(const char *var)
{
	size_t n = strlen(var);

	for (int i = 0; i < fake.ntask_env; i++)
		if (!strncmp(fake.task_env[i], var, n) &&
		    fake.task_env[i][n] == '=')
			return fake.task_env[i] + n + 1;
	return NULL;
}

bool fake_logged(const char *text)
{
	for (int i = 0; i < fake.nlog; i++)
		if (strstr(fake.log[i], text))
			return true;
	return false;
}

static void fake_vlog(const char *level, const char *fmt, va_list ap)
{
	char msg[512];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (fake.nlog < 64)
		snprintf(fake.log[fake.nlog++], sizeof(fake.log[0]), "%s: %s",
			 level, msg);
}

#define FAKE_LOG(fn, level)                                                    \
	void fn(const char *fmt, ...)                                          \
	{                                                                      \
		va_list ap;                                                    \
		va_start(ap, fmt);                                             \
		fake_vlog(level, fmt, ap);                                     \
		va_end(ap);                                                    \
	}
FAKE_LOG(slurm_info, "info")
FAKE_LOG(slurm_error, "error")
FAKE_LOG(slurm_verbose, "verbose")
FAKE_LOG(slurm_debug, "debug")

spank_context_t spank_context(void)
{
	return fake.context;
}

const char *spank_strerror(spank_err_t err)
{
	return err == ESPANK_SUCCESS ? "success" : "spank error";
}

spank_err_t spank_option_register(spank_t sp, struct spank_option *opt)
{
	if (!opt || !opt->name || !opt->usage || !opt->cb)
		return ESPANK_BAD_ARG;
	fake.registered++;
	return ESPANK_SUCCESS;
}

spank_err_t spank_option_getopt(spank_t sp, struct spank_option *opt,
				char **optarg)
{
	for (int i = 0; i < fake.nopts; i++)
		if (!strcmp(fake.opt_names[i], opt->name)) {
			*optarg = (char *)fake.opt_values[i];
			return ESPANK_SUCCESS;
		}
	return ESPANK_ERROR;
}

spank_err_t spank_get_item(spank_t sp, spank_item_t item, ...)
{
	va_list ap;
	spank_err_t rc = ESPANK_SUCCESS;

	va_start(ap, item);
	switch (item) {
	case S_JOB_ID:
		*va_arg(ap, uint32_t *) = fake.job_id;
		break;
	case S_JOB_UID:
		*va_arg(ap, uid_t *) = fake.uid;
		break;
	case S_JOB_GID:
		*va_arg(ap, gid_t *) = fake.gid;
		break;
	case S_SLURM_RESTART_COUNT:
		*va_arg(ap, uint32_t *) = fake.restart_count;
		break;
	default:
		rc = ESPANK_BAD_ARG;
	}
	va_end(ap);
	return rc;
}

spank_err_t spank_getenv(spank_t sp, const char *var, char *buf, int len)
{
	size_t n = strlen(var);

	for (int i = 0; i < fake.njob_env; i++)
		if (!strncmp(fake.job_env[i], var, n) &&
		    fake.job_env[i][n] == '=') {
			if (sigma_strlcpy(buf, fake.job_env[i] + n + 1,
					  (size_t)len) >= (size_t)len)
				return ESPANK_NOSPACE;
			return ESPANK_SUCCESS;
		}
	return ESPANK_ENV_NOEXIST;
}

spank_err_t spank_setenv(spank_t sp, const char *var, const char *val,
			 int overwrite)
{
	if (fake.ntask_env >= FAKE_MAX)
		return ESPANK_NOSPACE;
	snprintf(fake.task_env[fake.ntask_env++], sizeof(fake.task_env[0]),
		 "%s=%s", var, val);
	return ESPANK_SUCCESS;
}

/* ---- slurm_api.c's functions ----------------------------------------------
 */

int sigma_slurm_job_info(uint32_t job_id, char **admin_comment, char **name,
			 const char **unprotected)
{
	if (job_id != fake.job_id)
		return -ENOENT;
	if (unprotected)
		*unprotected = fake.no_requeue ? SIGMA_UNPROTECTED_NO_REQUEUE
					       : NULL;
	*admin_comment =
	    fake.admin_comment[0] ? strdup(fake.admin_comment) : NULL;
	*name = fake.job_name ? strdup(fake.job_name) : NULL;
	return 0;
}

int sigma_slurm_set_admin_comment(uint32_t job_id, const char *text)
{
	fake.comment_writes++;
	sigma_strlcpy(fake.admin_comment, text, sizeof(fake.admin_comment));
	return 0;
}

int sigma_slurm_node_now(const char *node, bool *drained, bool *down,
			 char *reason, size_t size)
{
	(void)node;
	*drained = fake.node_drained;
	*down = false;
	sigma_strlcpy(reason, fake.node_reason, size);
	return 0;
}

int sigma_slurm_drain(const char *node, const char *reason)
{
	snprintf(fake.drained, sizeof(fake.drained), "%s: %s", node, reason);
	return 0;
}

bool sigma_slurm_is_first_node(const char *list, const char *node)
{
	/* "n[1-4]"-style lists are Slurm's business; the tests use "a,b" */
	size_t n;

	if (!list || !node)
		return true;
	n = strcspn(list, ",");
	return strlen(node) == n && !strncmp(list, node, n);
}
