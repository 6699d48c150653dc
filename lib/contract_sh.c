/*
 * contract_sh.c - sigma-contract-sh: the numbers of contract.h that the
 * shell programs act on, as shell assignments, so that a program built
 * from a .in file (trainer/sigma-launch) has them from the one
 * definition. Run at build time; not installed.
 */
#include <stdio.h>

#include "contract.h"

#define SAY(name) printf("%s=%d\n", #name, (int)(name))

int main(void)
{
	SAY(TRAIN_EXIT_OK);
	SAY(TRAIN_EXIT_FAILURE);
	SAY(TRAIN_EXIT_USAGE);
	SAY(TRAIN_EXIT_OSERR);
	SAY(TRAIN_EXIT_REQUEUE);
	SAY(TRAIN_EXIT_PEER);
	SAY(TRAIN_EXIT_HARDWARE);
	SAY(SIGMA_PROBE_EXIT_OK);
	SAY(SIGMA_PROBE_EXIT_WARN);
	SAY(SIGMA_PROBE_EXIT_UNJUDGED);
	return ferror(stdout) ? 1 : 0;
}
