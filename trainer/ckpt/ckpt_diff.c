/*
 * ckpt_diff.c - differential checkpoints (ckpt.h, docs/checkpoint-format.md
 * "Differential checkpoints"): per tensor nothing, a lossless delta
 * (delta.h) or the tensor whole, against a full checkpoint in the same
 * directory; written with a full checkpoint's safety, read only against
 * the very base it was written against.
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sigma.h"
#include "ckpt.h"
#include "ckpt_h5.h"
#include "ckpt_internal.h"
#include "delta.h"
#include "seal.h"

static const char *const diff_groups[3] = { "model", "optim/m", "optim/v" };

/* the checksum that names a state: params, m, v tensor by tensor */
static uint64_t state_hash(const struct model *m, const float *state)
{
	uint64_t h = DELTA_HASH_SEED;

	for (int b = 0; b < 3; b++)
		for (int i = 0; i < m->ntensors; i++)
			h = delta_hash(state + b * m->nparams +
					       m->tensors[i].offset,
				       m->tensors[i].n, h);
	return h;
}

/* ---- the base ------------------------------------------------------------- */

int ckpt_base_init(struct ckpt_base *b, const struct model *m, char *err,
		   size_t len)
{
	memset(b, 0, sizeof(*b));
	b->step = -1;
	b->nparams = m->nparams;
	b->state = malloc(sizeof(float) * 3 * m->nparams);
	if (!b->state)
		return sigma_set_err(err, len, ENOMEM,
				     "out of memory for a %zu MiB differential base",
				     sizeof(float) * 3 * m->nparams >> 20);
	return 0;
}

void ckpt_base_fini(struct ckpt_base *b)
{
	if (!b)
		return;
	free(b->state);
	b->state = NULL;
	b->step = -1;
}

void ckpt_base_set(struct ckpt_base *b, const struct model *m,
		   const float *stage, long step, const char *path)
{
	const size_t n = m->nparams;
	const char *slash = strrchr(path, '/');

	if (stage) {
		memcpy(b->state, stage, sizeof(float) * 3 * n);
	} else {
		m->ops->to_host(b->state, m->params, sizeof(float) * n);
		model_moments_store(m, b->state + n, b->state + 2 * n);
	}
	b->checksum = state_hash(m, b->state);
	sigma_strlcpy(b->file, slash ? slash + 1 : path, sizeof(b->file));
	b->step = step;
}

/* the estimate's chunk: one sample window, as delta_choose samples them */
static const size_t estimate_chunk = DELTA_SAMPLE_WINDOW;

long ckpt_diff_estimate(const uint32_t *words, size_t n)
{
	ckpt_h5_quiet();
	return ckpt_h5_estimate((void *)&estimate_chunk, words, n);
}

/* ---- write ---------------------------------------------------------------- */

/* one tensor as kind: data is its float32 values (whole), its uint32
 * encoding (delta) or unused (same); sum names the tensor's bits */
static int diff_write_tensor(struct ckpt_ctx *c, int64_t g, const char *gname,
			     const struct model_tensor *t, enum delta_kind kind,
			     const void *data, uint64_t sum)
{
	char what[128];
	int64_t d;
	int rc;

	snprintf(what, sizeof(what), "%s/%s", gname, t->name);
	if (kind == DELTA_SAME)
		rc = ckpt_h5_dataset_empty(c, g, t->name, what, &d);
	else
		rc = ckpt_h5_dataset_write(c, g, t->name, what,
					   kind == DELTA_WHOLE ? CKPT_H5_F32
							       : CKPT_H5_U32,
					   t->ndim, t->shape, CKPT_H5_COMPRESS,
					   data, &d);
	if (!rc)
		rc = ckpt_h5_set_str(c, d, "encoding", delta_kind_name(kind)) ?:
		     ckpt_h5_set_u64(c, d, "checksum", sum);
	ckpt_h5_close(d);
	return rc;
}

