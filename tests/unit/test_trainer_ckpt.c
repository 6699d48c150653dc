/*
 * test_trainer_ckpt.c - HDF5 checkpoints (trainer/ckpt/ckpt_*.c): round trip,
 * refusal of bad files and of hostile attributes, the seal, fall back to
 * an older valid one, the background writer, attempts and retention.
 */
#define _GNU_SOURCE /* memmem */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <hdf5.h>
#include <xxhash.h>

#include "sigma.h"
#include "damage.h"
#include "scratch.h"
#include "ckpt.h"
#include "seal.h"
#include "model.h"
#include "untrusted.h"

static char dir[64];

static int setup(void **state)
{
	(void)state;
	return scratch_make(dir, sizeof(dir), "ckpt");
}

static int teardown(void **state)
{
	(void)state;
	return scratch_remove(dir);
}

static void path_of(char *buf, const char *name)
{
	snprintf(buf, PATH_MAX, "%s/%s", dir, name);
}

/* offset of the only occurrence of n bytes of b in the file */
static long find_bytes(const char *path, const void *b, size_t n)
{
	char *buf = NULL;
	size_t len = 0;
	const char *hit;
	long off;

	assert_int_equal(sigma_file_read(path, 1 << 30, &buf, &len), 0);
	hit = memmem(buf, len, b, n);
	assert_non_null(hit);
	off = hit - buf;
	assert_null(memmem(hit + 1, len - off - 1, b, n));
	free(buf);
	return off;
}

static struct model *small(int D)
{
	struct model_config c;
	struct model *m = NULL;
	char err[256];

	model_config_small(&c);
	c.D = D;
	assert_int_equal(model_create(&m, &c, 1, &sigma_ops_cpu, err,
				      sizeof(err)),
			 0);
	model_init_weights(m, 3);
	return m;
}

static void fill_state(struct model *m, struct ckpt_state *st, long step)
{
	for (size_t i = 0; i < m->nparams; i++) {
		m->m[i] = (float)i * 1e-6f;
		m->v[i] = (float)(i % 97) * 1e-7f + (float)step;
	}
	memset(st, 0, sizeof(*st));
	st->step = step;
	st->batch = 1;
	st->seed = 77;
	st->rng = 0x123456789abcdefULL;
	st->data_ntokens = 1000;
	st->data_checksum = 42;
	optim_config_default(&st->optim);
}

static void test_ckpt_round_trip(void **state)
{
	struct model *a = small(64), *b = small(64), *c = small(32);
	struct ckpt_state st, got;
	char p[PATH_MAX], err[1024], ck[PATH_MAX];

	(void)state;
	path_of(ck, "ck");
	fill_state(a, &st, 12);
	assert_int_equal(ckpt_write(ck, a, &st, p, sizeof(p), err, sizeof(err)),
			 0);
	assert_non_null(strstr(p, "ckpt-00000012.h5"));
	/* no temporary left behind */
	{
		char t[PATH_MAX + 64];

		snprintf(t, sizeof(t), "%s/.ckpt-00000012.h5.tmp-%ld", ck,
			 (long)getpid());
		assert_int_equal(access(t, F_OK), -1);
	}
	memset(b->params, 0, sizeof(float) * b->nparams);
	assert_int_equal(ckpt_read(p, b, &got, err, sizeof(err)), 0);
	assert_memory_equal(a->params, b->params,
			    sizeof(float) * 3 * a->nparams);
	assert_memory_equal(a->v, b->v, sizeof(float) * a->nparams);
	assert_int_equal(got.step, 12);
	assert_int_equal(got.seed, 77);
	assert_int_equal(got.rng, 0x123456789abcdefULL);
	assert_int_equal(got.data_checksum, 42);
	assert_true(got.optim.beta2 == st.optim.beta2);

	/* another shape: refused, the model untouched */
	{
		float before = c->params[0];

		assert_int_equal(ckpt_read(p, c, &got, err, sizeof(err)),
				 -EBADMSG);
		assert_non_null(strstr(err, "config D = 64"));
		assert_non_null(strstr(err, p));
		assert_true(c->params[0] == before);
	}
	/* weights only: moments zero */
	assert_int_equal(ckpt_read_weights(p, b, err, sizeof(err)), 0);
	assert_true(b->v[100] == 0.0f);
	model_destroy(a), model_destroy(b), model_destroy(c);
}

