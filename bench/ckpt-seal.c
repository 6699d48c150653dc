/*
 * ckpt-seal.c - what the whole-file seal costs a checkpoint's read: writes
 * one checkpoint of the given shape (the demo preset, D and F scaled),
 * then, N times each, times the seal's hash of the file alone and the
 * whole read (ckpt_read: seal, libhdf5, every check), from the page cache
 * and, as root, after dropping the file from it (posix_fadvise), and
 * prints min and median of each and the hash against the read less the
 * hash (what the read costs without the seal). The hash runs on the
 * OpenMP threads there are (OMP_NUM_THREADS), as a reader's does, and once
 * on one thread, as a writer's does.
 *
 *   ckpt-seal [-D D] [-n RUNS] [DIR]     (default D 256, 5 runs, $TMPDIR)
 *
 * Built on demand: make -C bench ckpt-seal.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "sigma.h"
#include "ckpt.h"
#include "model.h"
#include "seal.h"

#define RUNS_MAX 50

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static void drop_cache(const char *path)
{
	int fd = open(path, O_RDONLY);

	if (fd >= 0) {
		fdatasync(fd);
		posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
		close(fd);
	}
}

/* ms of one hash (what=0) or one whole read (what=1) of path */
static double once(const char *path, int what, struct model *m)
{
	struct ckpt_state st;
	uint64_t h, n, t0 = sigma_now_ms();
	char err[1024];
	int fd, rc;

	if (what == 0) {
		fd = open(path, O_RDONLY);
		rc = fd < 0 ? -errno : seal_hash_fd(fd, &h, &n);
		if (fd >= 0)
			close(fd);
	} else {
		rc = ckpt_read(path, m, &st, err, sizeof(err));
	}
	if (rc) {
		fprintf(stderr, "ckpt-seal: %s: %s\n", path,
			what ? err : strerror(-rc));
		exit(1);
	}
	return (double)(sigma_now_ms() - t0);
}

static void row(const char *label, const char *path, int what, int cold,
		int runs, struct model *m, double *median)
{
	double t[RUNS_MAX];

	for (int i = 0; i < runs; i++) {
		if (cold)
			drop_cache(path);
		else if (i == 0)
			(void)once(path, 0, m); /* warm it */
		t[i] = once(path, what, m);
	}
	qsort(t, (size_t)runs, sizeof(double), cmp_double);
	*median = t[runs / 2];
	printf("%-34s min %8.1f ms  median %8.1f ms\n", label, t[0], *median);
}

int main(int argc, char **argv)
{
	struct model_config c;
	struct model *m = NULL;
	struct ckpt_state st = { 0 };
	char dir[PATH_MAX], path[PATH_MAX], err[1024];
	const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	long D = 256, runs = 5;
	double hw, rw, hc = 0, rc = 0;
	int opt;

	while ((opt = getopt(argc, argv, "D:n:")) != -1) {
		if (opt == 'D' && !sigma_parse_long(optarg, 16, 4096, &D))
			continue;
		if (opt == 'n' && !sigma_parse_long(optarg, 1, RUNS_MAX, &runs))
			continue;
		fprintf(stderr, "usage: ckpt-seal [-D 16..4096] [-n 1..%d] [DIR]\n",
			RUNS_MAX);
		return 2;
	}
	if (optind < argc)
		base = argv[optind];
	model_config_demo(&c);
	c.D = (int)D;
	c.F = (int)(2 * D);
	if (sigma_ops_cpu.init(0) ||
	    model_create(&m, &c, 1, &sigma_ops_cpu, err, sizeof(err))) {
		fprintf(stderr, "ckpt-seal: model: %s\n", err);
		return 1;
	}
	model_init_weights(m, 1);
	snprintf(dir, sizeof(dir), "%s/ckpt-seal.%d", base, (int)getpid());
	st.step = 1;
	st.batch = 8;
	if (ckpt_write(dir, m, &st, path, sizeof(path), err, sizeof(err))) {
		fprintf(stderr, "ckpt-seal: %s\n", err);
		return 1;
	}
	printf("ckpt-seal: %s, %zu parameters, %.1f MiB\n", path, m->nparams,
	       (double)(3 * sizeof(float) * m->nparams) / (1 << 20));
#ifdef _OPENMP
	{
		int all = omp_get_max_threads();
		double h1;

		omp_set_num_threads(1);
		row("hash (seal), 1 thread, page cache", path, 0, 0, (int)runs,
		    m, &h1);
		omp_set_num_threads(all);
		printf("(%d threads below)\n", all);
	}
#endif
	row("hash (seal), page cache", path, 0, 0, (int)runs, m, &hw);
	row("read (seal + libhdf5), page cache", path, 1, 0, (int)runs, m, &rw);
	if (geteuid() == 0) {
		row("hash (seal), cold", path, 0, 1, (int)runs, m, &hc);
		row("read (seal + libhdf5), cold", path, 1, 1, (int)runs, m, &rc);
	}
	/* the read without the seal: the read less the hash */
	printf("seal's cost against the read without it: %.1f%% from the page cache",
	       100.0 * hw / (rw - hw));
	if (rc > hc)
		printf(", %.1f%% cold (the hash's read brings the file in)",
		       100.0 * hc / (rc - hc));
	printf("\n");
	ckpt_prune(dir, 0);
	rmdir(dir);
	model_destroy(m);
	return 0;
}
