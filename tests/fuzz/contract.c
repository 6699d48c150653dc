/*
 * contract.c - what sigma's parts say to each other through Slurm
 * (lib/contract.c): the job block in the AdminComment (sigma_block_parse,
 * sigma_block_format) and node reasons (sigma_reason_parse,
 * sigma_reason_format).
 *
 * FUZZ_SOURCES: lib/contract.c lib/kv.c lib/str.c lib/log.c lib/file.c
 *
 * The whole input, as a string, is an AdminComment and a node reason. Its
 * first 34 bytes are also a block to format (level, then three 64-bit
 * numbers, each folded near its limits half of the time), and what
 * follows its first '\n' a reason's WHAT.
 *
 * Invariants:
 * - a comment parses as a block only when it starts with "sigma[" (else
 *   -ENOENT), and then to values within the contract's limits, with *end
 *   just past a ']';
 * - a block that parses, formatted again, fits SIGMA_BLOCK_MAX and parses
 *   back equal, also with the rest of the comment after it; the
 *   formatted form is canonical (formatting that again gives the same
 *   text);
 * - any block within the limits formats (never past SIGMA_BLOCK_MAX) and
 *   parses back equal; one outside them is -ERANGE; a buffer too short is
 *   -ENAMETOOLONG, terminated;
 * - a reason is NONE exactly when it does not start with "sigma: ",
 *   ADMIN exactly when it starts with "sigma: admin: "; a probe's reason
 *   has a level quick or full and a WHAT inside the reason; formatted
 *   again from its kind, level and WHAT it parses back the same;
 * - a reason formatted from any WHAT parses as the failure or warning it
 *   was made as, at its level, with that WHAT (blanks at its start aside),
 *   and when cut to fit, with the start of it.
 */
#include "fuzz.h"

#include "contract.h"

/*
 * The limits as docs/plugin.md gives them to users, written out here rather
 * than taken from contract.h, so that a wrong constant or a wrong check in
 * the code is caught: probe off|quick|full, spares and job spares 0 to
 * 1024, restarts 0 to 10000, checkpoint interval 1 to 10^8, on-warning
 * one of three, restart requeue or in-job, and job spares only in-job.
 */
static bool block_in_limits(const struct sigma_block *b)
{
	static const int probes[] = {SIGMA_LEVEL_OFF, SIGMA_LEVEL_QUICK,
				     SIGMA_LEVEL_FULL};
	static const int warnings[] = {SIGMA_WARN_CHECKPOINT,
				       SIGMA_WARN_DRAIN_AFTER,
				       SIGMA_WARN_IGNORE};
	bool probe = false, warning = false;

	for (size_t i = 0; i < 3; i++) {
		probe |= b->probe == probes[i];
		warning |= b->on_warning == warnings[i];
	}
	if (!probe || !warning)
		return false;
	if (b->spares < 0 || b->spares > 1024 || b->job_spares < 0 ||
	    b->job_spares > 1024)
		return false;
	if (b->max_restarts < 0 || b->max_restarts > 10000)
		return false;
	if (b->ckpt_every < 1 || b->ckpt_every > 100000000)
		return false;
	if (b->restart == SIGMA_RESTART_IN_JOB)
		return true;
	return b->restart == SIGMA_RESTART_REQUEUE && b->job_spares == 0;
}

/* blocks are zeroed first, so that any field the contract adds, and the
 * padding, compare too */
static void blank(struct sigma_block *b)
{
	memset(b, 0, sizeof(*b));
}

static bool same_block(const struct sigma_block *a, const struct sigma_block *b)
{
	return a->probe == b->probe && a->spares == b->spares &&
	       a->max_restarts == b->max_restarts &&
	       a->ckpt_every == b->ckpt_every && !memcmp(a, b, sizeof(*a));
}

