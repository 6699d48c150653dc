/*
 * test_trainer_replica_link.c - tier 1's replica transport
 * (trainer/ckpt/replica_link.h) over real sockets on this host:
 *
 *   - two links, each the other's buddy, swap payloads both ways, twice;
 *   - a connection with another token, or from another rank, is refused
 *     and the right peer's is still taken;
 *   - a peer that announces another length, closes mid-replica, or goes
 *     silent: each an error that says so, never a replica taken as whole;
 *   - the buddy reset once it has all it was sent, while the other peer
 *     still sends: the swap completes.
 *
 * The peer in the last cases is a raw socket the test drives itself.
 */
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cmocka.h>

#include "replica_link.h"

/* the wire's hello and swap head, as a peer of the job sends them */
struct hello {
	char magic[8];
	uint32_t rank;
	uint8_t token[REPLICA_TOKEN_LEN];
};
struct head {
	char magic[8];
	uint64_t bytes;
};

/* a raw socket connected to a's listener */
static int raw_dial(const struct replica_addr *a)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(a->port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	/* a read that would wait longer fails the test instead */
	struct timeval tv = { .tv_sec = 5 };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv,
				    sizeof(tv)), 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

static void raw_hello(int fd, uint32_t rank, const uint8_t *token)
{
	struct hello h;

	memset(&h, 0, sizeof(h));
	memcpy(h.magic, "SIGMA-R1", 8);
	h.rank = rank;
	memcpy(h.token, token, sizeof(h.token));
	assert_int_equal(write(fd, &h, sizeof(h)), sizeof(h));
}

/* a raw listener the link under test dials as its buddy */
static int raw_listen(struct replica_addr *a)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, 4), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
	memset(a, 0, sizeof(*a));
	strcpy(a->host, "127.0.0.1");
	a->port = ntohs(sa.sin_port);
	return fd;
}

static void setup_env(void)
{
	setenv("SIGMA_REPLICA_HOST", "127.0.0.1", 1);
}

/* ---- two real links -------------------------------------------------- */

struct side {
	struct replica_link *l;
	struct replica_addr me, peer;
	int rank, rc;
	float *send, *recv;
	size_t n;
	long st_out, st_in;
	char err[512];
};

static void *join_and_swap(void *arg)
{
	struct side *s = arg;
	struct iovec out[2] = { { s->send, s->n * sizeof(float) },
				{ &s->st_out, sizeof(long) } };
	struct iovec in[2] = { { s->recv, s->n * sizeof(float) },
			       { &s->st_in, sizeof(long) } };

	s->rc = replica_link_join(s->l, !s->rank, &s->peer, !s->rank, s->err,
				  sizeof(s->err));
	for (int k = 0; k < 2 && s->rc == 0; k++) {
		s->st_out = 100 * s->rank + k;
		for (size_t i = 0; i < s->n; i++)
			s->send[i] = (float)(s->rank * 1000000 + k * 1000) +
				     (float)(i % 997);
		s->rc = replica_link_swap(s->l, out, 2, in, 2, s->err,
					  sizeof(s->err));
		if (s->rc == 0 &&
		    (s->st_in != 100 * !s->rank + k ||
		     s->recv[s->n - 1] != (float)(!s->rank * 1000000 + k * 1000) +
						(float)((s->n - 1) % 997)))
			s->rc = -EBADMSG;
	}
	return NULL;
}

static void test_swap_both_ways(void **state)
{
	struct side s[2];
	pthread_t th[2];

	(void)state;
	setup_env();
	for (int r = 0; r < 2; r++) {
		memset(&s[r], 0, sizeof(s[r]));
		s[r].rank = r;
		s[r].n = 3 << 18; /* 3 MiB each way: more than a socket holds */
		s[r].send = malloc(s[r].n * sizeof(float));
		s[r].recv = calloc(s[r].n, sizeof(float));
		assert_non_null(s[r].send);
		assert_non_null(s[r].recv);
		assert_int_equal(replica_link_listen(&s[r].l, r, 10, &s[r].me,
						     s[r].err, sizeof(s[r].err)),
				 0);
	}
	s[0].peer = s[1].me, s[1].peer = s[0].me;
	for (int r = 0; r < 2; r++)
		assert_int_equal(pthread_create(&th[r], NULL, join_and_swap,
						&s[r]), 0);
	for (int r = 0; r < 2; r++) {
		pthread_join(th[r], NULL);
		if (s[r].rc)
			fail_msg("rank %d: %d %s", r, s[r].rc, s[r].err);
		replica_link_close(s[r].l);
		free(s[r].send);
		free(s[r].recv);
	}
}

/* ---- one link against a raw peer ------------------------------------- */

struct raw {
	struct replica_link *l;
	struct replica_addr me;
	int buddy_lfd, buddy_fd, from_fd;
	char err[512];
};

/* l, rank 1, joined: its buddy (rank 2) and its from (rank 0) are raw
 * sockets; strangers first try to pass for rank 0 */
