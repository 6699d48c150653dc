/*
 * ckpt_h5.c - the HDF5 layer under the checkpoints (ckpt_h5.h): the only
 * file of sigma's programs and libraries that includes hdf5.h. Every H5 call is checked and
 * a failure names the file and the object.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <hdf5.h>

#include "sigma.h"
#include "ckpt_h5.h"
#include "seal.h"

_Static_assert(sizeof(hid_t) <= sizeof(int64_t),
	       "an HDF5 handle fits the handles of ckpt_h5.h");

#define CHUNK_MAX_BYTES (16u << 20)
/* the longest string attribute a checkpoint holds (paths, layouts) */
#define CKPT_STR_MAX 65536

int ckpt_fail(struct ckpt_ctx *c, int code, const char *fmt, ...)
{
	char what[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return sigma_set_err(c->err, c->len, code, "%s: %s", c->path, what);
}

/*
 * Before the library's first use: no clean-up at exit. Every file is
 * closed explicitly; the only ones left are those whose close failed
 * (a disk that filled during the write), on which HDF5 1.10's clean-up
 * at exit crashes, turning a clear exit 73 into a segmentation fault.
 */
static void hdf5_no_atexit(void)
{
	H5dont_atexit();
}

static void hdf5_init(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, hdf5_no_atexit);
}

