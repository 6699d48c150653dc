/*
 * test_trainer_schedule.c - the two pure decisions of sigma-train's loop:
 * which checkpoints a step writes (ckpt_due) and which exit code a
 * failure gives (exit_code_of).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "ckpt_due.h"
#include "exitcodes.h"

/* the steps of 1..steps at which each kind is due, as a bit string */
static void series(const struct ckpt_sched *c, char *t1, char *full,
		   char *diff)
{
	for (long s = 1; s <= c->steps; s++) {
		struct ckpt_due d = ckpt_due(s, false, c);

		t1[s - 1] = d.tier1 ? '1' : '.';
		full[s - 1] = d.full ? 'F' : '.';
		diff[s - 1] = d.diff ? 'D' : '.';
	}
	t1[c->steps] = full[c->steps] = diff[c->steps] = '\0';
}

/* shared tier only: --ckpt-every is the full interval, the last step
 * always writes, a differential never with a full one */
static void due_shared(void **state)
{
	struct ckpt_sched c = { true, false, 4, 0, 2, 10 };
	char t1[16], full[16], diff[16];

	(void)state;
	series(&c, t1, full, diff);
	assert_string_equal(t1, "..........");
	assert_string_equal(full, "...F...F.F");
	assert_string_equal(diff, ".D...D....");
}

/* tier 1 on: --ckpt-every is tier 1's, --ckpt-full-every the shared one */
static void due_tier1(void **state)
{
	struct ckpt_sched c = { true, true, 2, 5, 0, 10 };
	char t1[16], full[16], diff[16];

	(void)state;
	series(&c, t1, full, diff);
	assert_string_equal(t1, ".1.1.1.1.1");
	assert_string_equal(full, "....F....F");
	assert_string_equal(diff, "..........");
	/* --ckpt-full-every 0: the shared tier at the end only */
	c.full_every = 0;
	series(&c, t1, full, diff);
	assert_string_equal(full, ".........F");
}

/* a stop writes a full checkpoint; without a directory nothing is full */
static void due_stop_and_none(void **state)
{
	struct ckpt_sched c = { true, false, 0, 0, 0, 100 };
	struct ckpt_due d;

	(void)state;
	assert_false(ckpt_due(7, false, &c).full);
	d = ckpt_due(7, true, &c);
	assert_true(d.full);
	assert_false(d.diff);
	c.shared = false;
	assert_false(ckpt_due(7, true, &c).full);
	assert_false(ckpt_due(100, false, &c).full);
}

static void exit_codes(void **state)
{
	(void)state;
	assert_int_equal(exit_code_of(0, PHASE_WRITE), TRAIN_EXIT_OK);
	assert_int_equal(exit_code_of(-EBADMSG, PHASE_DATA), TRAIN_EXIT_DATAERR);
	assert_int_equal(exit_code_of(-ENOENT, PHASE_DATA), TRAIN_EXIT_NOINPUT);
	assert_int_equal(exit_code_of(-EACCES, PHASE_PREPARE),
			 TRAIN_EXIT_NOINPUT);
	assert_int_equal(exit_code_of(-ENOSPC, PHASE_PREPARE),
			 TRAIN_EXIT_CANTCREAT);
	assert_int_equal(exit_code_of(-ENOMEM, PHASE_CONFIG), TRAIN_EXIT_OSERR);
	assert_int_equal(exit_code_of(-EINVAL, PHASE_CONFIG), TRAIN_EXIT_USAGE);
	assert_int_equal(exit_code_of(-EINVAL, PHASE_BOOT), TRAIN_EXIT_USAGE);
	assert_int_equal(exit_code_of(-EIO, PHASE_BOOT), TRAIN_EXIT_PEER);
	assert_int_equal(exit_code_of(-ETIMEDOUT, PHASE_LAYOUT), TRAIN_EXIT_PEER);
	assert_int_equal(exit_code_of(-EINVAL, PHASE_LAYOUT), TRAIN_EXIT_USAGE);
	/* a start that would mix two runs is a usage error */
	assert_int_equal(exit_code_of(-EEXIST, PHASE_CLAIM), TRAIN_EXIT_USAGE);
	assert_int_equal(exit_code_of(-ESTALE, PHASE_CLAIM), TRAIN_EXIT_USAGE);
	assert_int_equal(exit_code_of(-EBADMSG, PHASE_CLAIM), TRAIN_EXIT_DATAERR);
	assert_int_equal(exit_code_of(-EACCES, PHASE_CLAIM), TRAIN_EXIT_CANTCREAT);
	assert_int_equal(exit_code_of(-EBADMSG, PHASE_RESUME), TRAIN_EXIT_DATAERR);
	assert_int_equal(exit_code_of(-EIO, PHASE_RESUME), TRAIN_EXIT_PEER);
	assert_int_equal(exit_code_of(-EIO, PHASE_RESUME_SHARED),
			 TRAIN_EXIT_DATAERR);
	assert_int_equal(exit_code_of(-ENOENT, PHASE_INIT_FROM),
			 TRAIN_EXIT_NOINPUT);
	assert_int_equal(exit_code_of(-EIO, PHASE_COMM), TRAIN_EXIT_PEER);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(due_shared),
		cmocka_unit_test(due_tier1),
		cmocka_unit_test(due_stop_and_none),
		cmocka_unit_test(exit_codes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
