/*
 * ckpt_h5.h - the HDF5 layer under the checkpoints, in sigma's own types:
 * opening a sealed file, typed attributes, datasets (tensors and the
 * guard's windows), and the atomic publish of a new file (temporary name,
 * completion marker, fsync, seal, rename). Used by trainer/ckpt/ckpt_*.c
 * and the runtime's tensor tables (lib/ckpt_table.c); ckpt_h5.c is the only
 * file of sigma's programs and libraries that includes hdf5.h.
 *
 * An HDF5 object (file, group, dataset) is an int64_t handle here, < 0
 * for none. Every function that can fail says which object in the
 * caller's error context (struct ckpt_ctx) and returns 0 or -errno;
 * EBADMSG for a file that is not as it should be, EIO for a write.
 */
#ifndef SIGMA_CKPT_H5_H
#define SIGMA_CKPT_H5_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sigma.h"
#include "seal.h"

struct ckpt_state; /* ckpt.h: only passed on to the caller's check */

/* error context: which file, where to write the message */
struct ckpt_ctx {
	const char *path;
	char *err;
	size_t len;
};

/* "PATH: what" into c->err; returns -code */
int ckpt_fail(struct ckpt_ctx *c, int code, const char *fmt, ...)
	SIGMA_PRINTF(3, 4);

/* HDF5 prints no error stack of its own (our messages name the object) */
void ckpt_h5_quiet(void);

/* the library's version: "HDF5 1.10.8" */
void ckpt_h5_version(char *buf, size_t len);

/* ---- files --------------------------------------------------------------- */

/*
 * The one way a checkpoint is opened for reading: the checks of seal.h on
 * c->path, then libhdf5 on the descriptor they checked. *f and sf are the
 * caller's to release with ckpt_h5_close_checked.
 */
int ckpt_h5_open(struct ckpt_ctx *c, enum seal_need need, struct seal_file *sf,
		 int64_t *f);
void ckpt_h5_close_checked(int64_t f, struct seal_file *sf);

/*
 * The start of every checkpoint write: tmp is .NAME.tmp-PID next to final
 * in dir (made if missing), and *f a new HDF5 file there in the format of
 * HDF5 1.8 and later (checksummed superblock and object headers, so damaged
 * metadata is refused like damaged data).
 */
int ckpt_h5_create_tmp(struct ckpt_ctx *c, const char *dir, const char *final,
		       char *tmp, size_t tlen, int64_t *f);

/*
 * The end of every checkpoint write, c->path the temporary: the completion
 * marker last, flush, close, fsync, a last check that no newer instance
 * published meanwhile (stale, when given), the seal, the rename to final and the fsync
 * of dir. *f is -1 once closed; a file whose close failed is left to
 * ckpt_h5_finish_failed.
 */
int ckpt_h5_publish(struct ckpt_ctx *c, int64_t *f, const char *dir,
		    const char *final, const struct ckpt_state *st,
		    int (*stale)(const char *, const struct ckpt_state *,
				 char *, size_t));

/*
 * The end of a failed write (rc 0: none failed, returned as it is): the
 * file closed (emptied first if its close failed), the temporary removed,
 * and a failure that a full disk caused (errno saved, or less than a state
 * of n floats free in dir) said as ENOSPC, naming what (e.g.
 * "checkpoint") and the step.
 */
int ckpt_h5_finish_failed(int rc, int saved, int64_t f, const char *tmp,
			  const char *dir, size_t n, const char *what,
			  long step, char *err, size_t len);

/*
 * Room for a checkpoint of n floats (params and two moments) in dir,
 * checked before the write so that a full disk is said plainly: 0 or
 * -ENOSPC with err.
 */
int ckpt_h5_check_room(const char *dir, size_t n, long step, char *err,
		       size_t len);

/* ---- groups -------------------------------------------------------------- */

/* a new or an existing group of loc, < 0 on failure (no message) */
int64_t ckpt_h5_group_create(int64_t loc, const char *name);
int64_t ckpt_h5_group_open(int64_t loc, const char *name);
/* a group or dataset; < 0 is fine */
void ckpt_h5_close(int64_t obj);
/* whether loc has a link (group or dataset) or an attribute of that name */
bool ckpt_h5_exists(int64_t loc, const char *name);
bool ckpt_h5_has_attr(int64_t loc, const char *name);

