/*
 * ckpt_full.c - full checkpoints (ckpt.h, docs/checkpoint-format.md):
 * written to a temporary name and published whole, read back validated
 * before anything of the model changes, the newest valid one of a
 * directory loaded; and the parts of one that a
 * differential has too (ckpt_internal.h): header, configuration, the
 * optimizer's, data and RNG state, the guard's state, provenance.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sigma.h"
#include "blas_core.h"
#include "ckpt.h"
#include "ckpt_h5.h"
#include "ckpt_internal.h"
#include "guard_state.h"
#include "run.h"
#include "seal.h"

#ifndef SIGMA_BUILD_CFLAGS
#define SIGMA_BUILD_CFLAGS "unknown"
#endif

size_t ckpt_max_tensor(const struct model *m)
{
	size_t maxn = 0;

	for (int i = 0; i < m->ntensors; i++)
		if (m->tensors[i].n > maxn)
			maxn = m->tensors[i].n;
	return maxn;
}

int ckpt_check_finite(struct ckpt_ctx *c, const char *what, const float *buf,
		      size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!isfinite(buf[i]))
			return ckpt_fail(c, EBADMSG,
					 "dataset %s holds a non-finite value at element %zu",
					 what, i);
	return 0;
}

/* ---- the guard's state --------------------------------------------------- */

/* /guard/window_*: float64 [n], the ring's storage, attribute head */
static int write_window(struct ckpt_ctx *c, int64_t g, int i,
			const struct guard_ring *r)
{
	const char *name = guard_state_window_name(i);
	uint64_t n = (uint64_t)r->n;
	char what[64];
	int64_t d;
	int rc;

	snprintf(what, sizeof(what), "guard/%s", name);
	rc = ckpt_h5_dataset_write(c, g, name, what, CKPT_H5_F64, 1, &n, 0,
				   r->v, &d);
	if (rc == 0)
		rc = ckpt_h5_set_i32(c, d, "head", r->head);
	ckpt_h5_close(d);
	return rc;
}

/* optional: absent reads as an empty window */
static int read_window(struct ckpt_ctx *c, int64_t g, int i,
		       struct guard_ring *r)
{
	const char *name = guard_state_window_name(i);
	enum ckpt_h5_type type;
	uint64_t dims[CKPT_H5_RANK_MAX], n;
	int64_t d, head = 0;
	char what[64];
	int rc, nd;

	r->n = r->head = 0;
	if (!ckpt_h5_exists(g, name))
		return 0;
	snprintf(what, sizeof(what), "guard/%s", name);
	rc = ckpt_h5_dataset_open(c, g, name, what, &d);
	if (rc)
		return rc;
	ckpt_h5_dataset_shape(d, &type, &nd, dims);
	n = nd == 1 ? dims[0] : 0;
	if (type != CKPT_H5_F64 || nd != 1 || n < 1 ||
	    n > GUARD_MAX_WINDOW) {
		rc = ckpt_fail(c, EBADMSG,
			       "dataset guard/%s is not float64 [1..%d]", name,
			       GUARD_MAX_WINDOW);
		goto out;
	}
	rc = ckpt_h5_get_i64(c, d, "head", &head);
	if (rc)
		goto out;
	if (head < 0 || head > (int64_t)n) {
		rc = ckpt_fail(c, EBADMSG,
			       "guard/%s: head %lld outside [0, %llu]", name,
			       (long long)head, (unsigned long long)n);
		goto out;
	}
	rc = ckpt_h5_dataset_read(c, d, what, CKPT_H5_F64, r->v);
	if (rc)
		goto out;
	r->n = (int)n;
	r->head = (int)head;
out:
	ckpt_h5_close(d);
	return rc;
}

/* /guard: the counters as attributes, the windows that hold values */
static int write_guard(struct ckpt_ctx *c, int64_t f,
		       const struct guard_state *gs)
{
	int64_t g;
	int rc = 0;

	if (gs->n <= 0)
		return 0;
	g = ckpt_h5_group_create(f, "guard");
	if (g < 0)
		return ckpt_fail(c, EIO, "cannot create group guard");
	for (int i = 0; !rc && i < gs->n && i < GUARD_STATE_N; i++)
		rc = ckpt_h5_set_i64(c, g, guard_state_name(i), gs->v[i]);
	for (int i = 0; !rc && i < GUARD_STATE_WINDOWS; i++)
		if (gs->win[i].n > 0)
			rc = write_window(c, g, i, &gs->win[i]);
	ckpt_h5_close(g);
	return rc;
}

