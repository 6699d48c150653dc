/*
 * runtime_ckpt.c - the node-local tier of a table of named tensors
 * (sigma_runtime.h, sigma_rt_ckpt_*): DIR/rank-R/step-S.h5 in the format
 * of ckpt_table.h, written by a thread of the object's own from a copy
 * that save makes, so that the write overlaps the caller's next step.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sigma.h"
#include "sigma_runtime.h"
#include "ckpt_table.h"
#include "seal.h"

#define KEEP_MAX 64
#define STEPS_MAX 4096 /* step files looked at in a directory */

/*
 * A table copied by save: its entries point into names, dims and data.
 * The buffers are kept from one save to the next and grow when a table
 * needs more (cap_*): a checkpoint every step then copies into memory
 * already mapped, instead of faulting in fresh pages each time.
 */
struct staged {
	struct sigma_rt_tensor *t;
	size_t n;
	char *names;
	int64_t *dims; /* shape, global_shape, offset of each: 3 x NDIM_MAX */
	unsigned char *data;
	size_t cap_t, cap_names, cap_dims, cap_data; /* bytes of each */
	long step;
};

struct sigma_rt_ckpt {
	char dir[PATH_MAX]; /* DIR/rank-R */
	struct ckpt_table_head head;
	int keep;

	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct staged job; /* the table to write, valid while busy */
	bool no_copy;	   /* the writer reads the caller's tensors */
	bool reading;	   /* ... and is not done with them */
	bool busy, quit;
	int rc;		/* of the last write */
	char err[512];	/* its failure */
};

/* ---- the steps in the directory ----------------------------------------- */

static void step_path(const struct sigma_rt_ckpt *ck, long step, char *buf,
		      size_t len)
{
	snprintf(buf, len, "%s/step-%ld.h5", ck->dir, step);
}

/* a published step file's step ("step-S.h5", its seal there), or -1 */
static long step_of(const struct sigma_rt_ckpt *ck, const char *name)
{
	char path[PATH_MAX + 32];
	long step;
	int end = 0;
	struct stat st;

	if (sscanf(name, "step-%ld.h5%n", &step, &end) != 1 || !end ||
	    name[end] || step < 0)
		return -1;
	snprintf(path, sizeof(path), "%s/%s" SEAL_SUFFIX, ck->dir, name);
	return stat(path, &st) == 0 ? step : -1;
}

static int newest_first(const void *a, const void *b)
{
	long x = *(const long *)a, y = *(const long *)b;

	return (x < y) - (x > y);
}

/* every step in the directory, newest first, into steps[STEPS_MAX] */
static int list_steps(const struct sigma_rt_ckpt *ck, long *steps)
{
	DIR *d = opendir(ck->dir);
	struct dirent *e;
	int n = 0;

	if (!d)
		return -errno;
	while ((e = readdir(d)) && n < STEPS_MAX) {
		long s = step_of(ck, e->d_name);

		if (s >= 0)
			steps[n++] = s;
	}
	closedir(d);
	qsort(steps, (size_t)n, sizeof(*steps), newest_first);
	return n;
}

/* all but the newest keep steps removed, the seal first */
static void prune(const struct sigma_rt_ckpt *ck)
{
	long *steps = malloc(sizeof(*steps) * STEPS_MAX);
	char path[PATH_MAX + 32];
	int n = steps ? list_steps(ck, steps) : 0;

	for (int i = ck->keep; i < n; i++) {
		step_path(ck, steps[i], path, sizeof(path));
		seal_remove(path);
		unlink(path);
	}
	free(steps);
}

/* ---- the writer thread --------------------------------------------------- */

static void staged_free(struct staged *s)
{
	free(s->t);
	free(s->names);
	free(s->dims);
	free(s->data);
	memset(s, 0, sizeof(*s));
}

/* *p holding at least want bytes (its old contents not kept); -ENOMEM
 * leaves it as it was */
static int grow(void **p, size_t *cap, size_t want)
{
	void *q;

	if (*p && want <= *cap)
		return 0;
	q = malloc(want ? want : 1);
	if (!q)
		return -ENOMEM;
	free(*p);
	*p = q;
	*cap = want;
	return 0;
}

/* the bytes of t's elements (a table ckpt_table_check passed) */
static size_t tensor_bytes(const struct sigma_rt_tensor *t)
{
	size_t b = ckpt_table_dtype_size(t->dtype);

	for (int d = 0; d < t->ndim; d++)
		b *= (size_t)t->shape[d];
	return b;
}

