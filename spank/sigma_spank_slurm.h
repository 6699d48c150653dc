/*
 * sigma_spank_slurm.h - the plugin's functions that take a spank_t. Kept
 * apart from sigma_spank.h so that the pure parts and their tests never see
 * slurm/spank.h.
 */
#ifndef SIGMA_SPANK_SLURM_H
#define SIGMA_SPANK_SLURM_H

#include <slurm/spank.h>

/* register.c */
int sigma_register_options(spank_t sp);
/* Fill sigma_opts from spank_option_getopt (job script and remote). */
int sigma_load_options(spank_t sp);

/* one function per context */
int sigma_client_init(spank_t sp, int ac, char **av); /* client.c */
int sigma_prolog(spank_t sp);			      /* prolog.c */
int sigma_epilog(spank_t sp);			      /* epilog.c */
int sigma_task_init(spank_t sp);		      /* task.c */

/* probe.c: run sigma-probe at level; returns its exit code 0..3 or -errno */
int sigma_job_probe(spank_t sp, int level, const char *when, uint32_t job_id);

/* the job's user: uid, gid and name (name may be "" when unknown) */
int sigma_job_user(spank_t sp, uid_t *uid, gid_t *gid, char *name, size_t size);

#endif /* SIGMA_SPANK_SLURM_H */
