/*
 * replica_link.c - tier 1's replica transport (replica_link.h): TCP
 * sockets, a hello that proves the peer is of the job, and a full-duplex
 * swap over poll(2).
 */
#define _GNU_SOURCE /* accept4 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sigma.h"
#include "replica_link.h"

#define HELLO_MAGIC "SIGMA-R1"
#define SWAP_MAGIC "SIGMA-RS"

struct hello {
	char magic[8];
	uint32_t rank; /* the connecting rank */
	uint8_t token[REPLICA_TOKEN_LEN]; /* the acceptor's, from PMIx */
};

struct swap_head {
	char magic[8];
	uint64_t bytes; /* what follows */
};

struct replica_link {
	int lfd, out, in; /* listener, to the buddy, from from */
	int rank;
	int timeout_ms;
	unsigned pause_ms;
	uint8_t token[REPLICA_TOKEN_LEN];
};

static int deadline_left(uint64_t deadline)
{
	uint64_t now = sigma_now_ms();

	return now >= deadline ? 0 : (int)(deadline - now);
}

/* until fd has events or the deadline passed: 0, -ETIMEDOUT, -errno */
static int wait_fd(int fd, short events, uint64_t deadline)
{
	struct pollfd p = { .fd = fd, .events = events };

	for (;;) {
		int n = poll(&p, 1, deadline_left(deadline));

		if (n > 0)
			return 0;
		if (n == 0)
			return -ETIMEDOUT;
		if (errno != EINTR)
			return -errno;
	}
}

/* all of buf over a non-blocking fd, or -errno (-ETIMEDOUT, -EPIPE) */
static int put_all(int fd, const void *buf, size_t n, uint64_t deadline)
{
	const char *p = buf;

	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		int rc;

		if (w > 0) {
			p += w, n -= (size_t)w;
			continue;
		}
		if (w < 0 && errno != EAGAIN && errno != EINTR)
			return -errno;
		if ((rc = wait_fd(fd, POLLOUT, deadline)))
			return rc;
	}
	return 0;
}

/* all of buf, or -errno (-ECONNRESET: the peer closed) */
static int get_all(int fd, void *buf, size_t n, uint64_t deadline)
{
	char *p = buf;

	while (n) {
		ssize_t r = recv(fd, p, n, 0);
		int rc;

		if (r > 0) {
			p += r, n -= (size_t)r;
			continue;
		}
		if (r == 0)
			return -ECONNRESET;
		if (errno != EAGAIN && errno != EINTR)
			return -errno;
		if ((rc = wait_fd(fd, POLLIN, deadline)))
			return rc;
	}
	return 0;
}

static int nonblocking(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	int one = 1;

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	/* the state block follows the floats: no delay for it */
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return 0;
}

/* a listener on every address (IPv6 with IPv4 mapped, else IPv4) */
static int listen_any(uint16_t *port)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);

	memset(&ss, 0, sizeof(ss));
	if (fd >= 0) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
		int off = 0;

		(void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off,
				 sizeof(off));
		a->sin6_family = AF_INET6;
		a->sin6_addr = in6addr_any;
		sl = sizeof(*a);
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;

		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return -errno;
		a->sin_family = AF_INET;
		a->sin_addr.s_addr = htonl(INADDR_ANY);
		sl = sizeof(*a);
	}
	if (bind(fd, (struct sockaddr *)&ss, sl) < 0 || listen(fd, 16) < 0 ||
	    getsockname(fd, (struct sockaddr *)&ss, &sl) < 0) {
		int e = errno;

		close(fd);
		return -e;
	}
	*port = ntohs(ss.ss_family == AF_INET6 ?
			      ((struct sockaddr_in6 *)&ss)->sin6_port :
			      ((struct sockaddr_in *)&ss)->sin_port);
	return fd;
}

int replica_link_listen(struct replica_link **out, int rank, double timeout_s,
			struct replica_addr *me, char *err, size_t len)
{
	const char *host = getenv("SIGMA_REPLICA_HOST");
	struct replica_link *l;
	int rc;

	*out = NULL;
	memset(me, 0, sizeof(*me));
	if (host && *host) {
		if (sigma_strlcpy(me->host, host, sizeof(me->host)) >=
		    sizeof(me->host))
			return sigma_set_err(err, len, -ENAMETOOLONG,
					     "SIGMA_REPLICA_HOST is too long");
	} else if (gethostname(me->host, sizeof(me->host) - 1) < 0) {
		return sigma_set_err(err, len, -errno, "gethostname: %s",
				     strerror(errno));
	}
	if (getrandom(me->token, sizeof(me->token), 0) !=
	    (ssize_t)sizeof(me->token))
		return sigma_set_err(err, len, -EIO, "getrandom: %s",
				     strerror(errno));
	l = calloc(1, sizeof(*l));
	if (!l)
		return sigma_set_err(err, len, -ENOMEM, "out of memory");
	l->out = l->in = -1;
	l->rank = rank;
	l->timeout_ms = timeout_s > 0 && timeout_s < 86400 ?
				(int)(timeout_s * 1000) : 86400 * 1000;
	memcpy(l->token, me->token, sizeof(l->token));
	l->lfd = rc = listen_any(&me->port);
	if (rc < 0) {
		free(l);
		return sigma_set_err(err, len, rc, "listen: %s",
				     strerror(-rc));
	}
	*out = l;
	return 0;
}

