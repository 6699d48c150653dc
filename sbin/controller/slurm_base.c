/*
 * slurm_base.c - what every libslurm call of the controller shares (see
 * slurm_api.h): the report of a failed call, and the expansion of Slurm's
 * host lists. Below slurm_poll.c and slurm_api.c, which both use it.
 */
#include <errno.h>
#include <stdlib.h>

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#include "sigma.h"
#include "slurm_api.h"
#include "slurm_compat.h"

int ctl_slurm_fail(const char *what, const char *obj)
{
	int e = errno;

	sigma_error("%s %s: %s (slurm errno %d)", what, obj, slurm_strerror(e),
		    e);
	return -EIO;
}

int ctl_slurm_expand(const char *list, int (*fn)(const char *name, void *arg),
		     void *arg)
{
	slurm_compat_hostlist_t *hl;
	char *h;
	int rc = 0;

	if (!list || !*list)
		return 0;
	hl = slurm_hostlist_create(list);
	if (!hl)
		return -EINVAL;
	while ((h = slurm_hostlist_shift(hl))) {
		if (!rc)
			rc = fn(h, arg);
		free(h);
	}
	slurm_hostlist_destroy(hl);
	return rc;
}
