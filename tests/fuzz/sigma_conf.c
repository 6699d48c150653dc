/*
 * sigma_conf.c - sigma.conf, one file read by three parsers: sigmad's
 * (sbin/controller/conf.c sigmad_config_parse, under sigmad_config_load),
 * the probe's (sbin/probe/conf.c probe_conf_parse_buf, under
 * probe_conf_load) and the site caps the plugin reads at submit
 * (lib/contract.c sigma_site_caps_load). The input is the file.
 *
 * FUZZ_SOURCES: sbin/controller/conf.c sbin/controller/policy.c sbin/probe/conf.c lib/contract.c lib/kv.c lib/str.c lib/log.c lib/file.c
 *
 * Invariants:
 * - sigmad: a file that parses gives settings within the limits of
 *   sigmad(8): socket and state directory absolute (the socket shorter
 *   than sun_path), spares a node list, feature and reservation names,
 *   not both spares and a feature, every interval and count in range,
 *   the caps within the contract's limits; a file that does not parse
 *   leaves the running settings exactly as they were (SIGHUP), with a
 *   "NAME:LINE: " message;
 * - the probe: every threshold finite and within its key's range, warn
 *   and fail in order, sizes in range, every path absolute or (where
 *   allowed) empty, the NVML library named (not empty);
 * - the plugin's caps (sigma_site_caps_load of the same bytes) equal
 *   sigmad's whenever sigmad accepts the file: a job refused at submit
 *   and one sigmad refuses are refused by the same numbers.
 */
#include "fuzz.h"

#include <ctype.h>
#include <math.h>

#include "conf.h"
#include "probe.h"

#define NAME "sigma.conf"

static struct sigmad_config cfg, saved;
static struct probe_conf pc;
static char caps_path[512];

static bool all_of(const char *s, const char *extra)
{
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && !strchr(extra, *s))
			return false;
	return true;
}

static void check_sigmad(void)
{
	const struct sigmad_config *c = &cfg;
	char log[PATH_MAX + 64];

	CHECK_TERMINATED(c->socket_path);
	CHECK_TERMINATED(c->state_dir);
	CHECK_TERMINATED(c->spares);
	CHECK_TERMINATED(c->spare_feature);
	CHECK_TERMINATED(c->reservation);
	CHECK_TERMINATED(c->probe_command);
	CHECK(c->socket_path[0] == '/');
	CHECK(c->state_dir[0] == '/');
	CHECK(all_of(c->spares, "_-.,[]"));
	CHECK(all_of(c->spare_feature, "_-."));
	CHECK(c->reservation[0] && all_of(c->reservation, "_-."));
	CHECK(!(c->spares[0] && c->spare_feature[0]));
	for (const char *p = c->probe_command; *p; p++)
		CHECK(!iscntrl((unsigned char)*p));
	CHECK(c->poll_interval_s >= 1 && c->poll_interval_s <= 3600);
	CHECK(c->restart_delay_s >= 1 && c->restart_delay_s <= 600);
	CHECK(c->policy.cooldown_s >= 0 && c->policy.cooldown_s <= 7 * 86400);
	CHECK(c->policy.warn_grace_s >= 1 && c->policy.warn_grace_s <= 86400);
	CHECK(c->policy.probe_retries >= 0 && c->policy.probe_retries <= 100);
	CHECK(c->log_level >= SIGMA_LOG_ERROR && c->log_level <= SIGMA_LOG_DEBUG);
	CHECK(c->caps.spares_per_job >= 0 &&
	      c->caps.spares_per_job <= SIGMA_SPARES_MAX);
	CHECK(c->caps.spares_per_user >= 0 &&
	      c->caps.spares_per_user <= SIGMA_SPARES_MAX);
	CHECK(c->caps.max_restarts >= 0 &&
	      c->caps.max_restarts <= SIGMA_RESTARTS_MAX);
	/* the event log's path is made from state_dir: it fits or says so */
	CHECK(sigmad_config_event_log(c, log, sizeof(log)) == 0);
}

/* the probe's keys and their ranges (sbin/probe/conf.c, sigma.conf(5)) */
#define D(f, lo, hi) {#f, offsetof(struct probe_conf, f), lo, hi}
static const struct {
	const char *name;
	size_t off;
	double min, max;
} doubles[] = {
    D(temp_warn_c, 0, 200),	       D(temp_fail_c, 0, 200),
    D(ecc_uncorrected_fail, 1, 1e12), D(ecc_corrected_rate_warn, 0, 1e12),
    D(retired_pages_warn, 1, 1e6),     D(retired_pages_fail, 1, 1e6),
    D(power_spike_ratio, 1, 10),       D(power_spike_warn_w, 1, 1e5),
    D(mem_avail_warn_mb, 0, 1e9),      D(mem_avail_fail_mb, 0, 1e9),
    D(disk_free_warn_gb, 0, 1e9),      D(disk_free_fail_gb, 0, 1e9),
};
#undef D

