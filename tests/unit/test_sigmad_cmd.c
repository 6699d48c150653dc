/*
 * test_sigmad_cmd.c - the command table of sigmad's socket: which words
 * make which command on the wire and on sigmactl's command line, which
 * commands are for admins, and the usage lines sigmactl prints.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cmd_table.h"

/* the request's id, or -1; words split on '|' */
static int request(const char *req)
{
	char buf[256], *w[8], *save = NULL, *tok;
	const struct cmd_spec *cmd;
	int n = 0;

	strcpy(buf, req);
	for (tok = strtok_r(buf, "|", &save); tok && n < 8;
	     tok = strtok_r(NULL, "|", &save))
		w[n++] = tok;
	cmd = cmd_match_request(w, n);
	return cmd ? (int)cmd->id : -1;
}

static void test_requests(void **state)
{
	(void)state;
	assert_int_equal(request("status"), CMD_STATUS);
	assert_int_equal(request("status|x"), -1);
	assert_int_equal(request("spares"), CMD_SPARES);
	assert_int_equal(request("spares|add|n1"), CMD_SPARE_ADD);
	assert_int_equal(request("spares|remove|n1"), CMD_SPARE_REMOVE);
	assert_int_equal(request("spares|add"), -1);
	assert_int_equal(request("spares|del|n1"), -1);
	assert_int_equal(request("history"), CMD_HISTORY);
	assert_int_equal(request("history|job=7|node=n1"), CMD_HISTORY);
	assert_int_equal(request("drain|n1|fan swap"), CMD_DRAIN);
	assert_int_equal(request("drain|n1"), -1);
	assert_int_equal(request("resume|n1"), CMD_RESUME);
	assert_int_equal(request("resume|n1|x"), -1);
	assert_int_equal(request("bogus"), -1);
}

static void test_command_lines(void **state)
{
	char *none[] = {NULL}, *node[] = {"n1"}, *add[] = {"add", "n1"},
	     *bad[] = {"foo", "n1"};

	(void)state;
	/* drain's reason and history's filters are options, not words */
	assert_int_equal(cmd_match_line("drain", node, 1)->id, CMD_DRAIN);
	assert_int_equal(cmd_match_line("history", none, 0)->id, CMD_HISTORY);
	assert_null(cmd_match_line("history", node, 1));
	assert_int_equal(cmd_match_line("spares", add, 2)->id, CMD_SPARE_ADD);
	assert_null(cmd_match_line("spares", bad, 2));
	assert_null(cmd_match_line("spares", add, 1));
	assert_null(cmd_match_line("status", node, 1));
}

static void test_admin_only(void **state)
{
	(void)state;
	assert_true(cmd_admin_only("drain"));
	assert_true(cmd_admin_only("resume"));
	assert_true(cmd_admin_only("spares")); /* add and remove */
	assert_false(cmd_admin_only("status"));
	assert_false(cmd_admin_only("history"));
	assert_false(cmd_admin_only("suspect")); /* sigmad checks the job */
	assert_false(cmd_admin_only("slow"));
	assert_false(cmd_admin_only("bogus"));
}

static void test_usage(void **state)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	(void)state;
	assert_non_null(f);
	cmd_usage(f);
	assert_int_equal(fclose(f), 0);
	assert_string_equal(
	    text,
	    "  status                          spares, managed jobs, nodes in repair\n"
	    "  spares [add|remove NODE]        the hot-spare pool\n"
	    "  history [--job ID] [--node NAME] [--since TIME] [--json]\n"
	    "  drain NODE --reason TEXT        take a node out (root, SlurmUser)\n"
	    "  resume NODE                     put it back (root, SlurmUser)\n"
	    "  suspect NODE --job ID           drain a node of your in-job restart job where its rank keeps dying\n"
	    "  slow NODE --job ID              warn of a node of your job where its rank stays slow (the tuner)\n"
	    "  relaunch --job ID --launch N [--off NODE,...]\n"
	    "                                  count a relaunch of your in-job restart job (once a launch) against its restarts; --off: the nodes it moved off\n");
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_requests),
	    cmocka_unit_test(test_command_lines),
	    cmocka_unit_test(test_admin_only),
	    cmocka_unit_test(test_usage),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
