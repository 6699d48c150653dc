/*
 * fuzz.h - what every libFuzzer harness in tests/fuzz/ shares: the
 * invariant check (a violated one aborts, so libFuzzer keeps the input as a
 * crash artifact), quiet logging, a private scratch directory on tmpfs for
 * the parsers that only read files, and small string helpers.
 *
 * Each harness is one .c file with LLVMFuzzerTestOneInput; tests/fuzz/run
 * builds it with clang -fsanitize=fuzzer,address,undefined together with
 * the project sources it exercises (docs/fuzzing.md).
 */
#ifndef SIGMA_FUZZ_H
#define SIGMA_FUZZ_H

/* nftw; every harness includes this header first */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sigma.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* An invariant: when it does not hold, say which and abort (a crash). */
#define CHECK(cond)                                                            \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "%s:%d: invariant violated: %s\n",     \
				__FILE__, __LINE__, #cond);                    \
			abort();                                               \
		}                                                              \
	} while (0)

/* An error message: terminated inside its buffer, and not empty. */
#define CHECK_ERR(err, size)                                                   \
	do {                                                                   \
		CHECK(memchr((err), '\0', (size)) != NULL);                    \
		CHECK((err)[0] != '\0');                                       \
	} while (0)

/* A string field: terminated inside its array. */
#define CHECK_TERMINATED(field)                                                \
	CHECK(memchr((field), '\0', sizeof(field)) != NULL)

static void fuzz_quiet_sink(int level, const char *msg, void *arg)
{
	(void)level;
	(void)msg;
	(void)arg;
}

/* Logging off: a parser's messages are not what is being tested. */
static inline void fuzz_quiet(void)
{
	sigma_log_set_level(SIGMA_LOG_ERROR);
	sigma_log_set_sink(fuzz_quiet_sink, NULL);
}

/* the libFuzzer start-up of a harness that needs nothing but quiet logs */
#define FUZZ_INITIALIZE_QUIET                                                  \
	int LLVMFuzzerInitialize(int *argc, char ***argv)                      \
	{                                                                      \
		(void)argc;                                                    \
		(void)argv;                                                    \
		fuzz_quiet();                                                  \
		return 0;                                                      \
	}

/* ---- the scratch directory ------------------------------------------------ */

static char fuzz_dir[256];

static int fuzz_rm_one(const char *path, const struct stat *st, int flag,
		       struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path); /* best effort: go on with the rest */
	return 0;
}

static void fuzz_dir_remove(void)
{
	if (fuzz_dir[0])
		nftw(fuzz_dir, fuzz_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/*
 * A directory of this process's own, mode 0700, removed at exit: under
 * $SIGMA_FUZZ_TMP (tests/fuzz/run sets it), else /dev/shm, else $TMPDIR
 * or /tmp. On tmpfs the atomic writes (fsync) of the code under test cost
 * little.
 */
static inline const char *fuzz_scratch(void)
{
	const char *bases[] = {getenv("SIGMA_FUZZ_TMP"), "/dev/shm",
			       getenv("TMPDIR"), "/tmp"};

	if (fuzz_dir[0])
		return fuzz_dir;
	for (size_t i = 0; i < sizeof(bases) / sizeof(bases[0]); i++) {
		if (!bases[i] || !bases[i][0] || access(bases[i], W_OK) < 0)
			continue;
		snprintf(fuzz_dir, sizeof(fuzz_dir), "%s/sigma-fuzz.XXXXXX",
			 bases[i]);
		if (mkdtemp(fuzz_dir)) {
			atexit(fuzz_dir_remove);
			return fuzz_dir;
		}
	}
	fprintf(stderr, "fuzz: cannot make a scratch directory\n");
	abort();
}

/* Write data to path (0600, replaced whole). Aborts when it cannot. */
static inline void fuzz_write_file(const char *path, const void *data,
				   size_t size)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	const char *p = data;

	if (fd < 0) {
		perror(path);
		abort();
	}
	fchmod(fd, 0600);
	while (size) {
		ssize_t w = write(fd, p, size);

		if (w <= 0) {
			perror(path);
			abort();
		}
		p += w;
		size -= (size_t)w;
	}
	close(fd);
}

/* ---- splitting an input into fields --------------------------------------- */

/*
 * Copy the input into a NUL-terminated buffer and split it at '\n' into at
 * most max fields (the last field keeps any further newlines). Returns the
 * number of fields; the buffer is the caller's to free.
 */
static inline int fuzz_fields(const uint8_t *data, size_t size, char **buf,
			      char *field[], int max)
{
	char *s = malloc(size + 1);
	int n = 0;

	if (!s)
		abort();
	memcpy(s, data, size);
	s[size] = '\0';
	*buf = s;
	while (n < max) {
		char *nl;

		field[n++] = s;
		if (n == max || !(nl = strchr(s, '\n')))
			break;
		*nl = '\0';
		s = nl + 1;
	}
	for (int i = n; i < max; i++)
		field[i] = NULL;
	return n;
}

/*
 * Every '/'-separated component of an absolute path after the first '/':
 * true when none is empty, "." or "..". "/" itself has none.
 */
static inline bool fuzz_path_clean(const char *path)
{
	const char *p;

	if (path[0] != '/')
		return false;
	if (!path[1])
		return true;
	p = path + 1;
	for (;;) {
		size_t n = strcspn(p, "/");

		if (n == 0 || (n == 1 && p[0] == '.') ||
		    (n == 2 && p[0] == '.' && p[1] == '.'))
			return false;
		if (!p[n])
			return true;
		p += n + 1;
	}
}

/* A whole path component as sigma_path_component promises one. */
static inline bool fuzz_component_clean(const char *s)
{
	if (!s[0] || s[0] == '.')
		return false;
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '.' || c == '_' ||
		      c == '-'))
			return false;
	}
	return true;
}

#endif /* SIGMA_FUZZ_H */