/* one of model, optim/m, optim/v: cur and base in host memory */
static int diff_write_block(struct ckpt_ctx *c, int64_t f, int blk,
			    const struct model *m, const float *cur,
			    const float *base, uint32_t *enc,
			    uint32_t *scratch, struct ckpt_diff_stats *ds)
{
	const char *gname = diff_groups[blk];
	int64_t g = ckpt_h5_group_create(f, gname);
	int rc = 0;

	if (g < 0)
		return ckpt_fail(c, EIO, "cannot create group %s", gname);
	for (int i = 0; i < m->ntensors && !rc; i++) {
		const struct model_tensor *t = &m->tensors[i];
		const float *x = cur + t->offset, *b = base + t->offset;
		struct delta_choice ch;

		rc = delta_choose(x, b, t->n, scratch, ckpt_h5_estimate,
				  (void *)&estimate_chunk,
				  &ch);
		if (rc) {
			rc = ckpt_fail(c, -rc,
				       "cannot estimate the size of %s/%s",
				       gname, t->name);
			break;
		}
		if (ch.kind == DELTA_ZIGZAG)
			delta_encode(enc, x, b, t->n);
		rc = diff_write_tensor(c, g, gname, t, ch.kind,
				       ch.kind == DELTA_ZIGZAG
					       ? (const void *)enc
					       : (const void *)x,
				       delta_hash(x, t->n, DELTA_HASH_SEED));
		ds->tensors[ch.kind]++;
	}
	ckpt_h5_close(g);
	return rc;
}

/*
 * A differential of the same step against another base (left by an
 * earlier instance of the job that went on from another full
 * checkpoint) is superseded by the one just published.
 */
static void diff_drop_others(const char *dir, const struct ckpt_diff_name *me)
{
	struct ckpt_diff_name dn[64];
	int n = ckpt_list_diffs(dir, dn, 64);

	for (int i = 0; i < n; i++) {
		char p[PATH_MAX];

		if (dn[i].step == me->step &&
		    (dn[i].base != me->base || dn[i].attempt != me->attempt) &&
		    !ckpt_diff_path(p, sizeof(p), dir, &dn[i]))
			ckpt_remove_published(p);
	}
}

/* ckpt_not_stale, and no differential of a newer attempt either */
static int diff_not_stale(const char *dir, const struct ckpt_state *st,
			  char *err, size_t len)
{
	int attempt = -1;
	long step = ckpt_diff_newest(dir, &attempt);

	if (step >= 0 && attempt > st->attempt)
		return sigma_set_err(err, len, ESTALE,
				     "%s holds a differential of step %ld of attempt %d, newer than this instance's attempt %d: an old instance of the job, it does not publish step %ld",
				     dir, step, attempt, st->attempt,
				     st->step);
	return ckpt_not_stale(dir, st, err, len);
}

/* the checks before a file is made: a base, a name, filters, a directory */
static int diff_prepare(const char *dir, const struct model *m,
			const struct ckpt_state *st,
			const struct ckpt_base *b,
			const struct ckpt_diff_name *me, char *final,
			size_t flen, char *err, size_t len)
{
	int rc;

	if (!b || !b->state || b->step < 0 || b->nparams != m->nparams)
		return sigma_set_err(err, len, EINVAL,
				     "differential of step %ld: no base in memory",
				     st->step);
	if (st->step <= b->step || st->step > 99999999L)
		return sigma_set_err(err, len, EINVAL,
				     "differential of step %ld against base step %ld cannot be named",
				     st->step, b->step);
	if (!ckpt_h5_can_compress())
		return sigma_set_err(err, len, ENOTSUP,
				     "this HDF5 library lacks the deflate or shuffle filter");
	if (st->attempt < 0 || st->attempt > CKPT_ATTEMPT_MAX)
		return sigma_set_err(err, len, EINVAL,
				     "differential of step %ld: attempt %d out of range",
				     st->step, st->attempt);
	if (ckpt_diff_path(final, flen, dir, me))
		return sigma_set_err(err, len, ENAMETOOLONG,
				     "%s: checkpoint path too long", dir);
	rc = sigma_mkdir_p(dir, 0755);
	if (rc)
		return sigma_set_err(err, len, -rc, "%s: cannot create: %s",
				     dir, strerror(-rc));
	return diff_not_stale(dir, st, err, len);
}

