/*
 * server.c - sigmad's socket for sigmactl (see server.h).
 *
 * Requests are matched against the command table (cmd_table.h), which
 * names the handler of each; the handlers below hand them to the
 * controller (ctl.h), history aside: it is read from the event log here.
 *
 * Every connection is a small state machine in one poll loop: reading the
 * request, then writing the reply, all without blocking, under one
 * deadline for the whole exchange. Connections are capped in number, in
 * total and per user, and requests in size, so no client can hold the
 * controller's tick, whatever it sends and however slowly.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "cmd_table.h"
#include "eventlog.h"
#include "server.h"
#include "sigma.h"

#define SRV_WORDS 8

enum srv_state { SRV_FREE = 0, SRV_READ, SRV_WRITE };

struct srv_conn {
	enum srv_state state;
	int fd;
	uid_t uid;
	uint64_t deadline;
	size_t got;
	char req[SRV_REQ_MAX + 1];
	char *reply; /* malloc'd by open_memstream */
	size_t reply_len, sent;
};

/* one user's requests: a token bucket (SRV_RATE_BURST, SRV_RATE_PER_S) */
struct srv_rate {
	uid_t uid;
	double tokens;
	uint64_t at; /* ms of the last refill; 0: slot unused */
};
#define SRV_RATE_USERS 256

struct srv {
	int lfd;
	char path[108];
	uid_t slurm_user;
	bool private_jobs;
	struct srv_conn conn[SRV_CONN_MAX];
	struct srv_rate rate[SRV_RATE_USERS];
	/* turned away since the last report: logged once a minute at most */
	unsigned long refused, expired, evicted, limited;
	uint64_t reported;
};

static int srv_listen(const char *path, int *out)
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
		char err[PATH_MAX + 128];

		*slash = '\0';
		rc = sigma_mkdir_owned(dir, 0755, err, sizeof(err));
		if (rc) {
			sigma_error("socket directory: %s", err);
			return rc;
		}
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
	/*
	 * everyone may connect (sigmad checks each caller's uid): the socket
	 * is made 0666 by the umask at bind, not by a chmod of its path,
	 * which would follow a link planted there in between
	 */
	mode_t old = umask(0111);

	rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (rc < 0 || listen(fd, 16) < 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	*out = fd;
	return 0;
}

struct history_arg {
	FILE *out;
	const char *node;
};

static int history_fn(const struct evlog_event *ev, void *arg)
{
	struct history_arg *h = arg;
	char line[EVLOG_LINE_MAX];

	if (!strcmp(ev->type, "counts"))
		return 0; /* a compacted log's counters, not an event */
	if (h->node && !strstr(ev->node, h->node) &&
	    !strstr(ev->spare, h->node))
		return 0;
	if (evlog_format(ev, line, sizeof(line)) > 0)
		fputs(line, h->out);
	return 0;
}

/* one request, as the command table's handlers see it */
struct srv_call {
	struct ctl *c;
	char **args; /* the words after the name (and its fixed second word) */
	int nargs;
	uid_t uid;
	bool admin;	   /* root or SlurmUser */
	bool see_all_jobs; /* no PrivateData=jobs */
	FILE *out;
};

/* a handler of the command table: the reply goes to k->out */
typedef void srv_cmd_fn(const struct srv_call *k);

static void srv_cmd_status(const struct srv_call *k)
{
	ctl_cmd_status(k->c, k->out, k->uid, k->admin || k->see_all_jobs);
}

static void srv_cmd_spares(const struct srv_call *k)
{
	ctl_cmd_spares(k->c, k->out);
}

static void srv_cmd_spare_add(const struct srv_call *k)
{
	ctl_cmd_spare_add(k->c, k->args[0], k->uid, k->out);
}

static void srv_cmd_spare_remove(const struct srv_call *k)
{
	ctl_cmd_spare_remove(k->c, k->args[0], k->uid, k->out);
}

/* a "job=ID" word: true, with the id in *job */
static bool srv_job_word(const char *w, uint32_t *job)
{
	long v;

	if (strncmp(w, "job=", 4) || sigma_parse_long(w + 4, 1, UINT32_MAX, &v))
		return false;
	*job = (uint32_t)v;
	return true;
}

