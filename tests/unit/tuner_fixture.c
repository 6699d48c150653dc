/*
 * tuner_fixture.c - a tuner for the auto-tuner's unit tests
 * (tuner_fixture.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "tuner_fixture.h"

void tuner_fixture(struct tuner *tu, int dp, int B, int mode,
		   const char *replay)
{
	struct tuner_config c;
	char err[256];

	tuner_config_default(&c);
	c.mode = mode;
	if (replay)
		snprintf(c.replay, sizeof(c.replay), "%s", replay);
	assert_int_equal(
	    tuner_init(tu, &c, dp, B, tuner_bmax(&c, B), err, sizeof(err)), 0);
}
