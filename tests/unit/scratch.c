/*
 * scratch.c - scratch directories of the unit tests (scratch.h).
 */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>

#include "scratch.h"

int scratch_make(char *dir, size_t len, const char *tag)
{
	int n = snprintf(dir, len, "/tmp/sigma-test-%s.XXXXXX", tag);

	if (n < 0 || (size_t)n >= len)
		return -1;
	return mkdtemp(dir) ? 0 : -1;
}

static int remove_one(const char *path, const struct stat *sb, int flag,
		      struct FTW *ftw)
{
	(void)sb, (void)flag, (void)ftw;
	return remove(path);
}

int scratch_remove(const char *dir)
{
	return nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS) == 0 ? 0 : -1;
}
