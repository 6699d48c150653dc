/*
 * ckpt_seal.c - the gate in front of libhdf5 (lib/seal.c seal_open):
 * the input is a seal line and the bytes of a checkpoint, split at the
 * first newline (inclusive), written as NAME.h5.seal and NAME.h5.
 *
 * FUZZ_SOURCES: lib/seal.c lib/str.c lib/log.c lib/file.c
 * FUZZ_LIBS: -lxxhash
 *
 * To get past the hash, bit 0 of the first byte (a flags byte, not
 * written) puts the right hash of the file's bytes into the seal line in
 * place of its fourth field, bit 1 the right size in place of its fifth,
 * so the parser is fuzzed with lines that would match; bit 3 spells that
 * hash in capitals and bit 4 the size with a leading zero (the same
 * values, spellings the format does not allow); bit 2 writes no seal.
 *
 * Invariants:
 * - seal_open accepts exactly when an independent reader of the format
 *   (docs/checkpoint-format.md: "sigma-seal 1 xxh3-64-4m HEX16 SIZE\n", one
 *   line, nothing after it) parses the seal and its hash and size are the
 *   file's (XXH3_64bits of the little-endian XXH3_64bits of each 4 MiB
 *   block, computed here); anything else is
 *   -EBADMSG with a message, and leaves no descriptor open;
 * - an accepted file's descriptor reads the very bytes written, and a
 *   missing seal is refused unless the caller allows it (SEAL_IF_PRESENT).
 */
#include "fuzz.h"

#include <inttypes.h>

#include <xxhash.h>

#include "seal.h"

static char h5[512], sealp[600];

FUZZ_INITIALIZE_QUIET

/* the independent reader: true when line is a seal of hash and size */
static bool seal_ok(const char *line, size_t n, uint64_t hash, uint64_t size)
{
	char want[80];
	int k = snprintf(want, sizeof(want), "sigma-seal 1 xxh3-64-4m %016" PRIx64
			 " %" PRIu64 "\n", hash, size);

	/* one spelling of each value: the line must be exactly this one */
	return n == (size_t)k && !memcmp(line, want, n);
}

/* the seal's hash, written out from its definition */
static uint64_t blocks_hash(const uint8_t *b, size_t n)
{
	const size_t B = (size_t)4 << 20;
	size_t nb = (n + B - 1) / B;
	uint8_t *le = malloc(nb ? 8 * nb : 1);
	uint64_t h;

	CHECK(le != NULL);
	for (size_t i = 0; i < nb; i++) {
		size_t len = n - i * B < B ? n - i * B : B;

		h = XXH3_64bits(b + i * B, len);
		for (int k = 0; k < 8; k++)
			le[8 * i + k] = (uint8_t)(h >> (8 * k));
	}
	h = XXH3_64bits(le, 8 * nb);
	free(le);
	return h;
}

/* fields 4 and 5 of line (space-separated) replaced as the flags ask */
static size_t repair(const uint8_t *in, size_t n, uint8_t flags,
		     uint64_t hash, uint64_t size, char *out, size_t max)
{
	size_t o = 0, field = 1;

	for (size_t i = 0; i < n && o + 24 < max; i++) {
		bool start = i == 0 || in[i - 1] == ' ';
		char v[24] = "";

		if (start && field == 4 && (flags & 1))
			snprintf(v, sizeof(v), flags & 8 ? "%016" PRIX64 : "%016" PRIx64,
				 hash);
		else if (start && field == 5 && (flags & 2))
			snprintf(v, sizeof(v), flags & 16 ? "0%" PRIu64 : "%" PRIu64,
				 size);
		if (v[0]) { /* the field replaced: skip the input's */
			o += (size_t)snprintf(out + o, max - o, "%s", v);
			while (i < n && in[i] != ' ' && in[i] != '\n')
				i++;
			if (i >= n)
				break;
		}
		out[o++] = (char)in[i];
		if (in[i] == ' ')
			field++;
	}
	return o;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nl, *body;
	char line[4 * SEAL_LINE_MAX], err[1024], back[64];
	struct seal_file sf;
	size_t ln, blen, o;
	uint64_t hash;
	uint8_t flags;
	int rc;

	if (size < 1)
		return 0;
	flags = data[0];
	data++, size--;
	if (!h5[0]) {
		snprintf(h5, sizeof(h5), "%s/ckpt-00000001.h5", fuzz_scratch());
		snprintf(sealp, sizeof(sealp), "%s%s", h5, SEAL_SUFFIX);
	}
	nl = memchr(data, '\n', size);
	ln = nl ? (size_t)(nl - data) + 1 : size;
	body = data + ln;
	blen = size - ln;
	hash = blocks_hash(body, blen);
	o = repair(data, ln, flags, hash, blen, line, sizeof(line));
	fuzz_write_file(h5, body, blen);
	unlink(sealp);
	if (!(flags & 4))
		fuzz_write_file(sealp, line, o);
	chmod(h5, 0644);
	chmod(sealp, 0644);

	rc = seal_open(h5, SEAL_REQUIRED, &sf, err, sizeof(err));
	if (flags & 4) {
		CHECK(rc == -EBADMSG);
	} else if (seal_ok(line, o, hash, blen)) {
		CHECK(rc == 0);
	} else {
		CHECK(rc == -EBADMSG);
	}
	if (rc == 0) {
		size_t k = blen < sizeof(back) ? blen : sizeof(back);

		CHECK(sf.fd >= 0 && sf.sealed && sf.size == blen && sf.hash == hash);
		CHECK(pread(sf.fd, back, k, 0) == (ssize_t)k);
		CHECK(memcmp(back, body, k) == 0);
		CHECK(!strncmp(sf.h5path, "/proc/self/fd/", 14));
		seal_close(&sf);
		CHECK(sf.fd == -1);
	} else {
		CHECK_ERR(err, sizeof(err));
	}
	/* without a seal: allowed only when the caller says so */
	if (flags & 4) {
		rc = seal_open(h5, SEAL_IF_PRESENT, &sf, err, sizeof(err));
		CHECK(rc == 0 && !sf.sealed);
		seal_close(&sf);
	}
	return 0;
}
