/*
 * setup.c - a training run from its settings to its first step, and back
 * (train.h): the token files, the kernels and the model on the parallel
 * layout, the run a checkpoint directory holds, the tiers, the resume,
 * the guard, the signals and the outputs; teardown undoes it in reverse.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "sigma.h"
#include "bf16.h"
#include "claim.h"
#include "exitcodes.h"
#include "membudget.h"
#include "resume.h"
#include "run.h"
#include "select.h"
#include "train.h"
#include "slow_report.h"

#include <xxhash.h>

/* ---- data and model ------------------------------------------------------ */

static int setup_data(struct trainer *t)
{
	struct train_opts *o = t->o;
	char err[1024];
	int rc;

	rc = data_open(&t->train_df, o->train_path, err, sizeof(err));
	if (rc == 0) {
		t->have_train = true;
		if (*o->val_path) {
			rc = data_open(&t->val_df, o->val_path, err,
				       sizeof(err));
			t->have_val = rc == 0;
		}
	}
	if (rc) {
		sigma_error("%s", err);
		return exit_code_of(rc, PHASE_DATA);
	}
	if (!o->vocab_set)
		o->model.V = (int)t->train_df.vocab;
	if ((uint32_t)o->model.V < t->train_df.vocab ||
	    (t->have_val && (uint32_t)o->model.V < t->val_df.vocab)) {
		sigma_error("vocabulary %d is smaller than the token file's %u",
			    o->model.V, t->train_df.vocab);
		return TRAIN_EXIT_DATAERR;
	}
	if (data_check_len(&t->train_df, o->model.T, err, sizeof(err)) ||
	    (t->have_val &&
	     data_check_len(&t->val_df, o->model.T, err, sizeof(err)))) {
		sigma_error("%s", err);
		return TRAIN_EXIT_DATAERR;
	}
	return 0;
}

/*
 * What this rank needs against what it may use, once ops is initialised
 * (its settings, SIGMA_CUDA_* among them, are read, and a GPU knows its
 * memory): 0, or exit 64.
 */
static int setup_memory(struct trainer *t, const struct model_shard *sh,
			const struct sigma_ops *ops, int B)
{
	const struct train_opts *o = t->o;
	struct dist *d = t->d;
	struct mem_limit lim, dev;
	const struct mem_limit *over;
	struct mem_need need;
	const char *what;
	uint64_t needed;
	size_t rep;
	bool zero = sh->zsize[0] > 1 || sh->zsize[1] > 1;
	int copies = tiers_host_copies(&t->tiers.c, d, &o->model,
				       zero || sh->ep > 1 ||
					       sh->layer_count < o->model.L,
				       &rep);

	mem_need_of(&need, &o->model, B, d->micro, sh, ops, copies, rep);
	t->mem_need = need.total;
	if (mem_limit_of(d, &lim))
		return TRAIN_EXIT_PEER;
	if (mem_device_limit(ops, &dev)) {
		sigma_error("--device %s: the device cannot say how much memory it has",
			    ops->name);
		return TRAIN_EXIT_USAGE;
	}
	over = mem_short(&need, &lim, &dev, &needed, &what);
	if (d->rank == 0 || over)
		printf("config: memory per rank %d: %.1f MiB (parameters, gradients and moments %.1f MiB, activations %.1f MiB, checkpoint copies %.1f MiB) of %.1f MiB (%s)%s%s\n",
		       d->rank, need.total / 1048576.0, need.state / 1048576.0,
		       need.acts / 1048576.0, need.staging / 1048576.0,
		       lim.bytes / 1048576.0, lim.why,
		       dev.bytes ? "; on the device: " : "", dev.why);
	if (over) {
		sigma_error("rank %d needs %.1f MiB%s in the layout dp %d x ep %d x pp %d, more than the %.1f MiB it may use (%s): shard the model further (--ep, --pp), or give each rank more memory",
			    d->rank, needed / 1048576.0, what, d->lp.dp,
			    d->lp.ep, d->lp.pp, over->bytes / 1048576.0,
			    over->why);
		return TRAIN_EXIT_USAGE;
	}
	return 0;
}

