/*
 * test_sigmad_eventlog.c - the event log: round trip, escaping, a truncated
 * last line (crash mid-write), malformed lines, reopening after a crash,
 * history through the index.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "eventlog.h"
#include "sigma.h"

struct collect {
	int n;
	struct evlog_event ev[8];
};

static int collect_fn(const struct evlog_event *ev, void *arg)
{
	struct collect *c = arg;

	if (c->n < 8)
		c->ev[c->n] = *ev;
	c->n++;
	return 0;
}

static char dir[64];
static char path[128];

static int setup(void **state)
{
	strcpy(dir, "/tmp/test_sigmad_eventlog.XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	snprintf(path, sizeof(path), "%s/events.jsonl", dir);
	return 0;
}

static int teardown(void **state)
{
	unlink(path);
	rmdir(dir);
	return 0;
}

static void write_raw(const char *text)
{
	FILE *f = fopen(path, "a");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void test_round_trip(void **state)
{
	struct evlog log;
	struct evlog_event ev = {0}, back;
	struct collect c = {0};
	size_t bad = 99;
	char line[EVLOG_LINE_MAX];

	unlink(path);
	assert_int_equal(evlog_open(&log, path), 0);
	ev.time = 1700000000;
	strcpy(ev.type, "decide");
	ev.job = 42;
	ev.uid = 1000;
	ev.attempt = 2;
	strcpy(ev.kind, "failure");
	strcpy(ev.verdict, "requeue");
	strcpy(ev.node, "n3");
	strcpy(ev.spare, "n5");
	strcpy(ev.text, "gpu0 \"ecc\"\\ uncorrected=2\ttab\n");
	assert_int_equal(evlog_append(&log, &ev), 0);
	strcpy(ev.type, "complete");
	ev.text[0] = '\0';
	assert_int_equal(evlog_append(&log, &ev), 0);
	evlog_close(&log);

	assert_int_equal(evlog_read(path, collect_fn, &c, &bad), 0);
	assert_int_equal(bad, 0);
	assert_int_equal(c.n, 2);
	assert_int_equal(c.ev[0].time, 1700000000);
	assert_string_equal(c.ev[0].type, "decide");
	assert_int_equal(c.ev[0].job, 42);
	assert_int_equal(c.ev[0].uid, 1000);
	assert_int_equal(c.ev[0].attempt, 2);
	assert_string_equal(c.ev[0].kind, "failure");
	assert_string_equal(c.ev[0].node, "n3");
	assert_string_equal(c.ev[0].spare, "n5");
	assert_string_equal(c.ev[0].text,
			    "gpu0 \"ecc\"\\ uncorrected=2\ttab\n");
	assert_string_equal(c.ev[1].type, "complete");

	/* format and parse agree */
	int n = evlog_format(&c.ev[0], line, sizeof(line));
	assert_true(n > 0);
	assert_int_equal(line[n - 1], '\n');
	assert_int_equal(evlog_parse_line(line, (size_t)n - 1, &back, NULL, 0),
			 0);
	assert_memory_equal(&back, &c.ev[0], sizeof(back));
	/* too small a buffer is refused, not truncated */
	assert_int_equal(evlog_format(&c.ev[0], line, 20), -ENAMETOOLONG);
}

static void test_truncated_last_line(void **state)
{
	struct collect c = {0};
	struct evlog log;
	struct evlog_event ev = {0};
	size_t bad = 0;

	unlink(path);
	write_raw("{\"time\":1,\"type\":\"decide\",\"job\":7}\n"
		  "{\"time\":2,\"type\":\"requeue\",\"job\":7}\n"
		  "{\"time\":3,\"type\":\"comp"); /* crash mid-write */
	assert_int_equal(evlog_read(path, collect_fn, &c, &bad), 0);
	assert_int_equal(c.n, 2);
	assert_int_equal(bad, 1);
	assert_string_equal(c.ev[1].type, "requeue");

	/* the next writer cuts the partial line and appends cleanly */
	assert_int_equal(evlog_open(&log, path), 0);
	ev.time = 4;
	strcpy(ev.type, "complete");
	ev.job = 7;
	assert_int_equal(evlog_append(&log, &ev), 0);
	evlog_close(&log);
	memset(&c, 0, sizeof(c));
	assert_int_equal(evlog_read(path, collect_fn, &c, &bad), 0);
	assert_int_equal(bad, 0);
	assert_int_equal(c.n, 3);
	assert_string_equal(c.ev[2].type, "complete");
	assert_int_equal(c.ev[2].time, 4);
}

