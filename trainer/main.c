/*
 * main.c - sigma-train: train a mixture-of-experts transformer
 * (docs/model.md) on one rank or many under srun --mpi=pmix.
 *
 *   sigma-train [OPTIONS]                        train (opts.c)
 *   sigma-train prepare [OPTIONS] TEXT...        make token files (tools.c)
 *   sigma-train sgemm [OPTIONS]                  this machine's GEMM rate
 *
 * Reads straight down: settings, the ranks, the run (setup.c, resume.c),
 * the steps (train.c), teardown in reverse. Exit codes: exitcodes.h.
 */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sigma.h"
#include "blas_pick.h"
#include "dist.h"
#include "exitcodes.h"
#include "opts.h"
#include "tools.h"
#include "train.h"

/* the ranks of the job and this rank's place in the layout */
static int join_ranks(struct dist *d, const struct train_opts *o)
{
	char err[1024];
	int rc = dist_init(d, o->dp, o->ep, o->pp, o->micro, o->model.E,
			   o->model.L, o->batch, err, sizeof(err));

	if (rc) {
		sigma_error("%s", err);
		return exit_code_of(rc, PHASE_BOOT);
	}
	d->bucket = (size_t)(o->bucket_mb * (1 << 20) / sizeof(float));
	if (d->bucket < 1)
		d->bucket = 1;
	if (d->size > 1)
		sigma_info("rank %d of %d on %s, pid %d: dp %d ep %d pp %d micro %d, stage %d (layers %d-%d), dp_index %d, ep_rank %d, %d of %d sequences per step",
			   d->rank, d->size, d->boot.node, (int)getpid(),
			   d->lp.dp, d->lp.ep, d->lp.pp, d->micro, d->me.stage,
			   d->me.layer_first,
			   d->me.layer_first + d->me.layer_count - 1,
			   d->me.dp_index, d->me.ep_rank, o->batch / d->lp.dp,
			   o->batch);
	/* progress and metrics come from rank 0 only; errors from every rank */
	if (d->rank != 0 && !freopen("/dev/null", "w", stdout))
		sigma_warn("cannot silence stdout of rank %d", d->rank);
	return 0;
}

/*
 * The communicators are torn down together only when every rank got
 * here the same way; after a failure the process just ends.
 */
static int leave(struct dist *d, int code)
{
	int ranks = d->size;

	if (code != TRAIN_EXIT_OK && code != TRAIN_EXIT_REQUEUE && ranks > 1)
		return code;
	/*
	 * A stop after its checkpoint: the first rank out exits 75, and srun
	 * (--kill-on-bad-exit) sends SIGTERM to the step. A rank still in the
	 * last fence or in the libraries' finalize then died of it, and the
	 * step ended 143 instead of 75 (seen on a loaded host). Nothing is
	 * left to save: SIGTERM is ignored (in every thread) until this rank
	 * exits 75 itself; a peer lost in the fence is the watchdog's, and
	 * srun's SIGKILL after KillWait ends a rank that hangs.
	 */
	if (code == TRAIN_EXIT_REQUEUE && ranks > 1)
		signal(SIGTERM, SIG_IGN);
	dist_end(d);
	/* every rank passed the last fence: leave at once, before srun can
	 * take a peer's 75 for a failure to kill this rank for (the exit
	 * handlers of the libraries take time) */
	if (ranks > 1 && code != TRAIN_EXIT_OK) {
		fflush(NULL);
		_exit(code);
	}
	return code;
}

int main(int argc, char **argv)
{
	struct train_opts o;
	struct trainer t;
	struct dist d;
	int code;

	sigma_log_init("sigma-train", SIGMA_LOG_INFO);
	if (argc > 1 && !strcmp(argv[1], "prepare"))
		return tool_prepare(argc - 1, argv + 1);
	if (argc > 1 && !strcmp(argv[1], "sgemm"))
		return tool_sgemm(argc - 1, argv + 1);

	/* 1. the BLAS kernel this CPU allows (may execute sigma-train
	 * again), then the settings: defaults, SIGMA_* environment, flags */
	blas_pick(argc, argv);
	if (train_opts_parse(&o, argc, argv))
		return TRAIN_EXIT_USAGE;
	/* 2. the ranks. A peer that dies closes its sockets: a write to one
	 * must fail (EPIPE: the peer is lost, exit 76, with this rank's exit
	 * record written) rather than end this rank by SIGPIPE, leaving the
	 * launcher two ranks without a record and no node to blame (Open MPI
	 * 5's TCP transport writes to the dead peer before it notices). */
	signal(SIGPIPE, SIG_IGN);
	code = join_ranks(&d, &o);
	if (code)
		return code;
	/* 3. the run: data, model, tiers, resume; 4. the steps */
	code = trainer_setup(&t, &o, &d);
	if (code == 0)
		code = trainer_loop(&t);
	/* 5. teardown, in reverse */
	code = trainer_teardown(&t, code);
	return leave(&d, code);
}
