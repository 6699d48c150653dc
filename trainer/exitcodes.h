/*
 * exitcodes.h - sigma-train's exit codes: an interface for Slurm's
 * RequeueExit and for sigmad (docs/interfaces.md, sigma-train(1)).
 * The values follow sysexits.h where one fits.
 */
#ifndef SIGMA_TRAIN_EXITCODES_H
#define SIGMA_TRAIN_EXITCODES_H

enum train_exit {
	TRAIN_EXIT_OK = 0, /* finished every step */
	TRAIN_EXIT_FAILURE = 1, /* anything not listed below */
	TRAIN_EXIT_USAGE = 64, /* bad command line or SIGMA_* value */
	TRAIN_EXIT_DATAERR = 65, /* bad token file or checkpoint */
	TRAIN_EXIT_NOINPUT = 66, /* an input file cannot be opened */
	TRAIN_EXIT_UNAVAILABLE = 69, /* stop requested, no checkpoint dir */
	TRAIN_EXIT_DIVERGED = 70, /* loss or gradient not finite */
	TRAIN_EXIT_OSERR = 71, /* out of memory, other system error */
	TRAIN_EXIT_CANTCREAT = 73, /* cannot write a checkpoint or output */
	TRAIN_EXIT_REQUEUE = 75, /* stopped on request, checkpoint written */
	TRAIN_EXIT_HARDWARE = 79, /* a recomputed step differs: requeue elsewhere */
	TRAIN_EXIT_PEER = 76, /* a peer rank failed or a collective timed out
				 (COMM_EXIT_PEER, docs/distributed.md) */
};

#endif /* SIGMA_TRAIN_EXITCODES_H */
