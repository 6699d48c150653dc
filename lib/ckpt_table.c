/*
 * ckpt_table.c - one checkpoint file of a table of named tensors (see
 * ckpt_table.h): the table's checks, its write and its read, over the
 * HDF5 layer of ckpt_h5.h.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sigma.h"
#include "ckpt_h5.h"
#include "ckpt_table.h"

static const struct {
	const char *name;
	size_t size;
	enum ckpt_h5_type store;
} dtypes[] = {
	[SIGMA_RT_F32] = { "f32", 4, CKPT_H5_F32 },
	[SIGMA_RT_F64] = { "f64", 8, CKPT_H5_F64 },
	[SIGMA_RT_BF16] = { "bf16", 2, CKPT_H5_U16 },
	[SIGMA_RT_F16] = { "f16", 2, CKPT_H5_U16 },
	[SIGMA_RT_I64] = { "i64", 8, CKPT_H5_I64 },
	[SIGMA_RT_I32] = { "i32", 4, CKPT_H5_I32 },
	[SIGMA_RT_U8] = { "u8", 1, CKPT_H5_U8 },
	[SIGMA_RT_BOOL] = { "bool", 1, CKPT_H5_U8 },
};
#define NDTYPES ((int)(sizeof(dtypes) / sizeof(dtypes[0])))

size_t ckpt_table_dtype_size(int dtype)
{
	return dtype > 0 && dtype < NDTYPES ? dtypes[dtype].size : 0;
}

const char *ckpt_table_dtype_name(int dtype)
{
	return dtype > 0 && dtype < NDTYPES ? dtypes[dtype].name : NULL;
}

static int dtype_by_name(const char *name)
{
	for (int i = 1; i < NDTYPES; i++)
		if (!strcmp(dtypes[i].name, name))
			return i;
	return 0;
}

static bool chars_ok(const char *s, size_t max, const char *extra)
{
	size_t n = 0;

	for (; s[n]; n++)
		if (n >= max || !((s[n] >= 'a' && s[n] <= 'z') ||
				  (s[n] >= 'A' && s[n] <= 'Z') ||
				  (s[n] >= '0' && s[n] <= '9') ||
				  strchr(extra, s[n])))
			return false;
	return n > 0 && s[0] != '.';
}

int ckpt_table_run_ok(const char *run)
{
	return run && chars_ok(run, CKPT_TABLE_RUN_MAX, "_.-");
}

/* ---- the table's checks -------------------------------------------------- */

/* the elements of t (0 .. SIZE_MAX / its size), or -1 with err */
static long long entry_count(const struct sigma_rt_tensor *t, size_t i,
			     char *err, size_t len)
{
	size_t elems = 1, size = ckpt_table_dtype_size(t->dtype);

	if (!size)
		return sigma_set_err(err, len, EINVAL,
				     "tensor %zu (%s): dtype %d is none of f32, f64, bf16, f16, i64, i32, u8, bool",
				     i, t->name, t->dtype), -1;
	if (t->ndim < 0 || t->ndim > SIGMA_RT_NDIM_MAX || (t->ndim && !t->shape))
		return sigma_set_err(err, len, EINVAL,
				     "tensor %zu (%s): %d dimensions (0 .. %d, with a shape)",
				     i, t->name, t->ndim, SIGMA_RT_NDIM_MAX), -1;
	if (!t->global_shape != !t->offset)
		return sigma_set_err(err, len, EINVAL,
				     "tensor %zu (%s): a shard needs both its global shape and its offset",
				     i, t->name), -1;
	for (int d = 0; d < t->ndim; d++) {
		int64_t s = t->shape[d];

		if (s < 0 || (s > 0 && elems > SIZE_MAX / size / (uint64_t)s))
			return sigma_set_err(err, len, EINVAL,
					     "tensor %zu (%s): shape[%d] = %lld is negative or too large",
					     i, t->name, d, (long long)s), -1;
		elems *= (size_t)s;
		if (t->global_shape &&
		    (t->offset[d] < 0 || t->global_shape[d] < 0 ||
		     t->offset[d] > t->global_shape[d] ||
		     s > t->global_shape[d] - t->offset[d]))
			return sigma_set_err(err, len, EINVAL,
					     "tensor %zu (%s): the shard [%lld, +%lld) of dimension %d lies outside its global shape %lld",
					     i, t->name, (long long)t->offset[d],
					     (long long)s, d,
					     (long long)t->global_shape[d]), -1;
	}
	if (elems && !t->data)
		return sigma_set_err(err, len, EINVAL,
				     "tensor %zu (%s): no data", i, t->name), -1;
	return (long long)elems;
}

