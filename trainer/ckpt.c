/*
 * ckpt.c - HDF5 full checkpoints. The only file of the trainer that
 * includes hdf5.h; every H5 call is checked and a failure names the file
 * and the object.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <hdf5.h>

#include "sigma.h"
#include "ckpt.h"
#include "seal.h"
#include "delta.h"
#include "guard_state.h"

#ifndef SIGMA_BUILD_CFLAGS
#define SIGMA_BUILD_CFLAGS "unknown"
#endif

#define CKPT_MAX_LISTED 4096
#define CHUNK_MAX_BYTES (16u << 20)

/* error context: which file, where to write the message */
struct ctx {
	const char *path;
	char *err;
	size_t len;
};

static int fail(struct ctx *c, int code, const char *fmt, ...)
	SIGMA_PRINTF(3, 4);

static int fail(struct ctx *c, int code, const char *fmt, ...)
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

static void quiet_hdf5(void)
{
	hdf5_init();
	/* our messages name the file and object; HDF5's stack is noise */
	H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

/*
 * The one way a checkpoint is opened for reading: the checks of seal.h on
 * c->path, then libhdf5 on the descriptor they checked. *f and sf are the
 * caller's to release with close_checked.
 */
static int open_checked(struct ctx *c, enum seal_need need,
			struct seal_file *sf, hid_t *f)
{
	int rc;

	quiet_hdf5();
	rc = seal_open(c->path, need, sf, c->err, c->len);
	if (rc)
		return rc;
	if (H5Fis_hdf5(sf->h5path) <= 0) {
		seal_close(sf);
		return fail(c, EBADMSG, "not an HDF5 file (or a damaged one)");
	}
	*f = H5Fopen(sf->h5path, H5F_ACC_RDONLY, H5P_DEFAULT);
	if (*f < 0) {
		seal_close(sf);
		return fail(c, EBADMSG, "cannot open as HDF5 (damaged?)");
	}
	return 0;
}

static void close_checked(hid_t f, struct seal_file *sf)
{
	H5Fclose(f);
	seal_close(sf);
}

/* a published checkpoint and its seal gone; unlink's result for the file */
static int remove_published(const char *path)
{
	int rc = unlink(path);

	seal_remove(path);
	return rc;
}

void ckpt_library_version(char *buf, size_t len)
{
	unsigned maj = 0, min = 0, rel = 0;

	hdf5_init();
	H5get_libversion(&maj, &min, &rel);
	snprintf(buf, len, "HDF5 %u.%u.%u", maj, min, rel);
}

/* ---- attributes ---------------------------------------------------------- */

static int attr_write(struct ctx *c, hid_t loc, const char *name, hid_t ftype,
		      hid_t mtype, const void *val)
{
	hid_t sp = H5Screate(H5S_SCALAR), a;
	herr_t rc = -1;

	if (sp < 0)
		return fail(c, EIO, "cannot create a dataspace for %s", name);
	a = H5Acreate2(loc, name, ftype, sp, H5P_DEFAULT, H5P_DEFAULT);
	if (a >= 0) {
		rc = H5Awrite(a, mtype, val);
		H5Aclose(a);
	}
	H5Sclose(sp);
	return rc < 0 ? fail(c, EIO, "cannot write attribute %s", name) : 0;
}

static int attr_i64(struct ctx *c, hid_t loc, const char *name, int64_t v)
{
	return attr_write(c, loc, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &v);
}

static int attr_i32(struct ctx *c, hid_t loc, const char *name, int32_t v)
{
	return attr_write(c, loc, name, H5T_STD_I32LE, H5T_NATIVE_INT32, &v);
}

static int attr_u64(struct ctx *c, hid_t loc, const char *name, uint64_t v)
{
	return attr_write(c, loc, name, H5T_STD_U64LE, H5T_NATIVE_UINT64, &v);
}

static int attr_f32(struct ctx *c, hid_t loc, const char *name, float v)
{
	return attr_write(c, loc, name, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, &v);
}

static int attr_str(struct ctx *c, hid_t loc, const char *name,
		    const char *s)
{
	hid_t t = H5Tcopy(H5T_C_S1);
	int rc;

	if (t < 0 || H5Tset_size(t, strlen(s) + 1) < 0 ||
	    H5Tset_strpad(t, H5T_STR_NULLTERM) < 0) {
		if (t >= 0)
			H5Tclose(t);
		return fail(c, EIO, "cannot make a string type for %s", name);
	}
	rc = attr_write(c, loc, name, t, t, s);
	H5Tclose(t);
	return rc;
}

static int attr_read(struct ctx *c, hid_t loc, const char *name, hid_t mtype,
		     void *val)
{
	hid_t a, sp;
	int rc = 0;

	if (H5Aexists(loc, name) <= 0)
		return fail(c, EBADMSG, "attribute %s is missing", name);
	a = H5Aopen(loc, name, H5P_DEFAULT);
	if (a < 0)
		return fail(c, EBADMSG, "cannot open attribute %s", name);
	sp = H5Aget_space(a);
	if (sp < 0 || H5Sget_simple_extent_npoints(sp) != 1)
		rc = fail(c, EBADMSG, "attribute %s is not a scalar", name);
	else if (H5Aread(a, mtype, val) < 0)
		rc = fail(c, EBADMSG, "cannot read attribute %s", name);
	if (sp >= 0)
		H5Sclose(sp);
	H5Aclose(a);
	return rc;
}

static int read_i64(struct ctx *c, hid_t loc, const char *name, int64_t *v)
{
	return attr_read(c, loc, name, H5T_NATIVE_INT64, v);
}

static int read_u64(struct ctx *c, hid_t loc, const char *name, uint64_t *v)
{
	return attr_read(c, loc, name, H5T_NATIVE_UINT64, v);
}

static int read_f32(struct ctx *c, hid_t loc, const char *name, float *v)
{
	return attr_read(c, loc, name, H5T_NATIVE_FLOAT, v);
}

/* the longest string attribute a checkpoint holds (paths, layouts) */
#define CKPT_STR_MAX 65536

static int read_str(struct ctx *c, hid_t loc, const char *name, char *buf,
		    size_t len)
{
	hid_t a, t, mt, sp;
	int rc = 0;
	size_t sz;
	char *tmp;

	if (H5Aexists(loc, name) <= 0)
		return fail(c, EBADMSG, "attribute %s is missing", name);
	a = H5Aopen(loc, name, H5P_DEFAULT);
	if (a < 0)
		return fail(c, EBADMSG, "cannot open attribute %s", name);
	t = H5Aget_type(a);
	if (t < 0 || H5Tget_class(t) != H5T_STRING || H5Tis_variable_str(t)) {
		if (t >= 0)
			H5Tclose(t);
		H5Aclose(a);
		return fail(c, EBADMSG,
			    "attribute %s is not a fixed-length string", name);
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
		return fail(c, EBADMSG,
			    "attribute %s is not one string of at most %d bytes",
			    name, CKPT_STR_MAX);
	}
	H5Sclose(sp);
	tmp = calloc(1, sz + 1);
	mt = H5Tcopy(t);
	if (!tmp || mt < 0 || H5Aread(a, mt, tmp) < 0)
		rc = fail(c, EBADMSG, "cannot read attribute %s", name);
	else
		sigma_strlcpy(buf, tmp, len);
	free(tmp);
	if (mt >= 0)
		H5Tclose(mt);
	H5Tclose(t);
	H5Aclose(a);
	return rc;
}

/* ---- datasets ------------------------------------------------------------- */

static int write_tensor(struct ctx *c, hid_t g, const struct model_tensor *t,
			const float *data)
{
	hsize_t dims[3] = { 1, 1, 1 }, chunk[3] = { 1, 1, 1 };
	hid_t sp = -1, dcpl = -1, d = -1;
	size_t row = sizeof(float);
	int rc = 0;

	for (int i = 0; i < t->ndim; i++) {
		dims[i] = t->shape[i];
		chunk[i] = t->shape[i];
		if (i > 0)
			row *= t->shape[i];
	}
	/* chunk along the first axis so a chunk stays under 16 MiB */
	if (row * chunk[0] > CHUNK_MAX_BYTES) {
		chunk[0] = CHUNK_MAX_BYTES / row;
		if (chunk[0] < 1)
			chunk[0] = 1;
	}
	sp = H5Screate_simple(t->ndim, dims, NULL);
	dcpl = H5Pcreate(H5P_DATASET_CREATE);
	if (sp < 0 || dcpl < 0 || H5Pset_chunk(dcpl, t->ndim, chunk) < 0 ||
	    H5Pset_fletcher32(dcpl) < 0) {
		rc = fail(c, EIO, "cannot set up dataset %s", t->name);
		goto out;
	}
	d = H5Dcreate2(g, t->name, H5T_IEEE_F32LE, sp, H5P_DEFAULT, dcpl,
		       H5P_DEFAULT);
	if (d < 0 ||
	    H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT,
		     data) < 0)
		rc = fail(c, EIO, "cannot write dataset %s", t->name);
out:
	if (d >= 0)
		H5Dclose(d);
	if (dcpl >= 0)
		H5Pclose(dcpl);
	if (sp >= 0)
		H5Sclose(sp);
	return rc;
}

