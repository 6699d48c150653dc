/*
 * train.c - the training loop of sigma-train (train.h). One step:
 *
 *   train_step        the batch, forward and backward, the all-reduce,
 *                     the guard's verdict, the optimizer
 *   step_eval         the validation loss, when due
 *   report_step       the progress line and the metrics row (report.c)
 *   step_checkpoint   tier 1, full and differential checkpoints (tiers.h)
 *   step_stop         a requested stop, after its checkpoint
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "sigma.h"
#include "exitcodes.h"
#include "train.h"
#include "slow_report.h"

volatile sig_atomic_t train_stop_signal;

/* what train_step did */
enum step_act {
	STEP_DONE,     /* the step ran: evaluate, report, checkpoint */
	STEP_SKIPPED,  /* a skipped data window: nothing ran */
	STEP_ROLLBACK, /* back to the newest checkpoint, step to */
};

struct step_out {
	enum step_act act;
	long to;      /* STEP_ROLLBACK: the checkpoint's step */
	double gn;    /* the gradient norm */
	float lr, scale;
	int stop; /* 0; a signal; -1 --stop-at; -2 another rank's signal */
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* the step's waits in collectives since before[] */
static void comm_since(const struct dist *d, const uint64_t *before,
		       uint64_t *out)
{
	for (int k = 0; k < DIST_NCOMM; k++)
		out[k] = d->comm_kind_ns[k] - before[k];
}

/*
 * Forward and backward over this rank's share of the global batch of step
 * s, then gradients and losses averaged over the data-parallel ranks, and
 * red[2] whether any rank was asked to stop. Micro-batch i of every
 * data-parallel rank together is the i-th slice of the batch, as with one
 * rank; the auto-tuner sets how many of its sequences each rank takes
 * (even shares: B each), and each rank's gradient and losses count by its
 * share (d->weight), so the mean is over all the sequences.
 */
static int step_compute(struct trainer *t, long s, double red[3], int *sig)
{
	struct dist *d = t->d;
	struct model *m = t->m;
	int r = d->me.dp_index, b = tuner_share(&t->tu, r), rc;
	long slice = (long)d->lp.dp * t->B;
	uint64_t c0[DIST_NCOMM], t0, w0, busy, hold, msg0, cpu0;
	struct tuner_step rec = { .dp_index = r, .seqs = d->micro * b };
	struct dist_overlap ovl0;
	double slow;

	m->B = b;
	d->bucket = (size_t)tuner_bucket(&t->tu); /* the tuner's buckets */
	d->weight = (float)tuner_weight(&t->tu, r);
	m->count_weight = d->weight;
	for (int i = 0; i < d->micro; i++) {
		size_t off = (size_t)i * b * m->cfg.T;

		data_batch_range(&t->train_df, t->st.seed, (uint64_t)s,
				 i * slice + tuner_offset(&t->tu, r), b,
				 m->cfg.T, t->tok + off, t->tgt + off);
	}
	/* fail-slow faults (tests): a slower rank, a slower link */
	tuner_inject_at(&t->inj, d->rank, s + 1, &slow, &hold);
	comm_inject_send_delay(hold);
	memcpy(c0, d->comm_kind_ns, sizeof(c0));
	ovl0 = d->ovl;
	msg0 = comm_messages();
	w0 = d->comm_ns;
	t0 = now_ns();
	cpu0 = tuner_inject_cpu_ns();
	d->routed_on = true; /* the tokens of training steps only */
	rc = dist_step(d, m, t->tok, t->tgt);
	d->routed_on = false;
	busy = now_ns() - t0 - (d->comm_ns - w0);
	/* does that much more work, as a slower chip would */
	busy += tuner_inject_work(slow, tuner_inject_cpu_ns() - cpu0);
	if (rc == 0)
		rc = dist_forward_error(d);
	red[0] = m->ce * d->weight;
	red[1] = m->aux * d->weight;
	/* every rank decides on the same flag: a signal arriving after this
	 * point counts at the next step */
	*sig = train_stop_signal;
	red[2] = *sig ? 1.0 : 0.0;
	if (rc == 0)
		rc = dist_grad_finish(d);
	/* the losses and the flag ride on the gradient norm's reduction */
	if (rc == 0)
		rc = dist_stage_mean_later(d, red, 3);
	if (rc) {
		sigma_error("step %ld: gradient all-reduce failed: %s", s + 1,
			    strerror(-rc));
		return TRAIN_EXIT_PEER;
	}
	comm_since(d, c0, rec.comm_ns);
	rec.compute_ns = busy;
	rec.messages = comm_messages() - msg0;
	rec.ovl = (struct dist_overlap){ d->ovl.waits - ovl0.waits,
					 d->ovl.floats - ovl0.floats,
					 d->ovl.ns - ovl0.ns };
	tuner_record(&t->tu, &rec);
	return 0;
}

/* the step's gradient norm, with its losses and flag (red) reduced in the
 * same message: 0, or an exit code */
static int step_norm(struct trainer *t, long done, double red[3], double *gn)
{
	struct model *m = t->m;

	*gn = model_grad_norm(m);
	if (dist_forward_error(t->d)) {
		sigma_error("step %ld: the gradient norm's reduction failed",
			    done);
		return TRAIN_EXIT_PEER;
	}
	m->ce = red[0];
	m->aux = red[1];
	m->loss = m->ce + m->cfg.aux_coef * m->aux;
	return 0;
}

/* one step s (0-based): 0 with out filled, or an exit code */
static int train_step(struct trainer *t, long s, struct step_out *out)
{
	struct model *m = t->m;
	long done = s + 1;
	bool recomputed = false;
	double red[3];
	unsigned gact;
	int sig, code;

	memset(out, 0, sizeof(*out));
	if (guard_skip_data(&t->gr.g, done)) {
		printf("guard: step %ld: data-window: skip\n", done);
		t->st.step = done;
		out->act = STEP_SKIPPED;
		return 0;
	}
	for (;;) {
		guard_run_begin(&t->gr, done);
		code = step_compute(t, s, red, &sig);
		if (code || (code = step_norm(t, done, red, &out->gn)))
			return code;
		gact = guard_run_check(&t->gr, done, &out->gn, recomputed);
		if (!(gact & GUARD_ACT_RECOMPUTE))
			break;
		recomputed = true;
	}
	if (t->gr.agree_rc)
		return TRAIN_EXIT_PEER;
	if (gact & (GUARD_ACT_REQUEUE | GUARD_ACT_STOP)) {
		bool hw = gact & GUARD_ACT_REQUEUE;

		sigma_error("step %ld: %s: exit %d", done,
			    hw ? "the recomputed step differs, the hardware is suspect (requeue on other nodes)"
			       : "repeated numerical trouble",
			    hw ? TRAIN_EXIT_HARDWARE : TRAIN_EXIT_DIVERGED);
		return hw ? TRAIN_EXIT_HARDWARE : TRAIN_EXIT_DIVERGED;
	}
	if (gact & GUARD_ACT_ROLLBACK) {
		out->act = STEP_ROLLBACK;
		return tiers_rollback(&t->tiers, &t->gr, done, &out->to);
	}
	if (!(gact & GUARD_ACT_SKIP) && (!isfinite(m->loss) || !isfinite(out->gn))) {
		sigma_error("step %ld: loss %g, gradient norm %g: diverged", done,
			    m->loss, out->gn);
		return TRAIN_EXIT_DIVERGED;
	}
	/* the last tier-1 copy is made before the weights change */
	if ((code = tiers_settle(&t->tiers)))
		return code;
	out->lr = optim_lr(&t->o->optim, s) *
		  (float)guard_lr_scale(&t->gr.g, done);
	out->scale = (gact & GUARD_ACT_SKIP)
			     ? 0.0f
			     : optim_step(m, &t->o->optim, out->gn, out->lr,
					  done);
	/* split moments: each rank updated its block of the parameters */
	if (!(gact & GUARD_ACT_SKIP) && dist_params_gather(t->d, m)) {
		sigma_error("step %ld: gathering the updated parameters failed",
			    done);
		return TRAIN_EXIT_PEER;
	}
	/* the memory the step's buffers gave back, freed where no
	 * collective is in flight (ops.h release) */
	if (m->ops->release)
		m->ops->release();
	t->st.step = done;
	out->act = STEP_DONE;
	out->stop = red[2] > 0 ? (sig ? sig : -2)
			       : (t->o->stop_at == done ? -1 : 0);
	return 0;
}

/*
 * Mean validation cross-entropy; a data-parallel rank evaluates its share
 * of each batch, the same batches every time (a fixed stream of the
 * seed). NAN when the ranks cannot agree (a peer failed).
 */
static double evaluate(struct trainer *t)
{
	struct model *m = t->m;
	struct dist *d = t->d;
	int nb = t->o->eval_batches;
	double s = 0.0;

	m->B = t->B; /* even shares: the same batches every time */
	m->count_weight = 1.0f;
	for (int i = 0; i < nb; i++) {
		data_batch_range(&t->val_df, t->st.seed ^ 0x76616c69646174ULL,
				 (uint64_t)i, d->me.dp_index * m->B, m->B,
				 m->cfg.T, t->tok, t->tgt);
		if (dist_forward(d, m, t->tok, t->tgt))
			return NAN;
		s += m->ce; /* 0 but on the last stage */
	}
	s /= nb;
	if (dist_forward_error(d) || dist_stage_mean(d, &s, 1))
		return NAN;
	return s;
}

/* the validation loss when due (else NAN); the step's losses kept */
static int step_eval(struct trainer *t, long done, double *val_ce)
{
	const struct train_opts *o = t->o;
	struct model *m = t->m;
	double ce = m->ce, aux = m->aux, loss = m->loss;

	*val_ce = NAN;
	if (!t->have_val || o->eval_every <= 0 ||
	    (done % o->eval_every != 0 && done != o->optim.steps))
		return 0;
	*val_ce = evaluate(t);
	if (isnan(*val_ce))
		return TRAIN_EXIT_PEER;
	printf("step %ld val_ce %.4f\n", done, *val_ce);
	m->ce = ce, m->aux = aux, m->loss = loss;
	return 0;
}

/* the checkpoints due after step done; 0 or an exit code */
static int step_checkpoint(struct trainer *t, long done, int stop)
{
	bool last = stop || done == t->o->optim.steps;

	if (tiers_due(&t->tiers, done, stop != 0)) {
		guard_state_export(&t->gr.g, &t->st.guard);
		tuner_export(&t->tu, &t->st.tuner);
	}
	return tiers_after_step(&t->tiers, done, stop != 0, last, &t->st);
}

int trainer_place(struct trainer *t, bool data)
{
	int code, rc;

	/* the checkpoints in flight read the experts' slots: done first */
	if ((code = tiers_quiesce(&t->tiers)))
		return code;
	rc = dist_move_experts(t->d, t->m, tuner_owner(&t->tu), data);
	if (rc) {
		sigma_error("moving the experts failed: %s", strerror(-rc));
		return exit_code_of(rc, PHASE_COMM);
	}
	return tiers_moved(&t->tiers);
}

/* ---- the tuner's ops: the job's collectives and the experts' move -------- */

struct tune_ctx {
	struct trainer *t;
	long done;
};

static int tune_link_probe(void *ctx, int rounds, double *ns)
{
	return dist_link_probe(((struct tune_ctx *)ctx)->t->d, rounds, ns);
}

static int tune_bucket_probe(void *ctx, long floats,
			     struct dist_bucket_cost *cost)
{
	return dist_bucket_probe(((struct tune_ctx *)ctx)->t->d,
				 (size_t)floats, cost);
}

static int tune_gather(void *ctx, const struct tuner_sample *mine,
		       struct tuner_sample *all)
{
	return dist_allgather(((struct tune_ctx *)ctx)->t->d, mine,
			      sizeof(*mine), all);
}

static int tune_routed(void *ctx, float *load)
{
	const struct tune_ctx *c = ctx;
	int rc = dist_routed_take(c->t->d, load);

	if (rc == 0)
		return 0;
	sigma_error("step %ld: the tuner's count of routed tokens failed: %s",
		    c->done, strerror(-rc));
	return TRAIN_EXIT_PEER;
}

static int tune_move_experts(void *ctx)
{
	return trainer_place(((struct tune_ctx *)ctx)->t, true);
}

/*
 * The auto-tuner after step done (tuner_after_step): a replayed decision
 * due, or every K steps the ranks' summaries (one all-gather) and what
 * they decide. The shares hold from the next step; the slow rank reports
 * its own node. 0 or an exit code.
 */
static int step_tune(struct trainer *t, long done)
{
	struct dist *d = t->d;
	struct tune_ctx c = { t, done };
	const struct tuner_ops ops = { &c, d->size, tune_link_probe,
				       tune_bucket_probe, tune_gather,
				       tune_routed, tune_move_experts };
	struct tuner_actions act;
	int rc;

	rc = tuner_after_step(&t->tu, done, &ops, d->rank == 0, &act);
	if (rc > 0)
		return rc;
	if (rc == -ENOMEM)
		return TRAIN_EXIT_OSERR;
	if (rc) {
		sigma_error("step %ld: the tuner's exchange failed: %s", done,
			    strerror(-rc));
		return TRAIN_EXIT_PEER;
	}
	if (act.exchanged) {
		slow_report_reap();
		if (act.escalate == d->rank)
			(void)slow_report_node("tuner", done, act.why);
	}
	return 0;
}

/* a stop before the last step, after its checkpoint: the exit code */
static int step_stop(const struct trainer *t, long done, int stop)
{
	const char *why = stop > 0    ? strsignal(stop)
			  : stop == -1 ? "--stop-at"
				       : "a signal to another rank";

	if (!*t->o->ckpt_dir) {
		sigma_error("stopped by %s at step %ld with no checkpoint directory: nothing saved",
			    why, done);
		return TRAIN_EXIT_UNAVAILABLE;
	}
	printf("stopped by %s at step %ld after a checkpoint: exit %d (requeue)\n",
	       why, done, TRAIN_EXIT_REQUEUE);
	return TRAIN_EXIT_REQUEUE;
}

int trainer_loop(struct trainer *t)
{
	const struct train_opts *o = t->o;
	struct step_out so;
	struct rusage ru;
	int code;

	tuner_clock_start(&t->tu);
	for (long s = t->start; s < o->optim.steps; s++) {
		long done = s + 1;
		double val_ce;

		code = train_step(t, s, &so);
		if (code)
			return code;
		if (so.act == STEP_SKIPPED)
			continue;
		if (so.act == STEP_ROLLBACK) {
			s = so.to - 1; /* the loop continues at step to + 1 */
			continue;
		}
		code = step_eval(t, done, &val_ce);
		if (code || (code = step_tune(t, done)))
			return code;
		if (done % o->log_every == 0 || done == o->optim.steps ||
		    !isnan(val_ce) || so.stop)
			report_step(&t->rep,
				    &(struct report_row){ done, so.gn, so.lr,
							  so.scale, val_ce,
							  &t->tu },
				    o, t->m, t->d, &t->gr, &t->tiers);
		code = step_checkpoint(t, done, so.stop);
		if (code)
			return code;
		sigma_jobrec_step(&t->rec, done);
		if (so.stop && done < o->optim.steps)
			return step_stop(t, done, so.stop);
	}
	getrusage(RUSAGE_SELF, &ru);
	printf("done: %ld steps, final loss %.4f ce %.4f, peak RSS %.1f MiB\n",
	       o->optim.steps, t->m->loss, t->m->ce, ru.ru_maxrss / 1024.0);
	return 0;
}