/* optional, and so is each value: those it lacks read as 0 */
static int read_guard(struct ckpt_ctx *c, int64_t f, struct guard_state *gs)
{
	int64_t g;
	int rc = 0;

	gs->n = 0;
	for (int i = 0; i < GUARD_STATE_WINDOWS; i++)
		gs->win[i].n = gs->win[i].head = 0;
	if (!ckpt_h5_exists(f, "guard"))
		return 0;
	g = ckpt_h5_group_open(f, "guard");
	if (g < 0)
		return ckpt_fail(c, EBADMSG, "cannot open group guard");
	for (int i = 0; !rc && i < GUARD_STATE_N; i++) {
		gs->v[i] = 0;
		if (ckpt_h5_has_attr(g, guard_state_name(i)))
			rc = ckpt_h5_get_i64(c, g, guard_state_name(i),
					     &gs->v[i]);
	}
	for (int i = 0; !rc && i < GUARD_STATE_WINDOWS; i++)
		rc = read_window(c, g, i, &gs->win[i]);
	ckpt_h5_close(g);
	gs->n = rc ? 0 : GUARD_STATE_N;
	return rc;
}

/* ---- the auto-tuner's state ---------------------------------------------- */

/* /tuner: attributes shares ("a,b,...", one per data-parallel rank; "-"
 * even), decisions ("STEP:a,b,...;" each), moves ("L:A-B;" each, the
 * experts' swaps) and buckets (floats per gradient bucket, when the tuner
 * chose them); absent while the shares are even, no expert moved and the
 * buckets are the options' */
static int write_tuner(struct ckpt_ctx *c, int64_t f,
		       const struct tuner_state *ts)
{
	char list[TUNER_MAX_DP * 8] = "-";
	size_t o = 0;
	int64_t g;
	int rc;

	if (ts->n <= 0 && !ts->moves[0] && ts->bucket <= 0)
		return 0;
	for (int r = 0; r < ts->n && r < TUNER_MAX_DP; r++)
		o += (size_t)snprintf(list + o, sizeof(list) - o, "%s%d",
				      r ? "," : "", ts->shares[r]);
	g = ckpt_h5_group_create(f, "tuner");
	if (g < 0)
		return ckpt_fail(c, EIO, "cannot create group tuner");
	rc = ckpt_h5_set_str(c, g, "shares", list) ?:
	     ckpt_h5_set_str(c, g, "decisions", ts->log[0] ? ts->log : "-") ?:
	     (ts->moves[0] ? ckpt_h5_set_str(c, g, "moves", ts->moves) : 0) ?:
	     (ts->bucket > 0 ? ckpt_h5_set_i64(c, g, "buckets", ts->bucket)
			     : 0);
	ckpt_h5_close(g);
	return rc;
}

/* tuner/buckets: at least one float */
static int read_buckets(struct ckpt_ctx *c, int64_t g, struct tuner_state *ts)
{
	int64_t v;
	int rc = ckpt_h5_get_i64(c, g, "buckets", &v);

	if (rc)
		return rc;
	if (v < 1)
		return ckpt_fail(c, EBADMSG,
				 "tuner/buckets %lld is not a number of floats",
				 (long long)v);
	ts->bucket = (long)v;
	return 0;
}

/* optional; the shares checked against the layout by the tuner */
static int read_tuner(struct ckpt_ctx *c, int64_t f, struct tuner_state *ts)
{
	char list[TUNER_MAX_DP * 8], *p, *end;
	int64_t g;
	int rc;

	ts->n = 0;
	ts->log[0] = '\0';
	ts->moves[0] = '\0';
	ts->bucket = 0;
	if (!ckpt_h5_exists(f, "tuner"))
		return 0;
	g = ckpt_h5_group_open(f, "tuner");
	if (g < 0)
		return ckpt_fail(c, EBADMSG, "cannot open group tuner");
	rc = ckpt_h5_get_str(c, g, "shares", list, sizeof(list)) ?:
	     ckpt_h5_get_str(c, g, "decisions", ts->log, sizeof(ts->log)) ?:
	     (ckpt_h5_has_attr(g, "moves")
		      ? ckpt_h5_get_str(c, g, "moves", ts->moves,
					sizeof(ts->moves))
		      : 0) ?:
	     (ckpt_h5_has_attr(g, "buckets") ? read_buckets(c, g, ts) : 0);
	ckpt_h5_close(g);
	if (rc)
		return rc;
	if (!strcmp(ts->log, "-"))
		ts->log[0] = '\0';
	if (!strcmp(list, "-"))
		return 0; /* even shares; the moves are checked by the tuner */
	for (p = list; *p; p = *end ? end + 1 : end) {
		long v = strtol(p, &end, 10);

		if (end == p || (*end && *end != ',') || v < 1 || v > 65536 ||
		    ts->n == TUNER_MAX_DP) {
			ts->n = 0;
			return ckpt_fail(c, EBADMSG,
					 "tuner/shares \"%.64s\" is not a list of at most %d numbers in [1, 65536]",
					 list, TUNER_MAX_DP);
		}
		ts->shares[ts->n++] = (int)v;
	}
	return 0;
}

/* ---- write ---------------------------------------------------------------- */

