/*
 * server.c - sigmad's socket for sigmactl (see server.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "eventlog.h"
#include "server.h"
#include "sigma.h"

#define SRV_REQ_MAX 4096
#define SRV_WORDS   8

int srv_open(const char *path, int *out)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char dir[sizeof(sa.sun_path)], *slash;
	struct stat st;
	int fd, rc;

	if (sigma_strlcpy(sa.sun_path, path, sizeof(sa.sun_path)) >=
	    sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	sigma_strlcpy(dir, path, sizeof(dir));
	slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = '\0';
		rc = sigma_mkdir_p(dir, 0755);
		if (rc)
			return rc;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			close(fd);
			return -EEXIST;
		}
		/* a socket someone answers on belongs to a running sigmad */
		int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

		if (probe >= 0 &&
		    connect(probe, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
			close(probe);
			close(fd);
			return -EADDRINUSE;
		}
		if (probe >= 0)
			close(probe);
		unlink(path);
	}
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    chmod(path, 0666) < 0 || listen(fd, 16) < 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	*out = fd;
	return 0;
}

void srv_close(int fd, const char *path)
{
	if (fd >= 0) {
		close(fd);
		unlink(path);
	}
}

struct history_arg {
	FILE *out;
	uint32_t job;
	const char *node;
	int64_t since;
	bool all; /* root or SlurmUser: every event */
	uid_t uid;
};

static int history_fn(const struct evlog_event *ev, void *arg)
{
	struct history_arg *h = arg;
	char line[EVLOG_LINE_MAX];

	if (!h->all && (!ev->job || ev->uid != h->uid))
		return 0;
	if (h->job && ev->job != h->job)
		return 0;
	if (h->node && !strstr(ev->node, h->node) &&
	    !strstr(ev->spare, h->node))
		return 0;
	if (ev->time < h->since)
		return 0;
	if (evlog_format(ev, line, sizeof(line)) > 0)
		fputs(line, h->out);
	return 0;
}

static void srv_history(struct ctl *c, char **w, int n, bool all, uid_t uid,
			FILE *out)
{
	struct history_arg h = {.out = out, .all = all, .uid = uid};
	long v;

	for (int i = 1; i < n; i++) {
		if (!strncmp(w[i], "job=", 4) &&
		    !sigma_parse_long(w[i] + 4, 1, UINT32_MAX, &v))
			h.job = (uint32_t)v;
		else if (!strncmp(w[i], "node=", 5) && w[i][5])
			h.node = w[i] + 5;
		else if (!strncmp(w[i], "since=", 6) &&
			 !sigma_parse_long(w[i] + 6, 0, __LONG_MAX__, &v))
			h.since = v;
		else {
			fprintf(out, "error: bad history argument '%s'\n",
				w[i]);
			return;
		}
	}
	int rc = evlog_read(ctl_event_log(c), history_fn, &h, NULL);
	if (rc)
		fprintf(out, "error: event log: %s\n",
			strerror(rc < 0 ? -rc : EIO));
}

static void srv_dispatch(struct ctl *c, char *req, uid_t uid, bool admin,
			 FILE *out)
{
	char *w[SRV_WORDS], *save = NULL, *tok;
	int n = 0;

	for (tok = strtok_r(req, "\t", &save); tok && n < SRV_WORDS;
	     tok = strtok_r(NULL, "\t", &save))
		w[n++] = tok;
	if (n == 0) {
		fprintf(out, "error: empty request\n");
		return;
	}
	if (!strcmp(w[0], "status") && n == 1) {
		ctl_cmd_status(c, out);
		return;
	}
	if (!strcmp(w[0], "spares") && n == 1) {
		ctl_cmd_spares(c, out);
		return;
	}
	if (!strcmp(w[0], "history")) {
		srv_history(c, w, n, admin, uid, out);
		return;
	}
	if (strcmp(w[0], "drain") && strcmp(w[0], "resume") &&
	    strcmp(w[0], "spares")) {
		fprintf(out, "error: unknown request '%s'\n", w[0]);
		return;
	}
	if (!admin) {
		sigma_warn("refused '%s' from uid %u: not root or SlurmUser",
			   w[0], (unsigned)uid);
		fprintf(
		    out,
		    "error: permission denied: %s is for root or SlurmUser only\n",
		    w[0]);
		return;
	}
	if (!strcmp(w[0], "drain") && n == 3)
		ctl_cmd_drain(c, w[1], w[2], uid, out);
	else if (!strcmp(w[0], "resume") && n == 2)
		ctl_cmd_resume(c, w[1], uid, out);
	else if (!strcmp(w[0], "spares") && n == 3 && !strcmp(w[1], "add"))
		ctl_cmd_spare_add(c, w[2], uid, out);
	else if (!strcmp(w[0], "spares") && n == 3 && !strcmp(w[1], "remove"))
		ctl_cmd_spare_remove(c, w[2], uid, out);
	else
		fprintf(out, "error: bad arguments to '%s'\n", w[0]);
}

void srv_serve(int lfd, struct ctl *c, uid_t slurm_user)
{
	struct timeval tv = {.tv_sec = 2};
	struct ucred cred;
	socklen_t len = sizeof(cred);
	char req[SRV_REQ_MAX + 1];
	size_t got = 0;
	FILE *out;
	int fd;

	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
		close(fd);
		return;
	}
	while (got < SRV_REQ_MAX) {
		ssize_t n = read(fd, req + got, SRV_REQ_MAX - got);

		if (n <= 0)
			break;
		got += (size_t)n;
		if (memchr(req, '\n', got))
			break;
	}
	req[got] = '\0';
	req[strcspn(req, "\n")] = '\0';
	out = fdopen(fd, "w");
	if (!out) {
		close(fd);
		return;
	}
	sigma_debug("request from uid %u: %s", (unsigned)cred.uid, req);
	srv_dispatch(c, req, cred.uid, cred.uid == 0 || cred.uid == slurm_user,
		     out);
	fclose(out);
}
