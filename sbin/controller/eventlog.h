/*
 * eventlog.h - sigmad's append-only event log: one JSON object per line,
 * each line written whole and fsync'd before sigmad acts on it.
 *
 * The reader survives a crash mid-write: a last line without its newline is
 * skipped (and cut off by the next writer), a malformed line is counted and
 * skipped, so a damaged tail never hides the history before it.
 */
#ifndef SIGMAD_EVENTLOG_H
#define SIGMAD_EVENTLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EVLOG_TYPE_MAX 24
#define EVLOG_NODE_MAX 256
#define EVLOG_TEXT_MAX 512
#define EVLOG_LINE_MAX 2048

/*
 * Event types (the "type" field). A recovery is a "decide" record followed
 * by its steps, then "complete":
 *   decide    job attempt node=bad nodes spare=picked kind verdict text
 *   drain     node text          signal   job attempt
 *   release   node=spare job     requeue  job attempt
 *   complete  job attempt text   give_up  job attempt text
 *   repair    node rc text       return   node kind=pool|service
 *   spare_add node uid           spare_remove node uid
 *   resume    node uid           start / stop (sigmad itself)
 *   suspect   job uid node rc=its probe's verdict=judged|refused text
 */
struct evlog_event {
	int64_t time; /* seconds since the epoch */
	char type[EVLOG_TYPE_MAX];
	uint32_t job;  /* 0: none */
	uint32_t uid;  /* job owner or requesting user */
	int attempt;   /* 0: none */
	int rc;	       /* probe exit code, or 0 */
	int launch;    /* relaunch: the launcher's launch number, or 0 */
	char kind[16]; /* failure|warning|pool|service */
	char verdict[16];
	char node[EVLOG_NODE_MAX];  /* node or node list */
	char spare[EVLOG_NODE_MAX]; /* spares picked or released */
	char text[EVLOG_TEXT_MAX];
};

/*
 * The index of an open log: where each whole, valid line is, and what a
 * history request filters on, so that a request reads only its own lines.
 */
struct evlog_entry {
	int64_t off;   /* the line's first byte in the file */
	int64_t time;  /* the event's */
	uint32_t len;  /* with its '\n' */
	uint32_t job;  /* the event's, 0: none */
	uint32_t uid;  /* the event's */
};

struct evlog {
	int fd;
	char path[4096];
	struct evlog_entry *idx; /* in file order */
	size_t n, cap;
};

/*
 * Open for appending (created 0600); a partial last line is cut off, and
 * the index is built from the lines there.
 */
int evlog_open(struct evlog *log, const char *path);
/* Append one event, fsync it and index it. Returns 0 or -errno. */
int evlog_append(struct evlog *log, const struct evlog_event *ev);
void evlog_close(struct evlog *log);

/*
 * One event as a JSON line with its '\n' (compact, members in a fixed
 * order, zero and empty ones left out; a string that is not UTF-8 has its
 * bytes above 0x7f written as '?'). Returns its length, or -ENAMETOOLONG
 * when it does not fit size (nothing usable is left in buf).
 */
int evlog_format(const struct evlog_event *ev, char *buf, size_t size);
/*
 * Parse one line (without '\n'): 0, or -EINVAL with what is wrong in err
 * (may be NULL). Members sigma does not know are skipped.
 */
int evlog_parse_line(const char *line, size_t len, struct evlog_event *ev,
		     char *err, size_t errlen);

/* Called for each event read; return nonzero to stop. */
typedef int (*evlog_fn)(const struct evlog_event *ev, void *arg);

/*
 * Read path from the start; calls fn for each whole, valid line. *bad counts
 * skipped lines (truncated or malformed; may be NULL); the first of them is
 * logged with its line number and what is wrong. A missing file reads as
 * empty. Returns 0, fn's nonzero value, or -errno.
 */
int evlog_read(const char *path, evlog_fn fn, void *arg, size_t *bad);
/* the events a history request asks for */
struct evlog_filter {
	uint32_t job;  /* 0: every job's */
	int64_t since; /* events at or after it */
	bool all;      /* every user's events, and those of no job */
	uint32_t uid;  /* when not all: this user's jobs' events alone */
};

/*
 * The events of log that flt lets through, oldest first: chosen in the
 * index, then read line by line, the newest budget bytes of them at most
 * (a bounded read, for requests answered in sigmad's loop, however long
 * the log and however many other events it holds). *cut (may be NULL)
 * gets true when older ones were left out. Returns 0, fn's nonzero
 * value, or -errno.
 */
int evlog_history(const struct evlog *log, const struct evlog_filter *flt,
		  long budget, evlog_fn fn, void *arg, bool *cut);

/* the log file's size in bytes, or -errno */
long long evlog_size(const struct evlog *log);

/* Called for each event a compaction reads: true keeps it. */
typedef bool (*evlog_keep_fn)(const struct evlog_event *ev, void *arg);

/*
 * Compact the log: a new file holds the events keep() keeps, in their
 * order, then tail (may be NULL), and takes the log's place. The old file
 * becomes PATH.1 (PATH.1 becomes PATH.2, and so on; PATH.<archives> is
 * dropped). Every step is a link(2) or a rename(2) after the new file is
 * on disk, so a crash at any point leaves PATH the old log or the new one,
 * never neither. log is reopened on the new file. 0, or -errno with the
 * log left as it was (a full disk, say).
 */
int evlog_compact(struct evlog *log, evlog_keep_fn keep, void *arg,
		  const struct evlog_event *tail, int archives);

#endif /* SIGMAD_EVENTLOG_H */
