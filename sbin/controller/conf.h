/*
 * conf.h - sigmad's settings (the sigmad_* keys of sigma.conf), the job
 * options block the plugin writes into AdminComment, and node reasons.
 * Pure parsing: no Slurm, usable from sigmad, sigmactl, sigma-sim and tests.
 */
#ifndef SIGMAD_CONFIG_H
#define SIGMAD_CONFIG_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy.h"

#define SIGMAD_SOCKET_MAX 108 /* sizeof(sockaddr_un.sun_path) */
#define SIGMAD_NAME_MAX	  64
#define SIGMAD_LIST_MAX	  1024

struct sigmad_config {
	char socket_path[SIGMAD_SOCKET_MAX]; /* sigmad_socket */
	char state_dir[PATH_MAX];	     /* sigmad_state_dir */
	char spares[SIGMAD_LIST_MAX];	     /* sigmad_spares (node list) */
	char spare_feature[SIGMAD_NAME_MAX]; /* sigmad_spare_feature */
	char reservation[SIGMAD_NAME_MAX];   /* sigmad_reservation */
	char probe_command[SIGMAD_LIST_MAX]; /* sigmad_probe_command */
	int64_t poll_interval_s;	     /* sigmad_poll_interval */
	int64_t restart_delay_s;	     /* sigmad_restart_delay */
	bool down_on_no_respond;	     /* sigmad_down_on_no_respond */
	int log_level;			     /* sigmad_log_level */
	struct policy_config policy; /* sigmad_cooldown, _warn_grace, ... */
};

#define SIGMAD_DEFAULT_SOCKET	   "/run/sigma/sigmad.sock"
#define SIGMAD_DEFAULT_STATE_DIR   "/var/lib/sigma/sigmad"
#define SIGMAD_DEFAULT_RESERVATION "sigma_spares"
#define SIGMAD_EVENT_LOG_NAME	   "events.jsonl"

void sigmad_config_init(struct sigmad_config *cfg);
/*
 * Read path (keys not starting with sigmad_ are skipped). Returns 0 or
 * -errno with "FILE:LINE: why" in err. cfg is only changed on success, so a
 * bad file on SIGHUP leaves the running settings alone.
 */
int sigmad_config_load(struct sigmad_config *cfg, const char *path, char *err,
		       size_t errlen);
/* Same, from a buffer (name labels errors). */
int sigmad_config_parse(struct sigmad_config *cfg, const char *buf, size_t len,
			const char *name, char *err, size_t errlen);
/* "STATE_DIR/events.jsonl" into buf. */
int sigmad_config_event_log(const struct sigmad_config *cfg, char *buf,
			    size_t size);

/* ---- the job's options block: sigma[probe=..,spares=..,...] -------------- */

struct sigmad_jobopts {
	char probe[8]; /* off|quick|full */
	int spares;
	int max_restarts;
	long ckpt_every;
};

/*
 * Parse the block at the start of an AdminComment. Returns 0, -ENOENT when
 * the comment does not start with "sigma[" (not a sigma job), -EINVAL when
 * the block is malformed. *end gets the offset just past ']' (may be NULL).
 * Unknown keys are skipped (a newer plugin may add some).
 */
int sigmad_jobopts_parse(const char *comment, struct sigmad_jobopts *opts,
			 size_t *end);

/* ---- node reasons ------------------------------------------------------- */

enum sigmad_reason {
	SIGMAD_REASON_NONE = 0, /* empty, or not sigma's */
	SIGMAD_REASON_FAILURE,	/* "sigma: probe LEVEL: WHAT" */
	SIGMAD_REASON_WARNING,	/* "sigma: warning: probe LEVEL: WHAT" */
	SIGMAD_REASON_SIGMA,	/* "sigma: ..." written by sigmad */
};

/* Classify a node reason; *what points into reason at WHAT (may be NULL). */
enum sigmad_reason sigmad_reason_classify(const char *reason,
					  const char **what);

#endif /* SIGMAD_CONFIG_H */
