/*
 * boot_pmix.c - the only file that includes pmix.h: rank, size, local rank,
 * local size and host name from the job data the PMIx server (Slurm's
 * pmix plugin under srun --mpi=pmix) gives every client, and the
 * put/commit/fence/get exchange. See boot.h.
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <pmix.h>

#include "sigma.h"
#include "boot_pmix.h"

struct boot_pmix {
	pmix_proc_t me;
};

/* A numeric PMIx value as a long, whatever integer type the server used. */
static int pmix_value_long(const pmix_value_t *v, long *out)
{
	switch (v->type) {
	case PMIX_UINT8:
		*out = v->data.uint8;
		return 0;
	case PMIX_UINT16:
		*out = v->data.uint16;
		return 0;
	case PMIX_UINT32:
		*out = (long)v->data.uint32;
		return 0;
	case PMIX_UINT64:
		if (v->data.uint64 > (uint64_t)INT32_MAX)
			return -ERANGE;
		*out = (long)v->data.uint64;
		return 0;
	case PMIX_INT:
		*out = v->data.integer;
		return 0;
	case PMIX_INT16:
		*out = v->data.int16;
		return 0;
	case PMIX_INT32:
		*out = v->data.int32;
		return 0;
	case PMIX_INT64:
		*out = (long)v->data.int64;
		return 0;
	case PMIX_PROC_RANK:
		*out = (long)v->data.rank;
		return 0;
	default:
		return -EPROTO;
	}
}

/* One integer attribute of proc (rank or PMIX_RANK_WILDCARD) in [min, max]. */
static int pmix_get_long(const pmix_proc_t *me, pmix_rank_t rank,
			 const char *key, long min, long max, long *out,
			 char *err, size_t len)
{
	pmix_proc_t p;
	pmix_value_t *v = NULL;
	pmix_status_t st;
	int rc;

	PMIX_PROC_CONSTRUCT(&p);
	PMIX_LOAD_PROCID(&p, me->nspace, rank);
	st = PMIx_Get(&p, key, NULL, 0, &v);
	if (st != PMIX_SUCCESS || !v)
		return sigma_set_err(err, len, EPROTO, "PMIx_Get(%s): %s", key,
				     PMIx_Error_string(st));
	rc = pmix_value_long(v, out);
	PMIX_VALUE_RELEASE(v);
	if (rc < 0 || *out < min || *out > max)
		return sigma_set_err(
		    err, len, EPROTO,
		    "PMIx_Get(%s): not an integer in [%ld, %ld]", key, min,
		    max);
	return 0;
}

int boot_pmix_init(struct boot *b, char *err, size_t len)
{
	struct boot_pmix *px;
	pmix_value_t *v = NULL;
	pmix_status_t st;
	long val;
	int rc;

	px = calloc(1, sizeof(*px));
	if (!px)
		return sigma_set_err(err, len, ENOMEM, "out of memory");
	st = PMIx_Init(&px->me, NULL, 0);
	if (st != PMIX_SUCCESS) {
		free(px);
		return sigma_set_err(
		    err, len, EPROTO,
		    "PMIx_Init: %s (is this process started by srun --mpi=pmix?)",
		    PMIx_Error_string(st));
	}
	b->impl = px;
	b->rank = (int)px->me.rank;

	rc = pmix_get_long(&px->me, PMIX_RANK_WILDCARD, PMIX_JOB_SIZE, 1,
			   INT32_MAX, &val, err, len);
	if (rc < 0)
		goto out_fini;
	b->size = (int)val;
	if (b->rank < 0 || b->rank >= b->size) {
		rc = sigma_set_err(err, len, EPROTO,
				   "PMIx rank %d outside job size %d", b->rank,
				   b->size);
		goto out_fini;
	}
	rc = pmix_get_long(&px->me, px->me.rank, PMIX_LOCAL_RANK, 0,
			   b->size - 1, &val, err, len);
	if (rc < 0)
		goto out_fini;
	b->local_rank = (int)val;
	rc = pmix_get_long(&px->me, PMIX_RANK_WILDCARD, PMIX_LOCAL_SIZE, 1,
			   b->size, &val, err, len);
	if (rc < 0)
		goto out_fini;
	b->local_size = (int)val;
	if (b->local_rank >= b->local_size) {
		rc = sigma_set_err(err, len, EPROTO,
				   "PMIx local rank %d outside local size %d",
				   b->local_rank, b->local_size);
		goto out_fini;
	}

	st = PMIx_Get(&px->me, PMIX_HOSTNAME, NULL, 0, &v);
	if (st != PMIX_SUCCESS || !v || v->type != PMIX_STRING ||
	    !v->data.string) {
		if (v)
			PMIX_VALUE_RELEASE(v);
		rc = sigma_set_err(err, len, EPROTO, "PMIx_Get(%s): %s",
				   PMIX_HOSTNAME, PMIx_Error_string(st));
		goto out_fini;
	}
	sigma_strlcpy(b->node, v->data.string, sizeof(b->node));
	PMIX_VALUE_RELEASE(v);
	return 0;

out_fini:
	boot_pmix_fini(b);
	return rc;
}

