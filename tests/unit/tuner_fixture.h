/*
 * tuner_fixture.h - a tuner for the auto-tuner's unit tests
 * (test_trainer_tuner, _place, _buckets): the default configuration in
 * the given mode, with a replay file or none.
 */
#ifndef SIGMA_TEST_TUNER_FIXTURE_H
#define SIGMA_TEST_TUNER_FIXTURE_H

#include "tuner_impl.h"

/* tuner_init of dp ranks of B sequences each; fails the test if it fails */
void tuner_fixture(struct tuner *tu, int dp, int B, int mode,
		   const char *replay);

#endif /* SIGMA_TEST_TUNER_FIXTURE_H */