static int by_name(const void *a, const void *b)
{
	return strcmp((*(const struct sigma_rt_tensor *const *)a)->name,
		      (*(const struct sigma_rt_tensor *const *)b)->name);
}

/* no name twice: sorted pointers, neighbours compared */
static int names_unique(const struct sigma_rt_tensor *t, size_t n, char *err,
			size_t len)
{
	const struct sigma_rt_tensor **p = calloc(n ? n : 1, sizeof(*p));
	int rc = 0;

	if (!p)
		return sigma_set_err(err, len, ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++)
		p[i] = &t[i];
	qsort(p, n, sizeof(*p), by_name);
	for (size_t i = 1; i < n && !rc; i++)
		if (!strcmp(p[i - 1]->name, p[i]->name))
			rc = sigma_set_err(err, len, EINVAL,
					   "tensor %s appears twice in the table",
					   p[i]->name);
	free(p);
	return rc;
}

int ckpt_table_check(const struct sigma_rt_tensor *t, size_t n,
		     size_t *bytes, char *err, size_t len)
{
	size_t total = 0;

	if (n && !t)
		return sigma_set_err(err, len, EINVAL, "no table");
	for (size_t i = 0; i < n; i++) {
		long long elems;
		size_t b;

		if (!t[i].name ||
		    !chars_ok(t[i].name, SIGMA_RT_NAME_MAX, "_.:-"))
			return sigma_set_err(err, len, EINVAL,
					     "tensor %zu: its name is not 1 .. %d letters, digits and \"_.:-\" (not starting with \".\")",
					     i, SIGMA_RT_NAME_MAX);
		elems = entry_count(&t[i], i, err, len);
		if (elems < 0)
			return -EINVAL;
		b = (size_t)elems * ckpt_table_dtype_size(t[i].dtype);
		if (b > SIZE_MAX - total)
			return sigma_set_err(err, len, EINVAL,
					     "tensor %zu (%s): the table's size overflows",
					     i, t[i].name);
		total += b;
	}
	if (bytes)
		*bytes = total;
	return names_unique(t, n, err, len);
}

/* ---- write --------------------------------------------------------------- */

static int write_entry(struct ckpt_ctx *c, int64_t g,
		       const struct sigma_rt_tensor *t)
{
	uint64_t elems = 1;
	int64_t d = -1;
	int rc;

	for (int i = 0; i < t->ndim; i++)
		elems *= (uint64_t)t->shape[i];
	rc = elems ? ckpt_h5_dataset_write(c, g, t->name, t->name,
					   dtypes[t->dtype].store, 1, &elems,
					   CKPT_H5_CONTIGUOUS, t->data, &d)
		   : ckpt_h5_dataset_empty(c, g, t->name, t->name, &d);
	if (rc)
		return rc;
	rc = ckpt_h5_set_str(c, d, "dtype", dtypes[t->dtype].name) ?:
	     ckpt_h5_set_i32(c, d, "ndim", t->ndim);
	if (!rc && t->ndim)
		rc = ckpt_h5_set_i64s(c, d, "shape", t->shape, t->ndim);
	if (!rc && t->ndim && t->global_shape)
		rc = ckpt_h5_set_i64s(c, d, "global_shape", t->global_shape,
				      t->ndim) ?:
		     ckpt_h5_set_i64s(c, d, "offset", t->offset, t->ndim);
	ckpt_h5_close(d);
	return rc;
}

