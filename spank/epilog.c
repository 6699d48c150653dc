/*
 * epilog.c - slurm_spank_job_epilog, as root on every node when the job
 * ends: probe again (plugstack.conf epilog_probe, by default the job's
 * level). A node that got worse is drained by the probe with a sigma:
 * reason; a failure also fails the epilog, which Slurm records (the job
 * itself stays COMPLETED).
 */
#include "config.h"

#include <slurm/spank.h>

#include "sigma.h"
#include "sigma_spank.h"
#include "sigma_spank_slurm.h"

int sigma_epilog(spank_t sp)
{
	uint32_t job_id = 0;
	int level, rc;

	spank_get_item(sp, S_JOB_ID, &job_id);
	if (sigma_load_options(sp) < 0)
		sigma_job_opts_init(&sigma_opts);
	level = sigma_job_epilog_level(&sigma_opts, &sigma_conf);
	if (level == SIGMA_PROBE_OFF)
		return 0;
	rc = sigma_job_probe(sp, level, "epilog", job_id);
	if ((rc < 0 || rc == SIGMA_PROBE_EXIT_FAIL ||
	     rc == SIGMA_PROBE_EXIT_ERROR) &&
	    sigma_conf.drain)
		return -1;
	return 0;
}