/*
 * A hostile file: its "format" attribute is a 2000-element array of
 * 16-byte strings. Read as one string it would write 32000 bytes into a
 * buffer sized for one: the reader must check the dataspace and refuse.
 */
static void test_ckpt_hostile_attribute(void **state)
{
	struct model *a = small(64), *b = small(64);
	struct ckpt_state st, got;
	char p[PATH_MAX], err[1024], ck[PATH_MAX];
	hsize_t n = 2000;
	hid_t f, t, sp, at;
	char *big = calloc(n, 16);

	(void)state;
	assert_non_null(big);
	memset(big, 'x', n * 16);
	path_of(ck, "hostile");
	fill_state(a, &st, 5);
	assert_int_equal(ckpt_write(ck, a, &st, p, sizeof(p), err, sizeof(err)),
			 0);
	f = H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT);
	assert_true(f >= 0);
	assert_true(H5Adelete(f, "format") >= 0);
	t = H5Tcopy(H5T_C_S1);
	assert_true(H5Tset_size(t, 16) >= 0);
	sp = H5Screate_simple(1, &n, NULL);
	at = H5Acreate2(f, "format", t, sp, H5P_DEFAULT, H5P_DEFAULT);
	assert_true(at >= 0);
	assert_true(H5Awrite(at, t, big) >= 0);
	H5Aclose(at), H5Sclose(sp), H5Tclose(t), H5Fclose(f);
	free(big);
	/* the seal sees the change first ... */
	assert_int_equal(ckpt_read(p, b, &got, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "does not match its seal"));
	/* ... and a file sealed as it is still meets the attribute check */
	assert_int_equal(seal_write(p, p, err, sizeof(err)), 0);
	assert_int_equal(ckpt_read(p, b, &got, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "attribute format"));
	model_destroy(a), model_destroy(b);
}

/* the name of g's first dataset, in ds[256] (any HDF5 version) */
static bool first_dataset(hid_t g, char *ds)
{
	for (hsize_t i = 0;; i++) {
		hid_t d;

		if (H5Lget_name_by_idx(g, ".", H5_INDEX_NAME, H5_ITER_INC, i,
				       ds, 256, H5P_DEFAULT) <= 0)
			return false;
		H5E_BEGIN_TRY
		{
			d = H5Dopen2(g, ds, H5P_DEFAULT);
		}
		H5E_END_TRY;
		if (d >= 0) {
			H5Dclose(d);
			return true;
		}
	}
}

/* H5Fopen, crashing when told to: libhdf5 on hostile bytes */
static volatile int h5_crash;
hid_t __real_H5Fopen(const char *name, unsigned flags, hid_t fapl);
hid_t __wrap_H5Fopen(const char *name, unsigned flags, hid_t fapl);
hid_t __wrap_H5Fopen(const char *name, unsigned flags, hid_t fapl)
{
	if (h5_crash)
		raise(SIGSEGV);
	return __real_H5Fopen(name, flags, fapl);
}

/*
 * --init-from-untrusted: a file with no seal is parsed in a child, whose
 * weights come back whole; a reader that crashes on the file is one
 * child's death, told, and the model stays as it was.
 */
static void test_init_untrusted(void **state)
{
	struct model *a = small(64), *b = small(64), *c = small(64);
	struct ckpt_state st;
	char p[PATH_MAX], sp[PATH_MAX + 8], err[1024], ck[PATH_MAX];
	float before;

	(void)state;
	path_of(ck, "untrusted");
	fill_state(a, &st, 8);
	assert_int_equal(ckpt_write(ck, a, &st, p, sizeof(p), err, sizeof(err)),
			 0);
	snprintf(sp, sizeof(sp), "%s.seal", p);
	assert_int_equal(unlink(sp), 0);
	assert_int_equal(untrusted_read_weights(p, b, err, sizeof(err)), 0);
	assert_memory_equal(a->params, b->params, sizeof(float) * a->nparams);
	assert_true(b->v[100] == 0.0f);

	h5_crash = 1;
	before = c->params[0];
	assert_int_equal(untrusted_read_weights(p, c, err, sizeof(err)),
			 -EBADMSG);
	h5_crash = 0;
	assert_non_null(strstr(err, "the reader died of signal 11"));
	assert_non_null(strstr(err, p));
	assert_true(c->params[0] == before);

	/* not a checkpoint: the reader says why */
	{
		FILE *f = fopen(sp, "w");

		assert_non_null(f);
		fputs("not a checkpoint\n", f);
		fclose(f);
	}
	assert_int_equal(untrusted_read_weights(sp, c, err, sizeof(err)),
			 -EBADMSG);
	assert_non_null(strstr(err, "not an HDF5 file"));
	assert_true(c->params[0] == before);
	model_destroy(a), model_destroy(b), model_destroy(c);
}

