/*
 * attempt.h - which attempt of a job's run this start is: the one place
 * that reads it from the environment and moves it on. An attempt names
 * a start's checkpoints and orders them before their step does
 * (trainer/ckpt/restore.h); a later start is a higher attempt.
 *
 *   SLURM_RESTART_COUNT  Slurm's requeues of the job (1, 2, ...)
 *   SIGMA_ATTEMPT        the plugin's count, which wins over Slurm's
 *   SIGMA_LAUNCH         sigma-launch's relaunch inside the allocation
 *                        (0 first), added: attempt + launch only grows
 *
 * sigma-train reads it in its settings (trainer/opts.c), and the job
 * protocol's records read the launch from it (jobrec.h). Past that, the
 * attempt only moves by sigma_attempt_past: the claim of the shared
 * directory moves it past every attempt the run wrote there
 * (trainer/ckpt/claim.c), and a resume past every attempt whose copies
 * it saw on the nodes (trainer/ckpt/resume.c).
 */
#ifndef SIGMA_ATTEMPT_H
#define SIGMA_ATTEMPT_H

#include <stdbool.h>
#include <stddef.h>

#include "contract.h"

struct sigma_attempt {
	int attempt;	/* 0 for a first start */
	int launch;	/* SIGMA_LAUNCH, 0 unset */
	long requeues;	/* SLURM_RESTART_COUNT when 1 or more, else 0 */
	bool resume;	/* a requeue, an attempt or a relaunch: the run
			   continues from its checkpoints */
};

/*
 * From the environment: 0, or -EINVAL / -ERANGE with err naming the
 * variable and its value (SIGMA_ATTEMPT or SIGMA_LAUNCH; a malformed
 * SLURM_RESTART_COUNT is Slurm's, and taken as none).
 */
int sigma_attempt_from_env(struct sigma_attempt *a, char *err, size_t len);

/* the attempt of a start that resumed and saw copies of attempts up to
 * seen: when seen is a later one, past it (at most SIGMA_ATTEMPT_MAX) */
int sigma_attempt_past(int attempt, int seen);

#endif /* SIGMA_ATTEMPT_H */