/* format b, check the text, parse it back */
static void block_round_trip(const struct sigma_block *b, const char *tail)
{
	char buf[SIGMA_BLOCK_MAX], again[SIGMA_BLOCK_MAX], *joined;
	struct sigma_block back;
	size_t end = 0, len, tlen = strlen(tail);
	int rc;

	blank(&back);
	rc = sigma_block_format(b, buf, sizeof(buf));
	if (!block_in_limits(b)) {
		CHECK(rc == -ERANGE);
		return;
	}
	CHECK(rc == 0);
	len = strlen(buf);
	CHECK(!strncmp(buf, SIGMA_BLOCK_PREFIX, strlen(SIGMA_BLOCK_PREFIX)));
	CHECK(buf[len - 1] == ']');
	CHECK(sigma_block_parse(buf, &back, &end) == 0);
	CHECK(end == len && same_block(b, &back));
	CHECK(sigma_block_format(&back, again, sizeof(again)) == 0);
	CHECK(!strcmp(buf, again));

	/* one byte short: refused, terminated, never a block cut open */
	memset(again, 0x55, sizeof(again));
	CHECK(sigma_block_format(b, again, len) == -ENAMETOOLONG);
	CHECK(memchr(again, '\0', len));

	/* the controller reads the block first in a longer AdminComment */
	joined = malloc(len + tlen + 1);
	if (!joined)
		abort();
	memcpy(joined, buf, len);
	memcpy(joined + len, tail, tlen + 1);
	blank(&back);
	CHECK(sigma_block_parse(joined, &back, &end) == 0);
	CHECK(end == len && same_block(b, &back));
	free(joined);
}

static void fuzz_block_parse(const char *s)
{
	struct sigma_block b;
	size_t end = (size_t)-1;
	int rc;
	bool prefixed = !strncmp(s, SIGMA_BLOCK_PREFIX,
				 strlen(SIGMA_BLOCK_PREFIX));

	blank(&b);
	rc = sigma_block_parse(s, &b, &end);
	CHECK(rc == 0 || rc == -ENOENT || rc == -EINVAL);
	CHECK((rc == -ENOENT) == !prefixed);
	if (rc)
		return;
	CHECK(block_in_limits(&b));
	CHECK(end > strlen(SIGMA_BLOCK_PREFIX) && end <= strlen(s));
	CHECK(s[end - 1] == ']');
	CHECK(!memchr(s + strlen(SIGMA_BLOCK_PREFIX), ']',
		      end - 1 - strlen(SIGMA_BLOCK_PREFIX)));
	block_round_trip(&b, s + end);
}

static int64_t get64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return (int64_t)v;
}

/* raw, or folded into [-2, max + 2] when the top bit says so */
static long fold(int64_t raw, long max)
{
	if (raw >= 0)
		return (long)raw;
	return (long)((uint64_t)raw % (uint64_t)(max + 5)) - 2;
}

static void fuzz_block_format(const uint8_t *data, size_t size)
{
	uint8_t raw[34] = {0};
	struct sigma_block b;

	memcpy(raw, data, size < sizeof(raw) ? size : sizeof(raw));
	blank(&b);
	sigma_block_init(&b); /* fields this harness does not know: defaults */
	b.probe = (int)(int8_t)raw[0] % 5;
	b.spares = fold(get64(raw + 1), SIGMA_SPARES_MAX);
	b.max_restarts = fold(get64(raw + 9), SIGMA_RESTARTS_MAX);
	b.ckpt_every = fold(get64(raw + 17), SIGMA_CKPT_EVERY_MAX);
	b.restart = (int)(int8_t)raw[25] % 3;
	b.job_spares = fold(get64(raw + 26), SIGMA_SPARES_MAX);
	block_round_trip(&b, " ticket 42");
}

/* ---- reasons -------------------------------------------------------------- */

static const char *skip_blanks(const char *s)
{
	while (*s == ' ')
		s++;
	return s;
}

