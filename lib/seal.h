/*
 * seal.h - the whole-file seal of a checkpoint, checked before libhdf5
 * parses a byte of the file.
 *
 * Publishing NAME.h5 first writes NAME.h5.seal beside it, one line:
 *
 *   sigma-seal 1 xxh3-64-4m <16 hex digits> <size in bytes>
 *
 * the hash of every byte of the file as published: XXH3-64 of the
 * XXH3-64 hashes (8 bytes each, little-endian) of its 4 MiB blocks in
 * order, the last one shorter, so that blocks are hashed in parallel. A reader
 * opens the file once, checks that it is a regular file owned by the
 * running user or root and writable by neither group nor others, that
 * the seal (same checks) names its size and hash, and hands libhdf5 the
 * descriptor it checked (/proc/self/fd/N), so a file renamed or replaced
 * after the check is not the one parsed. See docs/checkpoint-format.md.
 */
#ifndef SIGMA_SEAL_H
#define SIGMA_SEAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SEAL_SUFFIX ".seal"
#define SEAL_MAGIC "sigma-seal"
#define SEAL_VERSION 1
#define SEAL_ALGORITHM "xxh3-64-4m"
#define SEAL_BLOCK_BYTES ((size_t)4 << 20)
#define SEAL_LINE_MAX 128

/* what a missing seal means to the reader */
enum seal_need {
	SEAL_REQUIRED,	 /* this program's own checkpoints: refused */
	SEAL_IF_PRESENT, /* a file from elsewhere (--init-from): allowed */
};

struct seal_file {
	int fd;		      /* -1 when closed */
	bool sealed;	      /* the seal was there and matched */
	char h5path[32];      /* /proc/self/fd/N, for H5Fopen */
	uint64_t size, hash;  /* of the bytes checked */
};

/*
 * Hash the bytes of tmp (closed and synced) and publish final.seal
 * (written to a temporary beside it, synced, renamed), before tmp is
 * renamed to final. 0 or -errno, err naming the file.
 */
int seal_write(const char *tmp, const char *final, char *err, size_t len);

/*
 * Open path for reading after the checks above; 0 with sf->fd open, or
 * -EBADMSG (damaged, no seal where one is required, foreign owner,
 * writable by others) or -errno, err saying which. seal_close releases.
 */
int seal_open(const char *path, enum seal_need need, struct seal_file *sf,
	      char *err, size_t len);
void seal_close(struct seal_file *sf);

/*
 * A small file this program wrote (a seal, a run manifest): opened
 * without following a link, a regular file of this user or root that
 * neither group nor others may write, at most max bytes, read into buf
 * (*n bytes, not terminated). 0, -ENOENT (none there) or -EBADMSG with
 * err naming the file and what is wrong.
 */
int seal_read_small(const char *path, char *buf, size_t max, size_t *n,
		    char *err, size_t len);

/* The hash and size that the seal of path names (the file itself is not
 * read): 0, -ENOENT (no seal) or -EBADMSG, err saying why. */
int seal_peek(const char *path, uint64_t *hash, uint64_t *size, char *err,
	      size_t len);

/* Remove the seal of final (pruning); a missing one is no error. */
void seal_remove(const char *final);

/* The seal's hash (above) and size of the bytes of fd, on the OpenMP
 * threads there are; -ESTALE when the file changes size meanwhile. */
int seal_hash_fd(int fd, uint64_t *hash, uint64_t *size);

#endif
