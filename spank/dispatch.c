/*
 * dispatch.c - the entry points Slurm calls, routed by SPANK context:
 *
 *   srun, sbatch, salloc     (local, allocator)  client.c
 *   job prolog and epilog    (job_script, root)  prolog.c, epilog.c
 *   slurmstepd task_init     (remote)            task.c
 *
 * Only slurm_spank_* and plugin_* symbols leave sigma.so (sigma.lds).
 */
#include "config.h"

#include <string.h>

#include <slurm/spank.h>

#include "sigma.h"
#include "sigma_spank.h"
#include "sigma_spank_slurm.h"

SPANK_PLUGIN(sigma, 1);

struct sigma_spank_conf sigma_conf;
struct sigma_job_opts sigma_opts;

static bool dispatch_is_client(void)
{
	spank_context_t c = spank_context();

	return c == S_CTX_LOCAL || c == S_CTX_ALLOCATOR;
}

/* lib/ logging goes to Slurm's log; never to a user's terminal */
static void dispatch_log_sink(int level, const char *msg, void *arg)
{
	if (level == SIGMA_LOG_ERROR)
		slurm_error("sigma: %s", msg);
	else if (dispatch_is_client() || level == SIGMA_LOG_DEBUG)
		slurm_verbose("sigma: %s", msg);
	else
		slurm_info("sigma: %s", msg);
}

/*
 * Parse the plugstack.conf arguments. Every hook calls this (it is cheap
 * and pure): Slurm does not call slurm_spank_init before the job prolog and
 * epilog.
 */
static int dispatch_setup(int ac, char **av)
{
	char err[512];

	sigma_log_set_sink(dispatch_log_sink, NULL);
	sigma_log_set_level(SIGMA_LOG_DEBUG);
	sigma_job_opts_init(&sigma_opts);
	if (sigma_spank_conf_parse(&sigma_conf, ac, av, err, sizeof(err)) < 0) {
		slurm_error("sigma: plugstack.conf: %s", err);
		return -1;
	}
	return 0;
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	if (dispatch_setup(ac, av) < 0)
		return -1;
	/*
	 * Register in every context: sbatch and salloc need the options
	 * before they parse their command line, slurmstepd to read them
	 * back with spank_option_getopt.
	 */
	if (sigma_register_options(sp) < 0)
		return -1;
	if (dispatch_is_client())
		return sigma_client_init(sp, ac, av);
	return 0;
}

/* srun, sbatch, salloc: every option is in; refuse what does not go together */
int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
	char err[512];

	(void)sp;
	(void)ac;
	(void)av;
	if (!dispatch_is_client())
		return 0;
	if (sigma_job_opts_check(&sigma_opts, err, sizeof(err)) < 0) {
		slurm_error("sigma: %s", err);
		return -1;
	}
	return 0;
}

int slurm_spank_job_prolog(spank_t sp, int ac, char **av)
{
	if (dispatch_setup(ac, av) < 0)
		return -1;
	return sigma_prolog(sp);
}

int slurm_spank_job_epilog(spank_t sp, int ac, char **av)
{
	if (dispatch_setup(ac, av) < 0)
		return -1;
	return sigma_epilog(sp);
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	if (spank_context() != S_CTX_REMOTE)
		return 0;
	if (dispatch_setup(ac, av) < 0)
		return -1;
	return sigma_task_init(sp);
}

int slurm_spank_exit(spank_t sp, int ac, char **av)
{
	sigma_log_set_sink(NULL, NULL);
	return 0;
}
