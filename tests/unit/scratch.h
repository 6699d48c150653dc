/*
 * scratch.h - a scratch directory for a unit test: made fresh under /tmp
 * and removed with everything in it, without a shell.
 */
#ifndef SIGMA_TEST_SCRATCH_H
#define SIGMA_TEST_SCRATCH_H

#include <stddef.h>

/* dir[len] = a new /tmp/sigma-test-TAG.XXXXXX; 0 or -1 */
int scratch_make(char *dir, size_t len, const char *tag);
/* dir and all below it removed; 0 or -1 */
int scratch_remove(const char *dir);

#endif /* SIGMA_TEST_SCRATCH_H */