/* ---- attributes (scalars of loc, a file, group or dataset) ---------------- */

int ckpt_h5_set_i64(struct ckpt_ctx *c, int64_t loc, const char *name,
		    int64_t v);
int ckpt_h5_set_i32(struct ckpt_ctx *c, int64_t loc, const char *name,
		    int32_t v);
int ckpt_h5_set_u64(struct ckpt_ctx *c, int64_t loc, const char *name,
		    uint64_t v);
int ckpt_h5_set_f32(struct ckpt_ctx *c, int64_t loc, const char *name,
		    float v);
int ckpt_h5_set_str(struct ckpt_ctx *c, int64_t loc, const char *name,
		    const char *s);

/* missing, not one value, or not convertible: -EBADMSG */
int ckpt_h5_get_i64(struct ckpt_ctx *c, int64_t loc, const char *name,
		    int64_t *v);
int ckpt_h5_get_u64(struct ckpt_ctx *c, int64_t loc, const char *name,
		    uint64_t *v);
int ckpt_h5_get_f32(struct ckpt_ctx *c, int64_t loc, const char *name,
		    float *v);
/* one fixed-length string of at most 64 KiB, truncated to len */
/* a 1-D array of n int64 (n >= 1); get reads exactly n or -EBADMSG */
int ckpt_h5_set_i64s(struct ckpt_ctx *c, int64_t loc, const char *name,
		     const int64_t *v, int n);
int ckpt_h5_get_i64s(struct ckpt_ctx *c, int64_t loc, const char *name,
		     int64_t *v, int n);
int ckpt_h5_get_str(struct ckpt_ctx *c, int64_t loc, const char *name,
		    char *buf, size_t len);

/* ---- attribute tables ---------------------------------------------------- */

/*
 * A group's scalar attributes as one table of fields of a struct, which
 * its writer and its reader both walk, so that a name or a type is
 * written down once (docs/checkpoint-format.md lists them).
 */
enum ckpt_field_type {
	CKPT_FIELD_F32,	 /* float */
	CKPT_FIELD_U64,	 /* uint64_t */
	CKPT_FIELD_LONG, /* long, int64 in the file */
	CKPT_FIELD_INT,	 /* int, int32 in the file */
};

struct ckpt_field {
	const char *name; /* the attribute */
	enum ckpt_field_type type;
	size_t offset; /* of the member in its struct */
};

#define CKPT_FIELD(name, type, st, member) {name, type, offsetof(st, member)}

/* every field of obj as loc's attributes; 0 or the first failure */
int ckpt_h5_set_fields(struct ckpt_ctx *c, int64_t loc,
		       const struct ckpt_field *f, size_t n, const void *obj);
/* every field of obj from loc's attributes (an int out of its range:
 * -EBADMSG); 0 or the first failure */
int ckpt_h5_get_fields(struct ckpt_ctx *c, int64_t loc,
		       const struct ckpt_field *f, size_t n, void *obj);

/* ---- datasets ------------------------------------------------------------ */

/* element types, in the file little-endian */
enum ckpt_h5_type {
	CKPT_H5_F32,
	CKPT_H5_F64,
	CKPT_H5_U32,
	CKPT_H5_OTHER, /* read only: anything else */
	/* the element types of a tensor table (ckpt_table.h); bf16 and f16
	 * travel as their bits, U16 */
	CKPT_H5_I64,
	CKPT_H5_I32,
	CKPT_H5_U16,
	CKPT_H5_U8,
};

/* bytes per element of t (0 for OTHER) */
size_t ckpt_h5_type_size(enum ckpt_h5_type t);

#define CKPT_H5_RANK_MAX 3
/* shuffle and deflate (level CKPT_H5_DEFLATE) before the checksum */
#define CKPT_H5_COMPRESS 1u
/* one contiguous block, no filter and no Fletcher32: for a file whose seal
 * covers every byte (the node-local tier's tables), written every step */
#define CKPT_H5_CONTIGUOUS 2u
#define CKPT_H5_DEFLATE 1 /* deflate level: speed, the gain is small */