void boot_pmix_fini(struct boot *b)
{
	if (!b->impl)
		return;
	PMIx_Finalize(NULL, 0);
	free(b->impl);
	b->impl = NULL;
}

int boot_pmix_put(struct boot *b, const char *key, const void *data, size_t len)
{
	pmix_value_t v;
	pmix_status_t st;

	PMIX_VALUE_CONSTRUCT(&v);
	v.type = PMIX_BYTE_OBJECT;
	/* PMIx_Put copies the value: point at the caller's bytes */
	v.data.bo.bytes = (char *)(uintptr_t)data;
	v.data.bo.size = len;
	st = PMIx_Put(PMIX_GLOBAL, key, &v);
	if (st != PMIX_SUCCESS) {
		sigma_error("PMIx_Put(%s): %s", key, PMIx_Error_string(st));
		return -EIO;
	}
	return 0;
}

int boot_pmix_commit(struct boot *b)
{
	pmix_status_t st = PMIx_Commit();

	(void)b;
	if (st != PMIX_SUCCESS) {
		sigma_error("PMIx_Commit: %s", PMIx_Error_string(st));
		return -EIO;
	}
	return 0;
}

int boot_pmix_fence(struct boot *b)
{
	struct boot_pmix *px = b->impl;
	pmix_info_t info[2];
	pmix_proc_t all;
	pmix_status_t st;
	bool yes = true;
	int timeout = b->fence_timeout_s;
	size_t ninfo = 1;

	PMIX_PROC_CONSTRUCT(&all);
	PMIX_LOAD_PROCID(&all, px->me.nspace, PMIX_RANK_WILDCARD);
	PMIX_INFO_CONSTRUCT(&info[0]);
	PMIX_INFO_LOAD(&info[0], PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
	if (timeout > 0) {
		PMIX_INFO_CONSTRUCT(&info[1]);
		PMIX_INFO_LOAD(&info[1], PMIX_TIMEOUT, &timeout, PMIX_INT);
		ninfo = 2;
	}
	st = PMIx_Fence(&all, 1, info, ninfo);
	PMIX_INFO_DESTRUCT(&info[0]);
	if (ninfo == 2)
		PMIX_INFO_DESTRUCT(&info[1]);
	if (st == PMIX_ERR_TIMEOUT) {
		sigma_error("PMIx_Fence: no answer from every rank in %d s",
			    timeout);
		return -ETIMEDOUT;
	}
	if (st != PMIX_SUCCESS) {
		sigma_error("PMIx_Fence: %s", PMIx_Error_string(st));
		return -EIO;
	}
	return 0;
}

int boot_pmix_get(struct boot *b, int rank, const char *key, void *data,
		  size_t max, size_t *got)
{
	struct boot_pmix *px = b->impl;
	pmix_value_t *v = NULL;
	pmix_proc_t p;
	pmix_status_t st;
	int rc = 0;

	PMIX_PROC_CONSTRUCT(&p);
	PMIX_LOAD_PROCID(&p, px->me.nspace, (pmix_rank_t)rank);
	st = PMIx_Get(&p, key, NULL, 0, &v);
	if (st == PMIX_ERR_NOT_FOUND)
		return -ENOENT;
	if (st != PMIX_SUCCESS || !v) {
		sigma_error("PMIx_Get(rank %d, %s): %s", rank, key,
			    PMIx_Error_string(st));
		return -EIO;
	}
	if (v->type != PMIX_BYTE_OBJECT) {
		sigma_error("PMIx_Get(rank %d, %s): not a byte object", rank,
			    key);
		rc = -EPROTO;
	} else if (v->data.bo.size > max) {
		rc = -EMSGSIZE;
	} else {
		if (v->data.bo.size)
			memcpy(data, v->data.bo.bytes, v->data.bo.size);
		*got = v->data.bo.size;
	}
	PMIX_VALUE_RELEASE(v);
	return rc;
}
