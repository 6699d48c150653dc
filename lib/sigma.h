/*
 * sigma.h - the small internal library shared by the SPANK plugin, the admin
 * programs and the trainer: logging, the key=value configuration parser,
 * bounded string and number parsing, and careful file helpers.
 *
 * Conventions: functions that act return 0 or a negative errno; predicates
 * return bool; nothing here calls exit() (the plugin lives inside slurmd,
 * slurmstepd and srun). Error text goes into a caller-owned buffer.
 */
#ifndef SIGMA_H
#define SIGMA_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SIGMA_PRINTF(a, b) __attribute__((format(printf, a, b)))

/* ---- logging (log.c) ------------------------------------------------------ */

enum sigma_log_level {
	SIGMA_LOG_ERROR = 0,
	SIGMA_LOG_WARN = 1,
	SIGMA_LOG_INFO = 2,
	SIGMA_LOG_DEBUG = 3,
};

/* A sink receives each formatted message (no trailing newline). */
typedef void (*sigma_log_sink_fn)(int level, const char *msg, void *arg);

/* ident prefixes every line ("sigmad: ..."); messages above level dropped. */
void sigma_log_init(const char *ident, int level);
void sigma_log_set_level(int level);
/* Replace the default stderr sink (NULL restores it). */
void sigma_log_set_sink(sigma_log_sink_fn fn, void *arg);
/*
 * Append to a log file as well as/instead of stderr. Refuses a symlink, a
 * hard link, a file owned by anyone but this process's user or root, and a
 * group- or world-writable one. Returns 0 or -errno (-EPERM for those).
 */
int sigma_log_open_file(const char *path);
void sigma_log_use_syslog(bool on);
void sigma_log_close(void);
void sigma_log(int level, const char *fmt, ...) SIGMA_PRINTF(2, 3);
void sigma_vlog(int level, const char *fmt, va_list ap) SIGMA_PRINTF(2, 0);

#define sigma_error(...) sigma_log(SIGMA_LOG_ERROR, __VA_ARGS__)
#define sigma_warn(...) sigma_log(SIGMA_LOG_WARN, __VA_ARGS__)
#define sigma_info(...) sigma_log(SIGMA_LOG_INFO, __VA_ARGS__)
#define sigma_debug(...) sigma_log(SIGMA_LOG_DEBUG, __VA_ARGS__)

/* ---- strings and numbers (str.c) ------------------------------------------ */

/*
 * Copy at most size-1 bytes and always terminate. Returns strlen(src): the
 * copy was truncated when the result is >= size.
 */
size_t sigma_strlcpy(char *dst, const char *src, size_t size);
/* snprintf that returns -ENAMETOOLONG instead of truncating silently. */
int sigma_snprintf(char *dst, size_t size, const char *fmt, ...) SIGMA_PRINTF(3, 4);
/* Format into err (may be NULL); returns -code so callers can return it. */
int sigma_set_err(char *err, size_t errlen, int code, const char *fmt, ...) SIGMA_PRINTF(4, 5);

/*
 * Parse a whole string as a number in [min, max]. No trailing garbage, no
 * empty string. Returns 0, -EINVAL (not a number) or -ERANGE.
 */
int sigma_parse_long(const char *s, long min, long max, long *out);
/*
 * The same for the setting what (a flag or a variable's name), with err
 * in the words every setting uses: "WHAT S is out of range [MIN, MAX]"
 * or "WHAT \"S\" is not a whole number".
 */
int sigma_parse_long_named(const char *what, const char *s, long min,
			   long max, long *out, char *err, size_t len);
int sigma_parse_double(const char *s, double min, double max, double *out);
/* yes/no, true/false, on/off, 1/0 (case-insensitive). */
int sigma_parse_bool(const char *s, bool *out);
/* Whether name is one of the words of a comma-separated list (NULL: none). */
bool sigma_list_has(const char *list, const char *name);
/* Append name to a list of size bytes: 0 (also when it is there already) or
 * -ENAMETOOLONG, the list unchanged. */
int sigma_list_add(char *list, size_t size, const char *name);
/* Remove every word equal to name (and empty words); the rest keep their
 * order. */
void sigma_list_del(char *list, const char *name);
/* How many words ("" has none). */
size_t sigma_list_count(const char *list);
/* Index of s in a NULL-terminated list of names, or -EINVAL. */
int sigma_parse_enum(const char *s, const char *const names[]);
/* "a|b|c" from a NULL-terminated list, for error messages. */
const char *sigma_enum_list(const char *const names[], char *buf, size_t size);

/*
 * s with every control byte, DEL and backslash written as \xHH, so that a
 * string a user sent can be logged or printed to a terminal. Truncated to
 * fit out (always terminated). Returns out.
 */
const char *sigma_escape(const char *s, char *out, size_t size);

/*
 * How people read times (sigmactl): a duration as "45s", "3m12s",
 * "2h05m", "3d04h" (two units, the larger first; negative reads as 0s),
 * and a moment as local time "2026-01-05 14:03:12 CET". Both truncate to
 * fit out (24 bytes is always enough for the duration, 64 for the time)
 * and return out.
 */
const char *sigma_format_duration(int64_t secs, char *out, size_t size);
const char *sigma_format_time(int64_t t, char *out, size_t size);

/* ---- Prometheus text format (metrics.c) --------------------------------- */