/*
 * Dataset name of loc: ndim axes of shape, chunked along the first axis so
 * a chunk stays under 16 MiB, Fletcher32 on every chunk, after the
 * filters of flags (CKPT_H5_CONTIGUOUS: none of it). what names it in
 * messages (e.g. "model/layers.0.wq").
 * d NULL: closed; else *d is the open dataset (for its attributes), the
 * caller's to close, -1 on failure.
 */
int ckpt_h5_dataset_write(struct ckpt_ctx *c, int64_t loc, const char *name,
			  const char *what, enum ckpt_h5_type type, int ndim,
			  const uint64_t *shape, unsigned flags,
			  const void *data, int64_t *d);
/* a dataset that holds nothing (null dataspace), for its attributes */
int ckpt_h5_dataset_empty(struct ckpt_ctx *c, int64_t loc, const char *name,
			  const char *what, int64_t *d);
/* the dataset name of loc, -EBADMSG when missing or unopenable */
int ckpt_h5_dataset_open(struct ckpt_ctx *c, int64_t loc, const char *name,
			 const char *what, int64_t *d);
/*
 * What d holds: its type, its rank (-1 unknown) and, when the rank is 1 ..
 * CKPT_H5_RANK_MAX, dims[0, rank).
 */
void ckpt_h5_dataset_shape(int64_t d, enum ckpt_h5_type *type, int *ndim,
			   uint64_t *dims);
/* d is of type want (F32 or U32) and of rank ndim and shape, or -EBADMSG */
int ckpt_h5_check_tensor(struct ckpt_ctx *c, int64_t d, const char *what,
			 enum ckpt_h5_type want, int ndim,
			 const uint64_t *shape);
/* all of d into buf as type; -EBADMSG (checksum failure, damage) */
int ckpt_h5_dataset_read(struct ckpt_ctx *c, int64_t d, const char *what,
			 enum ckpt_h5_type type, void *buf);
/* rows[nrows] of d (first axis; row_len elements each) into buf, in that
 * order, as fp32; -EBADMSG (a row out of range, checksum, damage) */
int ckpt_h5_dataset_read_rows(struct ckpt_ctx *c, int64_t d, const char *what,
			      const uint64_t *rows, size_t nrows,
			      size_t row_len, float *buf);

/* ---- virtual datasets: whole tensors over shard files ---------------------- */

/* rows [src_row, src_row + count) of dataset src of file file (a name
 * relative to the virtual dataset's directory) are rows [dst_row, ...) */
struct ckpt_h5_map {
	const char *file, *src;
	uint64_t src_row, dst_row, count;
};

/*
 * An fp32 virtual dataset name of loc of ndim axes and shape, whose rows
 * come from maps[n]; rows no map covers, or whose source is missing,
 * read as NaN (which the reader's finiteness check refuses).
 */
int ckpt_h5_virtual_write(struct ckpt_ctx *c, int64_t loc, const char *name,
			  const char *what, int ndim, const uint64_t *shape,
			  const struct ckpt_h5_map *maps, size_t n);
/* the directory the sources of virtual datasets opened from now on in
 * this process are looked up in (the file's own: it is opened through
 * /proc/self/fd); NULL: HDF5's default */
void ckpt_h5_virtual_dir(const char *dir);

/* ---- one writer at a time ------------------------------------------------- */

/* libhdf5 as built by Debian is not thread-safe: every thread that calls
 * it (the background writers, the index of a sharded checkpoint) holds
 * this lock for the whole file */
void ckpt_h5_lock(void);
void ckpt_h5_unlock(void);

/* ---- compression --------------------------------------------------------- */

/* whether this HDF5 library has the filters CKPT_H5_COMPRESS uses */
bool ckpt_h5_can_compress(void);
/*
 * Compressed size of n words through those filters, measured by HDF5
 * itself in a file that lives in memory only, in chunks of at most
 * *(const size_t *)ctx words (a delta_size_fn); -EIO on failure.
 */
long ckpt_h5_estimate(void *ctx, const uint32_t *words, size_t n);

#endif /* SIGMA_CKPT_H5_H */