/*
 * A checkpoint whose tensor is stored elsewhere: in an external raw file
 * (H5Pset_external) that names a private file of the reader's, or as a
 * virtual dataset over a file named by absolute path, outside a shard
 * index. libhdf5 would read the named file as tensor bytes, as the running
 * user. Refused, unsealed (--init-from) or sealed, the model untouched.
 */
static void test_ckpt_storage_elsewhere(void **state)
{
	struct model *a = small(64), *b = small(64);
	struct ckpt_state st, got;
	char p[PATH_MAX], err[1024], ck[PATH_MAX], secret[PATH_MAX],
	    sp[PATH_MAX + 8], ds[256] = "";
	float ones[4096];
	hid_t f, g, d, dcpl, space, type;
	FILE *sf;

	(void)state;
	for (size_t i = 0; i < 4096; i++)
		ones[i] = 1.0f; /* finite: only the storage check can tell */
	path_of(secret, "secret.txt");
	sf = fopen(secret, "w");
	assert_non_null(sf);
	assert_int_equal(fwrite(ones, sizeof(ones), 1, sf), 1);
	fclose(sf);
	assert_int_equal(chmod(secret, 0600), 0);
	path_of(ck, "elsewhere");
	for (int kind = 0; kind < 2; kind++) {
		fill_state(a, &st, 3 + kind);
		assert_int_equal(ckpt_write(ck, a, &st, p, sizeof(p), err,
					    sizeof(err)),
				 0);
		f = H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT);
		assert_true(f >= 0);
		g = H5Gopen2(f, "model", H5P_DEFAULT);
		assert_true(g >= 0);
		assert_true(first_dataset(g, ds));
		d = H5Dopen2(g, ds, H5P_DEFAULT);
		assert_true(d >= 0);
		space = H5Dget_space(d);
		type = H5Dget_type(d);
		H5Dclose(d);
		assert_true(H5Ldelete(g, ds, H5P_DEFAULT) >= 0);
		dcpl = H5Pcreate(H5P_DATASET_CREATE);
		if (kind == 0) {
			assert_true(H5Pset_external(dcpl, secret, 0,
						    sizeof(ones)) >= 0);
		} else {
			hid_t src = H5Scopy(space);

			H5Sselect_all(space);
			assert_true(H5Pset_virtual(dcpl, space, secret, "/x",
						   src) >= 0);
			H5Sclose(src);
		}
		d = H5Dcreate2(g, ds, type, space, H5P_DEFAULT, dcpl,
			       H5P_DEFAULT);
		assert_true(d >= 0);
		H5Dclose(d), H5Pclose(dcpl), H5Tclose(type), H5Sclose(space);
		H5Gclose(g), H5Fclose(f);
		snprintf(sp, sizeof(sp), "%s.seal", p);
		assert_int_equal(unlink(sp), 0);
		/* unsealed, as --init-from takes it */
		memset(b->params, 0, sizeof(float) * b->nparams);
		assert_int_equal(ckpt_read_weights(p, b, err, sizeof(err)),
				 -EBADMSG);
		assert_non_null(strstr(err, kind ? "virtual dataset"
						 : "external file"));
		assert_non_null(strstr(err, ds));
		for (size_t i = 0; i < b->nparams; i++)
			assert_true(b->params[i] == 0.0f);
		/* and sealed as it is */
		assert_int_equal(seal_write(p, p, err, sizeof(err)), 0);
		assert_int_equal(ckpt_read(p, b, &got, err, sizeof(err)),
				 -EBADMSG);
		assert_non_null(strstr(err, "refused"));
	}
	model_destroy(a), model_destroy(b);
}