static void srv_cmd_history(const struct srv_call *k)
{
	const struct evlog *log = ctl_event_log(k->c);
	struct evlog_filter flt = {.all = k->admin, .uid = (uint32_t)k->uid};
	struct history_arg h = {.out = k->out};
	char *const *w = k->args;
	bool cut;
	long v;
	int rc;

	for (int i = 0; i < k->nargs; i++) {
		if (srv_job_word(w[i], &flt.job))
			continue;
		if (!strncmp(w[i], "node=", 5) && w[i][5])
			h.node = w[i] + 5;
		else if (!strncmp(w[i], "since=", 6) &&
			 !sigma_parse_long(w[i] + 6, 0, __LONG_MAX__, &v))
			flt.since = v;
		else {
			fprintf(k->out, "error: bad history argument '%s'\n",
				w[i]);
			return;
		}
	}
	/* the caller's events alone, found in the index, the newest
	 * SRV_HISTORY_WINDOW bytes of them: the loop stays quick however
	 * long the log has grown and whoever else filled it */
	rc = evlog_history(log, &flt, SRV_HISTORY_WINDOW, history_fn, &h, &cut);
	if (!rc && cut)
		fprintf(k->out, "# history: the newest %ld KiB of these events "
				"(older ones are in %s)\n",
			SRV_HISTORY_WINDOW / 1024, log->path);
	if (rc)
		fprintf(k->out, "error: event log: %s\n",
			strerror(rc < 0 ? -rc : EIO));
}

static void srv_cmd_drain(const struct srv_call *k)
{
	ctl_cmd_drain(k->c, k->args[0], k->args[1], k->uid, k->out);
}

static void srv_cmd_resume(const struct srv_call *k)
{
	ctl_cmd_resume(k->c, k->args[0], k->uid, k->out);
}

static void srv_cmd_suspect(const struct srv_call *k)
{
	uint32_t job;

	if (k->nargs != 2 || !srv_job_word(k->args[1], &job)) {
		fprintf(k->out, "error: suspect needs NODE and job=ID\n");
		return;
	}
	ctl_cmd_suspect(k->c, k->args[0], job, k->uid, k->admin, k->out);
}

static void srv_cmd_slow(const struct srv_call *k)
{
	uint32_t job;

	if (k->nargs != 2 || !srv_job_word(k->args[1], &job)) {
		fprintf(k->out, "error: slow needs NODE and job=ID\n");
		return;
	}
	ctl_cmd_slow(k->c, k->args[0], job, k->uid, k->admin, k->out);
}

static void srv_cmd_relaunch(const struct srv_call *k)
{
	const char *off = "";
	uint32_t job = 0;
	long launch = 0;

	for (int i = 0; i < k->nargs; i++) {
		const char *w = k->args[i];

		if (srv_job_word(w, &job))
			continue;
		if (!strncmp(w, "launch=", 7) &&
		    !sigma_parse_long(w + 7, 1, 1000000, &launch))
			continue;
		if (!strncmp(w, "off=", 4) && w[4]) {
			off = w + 4;
			continue;
		}
		fprintf(k->out, "error: relaunch: bad word '%.64s'\n", w);
		return;
	}
	if (!job || !launch) {
		fprintf(k->out, "error: relaunch needs job=ID and launch=N\n");
		return;
	}
	ctl_cmd_relaunch(k->c, job, (int)launch, off, k->uid, k->admin,
			 k->out);
}

/* the handlers, as the command table names them */
static srv_cmd_fn *const srv_cmds[CMD_COUNT] = {
#define SRV_CMD(id, name, sub, nodes, tail, admin, handler, ...) [id] = handler,
	CMD_TABLE(SRV_CMD)
#undef SRV_CMD
};

static void srv_dispatch(struct ctl *c, char *req, uid_t uid, bool admin,
			 bool see_all_jobs, FILE *out)
{
	char *w[SRV_WORDS], *save = NULL, *tok;
	const struct cmd_spec *cmd;
	int n = 0;

	for (tok = strtok_r(req, "\t", &save); tok && n < SRV_WORDS;
	     tok = strtok_r(NULL, "\t", &save))
		w[n++] = tok;
	if (n == 0) {
		fprintf(out, "error: empty request\n");
		return;
	}
	cmd = cmd_match_request(w, n);
	if (cmd && (!cmd->admin || admin)) {
		int skip = cmd->sub ? 2 : 1;
		struct srv_call k = {
		    .c = c,
		    .args = w + skip,
		    .nargs = n - skip,
		    .uid = uid,
		    .admin = admin,
		    .see_all_jobs = see_all_jobs,
		    .out = out,
		};

		srv_cmds[cmd->id](&k);
		return;
	}
	if (!cmd && !cmd_admin_only(w[0])) {
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
	fprintf(out, "error: bad arguments to '%s'\n", w[0]);
}

int srv_create(struct srv **out, const char *path, uid_t slurm_user,
	       bool private_jobs)
{
	struct srv *s = calloc(1, sizeof(*s));
	int rc;

	if (!s)
		return -ENOMEM;
	if (sigma_strlcpy(s->path, path, sizeof(s->path)) >= sizeof(s->path)) {
		free(s);
		return -ENAMETOOLONG;
	}
	rc = srv_listen(path, &s->lfd);
	if (rc) {
		free(s);
		return rc;
	}
	s->slurm_user = slurm_user;
	s->private_jobs = private_jobs;
	*out = s;
	return 0;
}

static void srv_drop(struct srv_conn *k)
{
	if (k->state == SRV_FREE)
		return;
	close(k->fd);
	free(k->reply);
	memset(k, 0, sizeof(*k));
}

void srv_destroy(struct srv *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < SRV_CONN_MAX; i++)
		srv_drop(&s->conn[i]);
	close(s->lfd);
	unlink(s->path);
	free(s);
}