int ckpt_write_header(struct ckpt_ctx *c, int64_t f, const char *format,
		      int version, const struct ckpt_state *st)
{
	return ckpt_h5_set_str(c, f, "format", format) ?:
	       ckpt_h5_set_i32(c, f, "format_version", version) ?:
	       ckpt_h5_set_i64(c, f, "step", st->step) ?:
	       ckpt_h5_set_i32(c, f, "attempt", st->attempt) ?:
	       (st->layout[0] ? ckpt_h5_set_str(c, f, "layout", st->layout)
			      : 0) ?:
	       (st->run[0] ? ckpt_h5_set_str(c, f, "run_id", st->run) : 0);
}

/* /experts/owner [L, E]: the ep rank of each expert, /experts/ep; none
 * when one rank holds every expert */
static int write_placement(struct ckpt_ctx *c, int64_t f, const struct model *m)
{
	const struct model_shard *s = &m->shard;
	const size_t n = (size_t)m->cfg.L * m->cfg.E;
	const uint64_t shape[2] = { (uint64_t)m->cfg.L, (uint64_t)m->cfg.E };
	uint32_t *own;
	int64_t g;
	int rc;

	if (!s->owner || s->owner_ep <= 1)
		return 0;
	own = malloc(sizeof(*own) * n);
	if (!own)
		return ckpt_fail(c, ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++)
		own[i] = (uint32_t)s->owner[i];
	g = ckpt_h5_group_create(f, "experts");
	rc = g < 0 ? ckpt_fail(c, EIO, "cannot create group experts")
		   : ckpt_h5_set_i32(c, g, "ep", s->owner_ep) ?:
		     ckpt_h5_dataset_write(c, g, "owner", "experts/owner",
					   CKPT_H5_U32, 2, shape, 0, own, NULL);
	ckpt_h5_close(g);
	free(own);
	return rc;
}

int ckpt_write_config(struct ckpt_ctx *c, int64_t f, const struct model *m,
		      const struct ckpt_state *st)
{
	const struct model_config *k = &m->cfg;
	int64_t g = ckpt_h5_group_create(f, "config");
	int rc;

	if (g < 0)
		return ckpt_fail(c, EIO, "cannot create group config");
	rc = ckpt_h5_set_i32(c, g, "V", k->V) ?:
	     ckpt_h5_set_i32(c, g, "D", k->D) ?:
	     ckpt_h5_set_i32(c, g, "L", k->L) ?:
	     ckpt_h5_set_i32(c, g, "H", k->H) ?:
	     ckpt_h5_set_i32(c, g, "T", k->T) ?:
	     ckpt_h5_set_i32(c, g, "E", k->E) ?:
	     ckpt_h5_set_i32(c, g, "K", k->K) ?:
	     ckpt_h5_set_i32(c, g, "F", k->F) ?:
	     ckpt_h5_set_f32(c, g, "aux_coef", k->aux_coef) ?:
	     ckpt_h5_set_i32(c, g, "batch", st ? st->batch : m->B);
	ckpt_h5_close(g);
	return rc ?: write_placement(c, f, m);
}

/* ---- the groups' attributes, one table each (ckpt_h5.h) ------------------ */

#define OPT(name, type, member) CKPT_FIELD(name, type, struct optim_config, member)
static const struct ckpt_field optim_fields[] = {
    OPT("lr", CKPT_FIELD_F32, lr),
    OPT("lr_min_ratio", CKPT_FIELD_F32, lr_min_ratio),
    OPT("warmup", CKPT_FIELD_LONG, warmup),
    OPT("steps", CKPT_FIELD_LONG, steps),
    OPT("beta1", CKPT_FIELD_F32, beta1),
    OPT("beta2", CKPT_FIELD_F32, beta2),
    OPT("eps", CKPT_FIELD_F32, eps),
    OPT("weight_decay", CKPT_FIELD_F32, weight_decay),
    OPT("clip", CKPT_FIELD_F32, clip),
};
#undef OPT

/* /data: also sampler (written) and next_step (the step, checked) */
#define ST(name, type, member) CKPT_FIELD(name, type, struct ckpt_state, member)
static const struct ckpt_field data_fields[] = {
    ST("seed", CKPT_FIELD_U64, seed),
    ST("batch", CKPT_FIELD_INT, batch),
    ST("train_ntokens", CKPT_FIELD_U64, data_ntokens),
    ST("train_checksum", CKPT_FIELD_U64, data_checksum),
};

/* /rng: also algorithm (written) */
static const struct ckpt_field rng_fields[] = {
    ST("state", CKPT_FIELD_U64, rng),
};
#undef ST

#define NFIELDS(t) (sizeof(t) / sizeof(*(t)))