int ckpt_table_write(const char *dir, const char *final,
		     const struct ckpt_table_head *h,
		     const struct sigma_rt_tensor *t, size_t n,
		     void (*written)(void *), void *arg, char *err,
		     size_t len)
{
	char tmp[PATH_MAX];
	struct ckpt_ctx c = { tmp, err, len };
	size_t bytes = 0;
	int64_t f = -1, g = -1;
	int rc, saved;

	tmp[0] = '\0';
	rc = ckpt_table_check(t, n, &bytes, err, len);
	if (rc)
		return rc;
	rc = ckpt_h5_create_tmp(&c, dir, final, tmp, sizeof(tmp), &f);
	if (rc)
		goto out;
	rc = ckpt_h5_set_str(&c, f, "format", CKPT_TABLE_FORMAT) ?:
	     ckpt_h5_set_i32(&c, f, "version", CKPT_TABLE_VERSION) ?:
	     ckpt_h5_set_str(&c, f, "run", h->run) ?:
	     ckpt_h5_set_i32(&c, f, "rank", h->rank) ?:
	     ckpt_h5_set_i64(&c, f, "step", h->step) ?:
	     ckpt_h5_set_i64(&c, f, "count", (int64_t)n);
	if (rc)
		goto out;
	g = ckpt_h5_group_create(f, "tensors");
	if (g < 0)
		rc = ckpt_fail(&c, EIO, "cannot create group tensors");
	for (size_t i = 0; i < n && !rc; i++)
		rc = write_entry(&c, g, &t[i]);
	ckpt_h5_close(g);
	if (!rc && written)
		written(arg);
	if (!rc)
		rc = ckpt_h5_publish(&c, &f, dir, final, NULL, NULL);
out:
	saved = errno;
	/* the room check counts floats: the table's bytes as floats */
	return ckpt_h5_finish_failed(rc, saved, f, tmp, dir,
				     bytes / sizeof(float) / 3 + 1,
				     "checkpoint", h->step, err, len);
}

/* ---- read ---------------------------------------------------------------- */

static int check_head(struct ckpt_ctx *c, int64_t f,
		      const struct ckpt_table_head *h)
{
	char format[64], run[CKPT_TABLE_RUN_MAX + 2];
	int64_t step = 0, rank = 0, version = 0;
	int rc;

	rc = ckpt_h5_get_str(c, f, "format", format, sizeof(format)) ?:
	     ckpt_h5_get_i64(c, f, "version", &version);
	if (rc)
		return rc;
	if (strcmp(format, CKPT_TABLE_FORMAT) || version != CKPT_TABLE_VERSION)
		return ckpt_fail(c, EBADMSG,
				 "not a tensor table of version %d (format %s, version %lld)",
				 CKPT_TABLE_VERSION, format,
				 (long long)version);
	rc = ckpt_h5_get_str(c, f, "run", run, sizeof(run)) ?:
	     ckpt_h5_get_i64(c, f, "rank", &rank) ?:
	     ckpt_h5_get_i64(c, f, "step", &step);
	if (rc)
		return rc;
	if (strcmp(run, h->run))
		return ckpt_fail(c, EBADMSG,
				 "a checkpoint of run %s, not of this run (%s): refused",
				 run, h->run);
	if (rank != h->rank || step != h->step)
		return ckpt_fail(c, EBADMSG,
				 "holds rank %lld step %lld, not rank %d step %ld",
				 (long long)rank, (long long)step, h->rank,
				 h->step);
	return 0;
}

/* the dataset d of entry t has t's dtype and ndim, or -EBADMSG */
static int entry_kind(struct ckpt_ctx *c, int64_t d,
		      const struct sigma_rt_tensor *t)
{
	int64_t ndim = -1;
	char dtype[16];
	int rc;

	rc = ckpt_h5_get_str(c, d, "dtype", dtype, sizeof(dtype)) ?:
	     ckpt_h5_get_i64(c, d, "ndim", &ndim);
	if (rc)
		return rc;
	if (dtype_by_name(dtype) != t->dtype || ndim != t->ndim)
		return ckpt_fail(c, EBADMSG,
				 "tensor %s is %s with %lld dimensions in the file, %s with %d wanted",
				 t->name, dtype, (long long)ndim,
				 ckpt_table_dtype_name(t->dtype), t->ndim);
	return 0;
}

/* the dataset d of entry t holds elems elements of t's dtype, as a 1-D
 * array: 0 with their stored type in *type, or -EBADMSG */
static int entry_holds(struct ckpt_ctx *c, int64_t d,
		       const struct sigma_rt_tensor *t, uint64_t elems,
		       enum ckpt_h5_type *type)
{
	uint64_t dims[CKPT_H5_RANK_MAX];
	int nd;

	ckpt_h5_dataset_shape(d, type, &nd, dims);
	if (*type != dtypes[t->dtype].store || nd != 1 || dims[0] != elems)
		return ckpt_fail(c, EBADMSG,
				 "tensor %s: its dataset does not hold %llu elements of %s",
				 t->name, (unsigned long long)elems,
				 ckpt_table_dtype_name(t->dtype));
	return 0;
}