static int read_tensor(struct ctx *c, hid_t g, const char *gname,
		       const struct model_tensor *t, float *buf)
{
	hsize_t dims[3];
	hid_t d, sp = -1, ty = -1;
	int rc = 0, nd;

	if (H5Lexists(g, t->name, H5P_DEFAULT) <= 0)
		return fail(c, EBADMSG, "dataset %s/%s is missing", gname,
			    t->name);
	d = H5Dopen2(g, t->name, H5P_DEFAULT);
	if (d < 0)
		return fail(c, EBADMSG, "cannot open dataset %s/%s", gname,
			    t->name);
	sp = H5Dget_space(d);
	ty = H5Dget_type(d);
	nd = sp >= 0 ? H5Sget_simple_extent_ndims(sp) : -1;
	if (ty < 0 || H5Tget_class(ty) != H5T_FLOAT || H5Tget_size(ty) != 4) {
		rc = fail(c, EBADMSG, "dataset %s/%s is not fp32", gname,
			  t->name);
		goto out;
	}
	if (nd != t->ndim || H5Sget_simple_extent_dims(sp, dims, NULL) < 0) {
		rc = fail(c, EBADMSG,
			  "dataset %s/%s has rank %d, the model wants %d",
			  gname, t->name, nd, t->ndim);
		goto out;
	}
	for (int i = 0; i < nd; i++) {
		if (dims[i] != t->shape[i]) {
			rc = fail(c, EBADMSG,
				  "dataset %s/%s has shape[%d] = %llu, the model wants %llu",
				  gname, t->name, i,
				  (unsigned long long)dims[i],
				  (unsigned long long)t->shape[i]);
			goto out;
		}
	}
	if (H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) <
	    0) {
		rc = fail(c, EBADMSG,
			  "cannot read dataset %s/%s (checksum failure or damaged file)",
			  gname, t->name);
		goto out;
	}
	for (size_t i = 0; i < t->n; i++) {
		if (!isfinite(buf[i])) {
			rc = fail(c, EBADMSG,
				  "dataset %s/%s holds a non-finite value at element %zu",
				  gname, t->name, i);
			goto out;
		}
	}
out:
	if (ty >= 0)
		H5Tclose(ty);
	if (sp >= 0)
		H5Sclose(sp);
	H5Dclose(d);
	return rc;
}

/* ---- the guard's windows -------------------------------------------------- */

/* /guard/window_*: float64 [n], the ring's storage, attribute head */
static int write_window(struct ctx *c, hid_t g, int i,
			const struct guard_ring *r)
{
	const char *name = guard_state_window_name(i);
	hsize_t n = (hsize_t)r->n;
	hid_t sp = H5Screate_simple(1, &n, NULL);
	hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE), d = -1;
	int rc = 0;

	if (sp < 0 || dcpl < 0 || H5Pset_chunk(dcpl, 1, &n) < 0 ||
	    H5Pset_fletcher32(dcpl) < 0 ||
	    (d = H5Dcreate2(g, name, H5T_IEEE_F64LE, sp, H5P_DEFAULT, dcpl,
			    H5P_DEFAULT)) < 0 ||
	    H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT,
		     r->v) < 0)
		rc = fail(c, EIO, "cannot write dataset guard/%s", name);
	if (rc == 0)
		rc = attr_i32(c, d, "head", r->head);
	if (d >= 0)
		H5Dclose(d);
	if (dcpl >= 0)
		H5Pclose(dcpl);
	if (sp >= 0)
		H5Sclose(sp);
	return rc;
}

/* optional: absent reads as an empty window */
static int read_window(struct ctx *c, hid_t g, int i, struct guard_ring *r)
{
	const char *name = guard_state_window_name(i);
	hsize_t n = 0;
	hid_t d, sp = -1, ty = -1;
	int64_t head = 0;
	int rc = 0;

	r->n = r->head = 0;
	if (H5Lexists(g, name, H5P_DEFAULT) <= 0)
		return 0;
	d = H5Dopen2(g, name, H5P_DEFAULT);
	if (d < 0)
		return fail(c, EBADMSG, "cannot open dataset guard/%s", name);
	sp = H5Dget_space(d);
	ty = H5Dget_type(d);
	if (sp < 0 || ty < 0 || H5Tget_class(ty) != H5T_FLOAT ||
	    H5Tget_size(ty) != 8 || H5Sget_simple_extent_ndims(sp) != 1 ||
	    H5Sget_simple_extent_dims(sp, &n, NULL) < 0 || n < 1 ||
	    n > GUARD_MAX_WINDOW) {
		rc = fail(c, EBADMSG,
			  "dataset guard/%s is not float64 [1..%d]", name,
			  GUARD_MAX_WINDOW);
		goto out;
	}
	rc = read_i64(c, d, "head", &head);
	if (rc)
		goto out;
	if (head < 0 || head > (int64_t)n) {
		rc = fail(c, EBADMSG, "guard/%s: head %lld outside [0, %llu]",
			  name, (long long)head, (unsigned long long)n);
		goto out;
	}
	if (H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT,
		    r->v) < 0) {
		rc = fail(c, EBADMSG,
			  "cannot read dataset guard/%s (checksum failure or damaged file)",
			  name);
		goto out;
	}
	r->n = (int)n;
	r->head = (int)head;
out:
	if (ty >= 0)
		H5Tclose(ty);
	if (sp >= 0)
		H5Sclose(sp);
	H5Dclose(d);
	return rc;
}

/* ---- write ---------------------------------------------------------------- */

static int write_config(struct ctx *c, hid_t f, const struct model *m,
			const struct ckpt_state *st)
{
	const struct model_config *k = &m->cfg;
	hid_t g = H5Gcreate2(f, "config", H5P_DEFAULT, H5P_DEFAULT,
			     H5P_DEFAULT);
	int rc;

	if (g < 0)
		return fail(c, EIO, "cannot create group config");
	rc = attr_i32(c, g, "V", k->V) ?: attr_i32(c, g, "D", k->D) ?:
	     attr_i32(c, g, "L", k->L) ?: attr_i32(c, g, "H", k->H) ?:
	     attr_i32(c, g, "T", k->T) ?: attr_i32(c, g, "E", k->E) ?:
	     attr_i32(c, g, "K", k->K) ?: attr_i32(c, g, "F", k->F) ?:
	     attr_f32(c, g, "aux_coef", k->aux_coef) ?:
	     attr_i32(c, g, "batch", st ? st->batch : m->B);
	H5Gclose(g);
	return rc;
}