/* the file's contents: header, base, configuration, tensors, state */
static int diff_write_body(struct ckpt_ctx *c, int64_t f,
			   const struct model *m, const float *stage,
			   const struct ckpt_state *st,
			   const struct ckpt_base *b, float *host,
			   uint32_t *enc, uint32_t *scratch,
			   struct ckpt_diff_stats *ds)
{
	const size_t n = m->nparams;
	int64_t g;
	int rc;

	rc = ckpt_write_header(c, f, CKPT_DIFF_FORMAT, CKPT_DIFF_VERSION,
			       st) ?:
	     ckpt_h5_set_i64(c, f, "base_step", b->step) ?:
	     ckpt_h5_set_u64(c, f, "base_checksum", b->checksum) ?:
	     ckpt_h5_set_str(c, f, "base_file", b->file) ?:
	     ckpt_write_config(c, f, m, st);
	if (rc)
		return rc;
	g = ckpt_h5_group_create(f, "optim");
	if (g < 0)
		return ckpt_fail(c, EIO, "cannot create group optim");
	ckpt_h5_close(g);
	for (int blk = 0; blk < 3 && !rc; blk++) {
		const float *cur = stage ? stage + blk * n : host;

		if (!stage)
			m->ops->to_host(host,
					blk == 0   ? m->params
					: blk == 1 ? m->m
						   : m->v,
					sizeof(float) * n);
		rc = diff_write_block(c, f, blk, m, cur, b->state + blk * n,
				      enc, scratch, ds);
	}
	return rc ?: ckpt_write_state(c, f, m, st) ?:
	       ckpt_h5_set_i32(c, f, "tensors_same",
			       ds->tensors[DELTA_SAME]) ?:
	       ckpt_h5_set_i32(c, f, "tensors_delta",
			       ds->tensors[DELTA_ZIGZAG]) ?:
	       ckpt_h5_set_i32(c, f, "tensors_whole",
			       ds->tensors[DELTA_WHOLE]);
}

int ckpt_write_diff(const char *dir, const struct model *m,
		    const float *stage, const struct ckpt_state *st,
		    const struct ckpt_base *b, struct ckpt_diff_stats *ds,
		    char *path, size_t plen, char *err, size_t len)
{
	const size_t n = m->nparams;
	char tmp[PATH_MAX], final[PATH_MAX];
	struct ckpt_ctx c = { tmp, err, len };
	struct ckpt_diff_stats local;
	struct ckpt_diff_name me = { st->step, b ? b->step : -1, st->attempt };
	size_t maxn;
	float *host = NULL;
	uint32_t *enc = NULL, *scratch = NULL;
	int64_t f = -1;
	struct stat sb;
	double t0 = 0;
	int rc, saved;

	ckpt_h5_quiet();
	tmp[0] = '\0';
	if (!ds)
		ds = &local;
	memset(ds, 0, sizeof(*ds));
	rc = diff_prepare(dir, m, st, b, &me, final, sizeof(final), err, len);
	if (rc)
		return rc;
	maxn = ckpt_max_tensor(m);
	enc = malloc(sizeof(uint32_t) * maxn);
	scratch = malloc(sizeof(uint32_t) * 2 *
			 (maxn < DELTA_SAMPLE_MAX ? maxn : DELTA_SAMPLE_MAX));
	if (!stage)
		host = malloc(sizeof(float) * n);
	if (!enc || !scratch || (!stage && !host)) {
		rc = sigma_set_err(err, len, ENOMEM, "out of memory");
		goto out;
	}
	t0 = (double)sigma_now_ms();
	rc = ckpt_h5_create_tmp(&c, dir, final, tmp, sizeof(tmp), &f) ?:
	     diff_write_body(&c, f, m, stage, st, b, host, enc, scratch, ds);
	if (rc == 0)
		rc = ckpt_h5_publish(&c, &f, dir, final, st, diff_not_stale);
	if (rc)
		goto out;
	diff_drop_others(dir, &me);
	if (stat(final, &sb) == 0)
		ds->bytes = (uint64_t)sb.st_size;
	ds->base_step = b->step;
	ds->ms = (double)sigma_now_ms() - t0;
	if (path)
		sigma_strlcpy(path, final, plen);
out:
	saved = errno;
	rc = ckpt_h5_finish_failed(rc, saved, f, tmp, dir, n,
				   "differential checkpoint", st->step, err,
				   len);
	free(host);
	free(enc);
	free(scratch);
	return rc;
}

