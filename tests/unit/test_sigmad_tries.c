/*
 * test_sigmad_tries.c - the table of nodes in repair (sbin/controller/
 * tries.c). Any number of distinct nodes pass through repair over sigmad's
 * life: 10,000 of them, one after the other and all at once, each keeps its
 * own entry while in repair and leaves none behind once back in service.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "tries.h"

#define NODES 10000

static void name(char *buf, size_t size, int i)
{
	/* not in sorted order: the table sorts */
	snprintf(buf, size, "gpu%05d", (i * 7919) % NODES);
}

/* one after the other, up to 100 in repair at a time */
static void test_through_repair(void **state)
{
	struct ctl_tries_table t = {0};
	size_t most = 0;
	char node[32], old[32];

	(void)state;
	for (int i = 0; i < NODES; i++) {
		struct ctl_tries *e;

		name(node, sizeof(node), i);
		e = ctl_tries_get(&t, node);
		assert_non_null(e);
		assert_string_equal(e->node, node);
		assert_int_equal(e->tries, 0);
		e->tries = 1 + i % 3;
		e->last = i;
		if (t.n > most)
			most = t.n;
		/* the node 100 before is back in service */
		if (i >= 100) {
			name(old, sizeof(old), i - 100);
			assert_non_null(ctl_tries_find(&t, old));
			ctl_tries_drop(&t, old);
			assert_null(ctl_tries_find(&t, old));
		}
	}
	assert_int_equal(most, 101);
	assert_int_equal(t.n, 100);
	for (int i = NODES - 100; i < NODES; i++) {
		struct ctl_tries *e;

		name(node, sizeof(node), i);
		e = ctl_tries_find(&t, node);
		assert_non_null(e);
		assert_int_equal(e->last, i); /* its own entry, kept */
		ctl_tries_drop(&t, node);
	}
	assert_int_equal(t.n, 0);
	ctl_tries_drop(&t, "gpu99999"); /* none: fine */
	ctl_tries_free(&t);
}

/* all at once: every one has its entry, found again after the others */
static void test_all_at_once(void **state)
{
	struct ctl_tries_table t = {0};
	char node[32];

	(void)state;
	for (int i = 0; i < NODES; i++) {
		struct ctl_tries *e;

		name(node, sizeof(node), i);
		e = ctl_tries_get(&t, node);
		assert_non_null(e);
		e->tries = i;
	}
	assert_int_equal(t.n, NODES);
	for (size_t k = 1; k < t.n; k++)
		assert_true(strcmp(t.v[k - 1]->node, t.v[k]->node) < 0);
	for (int i = 0; i < NODES; i++) {
		name(node, sizeof(node), i);
		assert_int_equal(ctl_tries_get(&t, node)->tries, i);
	}
	assert_int_equal(t.n, NODES); /* get finds, does not add twice */
	for (int i = 0; i < NODES; i += 2) {
		name(node, sizeof(node), i);
		ctl_tries_drop(&t, node);
	}
	assert_int_equal(t.n, NODES / 2);
	for (int i = 1; i < NODES; i += 2) {
		name(node, sizeof(node), i);
		assert_int_equal(ctl_tries_find(&t, node)->tries, i);
	}
	ctl_tries_free(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_through_repair),
	    cmocka_unit_test(test_all_at_once),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
