/*
 * sim_internal.h - the state sigma-sim's engine (sim.c) and its recovery
 * paths (sim_job.c) share. Not a public header.
 */
#ifndef SIGMA_SIM_INTERNAL_H
#define SIGMA_SIM_INTERNAL_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "policy.h"
#include "sim.h"

enum sim_node_state { NODE_FREE = 0, NODE_POOL, NODE_JOB, NODE_REPAIR };
enum sim_job_state { JOB_RUN = 0, JOB_DOWN, JOB_WAIT, JOB_DEAD };
enum sim_ev_type {
	EV_INCIDENT = 0,
	EV_FAIL,
	EV_REPAIRED,
	EV_RESTART,
	EV_SLOW,    /* the next fail-slow episode */
	EV_SLOW_INJ /* a scripted one: aux indexes sim_params.inject */
};

struct sim_ev {
	double t;
	uint32_t id;  /* node or job */
	uint32_t aux; /* job generation, or a scripted incident's index */
	uint8_t type;
};

struct sim_job {
	double t_run;	   /* running since (JOB_RUN) */
	double t_fail;	   /* recovery started (JOB_DOWN, JOB_WAIT) */
	double committed;  /* seconds of training kept (newest restore point) */
	double committed2; /* of which in tier 2 */
	double restore_s;  /* the next start's restore */
	double slow_until; /* a fail-slow episode lasts until then */
	int restarts;
	int spares_used;
	int missing;	  /* empty training slots */
	int inalloc_left; /* in-allocation spares at hand */
	uint32_t gen;	  /* invalidates stale restart events */
	uint8_t state;
	uint8_t queued;	  /* in the wait queue */
	uint8_t fallback; /* the in-job path had no spare */
};

struct sim {
	const struct sim_trace *tr;
	const struct sim_params *p;
	struct sim_result *r;
	struct policy_config pol;
	struct sim_ckpt ck;
	double horizon;
	double rate;	  /* incidents per second, cluster-wide */
	double rate_slow; /* fail-slow episodes per second */
	double kind_cum[SIM_MAX_KINDS];
	uint64_t rng_inc[4], rng_other[4], rng_slow[4];
	/* nodes */
	long n;
	uint8_t *state;
	int32_t *where; /* slot (job), index (pool, free list) */
	uint32_t *failures;
	/* pool and free list */
	int32_t *pool;
	int64_t *pool_since;
	long npool;
	int32_t *freel;
	long nfree;
	struct policy_spare *view; /* scratch: the pool as the policy sees it */
	/* jobs: slots of stride = jsize training + ninalloc spares each */
	long njobs, jsize, ninalloc, stride;
	struct sim_job *jobs;
	int32_t *slots; /* njobs * stride node ids, -1 empty */
	int32_t *waitq;
	long wq_head, wq_len;
	/* events */
	struct sim_ev *heap;
	size_t nheap, cap;
};

/* ---- random numbers: xoshiro256** seeded by splitmix64 ------------------- */

static inline uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static inline void rng_seed(uint64_t s[4], uint64_t seed)
{
	for (int i = 0; i < 4; i++)
		s[i] = splitmix64(&seed);
}

static inline uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

static inline uint64_t rng_next(uint64_t s[4])
{
	uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return result;
}

/* uniform in [0, 1) */
static inline double rng_unit(uint64_t s[4])
{
	return (double)(rng_next(s) >> 11) * 0x1.0p-53;
}

static inline double rng_exp(uint64_t s[4], double mean)
{
	return -log1p(-rng_unit(s)) * mean;
}

/* ---- sim.c: events and node sets ---------------------------------------- */

int sim_heap_push(struct sim *s, double t, uint8_t type, uint32_t id,
		  uint32_t aux);
void sim_pool_add(struct sim *s, int32_t node, double t);
void sim_pool_remove(struct sim *s, int32_t node);
void sim_free_push(struct sim *s, int32_t node);
void sim_free_remove(struct sim *s, int32_t node);
int sim_to_repair(struct sim *s, int32_t node, double t);

/* ---- sim_job.c: jobs, their failures and recoveries -----------------------
 */

/* the job of a node in a job slot, and whether the slot is a spare's */
static inline long sim_job_of(const struct sim *s, int32_t node)
{
	return s->where[node] / s->stride;
}

static inline bool sim_is_spare_slot(const struct sim *s, int32_t node)
{
	return s->where[node] % s->stride >= s->jsize;
}

int sim_on_fail(struct sim *s, int32_t node, double t);
int sim_on_warning(struct sim *s, int32_t node, double t);
void sim_on_slow(struct sim *s, int32_t node, double t, double dur);
int sim_serve_waiting(struct sim *s, double t);
enum policy_return sim_after_probe(struct sim *s, int probe_rc);

#endif /* SIGMA_SIM_INTERNAL_H */
