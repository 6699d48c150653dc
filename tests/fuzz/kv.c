/*
 * kv.c - the key=value parser (lib/kv.c): sigma_kv_parse_buf over the
 * whole input as a sigma.conf-style buffer, and sigma_kv_parse_word over
 * the input up to its first NUL as one plugstack.conf word.
 *
 * FUZZ_SOURCES: lib/kv.c lib/str.c lib/log.c lib/file.c
 *
 * Invariants, against a model of the documented grammar (sigma.h):
 * - a buffer parses (0) exactly when every line is blank, a '#' comment or
 *   a valid key=value, with no NUL byte and no line over 4096 bytes;
 * - the callback sees exactly the model's pairs, in order: key of 1..64
 *   bytes of [A-Za-z0-9_.-], value of at most 1024 bytes without control
 *   bytes, blanks around both trimmed (a word keeps the value's trailing
 *   blanks: only the line parser trims those);
 * - an error stops at the first bad line and says "NAME:LINE: " first,
 *   and a callback's error comes back as its own code;
 * - err is always terminated, even when it is short.
 */
#include "fuzz.h"

#include <ctype.h>

#define NAME "fuzz.conf"

struct expect {
	const char *key, *value; /* into the input */
	size_t klen, vlen;
};

struct model {
	struct expect *e;
	size_t n, seen;
	bool failed;	   /* the input is malformed */
	size_t fail_line;  /* the line that is (buffer mode) */
	size_t reject_at;  /* the callback refuses this pair (1-based) */
};

/* the model of kv_dispatch: true and the pair when text is key=value */
static bool model_pair(const char *text, size_t len, struct expect *out)
{
	const char *eq = memchr(text, '=', len);
	size_t klen, vlen;
	const char *v;

	if (!eq)
		return false;
	klen = (size_t)(eq - text);
	while (klen && isspace((unsigned char)text[klen - 1]))
		klen--;
	v = eq + 1;
	vlen = len - (size_t)(v - text);
	while (vlen && isspace((unsigned char)*v)) {
		v++;
		vlen--;
	}
	if (klen < 1 || klen > SIGMA_KV_MAX_KEY || vlen > SIGMA_KV_MAX_VALUE)
		return false;
	for (size_t i = 0; i < klen; i++) {
		unsigned char c = (unsigned char)text[i];

		if (!isalnum(c) && c != '_' && c != '-' && c != '.')
			return false;
	}
	for (size_t i = 0; i < vlen; i++)
		if (iscntrl((unsigned char)v[i]))
			return false;
	*out = (struct expect){text, v, klen, vlen};
	return true;
}

static void model_buf(const char *buf, size_t len, struct model *m)
{
	size_t pos = 0, line_no = 0;

	while (pos < len) {
		const char *line = buf + pos, *nl;
		size_t llen;

		nl = memchr(line, '\n', len - pos);
		llen = nl ? (size_t)(nl - line) : len - pos;
		pos += llen + 1;
		line_no++;
		if (memchr(line, '\0', llen) || llen > SIGMA_KV_MAX_LINE)
			goto bad;
		while (llen && isspace((unsigned char)line[0]))
			line++, llen--;
		while (llen && isspace((unsigned char)line[llen - 1]))
			llen--;
		if (!llen || line[0] == '#')
			continue;
		if (!model_pair(line, llen, &m->e[m->n]))
			goto bad;
		m->n++;
	}
	return;
bad:
	m->failed = true;
	m->fail_line = line_no;
}

static int check_pair(const char *key, const char *value, void *arg,
		      char *err, size_t errlen)
{
	struct model *m = arg;
	const struct expect *e;
	size_t klen = strlen(key), vlen = strlen(value);

	CHECK(m->seen < m->n);
	e = &m->e[m->seen++];
	CHECK(klen == e->klen && !memcmp(key, e->key, klen));
	CHECK(vlen == e->vlen && !memcmp(value, e->value, vlen));
	/* the documented shape, whatever the model says */
	CHECK(klen >= 1 && klen <= SIGMA_KV_MAX_KEY);
	CHECK(vlen <= SIGMA_KV_MAX_VALUE);
	CHECK(!isspace((unsigned char)value[0]));
	for (size_t i = 0; i < klen; i++)
		CHECK(isalnum((unsigned char)key[i]) || strchr("_-.", key[i]));
	for (size_t i = 0; i < vlen; i++)
		CHECK(!iscntrl((unsigned char)value[i]));
	if (m->seen == m->reject_at)
		return sigma_set_err(err, errlen, EDOM, "refused %s", key);
	return 0;
}

/* "NAME:LINE: " at the start of err */
static bool err_names_line(const char *err, size_t line)
{
	char want[64];

	snprintf(want, sizeof(want), NAME ":%zu: ", line);
	return !strncmp(err, want, strlen(want));
}

static void fuzz_buf(const char *buf, size_t len)
{
	struct model m = {0};
	char err[512];
	int rc;

	m.e = calloc(len / 2 + 1, sizeof(*m.e));
	if (!m.e)
		abort();
	model_buf(buf, len, &m);
	memset(err, 0x55, sizeof(err));
	rc = sigma_kv_parse_buf(buf, len, NAME, check_pair, &m, err,
				sizeof(err));
	CHECK(rc == 0 || rc == -EINVAL || rc == -ENAMETOOLONG);
	CHECK((rc == 0) == !m.failed);
	CHECK(m.seen == m.n); /* every good pair before the bad line */
	if (rc) {
		CHECK_ERR(err, sizeof(err));
		CHECK(err_names_line(err, m.fail_line));
	}

	/* a callback that refuses its second pair stops the parse there */
	if (!m.failed && m.n >= 2) {
		m.seen = 0;
		m.reject_at = 2;
		rc = sigma_kv_parse_buf(buf, len, NAME, check_pair, &m, err,
					sizeof(err));
		CHECK(rc == -EDOM);
		CHECK(m.seen == 2);
		CHECK_ERR(err, sizeof(err));
		CHECK(!strncmp(err, NAME ":", strlen(NAME ":")));
		CHECK(strstr(err, "refused ") != NULL);
	}
	free(m.e);
}

static void fuzz_word(const char *word)
{
	struct model m = {0};
	struct expect e;
	size_t len = strlen(word);
	bool ok = len <= SIGMA_KV_MAX_KEY + 1 + SIGMA_KV_MAX_VALUE &&
		  model_pair(word, len, &e);
	char err[40]; /* short: messages are cut, never left open */
	int rc;

	m.e = &e;
	m.n = ok ? 1 : 0;
	memset(err, 0x55, sizeof(err));
	rc = sigma_kv_parse_word(word, check_pair, &m, err, sizeof(err));
	CHECK((rc == 0) == ok);
	CHECK(m.seen == m.n);
	if (rc)
		CHECK_ERR(err, sizeof(err));
	/* argv of the same word twice: two calls, or the same error */
	{
		char *argv[2] = {(char *)word, (char *)word};
		struct expect two[2] = {e, e};

		m = (struct model){.e = two, .n = ok ? 2 : 0};
		rc = sigma_kv_parse_argv(2, argv, check_pair, &m, err,
					 sizeof(err));
		CHECK((rc == 0) == ok);
		CHECK(m.seen == m.n);
	}
}

FUZZ_INITIALIZE_QUIET

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *copy = malloc(size + 1);

	if (!copy)
		abort();
	memcpy(copy, data, size);
	copy[size] = '\0';
	/* exactly size bytes: ASan sees a read past the end of the buffer */
	fuzz_buf((const char *)data, size);
	fuzz_word(copy);
	free(copy);
	return 0;
}
