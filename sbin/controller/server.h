/*
 * server.h - sigmad's unix-socket server for sigmactl. One request per
 * connection: a line of tab-separated words; the reply is text, then the
 * server closes. Who asks is learnt from SO_PEERCRED: mutating commands are
 * for root and SlurmUser only; a normal user's history holds their own jobs.
 */
#ifndef SIGMAD_SERVER_H
#define SIGMAD_SERVER_H

#include <stdint.h>
#include <sys/types.h>

#include "ctl.h"

/* Bind path (a stale socket is replaced; a live sigmad there is an error). */
int srv_open(const char *path, int *fd);
void srv_close(int fd, const char *path);
/* Accept and answer one waiting client. */
void srv_serve(int fd, struct ctl *c, uid_t slurm_user);

#endif /* SIGMAD_SERVER_H */
