/*
 * boot.c - bootstrap: PMIx when a PMIx server is there (boot_pmix.c), a
 * job of one process otherwise, and the key/blob exchange over either;
 * the fence is watched by the collectives' watchdog (watchdog.h). See
 * boot.h. Nothing here knows the collectives (comm.h).
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sigma.h"
#include "boot.h"
#include "boot_pmix.h"
#include "watchdog.h"

/* single process: what boot_put stored, a short list */
struct boot_item {
	struct boot_item *next;
	char key[BOOT_KEY_MAX];
	size_t len;
	unsigned char data[];
};

bool boot_under_pmix(void)
{
	const char *ns = getenv("PMIX_NAMESPACE");

	return ns && *ns;
}

int boot_init(struct boot *b, char *err, size_t len)
{
	const char *ntasks;
	long n = 1;
	int rc;

	memset(b, 0, sizeof(*b));
	b->fence_timeout_s = BOOT_TIMEOUT_DEFAULT;
	if (boot_under_pmix()) {
		rc = boot_pmix_init(b, err, len);
		if (rc == -ENOTSUP)
			return sigma_set_err(
			    err, len, ENOTSUP,
			    "started under a PMIx server (PMIX_NAMESPACE is set) but built without PMIx: rebuild with --with-pmix");
		if (rc < 0)
			return rc;
		b->pmix = true;
		return 0;
	}

	/* No PMIx: refuse to be one of several tasks that cannot meet. */
	ntasks = getenv("SLURM_NTASKS");
	if (ntasks && sigma_parse_long(ntasks, 1, LONG_MAX, &n) == 0 && n > 1)
		return sigma_set_err(
		    err, len, EINVAL,
		    "started as one of %ld tasks without a PMIx server: run under srun --mpi=pmix",
		    n);
	b->rank = 0;
	b->size = 1;
	b->local_rank = 0;
	b->local_size = 1;
	if (gethostname(b->node, sizeof(b->node)) != 0)
		sigma_strlcpy(b->node, "localhost", sizeof(b->node));
	b->node[sizeof(b->node) - 1] = '\0';
	return 0;
}

void boot_fini(struct boot *b)
{
	struct boot_item *it, *next;

	if (!b)
		return;
	if (b->impl)
		boot_pmix_fini(b);
	for (it = b->store; it; it = next) {
		next = it->next;
		free(it);
	}
	b->store = NULL;
}

static int boot_check_key(const char *key)
{
	size_t n = strlen(key);

	return n > 0 && n < BOOT_KEY_MAX ? 0 : -EINVAL;
}

int boot_put(struct boot *b, const char *key, const void *data, size_t len)
{
	struct boot_item *it, **pp;

	if (boot_check_key(key) < 0 || len > BOOT_BLOB_MAX)
		return -EINVAL;
	if (b->impl)
		return boot_pmix_put(b, key, data, len);
	/* replace an earlier value, as PMIx does */
	for (pp = (struct boot_item **)&b->store; *pp; pp = &(*pp)->next) {
		if (!strcmp((*pp)->key, key)) {
			it = *pp;
			*pp = it->next;
			free(it);
			break;
		}
	}
	it = malloc(sizeof(*it) + len);
	if (!it)
		return -ENOMEM;
	sigma_strlcpy(it->key, key, sizeof(it->key));
	it->len = len;
	if (len)
		memcpy(it->data, data, len);
	it->next = b->store;
	b->store = it;
	return 0;
}

int boot_commit(struct boot *b)
{
	return b->impl ? boot_pmix_commit(b) : 0;
}

int boot_fence(struct boot *b)
{
	int rc;

	if (!b->impl)
		return 0;
	comm_watch_enter("boot_fence", "pmix");
	rc = boot_pmix_fence(b);
	comm_watch_leave();
	return rc;
}

int boot_get(struct boot *b, int rank, const char *key, void *data, size_t max,
	     size_t *got)
{
	struct boot_item *it;

	*got = 0;
	if (boot_check_key(key) < 0 || rank < 0 || rank >= b->size)
		return -EINVAL;
	if (b->impl)
		return boot_pmix_get(b, rank, key, data, max, got);
	for (it = b->store; it; it = it->next) {
		if (strcmp(it->key, key))
			continue;
		if (it->len > max)
			return -EMSGSIZE;
		if (it->len)
			memcpy(data, it->data, it->len);
		*got = it->len;
		return 0;
	}
	return -ENOENT;
}

int boot_share(struct boot *b, const char *name, void *data, size_t len)
{
	char key[BOOT_KEY_MAX];
	size_t got = 0;
	int rc;

	if (len > BOOT_BLOB_MAX)
		return -EINVAL;
	rc = sigma_snprintf(key, sizeof(key), "sigma.%s.%lu", name, b->seq++);
	if (rc < 0)
		return rc;
	if (b->rank == 0) {
		rc = boot_put(b, key, data, len);
		if (rc < 0)
			return rc;
	}
	rc = boot_commit(b);
	if (rc < 0)
		return rc;
	rc = boot_fence(b);
	if (rc < 0)
		return rc;
	if (b->rank == 0)
		return 0;
	rc = boot_get(b, 0, key, data, len, &got);
	if (rc < 0)
		return rc;
	return got == len ? 0 : -EPROTO;
}
