/*
 * ckpt.c - create the job's checkpoint directory as the job's user.
 *
 * Root never creates anything inside a directory the user controls. Under
 * the admin's ckpt_root, root creates only ckpt_root/USER (mkdirat, then
 * openat with O_NOFOLLOW, then fchown); everything below, and a path the
 * user chose with --sigma-ckpt-dir, is created by a child process that has
 * dropped to the user's uid and gid. The last component is opened with
 * O_NOFOLLOW: a symbolic link planted there is refused.
 */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sigma.h"
#include "sigma_spank.h"

/* exit codes of the child: an errno below 126 */
#define CKPT_EXIT_SETID 126

/* open a directory component, never following a link */
static int ckpt_open_dir(int dirfd, const char *name)
{
	return openat(dirfd, name,
		      O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/*
 * Walk path from "/" creating missing components (mode 0700), as the
 * calling user. Intermediate existing links are followed (the user could
 * follow them anyway); the last component must not be a link. Returns 0
 * or an errno. Async-signal-safe: runs in a forked child.
 */
static int ckpt_walk(const char *path, uid_t uid)
{
	char comp[256];
	const char *p = path;
	int fd, next;
	struct stat st;

	fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return errno;
	while (*p) {
		size_t n;
		bool last;

		while (*p == '/')
			p++;
		if (!*p)
			break;
		n = strcspn(p, "/");
		if (n >= sizeof(comp)) {
			close(fd);
			return ENAMETOOLONG;
		}
		memcpy(comp, p, n);
		comp[n] = '\0';
		p += n;
		while (*p == '/')
			p++;
		last = (*p == '\0');
		if (mkdirat(fd, comp, 0700) < 0 && errno != EEXIST) {
			int e = errno;

			close(fd);
			return e;
		}
		if (last)
			next = ckpt_open_dir(fd, comp);
		else
			next = openat(fd, comp,
				      O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (next < 0) {
			int e = errno;

			close(fd);
			/* O_NOFOLLOW on a link gives ELOOP (or ENOTDIR) */
			return (last && (e == ELOOP || e == ENOTDIR)) ? ELOOP
								      : e;
		}
		close(fd);
		fd = next;
	}
	if (fstat(fd, &st) < 0) {
		int e = errno;

		close(fd);
		return e;
	}
	close(fd);
	if (st.st_uid != uid)
		return EPERM;
	return 0;
}

/* ckpt_root/USER, made by root with the user as owner; returns 0 or -errno */
static int ckpt_make_user_dir(const char *path, const char *ckpt_root,
			      uid_t uid, gid_t gid, char *err, size_t errlen)
{
	size_t rlen = strlen(ckpt_root);
	char comp[256];
	const char *p;
	struct stat st;
	int rfd, ufd, rc = 0;
	size_t n;

	while (rlen > 1 && ckpt_root[rlen - 1] == '/')
		rlen--;
	if (strncmp(path, ckpt_root, rlen) || path[rlen] != '/')
		return 0; /* not under ckpt_root: all of it is the user's */
	p = path + rlen + 1;
	n = strcspn(p, "/");
	if (n == 0 || n >= sizeof(comp))
		return sigma_set_err(err, errlen, EINVAL,
				     "bad checkpoint path %s", path);
	memcpy(comp, p, n);
	comp[n] = '\0';
	rfd = open(ckpt_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rfd < 0)
		return sigma_set_err(err, errlen, errno, "ckpt_root %s: %s",
				     ckpt_root, strerror(errno));
	if (mkdirat(rfd, comp, 0700) < 0 && errno != EEXIST) {
		rc = sigma_set_err(err, errlen, errno, "mkdir %s/%s: %s",
				   ckpt_root, comp, strerror(errno));
		goto out_close_root;
	}
	ufd = ckpt_open_dir(rfd, comp);
	if (ufd < 0) {
		rc = sigma_set_err(err, errlen, errno,
				   "%s/%s: %s (a symbolic link is refused)",
				   ckpt_root, comp, strerror(errno));
		goto out_close_root;
	}
	if (fstat(ufd, &st) < 0) {
		rc = sigma_set_err(err, errlen, errno, "%s/%s: %s", ckpt_root,
				   comp, strerror(errno));
		goto out_close_user;
	}
	if (st.st_uid == 0 && uid != 0 && st.st_nlink == 2) {
		/* root just made it (or an empty one of root's): hand it over
		 */
		if (fchown(ufd, uid, gid) < 0) {
			rc =
			    sigma_set_err(err, errlen, errno, "chown %s/%s: %s",
					  ckpt_root, comp, strerror(errno));
			goto out_close_user;
		}
	} else if (st.st_uid != uid) {
		rc = sigma_set_err(
		    err, errlen, EPERM,
		    "%s/%s is owned by uid %u, not the job's user %u",
		    ckpt_root, comp, (unsigned)st.st_uid, (unsigned)uid);
	}
out_close_user:
	close(ufd);
out_close_root:
	close(rfd);
	return rc;
}

int sigma_ckpt_create(const char *path, const char *ckpt_root, uid_t uid,
		      gid_t gid, char *err, size_t errlen)
{
	int status, rc;
	pid_t pid;

	if (!path || path[0] != '/')
		return sigma_set_err(err, errlen, EINVAL,
				     "checkpoint path must be absolute");
	if (ckpt_root && ckpt_root[0]) {
		rc = ckpt_make_user_dir(path, ckpt_root, uid, gid, err, errlen);
		if (rc < 0)
			return rc;
	}
	pid = fork();
	if (pid < 0)
		return sigma_set_err(err, errlen, errno, "fork: %s",
				     strerror(errno));
	if (pid == 0) {
		/* drop to the user for good before touching the path */
		if (getuid() == 0 &&
		    (setgroups(1, &gid) < 0 || setresgid(gid, gid, gid) < 0 ||
		     setresuid(uid, uid, uid) < 0))
			_exit(CKPT_EXIT_SETID);
		if (getuid() != uid)
			_exit(CKPT_EXIT_SETID);
		umask(077);
		_exit(ckpt_walk(path, uid));
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return sigma_set_err(err, errlen, errno, "waitpid: %s",
					     strerror(errno));
	if (!WIFEXITED(status))
		return sigma_set_err(err, errlen, EINTR,
				     "creating %s: child killed", path);
	rc = WEXITSTATUS(status);
	if (rc == 0)
		return 0;
	if (rc == CKPT_EXIT_SETID)
		return sigma_set_err(err, errlen, EPERM,
				     "cannot switch to uid %u gid %u",
				     (unsigned)uid, (unsigned)gid);
	if (rc == ELOOP)
		return sigma_set_err(
		    err, errlen, ELOOP,
		    "%s is a symbolic link or not a directory: refused", path);
	if (rc == EPERM)
		return sigma_set_err(err, errlen, EPERM,
				     "%s is not owned by uid %u", path,
				     (unsigned)uid);
	return sigma_set_err(err, errlen, rc, "creating %s as uid %u: %s", path,
			     (unsigned)uid, strerror(rc));
}

int sigma_ckpt_check(const char *path, uid_t uid, char *err, size_t errlen)
{
	struct stat st;

	if (lstat(path, &st) < 0)
		return sigma_set_err(err, errlen, errno, "%s: %s", path,
				     strerror(errno));
	if (S_ISLNK(st.st_mode))
		return sigma_set_err(err, errlen, ELOOP,
				     "%s is a symbolic link: refused", path);
	if (!S_ISDIR(st.st_mode))
		return sigma_set_err(err, errlen, ENOTDIR,
				     "%s is not a directory", path);
	if (st.st_uid != uid)
		return sigma_set_err(err, errlen, EPERM,
				     "%s is owned by uid %u, not %u", path,
				     (unsigned)st.st_uid, (unsigned)uid);
	return 0;
}
