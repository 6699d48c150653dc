/*
 * ckpt_shard.c - checkpoints of a model that no rank holds whole
 * (docs/checkpoint-format.md, "Sharded checkpoints"):
 *
 *   ckpt_write_shard   a rank's part, DIR/shard-SSSSSSSS[-aN]-RRRRR.h5,
 *                      tensors as the rank holds them
 *   ckpt_write_index   DIR/ckpt-SSSSSSSS[-aN].h5, written once every
 *                      part is published: the step's state, and every
 *                      tensor whole, as a virtual dataset over the parts,
 *                      with the seal of each part recorded in /shards
 *   ckpt_verify_shards what a reader checks of the parts before it reads
 *                      a byte through the index
 *
 * So any HDF5 reader (h5py) sees whole tensors, and a reader of any
 * layout takes the rows it holds: resharding is a hyperslab.
 */
#include "config.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sigma.h"
#include "ckpt.h"
#include "ckpt_h5.h"
#include "ckpt_internal.h"
#include "seal.h"

int ckpt_shard_path(char *buf, size_t len, const char *dir, long step,
		    int attempt, int rank)
{
	if (step < 0 || step > 99999999L || attempt < 0 ||
	    attempt > CKPT_ATTEMPT_MAX || rank < 0 || rank > 99999)
		return -EINVAL;
	if (attempt == 0)
		return sigma_snprintf(buf, len, "%s/shard-%08ld-%05d.h5", dir,
				      step, rank);
	return sigma_snprintf(buf, len, "%s/shard-%08ld-a%d-%05d.h5", dir, step,
			      attempt, rank);
}

/* ---- a rank's part -------------------------------------------------------- */

int ckpt_write_shard(const char *dir, const struct model *m,
		     const float *stage, const struct ckpt_state *st, int rank,
		     unsigned which, char *path, size_t plen, char *err,
		     size_t len)
{
	const size_t n = m->nparams;
	char tmp[PATH_MAX], final[PATH_MAX];
	struct ckpt_ctx c = { tmp, err, len };
	float *host;
	int64_t f = -1, g;
	int rc;

	ckpt_h5_quiet();
	tmp[0] = '\0';
	if (ckpt_shard_path(final, sizeof(final), dir, st->step, st->attempt,
			    rank))
		return sigma_set_err(err, len, EINVAL,
				     "shard %d of step %ld of attempt %d cannot be named",
				     rank, st->step, st->attempt);
	rc = ckpt_write_ready(dir, n, st, err, len);
	if (rc)
		return rc;
	host = malloc(sizeof(float) * ckpt_max_tensor(m));
	if (!host)
		return sigma_set_err(err, len, ENOMEM, "out of memory");
	rc = ckpt_h5_create_tmp(&c, dir, final, tmp, sizeof(tmp), &f);
	if (rc)
		goto out;
	rc = ckpt_write_header(&c, f, CKPT_SHARD_FORMAT, 1, st) ?:
	     ckpt_h5_set_i32(&c, f, "rank", rank) ?:
	     ckpt_write_config(&c, f, m, st) ?:
	     ckpt_write_block(&c, f, "model", m, stage, true, which, host);
	if (rc == 0) {
		g = ckpt_h5_group_create(f, "optim");
		if (g < 0)
			rc = ckpt_fail(&c, EIO, "cannot create group optim");
		ckpt_h5_close(g);
	}
	rc = rc ?: ckpt_write_block(&c, f, "optim/m", m, stage + n, true,
				    which, host) ?:
		    ckpt_write_block(&c, f, "optim/v", m, stage + 2 * n, true,
				     which, host);
out:
	rc = ckpt_write_end(&c, rc, &f, dir, final, st, n, "checkpoint shard",
			    path, plen);
	free(host);
	return rc;
}

/* ---- the index ------------------------------------------------------------- */

/* the rows of tensor t (of the whole model) that writer w wrote, appended
 * to maps (merged where they follow each other); the rows covered */
