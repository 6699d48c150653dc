/*
 * runtime.c - libsigma-runtime (sigma_runtime.h): the job protocol for a
 * trainer that is not sigma-train, over the records sigma-train keeps
 * (jobrec.h). The public exit codes are contract.h's, checked here.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sigma.h"
#include "contract.h"
#include "jobrec.h"
#include "sigma_runtime.h"

_Static_assert(SIGMA_RT_EXIT_OK == TRAIN_EXIT_OK, "contract.h");
_Static_assert(SIGMA_RT_EXIT_FAILURE == TRAIN_EXIT_FAILURE, "contract.h");
_Static_assert(SIGMA_RT_EXIT_USAGE == TRAIN_EXIT_USAGE, "contract.h");
_Static_assert(SIGMA_RT_EXIT_DIVERGED == TRAIN_EXIT_DIVERGED, "contract.h");
_Static_assert(SIGMA_RT_EXIT_CANTCREAT == TRAIN_EXIT_CANTCREAT, "contract.h");
_Static_assert(SIGMA_RT_EXIT_REQUEUE == TRAIN_EXIT_REQUEUE, "contract.h");
_Static_assert(SIGMA_RT_EXIT_PEER == TRAIN_EXIT_PEER, "contract.h");
_Static_assert(SIGMA_RT_EXIT_HARDWARE == TRAIN_EXIT_HARDWARE, "contract.h");

struct sigma_rt_job {
	struct sigma_jobrec rec;
};

static const struct {
	const char *name;
	int code;
} exit_names[] = {
	{ "ok", SIGMA_RT_EXIT_OK },
	{ "failure", SIGMA_RT_EXIT_FAILURE },
	{ "usage", SIGMA_RT_EXIT_USAGE },
	{ "diverged", SIGMA_RT_EXIT_DIVERGED },
	{ "cantcreat", SIGMA_RT_EXIT_CANTCREAT },
	{ "requeue", SIGMA_RT_EXIT_REQUEUE },
	{ "peer", SIGMA_RT_EXIT_PEER },
	{ "hardware", SIGMA_RT_EXIT_HARDWARE },
};

int sigma_rt_exit_code(const char *name)
{
	for (size_t i = 0; name && i < sizeof(exit_names) / sizeof(*exit_names);
	     i++)
		if (!strcmp(name, exit_names[i].name))
			return exit_names[i].code;
	return -1;
}

int sigma_rt_job_open(struct sigma_rt_job **job, int rank, char *err,
		      size_t len)
{
	struct sigma_rt_job *j;
	int rc;

	*job = NULL;
	if (rank < 0)
		return sigma_set_err(err, len, EINVAL, "rank %d: want 0 or more",
				     rank);
	j = calloc(1, sizeof(*j));
	if (!j)
		return sigma_set_err(err, len, ENOMEM, "out of memory");
	rc = sigma_jobrec_open(&j->rec, rank, err, len);
	if (rc) {
		free(j);
		return rc;
	}
	*job = j;
	return 0;
}

int sigma_rt_job_recording(const struct sigma_rt_job *job)
{
	return job && job->rec.on;
}

void sigma_rt_job_step(struct sigma_rt_job *job, long step)
{
	if (job)
		sigma_jobrec_step(&job->rec, step);
}

void sigma_rt_job_exit(struct sigma_rt_job *job, long step, int code)
{
	if (job)
		sigma_jobrec_exit(&job->rec, step, code);
}

void sigma_rt_job_close(struct sigma_rt_job *job)
{
	free(job);
}