/*
 * t[n] (checked) into s: the names and shapes copied, room made for
 * bytes of elements, each entry's data still the caller's until
 * stage_data copies them
 */
static int stage(struct staged *s, long step, const struct sigma_rt_tensor *t,
		 size_t n, size_t bytes)
{
	const size_t dims_each = sizeof(int64_t) * 3 * SIGMA_RT_NDIM_MAX;
	size_t names = 0, at = 0;

	for (size_t i = 0; i < n; i++)
		names += strlen(t[i].name) + 1;
	if (grow((void **)&s->names, &s->cap_names, names) ||
	    grow((void **)&s->data, &s->cap_data, bytes) ||
	    grow((void **)&s->t, &s->cap_t, n * sizeof(*s->t)) ||
	    grow((void **)&s->dims, &s->cap_dims, n * dims_each))
		return -ENOMEM;
	memset(s->t, 0, n * sizeof(*s->t));
	for (size_t i = 0; i < n; i++) {
		struct sigma_rt_tensor *c = &s->t[i];
		int64_t *dims = s->dims + i * 3 * SIGMA_RT_NDIM_MAX;
		size_t nd = (size_t)t[i].ndim;

		*c = t[i];
		c->name = strcpy(s->names + at, t[i].name);
		at += strlen(t[i].name) + 1;
		memcpy(dims, t[i].shape, sizeof(int64_t) * nd);
		c->shape = dims;
		if (t[i].global_shape) {
			memcpy(dims + SIGMA_RT_NDIM_MAX, t[i].global_shape,
			       sizeof(int64_t) * nd);
			memcpy(dims + 2 * SIGMA_RT_NDIM_MAX, t[i].offset,
			       sizeof(int64_t) * nd);
			c->global_shape = dims + SIGMA_RT_NDIM_MAX;
			c->offset = dims + 2 * SIGMA_RT_NDIM_MAX;
		}
	}
	s->n = n;
	s->step = step;
	return 0;
}

/* the caller's elements into s's buffer; the entries then point there */
static void stage_data(struct staged *s)
{
	size_t off = 0;

	for (size_t i = 0; i < s->n; i++) {
		struct sigma_rt_tensor *c = &s->t[i];
		size_t b = tensor_bytes(c);

		if (b)
			memcpy(s->data + off, c->data, b);
		c->data = s->data + off;
		off += b;
	}
}

/* the caller's tensors are in the file: fence may return */
static void released(void *arg)
{
	struct sigma_rt_ckpt *ck = arg;

	pthread_mutex_lock(&ck->mu);
	ck->reading = false;
	pthread_cond_broadcast(&ck->cv);
	pthread_mutex_unlock(&ck->mu);
}

static void *writer(void *arg)
{
	struct sigma_rt_ckpt *ck = arg;

	pthread_mutex_lock(&ck->mu);
	for (;;) {
		char final[PATH_MAX + 32], err[512] = "";
		struct ckpt_table_head h;
		int rc;

		while (!ck->busy && !ck->quit)
			pthread_cond_wait(&ck->cv, &ck->mu);
		if (!ck->busy)
			break;
		h = ck->head;
		h.step = ck->job.step;
		pthread_mutex_unlock(&ck->mu);

		step_path(ck, h.step, final, sizeof(final));
		rc = ckpt_table_write(ck->dir, final, &h, ck->job.t, ck->job.n,
				      released, ck, err, sizeof(err));
		if (!rc)
			prune(ck);

		pthread_mutex_lock(&ck->mu);
		ck->reading = false; /* also when the write failed */
		ck->rc = rc;
		sigma_strlcpy(ck->err, err, sizeof(ck->err));
		ck->busy = false;
		pthread_cond_broadcast(&ck->cv);
	}
	pthread_mutex_unlock(&ck->mu);
	return NULL;
}

void sigma_rt_ckpt_fence(struct sigma_rt_ckpt *ck)
{
	pthread_mutex_lock(&ck->mu);
	while (ck->reading)
		pthread_cond_wait(&ck->cv, &ck->mu);
	pthread_mutex_unlock(&ck->mu);
}

int sigma_rt_ckpt_wait(struct sigma_rt_ckpt *ck, char *err, size_t len)
{
	int rc;

	pthread_mutex_lock(&ck->mu);
	while (ck->busy)
		pthread_cond_wait(&ck->cv, &ck->mu);
	rc = ck->rc;
	if (rc && err && len)
		sigma_strlcpy(err, ck->err, len);
	pthread_mutex_unlock(&ck->mu);
	return rc;
}