/* data position, RNG state and the guard's */
static int write_position(struct ckpt_ctx *c, int64_t f,
			  const struct ckpt_state *st)
{
	int64_t g;
	int rc;

	g = ckpt_h5_group_create(f, "data");
	if (g < 0)
		return ckpt_fail(c, EIO, "cannot create group data");
	rc = ckpt_h5_set_str(c, g, "sampler", "hash3-v1") ?:
	     ckpt_h5_set_i64(c, g, "next_step", st->step) ?:
	     ckpt_h5_set_fields(c, g, data_fields, NFIELDS(data_fields), st);
	ckpt_h5_close(g);
	if (rc)
		return rc;
	g = ckpt_h5_group_create(f, "rng");
	if (g < 0)
		return ckpt_fail(c, EIO, "cannot create group rng");
	rc = ckpt_h5_set_str(c, g, "algorithm", "splitmix64") ?:
	     ckpt_h5_set_fields(c, g, rng_fields, NFIELDS(rng_fields), st);
	ckpt_h5_close(g);
	return rc ?: write_guard(c, f, &st->guard) ?:
		     write_tuner(c, f, &st->tuner);
}

static int write_provenance(struct ckpt_ctx *c, int64_t f,
			    const struct model *m)
{
	char ver[64], host[256] = "", when[64];
	time_t now = time(NULL);
	struct tm tmv;
	int64_t g;
	int rc;

	ckpt_h5_version(ver, sizeof(ver));
	gethostname(host, sizeof(host) - 1);
	gmtime_r(&now, &tmv);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tmv);
	g = ckpt_h5_group_create(f, "provenance");
	if (g < 0)
		return ckpt_fail(c, EIO, "cannot create group provenance");
	rc = ckpt_h5_set_str(c, g, "program", "sigma-train") ?:
	     ckpt_h5_set_str(c, g, "version", PACKAGE_VERSION) ?:
	     ckpt_h5_set_str(c, g, "git_revision", SIGMA_GIT_REVISION) ?:
	     ckpt_h5_set_str(c, g, "build_flags", SIGMA_BUILD_CFLAGS) ?:
	     ckpt_h5_set_str(c, g, "hdf5_version", ver) ?:
	     ckpt_h5_set_str(c, g, "kernels", m->ops->name) ?:
	     ckpt_h5_set_str(c, g, "blas_kernel", blas_core_now()) ?:
	     ckpt_h5_set_str(c, g, "hostname", host) ?:
	     ckpt_h5_set_str(c, g, "created", when);
	ckpt_h5_close(g);
	return rc;
}

/* the optimizer's settings, as attributes of the group of moments */
static int write_optim(struct ckpt_ctx *c, int64_t f,
		       const struct ckpt_state *st)
{
	const struct optim_config *o = &st->optim;
	int64_t og = ckpt_h5_group_open(f, "optim");
	int rc;

	if (og < 0)
		return ckpt_fail(c, EIO, "cannot open group optim");
	rc = ckpt_h5_set_str(c, og, "algorithm", "adamw") ?:
	     ckpt_h5_set_fields(c, og, optim_fields, NFIELDS(optim_fields),
				o) ?:
	     ckpt_h5_set_i64(c, og, "t", st->step);
	ckpt_h5_close(og);
	return rc;
}

int ckpt_write_state(struct ckpt_ctx *c, int64_t f, const struct model *m,
		     const struct ckpt_state *st)
{
	return write_optim(c, f, st) ?: write_position(c, f, st) ?:
	       write_provenance(c, f, m);
}

int ckpt_write_block(struct ckpt_ctx *c, int64_t f, const char *gname,
		     const struct model *m, const float *block, bool staged,
		     unsigned which, float *host)
{
	int64_t g = ckpt_h5_group_create(f, gname);
	int rc = 0;

	if (g < 0)
		return ckpt_fail(c, EIO, "cannot create group %s", gname);
	for (int i = 0; i < m->ntensors && !rc; i++) {
		const struct model_tensor *t = &m->tensors[i];
		const float *data = block + t->offset;

		if (!(which & (t->expert ? CKPT_EXPERTS : CKPT_DENSE)))
			continue;

		if (!staged) {
			m->ops->to_host(host, data, sizeof(float) * t->n);
			data = host;
		}
		rc = ckpt_h5_dataset_write(c, g, t->name, t->name,
					   CKPT_H5_F32, t->ndim, t->shape, 0,
					   data, NULL);
	}
	ckpt_h5_close(g);
	return rc;
}

int ckpt_not_stale(const char *dir, const struct ckpt_state *st, char *err,
		   size_t len)
{
	int attempt = 0;
	long step = ckpt_newest(dir, &attempt);
	struct run_manifest rm;
	char why[512];

	if (st->run[0] && run_read(dir, &rm, why, sizeof(why)) == 0 &&
	    strcmp(rm.id, st->run))
		return sigma_set_err(err, len, ESTALE,
				     "%s now holds run %s: this instance of run %s does not publish step %ld there",
				     dir, rm.id, st->run, st->step);
	if (step >= 0 && attempt > st->attempt)
		return sigma_set_err(err, len, ESTALE,
				     "%s holds step %ld of attempt %d, newer than this instance's attempt %d: an old instance of the job, it does not publish step %ld",
				     dir, step, attempt, st->attempt,
				     st->step);
	return 0;
}

