/*
 * test_sigmad_conf.c - sigmad's sigma.conf keys, the AdminComment options
 * block and node reason classes.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "conf.h"
#include "sigma.h"

static int parse(struct sigmad_config *cfg, const char *text, char *err,
		 size_t errlen)
{
	return sigmad_config_parse(cfg, text, strlen(text), "sigma.conf", err,
				   errlen);
}

static void test_defaults_and_keys(void **state)
{
	struct sigmad_config cfg;
	char err[256] = "";
	const char *text =
	    "# probe keys are skipped, not judged\n"
	    "probe_temp_max = 85\n"
	    "unknown_probe_thing = whatever\n"
	    "sigmad_socket = /tmp/x/sigmad.sock\n"
	    "sigmad_state_dir = /tmp/x/state\n"
	    "sigmad_spares = n[5-6],n9\n"
	    "sigmad_reservation = sigma_spares_tb\n"
	    "sigmad_poll_interval = 1\n"
	    "sigmad_cooldown = 5\n"
	    "sigmad_restart_delay = 9\n"
	    "sigmad_warn_grace = 20\n"
	    "sigmad_proactive = no\n"
	    "sigmad_down_on_no_respond = off\n"
	    "sigmad_probe_retries = 2\n"
	    "sigmad_log_level = debug\n"
	    "sigmad_probe_command = /usr/sbin/sigma-probe --level=full\n";

	sigmad_config_init(&cfg);
	assert_string_equal(cfg.socket_path, SIGMAD_DEFAULT_SOCKET);
	assert_int_equal(cfg.poll_interval_s, 5);
	assert_int_equal(cfg.restart_delay_s, 5);
	assert_true(cfg.policy.proactive);
	assert_int_equal(parse(&cfg, text, err, sizeof(err)), 0);
	assert_string_equal(cfg.socket_path, "/tmp/x/sigmad.sock");
	assert_string_equal(cfg.state_dir, "/tmp/x/state");
	assert_string_equal(cfg.spares, "n[5-6],n9");
	assert_string_equal(cfg.reservation, "sigma_spares_tb");
	assert_string_equal(cfg.probe_command,
			    "/usr/sbin/sigma-probe --level=full");
	assert_int_equal(cfg.poll_interval_s, 1);
	assert_int_equal(cfg.policy.cooldown_s, 5);
	assert_int_equal(cfg.restart_delay_s, 9);
	assert_int_equal(cfg.policy.warn_grace_s, 20);
	assert_int_equal(cfg.policy.probe_retries, 2);
	assert_false(cfg.policy.proactive);
	assert_false(cfg.down_on_no_respond);
	assert_int_equal(cfg.log_level, SIGMA_LOG_DEBUG);

	char path[256];
	assert_int_equal(sigmad_config_event_log(&cfg, path, sizeof(path)), 0);
	assert_string_equal(path, "/tmp/x/state/events.jsonl");
}

struct bad_case {
	const char *text;
	const char *says; /* in the error */
};

static void test_bad_keys(void **state)
{
	static const struct bad_case cases[] = {
	    {"sigmad_bogus = 1\n", "sigma.conf:1: unknown key 'sigmad_bogus'"},
	    {"x=1\nsigmad_poll_interval = 0\n", "sigma.conf:2:"},
	    {"sigmad_poll_interval = 5s\n", "sigmad_poll_interval"},
	    {"sigmad_cooldown = -1\n", "sigmad_cooldown"},
	    {"sigmad_restart_delay = 0\n", "sigmad_restart_delay"},
	    {"sigmad_restart_delay = 601\n", "sigmad_restart_delay"},
	    {"sigmad_warn_grace = 999999\n", "sigmad_warn_grace"},
	    {"sigmad_socket = relative.sock\n", "absolute"},
	    {"sigmad_state_dir = var/lib\n", "absolute"},
	    {"sigmad_spares = n5 n6\n", "node list"},
	    {"sigmad_spare_feature = a,b\n", "feature"},
	    {"sigmad_reservation = a b\n", "reservation"},
	    {"sigmad_proactive = maybe\n", "yes or no"},
	    {"sigmad_log_level = loud\n", "error|warn|info|debug"},
	    {"sigmad_spares = n5\nsigmad_spare_feature = spare\n", "not both"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct sigmad_config cfg;
		char err[256] = "";

		sigmad_config_init(&cfg);
		assert_true(parse(&cfg, cases[i].text, err, sizeof(err)) < 0);
		print_message("%s", err);
		print_message("\n");
		assert_non_null(strstr(err, cases[i].says));
		/* a refused file leaves the settings as they were */
		assert_int_equal(cfg.poll_interval_s, 5);
		assert_string_equal(cfg.spares, "");
	}
}

static void test_load_missing_file(void **state)
{
	struct sigmad_config cfg;
	char err[256] = "";

	sigmad_config_init(&cfg);
	assert_int_equal(sigmad_config_load(&cfg, "/nonexistent/sigma.conf",
					    err, sizeof(err)),
			 -ENOENT);
	assert_non_null(strstr(err, "/nonexistent/sigma.conf"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_defaults_and_keys),
	    cmocka_unit_test(test_bad_keys),
	    cmocka_unit_test(test_load_missing_file),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
