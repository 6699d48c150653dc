/*
 * test_spank_config.c - sigma.so's plugstack.conf arguments and the job's
 * --sigma-* option values: defaults, every key, every kind of bad value.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sigma.h"
#include "sigma_spank.h"

static int parse(struct sigma_spank_conf *conf, char *err, size_t errlen, int n,
		 ...)
{
	char *av[16];
	va_list ap;

	va_start(ap, n);
	for (int i = 0; i < n; i++)
		av[i] = va_arg(ap, char *);
	va_end(ap);
	return sigma_spank_conf_parse(conf, n, av, err, errlen);
}

static void test_defaults(void **state)
{
	struct sigma_spank_conf conf;
	char err[256] = "";

	assert_int_equal(parse(&conf, err, sizeof(err), 0), 0);
	assert_string_equal(conf.probe, SIGMA_PROBE_PATH);
	assert_int_equal(conf.probe_timeout, 60);
	assert_int_equal(conf.default_probe, SIGMA_PROBE_QUICK);
	assert_int_equal(conf.epilog_probe, SIGMA_PROBE_JOB);
	assert_true(conf.drain);
	assert_string_equal(conf.ckpt_root, "");
	assert_string_equal(conf.config, "");
}

static void test_every_key(void **state)
{
	struct sigma_spank_conf conf;
	char err[256] = "";

	assert_int_equal(
	    parse(&conf, err, sizeof(err), 7,
		  "probe=/opt/sigma/sbin/sigma-probe", "probe_timeout=15",
		  "default_probe=full", "epilog_probe=quick", "drain=no",
		  "ckpt_root=/scratch/ckpt", "config=/etc/sigma/sigma.conf"),
	    0);
	assert_string_equal(conf.probe, "/opt/sigma/sbin/sigma-probe");
	assert_int_equal(conf.probe_timeout, 15);
	assert_int_equal(conf.default_probe, SIGMA_PROBE_FULL);
	assert_int_equal(conf.epilog_probe, SIGMA_PROBE_QUICK);
	assert_false(conf.drain);
	assert_string_equal(conf.ckpt_root, "/scratch/ckpt");
	assert_string_equal(conf.config, "/etc/sigma/sigma.conf");

	assert_int_equal(parse(&conf, err, sizeof(err), 2, "default_probe=off",
			       "epilog_probe=job"),
			 0);
	assert_int_equal(conf.default_probe, SIGMA_PROBE_OFF);
	assert_int_equal(conf.epilog_probe, SIGMA_PROBE_JOB);
}

/* each bad argument fails closed and the message names the key */
static void test_bad_values(void **state)
{
	static const struct {
		const char *arg, *says;
	} bad[] = {
	    {"probe=sigma-probe", "absolute"},
	    {"probe=", "absolute"},
	    {"probe_timeout=0", "probe_timeout"},
	    {"probe_timeout=3601", "probe_timeout"},
	    {"probe_timeout=ten", "probe_timeout"},
	    {"probe_timeout=-5", "probe_timeout"},
	    {"default_probe=slow", "off|quick|full"},
	    {"default_probe=job", "off|quick|full"},
	    {"epilog_probe=always", "off|quick|full|job"},
	    {"drain=maybe", "drain"},
	    {"ckpt_root=ckpt", "absolute"},
	    {"config=sigma.conf", "absolute"},
	    {"probes=/x", "unknown argument 'probes'"},
	    {"verbose", "not key=value"},
	    {"=x", "empty key"},
	};
	struct sigma_spank_conf conf;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char err[256] = "";
		char *av[1] = {(char *)bad[i].arg};

		assert_true(
		    sigma_spank_conf_parse(&conf, 1, av, err, sizeof(err)) < 0);
		if (!strstr(err, bad[i].says))
			fail_msg("'%s': message '%s' lacks '%s'", bad[i].arg,
				 err, bad[i].says);
	}
}

static void test_long_path(void **state)
{
	struct sigma_spank_conf conf;
	char arg[PATH_MAX + 64], err[256];

	memcpy(arg, "ckpt_root=/", 11);
	memset(arg + 11, 'a', 1100);
	arg[1111] = '\0';
	assert_int_equal(parse(&conf, err, sizeof(err), 1, arg), -ENAMETOOLONG);
}

