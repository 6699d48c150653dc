/*
 * eventlog.c - sigmad's event log (sbin/controller/eventlog.c): one line
 * through evlog_parse_line and evlog_format, and the whole input as a log
 * file through evlog_read.
 *
 * FUZZ_SOURCES: sbin/controller/eventlog.c lib/str.c lib/log.c lib/file.c
 * FUZZ_PKG: jansson
 *
 * Invariants:
 * - a line that parses has a type, every string terminated inside its
 *   field, job and uid in 0..UINT32_MAX, attempt in 0..1000000, rc in
 *   -255..255;
 * - formatted again it is one line (its only '\n' at the end, no raw
 *   control byte) that parses back to the same event; a line too long for
 *   EVLOG_LINE_MAX is refused, never cut, so whatever evlog_append writes
 *   evlog_read reads back;
 * - evlog_read of a file gives exactly the events of its whole lines that
 *   parse, in order, and counts every other non-empty line as bad (a line
 *   without its '\n', with a NUL byte, longer than EVLOG_LINE_MAX or
 *   malformed): a damaged line never becomes an event, and never hides
 *   the lines after it;
 * - a callback that returns nonzero stops the read with that value;
 * - the file opened as the log (its cut-short last line cut off) indexes
 *   the same events: evlog_history gives all of them to an admin, and to
 *   a user exactly those of a job of theirs, in order.
 */
#include "fuzz.h"

#include <limits.h>

#include "eventlog.h"

static char log_path[512];

static void check_event(const struct evlog_event *ev)
{
	CHECK_TERMINATED(ev->type);
	CHECK_TERMINATED(ev->kind);
	CHECK_TERMINATED(ev->verdict);
	CHECK_TERMINATED(ev->node);
	CHECK_TERMINATED(ev->spare);
	CHECK_TERMINATED(ev->text);
	CHECK(ev->type[0] != '\0');
	CHECK(ev->attempt >= 0 && ev->attempt <= 1000000);
	CHECK(ev->rc >= -255 && ev->rc <= 255);
}

static bool same_event(const struct evlog_event *a,
		       const struct evlog_event *b)
{
	return a->time == b->time && a->job == b->job && a->uid == b->uid &&
	       a->attempt == b->attempt && a->rc == b->rc &&
	       !strcmp(a->type, b->type) && !strcmp(a->kind, b->kind) &&
	       !strcmp(a->verdict, b->verdict) && !strcmp(a->node, b->node) &&
	       !strcmp(a->spare, b->spare) && !strcmp(a->text, b->text);
}

/* format, check the line, parse it back */
static void round_trip(const struct evlog_event *ev)
{
	static char big[16384], line[EVLOG_LINE_MAX];
	struct evlog_event back;
	int n, m;

	n = evlog_format(ev, big, sizeof(big));
	CHECK(n > 0 && (size_t)n < sizeof(big));
	CHECK(big[n - 1] == '\n' && big[n] == '\0');
	for (int i = 0; i < n - 1; i++)
		CHECK((unsigned char)big[i] >= 0x20);
	CHECK(evlog_parse_line(big, (size_t)n - 1, &back, NULL, 0) == 0);
	CHECK(same_event(ev, &back));

	/* what evlog_append would write: all of it or nothing */
	m = evlog_format(ev, line, sizeof(line));
	if ((size_t)n < sizeof(line)) {
		CHECK(m == n && !memcmp(line, big, (size_t)n));
		CHECK((size_t)n - 1 <= EVLOG_LINE_MAX); /* evlog_read takes it */
	} else {
		CHECK(m == -ENAMETOOLONG);
	}
	/* a buffer one byte short is refused too */
	CHECK(evlog_format(ev, big, (size_t)n) == -ENAMETOOLONG);
}

/* ---- the file: a model of evlog_read -------------------------------------- */

struct model {
	struct evlog_event *want;
	size_t nwant, seen, stop_at;
	bool user;    /* history as a user: skips what the user may not see */
	uint32_t uid; /* that user */
};

static int collect(const struct evlog_event *ev, void *arg)
{
	struct model *m = arg;

	check_event(ev);
	while (m->user && m->seen < m->nwant &&
	       (!m->want[m->seen].job || m->want[m->seen].uid != m->uid))
		m->seen++;
	CHECK(m->seen < m->nwant);
	CHECK(same_event(ev, &m->want[m->seen]));
	m->seen++;
	return m->seen == m->stop_at ? 7 : 0;
}

/* the model's events through the log's index, as an admin and a user */
static void fuzz_history(struct model *m)
{
	struct evlog_filter flt = {.since = INT64_MIN, .all = true};
	struct evlog log;
	bool cut = true;

	if (evlog_open(&log, log_path))
		return; /* out of memory: nothing to check */
	m->seen = 0;
	m->stop_at = 0;
	CHECK(evlog_history(&log, &flt, LONG_MAX, collect, m, &cut) == 0);
	CHECK(m->seen == m->nwant && !cut);
	if (m->nwant) {
		flt.all = false;
		flt.uid = m->uid = m->want[0].uid;
		m->user = true;
		m->seen = 0;
		CHECK(evlog_history(&log, &flt, LONG_MAX, collect, m, &cut) ==
		      0);
		for (; m->seen < m->nwant; m->seen++) /* none of theirs left */
			CHECK(!m->want[m->seen].job ||
			      m->want[m->seen].uid != m->uid);
		m->user = false;
	}
	evlog_close(&log);
}

static void fuzz_file(const uint8_t *data, size_t size)
{
	struct model m = {0};
	size_t pos = 0, bad_want = 0, bad = 12345;
	int rc;

	m.want = calloc(size / 2 + 1, sizeof(*m.want));
	if (!m.want)
		abort();
	while (pos < size) {
		const char *line = (const char *)data + pos;
		const char *nl = memchr(line, '\n', size - pos);
		size_t len = nl ? (size_t)(nl - line) : size - pos;

		pos += len + 1;
		if (!nl) {
			bad_want++; /* cut short by a crash */
			break;
		}
		if (len == 0)
			continue;
		if (len > EVLOG_LINE_MAX || memchr(line, '\0', len) ||
		    evlog_parse_line(line, len, &m.want[m.nwant], NULL, 0) != 0) {
			bad_want++;
			continue;
		}
		m.nwant++;
	}
	fuzz_write_file(log_path, data, size);
	rc = evlog_read(log_path, collect, &m, &bad);
	CHECK(rc == 0);
	CHECK(m.seen == m.nwant);
	CHECK(bad == bad_want);

	if (m.nwant >= 2) {
		m.seen = 0;
		m.stop_at = 2;
		rc = evlog_read(log_path, collect, &m, NULL);
		CHECK(rc == 7 && m.seen == 2);
	}
	fuzz_history(&m);
	free(m.want);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_quiet();
	snprintf(log_path, sizeof(log_path), "%s/events.jsonl", fuzz_scratch());
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct evlog_event ev;

	/* the input as one line, exactly size bytes (ASan sees overreads) */
	if (evlog_parse_line((const char *)data, size, &ev, NULL, 0) == 0) {
		check_event(&ev);
		round_trip(&ev);
	}
	fuzz_file(data, size);
	return 0;
}
