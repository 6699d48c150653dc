/*
 * tuner_place.h - the auto-tuner's second rung (docs/tuner.md): where the
 * experts live. Each ep rank of an expert group holds E / ep experts of
 * every layer (trainer/comm/layout.h); the expert compute and the rows an
 * ep rank receives in the all-to-all grow with the tokens routed to its
 * experts. The placement is balanced by swaps: one expert of the rank
 * that costs most trades places with one of another rank, so every rank
 * keeps E / ep experts and every tensor its shape. A rank's cost in a
 * layer is its pace (its time per token over the ranks' median: above 1
 * for a slow rank) times the tokens routed to its experts.
 *
 * Pure: no communication, no model. train.c gathers the routed tokens,
 * dist_move.c moves the experts' parameters and moments.
 */
#ifndef SIGMA_TRAIN_TUNER_PLACE_H
#define SIGMA_TRAIN_TUNER_PLACE_H

#include <stddef.h>
#include <stdint.h>

/* a swap must cut its layer's highest cost by this fraction (10%) */
#define TUNER_PLACE_GAIN 0.10

/* experts a and b of layer l trade their ep ranks */
struct tuner_swap {
	int layer, a, b;
};

/*
 * Up to max swaps, at most one a layer, each the one that lowers the
 * layer's highest cost most, by TUNER_PLACE_GAIN at least: owner[L][E]
 * the ep rank of each expert (changed by the swaps), load[L][E] the tokens
 * routed to each, pace[ep] each rank's time per token (1: the median).
 * Deterministic: the same numbers give the same swaps. Returns how many,
 * written to out.
 */
int tuner_place_decide(int L, int E, int ep, int16_t *owner, const double *load,
		       const double *pace, struct tuner_swap *out, int max);
/* apply s to owner[L][E] */
void tuner_place_swap(int16_t *owner, int E, const struct tuner_swap *s);
/* "l:a-b,l:a-b" of s[n] into buf (truncated at len: returns the length
 * it needed) */
size_t tuner_swaps_format(const struct tuner_swap *s, int n, char *buf,
			  size_t len);
/*
 * Parse "l:a-b" items, separated by sep (',' or ';'), strictly: each
 * layer in [0, L), each expert in [0, E), a != b. Up to max into out;
 * returns the count, or -EINVAL with err naming the item.
 */
int tuner_swaps_parse(const char *s, char sep, int L, int E,
		      struct tuner_swap *out, int max, char *err, size_t len);

#endif /* SIGMA_TRAIN_TUNER_PLACE_H */