/* data position and RNG state */
static int write_state(struct ctx *c, hid_t f, const struct ckpt_state *st)
{
	hid_t g;
	int rc;

	g = H5Gcreate2(f, "data", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
	if (g < 0)
		return fail(c, EIO, "cannot create group data");
	rc = attr_str(c, g, "sampler", "hash3-v1") ?:
	     attr_u64(c, g, "seed", st->seed) ?:
	     attr_i64(c, g, "next_step", st->step) ?:
	     attr_i32(c, g, "batch", st->batch) ?:
	     attr_u64(c, g, "train_ntokens", st->data_ntokens) ?:
	     attr_u64(c, g, "train_checksum", st->data_checksum);
	H5Gclose(g);
	if (rc)
		return rc;
	g = H5Gcreate2(f, "rng", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
	if (g < 0)
		return fail(c, EIO, "cannot create group rng");
	rc = attr_str(c, g, "algorithm", "splitmix64") ?:
	     attr_u64(c, g, "state", st->rng);
	H5Gclose(g);
	if (rc || st->guard.n <= 0)
		return rc;
	g = H5Gcreate2(f, "guard", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
	if (g < 0)
		return fail(c, EIO, "cannot create group guard");
	for (int i = 0; !rc && i < st->guard.n && i < GUARD_STATE_N; i++)
		rc = attr_i64(c, g, guard_state_name(i), st->guard.v[i]);
	for (int i = 0; !rc && i < GUARD_STATE_WINDOWS; i++)
		if (st->guard.win[i].n > 0)
			rc = write_window(c, g, i, &st->guard.win[i]);
	H5Gclose(g);
	return rc;
}

static int write_provenance(struct ctx *c, hid_t f, const struct model *m)
{
	char ver[64], host[256] = "", when[64];
	time_t now = time(NULL);
	struct tm tmv;
	hid_t g;
	int rc;

	ckpt_library_version(ver, sizeof(ver));
	gethostname(host, sizeof(host) - 1);
	gmtime_r(&now, &tmv);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tmv);
	g = H5Gcreate2(f, "provenance", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
	if (g < 0)
		return fail(c, EIO, "cannot create group provenance");
	rc = attr_str(c, g, "program", "sigma-train") ?:
	     attr_str(c, g, "version", PACKAGE_VERSION) ?:
	     attr_str(c, g, "git_revision", SIGMA_GIT_REVISION) ?:
	     attr_str(c, g, "build_flags", SIGMA_BUILD_CFLAGS) ?:
	     attr_str(c, g, "hdf5_version", ver) ?:
	     attr_str(c, g, "kernels", m->ops->name) ?:
	     attr_str(c, g, "hostname", host) ?:
	     attr_str(c, g, "created", when);
	H5Gclose(g);
	return rc;
}

/* the optimizer's settings, as attributes of the group of moments */
static int write_optim(struct ctx *c, hid_t f, const struct ckpt_state *st)
{
	const struct optim_config *o = &st->optim;
	hid_t og = H5Gopen2(f, "optim", H5P_DEFAULT);
	int rc;

	if (og < 0)
		return fail(c, EIO, "cannot open group optim");
	rc = attr_str(c, og, "algorithm", "adamw") ?:
	     attr_f32(c, og, "lr", o->lr) ?:
	     attr_f32(c, og, "lr_min_ratio", o->lr_min_ratio) ?:
	     attr_i64(c, og, "warmup", o->warmup) ?:
	     attr_i64(c, og, "steps", o->steps) ?:
	     attr_f32(c, og, "beta1", o->beta1) ?:
	     attr_f32(c, og, "beta2", o->beta2) ?:
	     attr_f32(c, og, "eps", o->eps) ?:
	     attr_f32(c, og, "weight_decay", o->weight_decay) ?:
	     attr_f32(c, og, "clip", o->clip) ?:
	     attr_i64(c, og, "t", st->step);
	H5Gclose(og);
	return rc;
}

/* block: in the device's memory, or already in host memory (staged) */
static int write_block(struct ctx *c, hid_t f, const char *gname,
		       const struct model *m, const float *block, bool staged,
		       float *host)
{
	hid_t g = H5Gcreate2(f, gname, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
	int rc = 0;

	if (g < 0)
		return fail(c, EIO, "cannot create group %s", gname);
	for (int i = 0; i < m->ntensors && !rc; i++) {
		const struct model_tensor *t = &m->tensors[i];

		if (staged) {
			rc = write_tensor(c, g, t, block + t->offset);
			continue;
		}
		m->ops->to_host(host, block + t->offset, sizeof(float) * t->n);
		rc = write_tensor(c, g, t, host);
	}
	H5Gclose(g);
	return rc;
}

static int fsync_path(const char *path, int flags)
{
	int fd = open(path, flags | O_CLOEXEC), rc = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		rc = -errno;
	close(fd);
	return rc;
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

/*
 * Room for a checkpoint of n floats (params and two moments) in dir: the
 * data, 4 bytes of checksum per chunk and the metadata, with a margin.
 * Checked first so that a full disk is said plainly without HDF5 in the
 * way; a disk that fills during the write is caught after it.
 */
static int check_room(const char *dir, size_t n, long step, char *err,
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

/*
 * An old instance of the job, still running after a requeue, must never
 * publish into a directory where a newer attempt already did.
 */
static int check_not_stale(const char *dir, const struct ckpt_state *st,
			   char *err, size_t len)
{
	int attempt = 0;
	long step = ckpt_newest(dir, &attempt);
	struct run_manifest rm;
	char why[512];

	/* nor into one that another run has taken over (--new-run) */
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

/*
 * The start of every checkpoint write: tmp is .NAME.tmp-PID next to final
 * in dir (made if missing), and *f a new HDF5 file there in the format of
 * HDF5 1.8 and later (checksummed superblock and object headers, so damaged
 * metadata is refused like damaged data). fapl is the caller's to close.
 */
static int create_tmp(struct ctx *c, const char *dir, const char *final,
		      char *tmp, size_t tlen, hid_t *fapl, hid_t *f)
{
	int rc;

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
	*fapl = H5Pcreate(H5P_FILE_ACCESS);
	if (*fapl < 0 ||
	    H5Pset_libver_bounds(*fapl, H5F_LIBVER_V18, H5F_LIBVER_LATEST) < 0)
		return fail(c, EIO, "cannot set the file format version");
	*f = H5Fcreate(tmp, H5F_ACC_TRUNC, H5P_DEFAULT, *fapl);
	if (*f < 0)
		return fail(c, EIO, "cannot create the file");
	return 0;
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

/*
 * The end of every checkpoint write: the completion marker last, flush,
 * close, fsync, a last check that no newer instance published meanwhile
 * (stale), the rename to final and the fsync of dir. *f is -1 once closed;
 * a file whose close failed is left to the caller (close_failed).
 */
static int publish(struct ctx *c, hid_t *f, const char *dir,
		   const char *final, const struct ckpt_state *st,
		   int (*stale)(const char *, const struct ckpt_state *,
				char *, size_t))
{
	int rc;

	rc = attr_i32(c, *f, "complete", 1);
	if (rc)
		return rc;
	if (H5Fflush(*f, H5F_SCOPE_GLOBAL) < 0)
		return fail(c, EIO, "cannot flush");
	if (H5Fclose(*f) < 0)
		return fail(c, EIO, "cannot close");
	*f = -1;
	rc = fsync_path(c->path, O_RDONLY);
	if (rc)
		return fail(c, -rc, "fsync: %s", strerror(-rc));
	rc = stale(dir, st, c->err, c->len);
	if (rc)
		return rc;
	/* readers refuse a checkpoint others may write (seal.h), whatever
	 * the umask (002 is common where users have groups of their own) */
	if (chmod_no_write_others(c->path))
		return fail(c, errno, "cannot drop its group and other write bits: %s",
			    strerror(errno));
	rc = seal_write(c->path, final, c->err, c->len);
	if (rc)
		return rc;
	if (rename(c->path, final) < 0) {
		rc = fail(c, errno, "cannot rename to %s: %s", final,
			  strerror(errno));
		seal_remove(final);
		return rc;
	}
	rc = fsync_path(dir, O_RDONLY | O_DIRECTORY);
	if (rc) {
		c->path = dir;
		return fail(c, -rc, "fsync of the directory: %s",
			    strerror(-rc));
	}
	return 0;
}

/*
 * The end of a failed write: the file closed (emptied first if its close
 * failed), the temporary removed, and a failure that a full disk caused
 * (errno saved, or less than a state of n floats free in dir) said as
 * ENOSPC, naming what (e.g. "checkpoint") and the step.
 */
static int finish_failed(int rc, int saved, hid_t f, const char *tmp,
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
 * stage: NULL to read the tensors from m, or params, m and v of m's
 * layout one after the other in host memory (the asynchronous writer).
 */
static int write_file(const char *dir, const struct model *m,
		      const float *stage, const struct ckpt_state *st,
		      char *path, size_t plen, char *err, size_t len)
{
	const size_t n = m->nparams;
	char tmp[PATH_MAX], final[PATH_MAX];
	struct ctx c = { tmp, err, len };
	size_t maxn = 0;
	float *host = NULL;
	hid_t f = -1, fapl = -1, g;
	int rc, saved;

	quiet_hdf5();
	tmp[0] = '\0';
	if (st->step < 0 || st->step > 99999999L || st->attempt < 0 ||
	    st->attempt > CKPT_ATTEMPT_MAX)
		return sigma_set_err(err, len, EINVAL,
				     "step %ld of attempt %d cannot be named",
				     st->step, st->attempt);
	if (ckpt_path(final, sizeof(final), dir, st->step, st->attempt))
		return sigma_set_err(err, len, ENAMETOOLONG,
				     "%s: checkpoint path too long", dir);
	rc = sigma_mkdir_p(dir, 0755);
	if (rc)
		return sigma_set_err(err, len, -rc, "%s: cannot create: %s",
				     dir, strerror(-rc));
	rc = check_not_stale(dir, st, err, len) ?:
	     check_room(dir, n, st->step, err, len);
	if (rc)
		return rc;
	for (int i = 0; i < m->ntensors; i++)
		if (m->tensors[i].n > maxn)
			maxn = m->tensors[i].n;
	host = malloc(sizeof(float) * maxn);
	if (!host)
		return sigma_set_err(err, len, ENOMEM, "out of memory");
	rc = create_tmp(&c, dir, final, tmp, sizeof(tmp), &fapl, &f);
	if (rc)
		goto out;
	rc = attr_str(&c, f, "format", CKPT_FORMAT) ?:
	     attr_i32(&c, f, "format_version", CKPT_VERSION) ?:
	     attr_i64(&c, f, "step", st->step) ?:
	     attr_i32(&c, f, "attempt", st->attempt) ?:
	     (st->layout[0] ? attr_str(&c, f, "layout", st->layout) : 0) ?:
	     (st->run[0] ? attr_str(&c, f, "run_id", st->run) : 0) ?:
	     write_config(&c, f, m, st) ?:
	     write_block(&c, f, "model", m, stage ? stage : m->params,
			 stage != NULL, host);
	if (rc)
		goto out;
	g = H5Gcreate2(f, "optim", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
	if (g < 0) {
		rc = fail(&c, EIO, "cannot create group optim");
		goto out;
	}
	H5Gclose(g);
	rc = write_block(&c, f, "optim/m", m, stage ? stage + n : m->m,
			 stage != NULL, host) ?:
	     write_block(&c, f, "optim/v", m, stage ? stage + 2 * n : m->v,
			 stage != NULL, host);
	if (rc)
		goto out;
	rc = write_optim(&c, f, st) ?: write_state(&c, f, st) ?:
	     write_provenance(&c, f, m);
	/* a newer instance may have published while this one wrote */
	if (rc == 0)
		rc = publish(&c, &f, dir, final, st, check_not_stale);
	if (rc == 0 && path)
		sigma_strlcpy(path, final, plen);
out:
	saved = errno;
	if (fapl >= 0)
		H5Pclose(fapl);
	rc = finish_failed(rc, saved, f, tmp, dir, n, "checkpoint", st->step,
			   err, len);
	free(host);
	return rc;
}

int ckpt_write(const char *dir, const struct model *m,
	       const struct ckpt_state *st, char *path, size_t plen,
	       char *err, size_t len)
{
	return write_file(dir, m, NULL, st, path, plen, err, len);
}

/* ---- read ----------------------------------------------------------------- */

/* the root's format, its version and the completion marker */
static int check_format(struct ctx *c, hid_t f, const char *want, int version)
{
	char fmt[64];
	int64_t ver = 0, complete = 0;
	int rc;

	rc = read_str(c, f, "format", fmt, sizeof(fmt));
	if (rc)
		return rc;
	if (strcmp(fmt, want))
		return fail(c, EBADMSG, "format is \"%s\", not \"%s\"", fmt,
			    want);
	rc = read_i64(c, f, "format_version", &ver);
	if (rc)
		return rc;
	if (ver != version)
		return fail(c, EBADMSG,
			    "format version %lld, this program reads %d",
			    (long long)ver, version);
	if (H5Aexists(f, "complete") <= 0 ||
	    read_i64(c, f, "complete", &complete) || complete != 1)
		return fail(c, EBADMSG, "not marked complete");
	return 0;
}

static int check_header(struct ctx *c, hid_t f, int64_t *step)
{
	int rc = check_format(c, f, CKPT_FORMAT, CKPT_VERSION);

	if (rc)
		return rc;
	if (step) {
		rc = read_i64(c, f, "step", step);
		if (rc)
			return rc;
		if (*step < 0)
			return fail(c, EBADMSG, "negative step %lld",
				    (long long)*step);
	}
	return 0;
}

/* attempt, layout and run: absent in files of earlier versions (0, "") */
static int read_origin(struct ctx *c, hid_t f, struct ckpt_state *st)
{
	int64_t a = 0;
	int rc;

	st->attempt = 0;
	st->layout[0] = '\0';
	if (H5Aexists(f, "attempt") > 0) {
		rc = read_i64(c, f, "attempt", &a);
		if (rc)
			return rc;
		if (a < 0 || a > CKPT_ATTEMPT_MAX)
			return fail(c, EBADMSG, "attempt %lld out of range",
				    (long long)a);
		st->attempt = (int)a;
	}
	if (H5Aexists(f, "layout") > 0) {
		rc = read_str(c, f, "layout", st->layout, sizeof(st->layout));
		if (rc)
			return rc;
	}
	st->run[0] = '\0';
	if (H5Aexists(f, "run_id") > 0) {
		rc = read_str(c, f, "run_id", st->run, sizeof(st->run));
		if (rc)
			return rc;
		if (!run_id_valid(st->run))
			return fail(c, EBADMSG, "run_id \"%.*s\" is not a run id",
				    RUN_ID_MAX - 1, st->run);
	}
	return 0;
}

static int check_config(struct ctx *c, hid_t f, const struct model_config *k)
{
	static const char *const names[] = { "V", "D", "L", "H",
					     "T", "E", "K", "F" };
	const int want[] = { k->V, k->D, k->L, k->H, k->T, k->E, k->K, k->F };
	hid_t g;
	int rc = 0;

	if (H5Lexists(f, "config", H5P_DEFAULT) <= 0)
		return fail(c, EBADMSG, "group config is missing");
	g = H5Gopen2(f, "config", H5P_DEFAULT);
	if (g < 0)
		return fail(c, EBADMSG, "cannot open group config");
	for (int i = 0; i < 8 && !rc; i++) {
		int64_t v;

		rc = read_i64(c, g, names[i], &v);
		if (!rc && v != want[i])
			rc = fail(c, EBADMSG,
				  "config %s = %lld, this run has %d: a checkpoint of another model shape",
				  names[i], (long long)v, want[i]);
	}
	H5Gclose(g);
	return rc;
}

static int read_block(struct ctx *c, hid_t f, const char *gname,
		      const struct model *m, float *dst)
{
	hid_t g;
	int rc = 0;

	if (H5Lexists(f, gname, H5P_DEFAULT) <= 0)
		return fail(c, EBADMSG, "group %s is missing", gname);
	g = H5Gopen2(f, gname, H5P_DEFAULT);
	if (g < 0)
		return fail(c, EBADMSG, "cannot open group %s", gname);
	for (int i = 0; i < m->ntensors && !rc; i++)
		rc = read_tensor(c, g, gname, &m->tensors[i],
				 dst + m->tensors[i].offset);
	H5Gclose(g);
	return rc;
}

static int read_state(struct ctx *c, hid_t f, struct ckpt_state *st)
{
	struct optim_config *o = &st->optim;
	int64_t v64 = 0;
	hid_t g;
	int rc;

	g = H5Gopen2(f, "optim", H5P_DEFAULT);
	if (g < 0)
		return fail(c, EBADMSG, "cannot open group optim");
	rc = read_f32(c, g, "lr", &o->lr) ?:
	     read_f32(c, g, "lr_min_ratio", &o->lr_min_ratio) ?:
	     read_i64(c, g, "warmup", &v64);
	o->warmup = (long)v64;
	rc = rc ?: read_i64(c, g, "steps", &v64);
	o->steps = (long)v64;
	rc = rc ?: read_f32(c, g, "beta1", &o->beta1) ?:
	     read_f32(c, g, "beta2", &o->beta2) ?:
	     read_f32(c, g, "eps", &o->eps) ?:
	     read_f32(c, g, "weight_decay", &o->weight_decay) ?:
	     read_f32(c, g, "clip", &o->clip);
	H5Gclose(g);
	if (rc)
		return rc;
	if (H5Lexists(f, "data", H5P_DEFAULT) <= 0 ||
	    H5Lexists(f, "rng", H5P_DEFAULT) <= 0)
		return fail(c, EBADMSG, "group data or rng is missing");
	g = H5Gopen2(f, "data", H5P_DEFAULT);
	if (g < 0)
		return fail(c, EBADMSG, "cannot open group data");
	rc = read_u64(c, g, "seed", &st->seed) ?:
	     read_i64(c, g, "next_step", &v64);
	if (!rc && v64 != st->step)
		rc = fail(c, EBADMSG, "data next_step %lld differs from step %ld",
			  (long long)v64, st->step);
	rc = rc ?: read_i64(c, g, "batch", &v64);
	st->batch = (int)v64;
	rc = rc ?: read_u64(c, g, "train_ntokens", &st->data_ntokens) ?:
	     read_u64(c, g, "train_checksum", &st->data_checksum);
	H5Gclose(g);
	if (rc)
		return rc;
	g = H5Gopen2(f, "rng", H5P_DEFAULT);
	if (g < 0)
		return fail(c, EBADMSG, "cannot open group rng");
	rc = read_u64(c, g, "state", &st->rng);
	H5Gclose(g);
	/* the guard group is optional; values it lacks read as 0 */
	st->guard.n = 0;
	for (int i = 0; i < GUARD_STATE_WINDOWS; i++)
		st->guard.win[i].n = st->guard.win[i].head = 0;
	if (rc || H5Lexists(f, "guard", H5P_DEFAULT) <= 0)
		return rc;
	g = H5Gopen2(f, "guard", H5P_DEFAULT);
	if (g < 0)
		return fail(c, EBADMSG, "cannot open group guard");
	for (int i = 0; !rc && i < GUARD_STATE_N; i++) {
		st->guard.v[i] = 0;
		if (H5Aexists(g, guard_state_name(i)) > 0)
			rc = read_i64(c, g, guard_state_name(i),
				      &st->guard.v[i]);
	}
	for (int i = 0; !rc && i < GUARD_STATE_WINDOWS; i++)
		rc = read_window(c, g, i, &st->guard.win[i]);
	H5Gclose(g);
	st->guard.n = rc ? 0 : GUARD_STATE_N;
	return rc;
}

/* out: NULL to load into m, else the caller's stage (m untouched) */
static int read_file(const char *path, enum seal_need need, bool *sealed,
		     struct model *m, struct ckpt_state *st, float *out,
		     char *err, size_t len)
{
	struct ctx c = { path, err, len };
	size_t n = m->nparams;
	float *stage = out;
	struct ckpt_state tmp = { 0 };
	struct seal_file sf;
	int64_t step = 0;
	hid_t f;
	int rc;

	rc = open_checked(&c, need, &sf, &f);
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
	rc = check_header(&c, f, &step) ?: check_config(&c, f, &m->cfg) ?:
	     read_block(&c, f, "model", m, stage);
	if (!rc && st) {
		tmp.step = (long)step;
		rc = read_block(&c, f, "optim/m", m, stage + n) ?:
		     read_block(&c, f, "optim/v", m, stage + 2 * n) ?:
		     read_state(&c, f, &tmp) ?: read_origin(&c, f, &tmp);
	}
	if (rc)
		goto out;
	if (out) {
		*st = tmp;
		goto out;
	}
	/* all of it is good: only now touch the model */
	m->ops->from_host(m->params, stage, sizeof(float) * n);
	if (st) {
		m->ops->from_host(m->m, stage + n, sizeof(float) * n);
		m->ops->from_host(m->v, stage + 2 * n, sizeof(float) * n);
		*st = tmp;
	} else {
		m->ops->zero(m->m, n);
		m->ops->zero(m->v, n);
	}
out:
	if (stage != out)
		free(stage);
	close_checked(f, &sf);
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
	struct ctx c = { path, err, len };
	struct seal_file sf;
	int64_t step = 0;
	hid_t f;
	int rc;

	memset(st, 0, sizeof(*st));
	rc = open_checked(&c, SEAL_REQUIRED, &sf, &f);
	if (rc)
		return rc;
	rc = check_header(&c, f, &step) ?: read_origin(&c, f, st);
	st->step = (long)step;
	close_checked(f, &sf);
	return rc;
}

/* ---- differential checkpoints --------------------------------------------- */

static const char *const diff_groups[3] = { "model", "optim/m", "optim/v" };

/*
 * dir/diff-SSSSSSSS-base-BBBBBBBB.h5 (attempt 0) and
 * diff-SSSSSSSS-base-BBBBBBBB-aN.h5 (attempt N > 0), newest first in
 * (attempt, step) order, as the full checkpoints
 */
struct diff_name {
	long step, base;
	int attempt;
};

static int cmp_diff_desc(const void *a, const void *b)
{
	const struct diff_name *x = a, *y = b;

	if (x->attempt != y->attempt)
		return x->attempt < y->attempt ? 1 : -1;
	return x->step < y->step ? 1 : x->step > y->step ? -1 : 0;
}

/* 8 decimal digits at s */
static bool digits8(const char *s, long *v)
{
	*v = 0;
	for (int i = 0; i < 8; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		*v = *v * 10 + (s[i] - '0');
	}
	return true;
}

static bool parse_diff_name(const char *name, struct diff_name *dn)
{
	const char *t = name + 27;
	long a = 0;

	if (strlen(name) < 30 || strncmp(name, "diff-", 5) ||
	    !digits8(name + 5, &dn->step) || strncmp(name + 13, "-base-", 6) ||
	    !digits8(name + 19, &dn->base) || dn->base >= dn->step)
		return false;
	if (!strcmp(t, ".h5")) {
		dn->attempt = 0;
		return true;
	}
	if (strncmp(t, "-a", 2) || t[2] < '1' || t[2] > '9')
		return false;
	for (t += 2; *t >= '0' && *t <= '9'; t++) {
		a = a * 10 + (*t - '0');
		if (a > CKPT_ATTEMPT_MAX)
			return false;
	}
	dn->attempt = (int)a;
	return !strcmp(t, ".h5");
}

static int list_diffs(const char *dir, struct diff_name *out, int max)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	if (!d)
		return -errno;
	while ((e = readdir(d)) && n < max)
		if (parse_diff_name(e->d_name, &out[n]))
			n++;
	closedir(d);
	qsort(out, n, sizeof(*out), cmp_diff_desc);
	return n;
}

static int diff_path(char *buf, size_t len, const char *dir,
		     const struct diff_name *dn)
{
	if (dn->attempt == 0)
		return sigma_snprintf(buf, len, "%s/diff-%08ld-base-%08ld.h5",
				      dir, dn->step, dn->base);
	return sigma_snprintf(buf, len, "%s/diff-%08ld-base-%08ld-a%d.h5",
			      dir, dn->step, dn->base, dn->attempt);
}

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
		m->ops->to_host(b->state + n, m->m, sizeof(float) * n);
		m->ops->to_host(b->state + 2 * n, m->v, sizeof(float) * n);
	}
	b->checksum = state_hash(m, b->state);
	sigma_strlcpy(b->file, slash ? slash + 1 : path, sizeof(b->file));
	b->step = step;
}

/*
 * Compressed size of n words through the filters a differential uses,
 * measured by HDF5 itself in a file that lives in memory only.
 */
static long estimate_size(void *ctx, const uint32_t *words, size_t n)
{
	hsize_t dims = n, chunk = n < DELTA_SAMPLE_WINDOW ? n
							 : DELTA_SAMPLE_WINDOW;
	hid_t fapl = -1, f = -1, sp = -1, dcpl = -1, d = -1;
	long size = -EIO;

	(void)ctx;
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
	    H5Pset_deflate(dcpl, CKPT_DIFF_DEFLATE) < 0)
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

long ckpt_diff_estimate(const uint32_t *words, size_t n)
{
	quiet_hdf5();
	return estimate_size(NULL, words, n);
}

/* chunks along the first axis, at most CHUNK_MAX_BYTES, as write_tensor */
static void diff_chunks(const struct model_tensor *t, hsize_t *dims,
			hsize_t *chunk)
{
	size_t row = sizeof(float);

	for (int i = 0; i < t->ndim; i++) {
		dims[i] = chunk[i] = t->shape[i];
		if (i > 0)
			row *= t->shape[i];
	}
	if (row * chunk[0] > CHUNK_MAX_BYTES) {
		chunk[0] = CHUNK_MAX_BYTES / row;
		if (chunk[0] < 1)
			chunk[0] = 1;
	}
}

/* one tensor as kind: data is its float32 values (whole), its uint32
 * encoding (delta) or unused (same); sum names the tensor's bits */
static int diff_write_tensor(struct ctx *c, hid_t g, const char *gname,
			     const struct model_tensor *t, enum delta_kind kind,
			     const void *data, uint64_t sum)
{
	hsize_t dims[3] = { 1, 1, 1 }, chunk[3] = { 1, 1, 1 };
	hid_t sp = -1, dcpl = -1, d = -1;
	int rc = 0;

	if (kind == DELTA_SAME) {
		sp = H5Screate(H5S_NULL);
		if (sp >= 0)
			d = H5Dcreate2(g, t->name, H5T_STD_U32LE, sp,
				       H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
		if (d < 0)
			rc = fail(c, EIO, "cannot create dataset %s/%s", gname,
				  t->name);
		goto attrs;
	}
	diff_chunks(t, dims, chunk);
	sp = H5Screate_simple(t->ndim, dims, NULL);
	dcpl = H5Pcreate(H5P_DATASET_CREATE);
	if (sp < 0 || dcpl < 0 || H5Pset_chunk(dcpl, t->ndim, chunk) < 0 ||
	    H5Pset_shuffle(dcpl) < 0 ||
	    H5Pset_deflate(dcpl, CKPT_DIFF_DEFLATE) < 0 ||
	    H5Pset_fletcher32(dcpl) < 0) {
		rc = fail(c, EIO, "cannot set up dataset %s/%s", gname,
			  t->name);
		goto out;
	}
	d = H5Dcreate2(g, t->name,
		       kind == DELTA_WHOLE ? H5T_IEEE_F32LE : H5T_STD_U32LE, sp,
		       H5P_DEFAULT, dcpl, H5P_DEFAULT);
	if (d < 0 ||
	    H5Dwrite(d, kind == DELTA_WHOLE ? H5T_NATIVE_FLOAT
					     : H5T_NATIVE_UINT32,
		     H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
		rc = fail(c, EIO, "cannot write dataset %s/%s", gname,
			  t->name);
attrs:
	if (!rc)
		rc = attr_str(c, d, "encoding", delta_kind_name(kind)) ?:
		     attr_u64(c, d, "checksum", sum);
out:
	if (d >= 0)
		H5Dclose(d);
	if (dcpl >= 0)
		H5Pclose(dcpl);
	if (sp >= 0)
		H5Sclose(sp);
	return rc;
}

/* one of model, optim/m, optim/v: cur and base in host memory */
static int diff_write_block(struct ctx *c, hid_t f, int blk,
			    const struct model *m, const float *cur,
			    const float *base, uint32_t *enc,
			    uint32_t *scratch, struct ckpt_diff_stats *ds)
{
	const char *gname = diff_groups[blk];
	hid_t g = H5Gcreate2(f, gname, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
	int rc = 0;

	if (g < 0)
		return fail(c, EIO, "cannot create group %s", gname);
	for (int i = 0; i < m->ntensors && !rc; i++) {
		const struct model_tensor *t = &m->tensors[i];
		const float *x = cur + t->offset, *b = base + t->offset;
		struct delta_choice ch;

		rc = delta_choose(x, b, t->n, scratch, estimate_size, NULL,
				  &ch);
		if (rc) {
			rc = fail(c, -rc, "cannot estimate the size of %s/%s",
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
	H5Gclose(g);
	return rc;
}

/*
 * A differential of the same step against another base (left by an
 * earlier instance of the job that went on from another full
 * checkpoint) is superseded by the one just published.
 */
static void diff_drop_others(const char *dir, const struct diff_name *me)
{
	struct diff_name dn[64];
	int n = list_diffs(dir, dn, 64);

	for (int i = 0; i < n; i++) {
		char p[PATH_MAX];

		if (dn[i].step == me->step &&
		    (dn[i].base != me->base || dn[i].attempt != me->attempt) &&
		    !diff_path(p, sizeof(p), dir, &dn[i]))
			remove_published(p);
	}
}

/* check_not_stale, and no differential of a newer attempt either */
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
	return check_not_stale(dir, st, err, len);
}

int ckpt_write_diff(const char *dir, const struct model *m,
		    const float *stage, const struct ckpt_state *st,
		    const struct ckpt_base *b, struct ckpt_diff_stats *ds,
		    char *path, size_t plen, char *err, size_t len)
{
	const size_t n = m->nparams;
	char tmp[PATH_MAX], final[PATH_MAX];
	struct ctx c = { tmp, err, len };
	struct ckpt_diff_stats local;
	struct diff_name me = { st->step, b ? b->step : -1, st->attempt };
	size_t maxn = 0;
	float *host = NULL;
	uint32_t *enc = NULL, *scratch = NULL;
	hid_t f = -1, fapl = -1, g;
	struct stat sb;
	double t0 = 0;
	int rc, saved;

	quiet_hdf5();
	tmp[0] = '\0';
	if (!ds)
		ds = &local;
	memset(ds, 0, sizeof(*ds));
	if (!b || !b->state || b->step < 0 || b->nparams != n)
		return sigma_set_err(err, len, EINVAL,
				     "differential of step %ld: no base in memory",
				     st->step);
	if (st->step <= b->step || st->step > 99999999L)
		return sigma_set_err(err, len, EINVAL,
				     "differential of step %ld against base step %ld cannot be named",
				     st->step, b->step);
	if (H5Zfilter_avail(H5Z_FILTER_DEFLATE) <= 0 ||
	    H5Zfilter_avail(H5Z_FILTER_SHUFFLE) <= 0)
		return sigma_set_err(err, len, ENOTSUP,
				     "this HDF5 library lacks the deflate or shuffle filter");
	if (st->attempt < 0 || st->attempt > CKPT_ATTEMPT_MAX)
		return sigma_set_err(err, len, EINVAL,
				     "differential of step %ld: attempt %d out of range",
				     st->step, st->attempt);
	if (diff_path(final, sizeof(final), dir, &me))
		return sigma_set_err(err, len, ENAMETOOLONG,
				     "%s: checkpoint path too long", dir);
	rc = sigma_mkdir_p(dir, 0755);
	if (rc)
		return sigma_set_err(err, len, -rc, "%s: cannot create: %s",
				     dir, strerror(-rc));
	rc = diff_not_stale(dir, st, err, len);
	if (rc)
		return rc;
	for (int i = 0; i < m->ntensors; i++)
		if (m->tensors[i].n > maxn)
			maxn = m->tensors[i].n;
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
	rc = create_tmp(&c, dir, final, tmp, sizeof(tmp), &fapl, &f);
	if (rc)
		goto out;
	rc = attr_str(&c, f, "format", CKPT_DIFF_FORMAT) ?:
	     attr_i32(&c, f, "format_version", CKPT_DIFF_VERSION) ?:
	     attr_i64(&c, f, "step", st->step) ?:
	     attr_i32(&c, f, "attempt", st->attempt) ?:
	     (st->layout[0] ? attr_str(&c, f, "layout", st->layout) : 0) ?:
	     (st->run[0] ? attr_str(&c, f, "run_id", st->run) : 0) ?:
	     attr_i64(&c, f, "base_step", b->step) ?:
	     attr_u64(&c, f, "base_checksum", b->checksum) ?:
	     attr_str(&c, f, "base_file", b->file) ?:
	     write_config(&c, f, m, st);
	if (rc)
		goto out;
	g = H5Gcreate2(f, "optim", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
	if (g < 0) {
		rc = fail(&c, EIO, "cannot create group optim");
		goto out;
	}
	H5Gclose(g);
	for (int blk = 0; blk < 3 && !rc; blk++) {
		const float *cur = stage ? stage + blk * n : host;

		if (!stage)
			m->ops->to_host(host,
					blk == 0   ? m->params
					: blk == 1 ? m->m
						   : m->v,
					sizeof(float) * n);
		rc = diff_write_block(&c, f, blk, m, cur, b->state + blk * n,
				      enc, scratch, ds);
	}
	rc = rc ?: write_optim(&c, f, st) ?: write_state(&c, f, st) ?:
	     write_provenance(&c, f, m) ?:
	     attr_i32(&c, f, "tensors_same", ds->tensors[DELTA_SAME]) ?:
	     attr_i32(&c, f, "tensors_delta", ds->tensors[DELTA_ZIGZAG]) ?:
	     attr_i32(&c, f, "tensors_whole", ds->tensors[DELTA_WHOLE]);
	if (rc == 0)
		rc = publish(&c, &f, dir, final, st, diff_not_stale);
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
	if (fapl >= 0)
		H5Pclose(fapl);
	rc = finish_failed(rc, saved, f, tmp, dir, n,
			   "differential checkpoint", st->step, err, len);
	free(host);
	free(enc);
	free(scratch);
	return rc;
}

/* a full checkpoint into host memory (3 * nparams), nothing of m touched */
static int read_full_host(struct ctx *c, const struct model *m, float *stage,
			  struct ckpt_state *st)
{
	const size_t n = m->nparams;
	struct seal_file sf;
	int64_t step = 0;
	hid_t f;
	int rc;

	rc = open_checked(c, SEAL_REQUIRED, &sf, &f);
	if (rc)
		return rc;
	memset(st, 0, sizeof(*st));
	rc = check_header(c, f, &step) ?: check_config(c, f, &m->cfg);
	st->step = (long)step;
	for (int blk = 0; blk < 3 && !rc; blk++)
		rc = read_block(c, f, diff_groups[blk], m, stage + blk * n);
	rc = rc ?: read_state(c, f, st);
	close_checked(f, &sf);
	return rc;
}

static int diff_check_shape(struct ctx *c, hid_t d, const char *gname,
			    const struct model_tensor *t, H5T_class_t cls)
{
	hsize_t dims[3];
	hid_t sp = H5Dget_space(d), ty = H5Dget_type(d);
	int rc = 0, nd = sp >= 0 ? H5Sget_simple_extent_ndims(sp) : -1;

	if (ty < 0 || H5Tget_class(ty) != cls || H5Tget_size(ty) != 4 ||
	    (cls == H5T_INTEGER && H5Tget_sign(ty) != H5T_SGN_NONE)) {
		rc = fail(c, EBADMSG, "dataset %s/%s is not %s", gname, t->name,
			  cls == H5T_FLOAT ? "fp32" : "uint32");
		goto out;
	}
	if (nd != t->ndim || H5Sget_simple_extent_dims(sp, dims, NULL) < 0) {
		rc = fail(c, EBADMSG,
			  "dataset %s/%s has rank %d, the model wants %d", gname,
			  t->name, nd, t->ndim);
		goto out;
	}
	for (int i = 0; i < nd && !rc; i++)
		if (dims[i] != t->shape[i])
			rc = fail(c, EBADMSG,
				  "dataset %s/%s has shape[%d] = %llu, the model wants %llu",
				  gname, t->name, i,
				  (unsigned long long)dims[i],
				  (unsigned long long)t->shape[i]);
out:
	if (ty >= 0)
		H5Tclose(ty);
	if (sp >= 0)
		H5Sclose(sp);
	return rc;
}

/* one tensor of a differential into out, decoded against base */
static int diff_read_tensor(struct ctx *c, hid_t g, const char *gname,
			    const struct model_tensor *t, const float *base,
			    float *out, uint32_t *enc)
{
	char enc_name[64];
	uint64_t sum = 0;
	hid_t d;
	int rc, kind;

	if (H5Lexists(g, t->name, H5P_DEFAULT) <= 0)
		return fail(c, EBADMSG, "dataset %s/%s is missing", gname,
			    t->name);
	d = H5Dopen2(g, t->name, H5P_DEFAULT);
	if (d < 0)
		return fail(c, EBADMSG, "cannot open dataset %s/%s", gname,
			    t->name);
	rc = read_str(c, d, "encoding", enc_name, sizeof(enc_name)) ?:
	     read_u64(c, d, "checksum", &sum);
	if (rc)
		goto out;
	kind = delta_kind_parse(enc_name);
	switch (kind) {
	case DELTA_SAME:
		memcpy(out, base, sizeof(float) * t->n);
		break;
	case DELTA_WHOLE:
		rc = diff_check_shape(c, d, gname, t, H5T_FLOAT);
		if (!rc && H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL,
				   H5P_DEFAULT, out) < 0)
			rc = fail(c, EBADMSG,
				  "cannot read dataset %s/%s (checksum failure or damaged file)",
				  gname, t->name);
		break;
	case DELTA_ZIGZAG:
		rc = diff_check_shape(c, d, gname, t, H5T_INTEGER);
		if (!rc && H5Dread(d, H5T_NATIVE_UINT32, H5S_ALL, H5S_ALL,
				   H5P_DEFAULT, enc) < 0)
			rc = fail(c, EBADMSG,
				  "cannot read dataset %s/%s (checksum failure or damaged file)",
				  gname, t->name);
		if (!rc)
			delta_decode(out, enc, base, t->n);
		break;
	default:
		rc = fail(c, EBADMSG, "dataset %s/%s has unknown encoding \"%s\"",
			  gname, t->name, enc_name);
	}
	if (rc)
		goto out;
	if (delta_hash(out, t->n, DELTA_HASH_SEED) != sum) {
		rc = fail(c, EBADMSG,
			  "dataset %s/%s (%s) decodes to other bits than were written (checksum differs)",
			  gname, t->name, enc_name);
		goto out;
	}
	for (size_t i = 0; i < t->n; i++) {
		if (!isfinite(out[i])) {
			rc = fail(c, EBADMSG,
				  "dataset %s/%s holds a non-finite value at element %zu",
				  gname, t->name, i);
			break;
		}
	}
out:
	H5Dclose(d);
	return rc;
}

/* root attributes of a differential; base_file is a plain file name */
static int diff_check_header(struct ctx *c, hid_t f, int64_t *step,
			     int64_t *base_step, uint64_t *base_sum,
			     char *base_file, size_t blen)
{
	int rc = check_format(c, f, CKPT_DIFF_FORMAT, CKPT_DIFF_VERSION);

	if (rc)
		return rc;
	rc = read_i64(c, f, "step", step) ?:
	     read_i64(c, f, "base_step", base_step) ?:
	     read_u64(c, f, "base_checksum", base_sum) ?:
	     read_str(c, f, "base_file", base_file, blen);
	if (rc)
		return rc;
	if (*base_step < 0 || *step <= *base_step)
		return fail(c, EBADMSG, "step %lld against base step %lld",
			    (long long)*step, (long long)*base_step);
	if (!*base_file || strchr(base_file, '/') || !strcmp(base_file, "..") ||
	    !strcmp(base_file, "."))
		return fail(c, EBADMSG, "base_file \"%s\" is not a file name",
			    base_file);
	return 0;
}

int ckpt_read_diff(const char *path, struct model *m, struct ckpt_state *st,
		   char *err, size_t len)
{
	const size_t n = m->nparams;
	struct ctx c = { path, err, len };
	char base_file[256], bpath[PATH_MAX], why[1024];
	struct ckpt_state bst, tmp;
	int64_t step = 0, base_step = 0;
	uint64_t base_sum = 0, got;
	float *base = NULL, *cur = NULL;
	uint32_t *enc = NULL;
	size_t maxn = 0;
	const char *slash;
	struct seal_file sf;
	hid_t f;
	int rc;

	rc = open_checked(&c, SEAL_REQUIRED, &sf, &f);
	if (rc)
		return rc;
	rc = diff_check_header(&c, f, &step, &base_step, &base_sum, base_file,
			       sizeof(base_file)) ?:
	     check_config(&c, f, &m->cfg);
	if (rc)
		goto out;
	slash = strrchr(path, '/');
	if (sigma_snprintf(bpath, sizeof(bpath), "%.*s%s",
			   slash ? (int)(slash - path + 1) : 0, path,
			   base_file)) {
		rc = fail(&c, ENAMETOOLONG, "base path too long");
		goto out;
	}
	for (int i = 0; i < m->ntensors; i++)
		if (m->tensors[i].n > maxn)
			maxn = m->tensors[i].n;
	base = malloc(sizeof(float) * 3 * n);
	cur = malloc(sizeof(float) * 3 * n);
	enc = malloc(sizeof(uint32_t) * maxn);
	if (!base || !cur || !enc) {
		rc = sigma_set_err(err, len, ENOMEM, "out of memory");
		goto out;
	}
	/* the base: whole, valid, and the very state this was written
	 * against (not another file that took its name) */
	{
		struct ctx bc = { bpath, why, sizeof(why) };

		rc = read_full_host(&bc, m, base, &bst);
		if (rc) {
			rc = fail(&c, EBADMSG, "its base is unusable: %s", why);
			goto out;
		}
	}
	if (bst.step != base_step) {
		rc = fail(&c, EBADMSG, "its base %s holds step %ld, not %lld",
			  bpath, bst.step, (long long)base_step);
		goto out;
	}
	got = state_hash(m, base);
	if (got != base_sum) {
		rc = fail(&c, EBADMSG,
			  "its base %s has checksum %016llx, it was written against %016llx (base replaced)",
			  bpath, (unsigned long long)got,
			  (unsigned long long)base_sum);
		goto out;
	}
	for (int blk = 0; blk < 3 && !rc; blk++) {
		const char *gname = diff_groups[blk];
		hid_t g;

		if (H5Lexists(f, gname, H5P_DEFAULT) <= 0 ||
		    (g = H5Gopen2(f, gname, H5P_DEFAULT)) < 0) {
			rc = fail(&c, EBADMSG, "group %s is missing", gname);
			break;
		}
		for (int i = 0; i < m->ntensors && !rc; i++) {
			const struct model_tensor *t = &m->tensors[i];

			rc = diff_read_tensor(&c, g, gname, t,
					      base + blk * n + t->offset,
					      cur + blk * n + t->offset, enc);
		}
		H5Gclose(g);
	}
	memset(&tmp, 0, sizeof(tmp));
	tmp.step = (long)step;
	rc = rc ?: read_state(&c, f, &tmp) ?: read_origin(&c, f, &tmp);
	if (rc)
		goto out;
	/* all of it is good: only now touch the model */
	m->ops->from_host(m->params, cur, sizeof(float) * n);
	m->ops->from_host(m->m, cur + n, sizeof(float) * n);
	m->ops->from_host(m->v, cur + 2 * n, sizeof(float) * n);
	*st = tmp;
out:
	free(base);
	free(cur);
	free(enc);
	close_checked(f, &sf);
	return rc;
}

/*
 * Whether st (just read from path in dir) belongs to the run that dir's
 * manifest names; a warning when not. A directory without a manifest
 * (or a file written without a run) is taken as it is.
 */
static bool of_dir_run(const char *dir, const char *path,
		       const struct ckpt_state *st)
{
	struct run_manifest rm;
	char why[512];

	if (run_read(dir, &rm, why, sizeof(why)) || !strcmp(rm.id, st->run))
		return true;
	sigma_warn("checkpoint %s refused: it belongs to run %s, and %s holds run %s",
		   path, *st->run ? st->run : "(none named)", dir, rm.id);
	return false;
}

static bool parse_name(const char *name, struct ckpt_entry *e);

bool ckpt_is_published_name(const char *name)
{
	char base[NAME_MAX + 1];
	size_t n = strlen(name), sl = strlen(SEAL_SUFFIX);
	struct ckpt_entry e;
	struct diff_name dn;

	if (n > sl && !strcmp(name + n - sl, SEAL_SUFFIX))
		n -= sl;
	if (n >= sizeof(base))
		return false;
	memcpy(base, name, n);
	base[n] = '\0';
	return parse_name(base, &e) || parse_diff_name(base, &dn);
}

bool ckpt_is_diff(const char *path)
{
	const char *slash = strrchr(path, '/');

	return !strncmp(slash ? slash + 1 : path, "diff-", 5);
}

long ckpt_diff_newest(const char *dir, int *attempt)
{
	struct diff_name *dn = malloc(sizeof(*dn) * CKPT_MAX_LISTED);
	int n = dn ? list_diffs(dir, dn, CKPT_MAX_LISTED) : -ENOMEM;
	long step = n > 0 ? dn[0].step : -1;

	if (attempt)
		*attempt = n > 0 ? dn[0].attempt : -1;
	free(dn);
	return step;
}

long ckpt_diff_newest_step(const char *dir)
{
	return ckpt_diff_newest(dir, NULL);
}

int ckpt_load_latest_diff(const char *dir, struct model *m,
			  struct ckpt_state *st, char *path, size_t plen,
			  char *err, size_t len)
{
	struct diff_name *dn = malloc(sizeof(*dn) * CKPT_MAX_LISTED);
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
	nd = list_diffs(dir, dn, CKPT_MAX_LISTED);
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

		if (diff_path(p, sizeof(p), dir, &dn[i]))
			continue;
		if (ckpt_read_diff(p, m, &ds, why, sizeof(why)) != 0) {
			sigma_warn("differential checkpoint refused: %s; trying an older one",
				   why);
			continue;
		}
		if (ds.step != dn[i].step || ds.attempt != dn[i].attempt ||
		    !of_dir_run(dir, p, &ds)) {
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

/* whether a differential of dir names base step s */
static bool diff_pins(const struct diff_name *dn, int nd, long s)
{
	for (int i = 0; i < nd; i++)
		if (dn[i].base == s)
			return true;
	return false;
}

/*
 * Keep the newest keep differentials of dir, and none whose base (one of
 * the full checkpoints steps[0..ns)) is gone or whose step has a full
 * checkpoint too; dn[0..*kept) receives those kept, whose bases
 * ckpt_prune must keep too.
 */
static int diff_prune(const char *dir, int keep, const long *steps, int ns,
		      struct diff_name *dn, int *kept)
{
	int nd = list_diffs(dir, dn, CKPT_MAX_LISTED), k = 0;

	for (int i = 0; i < nd; i++) {
		bool has_base = false, has_full = false;
		char p[PATH_MAX];

		/* a full checkpoint of the same step supersedes it */
		for (int j = 0; j < ns; j++) {
			has_base |= steps[j] == dn[i].base;
			has_full |= steps[j] == dn[i].step;
		}
		if (k < keep && has_base && !has_full) {
			dn[k++] = dn[i];
			continue;
		}
		if (!diff_path(p, sizeof(p), dir, &dn[i]))
			remove_published(p);
	}
	*kept = k;
	return nd < 0 ? nd : 0;
}

int ckpt_diff_discard_after(const char *dir, long step)
{
	struct diff_name *dn = malloc(sizeof(*dn) * CKPT_MAX_LISTED);
	int nd, removed = 0;

	if (!dn)
		return -ENOMEM;
	nd = list_diffs(dir, dn, CKPT_MAX_LISTED);
	for (int i = 0; i < nd; i++) {
		char p[PATH_MAX];

		if (dn[i].step > step && !diff_path(p, sizeof(p), dir, &dn[i]) &&
		    remove_published(p) == 0)
			removed++;
	}
	free(dn);
	return nd < 0 ? nd : removed;
}

/* ---- directory ------------------------------------------------------------ */

int ckpt_path(char *buf, size_t len, const char *dir, long step, int attempt)
{
	if (step < 0 || step > 99999999L || attempt < 0 ||
	    attempt > CKPT_ATTEMPT_MAX)
		return -EINVAL;
	if (attempt == 0)
		return sigma_snprintf(buf, len, "%s/ckpt-%08ld.h5", dir, step);
	return sigma_snprintf(buf, len, "%s/ckpt-%08ld-a%d.h5", dir, step,
			      attempt);
}

/* ckpt-SSSSSSSS.h5 (attempt 0) or ckpt-SSSSSSSS-aN.h5 (N > 0, no
 * leading zero): exactly the names ckpt_path makes */
static bool parse_name(const char *name, struct ckpt_entry *e)
{
	const char *p = name + 5;
	long step = 0, attempt = 0;
	int digits = 0;

	if (strncmp(name, "ckpt-", 5))
		return false;
	for (int i = 0; i < 8; i++, p++) {
		if (*p < '0' || *p > '9')
			return false;
		step = step * 10 + (*p - '0');
	}
	if (p[0] == '-' && p[1] == 'a') {
		for (p += 2; *p >= '0' && *p <= '9' && digits < 8; p++) {
			if (digits == 0 && *p == '0')
				return false;
			attempt = attempt * 10 + (*p - '0');
			digits++;
		}
		if (digits == 0 || attempt > CKPT_ATTEMPT_MAX)
			return false;
	}
	if (strcmp(p, ".h5"))
		return false;
	e->step = step;
	e->attempt = (int)attempt;
	return true;
}

static int cmp_entry(const void *a, const void *b)
{
	const struct ckpt_entry *x = a, *y = b;

	if (x->attempt != y->attempt)
		return x->attempt < y->attempt ? 1 : -1;
	return x->step < y->step ? 1 : x->step > y->step ? -1 : 0;
}

/* every name of dir, newest first; count or -errno */
static int list_all(const char *dir, struct ckpt_entry **out)
{
	struct ckpt_entry *e = malloc(sizeof(*e) * CKPT_MAX_LISTED);
	DIR *d;
	struct dirent *de;
	int n = 0;

	*out = NULL;
	if (!e)
		return -ENOMEM;
	d = opendir(dir);
	if (!d) {
		int rc = -errno;

		free(e);
		return rc;
	}
	while ((de = readdir(d)) && n < CKPT_MAX_LISTED)
		if (parse_name(de->d_name, &e[n]))
			n++;
	closedir(d);
	qsort(e, n, sizeof(*e), cmp_entry);
	*out = e;
	return n;
}

int ckpt_list(const char *dir, struct ckpt_entry *out, int max)
{
	struct ckpt_entry *e;
	int n = list_all(dir, &e);

	if (n < 0)
		return n;
	if (n > max)
		n = max;
	memcpy(out, e, sizeof(*e) * n);
	free(e);
	return n;
}

int ckpt_load_latest(const char *dir, struct model *m, struct ckpt_state *st,
		     char *path, size_t plen, char *err, size_t len)
{
	struct ckpt_entry *e;
	int n = list_all(dir, &e), refused = 0;

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
			if (!of_dir_run(dir, p, st)) {
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

int ckpt_prune(const char *dir, int keep)
{
	struct ckpt_entry *e;
	struct diff_name *dn = malloc(sizeof(*dn) * CKPT_MAX_LISTED);
	long *steps = NULL;
	int n = list_all(dir, &e), nd = 0;

	if (n >= 0)
		steps = malloc(sizeof(long) * (n > 0 ? n : 1));
	if (!dn || (n >= 0 && !steps)) {
		free(e), free(dn), free(steps);
		return -ENOMEM;
	}
	for (int i = 0; i < n; i++)
		steps[i] = e[i].step;
	/* differentials first: the bases of those kept stay */
	if (n >= 0)
		diff_prune(dir, keep, steps, n, dn, &nd);
	for (int i = keep; i < n; i++) {
		char p[PATH_MAX];

		if (diff_pins(dn, nd, e[i].step))
			continue;
		if (!ckpt_path(p, sizeof(p), dir, e[i].step, e[i].attempt))
			remove_published(p);
	}
	free(e);
	free(steps);
	free(dn);
	return n < 0 ? n : 0;
}

long ckpt_newest(const char *dir, int *attempt)
{
	struct ckpt_entry *e;
	int n = list_all(dir, &e);
	long step = n > 0 ? e[0].step : -1;

	if (attempt)
		*attempt = n > 0 ? e[0].attempt : -1;
	free(e);
	return step;
}

long ckpt_newest_step(const char *dir)
{
	return ckpt_newest(dir, NULL);
}

/* ---- asynchronous writer -------------------------------------------------- */

struct ckpt_async {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	char dir[PATH_MAX];
	int keep;
	int attempts; /* per checkpoint, the first included */
	unsigned retry_ms; /* before the first retry; doubles */
	const struct model *m; /* layout, configuration, kernels' name */
	float *stage; /* params, m, v: 3 * nparams, host memory */
	struct ckpt_state st;
	bool pending; /* a staged snapshot not yet written */
	bool quit;
	int result; /* of the last finished write: 0 or -errno */
	char err[1024];
	int inject; /* test hook: attempts still to fail */
	struct ckpt_async_stats stats;
	struct ckpt_base *base; /* differentials on: the newest full */
	bool diff; /* the pending snapshot: a differential */
	bool wrote_diff; /* the last write: a differential */
	struct ckpt_diff_stats dstats; /* of it */
};

static double mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/*
 * One attempt: a differential against the base when one was asked for
 * and a base is there, else a full checkpoint, which becomes the base.
 */
static int async_write_once(struct ckpt_async *w, char *path, size_t plen,
			    char *why, size_t wlen)
{
	int rc;

	w->wrote_diff = false;
	if (w->diff && w->base->step >= 0 && w->base->step < w->st.step) {
		rc = ckpt_write_diff(w->dir, w->m, w->stage, &w->st, w->base,
				     &w->dstats, path, plen, why, wlen);
		w->wrote_diff = rc == 0;
		return rc;
	}
	if (w->diff)
		printf("checkpoint step %ld: no full checkpoint of this run to difference against: a full one instead\n",
		       w->st.step);
	rc = write_file(w->dir, w->m, w->stage, &w->st, path, plen, why,
			wlen);
	if (rc == 0 && w->base)
		ckpt_base_set(w->base, w->m, w->stage, w->st.step, path);
	return rc;
}

/* one snapshot: every attempt until one succeeds or none is left */
static int async_write(struct ckpt_async *w, double *ms)
{
	char path[PATH_MAX], why[1024];
	unsigned delay = w->retry_ms;
	double t0 = mono_ms();
	int rc = -EIO;

	for (int a = 1; a <= w->attempts; a++) {
		bool inject;

		pthread_mutex_lock(&w->mu);
		inject = w->inject > 0;
		if (inject)
			w->inject--;
		pthread_mutex_unlock(&w->mu);
		if (inject) {
			rc = sigma_set_err(why, sizeof(why), EIO,
					   "%s: injected write failure",
					   w->dir);
		} else {
			rc = async_write_once(w, path, sizeof(path), why,
					      sizeof(why));
		}
		if (rc == 0)
			break;
		pthread_mutex_lock(&w->mu);
		w->stats.failures++;
		pthread_mutex_unlock(&w->mu);
		if (rc == -ESTALE) {
			/* a newer instance owns the directory: no retry */
			sigma_error("checkpoint step %ld: %s", w->st.step, why);
			break;
		}
		if (a < w->attempts) {
			sigma_warn("checkpoint step %ld: attempt %d of %d failed: %s; retrying in %u ms",
				   w->st.step, a, w->attempts, why, delay);
			sleep_ms(delay);
			delay = delay < 30000 ? delay * 2 : delay;
		} else {
			sigma_error("checkpoint step %ld: all %d attempts failed: %s",
				    w->st.step, w->attempts, why);
		}
	}
	*ms = mono_ms() - t0;
	if (rc == 0) {
		ckpt_prune(w->dir, w->keep);
		printf("checkpoint step %ld: %s (%.2f s, in the background)\n",
		       w->st.step, path, *ms / 1000.0);
		fflush(stdout);
	}
	pthread_mutex_lock(&w->mu);
	if (rc)
		sigma_strlcpy(w->err, why, sizeof(w->err));
	pthread_mutex_unlock(&w->mu);
	return rc;
}

static void *async_main(void *arg)
{
	struct ckpt_async *w = arg;

	pthread_mutex_lock(&w->mu);
	for (;;) {
		double ms;
		int rc;

		while (!w->pending && !w->quit)
			pthread_cond_wait(&w->cv, &w->mu);
		if (!w->pending)
			break;
		/* the stage and st belong to this thread until pending
		 * is cleared: submit waits for that before it copies */
		pthread_mutex_unlock(&w->mu);
		rc = async_write(w, &ms);
		pthread_mutex_lock(&w->mu);
		w->result = rc;
		w->stats.write_ms = ms;
		w->stats.total_write_ms += ms;
		if (rc == 0) {
			w->stats.writes++;
			w->stats.write_step = w->st.step;
			if (w->wrote_diff) {
				w->stats.diff_writes++;
				w->stats.diff = w->dstats;
			}
		} else {
			w->stats.lost++;
		}
		w->pending = false;
		pthread_cond_broadcast(&w->cv);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

int ckpt_async_create(struct ckpt_async **out, const char *dir, int keep,
		      int attempts, unsigned retry_ms, const struct model *m,
		      char *err, size_t len)
{
	struct ckpt_async *w;
	int rc;

	*out = NULL;
	if (keep < 1 || attempts < 1 || attempts > 100 || retry_ms > 600000)
		return sigma_set_err(err, len, EINVAL,
				     "checkpoint writer: keep %d, attempts %d, retry %u ms out of range",
				     keep, attempts, retry_ms);
	w = calloc(1, sizeof(*w));
	if (!w)
		return sigma_set_err(err, len, ENOMEM, "out of memory");
	if (sigma_strlcpy(w->dir, dir, sizeof(w->dir)) >= sizeof(w->dir)) {
		free(w);
		return sigma_set_err(err, len, ENAMETOOLONG,
				     "%s: checkpoint path too long", dir);
	}
	w->stage = malloc(sizeof(float) * 3 * m->nparams);
	if (!w->stage) {
		free(w);
		return sigma_set_err(err, len, ENOMEM,
				     "out of memory for a %zu MiB checkpoint stage",
				     sizeof(float) * 3 * m->nparams >> 20);
	}
	w->keep = keep;
	w->attempts = attempts;
	w->retry_ms = retry_ms;
	w->m = m;
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	rc = pthread_create(&w->thread, NULL, async_main, w);
	if (rc) {
		pthread_cond_destroy(&w->cv);
		pthread_mutex_destroy(&w->mu);
		free(w->stage);
		free(w);
		return sigma_set_err(err, len, rc,
				     "cannot start the checkpoint writer: %s",
				     strerror(rc));
	}
	*out = w;
	return 0;
}

/* with w->mu held: until no write is in flight; the time it took */
static double async_drain(struct ckpt_async *w)
{
	double t0 = mono_ms();

	while (w->pending)
		pthread_cond_wait(&w->cv, &w->mu);
	return mono_ms() - t0;
}

static int async_submit(struct ckpt_async *w, const struct model *m,
			const struct ckpt_state *st, bool diff, char *err,
			size_t len)
{
	const size_t n = m->nparams;
	double t0 = mono_ms(), waited;
	int rc;

	if (m->nparams != w->m->nparams)
		return sigma_set_err(err, len, EINVAL,
				     "checkpoint writer: model layout changed");
	pthread_mutex_lock(&w->mu);
	if (w->pending)
		w->stats.stalls++;
	waited = async_drain(w);
	rc = w->result;
	if (rc) {
		/* the previous snapshot could not be written: say so now,
		 * and keep failing until the caller gives up */
		sigma_set_err(err, len, -rc, "checkpoint step %ld: %s",
			      w->st.step, w->err);
		pthread_mutex_unlock(&w->mu);
		return rc;
	}
	m->ops->to_host(w->stage, m->params, sizeof(float) * n);
	m->ops->to_host(w->stage + n, m->m, sizeof(float) * n);
	m->ops->to_host(w->stage + 2 * n, m->v, sizeof(float) * n);
	w->st = *st;
	w->diff = diff && w->base;
	w->pending = true;
	w->stats.wait_ms = waited;
	w->stats.stall_ms = mono_ms() - t0;
	w->stats.total_stall_ms += w->stats.stall_ms;
	w->stats.submits++;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	return 0;
}

int ckpt_async_submit(struct ckpt_async *w, const struct model *m,
		      const struct ckpt_state *st, char *err, size_t len)
{
	return async_submit(w, m, st, false, err, len);
}

int ckpt_async_submit_diff(struct ckpt_async *w, const struct model *m,
			   const struct ckpt_state *st, char *err, size_t len)
{
	if (!w->base)
		return sigma_set_err(err, len, EINVAL,
				     "checkpoint writer: differentials not enabled");
	return async_submit(w, m, st, true, err, len);
}

int ckpt_async_enable_diff(struct ckpt_async *w, const struct model *m,
			   char *err, size_t len)
{
	struct ckpt_base *b;
	int rc;

	if (w->base)
		return 0;
	b = malloc(sizeof(*b));
	if (!b)
		return sigma_set_err(err, len, ENOMEM, "out of memory");
	rc = ckpt_base_init(b, m, err, len);
	if (rc) {
		free(b);
		return rc;
	}
	pthread_mutex_lock(&w->mu);
	async_drain(w);
	w->base = b;
	pthread_mutex_unlock(&w->mu);
	return 0;
}

void ckpt_async_set_base(struct ckpt_async *w, const struct model *m,
			 long step, const char *path)
{
	pthread_mutex_lock(&w->mu);
	async_drain(w);
	if (w->base)
		ckpt_base_set(w->base, m, NULL, step, path);
	pthread_mutex_unlock(&w->mu);
}

int ckpt_async_wait(struct ckpt_async *w, char *err, size_t len)
{
	int rc;

	pthread_mutex_lock(&w->mu);
	async_drain(w);
	rc = w->result;
	if (rc)
		sigma_set_err(err, len, -rc, "checkpoint step %ld: %s",
			      w->st.step, w->err);
	pthread_mutex_unlock(&w->mu);
	return rc;
}

void ckpt_async_stats(struct ckpt_async *w, struct ckpt_async_stats *s)
{
	pthread_mutex_lock(&w->mu);
	*s = w->stats;
	pthread_mutex_unlock(&w->mu);
}

void ckpt_async_inject_failures(struct ckpt_async *w, int n)
{
	pthread_mutex_lock(&w->mu);
	w->inject = n;
	pthread_mutex_unlock(&w->mu);
}

void ckpt_async_destroy(struct ckpt_async *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->mu);
	async_drain(w);
	w->quit = true;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->thread, NULL);
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
	ckpt_base_fini(w->base);
	free(w->base);
	free(w->stage);
	free(w);
}

const float *ckpt_async_staged(struct ckpt_async *w)
{
	return w->stage;
}

float *ckpt_async_claim(struct ckpt_async *w, char *err, size_t len)
{
	int rc;

	pthread_mutex_lock(&w->mu);
	if (w->pending)
		w->stats.stalls++;
	async_drain(w);
	rc = w->result;
	if (rc)
		sigma_set_err(err, len, -rc, "checkpoint step %ld: %s",
			      w->st.step, w->err);
	pthread_mutex_unlock(&w->mu);
	return rc ? NULL : w->stage;
}

void ckpt_async_commit(struct ckpt_async *w, const struct ckpt_state *st)
{
	pthread_mutex_lock(&w->mu);
	w->st = *st;
	w->diff = false;
	w->pending = true;
	w->stats.submits++;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
}