void ckpt_h5_quiet(void)
{
	hdf5_init();
	/* our messages name the file and object; HDF5's stack is noise */
	H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

void ckpt_h5_version(char *buf, size_t len)
{
	unsigned maj = 0, min = 0, rel = 0;

	hdf5_init();
	H5get_libversion(&maj, &min, &rel);
	snprintf(buf, len, "HDF5 %u.%u.%u", maj, min, rel);
}

/* ---- files --------------------------------------------------------------- */

int ckpt_h5_open(struct ckpt_ctx *c, enum seal_need need, struct seal_file *sf,
		 int64_t *f)
{
	int rc;

	ckpt_h5_quiet();
	rc = seal_open(c->path, need, sf, c->err, c->len);
	if (rc)
		return rc;
	if (H5Fis_hdf5(sf->h5path) <= 0) {
		seal_close(sf);
		return ckpt_fail(c, EBADMSG,
				 "not an HDF5 file (or a damaged one)");
	}
	*f = H5Fopen(sf->h5path, H5F_ACC_RDONLY, H5P_DEFAULT);
	if (*f < 0) {
		seal_close(sf);
		return ckpt_fail(c, EBADMSG, "cannot open as HDF5 (damaged?)");
	}
	return 0;
}

void ckpt_h5_close_checked(int64_t f, struct seal_file *sf)
{
	H5Fclose(f);
	seal_close(sf);
}

int ckpt_h5_create_tmp(struct ckpt_ctx *c, const char *dir, const char *final,
		       char *tmp, size_t tlen, int64_t *f)
{
	hid_t fapl;
	int rc;

	ckpt_h5_quiet();
	*f = -1;
	if (sigma_snprintf(tmp, tlen, "%s/.%s.tmp-%ld", dir,
			   strrchr(final, '/') + 1, (long)getpid())) {
		tmp[0] = '\0'; /* nothing to remove */
		return sigma_set_err(c->err, c->len, ENAMETOOLONG,
				     "%s: checkpoint path too long", dir);
	}
	rc = sigma_mkdir_p(dir, 0755);
	if (rc)
		return sigma_set_err(c->err, c->len, -rc,
				     "%s: cannot create: %s", dir,
				     strerror(-rc));
	fapl = H5Pcreate(H5P_FILE_ACCESS);
	if (fapl < 0 ||
	    H5Pset_libver_bounds(fapl, H5F_LIBVER_V18, H5F_LIBVER_LATEST) < 0)
		rc = ckpt_fail(c, EIO, "cannot set the file format version");
	else if ((*f = H5Fcreate(tmp, H5F_ACC_TRUNC, H5P_DEFAULT, fapl)) < 0)
		rc = ckpt_fail(c, EIO, "cannot create the file");
	if (fapl >= 0)
		H5Pclose(fapl);
	return rc;
}

/* clear S_IWGRP and S_IWOTH of path; -1 with errno on failure */
static int chmod_no_write_others(const char *path)
{
	struct stat st;

	if (stat(path, &st) < 0)
		return -1;
	if (!(st.st_mode & (S_IWGRP | S_IWOTH)))
		return 0;
	return chmod(path, st.st_mode & 07777 & ~(mode_t)(S_IWGRP | S_IWOTH));
}

int ckpt_h5_publish(struct ckpt_ctx *c, int64_t *f, const char *dir,
		    const char *final, const struct ckpt_state *st,
		    int (*stale)(const char *, const struct ckpt_state *,
				 char *, size_t))
{
	int rc;

	rc = ckpt_h5_set_i32(c, *f, "complete", 1);
	if (rc)
		return rc;
	if (H5Fflush(*f, H5F_SCOPE_GLOBAL) < 0)
		return ckpt_fail(c, EIO, "cannot flush");
	if (H5Fclose(*f) < 0)
		return ckpt_fail(c, EIO, "cannot close");
	*f = -1;
	rc = sigma_fsync_path(c->path, O_RDONLY);
	if (rc)
		return ckpt_fail(c, -rc, "fsync: %s", strerror(-rc));
	rc = stale ? stale(dir, st, c->err, c->len) : 0;
	if (rc)
		return rc;
	/* readers refuse a checkpoint others may write (seal.h), whatever
	 * the umask (002 is common where users have groups of their own) */
	if (chmod_no_write_others(c->path))
		return ckpt_fail(c, errno,
				 "cannot drop its group and other write bits: %s",
				 strerror(errno));
	rc = seal_write(c->path, final, c->err, c->len);
	if (rc)
		return rc;
	if (rename(c->path, final) < 0) {
		rc = ckpt_fail(c, errno, "cannot rename to %s: %s", final,
			       strerror(errno));
		seal_remove(final);
		return rc;
	}
	rc = sigma_fsync_path(dir, O_RDONLY | O_DIRECTORY);
	if (rc) {
		c->path = dir;
		return ckpt_fail(c, -rc, "fsync of the directory: %s",
				 strerror(-rc));
	}
	return 0;
}

/*
 * A write failed: was it for lack of room? The file system's free space
 * (for unprivileged users) is under what the checkpoint needs, with the
 * temporary file still holding what it got.
 */
static bool dir_full(const char *dir, size_t need,
		     unsigned long long *avail)
{
	struct statvfs sv;

	if (statvfs(dir, &sv) < 0)
		return false;
	*avail = (unsigned long long)sv.f_bavail * sv.f_frsize;
	return *avail < need;
}

/*
 * A file whose close failed (typically: the disk filled while HDF5 flushed
 * its cache) stays open in the library, which then fails again, or
 * crashes, when it closes everything at exit. The file is garbage: empty
 * it first, so that the close has room for what HDF5 still holds.
 */
static void close_failed(hid_t f, const char *tmp)
{
	/* once only: a second H5Fclose of a file whose close failed is
	 * not safe in HDF5 1.10 */
	if (truncate(tmp, 0) < 0 || H5Fclose(f) < 0)
		sigma_warn("%s: HDF5 could not close the file", tmp);
}

int ckpt_h5_finish_failed(int rc, int saved, int64_t f, const char *tmp,
			  const char *dir, size_t n, const char *what,
			  long step, char *err, size_t len)
{
	unsigned long long avail = 0;

	if (f >= 0)
		close_failed(f, tmp);
	if (rc && rc != -ESTALE && rc != -ENOSPC &&
	    (saved == ENOSPC || saved == EDQUOT ||
	     dir_full(dir, sizeof(float) * 3 * n, &avail))) {
		char why[768];

		sigma_strlcpy(why, err ? err : "", sizeof(why));
		rc = sigma_set_err(err, len, ENOSPC,
				   "%s: no space left on device (ENOSPC) for the %s of step %ld (%zu MiB, %llu MiB free): the temporary file is removed, the checkpoints already there are untouched (%s)",
				   dir, what, step, sizeof(float) * 3 * n >> 20,
				   avail >> 20, why);
	}
	if (rc && tmp[0])
		unlink(tmp);
	return rc;
}

/*
 * The data, 4 bytes of checksum per chunk and the metadata, with a
 * margin; a disk that fills during the write is caught after it.
 */
int ckpt_h5_check_room(const char *dir, size_t n, long step, char *err,
		       size_t len)
{
	size_t need = sizeof(float) * 3 * n;
	unsigned long long avail = 0;

	need += need / 64 + (256u << 10);
	if (!dir_full(dir, need, &avail))
		return 0;
	return sigma_set_err(err, len, ENOSPC,
			     "%s: no space left on device (ENOSPC) for the checkpoint of step %ld (%zu MiB, %llu MiB free): nothing written, the checkpoints already there are untouched",
			     dir, step, need >> 20, avail >> 20);
}

/* ---- groups -------------------------------------------------------------- */

int64_t ckpt_h5_group_create(int64_t loc, const char *name)
{
	return H5Gcreate2(loc, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
}

int64_t ckpt_h5_group_open(int64_t loc, const char *name)
{
	return H5Gopen2(loc, name, H5P_DEFAULT);
}

void ckpt_h5_close(int64_t obj)
{
	if (obj >= 0)
		H5Oclose(obj);
}

bool ckpt_h5_exists(int64_t loc, const char *name)
{
	return H5Lexists(loc, name, H5P_DEFAULT) > 0;
}

bool ckpt_h5_has_attr(int64_t loc, const char *name)
{
	return H5Aexists(loc, name) > 0;
}

/* ---- attributes ---------------------------------------------------------- */

/* n values: a scalar (0) or a 1-D array of n */
static int attr_write_n(struct ckpt_ctx *c, hid_t loc, const char *name,
			hid_t ftype, hid_t mtype, const void *val, int n)
{
	hsize_t dim = (hsize_t)n;
	hid_t sp = n ? H5Screate_simple(1, &dim, NULL) : H5Screate(H5S_SCALAR);
	hid_t a;
	herr_t rc = -1;

	if (sp < 0)
		return ckpt_fail(c, EIO, "cannot create a dataspace for %s",
				 name);
	a = H5Acreate2(loc, name, ftype, sp, H5P_DEFAULT, H5P_DEFAULT);
	if (a >= 0) {
		rc = H5Awrite(a, mtype, val);
		H5Aclose(a);
	}
	H5Sclose(sp);
	return rc < 0 ? ckpt_fail(c, EIO, "cannot write attribute %s", name)
		      : 0;
}

static int attr_write(struct ckpt_ctx *c, hid_t loc, const char *name,
		      hid_t ftype, hid_t mtype, const void *val)
{
	return attr_write_n(c, loc, name, ftype, mtype, val, 0);
}

int ckpt_h5_set_i64s(struct ckpt_ctx *c, int64_t loc, const char *name,
		     const int64_t *v, int n)
{
	if (n < 1)
		return ckpt_fail(c, EINVAL, "attribute %s: no values", name);
	return attr_write_n(c, loc, name, H5T_STD_I64LE, H5T_NATIVE_INT64, v,
			    n);
}

int ckpt_h5_set_i64(struct ckpt_ctx *c, int64_t loc, const char *name,
		    int64_t v)
{
	return attr_write(c, loc, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &v);
}

int ckpt_h5_set_i32(struct ckpt_ctx *c, int64_t loc, const char *name,
		    int32_t v)
{
	return attr_write(c, loc, name, H5T_STD_I32LE, H5T_NATIVE_INT32, &v);
}

int ckpt_h5_set_u64(struct ckpt_ctx *c, int64_t loc, const char *name,
		    uint64_t v)
{
	return attr_write(c, loc, name, H5T_STD_U64LE, H5T_NATIVE_UINT64, &v);
}

int ckpt_h5_set_f32(struct ckpt_ctx *c, int64_t loc, const char *name,
		    float v)
{
	return attr_write(c, loc, name, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, &v);
}

int ckpt_h5_set_str(struct ckpt_ctx *c, int64_t loc, const char *name,
		    const char *s)
{
	hid_t t = H5Tcopy(H5T_C_S1);
	int rc;

	if (t < 0 || H5Tset_size(t, strlen(s) + 1) < 0 ||
	    H5Tset_strpad(t, H5T_STR_NULLTERM) < 0) {
		if (t >= 0)
			H5Tclose(t);
		return ckpt_fail(c, EIO, "cannot make a string type for %s",
				 name);
	}
	rc = attr_write(c, loc, name, t, t, s);
	H5Tclose(t);
	return rc;
}

/* exactly n values (0: one scalar) into val, whatever the file holds */
static int attr_read_n(struct ckpt_ctx *c, hid_t loc, const char *name,
		       hid_t mtype, void *val, int n)
{
	hid_t a, sp;
	int rc = 0;

	if (H5Aexists(loc, name) <= 0)
		return ckpt_fail(c, EBADMSG, "attribute %s is missing", name);
	a = H5Aopen(loc, name, H5P_DEFAULT);
	if (a < 0)
		return ckpt_fail(c, EBADMSG, "cannot open attribute %s", name);
	sp = H5Aget_space(a);
	if (sp < 0 || H5Sget_simple_extent_npoints(sp) != (n ? n : 1) ||
	    (n && H5Sget_simple_extent_ndims(sp) != 1))
		rc = n ? ckpt_fail(c, EBADMSG,
				   "attribute %s is not an array of %d", name,
				   n)
		       : ckpt_fail(c, EBADMSG, "attribute %s is not a scalar",
				   name);
	else if (H5Aread(a, mtype, val) < 0)
		rc = ckpt_fail(c, EBADMSG, "cannot read attribute %s", name);
	if (sp >= 0)
		H5Sclose(sp);
	H5Aclose(a);
	return rc;
}

static int attr_read(struct ckpt_ctx *c, hid_t loc, const char *name,
		     hid_t mtype, void *val)
{
	return attr_read_n(c, loc, name, mtype, val, 0);
}

int ckpt_h5_get_i64s(struct ckpt_ctx *c, int64_t loc, const char *name,
		     int64_t *v, int n)
{
	if (n < 1)
		return ckpt_fail(c, EINVAL, "attribute %s: no values", name);
	return attr_read_n(c, loc, name, H5T_NATIVE_INT64, v, n);
}

int ckpt_h5_get_i64(struct ckpt_ctx *c, int64_t loc, const char *name,
		    int64_t *v)
{
	return attr_read(c, loc, name, H5T_NATIVE_INT64, v);
}

int ckpt_h5_get_u64(struct ckpt_ctx *c, int64_t loc, const char *name,
		    uint64_t *v)
{
	return attr_read(c, loc, name, H5T_NATIVE_UINT64, v);
}

int ckpt_h5_get_f32(struct ckpt_ctx *c, int64_t loc, const char *name,
		    float *v)
{
	return attr_read(c, loc, name, H5T_NATIVE_FLOAT, v);
}

int ckpt_h5_get_str(struct ckpt_ctx *c, int64_t loc, const char *name,
		    char *buf, size_t len)
{
	hid_t a, t, mt, sp;
	int rc = 0;
	size_t sz;
	char *tmp;

	if (H5Aexists(loc, name) <= 0)
		return ckpt_fail(c, EBADMSG, "attribute %s is missing", name);
	a = H5Aopen(loc, name, H5P_DEFAULT);
	if (a < 0)
		return ckpt_fail(c, EBADMSG, "cannot open attribute %s", name);
	t = H5Aget_type(a);
	if (t < 0 || H5Tget_class(t) != H5T_STRING || H5Tis_variable_str(t)) {
		if (t >= 0)
			H5Tclose(t);
		H5Aclose(a);
		return ckpt_fail(c, EBADMSG,
				 "attribute %s is not a fixed-length string",
				 name);
	}
	/*
	 * One string of a sane size, or H5Aread writes every element of the
	 * file's dataspace, whatever the buffer (a hostile file's "format" of
	 * 2000 strings would overrun it)
	 */
	sp = H5Aget_space(a);
	sz = H5Tget_size(t);
	if (sp < 0 || H5Sget_simple_extent_npoints(sp) != 1 || sz == 0 ||
	    sz > CKPT_STR_MAX) {
		if (sp >= 0)
			H5Sclose(sp);
		H5Tclose(t);
		H5Aclose(a);
		return ckpt_fail(c, EBADMSG,
				 "attribute %s is not one string of at most %d bytes",
				 name, CKPT_STR_MAX);
	}
	H5Sclose(sp);
	tmp = calloc(1, sz + 1);
	mt = H5Tcopy(t);
	if (!tmp || mt < 0 || H5Aread(a, mt, tmp) < 0)
		rc = ckpt_fail(c, EBADMSG, "cannot read attribute %s", name);
	else
		sigma_strlcpy(buf, tmp, len);
	free(tmp);
	if (mt >= 0)
		H5Tclose(mt);
	H5Tclose(t);
	H5Aclose(a);
	return rc;
}

/* ---- attribute tables ---------------------------------------------------- */

int ckpt_h5_set_fields(struct ckpt_ctx *c, int64_t loc,
		       const struct ckpt_field *f, size_t n, const void *obj)
{
	const char *base = obj;
	int rc = 0;

	for (size_t i = 0; i < n && !rc; i++) {
		const void *p = base + f[i].offset;

		switch (f[i].type) {
		case CKPT_FIELD_F32:
			rc = ckpt_h5_set_f32(c, loc, f[i].name,
					     *(const float *)p);
			break;
		case CKPT_FIELD_U64:
			rc = ckpt_h5_set_u64(c, loc, f[i].name,
					     *(const uint64_t *)p);
			break;
		case CKPT_FIELD_LONG:
			rc = ckpt_h5_set_i64(c, loc, f[i].name,
					     *(const long *)p);
			break;
		case CKPT_FIELD_INT:
			rc = ckpt_h5_set_i32(c, loc, f[i].name,
					     *(const int *)p);
			break;
		}
	}
	return rc;
}

int ckpt_h5_get_fields(struct ckpt_ctx *c, int64_t loc,
		       const struct ckpt_field *f, size_t n, void *obj)
{
	char *base = obj;
	int64_t v = 0;
	int rc = 0;

	for (size_t i = 0; i < n && !rc; i++) {
		void *p = base + f[i].offset;

		switch (f[i].type) {
		case CKPT_FIELD_F32:
			rc = ckpt_h5_get_f32(c, loc, f[i].name, p);
			break;
		case CKPT_FIELD_U64:
			rc = ckpt_h5_get_u64(c, loc, f[i].name, p);
			break;
		case CKPT_FIELD_LONG:
			rc = ckpt_h5_get_i64(c, loc, f[i].name, &v);
			if (!rc)
				*(long *)p = (long)v;
			break;
		case CKPT_FIELD_INT:
			rc = ckpt_h5_get_i64(c, loc, f[i].name, &v);
			if (!rc && (v < INT_MIN || v > INT_MAX))
				rc = ckpt_fail(c, EBADMSG,
					       "attribute %s %lld is out of "
					       "range",
					       f[i].name, (long long)v);
			else if (!rc)
				*(int *)p = (int)v;
			break;
		}
	}
	return rc;
}

/* ---- datasets ------------------------------------------------------------ */

static hid_t file_type(enum ckpt_h5_type t)
{
	switch (t) {
	case CKPT_H5_F64: return H5T_IEEE_F64LE;
	case CKPT_H5_U32: return H5T_STD_U32LE;
	case CKPT_H5_I64: return H5T_STD_I64LE;
	case CKPT_H5_I32: return H5T_STD_I32LE;
	case CKPT_H5_U16: return H5T_STD_U16LE;
	case CKPT_H5_U8:  return H5T_STD_U8LE;
	default:	  return H5T_IEEE_F32LE;
	}
}

static hid_t mem_type(enum ckpt_h5_type t)
{
	switch (t) {
	case CKPT_H5_F64: return H5T_NATIVE_DOUBLE;
	case CKPT_H5_U32: return H5T_NATIVE_UINT32;
	case CKPT_H5_I64: return H5T_NATIVE_INT64;
	case CKPT_H5_I32: return H5T_NATIVE_INT32;
	case CKPT_H5_U16: return H5T_NATIVE_UINT16;
	case CKPT_H5_U8:  return H5T_NATIVE_UINT8;
	default:	  return H5T_NATIVE_FLOAT;
	}
}

size_t ckpt_h5_type_size(enum ckpt_h5_type t)
{
	switch (t) {
	case CKPT_H5_F64: case CKPT_H5_I64: return 8;
	case CKPT_H5_F32: case CKPT_H5_U32: case CKPT_H5_I32: return 4;
	case CKPT_H5_U16: return 2;
	case CKPT_H5_U8: return 1;
	default: return 0;
	}
}

/* along the first axis so a chunk stays under CHUNK_MAX_BYTES */
static void chunk_dims(int ndim, const uint64_t *shape, size_t elem,
		       hsize_t *dims, hsize_t *chunk)
{
	size_t row = elem;

	for (int i = 0; i < ndim; i++) {
		dims[i] = chunk[i] = shape[i];
		if (i > 0)
			row *= shape[i];
	}
	if (row * chunk[0] > CHUNK_MAX_BYTES) {
		chunk[0] = CHUNK_MAX_BYTES / row;
		if (chunk[0] < 1)
			chunk[0] = 1;
	}
}

int ckpt_h5_dataset_write(struct ckpt_ctx *c, int64_t loc, const char *name,
			  const char *what, enum ckpt_h5_type type, int ndim,
			  const uint64_t *shape, unsigned flags,
			  const void *data, int64_t *dout)
{
	hsize_t dims[CKPT_H5_RANK_MAX] = { 1, 1, 1 };
	hsize_t chunk[CKPT_H5_RANK_MAX] = { 1, 1, 1 };
	hid_t sp = -1, dcpl = -1, d = -1;
	int rc = 0;

	chunk_dims(ndim, shape, ckpt_h5_type_size(type), dims, chunk);
	sp = H5Screate_simple(ndim, dims, NULL);
	dcpl = H5Pcreate(H5P_DATASET_CREATE);
	/* a property list left as created lays the dataset out contiguous */
	if (sp < 0 || dcpl < 0 ||
	    (!(flags & CKPT_H5_CONTIGUOUS) &&
	     (H5Pset_chunk(dcpl, ndim, chunk) < 0 ||
	      ((flags & CKPT_H5_COMPRESS) &&
	       (H5Pset_shuffle(dcpl) < 0 ||
		H5Pset_deflate(dcpl, CKPT_H5_DEFLATE) < 0)) ||
	      H5Pset_fletcher32(dcpl) < 0))) {
		rc = ckpt_fail(c, EIO, "cannot set up dataset %s", what);
		goto out;
	}
	d = H5Dcreate2(loc, name, file_type(type), sp, H5P_DEFAULT, dcpl,
		       H5P_DEFAULT);
	if (d < 0 ||
	    H5Dwrite(d, mem_type(type), H5S_ALL, H5S_ALL, H5P_DEFAULT,
		     data) < 0)
		rc = ckpt_fail(c, EIO, "cannot write dataset %s", what);
out:
	if (d >= 0 && (rc || !dout)) {
		H5Dclose(d);
		d = -1;
	}
	if (dout)
		*dout = d;
	if (dcpl >= 0)
		H5Pclose(dcpl);
	if (sp >= 0)
		H5Sclose(sp);
	return rc;
}

int ckpt_h5_dataset_empty(struct ckpt_ctx *c, int64_t loc, const char *name,
			  const char *what, int64_t *dout)
{
	hid_t sp = H5Screate(H5S_NULL), d = -1;

	if (sp >= 0) {
		d = H5Dcreate2(loc, name, H5T_STD_U32LE, sp, H5P_DEFAULT,
			       H5P_DEFAULT, H5P_DEFAULT);
		H5Sclose(sp);
	}
	*dout = d;
	return d < 0 ? ckpt_fail(c, EIO, "cannot create dataset %s", what)
		     : 0;
}

/* where the sources of virtual datasets are (ckpt_h5_virtual_dir) */
static char virtual_dir[PATH_MAX];

/*
 * Where a dataset's bytes are: in the file itself, or (a verified shard
 * index, virtual_dir set) in shard files next to it. NULL when that holds,
 * else what is wrong. Storage elsewhere (H5Pset_external, or a virtual
 * dataset outside a verified shard index, or one whose sources name a
 * path) would have libhdf5 read any file the running user can, as tensor
 * bytes.
 */
static const char *dataset_storage_refused(hid_t d)
{
	hid_t dcpl = H5Dget_create_plist(d);
	const char *why = NULL;
	size_t n = 0;

	if (dcpl < 0)
		return "its storage cannot be read";
	if (H5Pget_external_count(dcpl) != 0)
		why = "it is stored in an external file";
	else if (H5Pget_layout(dcpl) == H5D_VIRTUAL) {
		if (!virtual_dir[0])
			why = "it is a virtual dataset outside a shard index";
		else if (H5Pget_virtual_count(dcpl, &n) < 0)
			why = "its virtual sources cannot be read";
		for (size_t i = 0; !why && i < n; i++) {
			char f[PATH_MAX];
			ssize_t len = H5Pget_virtual_filename(dcpl, i, f,
							      sizeof(f));

			if (len <= 0 || (size_t)len >= sizeof(f) ||
			    strchr(f, '/') || !strcmp(f, "..") ||
			    (f[0] == '.' && f[1] != '\0') || strchr(f, '$'))
				why = "a virtual source is not a shard file "
				      "next to it";
		}
	}
	H5Pclose(dcpl);
	return why;
}

int ckpt_h5_dataset_open(struct ckpt_ctx *c, int64_t loc, const char *name,
			 const char *what, int64_t *d)
{
	const char *why;
	hid_t dapl;

	*d = -1;
	if (H5Lexists(loc, name, H5P_DEFAULT) <= 0)
		return ckpt_fail(c, EBADMSG, "dataset %s is missing", what);
	/* any external or virtual file is looked for next to the checkpoint
	 * (or in the shard index's directory), never where the file says */
	dapl = H5Pcreate(H5P_DATASET_ACCESS);
	if (dapl >= 0 &&
	    H5Pset_virtual_prefix(dapl, virtual_dir[0] ? virtual_dir
						       : "${ORIGIN}") >= 0 &&
	    H5Pset_efile_prefix(dapl, "${ORIGIN}") >= 0)
		*d = H5Dopen2(loc, name, dapl);
	if (dapl >= 0)
		H5Pclose(dapl);
	if (*d < 0)
		return ckpt_fail(c, EBADMSG, "cannot open dataset %s", what);
	if ((why = dataset_storage_refused(*d))) {
		H5Dclose(*d);
		*d = -1;
		return ckpt_fail(c, EBADMSG, "dataset %s refused: %s", what,
				 why);
	}
	return 0;
}

void ckpt_h5_dataset_shape(int64_t d, enum ckpt_h5_type *type, int *ndim,
			   uint64_t *dims)
{
	hid_t sp = H5Dget_space(d), ty = H5Dget_type(d);
	hsize_t hd[CKPT_H5_RANK_MAX];
	H5T_class_t cls = ty >= 0 ? H5Tget_class(ty) : H5T_NO_CLASS;
	size_t size = ty >= 0 ? H5Tget_size(ty) : 0;

	H5T_sign_t sign = cls == H5T_INTEGER ? H5Tget_sign(ty) : H5T_SGN_ERROR;

	*type = CKPT_H5_OTHER;
	if (cls == H5T_FLOAT && size == 4)
		*type = CKPT_H5_F32;
	else if (cls == H5T_FLOAT && size == 8)
		*type = CKPT_H5_F64;
	else if (sign == H5T_SGN_NONE)
		*type = size == 4 ? CKPT_H5_U32 : size == 2 ? CKPT_H5_U16
					     : size == 1 ? CKPT_H5_U8
							 : CKPT_H5_OTHER;
	else if (sign == H5T_SGN_2)
		*type = size == 8 ? CKPT_H5_I64 : size == 4 ? CKPT_H5_I32
							 : CKPT_H5_OTHER;
	*ndim = sp >= 0 ? H5Sget_simple_extent_ndims(sp) : -1;
	/* the dimensions only where they fit: a hostile file's rank is
	 * anything */
	if (*ndim >= 1 && *ndim <= CKPT_H5_RANK_MAX) {
		if (H5Sget_simple_extent_dims(sp, hd, NULL) < 0)
			*ndim = -1;
		for (int i = 0; i < *ndim; i++)
			dims[i] = hd[i];
	}
	if (ty >= 0)
		H5Tclose(ty);
	if (sp >= 0)
		H5Sclose(sp);
}

int ckpt_h5_check_tensor(struct ckpt_ctx *c, int64_t d, const char *what,
			 enum ckpt_h5_type want, int ndim,
			 const uint64_t *shape)
{
	enum ckpt_h5_type type;
	uint64_t dims[CKPT_H5_RANK_MAX];
	int nd;

	ckpt_h5_dataset_shape(d, &type, &nd, dims);
	if (type != want)
		return ckpt_fail(c, EBADMSG, "dataset %s is not %s", what,
				 want == CKPT_H5_F32 ? "fp32" : "uint32");
	if (nd != ndim || nd < 1 || nd > CKPT_H5_RANK_MAX)
		return ckpt_fail(c, EBADMSG,
				 "dataset %s has rank %d, the model wants %d",
				 what, nd, ndim);
	for (int i = 0; i < nd; i++)
		if (dims[i] != shape[i])
			return ckpt_fail(c, EBADMSG,
					 "dataset %s has shape[%d] = %llu, the model wants %llu",
					 what, i, (unsigned long long)dims[i],
					 (unsigned long long)shape[i]);
	return 0;
}

int ckpt_h5_dataset_read(struct ckpt_ctx *c, int64_t d, const char *what,
			 enum ckpt_h5_type type, void *buf)
{
	if (H5Dread(d, mem_type(type), H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) <
	    0)
		return ckpt_fail(c, EBADMSG,
				 "cannot read dataset %s (checksum failure or damaged file)",
				 what);
	return 0;
}

int ckpt_h5_dataset_read_rows(struct ckpt_ctx *c, int64_t d, const char *what,
			      const uint64_t *rows, size_t nrows,
			      size_t row_len, float *buf)
{
	hid_t fs = H5Dget_space(d), ms = -1;
	hsize_t dims[CKPT_H5_RANK_MAX], start[CKPT_H5_RANK_MAX] = { 0 };
	hsize_t count[CKPT_H5_RANK_MAX], mdim = row_len;
	int nd = fs >= 0 ? H5Sget_simple_extent_ndims(fs) : -1, rc = 0;

	if (nd < 1 || nd > CKPT_H5_RANK_MAX ||
	    H5Sget_simple_extent_dims(fs, dims, NULL) < 0) {
		rc = ckpt_fail(c, EBADMSG, "dataset %s: no shape", what);
		goto out;
	}
	ms = H5Screate_simple(1, &mdim, NULL);
	for (int i = 0; i < nd; i++)
		count[i] = dims[i];
	count[0] = 1;
	for (size_t r = 0; r < nrows && rc == 0; r++) {
		if (rows[r] >= dims[0]) {
			rc = ckpt_fail(c, EBADMSG,
				       "dataset %s has %llu rows, row %llu wanted",
				       what, (unsigned long long)dims[0],
				       (unsigned long long)rows[r]);
			break;
		}
		start[0] = rows[r];
		if (ms < 0 ||
		    H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count,
					NULL) < 0 ||
		    H5Dread(d, H5T_NATIVE_FLOAT, ms, fs, H5P_DEFAULT,
			    buf + r * row_len) < 0)
			rc = ckpt_fail(c, EBADMSG,
				       "cannot read row %llu of dataset %s (checksum failure, damaged or missing file)",
				       (unsigned long long)rows[r], what);
	}
out:
	if (ms >= 0)
		H5Sclose(ms);
	if (fs >= 0)
		H5Sclose(fs);
	return rc;
}

/* ---- virtual datasets ------------------------------------------------------ */

/* one map's selections: rows of the virtual space and of the source */
static int select_rows(hid_t vs, hid_t ss, int ndim, const uint64_t *shape,
		       const struct ckpt_h5_map *mp)
{
	hsize_t vstart[CKPT_H5_RANK_MAX] = { 0 }, sstart[CKPT_H5_RANK_MAX] = { 0 };
	hsize_t count[CKPT_H5_RANK_MAX];

	for (int i = 0; i < ndim; i++)
		count[i] = shape[i];
	count[0] = mp->count;
	vstart[0] = mp->dst_row;
	sstart[0] = mp->src_row;
	return H5Sselect_hyperslab(vs, H5S_SELECT_SET, vstart, NULL, count,
				   NULL) < 0 ||
	       H5Sselect_hyperslab(ss, H5S_SELECT_SET, sstart, NULL, count,
				   NULL) < 0;
}

int ckpt_h5_virtual_write(struct ckpt_ctx *c, int64_t loc, const char *name,
			  const char *what, int ndim, const uint64_t *shape,
			  const struct ckpt_h5_map *maps, size_t n)
{
	hsize_t dims[CKPT_H5_RANK_MAX];
	hid_t vs = -1, dcpl = -1, d = -1;
	float nan_ = NAN;
	int rc = 0;

	for (int i = 0; i < ndim; i++)
		dims[i] = shape[i];
	vs = H5Screate_simple(ndim, dims, NULL);
	dcpl = H5Pcreate(H5P_DATASET_CREATE);
	if (vs < 0 || dcpl < 0 ||
	    H5Pset_fill_value(dcpl, H5T_NATIVE_FLOAT, &nan_) < 0) {
		rc = ckpt_fail(c, EIO, "cannot set up dataset %s", what);
		goto out;
	}
	for (size_t i = 0; i < n && rc == 0; i++) {
		hsize_t sd[CKPT_H5_RANK_MAX];
		hid_t ss;

		for (int k = 0; k < ndim; k++)
			sd[k] = shape[k];
		sd[0] = maps[i].src_row + maps[i].count;
		ss = H5Screate_simple(ndim, sd, NULL);
		if (ss < 0 || select_rows(vs, ss, ndim, shape, &maps[i]) ||
		    H5Pset_virtual(dcpl, vs, maps[i].file, maps[i].src, ss) < 0)
			rc = ckpt_fail(c, EIO, "cannot map %s of %s into %s",
				       maps[i].src, maps[i].file, what);
		if (ss >= 0)
			H5Sclose(ss);
	}
	if (rc == 0) {
		H5Sselect_all(vs);
		d = H5Dcreate2(loc, name, H5T_IEEE_F32LE, vs, H5P_DEFAULT, dcpl,
			       H5P_DEFAULT);
		if (d < 0)
			rc = ckpt_fail(c, EIO, "cannot write dataset %s", what);
	}
out:
	if (d >= 0)
		H5Dclose(d);
	if (dcpl >= 0)
		H5Pclose(dcpl);
	if (vs >= 0)
		H5Sclose(vs);
	return rc;
}

void ckpt_h5_virtual_dir(const char *dir)
{
	if (dir)
		sigma_strlcpy(virtual_dir, dir, sizeof(virtual_dir));
	else
		virtual_dir[0] = '\0';
}

static pthread_mutex_t h5_mu = PTHREAD_MUTEX_INITIALIZER;

void ckpt_h5_lock(void)
{
	pthread_mutex_lock(&h5_mu);
}

void ckpt_h5_unlock(void)
{
	pthread_mutex_unlock(&h5_mu);
}

/* ---- compression --------------------------------------------------------- */

bool ckpt_h5_can_compress(void)
{
	ckpt_h5_quiet();
	return H5Zfilter_avail(H5Z_FILTER_DEFLATE) > 0 &&
	       H5Zfilter_avail(H5Z_FILTER_SHUFFLE) > 0;
}

long ckpt_h5_estimate(void *ctx, const uint32_t *words, size_t n)
{
	const size_t *window = ctx;
	hsize_t dims = n, chunk = n < *window ? n : *window;
	hid_t fapl = -1, f = -1, sp = -1, dcpl = -1, d = -1;
	long size = -EIO;

	if (n == 0)
		return 0;
	fapl = H5Pcreate(H5P_FILE_ACCESS);
	if (fapl < 0 || H5Pset_fapl_core(fapl, 1 << 20, 0) < 0)
		goto out;
	f = H5Fcreate("sigma-estimate.h5", H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
	sp = H5Screate_simple(1, &dims, NULL);
	dcpl = H5Pcreate(H5P_DATASET_CREATE);
	if (f < 0 || sp < 0 || dcpl < 0 || H5Pset_chunk(dcpl, 1, &chunk) < 0 ||
	    H5Pset_shuffle(dcpl) < 0 ||
	    H5Pset_deflate(dcpl, CKPT_H5_DEFLATE) < 0)
		goto out;
	d = H5Dcreate2(f, "e", H5T_STD_U32LE, sp, H5P_DEFAULT, dcpl,
		       H5P_DEFAULT);
	if (d < 0 ||
	    H5Dwrite(d, H5T_NATIVE_UINT32, H5S_ALL, H5S_ALL, H5P_DEFAULT,
		     words) < 0 ||
	    H5Dflush(d) < 0)
		goto out;
	size = (long)H5Dget_storage_size(d);
out:
	if (d >= 0)
		H5Dclose(d);
	if (dcpl >= 0)
		H5Pclose(dcpl);
	if (sp >= 0)
		H5Sclose(sp);
	if (f >= 0)
		H5Fclose(f);
	if (fapl >= 0)
		H5Pclose(fapl);
	return size;
}
