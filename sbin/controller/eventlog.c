/*
 * eventlog.c - the JSON-lines event log (see eventlog.h). The JSON is flat:
 * string and integer members only, written and read by this file alone.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "eventlog.h"
#include "sigma.h"

/* ---- writing ------------------------------------------------------------- */

struct evlog_buf {
	char *p;
	size_t size, len;
	bool overflow;
};

static void evbuf_putc(struct evlog_buf *b, char c)
{
	if (b->len + 1 < b->size)
		b->p[b->len++] = c;
	else
		b->overflow = true;
}

static void evbuf_puts(struct evlog_buf *b, const char *s)
{
	while (*s)
		evbuf_putc(b, *s++);
}

static void evbuf_str(struct evlog_buf *b, const char *key, const char *v)
{
	static const char hex[] = "0123456789abcdef";

	if (!v[0])
		return;
	evbuf_puts(b, ",\"");
	evbuf_puts(b, key);
	evbuf_puts(b, "\":\"");
	for (const unsigned char *s = (const unsigned char *)v; *s; s++) {
		if (*s == '"' || *s == '\\') {
			evbuf_putc(b, '\\');
			evbuf_putc(b, (char)*s);
		} else if (*s < 0x20) {
			evbuf_puts(b, "\\u00");
			evbuf_putc(b, hex[*s >> 4]);
			evbuf_putc(b, hex[*s & 15]);
		} else {
			evbuf_putc(b, (char)*s);
		}
	}
	evbuf_putc(b, '"');
}

static void evbuf_int(struct evlog_buf *b, const char *key, long long v,
		      bool always)
{
	char num[32];

	if (!v && !always)
		return;
	snprintf(num, sizeof(num), "%lld", v);
	evbuf_puts(b, ",\"");
	evbuf_puts(b, key);
	evbuf_puts(b, "\":");
	evbuf_puts(b, num);
}

int evlog_format(const struct evlog_event *ev, char *buf, size_t size)
{
	struct evlog_buf b = {.p = buf, .size = size};
	char num[32];

	if (!size)
		return -ENAMETOOLONG;
	snprintf(num, sizeof(num), "{\"time\":%lld", (long long)ev->time);
	evbuf_puts(&b, num);
	evbuf_str(&b, "type", ev->type);
	evbuf_int(&b, "job", ev->job, false);
	evbuf_int(&b, "uid", ev->uid, false);
	evbuf_int(&b, "attempt", ev->attempt, false);
	evbuf_int(&b, "rc", ev->rc, false);
	evbuf_str(&b, "kind", ev->kind);
	evbuf_str(&b, "verdict", ev->verdict);
	evbuf_str(&b, "node", ev->node);
	evbuf_str(&b, "spare", ev->spare);
	evbuf_str(&b, "text", ev->text);
	evbuf_puts(&b, "}\n");
	if (b.overflow)
		return -ENAMETOOLONG;
	buf[b.len] = '\0';
	return (int)b.len;
}

/* Cut a partial last line left by a crash, so new lines start clean. */
static int evlog_cut_tail(int fd)
{
	struct stat st;
	char c;
	off_t end;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (st.st_size == 0)
		return 0;
	for (end = st.st_size; end > 0; end--) {
		if (pread(fd, &c, 1, end - 1) != 1)
			return -EIO;
		if (c == '\n')
			break;
	}
	if (end == st.st_size)
		return 0;
	sigma_warn("event log: cutting a partial last line (%lld bytes)",
		   (long long)(st.st_size - end));
	if (ftruncate(fd, end) < 0)
		return -errno;
	return 0;
}

