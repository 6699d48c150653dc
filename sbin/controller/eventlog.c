/*
 * eventlog.c - the JSON-lines event log (see eventlog.h). The JSON is flat:
 * string and integer members only, written and read through jansson by
 * this file alone.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "eventlog.h"
#include "sigma.h"

/* ---- writing ------------------------------------------------------------- */

/*
 * Members in this order, zero and empty ones left out: the log's lines
 * have always read like this, and scripts grep them
 * ("type":"signal","job":N,). jansson keeps insertion order.
 */
static int evlog_put_str(json_t *o, const char *key, const char *v)
{
	char ascii[EVLOG_TEXT_MAX > EVLOG_NODE_MAX ? EVLOG_TEXT_MAX
						   : EVLOG_NODE_MAX];
	json_t *s;
	size_t i;

	if (!v[0])
		return 0;
	s = json_string(v);
	if (!s) {
		/*
		 * not UTF-8 (a reason an admin typed in Latin-1, say): JSON
		 * cannot hold it, and the event must still be logged
		 */
		for (i = 0; v[i] && i + 1 < sizeof(ascii); i++)
			ascii[i] = (unsigned char)v[i] < 0x80 ? v[i] : '?';
		ascii[i] = '\0';
		s = json_string(ascii);
	}
	return json_object_set_new(o, key, s);
}

static int evlog_put_int(json_t *o, const char *key, long long v)
{
	if (!v)
		return 0;
	return json_object_set_new(o, key, json_integer(v));
}

static json_t *evlog_to_json(const struct evlog_event *ev)
{
	json_t *o = json_object();
	int rc = 0;

	if (!o)
		return NULL;
	rc |= json_object_set_new(o, "time", json_integer(ev->time));
	rc |= evlog_put_str(o, "type", ev->type);
	rc |= evlog_put_int(o, "job", ev->job);
	rc |= evlog_put_int(o, "uid", ev->uid);
	rc |= evlog_put_int(o, "attempt", ev->attempt);
	rc |= evlog_put_int(o, "rc", ev->rc);
	rc |= evlog_put_int(o, "launch", ev->launch);
	rc |= evlog_put_str(o, "kind", ev->kind);
	rc |= evlog_put_str(o, "verdict", ev->verdict);
	rc |= evlog_put_str(o, "node", ev->node);
	rc |= evlog_put_str(o, "spare", ev->spare);
	rc |= evlog_put_str(o, "text", ev->text);
	if (rc) {
		json_decref(o);
		return NULL;
	}
	return o;
}

