/*
 * slow_report.h - a rank that stays slow reports its own node to sigmad
 * as an early warning (docs/tuner.md, "escalation"), with
 *
 *     $SIGMACTL [--config $SIGMA_CONF] slow $SLURMD_NODENAME --job $SLURM_JOB_ID
 *
 * (SIGMACTL: default "sigmactl" on the PATH). sigmad checks that the node
 * is one of the caller's running job's and drains it with a warning in the
 * probe's form; its warning path then moves the job off the node. Used by
 * sigma-train's tuner and by libsigma-runtime's straggler detection.
 */
#ifndef SIGMA_SLOW_REPORT_H
#define SIGMA_SLOW_REPORT_H

/*
 * Report this rank's node; says what happened on stderr ("WHO: step N:
 * WHY; reporting NODE as an early warning (sigmactl slow)"). sigmactl
 * runs in the background, with SIGUSR1 blocked (the warning path signals
 * the whole job), and is not waited for: its answer is said by
 * slow_report_reap. 0, or -errno: not in a Slurm job step (-ENOENT), a
 * report still running (-EBUSY), sigmactl could not run (-EIO).
 */
int slow_report_node(const char *who, long step, const char *why);
/* a report that ended: said when sigmactl refused or failed */
void slow_report_reap(void);

#endif /* SIGMA_SLOW_REPORT_H */
