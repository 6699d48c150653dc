/*
 * spank_conf.c - the plugstack.conf arguments of sigma.so
 * (spank/plugstack.c sigma_spank_conf_parse). The input is split at '\n'
 * into up to 16 argument words.
 *
 * FUZZ_SOURCES: spank/plugstack.c lib/contract.c lib/kv.c lib/str.c lib/log.c lib/file.c
 *
 * Invariants, whatever the words:
 * - every string of the settings is terminated inside its array (on
 *   success and on failure: the plugin keeps running with them);
 * - on success: probe is an absolute path, ckpt_root and config are empty
 *   or absolute; probe_timeout and ckpt_timeout in 1..3600; default_probe
 *   off|quick|full; epilog_probe off|quick|full|job; drain a real bool;
 * - on failure: a terminated, non-empty message, and -EINVAL or
 *   -ENAMETOOLONG;
 * - the parse is a pure function: the same words give the same result and
 *   the same settings, byte for byte;
 * - words that parse still parse, to the same settings, when given twice.
 */
#include "fuzz.h"

#include "sigma_spank.h"

#define MAX_WORDS 16

static void check_conf(const struct sigma_spank_conf *c, bool ok)
{
	unsigned char drain;

	CHECK_TERMINATED(c->probe);
	CHECK_TERMINATED(c->ckpt_root);
	CHECK_TERMINATED(c->config);
	if (!ok)
		return;
	CHECK(c->probe[0] == '/');
	CHECK(c->ckpt_root[0] == '\0' || c->ckpt_root[0] == '/');
	CHECK(c->config[0] == '\0' || c->config[0] == '/');
	CHECK(c->probe_timeout >= 1 &&
	      c->probe_timeout <= SIGMA_PROBE_TIMEOUT_MAX);
	CHECK(c->ckpt_timeout >= 1 && c->ckpt_timeout <= SIGMA_PROBE_TIMEOUT_MAX);
	CHECK(c->default_probe >= SIGMA_PROBE_OFF &&
	      c->default_probe <= SIGMA_PROBE_FULL);
	CHECK(c->epilog_probe >= SIGMA_PROBE_OFF &&
	      c->epilog_probe <= SIGMA_PROBE_JOB);
	memcpy(&drain, &c->drain, 1);
	CHECK(drain == 0 || drain == 1);
}

static struct sigma_spank_conf a, b;

FUZZ_INITIALIZE_QUIET

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf, *words[MAX_WORDS], *twice[2 * MAX_WORDS];
	char err[256], err2[256];
	int n, rc, rc2;

	n = fuzz_fields(data, size, &buf, words, MAX_WORDS);
	if (size == 0)
		n = 0; /* no arguments at all: the defaults */

	memset(&a, 0xa5, sizeof(a)); /* stale bytes must not show through */
	memset(err, 0x55, sizeof(err));
	rc = sigma_spank_conf_parse(&a, n, words, err, sizeof(err));
	CHECK(rc == 0 || rc == -EINVAL || rc == -ENAMETOOLONG);
	check_conf(&a, rc == 0);
	if (rc)
		CHECK_ERR(err, sizeof(err));

	memset(&b, 0x5a, sizeof(b));
	rc2 = sigma_spank_conf_parse(&b, n, words, err2, sizeof(err2));
	CHECK(rc2 == rc);
	CHECK(!memcmp(&a, &b, sizeof(a)));
	if (rc)
		CHECK(!strcmp(err, err2));

	if (rc == 0) {
		for (int i = 0; i < n; i++)
			twice[i] = twice[n + i] = words[i];
		rc2 = sigma_spank_conf_parse(&b, 2 * n, twice, err2,
					     sizeof(err2));
		CHECK(rc2 == 0);
		CHECK(!memcmp(&a, &b, sizeof(a)));
	}
	free(buf);
	return 0;
}
