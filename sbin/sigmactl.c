/*
 * sigmactl - talk to sigmad: status, spares, history, drain, resume.
 * See sigmactl(8). The commands, their words and their usage are sigmad's
 * command table (cmd_table.h); sigmactl checks a command line against it
 * before it sends the request. Mutating commands are for root and
 * SlurmUser (sigmad checks the caller's uid on its socket); history shows
 * a normal user their own jobs only.
 */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "cmd_table.h"
#include "conf.h"
#include "eventlog.h"
#include "sigma.h"
#include "sigmactl_show.h"

#ifndef SIGMA_SYSCONFDIR
#define SIGMA_SYSCONFDIR "/etc"
#endif

static void ctl_usage(FILE *f)
{
	fprintf(f, "usage: sigmactl [--socket PATH] [--config FILE] [--json] "
		   "COMMAND [--json]\n");
	cmd_usage(f);
}

/* Socket: --socket, else sigmad_socket of the config file, else default. */
static int ctl_socket_path(const char *opt, const char *config, char *out,
			   size_t size)
{
	struct sigmad_config cfg;
	char err[512];

	if (opt)
		return sigma_strlcpy(out, opt, size) < size ? 0 : -ENAMETOOLONG;
	if (!config)
		config = getenv("SIGMA_CONF");
	if (!config)
		config = SIGMA_SYSCONFDIR "/sigma/sigma.conf";
	sigmad_config_init(&cfg);
	if (access(config, R_OK) == 0 &&
	    sigmad_config_load(&cfg, config, err, sizeof(err))) {
		fprintf(stderr, "sigmactl: %s\n", err);
		return -EINVAL;
	}
	sigma_strlcpy(out, cfg.socket_path, size);
	return 0;
}

/* TIME: epoch seconds, N[smhd] ago, or YYYY-MM-DD[THH:MM[:SS]] local time. */
static int ctl_parse_since(const char *s, long *out)
{
	static const char *const fmts[] = {"%Y-%m-%dT%H:%M:%S",
					   "%Y-%m-%d %H:%M:%S",
					   "%Y-%m-%dT%H:%M", "%Y-%m-%d", NULL};
	size_t n = strlen(s);
	long v;

	if (!sigma_parse_long(s, 0, __LONG_MAX__, &v)) {
		*out = v;
		return 0;
	}
	if (n >= 2 && strchr("smhd", s[n - 1])) {
		char num[32];
		long unit = s[n - 1] == 's'   ? 1
			    : s[n - 1] == 'm' ? 60
			    : s[n - 1] == 'h' ? 3600
					      : 86400;

		if (n - 1 < sizeof(num)) {
			memcpy(num, s, n - 1);
			num[n - 1] = '\0';
			if (!sigma_parse_long(num, 0, 100L * 365 * 86400, &v)) {
				*out = (long)time(NULL) - v * unit;
				return 0;
			}
		}
	}
	for (int i = 0; fmts[i]; i++) {
		struct tm tm = {0};
		const char *end = strptime(s, fmts[i], &tm);

		if (end && !*end) {
			tm.tm_isdst = -1;
			*out = (long)mktime(&tm);
			return 0;
		}
	}
	return -EINVAL;
}

/* how the reply of a command is printed */
struct ctl_out {
	enum cmd_id cmd;
	bool json;
	struct show_history hist;
};

/* an error line of sigmad's, "error: TEXT": to stderr, or JSON on stdout */
static void ctl_print_error(const struct ctl_out *o, const char *text)
{
	char safe[4 * EVLOG_LINE_MAX + 1];
	json_t *e;

	if (!o->json) {
		fprintf(stderr, "sigmactl: %s\n",
			sigma_escape(text, safe, sizeof(safe)));
		return;
	}
	e = json_pack("{s:s}", "error", text);
	if (!e || json_dumpf(e, stdout, JSON_COMPACT))
		fputs("{\"error\":\"?\"}", stdout);
	putchar('\n');
	json_decref(e);
}

