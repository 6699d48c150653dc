/*
 * ckpt.c - create the job's checkpoint directory as the job's user.
 *
 * Root never creates anything inside a directory the user controls. Under
 * the admin's ckpt_root, root creates only ckpt_root/USER for the job's own
 * user (mkdirat, then openat with O_NOFOLLOW, then fchown, and only when
 * its mkdirat made it); everything below, and a path outside ckpt_root, is
 * created by the same child after it has dropped to the user's uid and gid.
 * The last component is opened with O_NOFOLLOW: a symbolic link planted
 * there is refused. The child has a deadline: a path on a hung file system
 * fails the job, never the prolog.
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
#include <unistd.h>

#include "sigma.h"
#include "sigma_spank.h"

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

/*
 * ckpt_root/NAME for the job's user, as root. Only a directory that this
 * very mkdirat made is handed over: it is then opened without following
 * links, and its device and inode must be those mkdirat left in ckpt_root,
 * on ckpt_root's own device. An existing one must already be the user's.
 * Returns 0 or -errno.
 */
static int ckpt_make_user_dir(const char *ckpt_root, const char *name,
			      uid_t uid, gid_t gid, char *err, size_t errlen)
{
	struct stat rst, made, st;
	bool created = false;
	int rfd, ufd, rc = 0;

	rfd = open(ckpt_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rfd < 0)
		return sigma_set_err(err, errlen, errno, "ckpt_root %s: %s",
				     ckpt_root, strerror(errno));
	if (fstat(rfd, &rst) < 0) {
		rc = sigma_set_err(err, errlen, errno, "ckpt_root %s: %s",
				   ckpt_root, strerror(errno));
		goto out_close_root;
	}
	if (mkdirat(rfd, name, 0700) == 0)
		created = true;
	else if (errno != EEXIST) {
		rc = sigma_set_err(err, errlen, errno, "mkdir %s/%s: %s",
				   ckpt_root, name, strerror(errno));
		goto out_close_root;
	}
	if (created && fstatat(rfd, name, &made, AT_SYMLINK_NOFOLLOW) < 0) {
		rc = sigma_set_err(err, errlen, errno, "%s/%s: %s", ckpt_root,
				   name, strerror(errno));
		goto out_close_root;
	}
	ufd = ckpt_open_dir(rfd, name);
	if (ufd < 0) {
		rc = sigma_set_err(err, errlen, errno,
				   "%s/%s: %s (a symbolic link is refused)",
				   ckpt_root, name, strerror(errno));
		goto out_close_root;
	}
	if (fstat(ufd, &st) < 0) {
		rc = sigma_set_err(err, errlen, errno, "%s/%s: %s", ckpt_root,
				   name, strerror(errno));
		goto out_close_user;
	}
	if (created && uid != 0) {
		if (st.st_dev != made.st_dev || st.st_ino != made.st_ino ||
		    st.st_dev != rst.st_dev || st.st_uid != 0) {
			rc = sigma_set_err(
			    err, errlen, EPERM,
			    "%s/%s changed between mkdir and open: not handed over",
			    ckpt_root, name);
			goto out_close_user;
		}
		if (fchown(ufd, uid, gid) < 0)
			rc = sigma_set_err(err, errlen, errno,
					   "chown %s/%s: %s", ckpt_root, name,
					   strerror(errno));
	} else if (st.st_uid != uid) {
		rc = sigma_set_err(
		    err, errlen, EPERM,
		    "%s/%s is owned by uid %u, not the job's user %u (only a directory sigma has just made is handed over)",
		    ckpt_root, name, (unsigned)st.st_uid, (unsigned)uid);
	}
out_close_user:
	close(ufd);
out_close_root:
	close(rfd);
	return rc;
}

/* the work of sigma_ckpt_create, in the child it forks */
struct ckpt_job {
	const char *path, *ckpt_root, *user;
	uid_t uid;
	gid_t gid;
};

