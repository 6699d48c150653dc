/*
 * tiers_conf.h - the settings the checkpoint tiers act on (tiers.h), taken
 * from sigma-train's flags: where each tier writes, how many copies it
 * keeps, and how often.
 */
#ifndef SIGMA_TRAIN_TIERS_CONF_H
#define SIGMA_TRAIN_TIERS_CONF_H

#include <stdbool.h>

struct tiers_conf {
	const char *ckpt_dir;  /* --ckpt-dir, the shared tier; "": none */
	int ckpt_keep;	       /* --ckpt-keep */
	bool sync;	       /* --ckpt-sync: shared writes in the loop */
	const char *local_dir; /* --local-ckpt-dir, tier 1; "": off */
	int local_keep;	       /* --local-ckpt-keep */
	long every;	       /* --ckpt-every */
	long full_every;       /* --ckpt-full-every */
	long diff_every;       /* --ckpt-diff-every; 0: none */
	long steps;	       /* the run's last step */
};

#endif /* SIGMA_TRAIN_TIERS_CONF_H */
