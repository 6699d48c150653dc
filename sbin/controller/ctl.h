/*
 * ctl.h - sigmad's controller: the loop body that watches the cluster,
 * asks the policy, acts through the libslurm adapter and records every
 * decision in the event log before acting on it.
 *
 * Crash safety: a decision is fsync'd to the event log before its first
 * action; each step is checked against Slurm before it is taken (a drained
 * node is not drained again, a requeued job not requeued again, an account
 * already in the AdminComment not appended again) and logged after. A new
 * sigmad rebuilds its open recoveries from the log and finishes them.
 */
#ifndef SIGMAD_CTL_H
#define SIGMAD_CTL_H

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "conf.h"
#include "eventlog.h"

struct ctl;

/* Reads the event log; opens it for appending. */
int ctl_create(struct ctl **out, const struct sigmad_config *cfg,
	       const char *config_path);
void ctl_destroy(struct ctl *c);
/* New settings (SIGHUP): keeps recoveries in flight. */
int ctl_reload(struct ctl *c, const struct sigmad_config *cfg);
/* One look at the cluster and the actions it calls for. */
int ctl_tick(struct ctl *c);

/* Commands from sigmactl; the reply is written to out. */
/* all: every user's jobs (admins, or no PrivateData=jobs); else uid's */
int ctl_cmd_status(struct ctl *c, FILE *out, uid_t uid, bool all);
int ctl_cmd_spares(struct ctl *c, FILE *out);
int ctl_cmd_spare_add(struct ctl *c, const char *node, uid_t uid, FILE *out);
int ctl_cmd_spare_remove(struct ctl *c, const char *node, uid_t uid, FILE *out);
int ctl_cmd_drain(struct ctl *c, const char *node, const char *reason,
		  uid_t uid, FILE *out);
int ctl_cmd_resume(struct ctl *c, const char *node, uid_t uid, FILE *out);
/*
 * The launcher of job (--sigma-restart=in-job, run by its owner) saw its
 * rank die again and again on node, which probes healthy: drain it as a
 * suspect. Only the job's owner (or an admin), only a running in-job job,
 * only one of its own nodes.
 */
int ctl_cmd_suspect(struct ctl *c, const char *node, uint32_t job, uid_t uid,
		    bool admin, FILE *out);
/*
 * sigma-train's auto-tuner in job (its owner's, running, any restart mode)
 * found its rank on node slow still after moving work off it: an early
 * warning for this job alone (a "slow" event), so that the warning path
 * moves it off the node. The node is not drained: the other jobs on it
 * stay, and only sigma's own probe marks it for all. Only one of the
 * job's own nodes; a repeated report changes nothing.
 */
int ctl_cmd_slow(struct ctl *c, const char *node, uint32_t job, uid_t uid,
		 bool admin, FILE *out);
/*
 * The launcher of job (its owner's, running, --sigma-restart=in-job)
 * relaunched its step inside the allocation as its launch number launch:
 * one restart more used, against --sigma-max-restarts (a "relaunch"
 * event). Counted once a launch: a launch number not above the newest one
 * counted is answered "ok" and changes nothing, so the launcher may repeat
 * its report until sigmad hears it. off: the job's nodes the step moved
 * off (a comma list, may be empty); each gets its account in the job's
 * AdminComment ("-> relaunched in the allocation (in-job)"), written here
 * and nowhere else, once the relaunch is a fact.
 */
int ctl_cmd_relaunch(struct ctl *c, uint32_t job, int launch, const char *off,
		     uid_t uid, bool admin, FILE *out);
/* The event log, open (history is read straight from it, by its index). */
const struct evlog *ctl_event_log(const struct ctl *c);

#endif /* SIGMAD_CTL_H */