static void check_probe(void)
{
	const struct probe_conf *c = &pc;

	for (size_t i = 0; i < sizeof(doubles) / sizeof(doubles[0]); i++) {
		double v;

		memcpy(&v, (const char *)c + doubles[i].off, sizeof(v));
		CHECK(isfinite(v));
		CHECK(v >= doubles[i].min && v <= doubles[i].max);
	}
	CHECK(c->temp_warn_c <= c->temp_fail_c);
	CHECK(c->retired_pages_warn <= c->retired_pages_fail);
	CHECK(c->mem_avail_warn_mb >= c->mem_avail_fail_mb);
	CHECK(c->disk_free_warn_gb >= c->disk_free_fail_gb);
	CHECK(c->quick_gemm_n >= 8 && c->quick_gemm_n <= 1024);
	CHECK(c->full_gemm_n >= 8 && c->full_gemm_n <= 4096);
	CHECK(c->full_mem_mb >= 0 && c->full_mem_mb <= (1 << 20));
	CHECK(c->gpu_mem_mb >= 0 && c->gpu_mem_mb <= (1 << 20));
	CHECK(c->power_samples >= 1 && c->power_samples <= 1000);
	CHECK(c->warn_confirm >= 1 && c->warn_confirm <= 100);
	CHECK_TERMINATED(c->inject_dir);
	CHECK_TERMINATED(c->sysfs);
	CHECK_TERMINATED(c->procfs);
	CHECK_TERMINATED(c->nvml_library);
	CHECK_TERMINATED(c->state_dir);
	CHECK_TERMINATED(c->ckpt_root);
	CHECK_TERMINATED(c->slurm_conf);
	CHECK(c->sysfs[0] == '/' && c->procfs[0] == '/');
	CHECK(!c->inject_dir[0] || c->inject_dir[0] == '/');
	CHECK(!c->state_dir[0] || c->state_dir[0] == '/');
	CHECK(!c->ckpt_root[0] || c->ckpt_root[0] == '/');
	CHECK(!c->slurm_conf[0] || c->slurm_conf[0] == '/');
	/* a soname or a path; empty would dlopen the probe itself and find
	 * no GPU: a typo must not turn GPU checks off */
	CHECK(c->nvml_library[0] != '\0');
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_quiet();
	snprintf(caps_path, sizeof(caps_path), "%s/sigma.conf", fuzz_scratch());
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data;
	struct sigma_site_caps caps;
	char err[512], want[32];
	int rc, rc_caps;

	/* the running settings: not the defaults, so a partial update shows */
	sigmad_config_init(&cfg);
	sigma_strlcpy(cfg.socket_path, "/run/old.sock", sizeof(cfg.socket_path));
	cfg.poll_interval_s = 7;
	cfg.caps.max_restarts = 5;
	saved = cfg;
	memset(err, 0x55, sizeof(err));
	rc = sigmad_config_parse(&cfg, buf, size, NAME, err, sizeof(err));
	CHECK(rc == 0 || rc == -EINVAL || rc == -ENAMETOOLONG ||
	      rc == -ERANGE);
	if (rc) {
		CHECK(!memcmp(&cfg, &saved, sizeof(cfg)));
		CHECK_ERR(err, sizeof(err));
		snprintf(want, sizeof(want), "%s:", NAME);
		CHECK(!strncmp(err, want, strlen(want)));
	} else {
		check_sigmad();
	}

	probe_conf_init(&pc);
	memset(err, 0x55, sizeof(err));
	if (probe_conf_parse_buf(&pc, buf, size, NAME, err, sizeof(err)) == 0)
		check_probe();
	else
		CHECK_ERR(err, sizeof(err));

	/* the plugin reads the caps from the file itself */
	if (rc == 0) {
		fuzz_write_file(caps_path, data, size);
		rc_caps = sigma_site_caps_load(&caps, caps_path, err,
					       sizeof(err));
		CHECK(rc_caps == 0);
		CHECK(caps.spares_per_job == cfg.caps.spares_per_job);
		CHECK(caps.spares_per_user == cfg.caps.spares_per_user);
		CHECK(caps.max_restarts == cfg.caps.max_restarts);
	}
	return 0;
}