/* the kernels, the model on this rank's share of the layout, its weights */
static int setup_model(struct trainer *t)
{
	struct train_opts *o = t->o;
	struct dist *d = t->d;
	const char *dev = *o->device ? o->device : "cpu";
	const struct sigma_ops *ops;
	struct model_shard sh;
	char err[1024];
	/* sequences per micro-batch; dist_init checked that they divide */
	int B = (int)(o->batch / d->lp.dp / d->micro), rc, code, *ex;

	rc = model_config_check(&o->model, err, sizeof(err));
	if (rc) {
		sigma_error("model: %s", err);
		return TRAIN_EXIT_USAGE;
	}
	ex = calloc((size_t)o->model.L * o->model.E, sizeof(int));
	if (!ex)
		return TRAIN_EXIT_OSERR;
	dist_shard_of(d, d->rank, &sh, ex);
	if (o->zero)
		dist_zero_of(d, &sh);
	ops = sigma_ops_select(dev, err, sizeof(err));
	if (!ops) {
		free(ex);
		sigma_error("--device: %s", err);
		return TRAIN_EXIT_USAGE;
	}
	/* activations for the most sequences the auto-tuner may give it */
	t->B = B;
	t->Bmax = tuner_bmax(&o->tuner, B);
	/* the GPU by the bootstrap's node-local rank, not the launcher's */
	sigma_ops_set_local_rank(d->boot.pmix ? d->boot.local_rank : -1);
	rc = ops->init(o->threads);
	if (rc) {
		free(ex);
		sigma_error("--device %s: cannot initialise the %s kernels: %s",
			    dev, ops->name, strerror(-rc));
		return TRAIN_EXIT_USAGE;
	}
	code = setup_memory(t, &sh, ops, t->Bmax);
	if (code) {
		free(ex);
		return code;
	}
	rc = model_create_shard(&t->m, &o->model, t->Bmax, d->micro, &sh, ops,
				err, sizeof(err));
	free(ex);
	if (rc) {
		sigma_error("model: %s", err);
		return exit_code_of(rc, PHASE_CONFIG);
	}
	t->m->bf16 = sigma_bf16_select(ops); /* for --precision bf16 */
	model_init_weights(t->m, o->seed);
	rc = dist_attach(d, t->m, err, sizeof(err));
	if (rc) {
		sigma_error("cannot set up the parallel layout: %s", err);
		return exit_code_of(rc, PHASE_LAYOUT);
	}
	t->m->B = B; /* an even share until the tuner moves it */
	return 0;
}

/* ---- the run ------------------------------------------------------------- */

/*
 * Which run this start continues or begins (claim.h): rank 0 decides on
 * the shared directory, every rank learns the run id and the attempt
 * (st). 0 or an exit code: 64 for a start that would mix two runs, 65
 * for a damaged manifest.
 */
static int claim_run(struct train_opts *o, struct dist *d,
		     struct ckpt_state *st)
{
	/* a requeue by Slurm (its own count), a relaunch by sigma-launch, or
	 * an attempt set by hand (lib/attempt.h read them) */
	enum claim_how how =
	    (o->attempt > 0 && o->requeues > 0) ||
		    (o->launch > 0 && run_slurm_job())
		? CLAIM_RESTART
	    : o->attempt > 0 || (o->resume && !o->new_run) ? CLAIM_RESUME
	    : o->new_run			     ? CLAIM_BESIDE
						     : CLAIM_FRESH;
	struct claim c;
	char err[PATH_MAX + 1024];
	int rc = 0;

	memset(&c, 0, sizeof(c));
	if (d->rank == 0)
		rc = claim_shared(o->ckpt_dir, how, run_slurm_job(), o->attempt,
				  &c, err, sizeof(err));
	if (dist_bcast_int(d, &rc))
		return TRAIN_EXIT_PEER;
	if (rc) {
		if (d->rank == 0)
			sigma_error("%s", err);
		return exit_code_of(rc, PHASE_CLAIM);
	}
	if (dist_bcast_bytes(d, &c, sizeof(c)))
		return TRAIN_EXIT_PEER;
	if (d->rank == 0)
		printf("%s (attempt %d)\n", c.note, c.attempt);
	sigma_strlcpy(st->run, c.id, sizeof(st->run));
	st->attempt = o->attempt = c.attempt;
	/* the run continues: resume, also where an attempt was implied */
	o->resume |= how == CLAIM_RESUME || how == CLAIM_RESTART;
	return 0;
}