/* the entry's dtype, ndim and shape are t's; the elements into t->data */
static int read_entry(struct ckpt_ctx *c, int64_t g,
		      const struct sigma_rt_tensor *t)
{
	int64_t d = -1, shape[SIGMA_RT_NDIM_MAX];
	enum ckpt_h5_type type;
	uint64_t elems = 1;
	int rc;

	rc = ckpt_h5_dataset_open(c, g, t->name, t->name, &d);
	if (rc)
		return rc;
	rc = entry_kind(c, d, t);
	if (rc)
		goto out;
	if (t->ndim) {
		rc = ckpt_h5_get_i64s(c, d, "shape", shape, t->ndim);
		for (int i = 0; !rc && i < t->ndim; i++) {
			if (shape[i] != t->shape[i])
				rc = ckpt_fail(c, EBADMSG,
					       "tensor %s has shape[%d] = %lld in the file, %lld wanted",
					       t->name, i, (long long)shape[i],
					       (long long)t->shape[i]);
			elems *= (uint64_t)t->shape[i];
		}
		if (rc)
			goto out;
	}
	if (elems == 0)
		goto out; /* a null dataspace: nothing to read */
	rc = entry_holds(c, d, t, elems, &type) ?:
	     ckpt_h5_dataset_read(c, d, t->name, type, t->data);
out:
	ckpt_h5_close(d);
	return rc;
}

/* path opened and checked (seal, format, h), its group tensors in *g */
static int open_table(struct ckpt_ctx *c, const struct ckpt_table_head *h,
		      struct seal_file *sf, int64_t *f, int64_t *g)
{
	int rc;

	*g = -1;
	rc = ckpt_h5_open(c, SEAL_REQUIRED, sf, f);
	if (rc)
		return rc;
	rc = check_head(c, *f, h);
	if (!rc) {
		*g = ckpt_h5_group_open(*f, "tensors");
		if (*g < 0)
			rc = ckpt_fail(c, EBADMSG, "group tensors is missing");
	}
	if (rc)
		ckpt_h5_close_checked(*f, sf);
	return rc;
}

int ckpt_table_read(const char *path, const struct ckpt_table_head *h,
		    const struct sigma_rt_tensor *t, size_t n, char *err,
		    size_t len)
{
	struct ckpt_ctx c = { path, err, len };
	struct seal_file sf;
	int64_t f = -1, g = -1;
	int rc;

	rc = ckpt_table_check(t, n, NULL, err, len);
	if (rc)
		return rc;
	rc = open_table(&c, h, &sf, &f, &g);
	if (rc)
		return rc;
	for (size_t i = 0; i < n && !rc; i++)
		rc = read_entry(&c, g, &t[i]);
	ckpt_h5_close(g);
	ckpt_h5_close_checked(f, &sf);
	return rc;
}

/* ---- resharding ----------------------------------------------------------- */

/* a tensor's region: its offset and shape in its global shape */
struct region {
	int ndim;
	int64_t off[SIGMA_RT_NDIM_MAX], shape[SIGMA_RT_NDIM_MAX],
	    global[SIGMA_RT_NDIM_MAX];
};

static void region_of(const struct sigma_rt_tensor *t, struct region *r)
{
	r->ndim = t->ndim;
	for (int i = 0; i < t->ndim; i++) {
		r->off[i] = t->offset ? t->offset[i] : 0;
		r->shape[i] = t->shape[i];
		r->global[i] = t->global_shape ? t->global_shape[i] : t->shape[i];
	}
}

/* the source's region from its dataset's attributes, checked against t */
static int source_region(struct ckpt_ctx *c, int64_t d,
			 const struct sigma_rt_tensor *t, struct region *r)
{
	int rc = entry_kind(c, d, t);

	if (rc)
		return rc;
	r->ndim = t->ndim;
	if (!t->ndim)
		return 0;
	rc = ckpt_h5_get_i64s(c, d, "shape", r->shape, t->ndim);
	if (!rc && ckpt_h5_has_attr(d, "global_shape"))
		rc = ckpt_h5_get_i64s(c, d, "global_shape", r->global,
				      t->ndim) ?:
		     ckpt_h5_get_i64s(c, d, "offset", r->off, t->ndim);
	else
		for (int i = 0; i < t->ndim; i++) {
			r->global[i] = r->shape[i];
			r->off[i] = 0;
		}
	for (int i = 0; !rc && i < t->ndim; i++) {
		int64_t want = t->global_shape ? t->global_shape[i]
					       : t->shape[i];

		if (r->shape[i] < 0 || r->off[i] < 0 ||
		    r->off[i] > r->global[i] - r->shape[i])
			rc = ckpt_fail(c, EBADMSG,
				       "tensor %s: its shard lies outside its global shape",
				       t->name);
		else if (r->global[i] != want)
			rc = ckpt_fail(c, EBADMSG,
				       "tensor %s has global shape[%d] = %lld in the file, %lld wanted",
				       t->name, i, (long long)r->global[i],
				       (long long)want);
	}
	return rc;
}

