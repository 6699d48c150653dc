/*
 * ckpt_internal.h - what the files of the checkpoints share behind
 * ckpt.h: the parts of a full checkpoint that a differential writes and
 * reads too (ckpt_full.c), and the names a directory holds (ckpt_dir.c).
 * Private to trainer/ckpt/ckpt_*.c.
 */
#ifndef SIGMA_TRAIN_CKPT_INTERNAL_H
#define SIGMA_TRAIN_CKPT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ckpt.h"
#include "ckpt_h5.h"
#include "model.h"

/* the most checkpoints of one kind a directory listing takes */
#define CKPT_MAX_LISTED 4096

/* ---- full checkpoints (ckpt_full.c) ---------------------------------------- */

/*
 * ckpt_write from stage: NULL to read the tensors from m, or params, m and
 * v of m's layout one after the other in host memory (the background
 * writer).
 */
int ckpt_write_staged(const char *dir, const struct model *m,
		      const float *stage, const struct ckpt_state *st,
		      char *path, size_t plen, char *err, size_t len);
/*
 * An old instance of the job, still running after a requeue, must never
 * publish into a directory where a newer attempt already did, nor into one
 * that another run has taken over: 0 or -ESTALE with err.
 */
int ckpt_not_stale(const char *dir, const struct ckpt_state *st, char *err,
		   size_t len);
/* the root's format, version, step, attempt, layout and run of st */
int ckpt_write_header(struct ckpt_ctx *c, int64_t f, const char *format,
		      int version, const struct ckpt_state *st);
/* the model's shape and the batch: group config */
int ckpt_write_config(struct ckpt_ctx *c, int64_t f, const struct model *m,
		      const struct ckpt_state *st);
/*
 * Everything of st besides the tensors and the header: the optimizer's
 * settings (attributes of group optim, which must exist), the groups data,
 * rng and guard, and the provenance of m's run.
 */
int ckpt_write_state(struct ckpt_ctx *c, int64_t f, const struct model *m,
		     const struct ckpt_state *st);

/* the root's format, its version and the completion marker */
/*
 * Group gname of f with the tensors of m that which selects, from block
 * (in the device's memory, or already in host memory: staged), through
 * host[ckpt_max_tensor(m)].
 */
int ckpt_write_block(struct ckpt_ctx *c, int64_t f, const char *gname,
		     const struct model *m, const float *block, bool staged,
		     unsigned which, float *host);

/*
 * The shard files a sharded checkpoint (index) path lists in /shards: each
 * there, sealed, its seal the one the index recorded; then the sources
 * of the virtual datasets are looked up in path's directory. 0 for a
 * file without /shards.
 */
int ckpt_verify_shards(struct ckpt_ctx *c, int64_t f, const char *path);

/* The directory made, no newer instance there, room for n floats x 3:
 * 0 or -errno with err (ESTALE, ENOSPC, ...). */
int ckpt_write_ready(const char *dir, size_t n, const struct ckpt_state *st,
		     char *err, size_t len);

/*
 * The end of a write whose temporary c->path is open as *f (rc: the
 * write's result so far): published as final (checked against a newer
 * instance first), path set, or the failure tidied up and said (a state
 * of n floats for the full-disk check, what names the file's kind).
 */
int ckpt_write_end(struct ckpt_ctx *c, int rc, int64_t *f, const char *dir,
		   const char *final, const struct ckpt_state *st, size_t n,
		   const char *what, char *path, size_t plen);

/* format_version accepted from 1 up to version */
int ckpt_check_format(struct ckpt_ctx *c, int64_t f, const char *want,
		      int version);
/* ckpt_check_format of a full checkpoint, and its step (may be NULL) */
int ckpt_check_header(struct ckpt_ctx *c, int64_t f, int64_t *step);
/* group config against the model's shape */
int ckpt_check_config(struct ckpt_ctx *c, int64_t f,
		      const struct model_config *k);
/* the tensors of group gname into dst in m's layout, each checked */
int ckpt_read_block(struct ckpt_ctx *c, int64_t f, const char *gname,
		    const struct model *m, float *dst);
/* what ckpt_write_state wrote (but the provenance); st->step set first */
int ckpt_read_state(struct ckpt_ctx *c, int64_t f, struct ckpt_state *st);
/* attempt, layout and run: absent in files of earlier versions (0, "") */
int ckpt_read_origin(struct ckpt_ctx *c, int64_t f, struct ckpt_state *st);
/* every one of buf[0, n) is finite, else -EBADMSG naming what */
int ckpt_check_finite(struct ckpt_ctx *c, const char *what, const float *buf,
		      size_t n);
/* the number of floats of m's largest tensor */
size_t ckpt_max_tensor(const struct model *m);

/* ---- what a directory holds (ckpt_dir.c) ------------------------------------ */

/*
 * A differential's name: dir/diff-SSSSSSSS-base-BBBBBBBB.h5 (attempt 0)
 * and diff-SSSSSSSS-base-BBBBBBBB-aN.h5 (attempt N > 0).
 */
struct ckpt_diff_name {
	long step, base;
	int attempt;
};

/* every full checkpoint named in dir, newest first, in *out (the
 * caller's to free); the count or -errno */
int ckpt_list_all(const char *dir, struct ckpt_entry **out);

/* the differentials named in dir, newest first in (attempt, step) order,
 * as the full checkpoints: up to max; the count or -errno */
int ckpt_list_diffs(const char *dir, struct ckpt_diff_name *out, int max);
/* dir/ and the name of dn; 0 or -ENAMETOOLONG */
int ckpt_diff_path(char *buf, size_t len, const char *dir,
		   const struct ckpt_diff_name *dn);
/* a published checkpoint and its seal gone; unlink's result for the file */
int ckpt_remove_published(const char *path);
/*
 * Whether st (just read from path in dir) belongs to the run that dir's
 * manifest names; a warning when not. A directory without a manifest
 * (or a file written without a run) is taken as it is.
 */
bool ckpt_of_dir_run(const char *dir, const char *path,
		     const struct ckpt_state *st);

#endif /* SIGMA_TRAIN_CKPT_INTERNAL_H */
