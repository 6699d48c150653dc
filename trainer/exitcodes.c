/*
 * exitcodes.c - from a failure to sigma-train's exit code: one table, by
 * what was being done when it failed (exitcodes.h).
 */
#include "config.h"

#include <errno.h>
#include <stddef.h>

#include "exitcodes.h"

/* the errnos that mean something else than their phase's default */
static const struct {
	enum train_phase phase;
	int err;
	int code;
} exceptions[] = {
	{ PHASE_PREPARE, EBADMSG, TRAIN_EXIT_DATAERR },
	{ PHASE_PREPARE, ENOENT, TRAIN_EXIT_NOINPUT },
	{ PHASE_PREPARE, EACCES, TRAIN_EXIT_NOINPUT },
	{ PHASE_DATA, EBADMSG, TRAIN_EXIT_DATAERR },
	{ PHASE_CONFIG, ENOMEM, TRAIN_EXIT_OSERR },
	{ PHASE_BOOT, EINVAL, TRAIN_EXIT_USAGE },
	{ PHASE_BOOT, ENOTSUP, TRAIN_EXIT_USAGE },
	{ PHASE_LAYOUT, EIO, TRAIN_EXIT_PEER },
	{ PHASE_LAYOUT, ETIMEDOUT, TRAIN_EXIT_PEER },
	{ PHASE_LAYOUT, ENOMEM, TRAIN_EXIT_OSERR },
	{ PHASE_INIT_FROM, ENOENT, TRAIN_EXIT_NOINPUT },
	{ PHASE_CLAIM, EEXIST, TRAIN_EXIT_USAGE },
	{ PHASE_CLAIM, ESTALE, TRAIN_EXIT_USAGE },
	{ PHASE_CLAIM, EBADMSG, TRAIN_EXIT_DATAERR },
	{ PHASE_RESUME, EBADMSG, TRAIN_EXIT_DATAERR },
};

/* and every other errno, by phase */
static const int defaults[] = {
	[PHASE_PREPARE] = TRAIN_EXIT_CANTCREAT,
	[PHASE_DATA] = TRAIN_EXIT_NOINPUT,
	[PHASE_CONFIG] = TRAIN_EXIT_USAGE,
	[PHASE_BOOT] = TRAIN_EXIT_PEER,
	[PHASE_LAYOUT] = TRAIN_EXIT_USAGE,
	[PHASE_INIT_FROM] = TRAIN_EXIT_DATAERR,
	[PHASE_CLAIM] = TRAIN_EXIT_CANTCREAT,
	[PHASE_RESUME] = TRAIN_EXIT_PEER,
	[PHASE_RESUME_SHARED] = TRAIN_EXIT_DATAERR,
	[PHASE_COMM] = TRAIN_EXIT_PEER,
	[PHASE_WRITE] = TRAIN_EXIT_CANTCREAT,
	[PHASE_MEMORY] = TRAIN_EXIT_OSERR,
};

int exit_code_of(int rc, enum train_phase phase)
{
	if (rc == 0)
		return TRAIN_EXIT_OK;
	for (size_t i = 0; i < sizeof(exceptions) / sizeof(exceptions[0]); i++)
		if (exceptions[i].phase == phase && exceptions[i].err == -rc)
			return exceptions[i].code;
	if ((size_t)phase < sizeof(defaults) / sizeof(defaults[0]))
		return defaults[phase];
	return TRAIN_EXIT_OSERR;
}