static void test_options(void **state)
{
	struct sigma_job_opts o;
	char err[256];

	sigma_job_opts_init(&o);
	assert_false(sigma_job_opts_any(&o));
	assert_int_equal(
	    sigma_job_opts_set(&o, SIGMA_OPT_PROBE, "full", err, sizeof(err)),
	    0);
	assert_int_equal(o.probe, SIGMA_PROBE_FULL);
	assert_true(sigma_job_opts_any(&o));
	/* idempotent: Slurm may call a callback twice */
	assert_int_equal(
	    sigma_job_opts_set(&o, SIGMA_OPT_PROBE, "full", err, sizeof(err)),
	    0);
	assert_int_equal(o.probe, SIGMA_PROBE_FULL);
	assert_int_equal(
	    sigma_job_opts_set(&o, SIGMA_OPT_PROBE, "off", err, sizeof(err)),
	    0);
	assert_int_equal(o.probe, SIGMA_PROBE_OFF);
	assert_int_equal(sigma_job_opts_set(&o, SIGMA_OPT_CKPT_DIR,
					    "/scratch/me/run1", err,
					    sizeof(err)),
			 0);
	assert_string_equal(o.ckpt_dir, "/scratch/me/run1");
	assert_int_equal(sigma_job_opts_set(&o, SIGMA_OPT_CKPT_EVERY, "50", err,
					    sizeof(err)),
			 0);
	assert_int_equal(o.ckpt_every, 50);
	assert_int_equal(
	    sigma_job_opts_set(&o, SIGMA_OPT_SPARES, "0", err, sizeof(err)), 0);
	assert_int_equal(o.spares, 0);
	assert_int_equal(sigma_job_opts_set(&o, SIGMA_OPT_MAX_RESTARTS, "3",
					    err, sizeof(err)),
			 0);
	assert_int_equal(o.max_restarts, 3);
	assert_int_equal(sigma_job_opts_check(&o, err, sizeof(err)), 0);
	/* in-allocation spares go with an in-job restart only */
	assert_int_equal(sigma_job_opts_set(&o, SIGMA_OPT_JOB_SPARES, "2", err,
					    sizeof(err)),
			 0);
	assert_true(sigma_job_opts_check(&o, err, sizeof(err)) < 0);
	assert_non_null(strstr(err, "--sigma-job-spares=2: in-allocation spares are for --sigma-restart=in-job"));
	assert_int_equal(sigma_job_opts_set(&o, SIGMA_OPT_RESTART, "in-job",
					    err, sizeof(err)),
			 0);
	assert_int_equal(o.restart, SIGMA_RESTART_IN_JOB);
	assert_int_equal(sigma_job_opts_check(&o, err, sizeof(err)), 0);
}

static void test_option_errors(void **state)
{
	static const struct {
		int id;
		const char *value, *says;
	} bad[] = {
	    {SIGMA_OPT_PROBE, "fast",
	     "--sigma-probe=fast: expected one of off|quick|full"},
	    {SIGMA_OPT_PROBE, "", "--sigma-probe: missing value"},
	    {SIGMA_OPT_PROBE, "QUICKER", "off|quick|full"},
	    {SIGMA_OPT_CKPT_DIR, "relative/dir",
	     "--sigma-ckpt-dir=relative/dir: expected an absolute path"},
	    {SIGMA_OPT_CKPT_DIR, "/a/../etc", "a '..' component is not allowed"},
	    {SIGMA_OPT_CKPT_DIR, "/a/..", "a '..' component is not allowed"},
	    {SIGMA_OPT_CKPT_DIR, "/a/./b", "a '.' component is not allowed"},
	    {SIGMA_OPT_CKPT_DIR, "/.", "a '.' component is not allowed"},
	    {SIGMA_OPT_CKPT_DIR, "/a//b", "an empty component"},
	    {SIGMA_OPT_CKPT_DIR, "//a", "an empty component"},
	    {SIGMA_OPT_CKPT_DIR, "/a/b/", "an empty component"},
	    {SIGMA_OPT_CKPT_DIR, "/a\tb", "control character"},
	    {SIGMA_OPT_CKPT_EVERY, "0",
	     "--sigma-ckpt-every=0: expected a whole number from 1 to 100000000"},
	    {SIGMA_OPT_CKPT_EVERY, "1e3", "--sigma-ckpt-every"},
	    {SIGMA_OPT_CKPT_EVERY, "100000001", "--sigma-ckpt-every"},
	    {SIGMA_OPT_SPARES, "-1",
	     "--sigma-spares=-1: expected a whole number from 0 to 1024"},
	    {SIGMA_OPT_SPARES, "two", "--sigma-spares"},
	    {SIGMA_OPT_SPARES, "1025", "--sigma-spares"},
	    {SIGMA_OPT_MAX_RESTARTS, "3x",
	     "--sigma-max-restarts=3x: expected a whole number from 0 to 10000"},
	    {SIGMA_OPT_MAX_RESTARTS, " 3", "--sigma-max-restarts"},
	    {SIGMA_OPT_RESTART, "always",
	     "--sigma-restart=always: expected one of requeue|in-job"},
	    {SIGMA_OPT_JOB_SPARES, "-1",
	     "--sigma-job-spares=-1: expected a whole number from 0 to 1024"},
	};
	struct sigma_job_opts o;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char err[256] = "";

		sigma_job_opts_init(&o);
		assert_true(sigma_job_opts_set(&o, bad[i].id, bad[i].value, err,
					       sizeof(err)) < 0);
		if (!strstr(err, bad[i].says))
			fail_msg("%s=%s: message '%s' lacks '%s'",
				 sigma_opt_name(bad[i].id), bad[i].value, err,
				 bad[i].says);
		/* a refused value leaves the option unset */
		assert_false(sigma_job_opts_any(&o));
	}
	/* "/a..b" is a name, not a parent reference */
	assert_int_equal(
	    sigma_job_opts_set(&o, SIGMA_OPT_CKPT_DIR, "/a..b/c..", NULL, 0),
	    0);
}

