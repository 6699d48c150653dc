/*
 * ckpt-diff-read.c - the restore time of checkpoints, for bench/ckpt-diff:
 * validates and loads each PATH into a model of the given shape and prints
 * the time it took. A full checkpoint is read with ckpt_read, a
 * differential with ckpt_read_diff (its base read and checked too), a
 * directory with ckpt_load_latest_diff (what --resume does).
 *
 *   ckpt-diff-read small|demo V T PATH...
 *   ckpt-diff-read small|demo V T --estimate BASE FULL
 *
 * --estimate: for every tensor larger than the sample of delta.h, the
 * ratio delta / whole of compressed sizes as sampled against the same
 * ratio over the whole tensor, between the states of two full
 * checkpoints: how far off the sampled choice can be.
 *
 * Built on demand: make -C bench ckpt-diff-read.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sigma.h"
#include "ckpt.h"
#include "delta.h"
#include "model.h"

static long estimate(void *ctx, const uint32_t *w, size_t n)
{
	(void)ctx;
	return ckpt_diff_estimate(w, n);
}

/* the sampled estimate against the whole tensor's, a then b loaded */
static int estimate_error(struct model *a, struct model *b)
{
	const size_t n = a->nparams;
	uint32_t *scratch = malloc(sizeof(uint32_t) * 2 * DELTA_SAMPLE_MAX);
	uint32_t *enc = malloc(sizeof(uint32_t) * n);
	double worst = 0.0;
	int big = 0, differ = 0;

	if (!scratch || !enc) {
		free(scratch), free(enc);
		return 70;
	}
	for (int blk = 0; blk < 3; blk++) {
		const float *x = blk == 0 ? b->params : blk == 1 ? b->m : b->v;
		const float *y = blk == 0 ? a->params : blk == 1 ? a->m : a->v;

		for (int i = 0; i < a->ntensors; i++) {
			const struct model_tensor *t = &a->tensors[i];
			struct delta_choice ch;
			long fw, fd;
			double rs, rf;

			if (t->n <= DELTA_SAMPLE_MAX ||
			    delta_choose(x + t->offset, y + t->offset, t->n,
					 scratch, estimate, NULL, &ch) ||
			    ch.kind == DELTA_SAME)
				continue;
			delta_encode(enc, x + t->offset, y + t->offset, t->n);
			fw = ckpt_diff_estimate(
			    (const uint32_t *)(x + t->offset), t->n);
			fd = ckpt_diff_estimate(enc, t->n);
			if (fw <= 0 || fd < 0 || ch.est_whole <= 0)
				continue;
			rs = (double)ch.est_delta / (double)ch.est_whole;
			rf = (double)fd / (double)fw;
			big++;
			if (fabs(rs - rf) > worst)
				worst = fabs(rs - rf);
			differ +=
			    (rf <= DELTA_MARGIN) != (ch.kind == DELTA_ZIGZAG);
		}
	}
	printf(
	    "estimate: %d sampled tensors, largest error of delta/whole %.4f, choices that differ from the whole tensor's %d\n",
	    big, worst, differ);
	free(scratch), free(enc);
	return 0;
}

int main(int argc, char **argv)
{
	struct model_config c;
	struct model *m = NULL;
	char err[1024];
	long v, t;
	int code = 0;

	sigma_log_init("ckpt-diff-read", SIGMA_LOG_WARN);
	if (argc < 5 || (strcmp(argv[1], "small") && strcmp(argv[1], "demo")) ||
	    sigma_parse_long(argv[2], 2, MODEL_MAX_V, &v) ||
	    sigma_parse_long(argv[3], 1, MODEL_MAX_T, &t)) {
		fprintf(stderr,
			"usage: ckpt-diff-read small|demo V T PATH...\n");
		return 64;
	}
	if (!strcmp(argv[1], "small"))
		model_config_small(&c);
	else
		model_config_demo(&c);
	c.V = (int)v;
	c.T = (int)t;
	if (sigma_ops_cpu.init(0) ||
	    model_create(&m, &c, 1, &sigma_ops_cpu, err, sizeof(err))) {
		fprintf(stderr, "ckpt-diff-read: model: %s\n", err);
		return 70;
	}
	if (argc == 7 && !strcmp(argv[4], "--estimate")) {
		struct model *b = NULL;
		struct ckpt_state st;

		if (model_create(&b, &c, 1, &sigma_ops_cpu, err, sizeof(err)) ||
		    ckpt_read(argv[5], m, &st, err, sizeof(err)) ||
		    ckpt_read(argv[6], b, &st, err, sizeof(err))) {
			fprintf(stderr, "ckpt-diff-read: %s\n", err);
			code = 65;
		} else {
			code = estimate_error(m, b);
		}
		model_destroy(b);
		model_destroy(m);
		return code;
	}
	for (int i = 4; i < argc; i++) {
		const char *p = argv[i];
		char used[4096] = "";
		struct ckpt_state st;
		struct stat sb;
		uint64_t t0 = sigma_now_ms();
		int rc;

		if (stat(p, &sb) == 0 && S_ISDIR(sb.st_mode))
			rc = ckpt_load_latest_diff(
			    p, m, &st, used, sizeof(used), err, sizeof(err));
		else if (ckpt_is_diff(p))
			rc = ckpt_read_diff(p, m, &st, err, sizeof(err));
		else
			rc = ckpt_read(p, m, &st, err, sizeof(err));
		if (rc) {
			fprintf(stderr, "ckpt-diff-read: %s\n", err);
			code = 65;
			continue;
		}
		printf("%s step %ld read_ms %llu%s%s\n", p, st.step,
		       (unsigned long long)(sigma_now_ms() - t0),
		       *used ? " from " : "", used);
	}
	model_destroy(m);
	return code;
}