/*
 * The whole-file seal: bytes flipped outside the tensors' data (offsets
 * 1000 and 3000, metadata Fletcher32 does not cover) are refused before
 * libhdf5 parses the file; so are a missing seal, a file others may
 * write, one of another owner, and a seal that is not one; --init-from
 * (ckpt_read_weights) takes a file without a seal, and says so.
 */
/*
 * The seal's hash over several blocks (the last one short), on however
 * many threads, against its definition: XXH3-64 of the blocks' XXH3-64
 * hashes, little-endian.
 */
static void test_seal_blocks(void **state)
{
	const size_t B = SEAL_BLOCK_BYTES, n = 2 * SEAL_BLOCK_BYTES + 12345;
	unsigned char *buf = malloc(n), le[24];
	char p[PATH_MAX + 16];
	uint64_t h, sz, x = 88172645463325252ULL;
	int fd;

	(void)state;
	assert_non_null(buf);
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		buf[i] = (unsigned char)x;
	}
	for (int b = 0; b < 3; b++) {
		uint64_t v = XXH3_64bits(buf + (size_t)b * B,
					 b < 2 ? B : n - 2 * B);

		for (int k = 0; k < 8; k++)
			le[8 * b + k] = (unsigned char)(v >> (8 * k));
	}
	snprintf(p, sizeof(p), "%s/seal-blocks", dir);
	fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, buf, n), (ssize_t)n);
	assert_int_equal(seal_hash_fd(fd, &h, &sz), 0);
	assert_true(h == XXH3_64bits(le, sizeof(le)));
	assert_true(sz == n);
	/* one block less: a different hash, not the plain XXH3 of the bytes */
	assert_int_equal(ftruncate(fd, (off_t)(2 * B)), 0);
	assert_int_equal(seal_hash_fd(fd, &h, &sz), 0);
	assert_true(h == XXH3_64bits(le, 16) && sz == 2 * B);
	assert_true(h != XXH3_64bits(buf, 2 * B));
	close(fd);
	free(buf);
	unlink(p);
}

