/*
 * ckpt-diff-read.c - the restore time of checkpoints, for bench/ckpt-diff:
 * validates and loads each PATH into a model of the given shape and prints
 * the time it took. A full checkpoint is read with ckpt_read, a
 * differential with ckpt_read_diff (its base read and checked too), a
 * directory with ckpt_load_latest_diff (what --resume does).
 *
 *   ckpt-diff-read small|demo V T PATH...
 *
 * Built on demand: make -C bench ckpt-diff-read.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sigma.h"
#include "ckpt.h"
#include "model.h"

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
		fprintf(stderr, "usage: ckpt-diff-read small|demo V T PATH...\n");
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
	for (int i = 4; i < argc; i++) {
		const char *p = argv[i];
		char used[4096] = "";
		struct ckpt_state st;
		struct stat sb;
		uint64_t t0 = sigma_now_ms();
		int rc;

		if (stat(p, &sb) == 0 && S_ISDIR(sb.st_mode))
			rc = ckpt_load_latest_diff(p, m, &st, used, sizeof(used),
						   err, sizeof(err));
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
