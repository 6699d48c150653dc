/*
 * boot_pmix.h - the PMIx half of the bootstrap (boot_pmix.c), for boot.c,
 * which calls it when a PMIx server is there: b->impl is its state. A
 * build without PMIx gets stubs here that answer -ENOTSUP.
 */
#ifndef SIGMA_COMM_BOOT_PMIX_H
#define SIGMA_COMM_BOOT_PMIX_H

#include <errno.h>
#include <stddef.h>

#include "config.h"
#include "boot.h"

#ifdef HAVE_PMIX
int boot_pmix_init(struct boot *b, char *err, size_t len);
void boot_pmix_fini(struct boot *b);
int boot_pmix_put(struct boot *b, const char *key, const void *data,
		  size_t len);
int boot_pmix_commit(struct boot *b);
int boot_pmix_fence(struct boot *b);
int boot_pmix_get(struct boot *b, int rank, const char *key, void *data,
		  size_t max, size_t *got);
#else
static inline int boot_pmix_init(struct boot *b, char *err, size_t len)
{
	(void)b;
	(void)err;
	(void)len;
	return -ENOTSUP;
}
static inline void boot_pmix_fini(struct boot *b)
{
	(void)b;
}
static inline int boot_pmix_put(struct boot *b, const char *key,
				const void *data, size_t len)
{
	(void)b;
	(void)key;
	(void)data;
	(void)len;
	return -ENOTSUP;
}
static inline int boot_pmix_commit(struct boot *b)
{
	(void)b;
	return -ENOTSUP;
}
static inline int boot_pmix_fence(struct boot *b)
{
	(void)b;
	return -ENOTSUP;
}
static inline int boot_pmix_get(struct boot *b, int rank, const char *key,
				void *data, size_t max, size_t *got)
{
	(void)b;
	(void)rank;
	(void)key;
	(void)data;
	(void)max;
	(void)got;
	return -ENOTSUP;
}
#endif

#endif /* SIGMA_COMM_BOOT_PMIX_H */