/* "ok: TEXT" of drain, resume, spares add|remove */
static void ctl_print_ok(const struct ctl_out *o, const char *line)
{
	char safe[4 * EVLOG_LINE_MAX + 1];
	const char *text = strncmp(line, "ok: ", 4) ? line : line + 4;
	json_t *j;

	if (!o->json) {
		printf("%s\n", sigma_escape(line, safe, sizeof(safe)));
		return;
	}
	j = json_pack("{s:b, s:s}", "ok", 1, "message", text);
	if (j && !json_dumpf(j, stdout, JSON_COMPACT))
		putchar('\n');
	json_decref(j);
}

/* status or spares: sigmad's JSON as it is, or shown for people */
static int ctl_print_view(const struct ctl_out *o, const char *line)
{
	char err[256];
	int rc;

	if (o->json) {
		printf("%s\n", line);
		return 0;
	}
	if (o->cmd == CMD_STATUS)
		rc = show_status(line, (int64_t)time(NULL), stdout, err,
				 sizeof(err));
	else
		rc = show_spares(line, stdout, err, sizeof(err));
	if (rc)
		fprintf(stderr, "sigmactl: %s\n", err);
	return rc ? 1 : 0;
}

/* one line of sigmad's reply (without its '\n'): 0, or 1 for an error */
static int ctl_print_line(struct ctl_out *o, const char *line, size_t len)
{
	char err[256];
	struct evlog_event ev;

	if (!strncmp(line, "error: ", 7)) {
		ctl_print_error(o, line + 7);
		return 1;
	}
	switch (o->cmd) {
	case CMD_STATUS:
	case CMD_SPARES:
		return ctl_print_view(o, line);
	case CMD_HISTORY:
		if (!strncmp(line, "# ", 2)) { /* sigmad's note, for people */
			fprintf(stderr, "sigmactl: %s\n", line + 2);
			return 0;
		}
		if (evlog_parse_line(line, len, &ev, err, sizeof(err))) {
			fprintf(stderr, "sigmactl: history: %s\n", err);
			return 1;
		}
		if (o->json)
			printf("%s\n", line); /* one event a line */
		else
			show_event(&o->hist, &ev, stdout);
		return 0;
	default:
		ctl_print_ok(o, line);
		return 0;
	}
}

/* Send one request, print the reply. Returns the exit code. */
static int ctl_request(const char *path, const char *req, struct ctl_out *o)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char line[EVLOG_LINE_MAX + 2];
	FILE *in;
	int fd, rc = 0;

	if (sigma_strlcpy(sa.sun_path, path, sizeof(sa.sun_path)) >=
	    sizeof(sa.sun_path)) {
		fprintf(stderr, "sigmactl: socket path too long: %s\n", path);
		return 1;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;

		if (e == ENOENT || e == ECONNREFUSED)
			fprintf(
			    stderr,
			    "sigmactl: sigmad is not running (nothing answers on %s)\n",
			    path);
		else
			fprintf(stderr,
				"sigmactl: cannot reach sigmad on %s: %s\n",
				path, strerror(e));
		if (fd >= 0)
			close(fd);
		return 1;
	}
	if (write(fd, req, strlen(req)) != (ssize_t)strlen(req) ||
	    write(fd, "\n", 1) != 1) {
		fprintf(stderr, "sigmactl: cannot send to sigmad: %s\n",
			strerror(errno));
		close(fd);
		return 1;
	}
	shutdown(fd, SHUT_WR);
	in = fdopen(fd, "r");
	if (!in) {
		close(fd);
		return 1;
	}
	while (fgets(line, sizeof(line), in)) {
		size_t len = strlen(line);

		if (len && line[len - 1] == '\n')
			line[--len] = '\0';
		rc |= ctl_print_line(o, line, len);
	}
	fclose(in);
	return rc;
}

/* what the command line says, besides the command's name */
struct ctl_args {
	const char *sock, *config, *node, *reason, *off;
	long job, since, launch;
	bool json;
	char *pos[8]; /* the words that are no option */
	int npos;
};