/* ---- read ----------------------------------------------------------------- */

/* a full checkpoint into host memory (3 * nparams), nothing of m touched */
static int read_full_host(struct ckpt_ctx *c, const struct model *m,
			  float *stage, struct ckpt_state *st)
{
	const size_t n = m->nparams;
	struct seal_file sf;
	int64_t step = 0, f;
	int rc;

	rc = ckpt_h5_open(c, SEAL_REQUIRED, &sf, &f);
	if (rc)
		return rc;
	memset(st, 0, sizeof(*st));
	rc = ckpt_check_header(c, f, &step) ?:
	     ckpt_check_config(c, f, &m->cfg);
	st->step = (long)step;
	for (int blk = 0; blk < 3 && !rc; blk++)
		rc = ckpt_read_block(c, f, diff_groups[blk], m,
				     stage + blk * n);
	rc = rc ?: ckpt_read_state(c, f, st);
	ckpt_h5_close_checked(f, &sf);
	return rc;
}

/* one tensor of a differential into out, decoded against base */
static int diff_read_tensor(struct ckpt_ctx *c, int64_t g, const char *gname,
			    const struct model_tensor *t, const float *base,
			    float *out, uint32_t *enc)
{
	char enc_name[64], what[128];
	uint64_t sum = 0;
	int64_t d;
	int rc;

	snprintf(what, sizeof(what), "%s/%s", gname, t->name);
	rc = ckpt_h5_dataset_open(c, g, t->name, what, &d);
	if (rc)
		return rc;
	rc = ckpt_h5_get_str(c, d, "encoding", enc_name, sizeof(enc_name)) ?:
	     ckpt_h5_get_u64(c, d, "checksum", &sum);
	if (rc)
		goto out;
	switch (delta_kind_parse(enc_name)) {
	case DELTA_SAME:
		memcpy(out, base, sizeof(float) * t->n);
		break;
	case DELTA_WHOLE:
		rc = ckpt_h5_check_tensor(c, d, what, CKPT_H5_F32, t->ndim,
					  t->shape) ?:
		     ckpt_h5_dataset_read(c, d, what, CKPT_H5_F32, out);
		break;
	case DELTA_ZIGZAG:
		rc = ckpt_h5_check_tensor(c, d, what, CKPT_H5_U32, t->ndim,
					  t->shape) ?:
		     ckpt_h5_dataset_read(c, d, what, CKPT_H5_U32, enc);
		if (!rc)
			delta_decode(out, enc, base, t->n);
		break;
	default:
		rc = ckpt_fail(c, EBADMSG,
			       "dataset %s has unknown encoding \"%s\"", what,
			       enc_name);
	}
	if (rc)
		goto out;
	if (delta_hash(out, t->n, DELTA_HASH_SEED) != sum) {
		rc = ckpt_fail(c, EBADMSG,
			       "dataset %s (%s) decodes to other bits than were written (checksum differs)",
			       what, enc_name);
		goto out;
	}
	rc = ckpt_check_finite(c, what, out, t->n);
out:
	ckpt_h5_close(d);
	return rc;
}