static void fuzz_reason_parse(const char *s)
{
	size_t len = strlen(s);
	const char *what = (const char *)1;
	int level = -7, kind, level2 = -7;
	char *buf;
	const char *what2;

	kind = sigma_reason_parse(s, &level, &what);
	CHECK(kind >= SIGMA_REASON_NONE && kind <= SIGMA_REASON_SIGMA);
	CHECK((kind == SIGMA_REASON_NONE) ==
	      !!strncmp(s, SIGMA_REASON_PREFIX, strlen(SIGMA_REASON_PREFIX)));
	CHECK((kind == SIGMA_REASON_ADMIN) ==
	      !strncmp(s, SIGMA_REASON_ADMIN_PREFIX,
		       strlen(SIGMA_REASON_ADMIN_PREFIX)));
	CHECK((int)sigma_reason_parse(s, NULL, NULL) == kind);
	if (kind == SIGMA_REASON_NONE) {
		CHECK(what == NULL);
		return;
	}
	CHECK(what >= s && what <= s + len);
	if (kind == SIGMA_REASON_ADMIN)
		CHECK(what == s + strlen(SIGMA_REASON_ADMIN_PREFIX));
	if (kind == SIGMA_REASON_SIGMA)
		CHECK(what == s + strlen(SIGMA_REASON_PREFIX));
	if (kind != SIGMA_REASON_FAILURE && kind != SIGMA_REASON_WARNING)
		return;
	CHECK(level == SIGMA_LEVEL_QUICK || level == SIGMA_LEVEL_FULL);
	CHECK(!strncmp(s, kind == SIGMA_REASON_WARNING
			      ? SIGMA_REASON_PREFIX "warning: probe "
			      : SIGMA_REASON_PREFIX "probe ",
		       strlen(kind == SIGMA_REASON_WARNING
				  ? SIGMA_REASON_PREFIX "warning: probe "
				  : SIGMA_REASON_PREFIX "probe ")));
	CHECK(*what != ' ');

	buf = malloc(len + 64);
	if (!buf)
		abort();
	CHECK(sigma_reason_format(buf, len + 64, kind == SIGMA_REASON_WARNING,
				  level, what) == 0);
	CHECK((int)sigma_reason_parse(buf, &level2, &what2) == kind);
	CHECK(level2 == level && !strcmp(what2, what));
	free(buf);
}

static void fuzz_reason_format(const uint8_t *data, size_t size,
			       const char *what)
{
	char buf[4096 + 64], cut[48];
	bool warning = size > 0 && (data[0] & 1);
	int level = size > 1 ? (int8_t)data[1] % 4 : SIGMA_LEVEL_QUICK;
	int rc, level2 = -7;
	const char *what2 = NULL, *w = skip_blanks(what);
	int want = warning ? SIGMA_REASON_WARNING : SIGMA_REASON_FAILURE;

	if (strlen(what) > 4096)
		return;
	rc = sigma_reason_format(buf, sizeof(buf), warning, level, what);
	if (level != SIGMA_LEVEL_QUICK && level != SIGMA_LEVEL_FULL) {
		CHECK(rc == -EINVAL);
		return;
	}
	CHECK(rc == 0);
	CHECK((int)sigma_reason_parse(buf, &level2, &what2) == want);
	CHECK(level2 == level && what2 && !strcmp(what2, w));

	/* cut to fit: still the same kind and level, the start of WHAT */
	memset(cut, 0x55, sizeof(cut));
	rc = sigma_reason_format(cut, sizeof(cut), warning, level, what);
	CHECK(memchr(cut, '\0', sizeof(cut)));
	CHECK(rc == 0 || rc == -ENAMETOOLONG);
	CHECK((rc == 0) == (strlen(buf) < sizeof(cut)));
	level2 = -7;
	CHECK((int)sigma_reason_parse(cut, &level2, &what2) == want);
	CHECK(level2 == level);
	CHECK(!strncmp(w, what2, strlen(what2)));
}

FUZZ_INITIALIZE_QUIET

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	const char *nl;

	if (!s)
		abort();
	memcpy(s, data, size);
	s[size] = '\0';
	fuzz_block_parse(s);
	fuzz_block_format(data, size);
	fuzz_reason_parse(s);
	nl = strchr(s, '\n');
	fuzz_reason_format(data, size, nl ? nl + 1 : s);
	for (int i = -3; i < 6; i++)
		CHECK(sigma_level_name(i)[0]);
	free(s);
	return 0;
}
