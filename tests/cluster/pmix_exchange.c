/*
 * pmix_exchange.c - each rank publishes its node name through PMIx
 * (put, commit, fence with data collection) and reads its neighbour's.
 * Prints one line per rank: "rank R size S node N peer P peernode M".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pmix.h>

static int die(const char *what, pmix_status_t rc)
{
	fprintf(stderr, "pmix_exchange: %s: %s\n", what, PMIx_Error_string(rc));
	return 1;
}

int main(void)
{
	pmix_proc_t me, wild, peer;
	pmix_value_t val, *got = NULL;
	pmix_info_t collect;
	const char *node = getenv("SLURMD_NODENAME");
	pmix_status_t rc;
	uint32_t size;
	bool yes = true;

	rc = PMIx_Init(&me, NULL, 0);
	if (rc != PMIX_SUCCESS)
		return die("PMIx_Init", rc);
	PMIX_PROC_CONSTRUCT(&wild);
	PMIX_LOAD_PROCID(&wild, me.nspace, PMIX_RANK_WILDCARD);
	rc = PMIx_Get(&wild, PMIX_JOB_SIZE, NULL, 0, &got);
	if (rc != PMIX_SUCCESS)
		return die("PMIx_Get(job size)", rc);
	size = got->data.uint32;
	PMIX_VALUE_RELEASE(got);

	PMIX_VALUE_CONSTRUCT(&val);
	val.type = PMIX_STRING;
	val.data.string = (char *)(node ? node : "unknown");
	rc = PMIx_Put(PMIX_GLOBAL, "sigma.test.node", &val);
	if (rc != PMIX_SUCCESS)
		return die("PMIx_Put", rc);
	rc = PMIx_Commit();
	if (rc != PMIX_SUCCESS)
		return die("PMIx_Commit", rc);
	PMIX_INFO_CONSTRUCT(&collect);
	PMIX_INFO_LOAD(&collect, PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
	rc = PMIx_Fence(&wild, 1, &collect, 1);
	if (rc != PMIX_SUCCESS)
		return die("PMIx_Fence", rc);

	PMIX_LOAD_PROCID(&peer, me.nspace, (me.rank + 1) % size);
	rc = PMIx_Get(&peer, "sigma.test.node", NULL, 0, &got);
	if (rc != PMIX_SUCCESS)
		return die("PMIx_Get(peer)", rc);
	printf("rank %u size %u node %s peer %u peernode %s\n", me.rank, size,
	       node ? node : "unknown", peer.rank, got->data.string);
	PMIX_VALUE_RELEASE(got);
	rc = PMIx_Finalize(NULL, 0);
	if (rc != PMIX_SUCCESS)
		return die("PMIx_Finalize", rc);
	return 0;
}
