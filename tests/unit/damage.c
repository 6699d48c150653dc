/*
 * damage.c - files damaged on purpose by the unit tests (damage.h).
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include <cmocka.h>

#include "damage.h"

/* overwrite n bytes at off (negative: from the end) */
void poke(const char *path, long off, const void *b, size_t n)
{
	int fd = open(path, O_WRONLY);

	assert_true(fd >= 0);
	if (off < 0)
		off += lseek(fd, 0, SEEK_END);
	assert_int_equal(pwrite(fd, b, n, off), (ssize_t)n);
	close(fd);
}

/* one bit (0x10) of the byte at off */
void flip_bit(const char *path, long off)
{
	int fd = open(path, O_RDWR);
	unsigned char c;

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &c, 1, off), 1);
	c ^= 0x10;
	assert_int_equal(pwrite(fd, &c, 1, off), 1);
	close(fd);
}
