/*
 * test_sigmactl_show.c - sigmactl's output for people: status and spares
 * from sigmad's JSON, history events; local dates and durations, never
 * epoch seconds; escaped user text; a clear error for a bad reply.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "sigma.h"
#include "sigmactl_show.h"

static char *buf;
static size_t len;

static FILE *open_out(void)
{
	FILE *f;

	free(buf);
	buf = NULL;
	f = open_memstream(&buf, &len);
	assert_non_null(f);
	return f;
}

static const char status[] =
    "{\"now\":1796108127,\"spares\":{\"reservation\":\"sigma_spares\","
    "\"pool\":[\"n6\"],\"members\":[\"n5\",\"n6\"]},"
    "\"jobs\":[{\"job\":7,\"uid\":1000,\"state\":\"RUNNING\",\"restarts\":1,"
    "\"restarts_left\":2,\"nodes\":[\"n1\",\"n2\",\"n4\",\"n5\"]}],"
    "\"recoveries\":[{\"job\":7,\"attempt\":2,\"verdict\":\"requeue\","
    "\"kind\":\"failure\",\"nodes\":[\"n3\"],\"spares\":[\"n5\"],"
    "\"decided_at\":1796108115}],"
    "\"repair\":[{\"node\":\"n3\",\"state\":\"drained\",\"since\":1796107935,"
    "\"reason\":\"sigma: probe quick: gpu0 ecc\\u001b[2J\"}],"
    "\"admin_drained\":[]}";

static void test_status(void **state)
{
	FILE *f = open_out();
	char err[200];

	(void)state;
	setenv("TZ", "UTC", 1);
	tzset();
	assert_int_equal(show_status(status, 1796108127, f, err, sizeof(err)),
			 0);
	fclose(f);
	assert_string_equal(
	    buf, "spares: n6 (1 of 2 in reservation sigma_spares)\n"
		 "managed jobs:\n"
		 "  7 RUNNING restarts=1 nodes=n1,n2,n4,n5 (2 restarts left)\n"
		 "recoveries in progress:\n"
		 "  job 7 attempt 2: requeue failure on n3 -> n5, for 12s\n"
		 "nodes in repair:\n"
		 "  n3 drained since 2026-12-01 06:52:15 UTC (3m12s ago): "
		 "sigma: probe quick: gpu0 ecc\\x1b[2J\n"
		 "nodes drained by an admin (sigmactl drain):\n"
		 "  none\n");
	assert_null(strstr(buf, "1796"));
}

static void test_spares_and_errors(void **state)
{
	FILE *f = open_out();
	char err[200];

	(void)state;
	assert_int_equal(
	    show_spares("{\"reservation\":\"sigma_spares\",\"pool\":[],"
			"\"members\":[\"n5\",\"n6\"]}",
			f, err, sizeof(err)),
	    0);
	fclose(f);
	assert_string_equal(buf, "reservation sigma_spares: (empty)\n"
				 "pool members: n5,n6\n");
	f = open_out();
	assert_int_equal(show_status("spares: n5", 0, f, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "sigmad's reply is not JSON: column"));
	assert_int_equal(show_spares("[1]", f, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "not a JSON object"));
	fclose(f);
}

static void test_history(void **state)
{
	struct show_history h = {0};
	struct evlog_event ev = {0};
	FILE *f = open_out();

	(void)state;
	setenv("TZ", "UTC", 1);
	tzset();
	ev.time = 1796108115;
	strcpy(ev.type, "decide");
	ev.job = 7;
	ev.attempt = 2;
	strcpy(ev.kind, "failure");
	strcpy(ev.node, "n3");
	strcpy(ev.verdict, "requeue");
	strcpy(ev.spare, "n5");
	show_event(&h, &ev, f);
	strcpy(ev.type, "complete");
	ev.time += 192;
	ev.kind[0] = ev.verdict[0] = ev.spare[0] = '\0';
	strcpy(ev.text, "requeued onto n5");
	show_event(&h, &ev, f);
	fclose(f);
	assert_string_equal(
	    buf, "2026-12-01 06:55:15 UTC decide       job 7 attempt 2 failure "
		 "n3 -> requeue spares n5\n"
		 "2026-12-01 06:58:27 UTC complete     job 7 attempt 2 n3: "
		 "requeued onto n5 (3m12s after the decision)\n");
}

static int teardown(void **state)
{
	(void)state;
	free(buf);
	unsetenv("TZ");
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_status),
	    cmocka_unit_test(test_spares_and_errors),
	    cmocka_unit_test(test_history),
	};

	return cmocka_run_group_tests(tests, NULL, teardown);
}
