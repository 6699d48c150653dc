/*
 * rng.h - the trainer's random numbers: SplitMix64, a 64-bit state that a
 * checkpoint stores whole, and a stateless hash for batch positions.
 */
#ifndef SIGMA_TRAIN_RNG_H
#define SIGMA_TRAIN_RNG_H

#include <math.h>
#include <stdint.h>

static inline uint64_t rng_mix(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static inline uint64_t rng_next(uint64_t *state)
{
	*state += 0x9e3779b97f4a7c15ULL;
	return rng_mix(*state);
}

/* uniform in (0, 1), 53 bits */
static inline double rng_uniform(uint64_t *state)
{
	return ((double)(rng_next(state) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

/* standard normal, Box-Muller (one value per call: simple, reproducible) */
static inline double rng_normal(uint64_t *state)
{
	double u1 = rng_uniform(state), u2 = rng_uniform(state);

	return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* stateless: a value fixed by (seed, a, b), for seed+step batch order */
static inline uint64_t rng_hash3(uint64_t seed, uint64_t a, uint64_t b)
{
	return rng_mix(rng_mix(rng_mix(seed ^ 0x5167a7a1ULL) + a) + b);
}

#endif /* SIGMA_TRAIN_RNG_H */