int evlog_open(struct evlog *log, const char *path)
{
	int rc;

	log->fd = -1;
	if (sigma_strlcpy(log->path, path, sizeof(log->path)) >=
	    sizeof(log->path))
		return -ENAMETOOLONG;
	log->fd = open(
	    path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (log->fd < 0)
		return -errno;
	rc = evlog_cut_tail(log->fd);
	if (rc) {
		close(log->fd);
		log->fd = -1;
	}
	return rc;
}

int evlog_append(struct evlog *log, const struct evlog_event *ev)
{
	char line[EVLOG_LINE_MAX];
	int n = evlog_format(ev, line, sizeof(line));
	ssize_t w;

	if (n < 0)
		return n;
	if (log->fd < 0)
		return -EBADF;
	/* one write(2) of the whole line: O_APPEND keeps lines whole */
	w = write(log->fd, line, (size_t)n);
	if (w < 0)
		return -errno;
	if (w != n)
		return -EIO;
	if (fdatasync(log->fd) < 0)
		return -errno;
	return 0;
}

void evlog_close(struct evlog *log)
{
	if (log->fd >= 0)
		close(log->fd);
	log->fd = -1;
}

/* ---- reading ------------------------------------------------------------- */

struct evlog_cursor {
	const char *p, *end;
};

static void cur_ws(struct evlog_cursor *c)
{
	while (c->p < c->end && (*c->p == ' ' || *c->p == '\t'))
		c->p++;
}

static bool cur_eat(struct evlog_cursor *c, char ch)
{
	cur_ws(c);
	if (c->p < c->end && *c->p == ch) {
		c->p++;
		return true;
	}
	return false;
}

static int cur_hex(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* A JSON string into out (bounded; longer strings are an error). */
static int cur_string(struct evlog_cursor *c, char *out, size_t size)
{
	size_t n = 0;

	if (!cur_eat(c, '"'))
		return -EINVAL;
	while (c->p < c->end && *c->p != '"') {
		char ch = *c->p++;

		if (ch == '\\') {
			if (c->p >= c->end)
				return -EINVAL;
			ch = *c->p++;
			switch (ch) {
			case 'n':
				ch = '\n';
				break;
			case 't':
				ch = '\t';
				break;
			case 'r':
				ch = '\r';
				break;
			case '"':
			case '\\':
			case '/':
				break;
			case 'u': {
				int h[4];

				if (c->end - c->p < 4)
					return -EINVAL;
				for (int i = 0; i < 4; i++)
					if ((h[i] = cur_hex(c->p[i])) < 0)
						return -EINVAL;
				c->p += 4;
				if (h[0] || h[1])
					ch = '?'; /* we only write ASCII escapes
						   */
				else
					ch = (char)(h[2] << 4 | h[3]);
				break;
			}
			default:
				return -EINVAL;
			}
		}
		if (n + 1 >= size)
			return -EINVAL;
		out[n++] = ch;
	}
	if (c->p >= c->end)
		return -EINVAL;
	c->p++;
	out[n] = '\0';
	return 0;
}

static int cur_int(struct evlog_cursor *c, long long *out)
{
	char num[24];
	size_t n = 0;
	long v;

	cur_ws(c);
	while (c->p < c->end &&
	       (*c->p == '-' || (*c->p >= '0' && *c->p <= '9'))) {
		if (n + 1 >= sizeof(num))
			return -EINVAL;
		num[n++] = *c->p++;
	}
	num[n] = '\0';
	if (sigma_parse_long(num, -(1L << 62), 1L << 62, &v))
		return -EINVAL;
	*out = v;
	return 0;
}

int evlog_parse_line(const char *line, size_t len, struct evlog_event *ev)
{
	struct evlog_cursor c = {line, line + len};
	char key[32];
	bool have_time = false;

	memset(ev, 0, sizeof(*ev));
	if (!cur_eat(&c, '{'))
		return -EINVAL;
	if (cur_eat(&c, '}'))
		return -EINVAL;
	do {
		long long v = 0;
		char *s = NULL;
		size_t ssize = 0;

		if (cur_string(&c, key, sizeof(key)) || !cur_eat(&c, ':'))
			return -EINVAL;
		if (!strcmp(key, "type")) {
			s = ev->type;
			ssize = sizeof(ev->type);
		} else if (!strcmp(key, "kind")) {
			s = ev->kind;
			ssize = sizeof(ev->kind);
		} else if (!strcmp(key, "verdict")) {
			s = ev->verdict;
			ssize = sizeof(ev->verdict);
		} else if (!strcmp(key, "node")) {
			s = ev->node;
			ssize = sizeof(ev->node);
		} else if (!strcmp(key, "spare")) {
			s = ev->spare;
			ssize = sizeof(ev->spare);
		} else if (!strcmp(key, "text")) {
			s = ev->text;
			ssize = sizeof(ev->text);
		}
		if (s) {
			if (cur_string(&c, s, ssize))
				return -EINVAL;
			continue;
		}
		if (cur_int(&c, &v))
			return -EINVAL;
		if (!strcmp(key, "time")) {
			ev->time = v;
			have_time = true;
		} else if (!strcmp(key, "job")) {
			if (v < 0 || v > UINT32_MAX)
				return -EINVAL;
			ev->job = (uint32_t)v;
		} else if (!strcmp(key, "uid")) {
			if (v < 0 || v > UINT32_MAX)
				return -EINVAL;
			ev->uid = (uint32_t)v;
		} else if (!strcmp(key, "attempt")) {
			if (v < 0 || v > 1000000)
				return -EINVAL;
			ev->attempt = (int)v;
		} else if (!strcmp(key, "rc")) {
			if (v < -255 || v > 255)
				return -EINVAL;
			ev->rc = (int)v;
		} /* unknown integer members: skipped */
	} while (cur_eat(&c, ','));
	if (!cur_eat(&c, '}'))
		return -EINVAL;
	cur_ws(&c);
	if (c.p != c.end || !have_time || !ev->type[0])
		return -EINVAL;
	return 0;
}

int evlog_read(const char *path, evlog_fn fn, void *arg, size_t *bad)
{
	char line[EVLOG_LINE_MAX + 2];
	size_t nbad = 0;
	FILE *f;
	int rc = 0;

	f = fopen(path, "re");
	if (!f) {
		if (bad)
			*bad = 0;
		return errno == ENOENT ? 0 : -errno;
	}
	/* cleared first, so a '\n' found in it is one fgets read */
	while (memset(line, 0, sizeof(line)), fgets(line, sizeof(line), f)) {
		size_t len = strlen(line);
		struct evlog_event ev;

		if (len == 0 || line[len - 1] != '\n') {
			/*
			 * too long, cut short by a crash, or a NUL inside it
			 * (strlen stopped there): skip to the line's real end
			 */
			int ch;

			nbad++;
			if (!memchr(line, '\n', sizeof(line) - 1))
				while ((ch = fgetc(f)) != EOF && ch != '\n')
					;
			continue;
		}
		line[--len] = '\0';
		if (len == 0)
			continue;
		if (evlog_parse_line(line, len, &ev)) {
			nbad++;
			continue;
		}
		rc = fn(&ev, arg);
		if (rc)
			break;
	}
	if (!rc && ferror(f))
		rc = -EIO;
	fclose(f);
	if (bad)
		*bad = nbad;
	return rc;
}
