/*
 * seal.c - the whole-file seal of a checkpoint (see seal.h): XXH3-64 of
 * the bytes, written beside the file when it is published and checked on
 * the descriptor that libhdf5 then reads.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "sigma.h"
#include "seal.h"

#define SEAL_BLOCK SEAL_BLOCK_BYTES

/*
 * Read, not mapped: a file truncated under a mapping would end the
 * process with SIGBUS, and a reader must lose nothing to a bad file.
 */
static int hash_block(int fd, uint64_t off, size_t want, unsigned char *buf,
		      unsigned char out[8])
{
	size_t got = 0;
	uint64_t h;

	while (got < want) {
		ssize_t n = pread(fd, buf + got, want - got, (off_t)(off + got));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ESTALE; /* shorter than when it was measured */
		got += (size_t)n;
	}
	h = XXH3_64bits(buf, want);
	for (int i = 0; i < 8; i++)
		out[i] = (unsigned char)(h >> (8 * i));
	return 0;
}

/* as seal_hash_fd, on up to threads threads (OpenMP) */
static int hash_fd(int fd, int threads, uint64_t *hash, uint64_t *size)
{
	struct stat st;
	unsigned char *hs, extra;
	size_t nb, len;
	int rc = 0;

	if (fstat(fd, &st) < 0)
		return -errno;
	len = (size_t)st.st_size;
	nb = (len + SEAL_BLOCK - 1) / SEAL_BLOCK;
	hs = malloc(nb ? 8 * nb : 1);
	if (!hs)
		return -ENOMEM;
	(void)threads;
#pragma omp parallel num_threads(threads) if (nb > 1)
	{
		unsigned char *buf = malloc(len < SEAL_BLOCK ? len + 1 : SEAL_BLOCK);

#pragma omp for schedule(dynamic, 1)
		for (size_t b = 0; b < nb; b++) {
			size_t off = b * SEAL_BLOCK;
			size_t want = len - off < SEAL_BLOCK ? len - off
							     : SEAL_BLOCK;
			int r = buf ? hash_block(fd, off, want, buf, hs + 8 * b)
				    : -ENOMEM;

			if (r) {
#pragma omp critical(seal_hash_error)
				if (!rc)
					rc = r;
			}
		}
		free(buf);
	}
	/* nor longer than when it was measured */
	if (rc == 0 && pread(fd, &extra, 1, (off_t)len) > 0)
		rc = -ESTALE;
	if (rc == 0) {
		*hash = XXH3_64bits(hs, 8 * nb);
		*size = len;
	}
	free(hs);
	return rc;
}

int seal_hash_fd(int fd, uint64_t *hash, uint64_t *size)
{
#ifdef _OPENMP
	return hash_fd(fd, omp_get_max_threads(), hash, size);
#else
	return hash_fd(fd, 1, hash, size);
#endif
}

static int seal_name(char *buf, size_t len, const char *final)
{
	return sigma_snprintf(buf, len, "%s%s", final, SEAL_SUFFIX);
}