static bool srv_is_admin(const struct srv *s, uid_t uid)
{
	return uid == 0 || uid == s->slurm_user;
}

/* how many connections uid holds */
static size_t srv_held(const struct srv *s, uid_t uid)
{
	size_t n = 0;

	for (size_t i = 0; i < SRV_CONN_MAX; i++)
		if (s->conn[i].state != SRV_FREE && s->conn[i].uid == uid)
			n++;
	return n;
}

/*
 * The slots other users hold are all taken: the oldest connection of the
 * user holding the most, when that is at least 2 more than mine, else -1
 */
static int srv_fair_victim(const struct srv *s, size_t mine)
{
	size_t most = 0;
	int victim = -1;

	for (int i = 0; i < SRV_CONN_MAX; i++) {
		const struct srv_conn *k = &s->conn[i];
		size_t n;

		if (k->state == SRV_FREE || srv_is_admin(s, k->uid))
			continue;
		n = srv_held(s, k->uid);
		if (n > most ||
		    (n == most && victim >= 0 &&
		     k->deadline < s->conn[victim].deadline)) {
			most = n;
			victim = i;
		}
	}
	return most >= mine + 2 ? victim : -1;
}

/* a free slot for uid, or NULL when the caps are reached */
static struct srv_conn *srv_slot(struct srv *s, uid_t uid)
{
	struct srv_conn *free_slot = NULL;
	size_t nfree = 0, mine = srv_held(s, uid);
	int victim;

	for (size_t i = 0; i < SRV_CONN_MAX; i++)
		if (s->conn[i].state == SRV_FREE && !nfree++)
			free_slot = &s->conn[i];
	if (srv_is_admin(s, uid))
		return free_slot;
	if (mine >= SRV_CONN_PER_USER)
		return NULL;
	/* the last SRV_CONN_ADMIN free slots are root's and SlurmUser's */
	if (nfree > SRV_CONN_ADMIN)
		return free_slot;
	victim = srv_fair_victim(s, mine);
	if (victim < 0)
		return NULL;
	s->evicted++;
	srv_drop(&s->conn[victim]);
	return &s->conn[victim];
}

static void srv_accept(struct srv *s, uint64_t now)
{
	for (int i = 0; i < SRV_CONN_MAX; i++) {
		struct ucred cred;
		socklen_t len = sizeof(cred);
		struct srv_conn *k;
		int fd;

		fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0)
			return;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
			close(fd);
			continue;
		}
		k = srv_slot(s, cred.uid);
		if (!k) {
			static const char busy[] =
			    "error: too many connections, try again\n";

			s->refused++;
			(void)!write(fd, busy, sizeof(busy) - 1);
			close(fd);
			continue;
		}
		k->state = SRV_READ;
		k->fd = fd;
		k->uid = cred.uid;
		k->deadline = now + SRV_DEADLINE_MS;
	}
}

/* the whole request is in: answer it into k->reply */
/*
 * One request of uid's may be answered now: its bucket refilled for the
 * time since, less one token. A user not seen lately takes the slot of the
 * one seen longest ago (a full bucket: a new user is never punished for
 * another's flood).
 */
static bool srv_rate_take(struct srv *s, uid_t uid, uint64_t now)
{
	struct srv_rate *r = NULL, *oldest = &s->rate[0];

	for (size_t i = 0; i < SRV_RATE_USERS && !r; i++) {
		if (s->rate[i].at && s->rate[i].uid == uid)
			r = &s->rate[i];
		else if (s->rate[i].at < oldest->at)
			oldest = &s->rate[i];
	}
	if (!r) {
		r = oldest;
		r->uid = uid;
		r->tokens = SRV_RATE_BURST;
		r->at = now;
	}
	r->tokens += (double)(now - r->at) / 1000.0 * SRV_RATE_PER_S;
	if (r->tokens > SRV_RATE_BURST)
		r->tokens = SRV_RATE_BURST;
	r->at = now ? now : 1;
	if (r->tokens < 1)
		return false;
	r->tokens -= 1;
	return true;
}