static uint64_t map_rows(const struct model_tensor *t,
			 const struct ckpt_writer *w, const char *file,
			 const char *src, struct ckpt_h5_map *maps, size_t *n)
{
	const struct model_tensor *ts = model_find_tensor(w->shard, t->name);
	uint64_t covered = 0;

	if (!ts || !(w->which & (ts->expert ? CKPT_EXPERTS : CKPT_DENSE)))
		return 0;
	for (uint64_t j = 0; j < ts->shape[0]; j++) {
		uint64_t row = model_tensor_row(w->shard, ts, j);
		struct ckpt_h5_map *last = *n ? &maps[*n - 1] : NULL;

		if (!ts->expert) { /* all of it at once */
			maps[(*n)++] = (struct ckpt_h5_map){ file, src, 0, 0,
							     ts->shape[0] };
			return ts->shape[0];
		}
		if (last && last->file == file &&
		    last->src_row + last->count == j &&
		    last->dst_row + last->count == row)
			last->count++;
		else
			maps[(*n)++] = (struct ckpt_h5_map){ file, src, j, row,
							     1 };
		covered++;
	}
	return covered;
}

/* group gname of the index: every tensor of whole over the writers' files */
static int index_block(struct ckpt_ctx *c, int64_t f, const char *gname,
		       const struct model *whole, const struct ckpt_writer *w,
		       int nw, char (*files)[64])
{
	struct ckpt_h5_map *maps = calloc((size_t)nw * MODEL_MAX_E + 1,
					  sizeof(*maps));
	int64_t g = ckpt_h5_group_create(f, gname);
	char src[128], what[128];
	int rc = maps ? 0 : -ENOMEM;

	if (g < 0)
		rc = ckpt_fail(c, EIO, "cannot create group %s", gname);
	for (int i = 0; i < whole->ntensors && !rc; i++) {
		const struct model_tensor *t = &whole->tensors[i];
		uint64_t covered = 0;
		size_t n = 0;

		snprintf(src, sizeof(src), "%s/%s", gname, t->name);
		for (int k = 0; k < nw; k++)
			covered += map_rows(t, &w[k], files[k], src, maps, &n);
		if (covered != t->rows) {
			rc = ckpt_fail(c, EINVAL,
				       "%s: the shards hold %llu of its %llu rows",
				       src, (unsigned long long)covered,
				       (unsigned long long)t->rows);
			break;
		}
		snprintf(what, sizeof(what), "%s", src);
		rc = ckpt_h5_virtual_write(c, g, t->name, what, t->ndim,
					   t->shape, maps, n);
	}
	ckpt_h5_close(g);
	free(maps);
	return rc;
}

/* /shards/K: file, rank, hash and size of each part, from its seal */
static int index_shards(struct ckpt_ctx *c, int64_t f, const char *dir,
			const struct ckpt_writer *w, int nw,
			const struct ckpt_state *st, char (*files)[64])
{
	int64_t g = ckpt_h5_group_create(f, "shards");
	char path[PATH_MAX], name[16];
	int rc = 0;

	if (g < 0)
		return ckpt_fail(c, EIO, "cannot create group shards");
	rc = ckpt_h5_set_i32(c, g, "count", nw);
	for (int k = 0; k < nw && !rc; k++) {
		uint64_t hash, size;
		int64_t s;

		if (ckpt_shard_path(path, sizeof(path), dir, st->step,
				    st->attempt, w[k].rank)) {
			rc = ckpt_fail(c, ENAMETOOLONG, "shard path too long");
			break;
		}
		sigma_strlcpy(files[k], strrchr(path, '/') + 1, 64);
		rc = seal_peek(path, &hash, &size, c->err, c->len);
		if (rc)
			break;
		snprintf(name, sizeof(name), "%d", k);
		s = ckpt_h5_group_create(g, name);
		if (s < 0) {
			rc = ckpt_fail(c, EIO, "cannot create group shards/%s",
				       name);
			break;
		}
		rc = ckpt_h5_set_str(c, s, "file", files[k]) ?:
		     ckpt_h5_set_i32(c, s, "rank", w[k].rank) ?:
		     ckpt_h5_set_u64(c, s, "hash", hash) ?:
		     ckpt_h5_set_u64(c, s, "size", size);
		ckpt_h5_close(s);
	}
	ckpt_h5_close(g);
	return rc;
}