/* root attributes of a differential; base_file is a plain file name */
static int diff_check_header(struct ckpt_ctx *c, int64_t f, int64_t *step,
			     int64_t *base_step, uint64_t *base_sum,
			     char *base_file, size_t blen)
{
	int rc = ckpt_check_format(c, f, CKPT_DIFF_FORMAT, CKPT_DIFF_VERSION);

	if (rc)
		return rc;
	rc = ckpt_h5_get_i64(c, f, "step", step) ?:
	     ckpt_h5_get_i64(c, f, "base_step", base_step) ?:
	     ckpt_h5_get_u64(c, f, "base_checksum", base_sum) ?:
	     ckpt_h5_get_str(c, f, "base_file", base_file, blen);
	if (rc)
		return rc;
	if (*base_step < 0 || *step <= *base_step)
		return ckpt_fail(c, EBADMSG, "step %lld against base step %lld",
				 (long long)*step, (long long)*base_step);
	if (!*base_file || strchr(base_file, '/') || !strcmp(base_file, "..") ||
	    !strcmp(base_file, "."))
		return ckpt_fail(c, EBADMSG,
				 "base_file \"%s\" is not a file name",
				 base_file);
	return 0;
}

/*
 * The base of c->path, bpath: whole, valid, and the very state it was
 * written against (not another file that took its name), into base.
 */
static int diff_read_base(struct ckpt_ctx *c, const struct model *m,
			  const char *bpath, int64_t base_step,
			  uint64_t base_sum, float *base)
{
	char why[1024];
	struct ckpt_ctx bc = { bpath, why, sizeof(why) };
	struct ckpt_state bst;
	uint64_t got;

	if (read_full_host(&bc, m, base, &bst))
		return ckpt_fail(c, EBADMSG, "its base is unusable: %s", why);
	if (bst.step != base_step)
		return ckpt_fail(c, EBADMSG,
				 "its base %s holds step %ld, not %lld", bpath,
				 bst.step, (long long)base_step);
	got = state_hash(m, base);
	if (got != base_sum)
		return ckpt_fail(c, EBADMSG,
				 "its base %s has checksum %016llx, it was written against %016llx (base replaced)",
				 bpath, (unsigned long long)got,
				 (unsigned long long)base_sum);
	return 0;
}

/* the three groups of tensors into cur, decoded against base */
static int diff_read_blocks(struct ckpt_ctx *c, int64_t f,
			    const struct model *m, const float *base,
			    float *cur, uint32_t *enc)
{
	const size_t n = m->nparams;
	int rc = 0;

	for (int blk = 0; blk < 3 && !rc; blk++) {
		const char *gname = diff_groups[blk];
		int64_t g;

		if (!ckpt_h5_exists(f, gname) ||
		    (g = ckpt_h5_group_open(f, gname)) < 0)
			return ckpt_fail(c, EBADMSG, "group %s is missing",
					 gname);
		for (int i = 0; i < m->ntensors && !rc; i++) {
			const struct model_tensor *t = &m->tensors[i];

			rc = diff_read_tensor(c, g, gname, t,
					      base + blk * n + t->offset,
					      cur + blk * n + t->offset, enc);
		}
		ckpt_h5_close(g);
	}
	return rc;
}