/* the checks before a file is made: a name, a directory, room */
static int write_prepare(const char *dir, const struct model *m,
			 const struct ckpt_state *st, char *final,
			 size_t flen, char *err, size_t len)
{
	if (st->step < 0 || st->step > 99999999L || st->attempt < 0 ||
	    st->attempt > CKPT_ATTEMPT_MAX)
		return sigma_set_err(err, len, EINVAL,
				     "step %ld of attempt %d cannot be named",
				     st->step, st->attempt);
	if (ckpt_path(final, flen, dir, st->step, st->attempt))
		return sigma_set_err(err, len, ENAMETOOLONG,
				     "%s: checkpoint path too long", dir);
	return ckpt_write_ready(dir, m->nparams, st, err, len);
}

int ckpt_write_ready(const char *dir, size_t n, const struct ckpt_state *st,
		     char *err, size_t len)
{
	int rc = sigma_mkdir_p(dir, 0755);

	if (rc)
		return sigma_set_err(err, len, -rc, "%s: cannot create: %s",
				     dir, strerror(-rc));
	return ckpt_not_stale(dir, st, err, len) ?:
	       ckpt_h5_check_room(dir, n, st->step, err, len);
}

int ckpt_write_staged(const char *dir, const struct model *m,
		      const float *stage, const struct ckpt_state *st,
		      char *path, size_t plen, char *err, size_t len)
{
	const size_t n = m->nparams;
	char tmp[PATH_MAX], final[PATH_MAX];
	struct ckpt_ctx c = { tmp, err, len };
	float *host = NULL;
	int64_t f = -1, g;
	int rc;

	ckpt_h5_quiet();
	tmp[0] = '\0';
	if (!stage && m->zero)
		return sigma_set_err(err, len, EINVAL,
				     "the moments are split over the ranks: a checkpoint is written from a stage its rank gathered");
	rc = write_prepare(dir, m, st, final, sizeof(final), err, len);
	if (rc)
		return rc;
	host = malloc(sizeof(float) * ckpt_max_tensor(m));
	if (!host)
		return sigma_set_err(err, len, ENOMEM, "out of memory");
	rc = ckpt_h5_create_tmp(&c, dir, final, tmp, sizeof(tmp), &f);
	if (rc)
		goto out;
	rc = ckpt_write_header(&c, f, CKPT_FORMAT, CKPT_VERSION, st) ?:
	     ckpt_write_config(&c, f, m, st) ?:
	     ckpt_write_block(&c, f, "model", m, stage ? stage : m->params,
			      stage != NULL, CKPT_ALL, host);
	if (rc)
		goto out;
	g = ckpt_h5_group_create(f, "optim");
	if (g < 0) {
		rc = ckpt_fail(&c, EIO, "cannot create group optim");
		goto out;
	}
	ckpt_h5_close(g);
	rc = ckpt_write_block(&c, f, "optim/m", m, stage ? stage + n : m->m,
			      stage != NULL, CKPT_ALL, host) ?:
	     ckpt_write_block(&c, f, "optim/v", m,
			      stage ? stage + 2 * n : m->v, stage != NULL,
			      CKPT_ALL, host) ?:
	     ckpt_write_state(&c, f, m, st);
out:
	rc = ckpt_write_end(&c, rc, &f, dir, final, st, n, "checkpoint", path,
			    plen);
	free(host);
	return rc;
}

int ckpt_write_end(struct ckpt_ctx *c, int rc, int64_t *f, const char *dir,
		   const char *final, const struct ckpt_state *st, size_t n,
		   const char *what, char *path, size_t plen)
{
	int saved;

	/* a newer instance may have published while this one wrote */
	if (rc == 0)
		rc = ckpt_h5_publish(c, f, dir, final, st, ckpt_not_stale);
	if (rc == 0 && path)
		sigma_strlcpy(path, final, plen);
	saved = errno;
	return ckpt_h5_finish_failed(rc, saved, *f, c->path, dir, n, what,
				     st->step, c->err, c->len);
}

int ckpt_write(const char *dir, const struct model *m,
	       const struct ckpt_state *st, char *path, size_t plen,
	       char *err, size_t len)
{
	return ckpt_write_staged(dir, m, NULL, st, path, plen, err, len);
}

/* ---- read ----------------------------------------------------------------- */