/* the state a checkpoint of this start holds, before any resume */
static void setup_state(struct trainer *t)
{
	const struct train_opts *o = t->o;
	const struct dist *d = t->d;
	struct ckpt_state *st = &t->st;

	st->seed = o->seed;
	st->rng = o->seed;
	st->batch = o->batch;
	st->optim = o->optim;
	st->data_ntokens = t->train_df.ntokens;
	st->data_checksum = t->train_df.checksum;
	st->attempt = o->attempt;
	snprintf(st->layout, sizeof(st->layout), "ranks=%d dp=%d ep=%d pp=%d",
		 d->size, d->lp.dp, d->lp.ep, d->lp.pp);
	/* a part's slots are its experts in this placement: a tier-1 copy
	 * of another one is of another layout */
	if (d->lp.ep > 1)
		snprintf(st->layout + strlen(st->layout),
			 sizeof(st->layout) - strlen(st->layout),
			 " placement=%08x",
			 (unsigned)(XXH3_64bits(d->pl.owner,
						sizeof(*d->pl.owner) *
						    (size_t)d->pl.L * d->pl.E) &
				    0xffffffffu));
	/* split moments: a tier-1 copy holds its rank's blocks alone, which
	 * only the same split reads back */
	if (t->m->zero)
		snprintf(st->layout + strlen(st->layout),
			 sizeof(st->layout) - strlen(st->layout), " zero=1");
}

/* the run, tier 1's directories, and where this start begins */
static int setup_run(struct trainer *t)
{
	struct train_opts *o = t->o;
	struct resume_from from;
	struct resume_to to;
	int code;

	if (*o->ckpt_dir) {
		code = claim_run(o, t->d, &t->st);
		if (code)
			return code;
	}
	if ((code = tiers_open(&t->tiers, t->m, t->st.run)))
		return code;
	if (o->resume && !*o->ckpt_dir)
		sigma_warn("--resume without a checkpoint directory: starting at step 0");
	if (!o->resume || !*o->ckpt_dir)
		return 0;
	from = (struct resume_from){ tiers_local_dir(&t->tiers),
				     o->ckpt_dir, o->batch, o->seed,
				     t->train_df.checksum };
	code = resume_run(t->d, t->m, &from, &t->st, &to);
	if (code)
		return code;
	t->start = to.start;
	t->resumed_slots = to.slots;
	if (to.full_step >= 0) {
		t->resumed_step = to.full_step;
		sigma_strlcpy(t->resumed_full, to.full,
			      sizeof(t->resumed_full));
	}
	o->seed = t->st.seed;
	return 0;
}

/* ---- the guard, the signals, the writers --------------------------------- */

/* the guard's per-rank observations, averaged over the ranks */
static int guard_agree(void *ctx, double *v, int n)
{
	return dist_world_mean(ctx, v, n);
}

static int guard_agree_max(void *ctx, double *v)
{
	return dist_world_max(ctx, v);
}

static int setup_guard(struct trainer *t)
{
	const struct train_opts *o = t->o;
	char err[1024];
	int rc = guard_run_init(&t->gr, &o->guard, o->bf16, t->m, err,
				sizeof(err));

	if (rc) {
		sigma_error("%s", err);
		return exit_code_of(rc, PHASE_CONFIG);
	}
	t->gr_ready = true;
	guard_state_import(&t->gr.g, &t->st.guard);
	if (t->d->size > 1) {
		t->gr.agree = guard_agree;
		/* one stage: every rank has the batch's counts of every layer,
		 * so the same imbalance, and no message is needed for it */
		t->gr.agree_max = t->d->lp.pp > 1 ? guard_agree_max : NULL;
		t->gr.agree_ctx = t->d;
		t->gr.agree_size = t->d->size;
	}
	printf("guard: %s, precision %s%s\n", o->guard.enabled ? "on" : "off",
	       o->bf16 ? "bf16" : "fp32",
	       o->bf16 ? (sigma_bf16_native() ? " (AVX-512 BF16)"
					      : " (emulated)")
		       : "");
	return 0;
}

static void on_stop(int sig)
{
	train_stop_signal = sig;
	/* a collective that waits for a dead peer now ends soon (76) */
	comm_watchdog_hurry();
}