/* a connected, non-blocking socket to host:port, or -errno */
static int dial(const char *host, uint16_t port, uint64_t deadline,
		char *err, size_t len)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai, *a;
	char svc[8];
	int rc, fd = -1, last = -ECONNREFUSED;

	snprintf(svc, sizeof(svc), "%u", (unsigned)port);
	rc = getaddrinfo(host, svc, &hints, &ai);
	if (rc)
		return sigma_set_err(err, len, -EHOSTUNREACH, "%s: %s", host,
				     gai_strerror(rc));
	for (a = ai; a; a = a->ai_next) {
		socklen_t sl = sizeof(rc);

		fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC,
			    a->ai_protocol);
		if (fd < 0 || nonblocking(fd) < 0) {
			last = -errno;
			goto next;
		}
		if (connect(fd, a->ai_addr, a->ai_addrlen) == 0)
			break;
		if (errno != EINPROGRESS) {
			last = -errno;
			goto next;
		}
		if ((last = wait_fd(fd, POLLOUT, deadline)) == 0 &&
		    getsockopt(fd, SOL_SOCKET, SO_ERROR, &rc, &sl) == 0 &&
		    rc == 0)
			break;
		if (last == 0)
			last = rc ? -rc : -errno;
next:
		if (fd >= 0)
			close(fd);
		fd = -1;
	}
	freeaddrinfo(ai);
	if (fd < 0)
		return sigma_set_err(err, len, last, "connecting to %s port %u: %s",
				     host, (unsigned)port, strerror(-last));
	return fd;
}

int replica_link_join(struct replica_link *l, int buddy,
		      const struct replica_addr *at, int from, char *err,
		      size_t len)
{
	uint64_t deadline = sigma_now_ms() + (uint64_t)l->timeout_ms;
	struct hello h;
	char host[sizeof(at->host)];
	int rc;

	/* published by a peer: terminated here whatever it holds */
	memcpy(host, at->host, sizeof(host));
	host[sizeof(host) - 1] = '\0';
	rc = dial(host, at->port, deadline, err, len);
	if (rc < 0)
		return rc;
	l->out = rc;
	memset(&h, 0, sizeof(h));
	memcpy(h.magic, HELLO_MAGIC, sizeof(h.magic));
	h.rank = (uint32_t)l->rank;
	memcpy(h.token, at->token, sizeof(h.token));
	if ((rc = put_all(l->out, &h, sizeof(h), deadline)))
		return sigma_set_err(err, len, rc, "hello to rank %d: %s",
				     buddy, strerror(-rc));
	/* the connection of rank from, proven by our own token */
	while (l->in < 0) {
		uint64_t hello_by;
		int fd;

		if ((rc = wait_fd(l->lfd, POLLIN, deadline)))
			return sigma_set_err(err, len, rc,
					     "waiting for rank %d to connect: %s",
					     from, strerror(-rc));
		fd = accept4(l->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == EAGAIN ||
			    errno == ECONNABORTED)
				continue;
			return sigma_set_err(err, len, -errno, "accept: %s",
					     strerror(errno));
		}
		hello_by = sigma_now_ms() + 5000;
		if (hello_by > deadline)
			hello_by = deadline;
		if (nonblocking(fd) == 0 &&
		    get_all(fd, &h, sizeof(h), hello_by) == 0 &&
		    memcmp(h.magic, HELLO_MAGIC, sizeof(h.magic)) == 0 &&
		    h.rank == (uint32_t)from &&
		    memcmp(h.token, l->token, sizeof(h.token)) == 0) {
			l->in = fd;
			break;
		}
		sigma_warn("tier 1: refused a replica connection that is not rank %d of this job",
			   from);
		close(fd);
	}
	close(l->lfd);
	l->lfd = -1;
	return 0;
}

/* where a transfer over iovecs stands */
struct cursor {
	const struct iovec *v;
	int n, i;
	size_t off, done, total;
};

static void cursor_init(struct cursor *c, const struct iovec *v, int n)
{
	memset(c, 0, sizeof(*c));
	c->v = v, c->n = n;
	for (int i = 0; i < n; i++)
		c->total += v[i].iov_len;
}

static void cursor_advance(struct cursor *c, size_t k)
{
	c->done += k, c->off += k;
	while (c->i < c->n && c->off >= c->v[c->i].iov_len)
		c->off -= c->v[c->i].iov_len, c->i++;
}