static void test_ckpt_seal(void **state)
{
	struct model *a = small(64), *b = small(64);
	struct ckpt_state st, got;
	char p[PATH_MAX], sp[PATH_MAX + 8], err[1024], ck[PATH_MAX];
	unsigned char x = 0x5a;

	struct stat sb;
	mode_t old;

	(void)state;
	path_of(ck, "seal");
	fill_state(a, &st, 7);
	/* a umask that lets the group write: published without that bit */
	old = umask(002);
	assert_int_equal(ckpt_write(ck, a, &st, p, sizeof(p), err, sizeof(err)),
			 0);
	umask(old);
	assert_int_equal(stat(p, &sb), 0);
	assert_int_equal(sb.st_mode & (S_IWGRP | S_IWOTH), 0);
	snprintf(sp, sizeof(sp), "%s.seal", p);
	assert_int_equal(access(sp, R_OK), 0);
	assert_int_equal(ckpt_read(p, b, &got, err, sizeof(err)), 0);
	assert_int_equal(got.step, 7);

	/* group-writable, then back */
	assert_int_equal(chmod(p, 0664), 0);
	assert_int_equal(ckpt_read(p, b, &got, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "writable by group or others"));
	assert_int_equal(chmod(p, 0644), 0);
	/* another user's file (root can give it away) */
	if (geteuid() == 0) {
		assert_int_equal(chown(p, 65534, 65534), 0);
		assert_int_equal(ckpt_read(p, b, &got, err, sizeof(err)),
				 -EBADMSG);
		assert_non_null(strstr(err, "owned by uid 65534"));
		assert_int_equal(chown(p, 0, 0), 0);
	}
	/* not a seal */
	{
		char keep[PATH_MAX + 16];
		uint64_t h, n;
		int fd = open(p, O_RDONLY);

		assert_true(fd >= 0);
		assert_int_equal(seal_hash_fd(fd, &h, &n), 0);
		close(fd);
		snprintf(keep, sizeof(keep), "%s.keep", sp);
		assert_int_equal(rename(sp, keep), 0);
		/* another algorithm; the right values spelt otherwise */
		char v[5][128];
		int k[5];

		k[0] = snprintf(v[0], 128, "sigma-seal 1 md5 %016" PRIx64 " %" PRIu64 "\n", h, n);
		k[1] = snprintf(v[1], 128, "sigma-seal 1 xxh3-64-4m %016" PRIX64 " %" PRIu64 "\n", h, n);
		k[2] = snprintf(v[2], 128, "sigma-seal 1 xxh3-64-4m %016" PRIx64 " 0%" PRIu64 "\n", h, n);
		k[3] = snprintf(v[3], 128, "sigma-seal 1 xxh3-64-4m %016" PRIx64 " %" PRIu64 "\n\n", h, n);
		k[4] = snprintf(v[4], 128, "sigma-seal  1 xxh3-64-4m %016" PRIx64 " %" PRIu64 "\n", h, n);
		for (int i = 0; i < 5; i++) {
			assert_int_equal(sigma_file_write_atomic(sp, v[i], (size_t)k[i], 0644), 0);
			assert_int_equal(ckpt_read(p, b, &got, err, sizeof(err)),
					 -EBADMSG);
			assert_non_null(strstr(err, "not a seal of version 1"));
		}
		assert_int_equal(rename(keep, sp), 0);
	}
	assert_int_equal(ckpt_read(p, b, &got, err, sizeof(err)), 0);

	/* two bytes of metadata */
	poke(p, 1000, &x, 1);
	poke(p, 3000, &x, 1);
	assert_int_equal(ckpt_read(p, b, &got, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "does not match its seal"));
	assert_int_equal(ckpt_peek(p, &got, err, sizeof(err)), -EBADMSG);

	/* no seal: refused for a resume, taken by --init-from */
	fill_state(a, &st, 8);
	assert_int_equal(ckpt_write(ck, a, &st, p, sizeof(p), err, sizeof(err)),
			 0);
	snprintf(sp, sizeof(sp), "%s.seal", p);
	assert_int_equal(unlink(sp), 0);
	assert_int_equal(ckpt_read(p, b, &got, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "has no seal"));
	assert_int_equal(ckpt_read_weights(p, b, err, sizeof(err)), 0);
	/* pruning takes the seals with the files */
	assert_int_equal(seal_write(p, p, err, sizeof(err)), 0);
	assert_int_equal(ckpt_prune(ck, 0) >= 0, 1);
	assert_int_equal(access(sp, F_OK), -1);
	model_destroy(a), model_destroy(b);
}