static void srv_answer(struct srv *s, struct srv_conn *k, struct ctl *c,
		       bool too_long)
{
	FILE *out = open_memstream(&k->reply, &k->reply_len);
	char shown[SRV_REQ_MAX + 1];

	if (!out) {
		srv_drop(k);
		return;
	}
	k->req[k->got] = '\0';
	k->req[strcspn(k->req, "\n")] = '\0';
	if (too_long) {
		fprintf(out, "error: request longer than %d bytes\n",
			SRV_REQ_MAX);
	} else if (!srv_is_admin(s, k->uid) &&
		   !srv_rate_take(s, k->uid, sigma_now_ms())) {
		s->limited++;
		fprintf(out,
			"error: too many requests (%d a second after %d), "
			"try again shortly\n",
			SRV_RATE_PER_S, SRV_RATE_BURST);
	} else {
		sigma_escape(k->req, shown, sizeof(shown));
		sigma_debug("request from uid %u: %s", (unsigned)k->uid,
			    shown);
		srv_dispatch(c, k->req, k->uid, srv_is_admin(s, k->uid),
			     !s->private_jobs, out);
	}
	if (fclose(out) != 0) {
		srv_drop(k);
		return;
	}
	k->state = SRV_WRITE;
	k->sent = 0;
}

static void srv_read(struct srv *s, struct srv_conn *k, struct ctl *c)
{
	for (;;) {
		ssize_t n = read(k->fd, k->req + k->got, SRV_REQ_MAX - k->got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			/* EOF: a request without its newline is still one */
			if (n == 0 && k->got)
				srv_answer(s, k, c, false);
			else
				srv_drop(k);
			return;
		}
		k->got += (size_t)n;
		if (memchr(k->req, '\n', k->got)) {
			srv_answer(s, k, c, false);
			return;
		}
		if (k->got == SRV_REQ_MAX) {
			srv_answer(s, k, c, true);
			return;
		}
	}
}

static void srv_write(struct srv_conn *k)
{
	while (k->sent < k->reply_len) {
		ssize_t n = write(k->fd, k->reply + k->sent,
				  k->reply_len - k->sent);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0)
			break;
		k->sent += (size_t)n;
	}
	srv_drop(k);
}

/* what clients were turned away, without letting them fill the log */
static void srv_report(struct srv *s, uint64_t now)
{
	if ((!s->refused && !s->expired && !s->evicted && !s->limited) ||
	    now - s->reported < 60000)
		return;
	sigma_warn("socket: %lu connection(s) refused (more than %d open, or %d for one user), %lu dropped (no request within %d ms), %lu closed to make room for a user holding fewer, and %lu request(s) over a user's rate, since the last report",
		   s->refused, SRV_CONN_MAX, SRV_CONN_PER_USER, s->expired,
		   SRV_DEADLINE_MS, s->evicted, s->limited);
	s->refused = s->expired = s->evicted = s->limited = 0;
	s->reported = now;
}

void srv_run(struct srv *s, struct ctl *c, int timeout_ms)
{
	struct pollfd pfd[1 + SRV_CONN_MAX];
	struct srv_conn *at[1 + SRV_CONN_MAX];
	uint64_t now = sigma_now_ms(), until = now + (uint64_t)timeout_ms;
	size_t n = 0;

	pfd[n].fd = s->lfd;
	pfd[n].events = POLLIN;
	at[n++] = NULL;
	for (size_t i = 0; i < SRV_CONN_MAX; i++) {
		struct srv_conn *k = &s->conn[i];

		if (k->state == SRV_FREE)
			continue;
		if (k->deadline < until)
			until = k->deadline;
		pfd[n].fd = k->fd;
		pfd[n].events = k->state == SRV_READ ? POLLIN : POLLOUT;
		at[n++] = k;
	}
	if (poll(pfd, n, until > now ? (int)(until - now) : 0) < 0 &&
	    errno != EINTR)
		return;
	now = sigma_now_ms();
	for (size_t i = 1; i < n; i++) {
		struct srv_conn *k = at[i];

		if (pfd[i].revents & (POLLIN | POLLHUP | POLLERR)) {
			if (k->state == SRV_READ)
				srv_read(s, k, c);
		}
		if (k->state == SRV_WRITE &&
		    (pfd[i].revents & (POLLOUT | POLLHUP | POLLERR)))
			srv_write(k);
		if (k->state != SRV_FREE && now >= k->deadline) {
			s->expired++;
			srv_drop(k);
		}
	}
	if (pfd[0].revents & POLLIN)
		srv_accept(s, now);
	srv_report(s, now);
}
