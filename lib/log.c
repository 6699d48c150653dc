/*
 * log.c - one logger for the programs and the plugin: a prefix, a level, and
 * a sink (stderr by default; the plugin installs one that calls Slurm's log
 * functions; daemons add a file or syslog).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "sigma.h"

static char log_ident[32] = "sigma";
static int log_level = SIGMA_LOG_INFO;
static sigma_log_sink_fn log_sink;
static void *log_sink_arg;
static int log_fd = -1;
static bool log_syslog;

static const char *const level_names[] = { "error", "warning", "info", "debug" };

void sigma_log_init(const char *ident, int level)
{
	if (ident)
		sigma_strlcpy(log_ident, ident, sizeof(log_ident));
	sigma_log_set_level(level);
}

void sigma_log_set_level(int level)
{
	if (level < SIGMA_LOG_ERROR)
		level = SIGMA_LOG_ERROR;
	if (level > SIGMA_LOG_DEBUG)
		level = SIGMA_LOG_DEBUG;
	log_level = level;
}

void sigma_log_set_sink(sigma_log_sink_fn fn, void *arg)
{
	log_sink = fn;
	log_sink_arg = arg;
}

int sigma_log_open_file(const char *path)
{
	struct stat st;
	int fd;

	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0640);
	if (fd < 0)
		return -errno;
	/* a file someone else owns or may write could be made to say anything */
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    (st.st_mode & (S_IWGRP | S_IWOTH)) ||
	    (st.st_uid != geteuid() && st.st_uid != 0) || st.st_nlink != 1) {
		close(fd);
		return -EPERM;
	}
	if (log_fd >= 0)
		close(log_fd);
	log_fd = fd;
	return 0;
}

void sigma_log_use_syslog(bool on)
{
	if (on && !log_syslog)
		openlog(log_ident, LOG_PID, LOG_DAEMON);
	else if (!on && log_syslog)
		closelog();
	log_syslog = on;
}

void sigma_log_close(void)
{
	if (log_fd >= 0)
		close(log_fd);
	log_fd = -1;
	sigma_log_use_syslog(false);
}

static void log_write_fd(int fd, int level, const char *msg)
{
	char line[2048 + 128], stamp[32];
	struct timespec ts;
	struct tm tm;
	int n;

	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
	n = snprintf(line, sizeof(line), "[%s.%03ld] %s: %s: %s\n", stamp,
		     ts.tv_nsec / 1000000, log_ident, level_names[level], msg);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(line))
		n = sizeof(line) - 1;
	/* one write per line: lines from several processes do not interleave */
	if (write(fd, line, (size_t)n) < 0)
		return;
}

void sigma_vlog(int level, const char *fmt, va_list ap)
{
	static const int prio[] = { LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG };
	char msg[2048];

	if (level > log_level)
		return;
	if (level < SIGMA_LOG_ERROR)
		level = SIGMA_LOG_ERROR;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (log_sink) {
		log_sink(level, msg, log_sink_arg);
		return;
	}
	if (log_syslog)
		syslog(prio[level], "%s", msg);
	if (log_fd >= 0)
		log_write_fd(log_fd, level, msg);
	if (log_fd < 0 && !log_syslog)
		fprintf(stderr, "%s: %s%s%s\n", log_ident,
			level == SIGMA_LOG_INFO ? "" : level_names[level],
			level == SIGMA_LOG_INFO ? "" : ": ", msg);
}

void sigma_log(int level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	sigma_vlog(level, fmt, ap);
	va_end(ap);
}
