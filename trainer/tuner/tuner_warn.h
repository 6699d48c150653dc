/*
 * tuner_warn.h - the auto-tuner's last rung (docs/tuner.md): a rank that
 * stays slow after its shares moved reports its own node to sigmad as an
 * early warning, with
 *
 *     $SIGMACTL [--config $SIGMA_CONF] slow $SLURMD_NODENAME --job $SLURM_JOB_ID
 *
 * (SIGMACTL: default "sigmactl" on the PATH). sigmad checks that the node
 * is one of the caller's running job's and drains it with a warning in the
 * probe's form; its warning path then moves the job off the node.
 */
#ifndef SIGMA_TRAIN_TUNER_WARN_H
#define SIGMA_TRAIN_TUNER_WARN_H

/*
 * Report this rank's node; prints what happened ("tuner: step N: ...").
 * sigmactl runs in the background, with SIGUSR1 blocked (the warning path
 * signals the whole job), and is not waited for: its answer is said by
 * tuner_warn_reap. 0, or -errno: not in a Slurm job step (-ENOENT), a
 * report still running (-EBUSY), sigmactl could not run (-EIO).
 */
int tuner_warn_node(long step, const char *why);
/* a report that ended: said when sigmactl refused or failed */
void tuner_warn_reap(void);

#endif /* SIGMA_TRAIN_TUNER_WARN_H */
