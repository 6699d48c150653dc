/*
 * exitcodes.h - sigma-train's exit codes (enum train_exit) are part of the
 * contract between sigma's parts, for Slurm's RequeueExit and for sigmad:
 * lib/contract.h defines them (docs/interfaces.md, sigma-train(1)).
 */
#ifndef SIGMA_TRAIN_EXITCODES_H
#define SIGMA_TRAIN_EXITCODES_H

#include "contract.h"

#endif /* SIGMA_TRAIN_EXITCODES_H */