/* one send or receive step; 0 when it would block, -errno */
static int step(int fd, struct cursor *c, bool out, size_t cap)
{
	char *p = (char *)c->v[c->i].iov_base + c->off;
	size_t n = c->v[c->i].iov_len - c->off;
	ssize_t k;

	if (n > cap)
		n = cap;
	k = out ? send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT)
		: recv(fd, p, n, MSG_DONTWAIT);
	if (k > 0) {
		cursor_advance(c, (size_t)k);
		return 0;
	}
	if (k == 0 && !out)
		return -ECONNRESET;
	return errno == EAGAIN || errno == EINTR ? 0 : -errno;
}

int replica_link_swap(struct replica_link *l, const struct iovec *out,
		      int nout, const struct iovec *in, int nin, char *err,
		      size_t len)
{
	struct swap_head mine, theirs;
	struct iovec hv = { .iov_base = &theirs, .iov_len = sizeof(theirs) };
	struct cursor so, ri, rh;
	/* progress is due by last + timeout; no sending before resume */
	int64_t last = (int64_t)sigma_now_ms(), resume = 0;
	unsigned pause = l->pause_ms;
	size_t half;
	int rc = 0;

	l->pause_ms = 0;
	if (l->out < 0 || l->in < 0)
		return sigma_set_err(err, len, -ENOTCONN, "not connected");
	cursor_init(&so, out, nout);
	cursor_init(&ri, in, nin);
	cursor_init(&rh, &hv, 1);
	half = so.total / 2;
	memset(&mine, 0, sizeof(mine));
	memcpy(mine.magic, SWAP_MAGIC, sizeof(mine.magic));
	mine.bytes = so.total;
	if ((rc = put_all(l->out, &mine, sizeof(mine),
			  (uint64_t)last + (uint64_t)l->timeout_ms)))
		goto fail;
	while (so.done < so.total || rh.done < rh.total || ri.done < ri.total) {
		/* a direction that is done is left out: its peer may hang
		 * up meanwhile, which is not this swap's business */
		struct pollfd p[2] = { { .fd = -1 }, { .fd = -1 } };
		int64_t now = (int64_t)sigma_now_ms();
		int64_t wait = last + l->timeout_ms - now;
		bool sending, receiving;
		int n;

		if (pause && so.done >= half) { /* the drill's pause */
			resume = last = now + pause;
			wait = last + l->timeout_ms - now;
			pause = 0;
		}
		sending = so.done < so.total && now >= resume;
		receiving = rh.done < rh.total || ri.done < ri.total;
		if (sending)
			p[0].fd = l->out, p[0].events = POLLOUT;
		if (receiving)
			p[1].fd = l->in, p[1].events = POLLIN;
		if (!sending && so.done < so.total && resume - now + 1 < wait)
			wait = resume - now + 1;
		if (wait <= 0) {
			rc = -ETIMEDOUT;
			break;
		}
		n = poll(p, 2, (int)(wait < INT32_MAX ? wait : INT32_MAX));
		if (n < 0 && errno != EINTR) {
			rc = -errno;
			break;
		}
		if (n <= 0)
			continue;
		if (sending && p[0].revents &&
		    (rc = step(l->out, &so, true,
			       pause && so.done < half ? half - so.done
						       : (size_t)1 << 20)))
			break;
		if (!receiving || !p[1].revents)
			continue;
		if (rh.done < rh.total) {
			if ((rc = step(l->in, &rh, false, sizeof(theirs))))
				break;
			if (rh.done == rh.total &&
			    (memcmp(theirs.magic, SWAP_MAGIC,
				    sizeof(theirs.magic)) ||
			     theirs.bytes != ri.total)) {
				rc = -EPROTO;
				break;
			}
		} else if ((rc = step(l->in, &ri, false, (size_t)1 << 20))) {
			break;
		}
		last = (int64_t)sigma_now_ms() > last ? (int64_t)sigma_now_ms()
						       : last;
	}
	if (rc == 0)
		return 0;
fail:
	if (rc == -EPROTO)
		sigma_set_err(err, len, rc,
			      "the peer announced %llu bytes, this rank expects %zu",
			      (unsigned long long)theirs.bytes, ri.total);
	else
		sigma_set_err(err, len, rc,
			      "%s (sent %zu of %zu bytes, received %zu of %zu)",
			      rc == -ETIMEDOUT ? "no progress within the timeout" :
			      rc == -ECONNRESET ? "the peer closed the connection" :
			      strerror(-rc), so.done, so.total, ri.done, ri.total);
	/* a stream cut mid-message cannot carry another swap */
	close(l->out), close(l->in);
	l->out = l->in = -1;
	return rc;
}

void replica_link_pause_next(struct replica_link *l, unsigned ms)
{
	l->pause_ms = ms;
}

void replica_link_close(struct replica_link *l)
{
	if (!l)
		return;
	if (l->lfd >= 0)
		close(l->lfd);
	if (l->out >= 0)
		close(l->out);
	if (l->in >= 0)
		close(l->in);
	free(l);
}
