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

#include "contract.h"
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
	char metrics_dir[PATH_MAX];	     /* sigmad_metrics_dir, "": off */
	int64_t metrics_interval_s;	     /* sigmad_metrics_interval */
	int64_t poll_interval_s;	     /* sigmad_poll_interval */
	int64_t restart_delay_s;	     /* sigmad_restart_delay */
	bool down_on_no_respond;	     /* sigmad_down_on_no_respond */
	int suspect_crashes;		     /* sigmad_suspect_crashes */
	int64_t event_log_max;		     /* sigmad_event_log_max (MiB), bytes */
	int log_level;			     /* sigmad_log_level */
	struct sigma_site_caps caps; /* sigmad_max_spares_per_job, ... */
	struct policy_config policy; /* sigmad_cooldown, _warn_grace, ... */
};

#define SIGMAD_DEFAULT_SOCKET	   "/run/sigma/sigmad.sock"
#define SIGMAD_DEFAULT_STATE_DIR   "/var/lib/sigma/sigmad"
#define SIGMAD_DEFAULT_RESERVATION "sigma_spares"
#define SIGMAD_DEFAULT_SUSPECT	   3 /* failed steps before a suspect drain */
#define SIGMAD_DEFAULT_LOG_MAX_MB  64 /* the event log is compacted past it */
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

/* the job block and node reasons are the contract's: lib/contract.h */

#endif /* SIGMAD_CONFIG_H */