int ckpt_check_format(struct ckpt_ctx *c, int64_t f, const char *want,
		      int version)
{
	char fmt[64];
	int64_t ver = 0, complete = 0;
	int rc;

	rc = ckpt_h5_get_str(c, f, "format", fmt, sizeof(fmt));
	if (rc)
		return rc;
	if (strcmp(fmt, want))
		return ckpt_fail(c, EBADMSG, "format is \"%s\", not \"%s\"",
				 fmt, want);
	rc = ckpt_h5_get_i64(c, f, "format_version", &ver);
	if (rc)
		return rc;
	if (ver < 1 || ver > version)
		return ckpt_fail(c, EBADMSG,
				 "format version %lld, this program reads 1 to %d",
				 (long long)ver, version);
	if (!ckpt_h5_has_attr(f, "complete") ||
	    ckpt_h5_get_i64(c, f, "complete", &complete) || complete != 1)
		return ckpt_fail(c, EBADMSG, "not marked complete");
	return 0;
}

int ckpt_check_header(struct ckpt_ctx *c, int64_t f, int64_t *step)
{
	int rc = ckpt_check_format(c, f, CKPT_FORMAT, CKPT_VERSION_SHARDED);

	if (rc)
		return rc;
	if (step) {
		rc = ckpt_h5_get_i64(c, f, "step", step);
		if (rc)
			return rc;
		if (*step < 0)
			return ckpt_fail(c, EBADMSG, "negative step %lld",
					 (long long)*step);
	}
	return 0;
}

/* /provenance/blas_kernel: a kernel's name, letters, digits and _ */
static int read_blas_kernel(struct ckpt_ctx *c, int64_t f,
			    struct ckpt_state *st)
{
	int64_t g;
	int rc = 0;

	st->blas_kernel[0] = '\0';
	if (!ckpt_h5_exists(f, "provenance"))
		return 0;
	g = ckpt_h5_group_open(f, "provenance");
	if (g < 0)
		return ckpt_fail(c, EBADMSG, "cannot open group provenance");
	if (ckpt_h5_has_attr(g, "blas_kernel"))
		rc = ckpt_h5_get_str(c, g, "blas_kernel", st->blas_kernel,
				     sizeof(st->blas_kernel));
	ckpt_h5_close(g);
	for (const char *p = st->blas_kernel; rc == 0 && *p; p++)
		if (!isalnum((unsigned char)*p) && *p != '_')
			rc = ckpt_fail(c, EBADMSG,
				       "provenance/blas_kernel is not a kernel's name");
	return rc;
}

int ckpt_read_origin(struct ckpt_ctx *c, int64_t f, struct ckpt_state *st)
{
	int64_t a = 0;
	int rc;

	st->attempt = 0;
	st->layout[0] = '\0';
	if (ckpt_h5_has_attr(f, "attempt")) {
		rc = ckpt_h5_get_i64(c, f, "attempt", &a);
		if (rc)
			return rc;
		if (a < 0 || a > CKPT_ATTEMPT_MAX)
			return ckpt_fail(c, EBADMSG, "attempt %lld out of range",
					 (long long)a);
		st->attempt = (int)a;
	}
	if (ckpt_h5_has_attr(f, "layout")) {
		rc = ckpt_h5_get_str(c, f, "layout", st->layout,
				     sizeof(st->layout));
		if (rc)
			return rc;
	}
	rc = read_blas_kernel(c, f, st);
	if (rc)
		return rc;
	st->run[0] = '\0';
	if (ckpt_h5_has_attr(f, "run_id")) {
		rc = ckpt_h5_get_str(c, f, "run_id", st->run, sizeof(st->run));
		if (rc)
			return rc;
		if (!run_id_valid(st->run))
			return ckpt_fail(c, EBADMSG,
					 "run_id \"%.*s\" is not a run id",
					 RUN_ID_MAX - 1, st->run);
	}
	return 0;
}

int ckpt_check_config(struct ckpt_ctx *c, int64_t f,
		      const struct model_config *k)
{
	static const char *const names[] = { "V", "D", "L", "H",
					     "T", "E", "K", "F" };
	const int want[] = { k->V, k->D, k->L, k->H, k->T, k->E, k->K, k->F };
	int64_t g;
	int rc = 0;

	if (!ckpt_h5_exists(f, "config"))
		return ckpt_fail(c, EBADMSG, "group config is missing");
	g = ckpt_h5_group_open(f, "config");
	if (g < 0)
		return ckpt_fail(c, EBADMSG, "cannot open group config");
	for (int i = 0; i < 8 && !rc; i++) {
		int64_t v;

		rc = ckpt_h5_get_i64(c, g, names[i], &v);
		if (!rc && v != want[i])
			rc = ckpt_fail(c, EBADMSG,
				       "config %s = %lld, this run has %d: a checkpoint of another model shape",
				       names[i], (long long)v, want[i]);
	}
	ckpt_h5_close(g);
	return rc;
}

