/*
 * client.c - srun, sbatch and salloc (local and allocator contexts). The
 * --sigma-* options are registered by dispatch.c; their callbacks refuse a
 * bad value here, so a bad job is never queued. Nothing is printed to the
 * user's terminal except such a refusal.
 */
#include "config.h"

#include <slurm/spank.h>

#include "sigma.h"
#include "sigma_spank.h"
#include "sigma_spank_slurm.h"

int sigma_client_init(spank_t sp, int ac, char **av)
{
	slurm_verbose("sigma: options registered (default probe %s)",
		      sigma_level_names[sigma_conf.default_probe]);
	return 0;
}