static void test_malformed_lines(void **state)
{
	static const char *const bad_lines[] = {
	    "not json",
	    "{}",
	    "{\"type\":\"x\"}", /* no time */
	    "{\"time\":1}",	/* no type */
	    "{\"time\":1,\"type\":\"x\"} trailing",
	    "{\"time\":1,\"type\":\"x\",\"job\":-1}",
	    "{\"time\":1,\"type\":\"x\",\"node\":\"unterminated}",
	    "{\"time\":1,\"type\":\"x\",\"text\":\"bad \\q escape\"}",
	    "{\"time\":1,\"type\":\"this type name is far too long\"}",
	};
	struct evlog_event ev;
	struct collect c = {0};
	size_t bad = 0;

	for (size_t i = 0; i < sizeof(bad_lines) / sizeof(bad_lines[0]); i++)
		assert_int_equal(evlog_parse_line(bad_lines[i],
						  strlen(bad_lines[i]), &ev,
						  NULL, 0),
				 -EINVAL);
	unlink(path);
	write_raw(
	    "garbage\n\n{\"time\":5,\"type\":\"drain\",\"node\":\"n1\",\"extra\":3}\n");
	assert_int_equal(evlog_read(path, collect_fn, &c, &bad), 0);
	assert_int_equal(c.n, 1);
	assert_int_equal(bad, 1);
	assert_string_equal(c.ev[0].node, "n1");
	/* a missing log reads as empty */
	unlink(path);
	c.n = 0;
	assert_int_equal(evlog_read(path, collect_fn, &c, &bad), 0);
	assert_int_equal(c.n, 0);
}

static int parse_err(const char *line, char *err, size_t errlen)
{
	struct evlog_event ev;

	return evlog_parse_line(line, strlen(line), &ev, err, errlen);
}

/* lines the hand-written writer of earlier versions wrote read the same */
static void test_old_lines_and_errors(void **state)
{
	const char *old = "{\"time\":1700000000,\"type\":\"decide\",\"job\":42,"
			  "\"uid\":1000,\"attempt\":2,\"kind\":\"failure\","
			  "\"text\":\"a\\u000ab\\u0009c \\\"q\\\"\"}";
	struct evlog_event ev;
	char err[160], line[EVLOG_LINE_MAX];

	assert_int_equal(
	    evlog_parse_line(old, strlen(old), &ev, err, sizeof(err)), 0);
	assert_int_equal(ev.job, 42);
	assert_string_equal(ev.text, "a\nb\tc \"q\"");
	/* and the new writer's line keeps the members in the same order */
	assert_true(evlog_format(&ev, line, sizeof(line)) > 0);
	assert_non_null(strstr(line, "{\"time\":1700000000,\"type\":\"decide\","
				     "\"job\":42,\"uid\":1000,\"attempt\":2,"));
	/* a bad line says what is wrong with it */
	assert_int_equal(parse_err("{\"time\":1,\"type\":\"x\",\"job\":-1}",
				   err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "'job' -1 is out of"));
	assert_int_equal(parse_err("{\"time\":1,", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "column"));
	assert_int_equal(
	    parse_err("{\"time\":\"1\",\"type\":\"x\"}", err, sizeof(err)),
	    -EINVAL);
	assert_non_null(strstr(err, "time"));
	/* a reason that is not UTF-8 is still logged, never as broken JSON */
	strcpy(ev.text, "caf\xe9 down");
	assert_true(evlog_format(&ev, line, sizeof(line)) > 0);
	assert_non_null(strstr(line, "\"text\":\"caf? down\"}"));
}

struct seen {
	int n;
	uint32_t jobs[64];
	int64_t times[64];
	uint32_t last_job;
	int64_t last_time;
};

static int seen_fn(const struct evlog_event *ev, void *arg)
{
	struct seen *t = arg;

	if (t->n < 64) {
		t->jobs[t->n] = ev->job;
		t->times[t->n] = ev->time;
	}
	t->n++;
	t->last_job = ev->job;
	t->last_time = ev->time;
	return 0;
}

static struct seen history(const struct evlog *log, uint32_t job,
			   int64_t since, bool all, uint32_t uid, long budget,
			   bool *cut)
{
	struct evlog_filter flt = {job, since, all, uid};
	struct seen t = {0};

	assert_int_equal(evlog_history(log, &flt, budget, seen_fn, &t, cut),
			 0);
	return t;
}

