/*
 * ckpt_storage.c - where a checkpoint tensor's bytes may come from: the
 * one dataset opener (lib/ckpt_h5.c ckpt_h5_dataset_open) on a file
 * whose tensor the input stores elsewhere. The first byte picks the
 * storage: in the file; in an external raw file (H5Pset_external); as a
 * virtual dataset outside a shard index; as one inside a verified shard
 * index (the index's directory set). The rest is the file name the storage
 * names: plain, relative, absolute, "..", "${ORIGIN}", the file's own, or
 * a private file of the reader's next to it.
 *
 * FUZZ_SOURCES: lib/ckpt_h5.c lib/seal.c lib/str.c lib/log.c lib/file.c
 * FUZZ_PKG: hdf5
 * FUZZ_LIBS: -lxxhash
 *
 * Invariants:
 * - a tensor stored in the file opens;
 * - external storage is refused, whatever it names;
 * - a virtual dataset is refused outside a shard index, and inside one
 *   unless each source is a plain file name next to the index (no '/', no
 *   leading '.', no '$') or "." (the index itself);
 * - a refusal says so, naming the tensor; nothing is read before it.
 */
#include "fuzz.h"

#include <hdf5.h>

#include "ckpt_h5.h"

static char dir[512], path[600], secret[600];

const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "detect_leaks=0"; /* libhdf5's own, on its error paths */
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	float ones[16];
	FILE *f;

	(void)argc;
	(void)argv;
	fuzz_quiet();
	ckpt_h5_quiet();
	H5dont_atexit();
	snprintf(dir, sizeof(dir), "%s", fuzz_scratch());
	snprintf(path, sizeof(path), "%s/ckpt-00000001.h5", dir);
	snprintf(secret, sizeof(secret), "%s/secret", dir);
	for (int i = 0; i < 16; i++)
		ones[i] = 1.0f;
	f = fopen(secret, "w");
	if (f) {
		fwrite(ones, sizeof(ones), 1, f);
		fclose(f);
		chmod(secret, 0600);
	}
	return 0;
}

/* a plain file name next to the index, or "." (the index itself), as
 * the opener must require */
static bool plain_name(const char *n)
{
	return !strcmp(n, ".") ||
	       (n[0] && !strchr(n, '/') && n[0] != '.' && !strchr(n, '$'));
}

/* the file: dataset "x", 16 floats, stored as kind says, naming name */
static bool build(int kind, const char *name)
{
	hsize_t n = 16;
	hid_t f, sp, dcpl, d = -1;
	float zero[16] = {0};
	bool ok = false;

	f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
	if (f < 0)
		return false;
	sp = H5Screate_simple(1, &n, NULL);
	dcpl = H5Pcreate(H5P_DATASET_CREATE);
	if (sp < 0 || dcpl < 0)
		goto out;
	if (kind == 1 &&
	    H5Pset_external(dcpl, name, 0, (hsize_t)sizeof(zero)) < 0)
		goto out;
	if (kind >= 2) {
		hid_t src = H5Scopy(sp);

		if (src < 0 || H5Pset_virtual(dcpl, sp, name, "/x", src) < 0) {
			if (src >= 0)
				H5Sclose(src);
			goto out;
		}
		H5Sclose(src);
	}
	d = H5Dcreate2(f, "x", H5T_IEEE_F32LE, sp, H5P_DEFAULT, dcpl,
		       H5P_DEFAULT);
	if (d < 0)
		goto out;
	if (kind == 0 && H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL,
				  H5P_DEFAULT, zero) < 0)
		goto out;
	ok = true;
out:
	if (d >= 0)
		H5Dclose(d);
	if (dcpl >= 0)
		H5Pclose(dcpl);
	if (sp >= 0)
		H5Sclose(sp);
	H5Fclose(f);
	return ok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char name[256], err[1024] = "";
	struct ckpt_ctx c = {path, err, sizeof(err)};
	int64_t d = -1;
	hid_t f;
	int kind, rc;
	size_t n;

	if (size < 1)
		return 0;
	kind = data[0] % 4;
	n = size - 1 < sizeof(name) - 1 ? size - 1 : sizeof(name) - 1;
	memcpy(name, data + 1, n);
	name[n] = '\0';
	/* a few names worth more than their bytes */
	if (n == 1 && name[0] == 'S')
		snprintf(name, sizeof(name), "%s", secret);
	else if (n == 1 && name[0] == 's')
		snprintf(name, sizeof(name), "secret");
	if (kind && !name[0])
		return 0;
	if (!build(kind, name))
		return 0;
	f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
	if (f < 0)
		return 0;
	ckpt_h5_virtual_dir(kind == 3 ? dir : NULL);
	rc = ckpt_h5_dataset_open(&c, f, "x", "model/x", &d);
	switch (kind) {
	case 0:
		CHECK(rc == 0);
		break;
	case 1:
	case 2:
		CHECK(rc != 0);
		break;
	default:
		CHECK(rc != 0 || plain_name(name));
	}
	if (rc) {
		CHECK(d < 0);
		CHECK_ERR(err, sizeof(err));
		CHECK(strstr(err, "model/x") != NULL);
	} else {
		ckpt_h5_close(d);
	}
	ckpt_h5_virtual_dir(NULL);
	H5Fclose(f);
	return 0;
}
