/*
 * replica_link.h - the transport of tier 1's replicas (tier1.h): one TCP
 * connection to the buddy and one from the rank whose replica this rank
 * keeps. It is apart from the training's communicators, so that the
 * exchange runs in a thread of its own while the next step's collectives
 * run (docs/checkpoint-format.md, "Tiers").
 *
 * Lifecycle, every rank of the job together:
 *
 *   replica_link_listen -> publish the address (PMIx, boot_put)
 *   -> replica_link_join(buddy's address, from) -> replica_link_swap ...
 *   -> replica_link_close
 *
 * A connection is taken only from a peer that proves it belongs to the
 * job: it sends the token the accepting rank published, which only the
 * job's ranks can read (PMIx), and the rank the acceptor expects. Any
 * other connection is closed, with a warning, and the wait goes on.
 *
 * Sizes never come from the wire: each swap sends its length first, and
 * a length other than the one the receiver expects is an error. Calls
 * return 0 or -errno with err saying why; a failed link is not used
 * again. One thread uses a link at a time.
 */
#ifndef SIGMA_TRAIN_REPLICA_LINK_H
#define SIGMA_TRAIN_REPLICA_LINK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define REPLICA_TOKEN_LEN 16

/* what a rank publishes: where it listens, and the token a peer shows */
struct replica_addr {
	char host[256]; /* a name or numeric address, NUL-terminated */
	uint16_t port;
	uint8_t token[REPLICA_TOKEN_LEN];
};

struct replica_link;

/*
 * Listen on every address of this host, on a port the kernel picks; host
 * is the one peers connect to (SIGMA_REPLICA_HOST, or this host's name),
 * with a fresh random token. timeout_s bounds each later wait for a peer
 * (join, and a swap with no progress).
 */
int replica_link_listen(struct replica_link **l, int rank, double timeout_s,
			struct replica_addr *me, char *err, size_t len);

/* connect to buddy at its address, then accept rank from's connection */
int replica_link_join(struct replica_link *l, int buddy,
		      const struct replica_addr *at, int from, char *err,
		      size_t len);

/*
 * Send out[] to the buddy while receiving in[] from from, both whole;
 * returns when both are done. The peer's length must equal in[]'s.
 */
int replica_link_swap(struct replica_link *l, const struct iovec *out,
		      int nout, const struct iovec *in, int nin, char *err,
		      size_t len);

/* fault injection (the mid-exchange drill): the next swap stops sending
 * for ms milliseconds once half of it is sent */
void replica_link_pause_next(struct replica_link *l, unsigned ms);

/* close both connections and the listener; NULL is fine */
void replica_link_close(struct replica_link *l);

#endif /* SIGMA_TRAIN_REPLICA_LINK_H */
