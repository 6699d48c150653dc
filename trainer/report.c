/*
 * report.c - sigma-train's configuration lines, progress line and metrics
 * CSV (report.h).
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sigma.h"
#include "exitcodes.h"
#include "blas_pick.h"
#include "ckpt_h5.h"
#include "report.h"

/* ---- at start ------------------------------------------------------------ */

static double unigram_entropy(const struct data_file *df)
{
	uint64_t *cnt = calloc(df->vocab, sizeof(uint64_t));
	double h = 0.0;

	if (!cnt)
		return NAN;
	for (uint64_t i = 0; i < df->ntokens; i++)
		cnt[data_token(df, i)]++;
	for (uint32_t v = 0; v < df->vocab; v++) {
		if (cnt[v]) {
			double p = (double)cnt[v] / (double)df->ntokens;

			h -= p * log(p);
		}
	}
	free(cnt);
	return h;
}

void report_config(const struct train_opts *o, const struct model *m,
		   const struct data_file *train)
{
	const struct model_config *c = &m->cfg;
	double entropy = unigram_entropy(train);
	char be[256], hv[64];

	m->ops->describe(be, sizeof(be));
	ckpt_h5_version(hv, sizeof(hv));
	printf("sigma-train %s (git %s), %s, %s\n", PACKAGE_VERSION,
	       SIGMA_GIT_REVISION, be, hv);
	blas_pick_describe(be, sizeof(be));
	printf("config: %s\n", be);
	printf("config: V=%d D=%d L=%d H=%d T=%d E=%d K=%d F=%d aux_coef=%g\n",
	       c->V, c->D, c->L, c->H, c->T, c->E, c->K, c->F,
	       (double)c->aux_coef);
	printf("config: batch=%d (%d per micro-batch and rank) steps=%ld lr=%g warmup=%ld lr_min_ratio=%g weight_decay=%g clip=%g seed=%llu\n",
	       o->batch, m->B, o->optim.steps, (double)o->optim.lr, o->optim.warmup,
	       (double)o->optim.lr_min_ratio, (double)o->optim.weight_decay,
	       (double)o->optim.clip, (unsigned long long)o->seed);
	printf("config: params=%zu active_params/token=%.0f flops/token=%.4g arena=%.1f MiB\n",
	       m->nparams, model_active_params(c), model_flops_per_token(c),
	       (double)m->arena_bytes / (1 << 20));
	printf("config: train=%s (%llu tokens, unigram entropy %.4f nats) val=%s\n",
	       o->train_path, (unsigned long long)train->ntokens, entropy,
	       *o->val_path ? o->val_path : "none");
	printf("config: ckpt_dir=%s ckpt_every=%ld ckpt_keep=%d eval_every=%ld log_every=%ld metrics=%s resume=%s\n",
	       *o->ckpt_dir ? o->ckpt_dir : "none", o->ckpt_every,
	       o->ckpt_keep, o->eval_every, o->log_every,
	       *o->metrics_path ? o->metrics_path : "none",
	       o->resume ? "yes" : "no");
	fflush(stdout);
}

int report_open(struct report *r, const struct train_opts *o,
		const struct model *m, const struct dist *d, long start)
{
	const char *path = o->metrics_path;
	bool fresh;

	memset(r, 0, sizeof(*r));
	r->flops_tok = model_flops_per_token(&m->cfg);
	r->start = r->s_last = start;
	if (!*path || d->rank != 0)
		return 0;
	fresh = access(path, F_OK) != 0 || start == 0;
	r->metrics = fopen(path, fresh ? "w" : "a");
	if (!r->metrics) {
		sigma_error("%s: cannot open for writing: %s", path,
			    strerror(errno));
		return TRAIN_EXIT_CANTCREAT;
	}
	if (fresh)
		fprintf(r->metrics,
			"step,loss,ce,aux,lr,grad_norm,clip_scale,tokens_per_s,gflops,val_ce,elapsed_s,step_ms,comm_ms,ckpt_stall_ms,ckpt_write_ms"
			",tuner_slowest_rank,tuner_slowest_ratio,tuner_compute_per_allreduce,tuner_compute_per_alltoall,tuner_compute_per_pipe,tuner_decisions"
			GUARD_METRICS_HEADER ",epoch_s\n");
	return 0;
}

int report_close(struct report *r)
{
	int rc = r->metrics && fclose(r->metrics) != 0;

	r->metrics = NULL;
	return rc ? TRAIN_EXIT_CANTCREAT : 0;
}

/* ---- every --log-every steps --------------------------------------------- */