/* the history asked of log both open and reopened (indexed from the file) */
static void check_history(struct evlog *log)
{
	struct seen t;
	bool cut;

	/* a user's own job behind 6 MB of another user's events */
	t = history(log, 0, 0, false, 1000, 4L << 20, &cut);
	assert_int_equal(t.n, 2);
	assert_int_equal(t.jobs[0], 7);
	assert_int_equal(t.times[0], 100);
	assert_int_equal(t.times[1], 200);
	assert_false(cut);
	/* the other user's, the newest that fit, oldest first */
	t = history(log, 0, 0, false, 1001, 10000, &cut);
	assert_true(cut);
	assert_true(t.n > 10 && t.n < 100);
	assert_int_equal(t.last_job, 8);
	assert_int_equal(t.last_time, 30000);
	assert_int_equal(t.times[0], 30000 - t.n + 1);
	/* an admin's, by job and by time */
	t = history(log, 7, 0, true, 0, 4L << 20, &cut);
	assert_int_equal(t.n, 2);
	t = history(log, 7, 150, true, 0, 4L << 20, &cut);
	assert_int_equal(t.n, 1);
	assert_int_equal(t.times[0], 200);
	t = history(log, 0, 29990, true, 0, 4L << 20, &cut);
	assert_int_equal(t.n, 10 + 1 + 1); /* job 8's, job 7's, the pool's */
	assert_int_equal(t.last_job, 0);
	/* a user sees no event of no job */
	t = history(log, 0, 29990, false, 0, 4L << 20, &cut);
	assert_int_equal(t.n, 0);
}

/* a signal event of user 1000's job 7 at time */
static void job7_signal(struct evlog_event *ev, int64_t time)
{
	memset(ev, 0, sizeof(*ev));
	strcpy(ev->type, "signal");
	ev->time = time;
	ev->job = 7;
	ev->uid = 1000;
}

static bool keep_job7(const struct evlog_event *ev, void *arg)
{
	(void)arg;
	return ev->job == 7 || !ev->job;
}

/*
 * history through the index: a user's own events are found however many
 * other events follow them, each reply reads a bounded number of bytes,
 * the index is built again from the file (reopened, compacted), and lines
 * that do not parse are never in it.
 */
static void test_history_index(void **state)
{
	struct evlog log;
	struct evlog_event ev = {0};
	struct seen t;
	bool cut;

	char line[EVLOG_LINE_MAX];
	FILE *f;

	(void)state;
	/* written in bulk, indexed when opened */
	unlink(path);
	f = fopen(path, "w");
	assert_non_null(f);
	job7_signal(&ev, 100);
	fwrite(line, 1, (size_t)evlog_format(&ev, line, sizeof(line)), f);
	strcpy(ev.type, "relaunch");
	memset(ev.text, 'x', 190);
	ev.job = 8;
	ev.uid = 1001;
	for (int i = 1; i <= 30000; i++) {
		ev.time = i;
		ev.launch = i;
		fwrite(line, 1, (size_t)evlog_format(&ev, line, sizeof(line)),
		       f);
	}
	assert_int_equal(fclose(f), 0);
	/* then appended, indexed as they go */
	assert_int_equal(evlog_open(&log, path), 0);
	job7_signal(&ev, 200);
	assert_int_equal(evlog_append(&log, &ev), 0);
	write_raw("{\"time\":300,\"type\":\"signal\",\"job\":7,\"uid\":bad}\n");
	memset(&ev, 0, sizeof(ev));
	strcpy(ev.type, "spare_add");
	ev.time = 30000;
	strcpy(ev.node, "n6");
	assert_int_equal(evlog_append(&log, &ev), 0);
	check_history(&log);
	evlog_close(&log);
	assert_int_equal(evlog_open(&log, path), 0);
	check_history(&log);
	/* compacted to job 7's and the pool's: indexed anew, and appended to */
	assert_int_equal(evlog_compact(&log, keep_job7, NULL, NULL, 1), 0);
	t = history(&log, 0, 0, true, 0, 4L << 20, &cut);
	assert_int_equal(t.n, 3);
	job7_signal(&ev, 400);
	assert_int_equal(evlog_append(&log, &ev), 0);
	t = history(&log, 7, 0, false, 1000, 4L << 20, &cut);
	assert_int_equal(t.n, 3);
	assert_int_equal(t.last_time, 400);
	evlog_close(&log);
	snprintf(ev.text, sizeof(ev.text), "%s.1", path);
	unlink(ev.text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_round_trip),
	    cmocka_unit_test(test_truncated_last_line),
	    cmocka_unit_test(test_malformed_lines),
	    cmocka_unit_test(test_old_lines_and_errors),
	    cmocka_unit_test(test_history_index),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