int ckpt_write_index(const char *dir, const struct model *whole,
		     const struct ckpt_writer *w, int nw,
		     const struct ckpt_state *st, char *path, size_t plen,
		     char *err, size_t len)
{
	char tmp[PATH_MAX], final[PATH_MAX];
	struct ckpt_ctx c = { tmp, err, len };
	char (*files)[64] = calloc((size_t)nw, 64);
	int64_t f = -1, g;
	int rc;

	ckpt_h5_quiet();
	tmp[0] = '\0';
	if (!files)
		return sigma_set_err(err, len, ENOMEM, "out of memory");
	if (ckpt_path(final, sizeof(final), dir, st->step, st->attempt)) {
		free(files);
		return sigma_set_err(err, len, EINVAL,
				     "step %ld of attempt %d cannot be named",
				     st->step, st->attempt);
	}
	rc = ckpt_not_stale(dir, st, err, len);
	if (rc == 0)
		rc = ckpt_h5_create_tmp(&c, dir, final, tmp, sizeof(tmp), &f);
	if (rc)
		goto out;
	rc = ckpt_write_header(&c, f, CKPT_FORMAT, CKPT_VERSION_SHARDED, st) ?:
	     ckpt_write_config(&c, f, whole, st) ?:
	     index_shards(&c, f, dir, w, nw, st, files) ?:
	     index_block(&c, f, "model", whole, w, nw, files);
	if (rc == 0) {
		g = ckpt_h5_group_create(f, "optim");
		if (g < 0)
			rc = ckpt_fail(&c, EIO, "cannot create group optim");
		ckpt_h5_close(g);
	}
	rc = rc ?: index_block(&c, f, "optim/m", whole, w, nw, files) ?:
		    index_block(&c, f, "optim/v", whole, w, nw, files) ?:
		    ckpt_write_state(&c, f, whole, st);
out:
	rc = ckpt_write_end(&c, rc, &f, dir, final, st, 0, "checkpoint index",
			    path, plen);
	free(files);
	return rc;
}

/* ---- reading through an index --------------------------------------------- */

/* a part's name as an index may record it: shard-*.h5, no directory */
static bool shard_name_ok(const char *s)
{
	size_t n = strlen(s);

	return !strncmp(s, "shard-", 6) && n > 9 && !strchr(s, '/') &&
	       !strcmp(s + n - 3, ".h5");
}

/* part k of the index: there, sealed, and the file the index recorded */
static int verify_one(struct ckpt_ctx *c, int64_t g, int k, const char *dir)
{
	char name[16], file[64], path[PATH_MAX], why[512];
	uint64_t hash = 0, size = 0;
	struct seal_file sf;
	int64_t s;
	int rc;

	snprintf(name, sizeof(name), "%d", k);
	s = ckpt_h5_group_open(g, name);
	if (s < 0)
		return ckpt_fail(c, EBADMSG, "shards/%s is missing", name);
	rc = ckpt_h5_get_str(c, s, "file", file, sizeof(file)) ?:
	     ckpt_h5_get_u64(c, s, "hash", &hash) ?:
	     ckpt_h5_get_u64(c, s, "size", &size);
	ckpt_h5_close(s);
	if (rc)
		return rc;
	if (!shard_name_ok(file))
		return ckpt_fail(c, EBADMSG, "shards/%s names \"%s\", not a shard file",
				 name, file);
	if (sigma_snprintf(path, sizeof(path), "%s/%s", dir, file))
		return ckpt_fail(c, ENAMETOOLONG, "shard path too long");
	rc = seal_open(path, SEAL_REQUIRED, &sf, why, sizeof(why));
	if (rc)
		return ckpt_fail(c, EBADMSG, "its shard %s: %s", file, why);
	if (sf.hash != hash || sf.size != size)
		rc = ckpt_fail(c, EBADMSG,
			       "its shard %s is not the one it was written with (hash %016llx, %llu bytes; the index recorded %016llx, %llu bytes)",
			       file, (unsigned long long)sf.hash,
			       (unsigned long long)sf.size,
			       (unsigned long long)hash,
			       (unsigned long long)size);
	seal_close(&sf);
	return rc;
}

int ckpt_verify_shards(struct ckpt_ctx *c, int64_t f, const char *path)
{
	char buf[PATH_MAX], *dir;
	int64_t g, count = 0;
	int rc;

	if (!ckpt_h5_exists(f, "shards"))
		return 0;
	sigma_strlcpy(buf, path, sizeof(buf));
	dir = dirname(buf);
	g = ckpt_h5_group_open(f, "shards");
	if (g < 0)
		return ckpt_fail(c, EBADMSG, "cannot open group shards");
	rc = ckpt_h5_get_i64(c, g, "count", &count);
	if (rc == 0 && (count < 1 || count > 65536))
		rc = ckpt_fail(c, EBADMSG, "shards count %lld",
			       (long long)count);
	for (int k = 0; rc == 0 && k < count; k++)
		rc = verify_one(c, g, k, dir);
	ckpt_h5_close(g);
	if (rc == 0)
		ckpt_h5_virtual_dir(dir);
	return rc;
}