static const struct option ctl_opts[] = {
    {"socket", required_argument, NULL, 'S'},
    {"config", required_argument, NULL, 'c'},
    {"job", required_argument, NULL, 'j'},
    {"node", required_argument, NULL, 'n'},
    {"since", required_argument, NULL, 's'},
    {"reason", required_argument, NULL, 'r'},
    {"launch", required_argument, NULL, 'L'},
    {"off", required_argument, NULL, 'o'},
    {"json", no_argument, NULL, 'J'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

/*
 * The options before the command ("+" stops at the command word): -1 to
 * go on, else the exit code.
 */
static int ctl_parse_global(int argc, char **argv, struct ctl_args *a)
{
	int c;

	while ((c = getopt_long(argc, argv, "+h", ctl_opts, NULL)) != -1) {
		switch (c) {
		case 'S':
			a->sock = optarg;
			break;
		case 'c':
			a->config = optarg;
			break;
		case 'J': /* before the command too, as scripts write it */
			a->json = true;
			break;
		case 'h':
			ctl_usage(stdout);
			return 0;
		case 'V':
			printf("sigmactl %s (git %s)\n", PACKAGE_VERSION,
			       SIGMA_GIT_REVISION);
			return 0;
		default:
			ctl_usage(stderr);
			return 64;
		}
	}
	if (optind >= argc) {
		ctl_usage(stderr);
		return 64;
	}
	return -1;
}

/* One option or word after the command: -1 to go on, else the exit code. */
static int ctl_parse_word(int c, struct ctl_args *a)
{
	switch (c) {
	case 1:
		if (a->npos == 8) {
			fprintf(stderr, "sigmactl: too many arguments\n");
			return 64;
		}
		a->pos[a->npos++] = optarg;
		return -1;
	case 'S':
		a->sock = optarg;
		return -1;
	case 'c':
		a->config = optarg;
		return -1;
	case 'j':
		if (sigma_parse_long(optarg, 1, UINT32_MAX, &a->job)) {
			fprintf(stderr,
				"sigmactl: --job: '%s' is not a job id\n",
				optarg);
			return 64;
		}
		return -1;
	case 'n':
		a->node = optarg;
		return -1;
	case 's':
		if (ctl_parse_since(optarg, &a->since)) {
			fprintf(stderr,
				"sigmactl: --since: '%s' is not epoch seconds, "
				"N[smhd] or YYYY-MM-DD[THH:MM[:SS]]\n",
				optarg);
			return 64;
		}
		return -1;
	case 'r':
		a->reason = optarg;
		return -1;
	case 'L':
		if (sigma_parse_long(optarg, 1, 1000000, &a->launch)) {
			fprintf(stderr,
				"sigmactl: --launch: '%s' is not a launch "
				"number (1-1000000)\n",
				optarg);
			return 64;
		}
		return -1;
	case 'o':
		a->off = optarg;
		return -1;
	case 'J':
		a->json = true;
		return -1;
	case 'h':
		ctl_usage(stdout);
		return 0;
	default:
		ctl_usage(stderr);
		return 64;
	}
}

/*
 * The options and words after the command argv[optind]: they may follow
 * it, so the rest is parsed again. -1 to go on, else the exit code.
 */
static int ctl_parse_command(int argc, char **argv, struct ctl_args *a)
{
	int sub_argc = argc - optind, rc = -1;
	char **sub = calloc((size_t)sub_argc + 1, sizeof(*sub));

	if (!sub)
		return 70;
	for (int i = 0; i < sub_argc; i++)
		sub[i] = argv[optind + i];
	optind = 0; /* 0: glibc starts afresh on a new argv */
	while (rc < 0) {
		int c = getopt_long(sub_argc, sub, "-h", ctl_opts, NULL);

		if (c == -1)
			break;
		rc = ctl_parse_word(c, a);
	}
	free(sub);
	return rc;
}

/*
 * The request for cmd, as the command table says it goes on the wire:
 * 0, or the exit code of a command line sigmad would refuse.
 */
static int ctl_format_request(const struct cmd_spec *cmd,
			      const struct ctl_args *a, char *req, size_t size)
{
	int n;

	switch (cmd->id) {
	case CMD_STATUS:
	case CMD_SPARES:
		snprintf(req, size, "%s", cmd->name);
		return 0;
	case CMD_SPARE_ADD:
	case CMD_SPARE_REMOVE:
		snprintf(req, size, "spares\t%s\t%s", a->pos[0], a->pos[1]);
		return 0;
	case CMD_HISTORY:
		n = snprintf(req, size, "history");
		if (a->job)
			n += snprintf(req + n, size - (size_t)n, "\tjob=%ld",
				      a->job);
		if (a->node && !strchr(a->node, '\t'))
			n += snprintf(req + n, size - (size_t)n, "\tnode=%.64s",
				      a->node);
		if (a->since >= 0)
			snprintf(req + n, size - (size_t)n, "\tsince=%ld",
				 a->since);
		return 0;
	case CMD_DRAIN:
		if (!a->reason || !*a->reason || strpbrk(a->reason, "\t\n")) {
			fprintf(
			    stderr,
			    "sigmactl: drain needs --reason TEXT (one line)\n");
			return 64;
		}
		if (sigma_snprintf(req, size, "drain\t%s\t%s", a->pos[0],
				   a->reason) < 0) {
			fprintf(stderr, "sigmactl: reason too long\n");
			return 64;
		}
		return 0;
	case CMD_RESUME:
		snprintf(req, size, "resume\t%.200s", a->pos[0]);
		return 0;
	case CMD_RELAUNCH:
		if (!a->job || !a->launch) {
			fprintf(stderr, "sigmactl: relaunch needs --job ID and "
					"--launch N\n");
			return 64;
		}
		n = snprintf(req, size, "relaunch\tjob=%ld\tlaunch=%ld",
			     a->job, a->launch);
		if (a->off && (!*a->off || strpbrk(a->off, "\t\n") ||
			       sigma_snprintf(req + n, size - (size_t)n,
					      "\toff=%s", a->off) < 0)) {
			fprintf(stderr, "sigmactl: --off: want NODE[,NODE...] "
					"on one line\n");
			return 64;
		}
		return 0;
	case CMD_SUSPECT:
		if (!a->job) {
			fprintf(stderr, "sigmactl: suspect needs --job ID\n");
			return 64;
		}
		snprintf(req, size, "suspect\t%.200s\tjob=%ld", a->pos[0],
			 a->job);
		return 0;
	case CMD_SLOW:
		if (!a->job) {
			fprintf(stderr, "sigmactl: slow needs --job ID\n");
			return 64;
		}
		snprintf(req, size, "slow\t%.200s\tjob=%ld", a->pos[0], a->job);
		return 0;
	case CMD_COUNT:
		break;
	}
	return 64;
}

int main(int argc, char **argv)
{
	struct ctl_args a = {.since = -1};
	struct ctl_out out = {0};
	const struct cmd_spec *cmd;
	char path[SIGMAD_SOCKET_MAX], req[4096];
	const char *name;
	int rc;

	rc = ctl_parse_global(argc, argv, &a);
	if (rc >= 0)
		return rc;
	name = argv[optind];
	rc = ctl_parse_command(argc, argv, &a);
	if (rc >= 0)
		return rc;
	if (ctl_socket_path(a.sock, a.config, path, sizeof(path)))
		return 1;
	cmd = cmd_match_line(name, a.pos, a.npos);
	if (!cmd) {
		ctl_usage(stderr);
		return 64;
	}
	rc = ctl_format_request(cmd, &a, req, sizeof(req));
	if (rc)
		return rc;
	out.cmd = cmd->id;
	out.json = a.json;
	return ctl_request(path, req, &out);
}