int ckpt_read_diff(const char *path, struct model *m, struct ckpt_state *st,
		   char *err, size_t len)
{
	const size_t n = m->nparams;
	struct ckpt_ctx c = { path, err, len };
	char base_file[256], bpath[PATH_MAX];
	struct ckpt_state tmp;
	int64_t step = 0, base_step = 0, f;
	uint64_t base_sum = 0;
	float *base = NULL, *cur = NULL;
	uint32_t *enc = NULL;
	const char *slash;
	struct seal_file sf;
	int rc;

	rc = ckpt_h5_open(&c, SEAL_REQUIRED, &sf, &f);
	if (rc)
		return rc;
	rc = diff_check_header(&c, f, &step, &base_step, &base_sum, base_file,
			       sizeof(base_file)) ?:
	     ckpt_check_config(&c, f, &m->cfg);
	if (rc)
		goto out;
	slash = strrchr(path, '/');
	if (sigma_snprintf(bpath, sizeof(bpath), "%.*s%s",
			   slash ? (int)(slash - path + 1) : 0, path,
			   base_file)) {
		rc = ckpt_fail(&c, ENAMETOOLONG, "base path too long");
		goto out;
	}
	base = malloc(sizeof(float) * 3 * n);
	cur = malloc(sizeof(float) * 3 * n);
	enc = malloc(sizeof(uint32_t) * ckpt_max_tensor(m));
	if (!base || !cur || !enc) {
		rc = sigma_set_err(err, len, ENOMEM, "out of memory");
		goto out;
	}
	memset(&tmp, 0, sizeof(tmp));
	tmp.step = (long)step;
	rc = diff_read_base(&c, m, bpath, base_step, base_sum, base) ?:
	     diff_read_blocks(&c, f, m, base, cur, enc) ?:
	     ckpt_read_state(&c, f, &tmp) ?: ckpt_read_origin(&c, f, &tmp);
	if (rc)
		goto out;
	/* all of it is good: only now touch the model */
	m->ops->from_host(m->params, cur, sizeof(float) * n);
	model_moments_load(m, cur + n, cur + 2 * n);
	*st = tmp;
out:
	free(base);
	free(cur);
	free(enc);
	ckpt_h5_close_checked(f, &sf);
	return rc;
}

int ckpt_load_latest_diff(const char *dir, struct model *m,
			  struct ckpt_state *st, char *path, size_t plen,
			  char *err, size_t len)
{
	struct ckpt_diff_name *dn = malloc(sizeof(*dn) * CKPT_MAX_LISTED);
	long full = -1;
	int rc, nd, full_attempt;

	if (!dn)
		return sigma_set_err(err, len, ENOMEM, "out of memory");
	/*
	 * The newest valid full checkpoint first (whatever its naming): a
	 * differential is only worth reading when it is newer, and is
	 * only valid when a full checkpoint (its base) is.
	 */
	rc = ckpt_load_latest(dir, m, st, path, plen, err, len);
	nd = ckpt_list_diffs(dir, dn, CKPT_MAX_LISTED);
	if (rc == -ENOENT && nd > 0)
		rc = sigma_set_err(err, len, EBADMSG,
				   "%s: %d differential checkpoints but no full one, their base",
				   dir, nd);
	if (rc) {
		free(dn);
		return rc;
	}
	full = st->step;
	full_attempt = st->attempt;
	/* newer in (attempt, step) order than the full one, newest first */
	for (int i = 0; i < nd && (dn[i].attempt > full_attempt ||
				   (dn[i].attempt == full_attempt &&
				    dn[i].step > full));
	     i++) {
		char p[PATH_MAX], why[1024];
		struct ckpt_state ds;

		if (ckpt_diff_path(p, sizeof(p), dir, &dn[i]))
			continue;
		if (ckpt_read_diff(p, m, &ds, why, sizeof(why)) != 0) {
			sigma_warn("differential checkpoint refused: %s; trying an older one",
				   why);
			continue;
		}
		if (ds.step != dn[i].step || ds.attempt != dn[i].attempt ||
		    !ckpt_of_dir_run(dir, p, &ds)) {
			if (ds.step != dn[i].step || ds.attempt != dn[i].attempt)
				sigma_warn("differential checkpoint %s refused: it holds step %ld of attempt %d, its name says %ld of %d",
					   p, ds.step, ds.attempt, dn[i].step,
					   dn[i].attempt);
			/* m holds that file's state now: the full one again */
			rc = ckpt_load_latest(dir, m, st, path, plen, err,
					      len);
			if (rc)
				break;
			continue;
		}
		*st = ds;
		sigma_strlcpy(path, p, plen);
		break;
	}
	free(dn);
	return rc;
}
