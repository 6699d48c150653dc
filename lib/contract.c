/*
 * contract.c - the job block, node reasons and probe levels (contract.h).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "contract.h"
#include "sigma.h"

const char *const sigma_level_names[] = {"off", "quick", "full", NULL};
const char *const sigma_on_warning_names[] = {"drain-after", "checkpoint",
					      "ignore", NULL};
const char *const sigma_restart_names[] = {"requeue", "in-job", NULL};

const char *sigma_level_name(int level)
{
	return level >= SIGMA_LEVEL_OFF && level <= SIGMA_LEVEL_FULL
		   ? sigma_level_names[level]
		   : "?";
}

/* ---- the job block --------------------------------------------------------- */

void sigma_block_init(struct sigma_block *b)
{
	b->probe = SIGMA_LEVEL_OFF;
	b->spares = 0;
	b->max_restarts = 0;
	b->ckpt_every = SIGMA_CKPT_EVERY_DEFAULT;
	b->on_warning = SIGMA_WARN_DRAIN_AFTER;
	b->restart = SIGMA_RESTART_REQUEUE;
	b->job_spares = 0;
}

static bool block_valid(const struct sigma_block *b)
{
	return b->probe >= SIGMA_LEVEL_OFF && b->probe <= SIGMA_LEVEL_FULL &&
	       b->spares >= 0 && b->spares <= SIGMA_SPARES_MAX &&
	       b->max_restarts >= 0 && b->max_restarts <= SIGMA_RESTARTS_MAX &&
	       b->ckpt_every >= 1 && b->ckpt_every <= SIGMA_CKPT_EVERY_MAX &&
	       b->on_warning >= SIGMA_WARN_DRAIN_AFTER &&
	       b->on_warning <= SIGMA_WARN_IGNORE &&
	       b->restart >= SIGMA_RESTART_REQUEUE &&
	       b->restart <= SIGMA_RESTART_IN_JOB && b->job_spares >= 0 &&
	       b->job_spares <= SIGMA_SPARES_MAX &&
	       (b->restart == SIGMA_RESTART_IN_JOB || b->job_spares == 0);
}

int sigma_block_format(const struct sigma_block *b, char *buf, size_t size)
{
	char in_job[48] = "";

	if (!block_valid(b))
		return -ERANGE;
	/* only then: the block of a requeued job reads as it always did */
	if (b->restart == SIGMA_RESTART_IN_JOB)
		snprintf(in_job, sizeof(in_job), ",restart=%s,job_spares=%ld",
			 sigma_restart_names[b->restart], b->job_spares);
	return sigma_snprintf(
	    buf, size,
	    SIGMA_BLOCK_PREFIX
	    "probe=%s,spares=%ld,max_restarts=%ld,ckpt_every=%ld,on_warning=%s%s]",
	    sigma_level_names[b->probe], b->spares, b->max_restarts,
	    b->ckpt_every, sigma_on_warning_names[b->on_warning], in_job);
}

/* the n bytes at v as a number in [min, max] */
static int block_number(const char *v, size_t n, long min, long max, long *out)
{
	char tmp[24];

	if (n == 0 || n >= sizeof(tmp))
		return -EINVAL;
	memcpy(tmp, v, n);
	tmp[n] = '\0';
	return sigma_parse_long(tmp, min, max, out) ? -EINVAL : 0;
}

/* the n bytes at v as one of names */
static int block_enum(const char *v, size_t n, const char *const names[],
		      int *out)
{
	char name[16];
	int i;

	if (n >= sizeof(name))
		return -EINVAL;
	memcpy(name, v, n);
	name[n] = '\0';
	i = sigma_parse_enum(name, names);
	if (i < 0)
		return -EINVAL;
	*out = i;
	return 0;
}

static int block_item(struct sigma_block *b, const char *k, size_t klen,
		      const char *v, size_t vlen)
{
#define KEY(s) (klen == sizeof(s) - 1 && !memcmp(k, s, klen))
	if (KEY("probe"))
		return block_enum(v, vlen, sigma_level_names, &b->probe);
	if (KEY("on_warning"))
		return block_enum(v, vlen, sigma_on_warning_names,
				  &b->on_warning);
	if (KEY("restart"))
		return block_enum(v, vlen, sigma_restart_names, &b->restart);
	if (KEY("spares"))
		return block_number(v, vlen, 0, SIGMA_SPARES_MAX, &b->spares);
	if (KEY("job_spares"))
		return block_number(v, vlen, 0, SIGMA_SPARES_MAX,
				    &b->job_spares);
	if (KEY("max_restarts"))
		return block_number(v, vlen, 0, SIGMA_RESTARTS_MAX,
				    &b->max_restarts);
	if (KEY("ckpt_every"))
		return block_number(v, vlen, 1, SIGMA_CKPT_EVERY_MAX,
				    &b->ckpt_every);
#undef KEY
	return 0; /* a key of a newer plugin */
}