static int read_tensor(struct ckpt_ctx *c, int64_t g, const char *gname,
		       const struct model *m, const struct model_tensor *t,
		       float *buf)
{
	char what[128];
	int64_t d;
	int rc;

	snprintf(what, sizeof(what), "%s/%s", gname, t->name);
	rc = ckpt_h5_dataset_open(c, g, t->name, what, &d);
	if (rc)
		return rc;
	/* a shard of expert rows reads its rows of the whole tensor */
	if (t->shape[0] != t->rows &&
	    !ckpt_h5_check_tensor(c, d, what, CKPT_H5_F32, t->ndim,
				  (uint64_t[3]){ t->rows, t->shape[1],
						 t->shape[2] })) {
		uint64_t rows[MODEL_MAX_E];

		for (uint64_t j = 0; j < t->shape[0]; j++)
			rows[j] = model_tensor_row(m, t, j);
		rc = ckpt_h5_dataset_read_rows(c, d, what, rows, t->shape[0],
					       t->n / t->shape[0], buf);
	} else {
		rc = ckpt_h5_check_tensor(c, d, what, CKPT_H5_F32, t->ndim,
					  t->shape) ?:
		     ckpt_h5_dataset_read(c, d, what, CKPT_H5_F32, buf);
	}
	rc = rc ?: ckpt_check_finite(c, what, buf, t->n);
	ckpt_h5_close(d);
	return rc;
}

int ckpt_read_block(struct ckpt_ctx *c, int64_t f, const char *gname,
		    const struct model *m, float *dst)
{
	int64_t g;
	int rc = 0;

	if (!ckpt_h5_exists(f, gname))
		return ckpt_fail(c, EBADMSG, "group %s is missing", gname);
	g = ckpt_h5_group_open(f, gname);
	if (g < 0)
		return ckpt_fail(c, EBADMSG, "cannot open group %s", gname);
	for (int i = 0; i < m->ntensors && !rc; i++)
		rc = read_tensor(c, g, gname, m, &m->tensors[i],
				 dst + m->tensors[i].offset);
	ckpt_h5_close(g);
	return rc;
}

static int read_optim(struct ckpt_ctx *c, int64_t f, struct optim_config *o)
{
	int64_t g;
	int rc;

	g = ckpt_h5_group_open(f, "optim");
	if (g < 0)
		return ckpt_fail(c, EBADMSG, "cannot open group optim");
	rc = ckpt_h5_get_fields(c, g, optim_fields, NFIELDS(optim_fields), o);
	ckpt_h5_close(g);
	return rc;
}

/* data position and RNG state */
static int read_position(struct ckpt_ctx *c, int64_t f, struct ckpt_state *st)
{
	int64_t g, v64 = 0;
	int rc;

	if (!ckpt_h5_exists(f, "data") || !ckpt_h5_exists(f, "rng"))
		return ckpt_fail(c, EBADMSG, "group data or rng is missing");
	g = ckpt_h5_group_open(f, "data");
	if (g < 0)
		return ckpt_fail(c, EBADMSG, "cannot open group data");
	rc = ckpt_h5_get_i64(c, g, "next_step", &v64);
	if (!rc && v64 != st->step)
		rc = ckpt_fail(c, EBADMSG,
			       "data next_step %lld differs from step %ld",
			       (long long)v64, st->step);
	rc = rc ?: ckpt_h5_get_fields(c, g, data_fields, NFIELDS(data_fields),
				      st);
	ckpt_h5_close(g);
	if (rc)
		return rc;
	g = ckpt_h5_group_open(f, "rng");
	if (g < 0)
		return ckpt_fail(c, EBADMSG, "cannot open group rng");
	rc = ckpt_h5_get_fields(c, g, rng_fields, NFIELDS(rng_fields), st);
	ckpt_h5_close(g);
	return rc;
}

int ckpt_read_state(struct ckpt_ctx *c, int64_t f, struct ckpt_state *st)
{
	return read_optim(c, f, &st->optim) ?: read_position(c, f, st) ?:
	       read_guard(c, f, &st->guard) ?: read_tuner(c, f, &st->tuner);
}

