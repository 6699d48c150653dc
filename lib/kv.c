/*
 * kv.c - the one key=value parser: plugstack.conf arguments (one word each)
 * and sigma.conf (one pair per line). It knows nothing of the keys; the
 * caller's callback validates each and fails closed.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sigma.h"

/* Split "key=value" (already trimmed of outer blanks) and call fn. */
static int kv_dispatch(const char *text, size_t len, const char *where,
		       sigma_kv_fn fn, void *arg, char *err, size_t errlen)
{
	char key[SIGMA_KV_MAX_KEY + 1], value[SIGMA_KV_MAX_VALUE + 1];
	char why[512];
	const char *eq = memchr(text, '=', len);
	size_t klen, vlen;
	int rc;

	if (!eq)
		return sigma_set_err(err, errlen, EINVAL,
				     "%s'%.*s' is not key=value", where,
				     (int)(len > 80 ? 80 : len), text);
	klen = (size_t)(eq - text);
	while (klen && isspace((unsigned char)text[klen - 1]))
		klen--;
	eq++;
	vlen = len - (size_t)(eq - text);
	while (vlen && isspace((unsigned char)*eq)) {
		eq++;
		vlen--;
	}
	if (klen == 0)
		return sigma_set_err(err, errlen, EINVAL, "%sempty key", where);
	if (klen > SIGMA_KV_MAX_KEY)
		return sigma_set_err(err, errlen, ENAMETOOLONG,
				     "%skey '%.20s...' longer than %d characters",
				     where, text, SIGMA_KV_MAX_KEY);
	if (vlen > SIGMA_KV_MAX_VALUE)
		return sigma_set_err(err, errlen, ENAMETOOLONG,
				     "%svalue of '%.*s' longer than %d characters",
				     where, (int)klen, text, SIGMA_KV_MAX_VALUE);
	for (size_t i = 0; i < klen; i++) {
		unsigned char c = (unsigned char)text[i];

		if (!isalnum(c) && c != '_' && c != '-' && c != '.')
			return sigma_set_err(err, errlen, EINVAL,
					     "%sbad character in key '%.*s'",
					     where, (int)klen, text);
	}
	memcpy(key, text, klen);
	key[klen] = '\0';
	memcpy(value, eq, vlen);
	value[vlen] = '\0';
	for (size_t i = 0; i < vlen; i++)
		if (iscntrl((unsigned char)value[i]))
			return sigma_set_err(err, errlen, EINVAL,
					     "%scontrol character in value of '%s'",
					     where, key);
	why[0] = '\0';
	rc = fn(key, value, arg, why, sizeof(why));
	if (rc < 0)
		return sigma_set_err(err, errlen, rc, "%s%s", where,
				     why[0] ? why : "rejected");
	return 0;
}

int sigma_kv_parse_word(const char *word, sigma_kv_fn fn, void *arg,
			char *err, size_t errlen)
{
	size_t len;

	if (!word)
		return sigma_set_err(err, errlen, EINVAL, "missing argument");
	len = strlen(word);
	if (len > SIGMA_KV_MAX_KEY + 1 + SIGMA_KV_MAX_VALUE)
		return sigma_set_err(err, errlen, ENAMETOOLONG,
				     "argument '%.20s...' too long", word);
	return kv_dispatch(word, len, "", fn, arg, err, errlen);
}

int sigma_kv_parse_words(const char *words, sigma_kv_fn fn, void *arg,
			 char *err, size_t errlen)
{
	char buf[SIGMA_KV_MAX_LINE], *save = NULL, *w;

	if (!words)
		return 0;
	if (sigma_strlcpy(buf, words, sizeof(buf)) >= sizeof(buf))
		return sigma_set_err(err, errlen, ENAMETOOLONG,
				     "settings longer than %zu bytes",
				     sizeof(buf) - 1);
	for (w = strtok_r(buf, " ,\t\n", &save); w;
	     w = strtok_r(NULL, " ,\t\n", &save)) {
		int rc = sigma_kv_parse_word(w, fn, arg, err, errlen);

		if (rc < 0)
			return rc;
	}
	return 0;
}

int sigma_kv_parse_argv(int argc, char *const argv[], sigma_kv_fn fn,
			void *arg, char *err, size_t errlen)
{
	for (int i = 0; i < argc; i++) {
		int rc = sigma_kv_parse_word(argv[i], fn, arg, err, errlen);

		if (rc < 0)
			return rc;
	}
	return 0;
}

int sigma_kv_parse_buf(const char *buf, size_t len, const char *name,
		       sigma_kv_fn fn, void *arg, char *err, size_t errlen)
{
	size_t pos = 0, lineno = 0;

	while (pos < len) {
		const char *line = buf + pos;
		const char *nl = memchr(line, '\n', len - pos);
		size_t llen = nl ? (size_t)(nl - line) : len - pos;
		char where[160];
		int rc;

		pos += llen + (nl ? 1 : 0);
		lineno++;
		if (memchr(line, '\0', llen))
			return sigma_set_err(err, errlen, EINVAL,
					     "%s:%zu: NUL byte in line", name,
					     lineno);
		if (llen > SIGMA_KV_MAX_LINE)
			return sigma_set_err(err, errlen, ENAMETOOLONG,
					     "%s:%zu: line longer than %d characters",
					     name, lineno, SIGMA_KV_MAX_LINE);
		while (llen && isspace((unsigned char)*line)) {
			line++;
			llen--;
		}
		while (llen && isspace((unsigned char)line[llen - 1]))
			llen--;
		if (llen == 0 || line[0] == '#')
			continue;
		snprintf(where, sizeof(where), "%s:%zu: ", name, lineno);
		rc = kv_dispatch(line, llen, where, fn, arg, err, errlen);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int sigma_kv_parse_file(const char *path, sigma_kv_fn fn, void *arg,
			char *err, size_t errlen)
{
	char *buf;
	size_t len;
	int rc;

	rc = sigma_file_read(path, 1 << 20, &buf, &len);
	if (rc < 0)
		return sigma_set_err(err, errlen, rc, "%s: %s", path,
				     strerror(-rc));
	rc = sigma_kv_parse_buf(buf, len, path, fn, arg, err, errlen);
	free(buf);
	return rc;
}
