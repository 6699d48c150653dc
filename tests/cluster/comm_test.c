/*
 * comm_test.c - sigma-comm-test: drives trainer/comm's libsigma_comm under
 * srun, for the cluster tests and the benchmark (built by make
 * check-cluster).
 *
 *   sigma-comm-test [--backend self|mpi|nccl] check
 *       every collective on the world and on the layout's sub-communicators,
 *       results compared exactly; one "PASS name" line per check, rank 0
 *       prints "comm check: all passed" at the end; exit 0, or 1 on the
 *       first wrong result
 *   sigma-comm-test [--backend B] loop [--count N] [--kill-rank R]
 *                   [--stop-rank R] [--after K]
 *       all-reduces of N floats without end; after K of them rank R kills
 *       itself (SIGKILL) or stops (SIGSTOP). A collective that fails exits
 *       COMM_EXIT_PEER; the watchdog (SIGMA_COMM_TIMEOUT) ends one that
 *       hangs with the same code
 *   sigma-comm-test [--backend B] bench [--op allreduce|alltoall]
 *                   [--max-bytes N] [--min-time S]
 *       all-reduce (or equal-block all-to-all) time and bus bandwidth per
 *       message size, a table from rank 0
 *
 * Values are small integers in fp32 (exact below 2^24) so sums do not
 * depend on the reduction order.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sigma.h"
#include "boot.h"
#include "comm.h"
#include "layout.h"

static struct boot boot;
static int me; /* world rank, for messages */

static void die(const char *fmt, ...) SIGMA_PRINTF(1, 2);
static void die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "sigma-comm-test: rank %d: FAIL: ", me);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

/* A communication error ends the process the way the trainer does. */
static void check_rc(int rc, const char *what)
{
	if (rc == -EIO || rc == -ETIMEDOUT) {
		fprintf(stderr,
			"sigma-comm-test: rank %d: %s: %s: exiting %d\n", me,
			what, strerror(-rc), COMM_EXIT_PEER);
		exit(COMM_EXIT_PEER);
	}
	if (rc < 0)
		die("%s: %s", what, strerror(-rc));
}