static void raw_setup(struct raw *r, double timeout_s, bool strangers)
{
	struct replica_addr buddy;
	uint8_t wrong[REPLICA_TOKEN_LEN];
	int bad1 = -1, bad2 = -1;

	setup_env();
	memset(r, 0, sizeof(*r));
	assert_int_equal(replica_link_listen(&r->l, 1, timeout_s, &r->me,
					     r->err, sizeof(r->err)),
			 0);
	r->buddy_lfd = raw_listen(&buddy);
	if (strangers) {
		memcpy(wrong, r->me.token, sizeof(wrong));
		wrong[0] ^= 1;
		bad1 = raw_dial(&r->me);
		raw_hello(bad1, 0, wrong); /* rank 0, another token */
		bad2 = raw_dial(&r->me);
		raw_hello(bad2, 3, r->me.token); /* the token, rank 3 */
	}
	r->from_fd = raw_dial(&r->me);
	raw_hello(r->from_fd, 0, r->me.token);
	assert_int_equal(replica_link_join(r->l, 2, &buddy, 0, r->err,
					   sizeof(r->err)),
			 0);
	r->buddy_fd = accept(r->buddy_lfd, NULL, NULL);
	assert_true(r->buddy_fd >= 0);
	if (strangers) {
		char c;

		/* each refused one was closed: a read ends at once */
		assert_int_equal(read(bad1, &c, 1), 0);
		assert_int_equal(read(bad2, &c, 1), 0);
		close(bad1);
		close(bad2);
	}
}

static void raw_teardown(struct raw *r)
{
	replica_link_close(r->l);
	close(r->buddy_fd);
	close(r->buddy_lfd);
	close(r->from_fd);
}

static int raw_swap(struct raw *r, size_t n)
{
	static char out[4096], in[4096];
	struct iovec o = { out, n }, i = { in, n };

	return replica_link_swap(r->l, &o, 1, &i, 1, r->err, sizeof(r->err));
}

static void test_strangers_refused(void **state)
{
	struct raw r;
	struct hello h;
	struct head hd = { .magic = "SIGMA-R", .bytes = 8 };
	char payload[8] = "replica";

	(void)state;
	raw_setup(&r, 10, true);
	/* the hello the link sent its buddy carries the buddy's token */
	assert_int_equal(read(r.buddy_fd, &h, sizeof(h)), sizeof(h));
	assert_memory_equal(h.magic, "SIGMA-R1", 8);
	assert_int_equal(h.rank, 1);
	/* the right peer's stream is the one swapped */
	memcpy(hd.magic, "SIGMA-RS", 8);
	assert_int_equal(write(r.from_fd, &hd, sizeof(hd)), sizeof(hd));
	assert_int_equal(write(r.from_fd, payload, 8), 8);
	assert_int_equal(raw_swap(&r, 8), 0);
	raw_teardown(&r);
}

static void test_wrong_length(void **state)
{
	struct raw r;
	struct head hd = { .bytes = 12 };

	(void)state;
	raw_setup(&r, 10, false);
	memcpy(hd.magic, "SIGMA-RS", 8);
	assert_int_equal(write(r.from_fd, &hd, sizeof(hd)), sizeof(hd));
	assert_int_equal(raw_swap(&r, 8), -EPROTO);
	assert_non_null(strstr(r.err, "announced 12 bytes, this rank expects 8"));
	/* the link is not used again */
	assert_int_equal(raw_swap(&r, 8), -ENOTCONN);
	raw_teardown(&r);
}

static void test_closed_mid_replica(void **state)
{
	struct raw r;
	struct head hd = { .bytes = 4096 };
	char part[1000] = { 0 };

	(void)state;
	raw_setup(&r, 10, false);
	memcpy(hd.magic, "SIGMA-RS", 8);
	assert_int_equal(write(r.from_fd, &hd, sizeof(hd)), sizeof(hd));
	assert_int_equal(write(r.from_fd, part, sizeof(part)), sizeof(part));
	close(r.from_fd);
	r.from_fd = -1;
	assert_int_equal(raw_swap(&r, 4096), -ECONNRESET);
	assert_non_null(strstr(r.err, "the peer closed the connection"));
	assert_non_null(strstr(r.err, "received 1000 of 4096"));
	raw_teardown(&r);
}

/* the raw buddy: takes all it is sent, resets the connection, and then
 * the raw from sends its part */
static void *buddy_resets(void *arg)
{
	struct raw *r = arg;
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };
	struct head hd = { .bytes = 64 };
	char buf[sizeof(struct head) + 64], part[64] = { 1 };
	size_t got = 0;

	while (got < sizeof(buf)) {
		ssize_t k = read(r->buddy_fd, buf + got, sizeof(buf) - got);

		if (k <= 0)
			return NULL;
		got += (size_t)k;
	}
	setsockopt(r->buddy_fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(r->buddy_fd);
	r->buddy_fd = -1;
	usleep(200 * 1000);
	memcpy(hd.magic, "SIGMA-RS", 8);
	if (write(r->from_fd, &hd, sizeof(hd)) != sizeof(hd) ||
	    write(r->from_fd, part, sizeof(part)) != sizeof(part))
		return NULL;
	return r;
}

static void test_buddy_gone_after_its_part(void **state)
{
	struct raw r;
	struct hello h;
	pthread_t th;
	void *ok = NULL;

	(void)state;
	raw_setup(&r, 10, false);
	assert_int_equal(read(r.buddy_fd, &h, sizeof(h)), sizeof(h));
	assert_int_equal(pthread_create(&th, NULL, buddy_resets, &r), 0);
	assert_int_equal(raw_swap(&r, 64), 0);
	pthread_join(th, &ok);
	assert_non_null(ok);
	raw_teardown(&r);
}

static void test_silent_peer(void **state)
{
	struct raw r;

	(void)state;
	raw_setup(&r, 0.3, false);
	assert_int_equal(raw_swap(&r, 64), -ETIMEDOUT);
	assert_non_null(strstr(r.err, "no progress within the timeout"));
	raw_teardown(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_swap_both_ways),
		cmocka_unit_test(test_strangers_refused),
		cmocka_unit_test(test_wrong_length),
		cmocka_unit_test(test_closed_mid_replica),
		cmocka_unit_test(test_buddy_gone_after_its_part),
		cmocka_unit_test(test_silent_peer),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
