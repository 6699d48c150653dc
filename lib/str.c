/*
 * str.c - bounded string copies and whole-string number parsing. Every number
 * that reaches sigma from a user or a file goes through here.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <strings.h>

#include "sigma.h"

size_t sigma_strlcpy(char *dst, const char *src, size_t size)
{
	size_t len = strlen(src);

	if (size) {
		size_t n = len < size - 1 ? len : size - 1;

		memcpy(dst, src, n);
		dst[n] = '\0';
	}
	return len;
}

int sigma_snprintf(char *dst, size_t size, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(dst, size, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -EINVAL;
	if ((size_t)n >= size)
		return -ENAMETOOLONG;
	return 0;
}

int sigma_set_err(char *err, size_t errlen, int code, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return code > 0 ? -code : code;
}

int sigma_parse_long(const char *s, long min, long max, long *out)
{
	char *end;
	long v;

	if (!s || !*s || isspace((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtol(s, &end, 10);
	if (*end != '\0')
		return -EINVAL;
	if (errno == ERANGE || v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

int sigma_parse_long_named(const char *what, const char *s, long min,
			   long max, long *out, char *err, size_t len)
{
	int rc = sigma_parse_long(s, min, max, out);

	if (rc == -ERANGE)
		sigma_set_err(err, len, ERANGE, "%s %s is out of range [%ld, %ld]",
			      what, s, min, max);
	else if (rc)
		sigma_set_err(err, len, -rc, "%s \"%s\" is not a whole number",
			      what, s);
	return rc;
}

int sigma_parse_double(const char *s, double min, double max, double *out)
{
	char *end;
	double v;

	if (!s || !*s || isspace((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (*end != '\0' || isnan(v))
		return -EINVAL;
	if (errno == ERANGE || v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

int sigma_parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = { "yes", "true", "on", "1", NULL };
	static const char *const no[] = { "no", "false", "off", "0", NULL };

	if (!s)
		return -EINVAL;
	for (int i = 0; yes[i]; i++) {
		if (!strcasecmp(s, yes[i])) {
			*out = true;
			return 0;
		}
		if (!strcasecmp(s, no[i])) {
			*out = false;
			return 0;
		}
	}
	return -EINVAL;
}

bool sigma_list_has(const char *list, const char *name)
{
	size_t n = strlen(name);
	const char *p = list;

	if (!list || !n)
		return false;
	while ((p = strstr(p, name))) {
		if ((p == list || p[-1] == ',') && (p[n] == ',' || !p[n]))
			return true;
		p += n;
	}
	return false;
}

int sigma_list_add(char *list, size_t size, const char *name)
{
	size_t len = strlen(list), n = strlen(name);

	if (sigma_list_has(list, name))
		return 0;
	if (len + n + 2 > size)
		return -ENAMETOOLONG;
	if (len)
		list[len++] = ',';
	memcpy(list + len, name, n + 1);
	return 0;
}

void sigma_list_del(char *list, const char *name)
{
	size_t n = strlen(name);
	char *w = list;
	const char *p = list;

	/* word by word, in place: the kept words move down */
	while (*p) {
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);

		if (len && (len != n || strncmp(p, name, n))) {
			if (w != list)
				*w++ = ',';
			memmove(w, p, len);
			w += len;
		}
		p += len + (e != NULL);
	}
	*w = '\0';
}

size_t sigma_list_count(const char *list)
{
	size_t n = *list ? 1 : 0;

	for (; *list; list++)
		n += *list == ',';
	return n;
}

int sigma_parse_enum(const char *s, const char *const names[])
{
	if (!s)
		return -EINVAL;
	for (int i = 0; names[i]; i++)
		if (!strcmp(s, names[i]))
			return i;
	return -EINVAL;
}

const char *sigma_enum_list(const char *const names[], char *buf, size_t size)
{
	size_t used = 0;

	if (!size)
		return buf;
	buf[0] = '\0';
	for (int i = 0; names[i]; i++) {
		int n = snprintf(buf + used, size - used, "%s%s", i ? "|" : "",
				 names[i]);

		if (n < 0 || (size_t)n >= size - used) {
			buf[used] = '\0'; /* whole names only */
			break;
		}
		used += (size_t)n;
	}
	return buf;
}

const char *sigma_escape(const char *s, char *out, size_t size)
{
	static const char hex[] = "0123456789abcdef";
	size_t n = 0;

	if (!size)
		return out;
	for (; s && *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch < 0x20 || ch == 0x7f || ch == '\\') {
			if (n + 4 >= size)
				break;
			out[n++] = '\\';
			out[n++] = 'x';
			out[n++] = hex[ch >> 4];
			out[n++] = hex[ch & 15];
		} else {
			if (n + 1 >= size)
				break;
			out[n++] = (char)ch;
		}
	}
	out[n] = '\0';
	return out;
}

const char *sigma_format_duration(int64_t secs, char *out, size_t size)
{
	long long s = secs < 0 ? 0 : (long long)secs;

	if (s < 60)
		snprintf(out, size, "%llds", s);
	else if (s < 3600)
		snprintf(out, size, "%lldm%02llds", s / 60, s % 60);
	else if (s < 86400)
		snprintf(out, size, "%lldh%02lldm", s / 3600, s % 3600 / 60);
	else
		snprintf(out, size, "%lldd%02lldh", s / 86400,
			 s % 86400 / 3600);
	return out;
}

const char *sigma_format_time(int64_t t, char *out, size_t size)
{
	time_t tt = (time_t)t;
	struct tm tm;

	if (!size)
		return out;
	if (!localtime_r(&tt, &tm) ||
	    !strftime(out, size, "%Y-%m-%d %H:%M:%S %Z", &tm))
		snprintf(out, size, "@%lld", (long long)t);
	return out;
}
