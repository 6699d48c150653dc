/*
 * file.c - file helpers that never leave a partial file behind and never
 * follow a link they were not asked to follow.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sigma.h"

int sigma_file_read(const char *path, size_t max, char **out, size_t *len)
{
	struct stat st;
	char *buf = NULL;
	size_t got = 0;
	int fd, rc = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		goto out_close;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = -EINVAL;
		goto out_close;
	}
	if ((size_t)st.st_size > max) {
		rc = -EFBIG;
		goto out_close;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		rc = -ENOMEM;
		goto out_close;
	}
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			goto out_free;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	buf[got] = '\0';
	*out = buf;
	if (len)
		*len = got;
	buf = NULL;
out_free:
	free(buf);
out_close:
	close(fd);
	return rc;
}

static int write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int sigma_file_write_atomic(const char *path, const void *buf, size_t len,
			    mode_t mode)
{
	char tmp[PATH_MAX];
	int fd, rc;

	rc = sigma_snprintf(tmp, sizeof(tmp), "%s.tmp.XXXXXX", path);
	if (rc < 0)
		return rc;
	fd = mkstemp(tmp);
	if (fd < 0)
		return -errno;
	rc = write_all(fd, buf, len);
	if (!rc && fchmod(fd, mode) < 0)
		rc = -errno;
	if (!rc && fsync(fd) < 0)
		rc = -errno;
	if (close(fd) < 0 && !rc)
		rc = -errno;
	if (!rc && rename(tmp, path) < 0)
		rc = -errno;
	if (rc) {
		unlink(tmp);
		return rc;
	}
	/* the rename is durable only once the directory is synced */
	(void)sigma_fsync_dir_of(path);
	return 0;
}

int sigma_fsync_path(const char *path, int flags)
{
	int fd = open(path, flags | O_CLOEXEC), rc = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		rc = -errno;
	close(fd);
	return rc;
}

int sigma_fsync_dir_of(const char *path)
{
	char dir[PATH_MAX];

	if (sigma_strlcpy(dir, path, sizeof(dir)) >= sizeof(dir))
		return -ENAMETOOLONG;
	return sigma_fsync_path(dirname(dir), O_RDONLY | O_DIRECTORY);
}

bool sigma_file_is_trusted(const char *path, uid_t uid, char *err,
			   size_t errlen)
{
	struct stat st;

	if (lstat(path, &st) < 0) {
		sigma_set_err(err, errlen, errno, "%s: %s", path, strerror(errno));
		return false;
	}
	if (S_ISLNK(st.st_mode)) {
		sigma_set_err(err, errlen, EPERM, "%s is a symbolic link", path);
		return false;
	}
	if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
		sigma_set_err(err, errlen, EPERM,
			      "%s is not a regular file or directory", path);
		return false;
	}
	if (st.st_uid != uid) {
		sigma_set_err(err, errlen, EPERM, "%s is owned by uid %u, not %u",
			      path, (unsigned)st.st_uid, (unsigned)uid);
		return false;
	}
	if (st.st_mode & (S_IWGRP | S_IWOTH)) {
		sigma_set_err(err, errlen, EPERM,
			      "%s is group- or world-writable (mode %04o)", path,
			      (unsigned)(st.st_mode & 07777));
		return false;
	}
	return true;
}

int sigma_mkdir_p(const char *path, mode_t mode)
{
	char buf[PATH_MAX];
	size_t len;

	if (sigma_strlcpy(buf, path, sizeof(buf)) >= sizeof(buf))
		return -ENAMETOOLONG;
	len = strlen(buf);
	for (size_t i = 1; i <= len; i++) {
		if (buf[i] != '/' && buf[i] != '\0')
			continue;
		buf[i] = '\0';
		if (mkdir(buf, mode) < 0 && errno != EEXIST)
			return -errno;
		if (i < len)
			buf[i] = '/';
	}
	return 0;
}

int sigma_mkdir_owned(const char *path, mode_t mode, char *err,
		      size_t errlen)
{
	struct stat st;
	int rc = sigma_mkdir_p(path, mode);

	if (rc)
		return sigma_set_err(err, errlen, -rc, "cannot make %s: %s",
				     path, strerror(-rc));
	if (!sigma_file_is_trusted(path, geteuid(), err, errlen))
		return -EPERM;
	if (lstat(path, &st) < 0 || !S_ISDIR(st.st_mode))
		return sigma_set_err(err, errlen, ENOTDIR,
				     "%s is not a directory", path);
	return 0;
}

uint64_t sigma_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000 + (uint64_t)ts.tv_nsec;
}

uint64_t sigma_now_ms(void)
{
	return sigma_now_ns() / 1000000;
}

uint64_t sigma_wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}