static void test_levels(void **state)
{
	struct sigma_spank_conf conf;
	struct sigma_job_opts o;

	sigma_spank_conf_init(&conf);
	sigma_job_opts_init(&o);
	assert_int_equal(sigma_job_probe_level(&o, &conf), SIGMA_PROBE_QUICK);
	assert_int_equal(sigma_job_epilog_level(&o, &conf), SIGMA_PROBE_QUICK);
	o.probe = SIGMA_PROBE_FULL;
	assert_int_equal(sigma_job_epilog_level(&o, &conf), SIGMA_PROBE_FULL);
	conf.epilog_probe = SIGMA_PROBE_QUICK;
	assert_int_equal(sigma_job_epilog_level(&o, &conf), SIGMA_PROBE_QUICK);
	/* a job that turned probing off is not probed after it either */
	o.probe = SIGMA_PROBE_OFF;
	assert_int_equal(sigma_job_probe_level(&o, &conf), SIGMA_PROBE_OFF);
	assert_int_equal(sigma_job_epilog_level(&o, &conf), SIGMA_PROBE_OFF);
	conf.epilog_probe = SIGMA_PROBE_OFF;
	o.probe = SIGMA_PROBE_FULL;
	assert_int_equal(sigma_job_epilog_level(&o, &conf), SIGMA_PROBE_OFF);
}

static void test_admin_block(void **state)
{
	struct sigma_spank_conf conf;
	struct sigma_job_opts o;
	char block[256], out[512];

	sigma_spank_conf_init(&conf);
	sigma_job_opts_init(&o);
	o.spares = 1;
	o.max_restarts = 3;
	o.ckpt_every = 50;
	assert_int_equal(
	    sigma_admin_block_format(&o, &conf, block, sizeof(block)), 0);
	assert_string_equal(
	    block, "sigma[probe=quick,spares=1,max_restarts=3,ckpt_every=50,on_warning=drain-after]");
	/* unset values: the documented defaults */
	sigma_job_opts_init(&o);
	o.probe = SIGMA_PROBE_FULL;
	sigma_admin_block_format(&o, &conf, block, sizeof(block));
	assert_string_equal(
	    block, "sigma[probe=full,spares=0,max_restarts=0,ckpt_every=100,on_warning=drain-after]");
	assert_int_equal(sigma_admin_block_format(&o, &conf, block, 10),
			 -ENAMETOOLONG);

	sigma_admin_block_format(&o, &conf, block, sizeof(block));
	assert_int_equal(
	    sigma_admin_comment_merge(NULL, block, out, sizeof(out)), 1);
	assert_string_equal(out, block);
	assert_int_equal(sigma_admin_comment_merge("", block, out, sizeof(out)),
			 1);
	assert_string_equal(out, block);
	/* an admin's text is kept, after the block */
	assert_int_equal(
	    sigma_admin_comment_merge("ticket 42", block, out, sizeof(out)), 1);
	assert_string_equal(
	    out,
	    "sigma[probe=full,spares=0,max_restarts=0,ckpt_every=100,on_warning=drain-after] ticket 42");
	/* a requeued job keeps its block and the controller's account */
	assert_int_equal(
	    sigma_admin_comment_merge(
		"sigma[probe=quick,spares=1,max_restarts=3,ckpt_every=50] sigma: attempt 2",
		block, out, sizeof(out)),
	    0);
	assert_int_equal(sigma_admin_comment_merge("ticket 42", block, out, 20),
			 -ENAMETOOLONG);
}