/* elements in r, -1 when the count overflows */
static int64_t volume(const struct region *r)
{
	int64_t v = 1;

	for (int i = 0; i < r->ndim; i++)
		if (__builtin_mul_overflow(v, r->shape[i], &v))
			return -1;
	return v;
}

/*
 * Whether src was taken for this entry before (1), overlaps one taken
 * (-1), or is new (0; added to cov).
 */
static int cover_add(struct ckpt_table_cover *cov, const struct region *src)
{
	int64_t(*box)[2 * SIGMA_RT_NDIM_MAX];

	for (size_t k = 0; k < cov->nbox; k++) {
		const int64_t *b = cov->box[k];
		bool same = true, meet = true;

		for (int i = 0; i < src->ndim; i++) {
			same = same && b[i] == src->off[i] &&
			       b[SIGMA_RT_NDIM_MAX + i] == src->shape[i];
			meet = meet && b[i] < src->off[i] + src->shape[i] &&
			       src->off[i] < b[i] + b[SIGMA_RT_NDIM_MAX + i];
		}
		if (same)
			return 1;
		if (meet)
			return -1;
	}
	box = realloc(cov->box, (cov->nbox + 1) * sizeof(*box));
	if (!box)
		return -ENOMEM;
	cov->box = box;
	for (int i = 0; i < src->ndim; i++) {
		box[cov->nbox][i] = src->off[i];
		box[cov->nbox][SIGMA_RT_NDIM_MAX + i] = src->shape[i];
	}
	cov->nbox++;
	return 0;
}

/* whether two regions of one tensor share an element (scalars do) */
static bool regions_meet(const struct region *a, const struct region *b)
{
	for (int i = 0; i < a->ndim; i++)
		if (a->off[i] >= b->off[i] + b->shape[i] ||
		    b->off[i] >= a->off[i] + a->shape[i])
			return false;
	return true;
}

/* the elements of src (its data in buf) inside dst's region, into data */
static int64_t copy_meet(const struct region *dst, void *data,
			 const struct region *src, const unsigned char *buf,
			 size_t esz)
{
	int64_t lo[SIGMA_RT_NDIM_MAX], hi[SIGMA_RT_NDIM_MAX], idx[SIGMA_RT_NDIM_MAX];
	int64_t n = 1, run;
	int nd = dst->ndim;

	if (!nd) {
		memcpy(data, buf, esz);
		return 1;
	}
	for (int i = 0; i < nd; i++) {
		lo[i] = dst->off[i] > src->off[i] ? dst->off[i] : src->off[i];
		hi[i] = dst->off[i] + dst->shape[i] < src->off[i] + src->shape[i]
			    ? dst->off[i] + dst->shape[i]
			    : src->off[i] + src->shape[i];
		if (hi[i] <= lo[i])
			return 0;
		n *= hi[i] - lo[i];
		idx[i] = lo[i];
	}
	run = hi[nd - 1] - lo[nd - 1];
	for (;;) {
		int64_t s = 0, d = 0;
		int i;

		for (i = 0; i < nd; i++) {
			s = s * src->shape[i] + (idx[i] - src->off[i]);
			d = d * dst->shape[i] + (idx[i] - dst->off[i]);
		}
		memcpy((unsigned char *)data + (size_t)d * esz,
		       buf + (size_t)s * esz, (size_t)run * esz);
		for (i = nd - 2; i >= 0; i--) {
			if (++idx[i] < hi[i])
				break;
			idx[i] = lo[i];
		}
		if (i < 0)
			return n;
	}
}

/* the part of entry t that the file's tensor of its name holds */
static int read_entry_part(struct ckpt_ctx *c, int64_t g,
			   const struct sigma_rt_tensor *t,
			   struct ckpt_table_cover *cov)
{
	struct region dst, src;
	enum ckpt_h5_type type;
	unsigned char *buf = NULL;
	int64_t d = -1, elems;
	size_t esz = dtypes[t->dtype].size;
	int rc;