static void fmt_eta(char *buf, size_t len, double sec)
{
	long s = (long)(sec + 0.5);

	if (!(sec >= 0) || sec > 1e8)
		snprintf(buf, len, "--:--:--");
	else
		snprintf(buf, len, "%02ld:%02ld:%02ld", s / 3600,
			 s / 60 % 60, s % 60);
}

/* the wall clock (Unix time, s): a row's stamp, comparable with the job's
 * and sigmad's, across relaunches and requeues (elapsed_s restarts) */
static double wall_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* aw: the shared tier's writer, a1: this rank's tier-1 one (or NULL) */
static void metrics_ckpt(FILE *f, struct ckpt_async *aw,
			 struct ckpt_async *a1, struct ckpt_times *ct)
{
	struct ckpt_async_stats cs;

	if (aw) {
		ckpt_async_stats(aw, &cs);
		if (cs.writes + cs.lost > ct->finished) {
			ct->write_ms = cs.write_ms;
			ct->finished = cs.writes + cs.lost;
		}
	}
	if (a1) {
		ckpt_async_stats(a1, &cs);
		if (cs.writes + cs.lost > ct->finished1) {
			if (isnan(ct->write_ms) || cs.write_ms > ct->write_ms)
				ct->write_ms = cs.write_ms;
			ct->finished1 = cs.writes + cs.lost;
		}
	}
	fputc(',', f);
	if (!isnan(ct->stall_ms))
		fprintf(f, "%.3f", ct->stall_ms);
	fputc(',', f);
	if (!isnan(ct->write_ms))
		fprintf(f, "%.3f", ct->write_ms);
	ct->stall_ms = ct->write_ms = NAN;
}

void report_step(struct report *r, const struct report_row *row,
		 const struct train_opts *o, const struct model *m,
		 const struct dist *d, const struct guard_run *gr,
		 struct tiers *tr)
{
	struct ckpt_async *aw = tiers_writer(tr, false);
	struct ckpt_async *a1 = tiers_writer(tr, true);
	long done = row->done;
	uint64_t now = sigma_now_ns();
	double dt = (double)(now - r->t_last) / 1e9;
	/* this rank's tokens (its data-parallel share) */
	double tps = dt > 0 ? (double)(done - r->s_last) * d->micro * m->B *
				      m->cfg.T / dt
			    : 0.0;
	double gfs = tps * r->flops_tok / 1e9;
	double el = (double)(now - r->t_start) / 1e9;
	double eta = done > r->start ? el / (done - r->start) *
					       (o->optim.steps - done)
				     : NAN;
	/* per step over the interval: wall time and the part spent waiting
	 * for communication (this rank) */
	double nst = done > r->s_last ? (double)(done - r->s_last) : 1;
	double step_ms = dt * 1000.0 / nst;
	double comm_ms = (double)(d->comm_ns - r->comm_last) / 1e6 / nst;
	char etas[32], tun[256];

	fmt_eta(etas, sizeof(etas), eta);
	tuner_describe(row->tu, tun, sizeof(tun));
	printf("step %ld/%ld loss %.4f ce %.4f aux %.4f lr %.3e gnorm %.3f tok/s %.0f GFLOP/s %.1f eta %s step_ms %.1f comm_ms %.1f%s\n",
	       done, o->optim.steps, m->loss, m->ce, m->aux, (double)row->lr,
	       row->gn, tps, gfs, etas, step_ms, comm_ms, tun);
	fflush(stdout);
	if (r->metrics) {
		FILE *f = r->metrics;
		char cols[128];

		fprintf(f, "%ld,%.6f,%.6f,%.6f,%.6e,%.6f,%.6f,%.1f,%.3f,",
			done, m->loss, m->ce, m->aux, (double)row->lr, row->gn,
			(double)row->scale, tps, gfs);
		if (!isnan(row->val_ce))
			fprintf(f, "%.6f", row->val_ce);
		fprintf(f, ",%.3f,%.3f,%.3f", el, step_ms, comm_ms);
		metrics_ckpt(f, aw, a1, tiers_times(tr));
		tuner_columns(row->tu, cols, sizeof(cols));
		fputs(cols, f);
		guard_run_metrics(gr, f);
		fprintf(f, ",%.3f\n", wall_s());
		fflush(f);
	}
	if (*o->metrics_textfile && d->rank == 0) {
		struct report_prom p = { done, m->loss, tps * d->lp.dp,
					 step_ms / 1000.0, comm_ms / 1000.0 };

		report_textfile(o->metrics_textfile, &p, gr, aw, a1);
	}
	r->comm_last = d->comm_ns;
	r->t_last = now;
	r->s_last = done;
}