/* ---- the verbs ----------------------------------------------------------- */

static int setting(const char *key, const char *value, void *arg, char *err,
		   size_t len)
{
	struct sigma_rt_ckpt *ck = arg;
	long v;

	if (!strcmp(key, "copy")) {
		if (strcmp(value, "yes") && strcmp(value, "no"))
			return sigma_set_err(err, len, EINVAL,
					     "copy=%s: want yes or no", value);
		ck->no_copy = !strcmp(value, "no");
		return 0;
	}
	if (strcmp(key, "keep"))
		return sigma_set_err(err, len, EINVAL,
				     "unknown checkpoint setting %s (known: keep, copy)",
				     key);
	if (sigma_parse_long(value, 1, KEEP_MAX, &v))
		return sigma_set_err(err, len, EINVAL,
				     "keep=%s: want a whole number 1 .. %d",
				     value, KEEP_MAX);
	ck->keep = (int)v;
	return 0;
}

static int ckpt_init(struct sigma_rt_ckpt *ck, const char *dir,
		     const char *run, int rank, const char *settings,
		     char *err, size_t len)
{
	int rc;

	if (!dir || !dir[0])
		return sigma_set_err(err, len, EINVAL, "no checkpoint directory");
	if (!ckpt_table_run_ok(run))
		return sigma_set_err(err, len, EINVAL,
				     "run name %s: want 1 .. %d letters, digits and \"_.-\"",
				     run ? run : "(none)", CKPT_TABLE_RUN_MAX);
	if (rank < 0)
		return sigma_set_err(err, len, EINVAL, "rank %d is negative",
				     rank);
	ck->keep = 2;
	rc = sigma_kv_parse_words(settings ? settings : "", setting, ck, err,
				  len);
	if (rc)
		return rc;
	sigma_strlcpy(ck->head.run, run, sizeof(ck->head.run));
	ck->head.rank = rank;
	if (sigma_snprintf(ck->dir, sizeof(ck->dir), "%s/rank-%d", dir, rank))
		return sigma_set_err(err, len, ENAMETOOLONG,
				     "%s: checkpoint path too long", dir);
	rc = sigma_mkdir_p(ck->dir, 0700);
	if (rc)
		return sigma_set_err(err, len, -rc, "%s: cannot create: %s",
				     ck->dir, strerror(-rc));
	return 0;
}

int sigma_rt_ckpt_open(struct sigma_rt_ckpt **out, const char *dir,
		       const char *run, int rank, const char *settings,
		       char *err, size_t len)
{
	struct sigma_rt_ckpt *ck = calloc(1, sizeof(*ck));
	int rc;

	*out = NULL;
	if (!ck)
		return sigma_set_err(err, len, ENOMEM, "out of memory");
	rc = ckpt_init(ck, dir, run, rank, settings, err, len);
	if (rc) {
		free(ck);
		return rc;
	}
	pthread_mutex_init(&ck->mu, NULL);
	pthread_cond_init(&ck->cv, NULL);
	rc = pthread_create(&ck->thread, NULL, writer, ck);
	if (rc) {
		pthread_cond_destroy(&ck->cv);
		pthread_mutex_destroy(&ck->mu);
		free(ck);
		return sigma_set_err(err, len, rc,
				     "cannot start the checkpoint writer: %s",
				     strerror(rc));
	}
	*out = ck;
	return 0;
}

int sigma_rt_ckpt_save(struct sigma_rt_ckpt *ck, long step,
		       const struct sigma_rt_tensor *t, size_t n, char *err,
		       size_t len)
{
	size_t bytes;
	int rc;

	if (step < 0)
		return sigma_set_err(err, len, EINVAL, "step %ld is negative",
				     step);
	rc = ckpt_table_check(t, n, &bytes, err, len);
	if (rc)
		return rc;
	rc = sigma_rt_ckpt_wait(ck, err, len);
	if (rc)
		return rc;
	/* the writer is idle: the staging buffers are the caller's */
	rc = stage(&ck->job, step, t, n, ck->no_copy ? 0 : bytes);
	if (rc)
		return sigma_set_err(err, len, ENOMEM,
				     "out of memory for a copy of %zu bytes",
				     bytes);
	if (!ck->no_copy)
		stage_data(&ck->job);
	pthread_mutex_lock(&ck->mu);
	ck->reading = ck->no_copy;
	ck->busy = true;
	pthread_cond_broadcast(&ck->cv);
	pthread_mutex_unlock(&ck->mu);
	return 0;
}

