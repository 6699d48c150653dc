/*
 * init_from.c - a run's first weights from another run's checkpoint
 * (tiers.h, tiers_init_from): --init-from a sealed file, or
 * --init-from-untrusted any file, read in a process of its own
 * (untrusted.h).
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>

#include "sigma.h"
#include "exitcodes.h"
#include "seal.h"
#include "tiers.h"
#include "untrusted.h"

/* the weights of path into m */
static int read_weights(struct model *m, const char *path, bool untrusted,
			char *err, size_t len)
{
	uint64_t hash, size;

	if (untrusted)
		return untrusted_read_weights(path, m, err, len);
	if (seal_peek(path, &hash, &size, err, len) == -ENOENT)
		return sigma_set_err(
		    err, len, EBADMSG,
		    "%s has no seal: a file from elsewhere is read only with "
		    "--init-from-untrusted FILE, in a process of its own "
		    "(docs/checkpoint-format.md)",
		    path);
	return ckpt_read_weights(path, m, err, len);
}

/* rank 0 reads the weights, every rank gets them; a model in parts:
 * every rank reads its rows */
int tiers_init_from(struct dist *d, struct model *m, const char *path,
		    bool untrusted)
{
	char err[1024];
	int rc = d->rank == 0 || m->sharded
			 ? read_weights(m, path, untrusted, err, sizeof(err))
			 : 0;

	if (m->sharded) {
		double bad = rc != 0;

		if (dist_world_mean(d, &bad, 1))
			return TRAIN_EXIT_PEER;
		if (bad > 0 && rc == 0) {
			rc = -EBADMSG;
			snprintf(err, sizeof(err), "another rank could not read it");
		}
	} else if (dist_bcast_int(d, &rc) ||
		   (rc == 0 && dist_sync_model(d, m, NULL, 0))) {
		return TRAIN_EXIT_PEER;
	}
	if (rc) {
		sigma_error("--init-from: %s",
			    d->rank == 0 || m->sharded
				    ? err
				    : "rank 0 could not read the file");
		return exit_code_of(rc, PHASE_INIT_FROM);
	}
	printf("weights from %s\n", path);
	return 0;
}