static void test_ckpt_path(void **state)
{
	struct sigma_spank_conf conf;
	struct sigma_job_opts o;
	char path[PATH_MAX], err[256], comp[32];

	sigma_spank_conf_init(&conf);
	sigma_job_opts_init(&o);
	assert_int_equal(sigma_ckpt_path(&o, &conf, "alice", "train", path,
					 sizeof(path), err, sizeof(err)),
			 -ENOENT);
	sigma_strlcpy(conf.ckpt_root, "/ckpt", sizeof(conf.ckpt_root));
	assert_int_equal(sigma_ckpt_path(&o, &conf, "alice", "moe 7b/run", path,
					 sizeof(path), err, sizeof(err)),
			 0);
	assert_string_equal(path, "/ckpt/alice/moe_7b_run");
	assert_int_equal(sigma_ckpt_path(&o, &conf, "alice", "..", path,
					 sizeof(path), err, sizeof(err)),
			 0);
	assert_string_equal(path, "/ckpt/alice/_.");
	assert_int_equal(sigma_ckpt_path(&o, &conf, "alice", NULL, path,
					 sizeof(path), err, sizeof(err)),
			 0);
	assert_string_equal(path, "/ckpt/alice/job");
	/* a trailing '/' on ckpt_root: the default path still keeps the rule */
	sigma_strlcpy(conf.ckpt_root, "/ckpt//", sizeof(conf.ckpt_root));
	assert_int_equal(sigma_ckpt_path(&o, &conf, "alice", "run", path,
					 sizeof(path), err, sizeof(err)),
			 0);
	assert_string_equal(path, "/ckpt/alice/run");
	assert_int_equal(sigma_ckpt_path_allowed(path, conf.ckpt_root, "alice",
						 err, sizeof(err)),
			 0);
	sigma_strlcpy(conf.ckpt_root, "/", sizeof(conf.ckpt_root));
	assert_int_equal(sigma_ckpt_path(&o, &conf, "alice", "run", path,
					 sizeof(path), err, sizeof(err)),
			 0);
	assert_string_equal(path, "/alice/run");
	assert_int_equal(sigma_ckpt_path_allowed(path, conf.ckpt_root, "alice",
						 err, sizeof(err)),
			 0);
	sigma_strlcpy(conf.ckpt_root, "/ckpt", sizeof(conf.ckpt_root));
	assert_int_equal(sigma_ckpt_path(&o, &conf, "", "x", path, sizeof(path),
					 err, sizeof(err)),
			 -EINVAL);
	/* the user's own directory wins */
	sigma_strlcpy(o.ckpt_dir, "/home/alice/ck", sizeof(o.ckpt_dir));
	assert_int_equal(sigma_ckpt_path(&o, &conf, "alice", "x", path,
					 sizeof(path), err, sizeof(err)),
			 0);
	assert_string_equal(path, "/home/alice/ck");
	assert_int_equal(
	    sigma_ckpt_path(&o, &conf, "alice", "x", path, 8, err, sizeof(err)),
	    -ENAMETOOLONG);

	sigma_path_component(".hidden", comp, sizeof(comp));
	assert_string_equal(comp, "_hidden");
	sigma_path_component("a-b_c.d", comp, sizeof(comp));
	assert_string_equal(comp, "a-b_c.d");
	sigma_path_component("\xc3\xa9t\xc3\xa9", comp, sizeof(comp));
	assert_string_equal(comp, "__t__");
	sigma_path_component("abcdefghij", comp, 5);
	assert_string_equal(comp, "abcd");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_defaults),
	    cmocka_unit_test(test_every_key),
	    cmocka_unit_test(test_bad_values),
	    cmocka_unit_test(test_long_path),
	    cmocka_unit_test(test_options),
	    cmocka_unit_test(test_option_errors),
	    cmocka_unit_test(test_levels),
	    cmocka_unit_test(test_admin_block),
	    cmocka_unit_test(test_ckpt_path),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
