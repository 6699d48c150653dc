/*
 * dist_pipe.c - the pipeline (dist.h): a stage's layers run over its
 * micro-batches in the order of the 1F1B schedule (trainer/comm/layout.h:
 * pipe_schedule_1f1b), activations sent to the next stage and gradients
 * to the one before it; and the forward pass alone through every stage
 * (evaluation). With one stage the schedule is each micro-batch's forward
 * then its backward, and nothing is sent.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sigma.h"
#include "dist_impl.h"
#include "tags.h"

int dist_pipe_plan(struct dist *d, char *err, size_t len)
{
	size_t max = pipe_schedule_max(d->micro);
	int rc;

	d->sched = calloc(max, sizeof(*d->sched));
	if (!d->sched)
		return sigma_set_err(err, len, ENOMEM, "out of memory");
	rc = pipe_schedule_1f1b(d->me.stage, d->lp.pp, d->micro, d->sched,
				max, &d->nsched);
	if (rc)
		return sigma_set_err(err, len, -rc,
				     "cannot plan the pipeline schedule: %s",
				     strerror(-rc));
	return 0;
}

void dist_pipe_fini(struct dist *d)
{
	free(d->sched);
	d->sched = NULL;
}

/* one transfer of the schedule, between neighbouring stages */
static int pipe_xfer(struct dist *d, struct model *m,
		     const struct pipe_action *a)
{
	size_t ND = (size_t)m->B * m->cfg.T * m->cfg.D;
	int s = d->me.stage, l0 = d->me.layer_first;
	int l1 = l0 + d->me.layer_count;
	struct model_acts *x = &m->acts[a->micro];
	struct model_acts *y = a->micro2 >= 0 ? &m->acts[a->micro2] : NULL;

	switch (a->op) {
	case PIPE_RECV_ACT:
		return comm_recv(d->tpp, x->x + l0 * ND, ND, COMM_F32, s - 1,
				 SIGMA_TAG_PIPE);
	case PIPE_SEND_ACT:
		return comm_send(d->tpp, x->x + l1 * ND, ND, COMM_F32, s + 1,
				 SIGMA_TAG_PIPE);
	case PIPE_RECV_GRAD:
		return comm_recv(d->tpp, x->dx, ND, COMM_F32, s + 1,
				 SIGMA_TAG_PIPE);
	case PIPE_SEND_GRAD:
		return comm_send(d->tpp, x->dx, ND, COMM_F32, s - 1,
				 SIGMA_TAG_PIPE);
	case PIPE_SEND_ACT_RECV_GRAD:
		return comm_sendrecv(d->tpp, x->x + l1 * ND, ND, s + 1, y->dx,
				     ND, s + 1, COMM_F32, SIGMA_TAG_PIPE);
	case PIPE_SEND_GRAD_RECV_ACT:
		return comm_sendrecv(d->tpp, x->dx, ND, s - 1, y->x + l0 * ND,
				     ND, s - 1, COMM_F32, SIGMA_TAG_PIPE);
	default:
		return -EINVAL;
	}
}

int dist_step(struct dist *d, struct model *m, const int32_t *tok,
	      const int32_t *tgt)
{
	size_t N = (size_t)m->B * m->cfg.T;
	int l0 = d->me.layer_first, l1 = l0 + d->me.layer_count, rc = 0;
	float scale = d->weight / (float)d->micro;
	double ce = 0.0, aux = 0.0;

	d->ep_err = 0;
	model_zero_grads(m);
	dist_grad_begin(d, m);
	for (size_t i = 0; i < d->nsched && rc == 0; i++) {
		const struct pipe_action *a = &d->sched[i];
		uint64_t t0;

		if (a->op == PIPE_FWD || a->op == PIPE_BWD) {
			model_use_acts(m, a->micro);
			d->act = a->micro;
			if (a->op == PIPE_FWD) {
				model_forward_part(m, l0, l1,
						   tok + a->micro * N,
						   tgt + a->micro * N);
				ce += m->ce;
				aux += m->aux;
			} else {
				model_backward_part(m, l0, l1, scale);
			}
			rc = d->ep_err;
			continue;
		}
		t0 = dist_now_ns();
		rc = pipe_xfer(d, m, a);
		dist_comm_done(d, DIST_C_PIPE, t0);
	}
	m->ce = ce / d->micro;
	m->aux = aux / d->micro;
	m->loss = m->ce + m->cfg.aux_coef * m->aux;
	d->ep_err = 0;
	return rc;
}

int dist_forward(struct dist *d, struct model *m, const int32_t *tok,
		 const int32_t *tgt)
{
	size_t ND = (size_t)m->B * m->cfg.T * m->cfg.D;
	int s = d->me.stage, l0 = d->me.layer_first;
	int l1 = l0 + d->me.layer_count, rc = 0;
	uint64_t t0;

	d->ep_err = 0;
	model_use_acts(m, 0);
	d->act = 0;
	if (s > 0) {
		t0 = dist_now_ns();
		rc = comm_recv(d->tpp, model_act_x(m, l0), ND, COMM_F32, s - 1,
			       SIGMA_TAG_PIPE);
		dist_comm_done(d, DIST_C_PIPE, t0);
		if (rc)
			return rc;
	}
	model_forward_part(m, l0, l1, tok, tgt);
	rc = d->ep_err;
	d->ep_err = 0;
	if (rc == 0 && s < d->lp.pp - 1) {
		t0 = dist_now_ns();
		rc = comm_send(d->tpp, model_act_x(m, l1), ND, COMM_F32, s + 1,
			       SIGMA_TAG_PIPE);
		dist_comm_done(d, DIST_C_PIPE, t0);
	}
	return rc;
}