/* SIGUSR1 and SIGTERM ask for a checkpoint and a stop (exit 75) */
static void setup_signals(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

/*
 * The experts' placement (ep > 1): the tuner's, and the moves a resumed
 * checkpoint held. Its tensors were read either by expert (the shared
 * tier: the layout's placement), so the experts move to the checkpoint's;
 * or as tier 1 holds them, already in the checkpoint's placement, which
 * must then be known. 0 or an exit code.
 */
static int setup_placement(struct trainer *t)
{
	const struct train_opts *o = t->o;
	struct dist *d = t->d;
	int *ep_of = calloc((size_t)d->lp.dp, sizeof(int)), rc;
	char err[1024];

	for (int r = 0; ep_of && r < d->lp.dp; r++) {
		struct layout_coords c;

		(void)layout_coords(&d->lp, layout_rank_of(&d->lp, 0, r), &c);
		ep_of[r] = c.ep_rank;
	}
	/* experts whose moments are split stay where they are */
	rc = ep_of ? tuner_place_init(&t->tu, d->lp.L, d->lp.E, d->lp.ep,
				      ep_of, d->pl.owner, o->zero, err,
				      sizeof(err))
		   : -ENOMEM;
	free(ep_of);
	if (rc == 0 && tuner_place_wants(&t->tu) &&
	    !(d->routed = calloc((size_t)d->lp.L * d->lp.E, sizeof(float))))
		rc = -ENOMEM;
	if (rc) {
		sigma_error("%s", rc == -ENOMEM ? "out of memory" : err);
		return exit_code_of(rc, PHASE_CONFIG);
	}
	if (!t->st.tuner.moves[0])
		return 0;
	if (tuner_place_import(&t->tu, t->st.tuner.moves, err, sizeof(err))) {
		if (t->resumed_slots) {
			sigma_error("resume: the checkpoint's experts are in a placement it does not describe: %s",
				    err);
			return exit_code_of(-EBADMSG, PHASE_RESUME);
		}
		printf("tuner: the checkpoint's expert moves are not used: %s; the layout's placement\n",
		       err);
		return 0;
	}
	if (d->rank == 0)
		printf("tuner: resumed with the checkpoint's placement (%d expert swaps%s)\n",
		       tuner_swaps(&t->tu), t->resumed_slots ? "" : ", experts moved");
	return trainer_place(t, !t->resumed_slots);
}

/* the auto-tuner, its faults, and the shares and gradient buckets a
 * resumed checkpoint held */
static int setup_tuner(struct trainer *t)
{
	const struct train_opts *o = t->o;
	struct dist *d = t->d;
	char err[1024];
	int rc = tuner_init(&t->tu, &o->tuner, d->lp.dp, t->B, t->Bmax, err,
			    sizeof(err));

	if (rc == 0 && (rc = tuner_inject_init(&t->inj, err, sizeof(err))))
		tuner_fini(&t->tu);
	if (rc) {
		sigma_error("%s", err);
		return exit_code_of(rc, PHASE_CONFIG);
	}
	t->tu_ready = true;
	tuner_set_micro(&t->tu, d->micro);
	tuner_comm_init(&t->tu, (long)d->bucket,
			(long)dist_bucket_span(d, t->m));
	if (tuner_import(&t->tu, &t->st.tuner, err, sizeof(err)))
		printf("tuner: the checkpoint's shares are not used: %s; even shares\n",
		       err);
	else if (t->st.tuner.n > 0 && d->rank == 0)
		printf("tuner: resumed with the checkpoint's shares\n");
	if (t->st.tuner.bucket > 0 && tuner_bucket(&t->tu) == t->st.tuner.bucket &&
	    d->rank == 0)
		printf("tuner: resumed with the checkpoint's gradient buckets (%ld floats)\n",
		       tuner_bucket(&t->tu));
	if (d->lp.ep <= 1 && tuner_replays_moves(&t->tu)) {
		sigma_error("--tuner-replay %s: the run moved experts; this layout has one ep rank",
			    o->tuner.replay);
		return TRAIN_EXIT_USAGE;
	}
	return d->lp.ep > 1 ? setup_placement(t) : 0;
}

/* the batch buffers and the shared tier's writers */
static int setup_writers(struct trainer *t)
{
	size_t n = (size_t)t->d->micro * t->Bmax * t->m->cfg.T;

	t->tok = malloc(sizeof(int32_t) * n);
	t->tgt = malloc(sizeof(int32_t) * n);
	if (!t->tok || !t->tgt)
		return TRAIN_EXIT_OSERR;
	return tiers_start(&t->tiers, t->resumed_step, t->resumed_full);
}

/* ---- in order, and back -------------------------------------------------- */

/* the watchdog ends the process, or a communicator broke: the record says
 * how it leaves (jobrec.h) */
static void record_exit(int code, void *arg)
{
	struct trainer *t = arg;

	sigma_jobrec_exit(&t->rec, t->st.step, code);
}

int trainer_setup(struct trainer *t, struct train_opts *o, struct dist *d)
{
	char err[1024];
	int code;

	memset(t, 0, sizeof(*t));
	t->o = o;
	t->d = d;
	t->resumed_step = -1;
	tiers_init(&t->tiers,
		   &(struct tiers_conf){ o->ckpt_dir, o->ckpt_keep,
					 o->ckpt_sync, o->local_dir,
					 o->local_keep, o->ckpt_every,
					 o->ckpt_full_every, o->ckpt_diff_every,
					 o->optim.steps },
		   d);
	/* the job protocol's record (jobrec.h): a hint to the launcher,
	 * never a reason to stop */
	if (sigma_jobrec_open(&t->rec, d->rank, err, sizeof(err)))
		sigma_warn("%s: the launcher will not see this rank's progress",
			   err);
	else if (t->rec.on)
		comm_watchdog_on_exit(record_exit, t);
	if ((code = setup_data(t)) || (code = setup_model(t)))
		return code;
	setup_state(t);
	if ((*o->init_from || *o->init_untrusted) &&
	    (code = tiers_init_from(d, t->m,
				    *o->init_from ? o->init_from
						  : o->init_untrusted,
				    *o->init_untrusted != '\0')))
		return code;
	if ((code = setup_run(t)))
		return code;
	report_config(o, t->m, &t->train_df);
	if ((code = setup_guard(t)) || (code = setup_tuner(t)))
		return code;
	setup_signals();
	if ((code = report_open(&t->rep, o, t->m, d, t->start)) ||
	    (code = setup_writers(t)))
		return code;
	/* the clock of the progress series starts with the first step */
	t->rep.t_start = t->rep.t_last = sigma_now_ns();
	t->rep.comm_start = t->rep.comm_last = d->comm_ns;
	return 0;
}

/* each rank's own split of its step time, on stderr: ranks of different
 * stages and expert groups wait differently */
static void rank_summary(const struct trainer *t)
{
	const struct dist *d = t->d;
	double n = (double)(t->st.step - t->start);
	double ms = (double)(sigma_now_ns() - t->rep.t_start) / 1e6 / n;
	double cm = (double)d->comm_ns / 1e6 / n;
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	sigma_info("rank %d (stage %d, dp_index %d): %ld steps, %.2f ms per step: %.2f ms computing, %.2f ms waiting on communication (%.1f%%); sent %.1f KiB per step; holds %zu parameters and the moments of %zu (%.1f MiB with gradients), peak RSS %.1f MiB; needs %.1f MiB by the configuration check",
		   d->rank, d->me.stage, d->me.dp_index, t->st.step - t->start,
		   ms, ms - cm, cm, ms > 0 ? 100.0 * cm / ms : 0.0,
		   (double)dist_bytes_sent(d) / 1024.0 / n, t->m->nparams, t->m->nmom,
		   8.0 * (double)(t->m->nparams + t->m->nmom) / 1048576.0,
		   ru.ru_maxrss / 1024.0, t->mem_need / 1048576.0);
	tiers_summary(&t->tiers, ms);
}

int trainer_teardown(struct trainer *t, int code)
{
	const struct sigma_ops *ops;
	int told = code;

	/* the launcher learns how this rank leaves before SIGTERM can end
	 * it (below), and again should a write in flight change that */
	sigma_jobrec_exit(&t->rec, t->st.step, code);
	/*
	 * The run is over (its last checkpoint, if any, is complete: every
	 * rank passed the barrier after it). From here a SIGTERM, Slurm
	 * ending the step while this rank still waits for peers that have
	 * left, ends the process at once instead of asking for a checkpoint
	 * again; the slurmstepd is then gone before a requeued attempt of
	 * the job starts the same step on this node.
	 */
	signal(SIGTERM, SIG_DFL);
	signal(SIGUSR1, SIG_IGN);
	if (t->rep.t_start && t->st.step > t->start)
		rank_summary(t);
	code = tiers_close(&t->tiers, code);
	if (t->gr_ready) {
		guard_summary(stdout, &t->gr.g);
		guard_run_free(&t->gr);
	}
	if (t->tu_ready)
		tuner_fini(&t->tu);
	slow_report_reap(); /* a report that ended says how */
	if (report_close(&t->rep) && code == TRAIN_EXIT_OK)
		code = TRAIN_EXIT_CANTCREAT;
	free(t->tok);
	free(t->tgt);
	ops = t->m ? t->m->ops : NULL;
	model_destroy(t->m);
	if (ops && ops->release)
		ops->release();
	if (t->have_val)
		data_close(&t->val_df);
	if (t->have_train)
		data_close(&t->train_df);
	if (code != told)
		sigma_jobrec_exit(&t->rec, t->st.step, code);
	fflush(stdout);
	return code;
}