static int ckpt_child_create(void *arg, char *err, size_t errlen)
{
	const struct ckpt_job *j = arg;
	char name[128];
	int rc;

	if (sigma_ckpt_under_root(j->path, j->ckpt_root)) {
		sigma_path_component(j->user, name, sizeof(name));
		rc = ckpt_make_user_dir(j->ckpt_root, name, j->uid, j->gid,
					err, errlen);
		if (rc < 0)
			return rc;
	}
	/* drop to the user for good before touching the path */
	if (getuid() == 0 && (setgroups(1, &j->gid) < 0 ||
			      setresgid(j->gid, j->gid, j->gid) < 0 ||
			      setresuid(j->uid, j->uid, j->uid) < 0))
		return sigma_set_err(err, errlen, EPERM,
				     "cannot switch to uid %u gid %u",
				     (unsigned)j->uid, (unsigned)j->gid);
	if (getuid() != j->uid)
		return sigma_set_err(err, errlen, EPERM,
				     "cannot create %s for uid %u as uid %u",
				     j->path, (unsigned)j->uid,
				     (unsigned)getuid());
	umask(077);
	rc = ckpt_walk(j->path, j->uid);
	if (rc == 0)
		return 0;
	if (rc == ELOOP)
		return sigma_set_err(
		    err, errlen, ELOOP,
		    "%s is a symbolic link or not a directory: refused",
		    j->path);
	if (rc == EPERM)
		return sigma_set_err(err, errlen, EPERM,
				     "%s is not owned by uid %u", j->path,
				     (unsigned)j->uid);
	return sigma_set_err(err, errlen, rc, "creating %s as uid %u: %s",
			     j->path, (unsigned)j->uid, strerror(rc));
}

/* "PATH: what the child said", or the timeout said in seconds */
static int ckpt_call(sigma_child_fn fn, void *arg, const char *path,
		     long timeout_s, char *err, size_t errlen)
{
	char why[512];
	int rc = sigma_child_call(fn, arg, timeout_s * 1000, why, sizeof(why));

	if (rc == -ETIMEDOUT)
		return sigma_set_err(
		    err, errlen, ETIMEDOUT,
		    "%s: no answer within %ld s (a hung file system?): killed",
		    path, timeout_s);
	if (rc < 0)
		return sigma_set_err(err, errlen, -rc, "%s", why);
	return 0;
}

int sigma_ckpt_create(const char *path, const char *ckpt_root,
		      const char *user, uid_t uid, gid_t gid, long timeout_s,
		      char *err, size_t errlen)
{
	struct ckpt_job j = {path, ckpt_root, user, uid, gid};
	int rc;

	if (!path || path[0] != '/')
		return sigma_set_err(err, errlen, EINVAL,
				     "checkpoint path must be absolute");
	/* root trusts nothing the submit side checked */
	rc = sigma_ckpt_path_allowed(path, ckpt_root, user, err, errlen);
	if (rc < 0)
		return rc;
	return ckpt_call(ckpt_child_create, &j, path, timeout_s, err, errlen);
}

struct ckpt_probe {
	const char *path;
	uid_t uid;
};

static int ckpt_child_check(void *arg, char *err, size_t errlen)
{
	const struct ckpt_probe *c = arg;
	struct stat st;

	if (lstat(c->path, &st) < 0)
		return sigma_set_err(err, errlen, errno, "%s: %s", c->path,
				     strerror(errno));
	if (S_ISLNK(st.st_mode))
		return sigma_set_err(err, errlen, ELOOP,
				     "%s is a symbolic link: refused", c->path);
	if (!S_ISDIR(st.st_mode))
		return sigma_set_err(err, errlen, ENOTDIR,
				     "%s is not a directory", c->path);
	if (st.st_uid != c->uid)
		return sigma_set_err(err, errlen, EPERM,
				     "%s is owned by uid %u, not %u", c->path,
				     (unsigned)st.st_uid, (unsigned)c->uid);
	return 0;
}

int sigma_ckpt_check(const char *path, uid_t uid, long timeout_s, char *err,
		     size_t errlen)
{
	struct ckpt_probe c = {path, uid};

	return ckpt_call(ckpt_child_check, &c, path, timeout_s, err, errlen);
}