static void pass(const char *fmt, ...) SIGMA_PRINTF(1, 2);
static void pass(const char *fmt, ...)
{
	va_list ap;

	printf("rank %d PASS ", me);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

static void *xmalloc(size_t n)
{
	void *p = calloc(1, n ? n : 1);

	if (!p)
		die("out of memory");
	return p;
}

/* A buffer in the back end's memory with a host mirror. */
struct buf {
	struct comm *c;
	size_t bytes;
	void *dev; /* back end memory */
	void *host;
};

static void buf_new(struct buf *b, struct comm *c, size_t bytes)
{
	b->c = c;
	b->bytes = bytes;
	b->host = xmalloc(bytes);
	b->dev = comm_alloc(c, bytes);
	if (!b->dev)
		die("comm_alloc(%zu)", bytes);
}

static void buf_push(struct buf *b)
{
	check_rc(comm_from_host(b->c, b->dev, b->host, b->bytes), "copy in");
}

static void buf_pull(struct buf *b)
{
	check_rc(comm_to_host(b->c, b->host, b->dev, b->bytes), "copy out");
}

static void buf_free(struct buf *b)
{
	comm_free(b->c, b->dev);
	free(b->host);
}

/* ---- check ----------------------------------------------------------------
 */

static void check_allreduce(struct comm *c, size_t n, bool nonblocking)
{
	int r = comm_rank(c), s = comm_size(c);
	struct comm_request req;
	struct buf b;
	float *h;
	size_t i;

	buf_new(&b, c, n * sizeof(float));
	h = b.host;
	for (i = 0; i < n; i++)
		h[i] = (float)(r * 1000 + (long)(i % 4096));
	buf_push(&b);
	if (nonblocking) {
		check_rc(comm_iallreduce_f32(c, b.dev, n, &req), "iallreduce");
		check_rc(comm_wait(&req), "wait");
	} else {
		check_rc(comm_allreduce_f32(c, b.dev, n), "allreduce");
	}
	buf_pull(&b);
	for (i = 0; i < n; i++) {
		float want = (float)(1000L * s * (s - 1) / 2 +
				     (long)s * (long)(i % 4096));

		if (h[i] != want)
			die("%s %s of %zu floats: [%zu] = %.1f, want %.1f",
			    comm_name(c),
			    nonblocking ? "iallreduce" : "allreduce", n, i,
			    (double)h[i], (double)want);
	}
	buf_free(&b);
	pass("%s %s n=%zu", comm_name(c),
	     nonblocking ? "iallreduce" : "allreduce", n);
}

static void check_bcast(struct comm *c, size_t n)
{
	int r = comm_rank(c), s = comm_size(c), root;
	struct buf b;
	int32_t *h;
	size_t i;

	buf_new(&b, c, n * sizeof(int32_t));
	h = b.host;
	for (root = 0; root < s; root++) {
		for (i = 0; i < n; i++)
			h[i] = r == root ? (int32_t)(root * 7919 + i) : -1;
		buf_push(&b);
		check_rc(comm_bcast(c, b.dev, n, COMM_I32, root), "bcast");
		buf_pull(&b);
		for (i = 0; i < n; i++)
			if (h[i] != (int32_t)(root * 7919 + i))
				die("%s bcast from %d: [%zu] = %d",
				    comm_name(c), root, i, h[i]);
	}
	buf_free(&b);
	pass("%s bcast n=%zu from every root", comm_name(c), n);
}

/* block of rank p for the sharding checks: uneven, one of them empty */
static size_t blk_count(int p, int s, size_t n)
{
	return p == s - 1 && s > 1 ? 0 : n + (size_t)p * 3;
}

static void check_blocks(struct comm *c, size_t n)
{
	int r = comm_rank(c), s = comm_size(c);
	size_t counts[64], total = 0, off = 0;
	struct buf b;
	float *h;

	if (s > 64)
		die("check_blocks: %d ranks", s);
	for (int p = 0; p < s; p++)
		total += counts[p] = blk_count(p, s, n);
	buf_new(&b, c, (total + 1) * sizeof(float));
	h = b.host;
	for (size_t i = 0; i < total; i++)
		h[i] = (float)(r + 1) * (float)(i % 1000);
	buf_push(&b);
	check_rc(comm_reduce_scatter_f32(c, b.dev, counts), "reduce-scatter");
	buf_pull(&b);
	for (int p = 0; p < r; p++)
		off += counts[p];
	for (size_t i = off; i < off + counts[r]; i++)
		if (h[i] != (float)(s * (s + 1) / 2) * (float)(i % 1000))
			die("%s reduce-scatter: [%zu] of block %zu..%zu = %.1f",
			    comm_name(c), i, off, off + counts[r], (double)h[i]);
	/* each rank's block carries its rank; the rest is stale */
	for (size_t i = 0; i < total; i++)
		h[i] = i >= off && i < off + counts[r] ? (float)(r * 100000) +
							      (float)i
						       : -1.0f;
	buf_push(&b);
	check_rc(comm_allgather_f32(c, b.dev, counts), "all-gather");
	buf_pull(&b);
	off = 0;
	for (int p = 0; p < s; off += counts[p++])
		for (size_t i = off; i < off + counts[p]; i++)
			if (h[i] != (float)(p * 100000) + (float)i)
				die("%s all-gather: [%zu] = %.1f, want rank %d's",
				    comm_name(c), i, (double)h[i], p);
	buf_free(&b);
	pass("%s reduce-scatter and all-gather of uneven blocks n=%zu",
	     comm_name(c), n);
}

/* uneven: rank src sends this many elements to dst (zero happens) */
static size_t a2a_count(int src, int dst, int salt)
{
	return (size_t)((src * 3 + dst * 5 + salt) % 4) * (size_t)(1 + salt);
}

static int32_t a2a_value(int src, int dst, size_t j)
{
	return (int32_t)(src * 1000000 + dst * 10000 + (int)j);
}

static void check_alltoallv(struct comm *c, int salt, enum comm_dtype t)
{
	int r = comm_rank(c), s = comm_size(c), p;
	size_t *sc = xmalloc(4 * (size_t)s * sizeof(size_t));
	size_t *sd = sc + s, *rc = sd + s, *rd = rc + s;
	size_t stot = 0, rtot = 0, j, es = comm_dtype_size(t), zeros = 0;
	struct buf sb, rb;
	const int32_t SENTINEL = -7;

	/* blocks with a gap of one element after each, filled with a sentinel
	 */
	for (p = 0; p < s; p++) {
		sc[p] = a2a_count(r, p, salt);
		sd[p] = stot;
		stot += sc[p] + 1;
		rc[p] = a2a_count(p, r, salt);
		rd[p] = rtot;
		rtot += rc[p] + 1;
		zeros += sc[p] == 0;
	}
	buf_new(&sb, c, stot * es);
	buf_new(&rb, c, rtot * es);
	for (p = 0; p < s; p++) {
		for (j = 0; j < sc[p]; j++) {
			int32_t v = a2a_value(r, p, j);

			if (t == COMM_F32)
				((float *)sb.host)[sd[p] + j] =
				    (float)(v % 1000000 + r);
			else
				((int32_t *)sb.host)[sd[p] + j] = v;
		}
	}
	for (j = 0; j < rtot; j++) {
		if (t == COMM_F32)
			((float *)rb.host)[j] = (float)SENTINEL;
		else
			((int32_t *)rb.host)[j] = SENTINEL;
	}
	buf_push(&sb);
	buf_push(&rb);
	check_rc(comm_alltoallv(c, sb.dev, sc, sd, rb.dev, rc, rd, t),
		 "alltoallv");
	buf_pull(&rb);
	for (p = 0; p < s; p++) {
		for (j = 0; j <= rc[p]; j++) {
			int32_t got, want;

			if (t == COMM_F32)
				got = (int32_t)((float *)rb.host)[rd[p] + j];
			else
				got = ((int32_t *)rb.host)[rd[p] + j];
			if (j == rc[p])
				want = SENTINEL; /* the gap is untouched */
			else if (t == COMM_F32)
				want = a2a_value(p, r, j) % 1000000 + p;
			else
				want = a2a_value(p, r, j);
			if (got != want)
				die("%s alltoallv (%s, salt %d): from rank %d element %zu of %zu: %d, want %d",
				    comm_name(c), t == COMM_F32 ? "f32" : "i32",
				    salt, p, j, rc[p], got, want);
		}
	}
	buf_free(&sb);
	buf_free(&rb);
	free(sc);
	pass(
	    "%s alltoallv %s uneven salt=%d (%zu elements out, %zu empty blocks)",
	    comm_name(c), t == COMM_F32 ? "f32" : "i32", salt, stot - (size_t)s,
	    zeros);
}

/* the started exchange goes on across a collective, then completes */
static void check_isendrecv(struct comm *c, struct buf *sb, struct buf *rb,
			    size_t n)
{
	int r = comm_rank(c), s = comm_size(c);
	int prev = (r + s - 1) % s;
	struct comm_request req;
	int32_t *h = rb->host;

	memset(rb->host, 0, rb->bytes);
	buf_push(rb);
	check_rc(comm_isendrecv(c, sb->dev, n, (r + 1) % s, rb->dev, n, prev,
				COMM_I32, 13, &req),
		 "isendrecv");
	check_rc(comm_barrier(c), "barrier during isendrecv");
	check_rc(comm_wait(&req), "wait(isendrecv)");
	buf_pull(rb);
	for (size_t i = 0; i < n; i++)
		if (h[i] != (int32_t)(prev * 100000 + i))
			die("%s isendrecv from %d: [%zu] = %d", comm_name(c),
			    prev, i, h[i]);
	pass("%s isendrecv ring n=%zu", comm_name(c), n);
}

static void check_p2p(struct comm *c, size_t n)
{
	int r = comm_rank(c), s = comm_size(c);
	int next = (r + 1) % s, prev = (r + s - 1) % s;
	struct buf sb, rb;
	int32_t *h;
	size_t i;

	if (s < 2)
		return;
	buf_new(&sb, c, n * sizeof(int32_t));
	buf_new(&rb, c, n * sizeof(int32_t));
	for (i = 0; i < n; i++)
		((int32_t *)sb.host)[i] = (int32_t)(r * 100000 + i);
	buf_push(&sb);

	/* a ring of blocking sends: even ranks send first, odd receive first
	 * (and an odd-sized ring's last rank too) */
	if (r % 2 == 0 && !(s % 2 == 1 && r == s - 1)) {
		check_rc(comm_send(c, sb.dev, n, COMM_I32, next, 11), "send");
		check_rc(comm_recv(c, rb.dev, n, COMM_I32, prev, 11), "recv");
	} else {
		check_rc(comm_recv(c, rb.dev, n, COMM_I32, prev, 11), "recv");
		check_rc(comm_send(c, sb.dev, n, COMM_I32, next, 11), "send");
	}
	buf_pull(&rb);
	h = rb.host;
	for (i = 0; i < n; i++)
		if (h[i] != (int32_t)(prev * 100000 + i))
			die("%s recv from %d: [%zu] = %d", comm_name(c), prev,
			    i, h[i]);
	pass("%s send/recv ring n=%zu", comm_name(c), n);

	/* the other way round in one sendrecv */
	memset(rb.host, 0, rb.bytes);
	buf_push(&rb);
	check_rc(
	    comm_sendrecv(c, sb.dev, n, prev, rb.dev, n, next, COMM_I32, 12),
	    "sendrecv");
	buf_pull(&rb);
	for (i = 0; i < n; i++)
		if (h[i] != (int32_t)(next * 100000 + i))
			die("%s sendrecv from %d: [%zu] = %d", comm_name(c),
			    next, i, h[i]);
	pass("%s sendrecv ring n=%zu", comm_name(c), n);
	if (comm_memory(c) == COMM_MEM_HOST)
		check_isendrecv(c, &sb, &rb, n);
	buf_free(&sb);
	buf_free(&rb);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void check_barrier(struct comm *c)
{
	int r = comm_rank(c);
	double t0, waited;

	check_rc(comm_barrier(c), "barrier");
	/* the last rank comes late: nobody may leave before it arrives */
	if (r == comm_size(c) - 1)
		usleep(300000);
	t0 = now_s();
	check_rc(comm_barrier(c), "barrier");
	waited = now_s() - t0;
	if (r != comm_size(c) - 1 && waited < 0.1)
		die("%s barrier returned after %.3f s although rank %d arrived 0.3 s late",
		    comm_name(c), waited, comm_size(c) - 1);
	pass("%s barrier", comm_name(c));
}

static void check_all(struct comm *c)
{
	check_allreduce(c, 1, false);
	check_allreduce(c, 1000, false);
	check_allreduce(c, 1 << 18, false);
	check_allreduce(c, 4097, true);
	check_bcast(c, 333);
	check_blocks(c, 1);
	check_blocks(c, 5000);
	check_alltoallv(c, 0, COMM_I32);
	check_alltoallv(c, 1, COMM_F32);
	check_alltoallv(c, 2, COMM_I32);
	check_p2p(c, 1);
	check_p2p(c, 100000);
	check_barrier(c);
}

static void check_groups(struct comm *world, const struct layout_params *lp)
{
	enum layout_group g;
	char err[256];
	int members[LAYOUT_MAX_RANKS > 64 ? 64 : LAYOUT_MAX_RANKS];

	if (layout_check(lp, err, sizeof(err)) < 0)
		die("layout: %s", err);
	for (g = 0; g < LAYOUT_GROUP_COUNT; g++) {
		struct comm *sub = NULL;
		int color, key, n, i;
		float sum = (float)me, want = 0;

		layout_group_split(lp, me, g, &color, &key);
		check_rc(
		    comm_split(world, color, key, layout_group_name(g), &sub),
		    "split");
		if (!sub)
			die("split %s: no communicator", layout_group_name(g));
		n = layout_group_members(lp, me, g, members, 64);
		if (comm_size(sub) != n || comm_rank(sub) != key)
			die("split %s: rank %d of %d, layout says %d of %d",
			    layout_group_name(g), comm_rank(sub),
			    comm_size(sub), key, n);
		for (i = 0; i < n; i++)
			want += (float)members[i];
		/* the sum of the members' world ranks proves who is in it */
		{
			struct buf b;

			buf_new(&b, sub, sizeof(float));
			*(float *)b.host = sum;
			buf_push(&b);
			check_rc(comm_allreduce_f32(sub, b.dev, 1),
				 "allreduce");
			buf_pull(&b);
			sum = *(float *)b.host;
			buf_free(&b);
		}
		if (sum != want)
			die("split %s: members' ranks sum to %.0f, want %.0f",
			    layout_group_name(g), (double)sum, (double)want);
		pass("split %s: rank %d of %d, members ok",
		     layout_group_name(g), comm_rank(sub), comm_size(sub));
		check_all(sub);
		comm_destroy(sub);
	}

	/* a rank that joins no group gets none; the others still work */
	{
		struct comm *odd = NULL;

		check_rc(comm_split(world, me % 2 ? COMM_COLOR_NONE : 0, me,
				    "even", &odd),
			 "split");
		if ((me % 2 == 1) != (odd == NULL))
			die("split with COMM_COLOR_NONE: rank %d got %s", me,
			    odd ? "a communicator" : "none");
		if (odd) {
			if (comm_size(odd) != (comm_size(world) + 1) / 2)
				die("split even: size %d", comm_size(odd));
			check_allreduce(odd, 100, false);
		}
		comm_destroy(odd);
		pass("split with COMM_COLOR_NONE");
	}
}

/* The PMIx helpers: every rank publishes a value, reads its neighbour's;
 * rank 0 shares a blob only it knows, and the ranks compare what they got. */
static void check_exchange(struct comm *c)
{
	int s = comm_size(c), next = (me + 1) % s, i;
	unsigned char blob[200];
	char mine[BOOT_NODE_MAX + 32], got[BOOT_NODE_MAX + 32];
	size_t n = 0;
	struct buf sum;
	double sums;
	long check = 0;

	snprintf(mine, sizeof(mine), "rank %d on %s", me, boot.node);
	check_rc(boot_put(&boot, "sigma.test.who", mine, strlen(mine) + 1),
		 "boot_put");
	check_rc(boot_commit(&boot), "boot_commit");
	check_rc(boot_fence(&boot), "boot_fence");
	check_rc(boot_get(&boot, next, "sigma.test.who", got, sizeof(got), &n),
		 "boot_get");
	if (n == 0 || got[n - 1] != '\0' || strncmp(got, "rank ", 5))
		die("PMIx exchange: rank %d published '%.*s'", next, (int)n,
		    got);
	{
		char num[16];
		size_t k = strcspn(got + 5, " ");
		long who = -1;

		if (k >= sizeof(num))
			k = sizeof(num) - 1;
		memcpy(num, got + 5, k);
		num[k] = '\0';
		if (sigma_parse_long(num, 0, LAYOUT_MAX_RANKS, &who) < 0 ||
		    who != next)
			die("PMIx exchange: rank %d published '%s'", next, got);
	}
	pass("pmix put/commit/fence/get: rank %d says '%s'", next, got);

	/* a pattern only rank 0 has: its pid */
	for (i = 0; i < (int)sizeof(blob); i++)
		blob[i] = me == 0 ? (unsigned char)(i * 31 + getpid()) : 0;
	check_rc(boot_share(&boot, "test.blob", blob, sizeof(blob)),
		 "boot_share");
	for (i = 0; i < (int)sizeof(blob); i++)
		check = (check * 131 + blob[i]) % 1000003;
	/* every rank's checksum equals rank 0's: their sum is size times it */
	buf_new(&sum, c, sizeof(float));
	*(float *)sum.host = (float)check;
	buf_push(&sum);
	check_rc(comm_bcast(c, sum.dev, 1, COMM_F32, 0), "bcast");
	buf_pull(&sum);
	sums = *(float *)sum.host;
	*(float *)sum.host = (float)check;
	buf_push(&sum);
	check_rc(comm_allreduce_f32(c, sum.dev, 1), "allreduce");
	buf_pull(&sum);
	if (*(float *)sum.host != (float)(sums * s) ||
	    (float)check != (float)sums)
		die("boot_share: checksum %ld here, %.0f on rank 0", check,
		    sums);
	buf_free(&sum);
	pass("pmix share: %zu bytes from rank 0", sizeof(blob));
}

static int run_check(struct comm *world)
{
	struct layout_params lp = {0};
	struct comm_stats st;
	int s = comm_size(world);

	printf("rank %d size %d local %d/%d node %s backend %s\n", boot.rank,
	       boot.size, boot.local_rank, boot.local_size, boot.node,
	       comm_backend_name(comm_backend_of(world)));
	fflush(stdout);
	check_exchange(world);
	check_all(world);

	/* the layout the cluster tests use: pp 2 when it divides */
	lp.world = s;
	lp.pp = s % 2 == 0 ? 2 : 1;
	lp.dp = s / lp.pp;
	lp.ep = lp.dp % 2 == 0 ? 2 : 1;
	lp.E = 4;
	lp.L = 2;
	check_groups(world, &lp);

	comm_get_stats(world, &st);
	if (st.calls == 0 || st.bytes == 0)
		die("world statistics not counted");
	check_rc(comm_barrier(world), "barrier");
	if (me == 0)
		printf("comm check: all passed on %d ranks (%s)\n", s,
		       comm_backend_name(comm_backend_of(world)));
	return 0;
}

/* ---- loop (failure tests) --------------------------------------------------
 */

static int run_loop(struct comm *c, size_t n, int kill_rank, int stop_rank,
		    long after)
{
	struct buf b;
	long k;

	buf_new(&b, c, n * sizeof(float));
	buf_push(&b);
	printf("rank %d pid %ld ready\n", me, (long)getpid());
	fflush(stdout);
	for (k = 0;; k++) {
		if (k == after && me == kill_rank) {
			printf(
			    "rank %d: SIGKILL to myself after %ld all-reduces\n",
			    me, k);
			fflush(stdout);
			raise(SIGKILL);
		}
		if (k == after && me == stop_rank) {
			printf(
			    "rank %d: SIGSTOP to myself after %ld all-reduces\n",
			    me, k);
			fflush(stdout);
			raise(SIGSTOP);
		}
		check_rc(comm_allreduce_f32(c, b.dev, n), "allreduce");
		if (me == 0 && k % 100 == 0) {
			printf("all-reduce %ld\n", k);
			fflush(stdout);
		}
	}
	return 0;
}

/* ---- bench ------------------------------------------------------------------
 */

/* The sum of v over the ranks of c (through the back end's memory). */
static double sum_scalar(struct buf *one, double v)
{
	*(float *)one->host = (float)v;
	buf_push(one);
	check_rc(comm_allreduce_f32(one->c, one->dev, 1), "allreduce");
	buf_pull(one);
	return *(float *)one->host;
}

/* The benchmarked operation: an all-reduce of bytes, or an all-to-all in
 * which each rank sends bytes / size to every rank (itself included). */
struct bench_op {
	bool alltoall;
	struct buf *b, *r;	 /* r: all-to-all receive buffer */
	size_t *counts, *displs; /* [size] each, in floats */
};

static void bench_once(struct comm *c, const struct bench_op *op, size_t n)
{
	int p, s = comm_size(c);

	if (!op->alltoall) {
		check_rc(comm_allreduce_f32(c, op->b->dev, n), "allreduce");
		return;
	}
	for (p = 0; p < s; p++) {
		op->counts[p] = n / (size_t)s;
		op->displs[p] = (size_t)p * (n / (size_t)s);
	}
	check_rc(comm_alltoallv(c, op->b->dev, op->counts, op->displs,
				op->r->dev, op->counts, op->displs, COMM_F32),
		 "alltoallv");
}

static int run_bench(struct comm *c, size_t max_bytes, double min_time,
		     bool alltoall)
{
	int s = comm_size(c);
	struct buf b, r, one;
	struct bench_op op = {.alltoall = alltoall, .b = &b, .r = &r};
	size_t bytes;

	op.counts = xmalloc((size_t)s * sizeof(size_t));
	op.displs = xmalloc((size_t)s * sizeof(size_t));
	buf_new(&one, c, sizeof(float));
	buf_new(&b, c, max_bytes);
	buf_new(&r, c, alltoall ? max_bytes : 4);
	buf_push(&b);
	if (me == 0) {
		if (alltoall)
			printf(
			    "# all-to-all (fp32, bytes / %d to every rank), %d ranks, back end %s\n"
			    "# busbw = algbw * (n - 1) / n; times are the mean over ranks\n",
			    s, s, comm_backend_name(comm_backend_of(c)));
		else
			printf(
			    "# all-reduce (fp32 sum, in place), %d ranks, back end %s\n"
			    "# busbw = algbw * 2 (n - 1) / n; times are the mean over ranks\n",
			    s, comm_backend_name(comm_backend_of(c)));
		printf("%12s %10s %8s %12s %12s %12s\n", "bytes", "floats",
		       "iters", "time_us", "algbw_GB/s", "busbw_GB/s");
		fflush(stdout);
	}
	for (bytes = alltoall ? 4 * (size_t)s : 4; bytes <= max_bytes;
	     bytes *= 4) {
		size_t n = bytes / sizeof(float);
		long iters, target;
		double t0, dt;
		int i;

		/* warm up, then time a few; every rank gets the same sum, so
		 * every rank agrees on how many iterations to time */
		for (i = 0; i < 3; i++)
			bench_once(c, &op, n);
		t0 = now_s();
		for (i = 0; i < 20; i++)
			bench_once(c, &op, n);
		dt = sum_scalar(&one, (now_s() - t0) / 20) / s;
		target = dt > 0 ? (long)(min_time / dt) : 5000;
		if (target < 5)
			target = 5;
		if (target > 5000)
			target = 5000;
		check_rc(comm_barrier(c), "barrier");
		t0 = now_s();
		for (iters = 0; iters < target; iters++)
			bench_once(c, &op, n);
		dt = sum_scalar(&one, (now_s() - t0) / (double)target) / s;
		if (me == 0) {
			double alg = (double)bytes / dt / 1e9;
			double bus = alltoall ? alg * (s - 1) / s
					      : alg * 2.0 * (s - 1) / s;

			printf("%12zu %10zu %8ld %12.1f %12.4f %12.4f\n", bytes,
			       n, target, dt * 1e6, alg, bus);
			fflush(stdout);
		}
	}
	buf_free(&b);
	buf_free(&r);
	buf_free(&one);
	free(op.counts);
	free(op.displs);
	return 0;
}

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: sigma-comm-test [--backend self|mpi|nccl] check\n"
	    "       sigma-comm-test [--backend B] loop [--count N] [--kill-rank R] [--stop-rank R] [--after K]\n"
	    "       sigma-comm-test [--backend B] bench [--op allreduce|alltoall] [--max-bytes N] [--min-time S]\n"
	    "Environment: SIGMA_COMM_TIMEOUT (seconds, watchdog and NCCL timeout).\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"backend", required_argument, NULL, 'b'},
	    {"count", required_argument, NULL, 'n'},
	    {"kill-rank", required_argument, NULL, 'k'},
	    {"stop-rank", required_argument, NULL, 's'},
	    {"after", required_argument, NULL, 'a'},
	    {"max-bytes", required_argument, NULL, 'm'},
	    {"min-time", required_argument, NULL, 't'},
	    {"op", required_argument, NULL, 'o'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	enum comm_backend be = COMM_MPI;
	bool be_set = false, alltoall = false;
	struct comm_options o;
	struct comm *world = NULL;
	long count = 1024, kill_rank = -1, stop_rank = -1, after = 20;
	long max_bytes = 64L << 20;
	double min_time = 1.0;
	char err[512];
	const char *mode;
	int ch, rc;

	sigma_log_init("sigma-comm-test", SIGMA_LOG_INFO);
	while ((ch = getopt_long(argc, argv, "b:n:k:s:a:m:t:o:h", opts,
				 NULL)) != -1) {
		const char *bad = NULL;

		switch (ch) {
		case 'b':
			if (comm_backend_parse(optarg, &be) < 0)
				bad = "--backend";
			be_set = true;
			break;
		case 'n':
			if (sigma_parse_long(optarg, 1, 1L << 28, &count) < 0)
				bad = "--count";
			break;
		case 'k':
			if (sigma_parse_long(optarg, 0, LAYOUT_MAX_RANKS,
					     &kill_rank) < 0)
				bad = "--kill-rank";
			break;
		case 's':
			if (sigma_parse_long(optarg, 0, LAYOUT_MAX_RANKS,
					     &stop_rank) < 0)
				bad = "--stop-rank";
			break;
		case 'a':
			if (sigma_parse_long(optarg, 0, 1L << 30, &after) < 0)
				bad = "--after";
			break;
		case 'm':
			if (sigma_parse_long(optarg, 4, 1L << 30, &max_bytes) <
			    0)
				bad = "--max-bytes";
			break;
		case 't':
			if (sigma_parse_double(optarg, 0.01, 60, &min_time) < 0)
				bad = "--min-time";
			break;
		case 'o':
			if (!strcmp(optarg, "alltoall"))
				alltoall = true;
			else if (strcmp(optarg, "allreduce"))
				bad = "--op";
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 64;
		}
		if (bad) {
			fprintf(stderr, "sigma-comm-test: %s %s: bad value\n",
				bad, optarg);
			return 64;
		}
	}
	if (optind != argc - 1) {
		usage(stderr);
		return 64;
	}
	mode = argv[optind];
	if (strcmp(mode, "check") && strcmp(mode, "loop") &&
	    strcmp(mode, "bench")) {
		usage(stderr);
		return 64;
	}

	if (comm_options_default(&o, err, sizeof(err)) < 0) {
		fprintf(stderr, "sigma-comm-test: %s\n", err);
		return 64;
	}
	/* MPI before the bootstrap's PMIx client: Open MPI 5 needs it so */
	rc = comm_start(err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "sigma-comm-test: %s\n", err);
		return 1;
	}
	rc = boot_init(&boot, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "sigma-comm-test: bootstrap: %s\n", err);
		comm_stop();
		return 1;
	}
	me = boot.rank;
	if (!be_set && boot.size == 1)
		be = COMM_SELF;
	rc = comm_watchdog_start(o.timeout_s);
	if (rc < 0)
		die("watchdog: %s", strerror(-rc));
	rc = comm_create(&world, be, &boot, &o, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "sigma-comm-test: rank %d: %s\n", me, err);
		boot_fini(&boot);
		comm_stop();
		return rc == -EIO || rc == -ETIMEDOUT ? COMM_EXIT_PEER : 1;
	}

	if (!strcmp(mode, "check"))
		rc = run_check(world);
	else if (!strcmp(mode, "loop"))
		rc = run_loop(world, (size_t)count, (int)kill_rank,
			      (int)stop_rank, after);
	else
		rc = run_bench(world, (size_t)max_bytes, min_time, alltoall);

	comm_destroy(world);
	comm_watchdog_stop();
	boot_fini(&boot);
	comm_stop();
	return rc;
}