static void test_ckpt_damage_and_fallback(void **state)
{
	struct model *a = small(64), *b = small(64);
	struct ckpt_state st, got;
	char p10[PATH_MAX + 64], p20[PATH_MAX], err[1024], ck[PATH_MAX];

	(void)state;
	path_of(ck, "fb");
	fill_state(a, &st, 10);
	assert_int_equal(ckpt_write(ck, a, &st, p10, sizeof(p10), err,
				    sizeof(err)),
			 0);
	fill_state(a, &st, 20);
	assert_int_equal(ckpt_write(ck, a, &st, p20, sizeof(p20), err,
				    sizeof(err)),
			 0);
	assert_int_equal(ckpt_load_latest(ck, b, &got, p10, sizeof(p10), err,
					  sizeof(err)),
			 0);
	assert_int_equal(got.step, 20);

	/* one flipped bit inside the data of layers.1.w1: Fletcher32 */
	flip_bit(p20, find_bytes(p20, a->P.layer[1].w1 + 1000, 64) + 9);
	assert_int_equal(ckpt_read(p20, b, &got, err, sizeof(err)), -EBADMSG);
	print_message("refused: %s\n", err);
	assert_non_null(strstr(err, p20));
	assert_non_null(strstr(err, "does not match its seal"));
	/* sealed as it is now, Fletcher32 behind the seal refuses it */
	assert_int_equal(seal_write(p20, p20, err, sizeof(err)), 0);
	assert_int_equal(ckpt_read(p20, b, &got, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "cannot read dataset model/layers.1.w1"));
	assert_int_equal(ckpt_load_latest(ck, b, &got, p10, sizeof(p10), err,
					  sizeof(err)),
			 0);
	assert_int_equal(got.step, 10);
	assert_non_null(strstr(p10, "ckpt-00000010.h5"));

	/* a truncated older one too: nothing valid left */
	assert_int_equal(truncate(p10, 4096), 0);
	assert_int_equal(ckpt_load_latest(ck, b, &got, p10, sizeof(p10), err,
					  sizeof(err)),
			 -EBADMSG);
	assert_non_null(strstr(err, "none of 2"));
	/* not HDF5 at all: the seal refuses it, and sealed, libhdf5 does */
	assert_int_equal(sigma_file_write_atomic(p10, "hello", 5, 0644), 0);
	assert_int_equal(ckpt_read(p10, b, &got, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "does not match its seal"));
	assert_int_equal(seal_write(p10, p10, err, sizeof(err)), 0);
	assert_int_equal(ckpt_read(p10, b, &got, err, sizeof(err)), -EBADMSG);
	assert_non_null(strstr(err, "not an HDF5 file"));
	/* an empty directory */
	path_of(ck, "empty");
	assert_int_equal(mkdir(ck, 0755), 0);
	assert_int_equal(ckpt_load_latest(ck, b, &got, p10, sizeof(p10), err,
					  sizeof(err)),
			 -ENOENT);
	/* prune keeps the newest */
	path_of(ck, "prune");
	for (long s = 1; s <= 4; s++) {
		fill_state(a, &st, s);
		assert_int_equal(ckpt_write(ck, a, &st, p10, sizeof(p10), err,
					    sizeof(err)),
				 0);
	}
	assert_int_equal(ckpt_prune(ck, 2), 0);
	snprintf(p10, sizeof(p10), "%s/ckpt-00000002.h5", ck);
	assert_int_equal(access(p10, F_OK), -1);
	snprintf(p10, sizeof(p10), "%s/ckpt-00000003.h5", ck);
	assert_int_equal(access(p10, F_OK), 0);
	model_destroy(a), model_destroy(b);
}

/* the background writer: what was staged is written, not what came after;
 * failures are retried, and one that outlasts the retries is reported */
static void test_ckpt_async(void **state)
{
	struct model *a = small(32), *b = small(32);
	struct ckpt_async *w = NULL;
	struct ckpt_async_stats cs;
	struct ckpt_state st, got;
	char p[PATH_MAX + 32], err[1024], ck[PATH_MAX];
	float *want;

	(void)state;
	path_of(ck, "async");
	assert_int_equal(ckpt_async_create(&w, ck, 0, 3, 1, a, err,
					   sizeof(err)),
			 -EINVAL);
	assert_null(w);
	assert_int_equal(ckpt_async_create(&w, ck, 2, 3, 1, a, err,
					   sizeof(err)),
			 0);
	want = malloc(sizeof(float) * a->nparams);
	assert_non_null(want);
	fill_state(a, &st, 5);
	memcpy(want, a->params, sizeof(float) * a->nparams);
	assert_int_equal(ckpt_async_submit(w, a, &st, err, sizeof(err)), 0);
	/* training goes on while the file is written */
	for (size_t i = 0; i < a->nparams; i++)
		a->params[i] += 1.0f;
	for (long s = 6; s <= 7; s++) {
		st.step = s;
		assert_int_equal(ckpt_async_submit(w, a, &st, err,
						   sizeof(err)),
				 0);
	}
	assert_int_equal(ckpt_async_wait(w, err, sizeof(err)), 0);
	ckpt_async_stats(w, &cs);
	assert_int_equal(cs.submits, 3);
	assert_int_equal(cs.writes, 3);
	assert_int_equal(cs.write_step, 7);
	assert_int_equal(cs.failures, 0);
	assert_true(cs.stall_ms >= 0 && cs.write_ms > 0);
	/* keep 2: step 5 pruned, 6 holds the state after the change */
	snprintf(p, sizeof(p), "%s/ckpt-00000005.h5", ck);
	assert_int_equal(access(p, F_OK), -1);
	snprintf(p, sizeof(p), "%s/ckpt-00000006.h5", ck);
	assert_int_equal(ckpt_read(p, b, &got, err, sizeof(err)), 0);
	assert_int_equal(got.step, 6);
	assert_memory_equal(a->params, b->params,
			    sizeof(float) * 3 * a->nparams);
	assert_memory_not_equal(want, b->params,
				sizeof(float) * a->nparams);

	/* two failed attempts, the third succeeds */
	ckpt_async_inject_failures(w, 2);
	st.step = 8;
	assert_int_equal(ckpt_async_submit(w, a, &st, err, sizeof(err)), 0);
	assert_int_equal(ckpt_async_wait(w, err, sizeof(err)), 0);
	ckpt_async_stats(w, &cs);
	assert_int_equal(cs.failures, 2);
	assert_int_equal(cs.lost, 0);
	assert_int_equal(cs.write_step, 8);
	snprintf(p, sizeof(p), "%s/ckpt-00000008.h5", ck);
	assert_int_equal(ckpt_read(p, b, &got, err, sizeof(err)), 0);

	/* every attempt fails: reported, and again at the next submit */
	ckpt_async_inject_failures(w, 3);
	st.step = 9;
	assert_int_equal(ckpt_async_submit(w, a, &st, err, sizeof(err)), 0);
	assert_int_equal(ckpt_async_wait(w, err, sizeof(err)), -EIO);
	assert_non_null(strstr(err, "step 9"));
	assert_non_null(strstr(err, "injected"));
	ckpt_async_stats(w, &cs);
	assert_int_equal(cs.lost, 1);
	assert_int_equal(cs.write_step, 8);
	snprintf(p, sizeof(p), "%s/ckpt-00000009.h5", ck);
	assert_int_equal(access(p, F_OK), -1);
	st.step = 10;
	assert_int_equal(ckpt_async_submit(w, a, &st, err, sizeof(err)),
			 -EIO);
	ckpt_async_destroy(w);
	free(want);
	model_destroy(a), model_destroy(b);
}