/*
 * A metrics file for node_exporter's textfile collector, built in the
 * caller's buffer: a family's HELP and TYPE lines, then its samples. Label
 * values are escaped; a sample that does not fit is left out whole and
 * the builder is full from then on. Names and label keys are the caller's
 * constants (Prometheus naming: sigma_..._total, _seconds, base units).
 */
struct sigma_metrics {
	char *buf;
	size_t size, used;
	bool full;
};

void sigma_metrics_init(struct sigma_metrics *m, char *buf, size_t size);
/* type: counter, gauge or histogram */
void sigma_metrics_family(struct sigma_metrics *m, const char *name,
			  const char *type, const char *help);
/* name{k1="v1",...} value; the labels are key, value pairs ending in NULL */
void sigma_metrics_sample(struct sigma_metrics *m, const char *name,
			  double value, ...);
/* The length of the text, or -ENOSPC when something did not fit. */
int sigma_metrics_end(const struct sigma_metrics *m);
/* Write it to path atomically (mode 0644); 0, -ENOSPC or -errno. */
int sigma_metrics_write(const struct sigma_metrics *m, const char *path);

/* ---- key=value configuration (kv.c) --------------------------------------- */

#define SIGMA_KV_MAX_KEY 64
#define SIGMA_KV_MAX_VALUE 1024
#define SIGMA_KV_MAX_LINE 4096

/*
 * Called for each key=value. Returns 0 to go on, or a negative errno after
 * writing the reason into err (the parser prefixes the location).
 */
typedef int (*sigma_kv_fn)(const char *key, const char *value, void *arg,
			   char *err, size_t errlen);

/* One "key=value" word (plugstack.conf arguments). */
int sigma_kv_parse_word(const char *word, sigma_kv_fn fn, void *arg,
			char *err, size_t errlen);
/* Words "key=value" in one string, separated by spaces or commas (at
 * most SIGMA_KV_MAX_LINE bytes); stops at the first error. */
int sigma_kv_parse_words(const char *words, sigma_kv_fn fn, void *arg,
			 char *err, size_t errlen);
/* argv-style words, each "key=value"; stops at the first error. */
int sigma_kv_parse_argv(int argc, char *const argv[], sigma_kv_fn fn,
			void *arg, char *err, size_t errlen);
/*
 * A buffer of lines: blank lines and '#' comments are skipped, whitespace
 * around key and value is trimmed. name labels errors ("sigma.conf:12: ...").
 */
int sigma_kv_parse_buf(const char *buf, size_t len, const char *name,
		       sigma_kv_fn fn, void *arg, char *err, size_t errlen);
/* A file, read whole (at most 1 MiB), then as sigma_kv_parse_buf. */
int sigma_kv_parse_file(const char *path, sigma_kv_fn fn, void *arg,
			char *err, size_t errlen);

/* ---- files (file.c) ------------------------------------------------------- */

/*
 * Read a regular file whole into a new NUL-terminated buffer (caller frees
 * *out). Refuses more than max bytes with -EFBIG.
 */
int sigma_file_read(const char *path, size_t max, char **out, size_t *len);
/*
 * Write buf to path atomically: a temporary file in the same directory,
 * fsync, rename over path, fsync the directory. Never leaves a partial file.
 */
int sigma_file_write_atomic(const char *path, const void *buf, size_t len,
			    mode_t mode);
/*
 * True when path is a regular file or directory (not a symlink), owned by
 * uid, and not group- or world-writable. err says why not.
 */
bool sigma_file_is_trusted(const char *path, uid_t uid, char *err,
			   size_t errlen);
/* open path with flags (O_RDONLY, or with O_DIRECTORY) and fsync it: 0 or
 * -errno */
int sigma_fsync_path(const char *path, int flags);
/* fsync the directory that holds path (a rename in it is then durable):
 * 0 or -errno */
int sigma_fsync_dir_of(const char *path);
/* mkdir -p; existing directories are fine. */
int sigma_mkdir_p(const char *path, mode_t mode);
/*
 * sigma_mkdir_p, then path must be a directory (not a link) of this
 * process's user that no one else may write: for what root keeps (sigmad's
 * state and socket directories, the probe's state). A directory found there
 * already is not taken on trust. 0, or -errno with the reason in err.
 */
int sigma_mkdir_owned(const char *path, mode_t mode, char *err,
		      size_t errlen);
/* Monotonic and wall clocks in milliseconds; the monotonic one in ns. */
uint64_t sigma_now_ms(void);
uint64_t sigma_now_ns(void);
uint64_t sigma_wall_ms(void);

/* ---- children of root code (child.c) ------------------------------------- */

/*
 * In a freshly forked child: empty the signal mask, every disposition back
 * to default, and every descriptor above 2 closed, except keep_fd (-1 for
 * none), which becomes descriptor 3. Returns 0 or -errno.
 */
int sigma_child_reset(int keep_fd);

/* Work done in a child: 0 or -errno, with the reason written into err. */
typedef int (*sigma_child_fn)(void *arg, char *err, size_t errlen);
/*
 * Run fn(arg) in a forked child (reset as above) and return its result
 * and message. A child that has not answered within timeout_ms is killed:
 * -ETIMEDOUT. The caller never waits much longer than timeout_ms, even for
 * a child stuck in a hung file system.
 */
int sigma_child_call(sigma_child_fn fn, void *arg, long timeout_ms, char *err,
		     size_t errlen);

#endif /* SIGMA_H */
