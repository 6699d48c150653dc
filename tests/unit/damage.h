/*
 * damage.h - files damaged on purpose by the unit tests: bytes
 * overwritten, a bit flipped; a failure fails the test (cmocka).
 */
#ifndef SIGMA_TEST_DAMAGE_H
#define SIGMA_TEST_DAMAGE_H

#include <stddef.h>

/* overwrite n bytes of b at off (negative: from the end) */
void poke(const char *path, long off, const void *b, size_t n);
/* flip one bit (0x10) of the byte at off */
void flip_bit(const char *path, long off);

#endif /* SIGMA_TEST_DAMAGE_H */
