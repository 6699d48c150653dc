/*
 * inject.c - fault injection for tests and drills. With inject_dir=DIR in
 * sigma.conf, DIR/<node> holds readings (key=value, the same parser) that
 * the probe treats as measured:
 *
 *     temp_c=97            ecc_uncorrected=2     gpu1.remap_failed=1
 *     compute=fail         memtest=fail          power_spike_w=900
 *
 * A key applies to "host" unless prefixed "gpuN.". compute and memtest take
 * ok or fail; memtest is only measured by a full probe, so an injected
 * memtest=fail is seen only there. Both the directory and the file must be
 * owned by root and not group- or world-writable; otherwise the file is
 * refused, with a message, and the probe measures as usual.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sigma.h"
#include "probe.h"

struct inject_ctx {
	const struct probe_conf *conf;
	struct probe_report *rep;
	int applied;
};

static const char *const inject_keys[] = {
    "temp_c",
    "ecc_uncorrected",
    "ecc_corrected",
    "ecc_corrected_rate",
    "retired_pages",
    "retired_pending",
    "remap_pending",
    "remap_failed",
    "power_w",
    "power_spike_w",
    "power_limit_w",
    "throttle_hw",
    "mem_avail_mb",
    "disk_free_gb",
    "compute",
    "memtest",
    NULL,
};

static int inject_kv(const char *key, const char *value, void *arg, char *err,
		     size_t errlen)
{
	struct inject_ctx *ctx = arg;
	char comp[16] = "host";
	const char *k = key, *dot = strchr(key, '.');
	struct probe_reading *r;
	double v, warn, fail;
	const char *unit;
	int sense;

	if (dot) {
		long g;
		char num[16];
		size_t len = (size_t)(dot - key);

		if (len < 4 || len > 8 || strncmp(key, "gpu", 3))
			return sigma_set_err(err, errlen, EINVAL,
					     "'%s': a prefix must be gpuN.",
					     key);
		memcpy(num, key + 3, len - 3);
		num[len - 3] = '\0';
		if (sigma_parse_long(num, 0, PROBE_MAX_GPUS - 1, &g) < 0)
			return sigma_set_err(err, errlen, EINVAL,
					     "'%s': bad GPU index", key);
		snprintf(comp, sizeof(comp), "gpu%ld", g);
		k = dot + 1;
	}
	if (sigma_parse_enum(k, inject_keys) < 0)
		return sigma_set_err(err, errlen, EINVAL,
				     "unknown reading '%s'", k);
	if (!strcmp(k, "compute") || !strcmp(k, "memtest")) {
		if (!strcmp(value, "ok"))
			v = 1;
		else if (!strcmp(value, "fail"))
			v = 0;
		else
			return sigma_set_err(err, errlen, EINVAL,
					     "%s=%s: expected ok or fail", key,
					     value);
		/* only a full probe runs the memory test */
		if (!strcmp(k, "memtest") && ctx->rep->level != PROBE_FULL)
			return 0;
	} else if (sigma_parse_double(value, -1e15, 1e15, &v) < 0) {
		return sigma_set_err(err, errlen, EINVAL,
				     "%s=%s: expected a number", key, value);
	}
	probe_thresholds(ctx->conf, k, &sense, &warn, &fail, &unit);
	r = probe_find(ctx->rep, comp, k);
	if (r) {
		/* keep the thresholds the backend chose (power limit) */
		warn = r->warn;
		fail = r->fail;
	}
	r = probe_add(ctx->rep, comp, k, v, sense, warn, fail, unit);
	if (!r)
		return sigma_set_err(err, errlen, ENOSPC, "too many readings");
	r->injected = true;
	ctx->applied++;
	return 0;
}

/*
 * The file: readings as key=value words, one or more a line (separated by
 * blanks), '#' starts a comment. An error names the file and line.
 */
static int inject_parse(const char *path, struct inject_ctx *ctx, char *err,
			size_t errlen)
{
	char *buf = NULL, *line, *next;
	size_t len, lineno = 0;
	int rc;

	rc = sigma_file_read(path, 65536, &buf, &len);
	if (rc < 0)
		return sigma_set_err(err, errlen, -rc, "%s: %s", path,
				     strerror(-rc));
	if (memchr(buf, '\0', len)) {
		/* it would cut the readings after it silently */
		rc = sigma_set_err(err, errlen, EINVAL,
				   "%s: a NUL byte at offset %zu", path,
				   (size_t)((char *)memchr(buf, '\0', len) - buf));
		goto out_free;
	}
	for (line = buf; line && *line; line = next) {
		char *wsave = NULL, *word, why[256];

		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		lineno++;
		line[strcspn(line, "#")] = '\0';
		for (word = strtok_r(line, " \t\r", &wsave); word;
		     word = strtok_r(NULL, " \t\r", &wsave)) {
			rc = sigma_kv_parse_word(word, inject_kv, ctx, why,
						 sizeof(why));
			if (rc < 0) {
				sigma_set_err(err, errlen, -rc, "%s:%zu: %s",
					      path, lineno, why);
				goto out_free;
			}
		}
	}
	rc = 0;
out_free:
	free(buf);
	return rc;
}

int probe_inject(const struct probe_conf *conf, struct probe_report *rep,
		 uid_t trusted_uid, char *note, size_t notelen)
{
	struct inject_ctx ctx = {.conf = conf, .rep = rep};
	char path[PATH_MAX + PROBE_NODE_MAX + 2], why[512];
	int rc;

	note[0] = '\0';
	if (!conf->inject_dir[0])
		return 0;
	if (sigma_snprintf(path, sizeof(path), "%s/%s", conf->inject_dir,
			   rep->node) < 0)
		return 0;
	if (access(path, F_OK) < 0)
		return 0; /* nothing injected for this node */
	if (!sigma_file_is_trusted(conf->inject_dir, trusted_uid, why,
				   sizeof(why)) ||
	    !sigma_file_is_trusted(path, trusted_uid, why, sizeof(why))) {
		snprintf(note, notelen, "injection refused: %s", why);
		return 0;
	}
	rc = inject_parse(path, &ctx, why, sizeof(why));
	if (rc < 0) {
		snprintf(note, notelen, "injection file: %s", why);
		return rc;
	}
	return ctx.applied;
}