/*
 * Attempts (checkpoint-format.md): names, order, the refusal of an old
 * instance, retention in (attempt, step) order, the header, and what a
 * directory lists (names that are not exactly ours are ignored).
 */
static void test_ckpt_attempts(void **state)
{
	struct model *a = small(64), *b = small(64);
	struct ckpt_state st, got;
	struct ckpt_entry e[8];
	struct ckpt_async *w;
	struct ckpt_async_stats cs;
	char p[PATH_MAX + 64], err[1024], ck[PATH_MAX];
	int att = -1;

	(void)state;
	path_of(ck, "att");
	fill_state(a, &st, 5);
	assert_int_equal(ckpt_write(ck, a, &st, p, sizeof(p), err,
				    sizeof(err)),
			 0);
	assert_non_null(strstr(p, "/ckpt-00000005.h5"));
	/* attempt 1 resumed from an older step: its step 3 is newer */
	fill_state(a, &st, 3);
	st.attempt = 1;
	sigma_strlcpy(st.layout, "ranks=2 dp=2 ep=1 pp=1", sizeof(st.layout));
	assert_int_equal(ckpt_write(ck, a, &st, p, sizeof(p), err,
				    sizeof(err)),
			 0);
	assert_non_null(strstr(p, "/ckpt-00000003-a1.h5"));
	assert_int_equal(ckpt_newest(ck, &att), 3);
	assert_int_equal(att, 1);
	/* names of others, temporaries and near misses are not ours */
	snprintf(p, sizeof(p), "%s/ckpt-00000009-a0.h5", ck);
	assert_int_equal(sigma_file_write_atomic(p, "x", 1, 0644), 0);
	snprintf(p, sizeof(p), "%s/ckpt-00000009-a01.h5", ck);
	assert_int_equal(sigma_file_write_atomic(p, "x", 1, 0644), 0);
	snprintf(p, sizeof(p), "%s/ckpt-0000009.h5", ck);
	assert_int_equal(sigma_file_write_atomic(p, "x", 1, 0644), 0);
	snprintf(p, sizeof(p), "%s/.ckpt-00000009.h5.tmp-1", ck);
	assert_int_equal(sigma_file_write_atomic(p, "x", 1, 0644), 0);
	assert_int_equal(ckpt_list(ck, e, 8), 2);
	assert_int_equal(e[0].attempt, 1);
	assert_int_equal(e[0].step, 3);
	assert_int_equal(e[1].attempt, 0);
	assert_int_equal(e[1].step, 5);
	/* resume takes attempt 1's step 3 over attempt 0's step 5 */
	assert_int_equal(ckpt_load_latest(ck, b, &got, p, sizeof(p), err,
					  sizeof(err)),
			 0);
	assert_int_equal(got.step, 3);
	assert_int_equal(got.attempt, 1);
	assert_string_equal(got.layout, "ranks=2 dp=2 ep=1 pp=1");
	/* the header alone */
	memset(&got, 0, sizeof(got));
	assert_int_equal(ckpt_peek(p, &got, err, sizeof(err)), 0);
	assert_int_equal(got.step, 3);
	assert_int_equal(got.attempt, 1);
	assert_string_equal(got.layout, "ranks=2 dp=2 ep=1 pp=1");
	/* the old instance (attempt 0) goes on and must not publish */
	fill_state(a, &st, 8);
	assert_int_equal(ckpt_write(ck, a, &st, p, sizeof(p), err,
				    sizeof(err)),
			 -ESTALE);
	print_message("refused: %s\n", err);
	assert_non_null(strstr(err, "attempt 1, newer than this instance's attempt 0"));
	snprintf(p, sizeof(p), "%s/ckpt-00000008.h5", ck);
	assert_int_equal(access(p, F_OK), -1);
	/* ... in the background neither, and without retrying */
	assert_int_equal(ckpt_async_create(&w, ck, 3, 3, 1, a, err,
					   sizeof(err)),
			 0);
	assert_int_equal(ckpt_async_submit(w, a, &st, err, sizeof(err)), 0);
	assert_int_equal(ckpt_async_wait(w, err, sizeof(err)), -ESTALE);
	ckpt_async_stats(w, &cs);
	assert_int_equal(cs.failures, 1);
	assert_int_equal(cs.lost, 1);
	ckpt_async_destroy(w);
	assert_int_equal(access(p, F_OK), -1);
	/* a later attempt publishes; retention keeps the newest in order */
	fill_state(a, &st, 4);
	st.attempt = 2;
	assert_int_equal(ckpt_write(ck, a, &st, p, sizeof(p), err,
				    sizeof(err)),
			 0);
	assert_int_equal(ckpt_prune(ck, 2), 0);
	assert_int_equal(ckpt_list(ck, e, 8), 2);
	assert_int_equal(e[0].attempt, 2);
	assert_int_equal(e[1].attempt, 1);
	snprintf(p, sizeof(p), "%s/ckpt-00000005.h5", ck);
	assert_int_equal(access(p, F_OK), -1);
	/* a name and its contents that disagree: refused */
	snprintf(p, sizeof(p), "%s/ckpt-00000003-a1.h5", ck);
	{
		char q[PATH_MAX + 64];

		snprintf(q, sizeof(q), "%s/ckpt-00000003-a7.h5", ck);
		assert_int_equal(rename(p, q), 0);
		assert_int_equal(ckpt_prune(ck, 8), 0);
		/* a7 sorts first but holds attempt 1: the next is used */
		assert_int_equal(ckpt_load_latest(ck, b, &got, p, sizeof(p),
						  err, sizeof(err)),
				 0);
		assert_int_equal(got.attempt, 2);
		assert_int_equal(got.step, 4);
	}
	assert_int_equal(ckpt_path(p, sizeof(p), ck, 1, -1), -EINVAL);
	assert_int_equal(ckpt_path(p, sizeof(p), ck, 100000000L, 0), -EINVAL);
	model_destroy(a), model_destroy(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ckpt_round_trip),
		cmocka_unit_test(test_ckpt_damage_and_fallback),
		cmocka_unit_test(test_ckpt_hostile_attribute),
		cmocka_unit_test(test_init_untrusted),
		cmocka_unit_test(test_ckpt_storage_elsewhere),
		cmocka_unit_test(test_seal_blocks),
		cmocka_unit_test(test_ckpt_seal),
		cmocka_unit_test(test_ckpt_async),
		cmocka_unit_test(test_ckpt_attempts),
	};

	sigma_log_init("test", SIGMA_LOG_ERROR);
	return cmocka_run_group_tests(tests, setup, teardown);
}