	if (!ckpt_h5_exists(g, t->name))
		return 0;
	rc = ckpt_h5_dataset_open(c, g, t->name, t->name, &d) ?:
	     source_region(c, d, t, &src);
	if (rc)
		goto out;
	region_of(t, &dst);
	elems = volume(&src);
	if (elems < 0 || (uint64_t)elems > SIZE_MAX / esz) {
		rc = ckpt_fail(c, EBADMSG, "tensor %s: its shape overflows",
			       t->name);
		goto out;
	}
	rc = cover_add(cov, &src);
	if (rc == 1 || elems == 0 || (rc == 0 && !regions_meet(&dst, &src))) {
		/* a replica of a shard taken, nothing in it, or nothing of
		 * it wanted here: counted, not read */
		rc = 0;
		goto out;
	}
	if (rc) {
		rc = rc == -ENOMEM ? ckpt_fail(c, ENOMEM, "out of memory")
				   : ckpt_fail(c, EBADMSG,
					       "tensor %s: its shard overlaps another writer's",
					       t->name);
		goto out;
	}
	rc = entry_holds(c, d, t, (uint64_t)elems, &type);
	if (rc)
		goto out;
	buf = malloc((size_t)elems * esz);
	if (!buf) {
		rc = ckpt_fail(c, ENOMEM, "out of memory");
		goto out;
	}
	rc = ckpt_h5_dataset_read(c, d, t->name, type, buf);
	if (!rc)
		cov->elems += copy_meet(&dst, t->data, &src, buf, esz);
out:
	free(buf);
	ckpt_h5_close(d);
	return rc;
}

int ckpt_table_read_part(const char *path, const struct ckpt_table_head *h,
			 const struct sigma_rt_tensor *t, size_t n,
			 struct ckpt_table_cover *cov, char *err, size_t len)
{
	struct ckpt_ctx c = { path, err, len };
	struct seal_file sf;
	int64_t f = -1, g = -1;
	int rc;

	rc = open_table(&c, h, &sf, &f, &g);
	if (rc)
		return rc;
	for (size_t i = 0; i < n && !rc; i++)
		rc = read_entry_part(&c, g, &t[i], &cov[i]);
	ckpt_h5_close(g);
	ckpt_h5_close_checked(f, &sf);
	return rc;
}

int ckpt_table_cover_check(const struct sigma_rt_tensor *t, size_t n,
			   const struct ckpt_table_cover *cov, int writers,
			   long step, char *err, size_t len)
{
	for (size_t i = 0; i < n; i++) {
		struct region r;
		int64_t want;

		region_of(&t[i], &r);
		want = volume(&r);
		if (cov[i].elems != want)
			return sigma_set_err(err, len, EBADMSG,
					     "tensor %s: the %d writers of step %ld hold %lld of its %lld elements",
					     t[i].name, writers, step,
					     (long long)cov[i].elems,
					     (long long)want);
	}
	return 0;
}

void ckpt_table_cover_free(struct ckpt_table_cover *cov, size_t n)
{
	for (size_t i = 0; cov && i < n; i++)
		free(cov[i].box);
}

int ckpt_table_shape(const char *path, const struct ckpt_table_head *h,
		     const char *name, int *dtype, int *ndim, int64_t *shape,
		     char *err, size_t len)
{
	struct ckpt_ctx c = { path, err, len };
	struct seal_file sf;
	int64_t f = -1, g = -1, d = -1, nd = -1;
	char type[16];
	int rc;

	if (!name || !chars_ok(name, SIGMA_RT_NAME_MAX, "_.:-"))
		return sigma_set_err(err, len, EINVAL, "not a tensor's name");
	rc = open_table(&c, h, &sf, &f, &g);
	if (rc)
		return rc;
	rc = ckpt_h5_dataset_open(&c, g, name, name, &d) ?:
	     ckpt_h5_get_str(&c, d, "dtype", type, sizeof(type)) ?:
	     ckpt_h5_get_i64(&c, d, "ndim", &nd);
	if (!rc && (!dtype_by_name(type) || nd < 0 || nd > SIGMA_RT_NDIM_MAX))
		rc = ckpt_fail(&c, EBADMSG,
			       "tensor %s: dtype %s with %lld dimensions", name,
			       type, (long long)nd);
	if (!rc && nd)
		rc = ckpt_h5_get_i64s(&c, d, "shape", shape, (int)nd);
	for (int i = 0; !rc && i < nd; i++)
		if (shape[i] < 0)
			rc = ckpt_fail(&c, EBADMSG,
				       "tensor %s: shape[%d] is negative",
				       name, i);
	if (!rc) {
		*dtype = dtype_by_name(type);
		*ndim = (int)nd;
	}
	ckpt_h5_close(d);
	ckpt_h5_close(g);
	ckpt_h5_close_checked(f, &sf);
	return rc;
}
