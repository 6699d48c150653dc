/*
 * ckpt_table.h - one checkpoint file of a table of named tensors (struct
 * sigma_rt_tensor, sigma_runtime.h): the format under the runtime's
 * node-local tier (runtime_ckpt.c). See docs/checkpoint-format.md,
 * "Tensor tables".
 *
 * The file is sealed HDF5 (ckpt_h5.h, seal.h). Its root has the
 * attributes format "sigma-tensor-table", version, run, rank, step and
 * count; its group "tensors" one dataset per entry, named by the entry,
 * holding the elements as a 1-D array (bf16 and f16 as uint16, bool as
 * uint8) with the attributes dtype (its name), ndim, and when ndim > 0
 * shape, and for a shard global_shape and offset.
 */
#ifndef SIGMA_CKPT_TABLE_H
#define SIGMA_CKPT_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "sigma_runtime.h"

#define CKPT_TABLE_FORMAT "sigma-tensor-table"
#define CKPT_TABLE_VERSION 1
#define CKPT_TABLE_RUN_MAX 64 /* bytes of a run's name */

/* who wrote a file: checked on every read */
struct ckpt_table_head {
	char run[CKPT_TABLE_RUN_MAX + 1];
	int rank;
	long step;
};

/* bytes per element of dtype, 0 for none; its name ("bf16"), or NULL */
size_t ckpt_table_dtype_size(int dtype);
const char *ckpt_table_dtype_name(int dtype);

/* whether name is a run's name: letters, digits, "_.-", 1 .. 64 bytes */
int ckpt_table_run_ok(const char *run);

/*
 * Whether t[n] is a table that can be written: every name valid and
 * unique, every dtype known, every shape within SIGMA_RT_NDIM_MAX and
 * non-negative, a shard inside its global shape, data for any bytes, no
 * size that overflows. The bytes of the elements in *bytes. 0 or -EINVAL
 * with err naming the entry; -ENOMEM.
 */
int ckpt_table_check(const struct sigma_rt_tensor *t, size_t n,
		     size_t *bytes, char *err, size_t len);

/*
 * Write t[n] (checked) as h's checkpoint final in dir (made if missing):
 * a temporary, published with its seal (ckpt_h5_publish). written(arg),
 * when not NULL, is called once the elements are in the file and t's
 * data are read no more (before the file is flushed, sealed and
 * published). 0 or -errno with err naming the file.
 */
int ckpt_table_write(const char *dir, const char *final,
		     const struct ckpt_table_head *h,
		     const struct sigma_rt_tensor *t, size_t n,
		     void (*written)(void *), void *arg, char *err,
		     size_t len);

/*
 * Read the checkpoint path, written for h (run, rank and step must match),
 * into t[n] by name (each dtype and shape as the file has it). 0,
 * -ENOENT (no such file) or -EBADMSG with err saying why.
 */
int ckpt_table_read(const char *path, const struct ckpt_table_head *h,
		    const struct sigma_rt_tensor *t, size_t n, char *err,
		    size_t len);

/*
 * Resharding: what of each wanted entry the files of several writers
 * cover. One per entry of the table, zeroed before the first file; the
 * boxes are the distinct source shards taken (a shard held by several
 * writers, data-parallel replicas, counts once).
 */
struct ckpt_table_cover {
	int64_t elems; /* elements copied into the entry */
	int64_t (*box)[2 * SIGMA_RT_NDIM_MAX]; /* offset, shape of each */
	size_t nbox;
};

/*
 * Copy from the checkpoint path (written for h, checked as by
 * ckpt_table_read) the part of each entry of t[n] that it holds: the
 * elements of the file's tensor of that name (a shard, or whole) that lie
 * in the entry's region (its offset and shape in its global shape; a
 * whole entry is all of it). Dtype, ndim and global shape must agree.
 * A tensor the file lacks is skipped. 0, -ENOENT, -ENOMEM or -EBADMSG
 * with err (also for a shard that overlaps another one taken before).
 */
int ckpt_table_read_part(const char *path, const struct ckpt_table_head *h,
			 const struct sigma_rt_tensor *t, size_t n,
			 struct ckpt_table_cover *cov, char *err, size_t len);
/* after the files of step's writers: every entry's region covered whole,
 * or -EBADMSG with err naming the first that is not */
int ckpt_table_cover_check(const struct sigma_rt_tensor *t, size_t n,
			   const struct ckpt_table_cover *cov, int writers,
			   long step, char *err, size_t len);
void ckpt_table_cover_free(struct ckpt_table_cover *cov, size_t n);

/*
 * The dtype, ndim and shape[SIGMA_RT_NDIM_MAX] of name in the checkpoint
 * path written for h (checked as by ckpt_table_read). 0, -ENOENT or
 * -EBADMSG with err.
 */
int ckpt_table_shape(const char *path, const struct ckpt_table_head *h,
		     const char *name, int *dtype, int *ndim, int64_t *shape,
		     char *err, size_t len);

#endif