int seal_write(const char *tmp, const char *final, char *err, size_t len)
{
	char spath[PATH_MAX], line[SEAL_LINE_MAX];
	uint64_t hash, size;
	int fd, rc, n;

	if (seal_name(spath, sizeof(spath), final))
		return sigma_set_err(err, len, ENAMETOOLONG,
				     "%s: path too long for its seal", final);
	fd = open(tmp, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return sigma_set_err(err, len, errno,
				     "%s: cannot open to seal: %s", tmp,
				     strerror(errno));
	/* one thread: a background write must not take the training's */
	rc = hash_fd(fd, 1, &hash, &size);
	close(fd);
	if (rc)
		return sigma_set_err(err, len, -rc, "%s: cannot read to seal: %s",
				     tmp, strerror(-rc));
	n = snprintf(line, sizeof(line), "%s %d " SEAL_ALGORITHM " %016" PRIx64 " %" PRIu64 "\n",
		     SEAL_MAGIC, SEAL_VERSION, hash, size);
	rc = sigma_file_write_atomic(spath, line, (size_t)n, 0644);
	if (rc)
		return sigma_set_err(err, len, -rc, "%s: cannot write: %s",
				     spath, strerror(-rc));
	return 0;
}

/* a regular file; strict: this user's or root's, written by nobody else */
static int check_owner(int fd, const char *path, bool strict, struct stat *st,
		       char *err, size_t len)
{
	uid_t me = geteuid();

	if (fstat(fd, st) < 0)
		return sigma_set_err(err, len, errno, "%s: %s", path,
				     strerror(errno));
	if (!S_ISREG(st->st_mode))
		return sigma_set_err(err, len, EBADMSG,
				     "%s is not a regular file", path);
	if (!strict)
		return 0;
	if (st->st_uid != me && st->st_uid != 0)
		return sigma_set_err(err, len, EBADMSG,
				     "%s is owned by uid %u, neither this user (%u) nor root",
				     path, (unsigned)st->st_uid, (unsigned)me);
	if (st->st_mode & (S_IWGRP | S_IWOTH))
		return sigma_set_err(err, len, EBADMSG,
				     "%s is writable by group or others (mode %04o)",
				     path, (unsigned)(st->st_mode & 07777));
	return 0;
}

/*
 * The line exactly as seal_write makes it: "sigma-seal 1 xxh3-64-4m ", 16
 * lowercase hex digits, a space, the size in decimal (no sign, no leading
 * zero), a newline, nothing after it.
 */
static int read_seal(const char *path, uint64_t *hash, uint64_t *size,
		     char *err, size_t len);

static bool parse_line(const char *line, size_t n, uint64_t *hash,
		       uint64_t *size)
{
	static const char head[] = SEAL_MAGIC " 1 " SEAL_ALGORITHM " ";
	const size_t hl = sizeof(head) - 1;
	const char *p = line + hl, *end = line + n;
	uint64_t h = 0, v = 0;

	_Static_assert(SEAL_VERSION == 1, "the head names version 1");
	if (n < hl + 16 + 3 || memcmp(line, head, hl))
		return false;
	for (int i = 0; i < 16; i++, p++) {
		if (*p >= '0' && *p <= '9')
			h = h << 4 | (uint64_t)(*p - '0');
		else if (*p >= 'a' && *p <= 'f')
			h = h << 4 | (uint64_t)(*p - 'a' + 10);
		else
			return false;
	}
	if (*p++ != ' ' || *p < '0' || *p > '9' || (*p == '0' && p[1] != '\n'))
		return false;
	for (; p < end && *p >= '0' && *p <= '9'; p++) {
		if (v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
			return false;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	if (p + 1 != end || *p != '\n')
		return false;
	*hash = h;
	*size = v;
	return true;
}

int seal_read_small(const char *path, char *buf, size_t max, size_t *n,
		    char *err, size_t len)
{
	struct stat st;
	ssize_t got;
	int fd, rc;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0 && errno == ENOENT)
		return -ENOENT;
	if (fd < 0)
		return sigma_set_err(err, len, EBADMSG, "%s: cannot open: %s",
				     path, strerror(errno));
	rc = check_owner(fd, path, true, &st, err, len);
	if (rc == 0 && st.st_size > (off_t)max)
		rc = sigma_set_err(err, len, EBADMSG,
				   "%s: %lld bytes, more than the %zu it may hold",
				   path, (long long)st.st_size, max);
	got = rc == 0 ? pread(fd, buf, max, 0) : 0;
	if (rc == 0 && got < 0)
		rc = sigma_set_err(err, len, EBADMSG, "%s: cannot read: %s",
				   path, strerror(errno));
	close(fd);
	if (rc == 0)
		*n = (size_t)got;
	return rc;
}

int seal_peek(const char *path, uint64_t *hash, uint64_t *size, char *err,
	      size_t len)
{
	return read_seal(path, hash, size, err, len);
}

/* read and parse path.seal; -ENOENT when there is none */
static int read_seal(const char *path, uint64_t *hash, uint64_t *size,
		     char *err, size_t len)
{
	char spath[PATH_MAX], line[SEAL_LINE_MAX];
	size_t n = 0;
	int rc;

	if (seal_name(spath, sizeof(spath), path))
		return sigma_set_err(err, len, ENAMETOOLONG,
				     "%s: path too long for its seal", path);
	rc = seal_read_small(spath, line, sizeof(line), &n, err, len);
	if (rc)
		return rc;
	if (!parse_line(line, n, hash, size))
		return sigma_set_err(err, len, EBADMSG,
				     "%s: not a seal of version %d (one line: %s %d " SEAL_ALGORITHM " HASH SIZE)",
				     spath, SEAL_VERSION, SEAL_MAGIC,
				     SEAL_VERSION);
	return 0;
}

int seal_open(const char *path, enum seal_need need, struct seal_file *sf,
	      char *err, size_t len)
{
	uint64_t want_hash = 0, want_size = 0;
	struct stat st;
	int rc;

	memset(sf, 0, sizeof(*sf));
	sf->fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (sf->fd < 0)
		return sigma_set_err(err, len, errno, "%s: cannot open: %s",
				     path, strerror(errno));
	/* a file from elsewhere need not be ours; a sealed one must be */
	rc = check_owner(sf->fd, path, false, &st, err, len);
	if (rc == 0)
		rc = read_seal(path, &want_hash, &want_size, err, len);
	if (rc == 0)
		rc = check_owner(sf->fd, path, true, &st, err, len);
	if (rc == -ENOENT && need == SEAL_IF_PRESENT) {
		rc = 0;
	} else if (rc == -ENOENT) {
		rc = sigma_set_err(err, len, EBADMSG,
				   "%s has no seal beside it (%s%s): not published by sigma-train, or copied without its seal",
				   path, path, SEAL_SUFFIX);
	} else if (rc == 0) {
		rc = seal_hash_fd(sf->fd, &sf->hash, &sf->size);
		if (rc)
			rc = sigma_set_err(err, len, -rc, "%s: cannot read: %s",
					   path, strerror(-rc));
		else if (sf->size != want_size || sf->hash != want_hash)
			rc = sigma_set_err(err, len, EBADMSG,
					   "%s does not match its seal: %" PRIu64 " bytes with hash %016" PRIx64 ", the seal says %" PRIu64 " bytes with hash %016" PRIx64 " (damaged or changed since it was published)",
					   path, sf->size, sf->hash, want_size,
					   want_hash);
		else
			sf->sealed = true;
	}
	if (rc == 0)
		rc = sigma_snprintf(sf->h5path, sizeof(sf->h5path),
				    "/proc/self/fd/%d", sf->fd);
	if (rc) {
		close(sf->fd);
		sf->fd = -1;
		return rc;
	}
	return 0;
}

void seal_close(struct seal_file *sf)
{
	if (sf->fd >= 0)
		close(sf->fd);
	sf->fd = -1;
}

void seal_remove(const char *final)
{
	char spath[PATH_MAX];

	if (seal_name(spath, sizeof(spath), final) == 0)
		unlink(spath);
}
