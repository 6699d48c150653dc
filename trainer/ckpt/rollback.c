/*
 * rollback.c - the guard's rollback carried out (rollback.h): the one
 * place where a guard decision reads a checkpoint.
 */
#include <errno.h>
#include <stdio.h>

#include "sigma.h"
#include "ckpt.h"
#include "guard_run.h"
#include "rollback.h"

long rollback_to_latest(struct guard_run *r, const char *dir, long step)
{
	struct ckpt_state st;
	char path[4096], err[1024];
	int rc;

	if (!dir || !*dir) {
		sigma_error(
		    "guard: step %ld: repeated trouble and no checkpoint directory to roll back to",
		    step);
		return -1;
	}
	rc = ckpt_load_latest(dir, r->m, &st, path, sizeof(path), err,
			      sizeof(err));
	if (rc) {
		sigma_error(
		    "guard: step %ld: repeated trouble and no checkpoint to roll back to: %s",
		    step, rc == -ENOENT ? "none written yet" : err);
		return -1;
	}
	guard_rolled_back(&r->g, st.step, step);
	printf(
	    "guard: step %ld: rolled back to %s (step %ld); data steps %ld-%ld skipped\n",
	    step, path, st.step, r->g.skip_lo, r->g.skip_hi);
	fflush(stdout);
	return st.step;
}