int sigma_rt_ckpt_steps(struct sigma_rt_ckpt *ck, long *steps, int max)
{
	long *all = malloc(sizeof(*all) * STEPS_MAX);
	int n;

	if (!all)
		return -ENOMEM;
	sigma_rt_ckpt_wait(ck, NULL, 0);
	n = list_steps(ck, all);
	for (int i = 0; i < n && i < max; i++)
		steps[i] = all[i];
	free(all);
	return n;
}

/* step's file in path[PATH_MAX + 32] and its head in h, after the write
 * in flight: 0 or -ENOENT with err */
static int find_step(struct sigma_rt_ckpt *ck, long step, char *path,
		     struct ckpt_table_head *h, char *err, size_t len)
{
	struct stat st;

	sigma_rt_ckpt_wait(ck, NULL, 0);
	step_path(ck, step, path, PATH_MAX + 32);
	if (step < 0 || stat(path, &st) != 0)
		return sigma_set_err(err, len, ENOENT,
				     "%s: no checkpoint of step %ld", ck->dir,
				     step);
	*h = ck->head;
	h->step = step;
	return 0;
}

int sigma_rt_ckpt_load(struct sigma_rt_ckpt *ck, long step,
		       const struct sigma_rt_tensor *t, size_t n, char *err,
		       size_t len)
{
	char path[PATH_MAX + 32];
	struct ckpt_table_head h;

	return find_step(ck, step, path, &h, err, len) ?:
	       ckpt_table_read(path, &h, t, n, err, len);
}

int sigma_rt_ckpt_load_resharded(struct sigma_rt_ckpt *ck, long step,
				 int writers,
				 const struct sigma_rt_tensor *t, size_t n,
				 char *err, size_t len)
{
	struct ckpt_table_cover *cov;
	struct ckpt_table_head h = ck->head;
	char path[PATH_MAX + 64];
	size_t cut = strlen(ck->dir);
	int rc;

	if (writers < 1 || writers > SIGMA_RT_WRITERS_MAX)
		return sigma_set_err(err, len, EINVAL,
				     "%d writers: want 1 .. %d", writers,
				     SIGMA_RT_WRITERS_MAX);
	if (step < 0)
		return sigma_set_err(err, len, ENOENT, "no step %ld", step);
	rc = ckpt_table_check(t, n, NULL, err, len);
	if (rc)
		return rc;
	cov = calloc(n ? n : 1, sizeof(*cov));
	if (!cov)
		return sigma_set_err(err, len, ENOMEM, "out of memory");
	sigma_rt_ckpt_wait(ck, NULL, 0);
	while (cut > 0 && ck->dir[cut - 1] != '/')
		cut--; /* DIR/ of DIR/rank-R */
	h.step = step;
	for (int w = 0; w < writers && !rc; w++) {
		struct stat st;

		snprintf(path, sizeof(path), "%.*srank-%d/step-%ld.h5",
			 (int)cut, ck->dir, w, step);
		h.rank = w;
		if (stat(path, &st) != 0)
			rc = sigma_set_err(err, len, ENOENT,
					   "%s: no checkpoint of step %ld by rank %d",
					   path, step, w);
		else
			rc = ckpt_table_read_part(path, &h, t, n, cov, err,
						  len);
	}
	if (!rc)
		rc = ckpt_table_cover_check(t, n, cov, writers, step, err, len);
	ckpt_table_cover_free(cov, n);
	free(cov);
	return rc;
}

int sigma_rt_ckpt_shape(struct sigma_rt_ckpt *ck, long step,
			const char *name, int *dtype, int *ndim,
			int64_t *shape, char *err, size_t len)
{
	char path[PATH_MAX + 32];
	struct ckpt_table_head h;

	return find_step(ck, step, path, &h, err, len) ?:
	       ckpt_table_shape(path, &h, name, dtype, ndim, shape, err, len);
}

void sigma_rt_ckpt_close(struct sigma_rt_ckpt *ck)
{
	if (!ck)
		return;
	pthread_mutex_lock(&ck->mu);
	while (ck->busy)
		pthread_cond_wait(&ck->cv, &ck->mu);
	ck->quit = true;
	pthread_cond_broadcast(&ck->cv);
	pthread_mutex_unlock(&ck->mu);
	pthread_join(ck->thread, NULL);
	pthread_cond_destroy(&ck->cv);
	pthread_mutex_destroy(&ck->mu);
	staged_free(&ck->job);
	free(ck);
}