/* out: NULL to load into m, else the caller's stage (m untouched) */
static int read_file(const char *path, enum seal_need need, bool *sealed,
		     struct model *m, struct ckpt_state *st, float *out,
		     char *err, size_t len)
{
	struct ckpt_ctx c = { path, err, len };
	size_t n = m->nparams;
	float *stage = out;
	struct ckpt_state tmp = { 0 };
	struct seal_file sf;
	int64_t step = 0, f;
	int rc;

	rc = ckpt_h5_open(&c, need, &sf, &f);
	if (rc)
		return rc;
	if (sealed)
		*sealed = sf.sealed;
	if (!stage)
		stage = malloc(sizeof(float) * n * (st ? 3 : 1));
	if (!stage) {
		rc = sigma_set_err(err, len, ENOMEM, "out of memory");
		goto out;
	}
	memset(stage, 0, sizeof(float) * n * (st ? 3 : 1));
	rc = ckpt_check_header(&c, f, &step) ?:
	     ckpt_check_config(&c, f, &m->cfg) ?:
	     ckpt_verify_shards(&c, f, path) ?:
	     ckpt_read_block(&c, f, "model", m, stage);
	if (!rc && st) {
		tmp.step = (long)step;
		rc = ckpt_read_block(&c, f, "optim/m", m, stage + n) ?:
		     ckpt_read_block(&c, f, "optim/v", m, stage + 2 * n) ?:
		     ckpt_read_state(&c, f, &tmp) ?:
		     ckpt_read_origin(&c, f, &tmp);
	}
	if (rc)
		goto out;
	if (out) {
		if (st)
			*st = tmp;
		goto out;
	}
	/* all of it is good: only now touch the model */
	m->ops->from_host(m->params, stage, sizeof(float) * n);
	if (st) {
		model_moments_load(m, stage + n, stage + 2 * n);
		*st = tmp;
	} else {
		model_moments_load(m, NULL, NULL);
	}
out:
	ckpt_h5_virtual_dir(NULL);
	if (stage != out)
		free(stage);
	ckpt_h5_close_checked(f, &sf);
	return rc;
}

int ckpt_read(const char *path, struct model *m, struct ckpt_state *st,
	      char *err, size_t len)
{
	return read_file(path, SEAL_REQUIRED, NULL, m, st, NULL, err, len);
}

int ckpt_read_weights(const char *path, struct model *m, char *err,
		      size_t len)
{
	bool sealed = false;
	int rc;

	/* a file from elsewhere has no seal: allowed, and said */
	rc = read_file(path, SEAL_IF_PRESENT, &sealed, m, NULL, NULL, err,
		       len);
	if (rc == 0 && !sealed)
		sigma_info("%s has no seal: a file from elsewhere; its attributes and tensors are checked, its bytes as a whole are not",
			   path);
	return rc;
}

int ckpt_read_weights_host(const char *path, const struct model *m, float *out,
			   char *err, size_t len)
{
	/* with out, read_file reads only m's layout */
	return read_file(path, SEAL_IF_PRESENT, NULL, (struct model *)m, NULL,
			 out, err, len);
}

int ckpt_load_weights(struct model *m, const float *w)
{
	for (size_t i = 0; i < m->nparams; i++)
		if (!isfinite(w[i]))
			return -EBADMSG;
	m->ops->from_host(m->params, w, sizeof(float) * m->nparams);
	model_moments_load(m, NULL, NULL);
	return 0;
}

int ckpt_read_stage(const char *path, const struct model *m, float *stage,
		    struct ckpt_state *st, char *err, size_t len)
{
	/* with a stage, read_file only reads m's layout */
	return read_file(path, SEAL_REQUIRED, NULL, (struct model *)m, st,
			 stage, err, len);
}

int ckpt_peek(const char *path, struct ckpt_state *st, char *err,
	      size_t len)
{
	struct ckpt_ctx c = { path, err, len };
	struct seal_file sf;
	int64_t step = 0, f;
	int rc;

	memset(st, 0, sizeof(*st));
	rc = ckpt_h5_open(&c, SEAL_REQUIRED, &sf, &f);
	if (rc)
		return rc;
	rc = ckpt_check_header(&c, f, &step) ?: ckpt_read_origin(&c, f, st);
	st->step = (long)step;
	ckpt_h5_close_checked(f, &sf);
	return rc;
}

int ckpt_load_latest(const char *dir, struct model *m, struct ckpt_state *st,
		     char *path, size_t plen, char *err, size_t len)
{
	struct ckpt_entry *e;
	int n = ckpt_list_all(dir, &e), refused = 0;

	if (n == -ENOMEM)
		return sigma_set_err(err, len, ENOMEM, "out of memory");
	if (n <= 0) {
		free(e);
		return sigma_set_err(err, len, ENOENT,
				     "%s: no checkpoint found", dir);
	}
	for (int i = 0; i < n; i++) {
		char p[PATH_MAX], why[1024];

		if (ckpt_path(p, sizeof(p), dir, e[i].step, e[i].attempt))
			continue;
		if (ckpt_read(p, m, st, why, sizeof(why)) == 0) {
			if (st->step != e[i].step ||
			    st->attempt != e[i].attempt) {
				sigma_warn("checkpoint %s refused: it holds step %ld of attempt %d, its name says %ld of %d",
					   p, st->step, st->attempt,
					   e[i].step, e[i].attempt);
				refused++;
				continue;
			}
			if (!ckpt_of_dir_run(dir, p, st)) {
				refused++;
				continue;
			}
			sigma_strlcpy(path, p, plen);
			free(e);
			return 0;
		}
		sigma_warn("checkpoint refused: %s; trying an older one", why);
		refused++;
	}
	free(e);
	return sigma_set_err(err, len, EBADMSG,
			     "%s: none of %d checkpoints is valid", dir,
			     refused);
}