int evlog_format(const struct evlog_event *ev, char *buf, size_t size)
{
	json_t *o = evlog_to_json(ev);
	size_t n;

	if (!o)
		return -EINVAL;
	n = json_dumpb(o, buf, size, JSON_COMPACT);
	json_decref(o);
	/* room for the '\n' and the NUL too, or nothing */
	if (n == 0 || n + 2 > size)
		return -ENAMETOOLONG;
	buf[n++] = '\n';
	buf[n] = '\0';
	return (int)n;
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

static int evlog_index_build(struct evlog *log);

/* index the line of ev at off, len bytes with its '\n' */
static int evlog_index_add(struct evlog *log, const struct evlog_event *ev,
			   int64_t off, uint32_t len)
{
	struct evlog_entry *e;

	if (log->n == log->cap) {
		size_t cap = log->cap ? log->cap * 2 : 1024;
		void *v = cap > SIZE_MAX / sizeof(*log->idx)
			      ? NULL
			      : realloc(log->idx, cap * sizeof(*log->idx));

		if (!v)
			return -ENOMEM;
		log->idx = v;
		log->cap = cap;
	}
	e = &log->idx[log->n++];
	e->off = off;
	e->time = ev->time;
	e->len = len;
	e->job = ev->job;
	e->uid = ev->uid;
	return 0;
}

int evlog_open(struct evlog *log, const char *path)
{
	int rc;

	log->fd = -1;
	log->idx = NULL;
	log->n = log->cap = 0;
	if (sigma_strlcpy(log->path, path, sizeof(log->path)) >=
	    sizeof(log->path))
		return -ENAMETOOLONG;
	log->fd = open(
	    path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (log->fd < 0)
		return -errno;
	rc = evlog_cut_tail(log->fd);
	if (!rc)
		rc = evlog_index_build(log);
	if (rc)
		evlog_close(log);
	return rc;
}

int evlog_append(struct evlog *log, const struct evlog_event *ev)
{
	char line[EVLOG_LINE_MAX];
	int n = evlog_format(ev, line, sizeof(line));
	ssize_t w;
	off_t end;

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
	/* on disk now: an event the index misses is only missing from
	 * history replies, until the next compaction indexes the file anew */
	end = lseek(log->fd, 0, SEEK_CUR);
	if (end < n || evlog_index_add(log, ev, end - n, (uint32_t)n))
		sigma_warn("event log %s: an event is not indexed: history "
			   "replies miss it",
			   log->path);
	return 0;
}

void evlog_close(struct evlog *log)
{
	if (log->fd >= 0)
		close(log->fd);
	log->fd = -1;
	free(log->idx);
	log->idx = NULL;
	log->n = log->cap = 0;
}

/* ---- reading ------------------------------------------------------------- */

struct evlog_member {
	const char *key;
	size_t off, size; /* a string member: where in the event, how big */
};

#define EVLOG_STR(name)                                                        \
	{                                                                      \
#name, offsetof(struct evlog_event, name),                     \
		    sizeof(((struct evlog_event *)0)->name)                    \
	}

static const struct evlog_member evlog_strings[] = {
    EVLOG_STR(type), EVLOG_STR(kind),  EVLOG_STR(verdict),
    EVLOG_STR(node), EVLOG_STR(spare), EVLOG_STR(text),
};

/* the integer member key of o in [min, max] into *out; absent: 0 */
static int evlog_get_int(json_t *o, const char *key, long long min,
			 long long max, long long *out, char *err,
			 size_t errlen)
{
	json_t *v = json_object_get(o, key);

	*out = 0;
	if (!v)
		return 0;
	if (!json_is_integer(v))
		return sigma_set_err(err, errlen, -EINVAL,
				     "'%s' is not an integer", key);
	*out = json_integer_value(v);
	if (*out < min || *out > max)
		return sigma_set_err(err, errlen, -EINVAL,
				     "'%s' %lld is out of [%lld, %lld]", key,
				     *out, min, max);
	return 0;
}

static int evlog_get_strings(json_t *o, struct evlog_event *ev, char *err,
			     size_t errlen)
{
	for (size_t i = 0; i < sizeof(evlog_strings) / sizeof(*evlog_strings);
	     i++) {
		const struct evlog_member *m = &evlog_strings[i];
		json_t *v = json_object_get(o, m->key);

		if (!v)
			continue;
		if (!json_is_string(v))
			return sigma_set_err(err, errlen, -EINVAL,
					     "'%s' is not a string", m->key);
		if (json_string_length(v) >= m->size)
			return sigma_set_err(err, errlen, -EINVAL,
					     "'%s' is longer than %zu bytes",
					     m->key, m->size - 1);
		memcpy((char *)ev + m->off, json_string_value(v),
		       json_string_length(v) + 1);
	}
	return 0;
}

static int evlog_from_json(json_t *o, struct evlog_event *ev, char *err,
			   size_t errlen)
{
	long long v[6];
	int rc;

	if (!json_is_object(o))
		return sigma_set_err(err, errlen, -EINVAL, "not a JSON object");
	if (!json_is_integer(json_object_get(o, "time")))
		return sigma_set_err(err, errlen, -EINVAL, "no integer 'time'");
	rc = evlog_get_int(o, "time", -(1LL << 62), 1LL << 62, &v[0], err,
			   errlen);
	rc = rc ? rc
		: evlog_get_int(o, "job", 0, UINT32_MAX, &v[1], err, errlen);
	rc = rc ? rc
		: evlog_get_int(o, "uid", 0, UINT32_MAX, &v[2], err, errlen);
	rc = rc ? rc
		: evlog_get_int(o, "attempt", 0, 1000000, &v[3], err, errlen);
	rc = rc ? rc : evlog_get_int(o, "rc", -255, 255, &v[4], err, errlen);
	rc = rc ? rc
		: evlog_get_int(o, "launch", 0, 1000000, &v[5], err, errlen);
	rc = rc ? rc : evlog_get_strings(o, ev, err, errlen);
	if (rc)
		return rc;
	if (!ev->type[0])
		return sigma_set_err(err, errlen, -EINVAL, "no 'type'");
	ev->time = v[0];
	ev->job = (uint32_t)v[1];
	ev->uid = (uint32_t)v[2];
	ev->attempt = (int)v[3];
	ev->rc = (int)v[4];
	ev->launch = (int)v[5];
	return 0; /* members of later versions are skipped */
}

int evlog_parse_line(const char *line, size_t len, struct evlog_event *ev,
		     char *err, size_t errlen)
{
	json_error_t jerr;
	json_t *o;
	int rc;

	memset(ev, 0, sizeof(*ev));
	o = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!o)
		return sigma_set_err(err, errlen, -EINVAL, "column %d: %s",
				     jerr.column, jerr.text);
	rc = evlog_from_json(o, ev, err, errlen);
	json_decref(o);
	if (rc)
		memset(ev, 0, sizeof(*ev));
	return rc;
}

/* one line counted as bad: the first of a read is logged, with why */
static void evlog_skip(const char *path, size_t lineno, const char *why,
		       size_t *nbad)
{
	if (!(*nbad)++)
		sigma_warn("event log %s: line %zu skipped: %s", path, lineno,
			   why);
}

/* called for each whole, valid line read, with where it starts in the
 * file and its length with its '\n'; nonzero stops the read */
typedef int (*evlog_line_fn)(const struct evlog_event *ev, int64_t off,
			     uint32_t len, void *arg);

/* the lines of f from its start, as evlog_read says */
static int evlog_read_lines(const char *path, FILE *f, evlog_line_fn fn,
			    void *arg, size_t *bad)
{
	char line[EVLOG_LINE_MAX + 2], why[160];
	size_t nbad = 0, lineno = 0;
	long off = 0;
	int rc = 0;

	for (;;) {
		struct evlog_event ev;
		size_t len;

		/* cleared first, so a '\n' found in it is one fgets read */
		memset(line, 0, sizeof(line));
		off = ftell(f);
		if (off < 0 || !fgets(line, sizeof(line), f))
			break;
		len = strlen(line);
		lineno++;
		if (len == 0 || line[len - 1] != '\n') {
			/*
			 * too long, cut short by a crash, or a NUL inside it
			 * (strlen stopped there): skip to the line's real end
			 */
			int ch;

			evlog_skip(path, lineno,
				   "cut short, too long or holds a NUL byte",
				   &nbad);
			if (!memchr(line, '\n', sizeof(line) - 1))
				while ((ch = fgetc(f)) != EOF && ch != '\n')
					;
			continue;
		}
		line[--len] = '\0';
		if (len == 0)
			continue;
		if (evlog_parse_line(line, len, &ev, why, sizeof(why))) {
			evlog_skip(path, lineno, why, &nbad);
			continue;
		}
		rc = fn(&ev, off, (uint32_t)len + 1, arg);
		if (rc)
			break;
	}
	if (!rc && (off < 0 || ferror(f)))
		rc = -EIO;
	if (bad)
		*bad = nbad;
	return rc;
}

/* path's lines, as evlog_read says, to a line_fn */
static int evlog_read_path(const char *path, evlog_line_fn fn, void *arg,
			   size_t *bad)
{
	FILE *f = fopen(path, "re");
	int rc;

	if (!f) {
		if (bad)
			*bad = 0;
		return errno == ENOENT ? 0 : -errno;
	}
	rc = evlog_read_lines(path, f, fn, arg, bad);
	fclose(f);
	return rc;
}

struct read_arg {
	evlog_fn fn;
	void *arg;
};

static int read_fn(const struct evlog_event *ev, int64_t off, uint32_t len,
		   void *arg)
{
	const struct read_arg *a = arg;

	(void)off;
	(void)len;
	return a->fn(ev, a->arg);
}

int evlog_read(const char *path, evlog_fn fn, void *arg, size_t *bad)
{
	struct read_arg a = {fn, arg};

	return evlog_read_path(path, read_fn, &a, bad);
}

/* ---- the index and history ---------------------------------------------- */

static int index_fn(const struct evlog_event *ev, int64_t off, uint32_t len,
		    void *arg)
{
	return evlog_index_add(arg, ev, off, len);
}

/* the index of log's file as it is now, in place of the one it had */
static int evlog_index_build(struct evlog *log)
{
	log->n = 0;
	return evlog_read_path(log->path, index_fn, log, NULL);
}

static bool evlog_wanted(const struct evlog_entry *e,
			 const struct evlog_filter *flt)
{
	if (!flt->all && (!e->job || e->uid != flt->uid))
		return false;
	return (!flt->job || e->job == flt->job) && e->time >= flt->since;
}

/* the indexed line e, read and parsed into ev */
static int evlog_read_entry(const struct evlog *log,
			    const struct evlog_entry *e,
			    struct evlog_event *ev)
{
	char line[EVLOG_LINE_MAX + 2];
	ssize_t r;

	if (e->len < 2 || e->len > sizeof(line) - 1)
		return -EINVAL;
	r = pread(log->fd, line, e->len, (off_t)e->off);
	if (r < 0)
		return -errno;
	/* the index and the file disagree: read as damaged, and skipped */
	if ((size_t)r != e->len || line[e->len - 1] != '\n')
		return -EINVAL;
	return evlog_parse_line(line, e->len - 1, ev, NULL, 0);
}

int evlog_history(const struct evlog *log, const struct evlog_filter *flt,
		  long budget, evlog_fn fn, void *arg, bool *cut)
{
	size_t first = log->n;
	long used = 0;
	int rc = 0;

	if (cut)
		*cut = false;
	if (log->fd < 0)
		return -EBADF;
	/* the newest wanted lines that fit budget, found in memory */
	for (size_t i = log->n; i-- > 0;) {
		if (!evlog_wanted(&log->idx[i], flt))
			continue;
		if (used + (long)log->idx[i].len > budget) {
			if (cut)
				*cut = true;
			break;
		}
		used += log->idx[i].len;
		first = i;
	}
	for (size_t i = first; i < log->n && !rc; i++) {
		struct evlog_event ev;
		int r;

		if (!evlog_wanted(&log->idx[i], flt))
			continue;
		r = evlog_read_entry(log, &log->idx[i], &ev);
		if (r == -EINVAL)
			continue;
		rc = r ? r : fn(&ev, arg);
	}
	return rc;
}

/* ---- compaction ------------------------------------------------------------ */

long long evlog_size(const struct evlog *log)
{
	struct stat st;

	if (log->fd < 0)
		return -EBADF;
	if (fstat(log->fd, &st) < 0)
		return -errno;
	return (long long)st.st_size;
}

struct compact_arg {
	FILE *out;
	evlog_keep_fn keep;
	void *arg;
	int err;
};

static int compact_write(FILE *out, const struct evlog_event *ev)
{
	char line[EVLOG_LINE_MAX];
	int n = evlog_format(ev, line, sizeof(line));

	if (n < 0)
		return n;
	return fwrite(line, 1, (size_t)n, out) == (size_t)n ? 0 : -EIO;
}

static int compact_fn(const struct evlog_event *ev, void *arg)
{
	struct compact_arg *a = arg;

	if (!a->keep(ev, a->arg))
		return 0;
	a->err = compact_write(a->out, ev);
	return a->err;
}

/* PATH.k for k > 0, PATH.new for k < 0, into buf */
static int archive_name(const char *path, int k, char *buf, size_t size)
{
	int n = k < 0 ? snprintf(buf, size, "%s.new", path)
		      : snprintf(buf, size, "%s.%d", path, k);

	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

/* the kept events and tail into tmp, on disk */
static int compact_into(struct evlog *log, const char *tmp, evlog_keep_fn keep,
			void *arg, const struct evlog_event *tail)
{
	struct compact_arg a = {NULL, keep, arg, 0};
	int fd, rc;

	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
		  0600);
	if (fd < 0)
		return -errno;
	a.out = fdopen(fd, "w");
	if (!a.out) {
		rc = -errno;
		close(fd);
		return rc;
	}
	rc = evlog_read(log->path, compact_fn, &a, NULL);
	if (!rc && tail)
		rc = compact_write(a.out, tail);
	if (!rc && fflush(a.out) != 0)
		rc = -errno;
	if (!rc && fdatasync(fd) < 0)
		rc = -errno;
	if (fclose(a.out) != 0 && !rc)
		rc = -errno;
	return rc;
}

int evlog_compact(struct evlog *log, evlog_keep_fn keep, void *arg,
		  const struct evlog_event *tail, int archives)
{
	char tmp[sizeof(log->path) + 8], from[sizeof(tmp)], to[sizeof(tmp)];
	int fd, rc;

	if (log->fd < 0)
		return -EBADF;
	rc = archive_name(log->path, -1, tmp, sizeof(tmp));
	if (!rc)
		rc = compact_into(log, tmp, keep, arg, tail);
	if (rc) {
		unlink(tmp);
		return rc;
	}
	/* PATH.k -> PATH.k+1, the oldest dropped; then PATH is also PATH.1 */
	for (int k = archives; k >= 1 && !rc; k--) {
		rc = archive_name(log->path, k, from, sizeof(from));
		if (!rc)
			rc = archive_name(log->path, k + 1, to, sizeof(to));
		if (!rc && k == archives)
			(void)unlink(from);
		else if (!rc && rename(from, to) < 0 && errno != ENOENT)
			rc = -errno;
	}
	if (!rc && archives > 0) {
		rc = archive_name(log->path, 1, to, sizeof(to));
		if (!rc && link(log->path, to) < 0)
			rc = -errno;
	}
	if (!rc && rename(tmp, log->path) < 0)
		rc = -errno;
	if (rc) {
		unlink(tmp);
		return rc;
	}
	(void)sigma_fsync_dir_of(log->path);
	/* appends go to the new file, or fail and say so: never the old one */
	fd = open(log->path, O_RDWR | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
	rc = fd < 0 ? -errno : 0;
	close(log->fd);
	log->fd = fd;
	if (fd < 0)
		return rc;
	rc = evlog_index_build(log);
	if (rc)
		sigma_warn("event log %s: not indexed anew (%s): history "
			   "replies miss events until sigmad restarts",
			   log->path, strerror(-rc));
	return 0;
}