int sigma_block_parse(const char *comment, struct sigma_block *b, size_t *end)
{
	const size_t plen = sizeof(SIGMA_BLOCK_PREFIX) - 1;
	const char *p, *close;

	sigma_block_init(b);
	if (!comment || strncmp(comment, SIGMA_BLOCK_PREFIX, plen))
		return -ENOENT;
	p = comment + plen;
	close = strchr(p, ']');
	if (!close || (size_t)(close - comment) >= 4 * SIGMA_BLOCK_MAX)
		return -EINVAL;
	while (p < close) {
		const char *comma = memchr(p, ',', (size_t)(close - p));
		const char *item_end = comma ? comma : close;
		const char *eq = memchr(p, '=', (size_t)(item_end - p));

		if (!eq || eq == p ||
		    block_item(b, p, (size_t)(eq - p), eq + 1,
			       (size_t)(item_end - eq - 1)))
			return -EINVAL;
		p = item_end + 1;
	}
	/* what sigma_block_format writes, and nothing it would refuse */
	if (b->restart != SIGMA_RESTART_IN_JOB && b->job_spares)
		return -EINVAL;
	if (end)
		*end = (size_t)(close - comment) + 1;
	return 0;
}

/* ---- site caps ------------------------------------------------------------- */

void sigma_site_caps_init(struct sigma_site_caps *caps)
{
	caps->spares_per_job = SIGMA_SPARES_MAX;
	caps->spares_per_user = SIGMA_SPARES_MAX;
	caps->max_restarts = SIGMA_RESTARTS_MAX;
}

int sigma_site_caps_key(struct sigma_site_caps *caps, const char *key,
			const char *value, char *err, size_t errlen)
{
	long max = SIGMA_SPARES_MAX, *dst;

	if (!strcmp(key, "sigmad_max_spares_per_job"))
		dst = &caps->spares_per_job;
	else if (!strcmp(key, "sigmad_max_spares_per_user"))
		dst = &caps->spares_per_user;
	else if (!strcmp(key, "sigmad_max_restarts")) {
		dst = &caps->max_restarts;
		max = SIGMA_RESTARTS_MAX;
	} else
		return 0;
	if (sigma_parse_long(value, 0, max, dst))
		return sigma_set_err(err, errlen, EINVAL,
				     "%s: '%s' is not a count in [0, %ld]", key,
				     value, max);
	return 1;
}

static int caps_kv(const char *key, const char *value, void *arg, char *err,
		   size_t errlen)
{
	int rc = sigma_site_caps_key(arg, key, value, err, errlen);

	return rc < 0 ? rc : 0;
}

int sigma_site_caps_load(struct sigma_site_caps *caps, const char *path,
			 char *err, size_t errlen)
{
	sigma_site_caps_init(caps);
	return sigma_kv_parse_file(path, caps_kv, caps, err, errlen);
}

/* ---- node reasons ---------------------------------------------------------- */

int sigma_reason_format(char *buf, size_t size, bool warning, int level,
			const char *what)
{
	if (level < SIGMA_LEVEL_QUICK || level > SIGMA_LEVEL_FULL)
		return -EINVAL;
	return sigma_snprintf(buf, size, SIGMA_REASON_PREFIX "%sprobe %s: %s",
			      warning ? "warning: " : "",
			      sigma_level_names[level], what ? what : "");
}

/* "probe LEVEL: WHAT": WHAT, or NULL when s does not have that shape */
static const char *reason_probe(const char *s, int *level)
{
	const char *colon;
	char name[8];
	size_t n;
	int lv;

	if (strncmp(s, "probe ", 6))
		return NULL;
	s += 6;
	colon = strchr(s, ':');
	if (!colon || colon == s || (n = (size_t)(colon - s)) >= sizeof(name))
		return NULL;
	memcpy(name, s, n);
	name[n] = '\0';
	lv = sigma_parse_enum(name, sigma_level_names);
	if (lv < SIGMA_LEVEL_QUICK)
		return NULL;
	if (level)
		*level = lv;
	colon++;
	while (*colon == ' ')
		colon++;
	return colon;
}

enum sigma_reason sigma_reason_parse(const char *reason, int *level,
				     const char **what)
{
	const size_t plen = sizeof(SIGMA_REASON_PREFIX) - 1;
	const size_t alen = sizeof(SIGMA_REASON_ADMIN_PREFIX) - 1;
	const char *w;

	if (what)
		*what = NULL;
	if (!reason || strncmp(reason, SIGMA_REASON_PREFIX, plen))
		return SIGMA_REASON_NONE;
	if (!strncmp(reason, SIGMA_REASON_ADMIN_PREFIX, alen)) {
		if (what)
			*what = reason + alen;
		return SIGMA_REASON_ADMIN;
	}
	reason += plen;
	if (!strncmp(reason, "warning: ", 9) &&
	    (w = reason_probe(reason + 9, level))) {
		if (what)
			*what = w;
		return SIGMA_REASON_WARNING;
	}
	if ((w = reason_probe(reason, level))) {
		if (what)
			*what = w;
		return SIGMA_REASON_FAILURE;
	}
	if (what)
		*what = reason;
	return SIGMA_REASON_SIGMA;
}
