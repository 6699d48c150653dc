/*
 * server.h - sigmad's unix-socket server for sigmactl. One request per
 * connection: a line of tab-separated words; the reply is text, then the
 * server closes. Who asks is learnt from SO_PEERCRED: mutating commands are
 * for root and SlurmUser only; a normal user's history holds their own jobs,
 * and so does their status when Slurm has PrivateData=jobs.
 *
 * No client can delay the controller: the server never blocks, a whole
 * exchange has SRV_DEADLINE_MS, requests SRV_REQ_MAX bytes, and at most
 * SRV_CONN_MAX connections are open (SRV_CONN_PER_USER for one user other
 * than root and SlurmUser); more are answered "too many" and closed.
 * SRV_CONN_ADMIN of them are kept for root and SlurmUser alone. When the
 * others are all taken, a user holding fewer connections than the busiest
 * user less one still gets in: the busiest user's oldest connection makes
 * room, so that a launcher's one report is answered while a few users
 * flood the socket.
 */
#ifndef SIGMAD_SERVER_H
#define SIGMAD_SERVER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "ctl.h"

#define SRV_REQ_MAX	  4096
#define SRV_DEADLINE_MS	  2000
#define SRV_CONN_MAX	  64
#define SRV_CONN_PER_USER 8
#define SRV_CONN_ADMIN	  8
/* a user other than root and SlurmUser is answered SRV_RATE_BURST
 * requests at once, then SRV_RATE_PER_S a second */
#define SRV_RATE_BURST 20
#define SRV_RATE_PER_S 2
/* history reads the newest this many bytes of the caller's events at most
 * (their job, user and time found in the log's index; node among those) */
#define SRV_HISTORY_WINDOW (4L << 20)

struct srv;

/*
 * Listen on path (a stale socket is replaced; a live sigmad there is
 * -EADDRINUSE). private_jobs: Slurm's PrivateData=jobs.
 */
int srv_create(struct srv **out, const char *path, uid_t slurm_user,
	       bool private_jobs);
/* Close every connection and the socket, and remove it. NULL is a no-op. */
void srv_destroy(struct srv *s);
/*
 * Serve for at most timeout_ms: accept, read, answer and drop expired
 * connections. Returns early when something was served.
 */
void srv_run(struct srv *s, struct ctl *c, int timeout_ms);

#endif /* SIGMAD_SERVER_H */
