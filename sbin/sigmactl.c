/*
 * sigmactl - talk to sigmad: status, spares, history, drain, resume.
 * See sigmactl(8). Mutating commands are for root and SlurmUser (sigmad
 * checks the caller's uid on its socket); history shows a normal user their
 * own jobs only.
 */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "conf.h"
#include "eventlog.h"
#include "sigma.h"

#ifndef SIGMA_SYSCONFDIR
#define SIGMA_SYSCONFDIR "/etc"
#endif

static void ctl_usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: sigmactl [--socket PATH] [--config FILE] COMMAND\n"
	    "  status                          spares, managed jobs, nodes in repair\n"
	    "  spares [add|remove NODE]        the hot-spare pool\n"
	    "  history [--job ID] [--node NAME] [--since TIME] [--json]\n"
	    "  drain NODE --reason TEXT        take a node out (root, SlurmUser)\n"
	    "  resume NODE                     put it back (root, SlurmUser)\n");
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

/* prefix then s, with control characters escaped: s came from users */
static void ctl_put(FILE *f, const char *prefix, const char *s)
{
	char safe[4 * EVLOG_LINE_MAX + 1];

	fprintf(f, "%s%s", prefix, sigma_escape(s, safe, sizeof(safe)));
}

static void ctl_print_event(const struct evlog_event *ev)
{
	char when[32];
	time_t t = (time_t)ev->time;
	struct tm tm;

	localtime_r(&t, &tm);
	strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
	printf("%s %-12s", when, ev->type);
	if (ev->job)
		printf(" job %u", ev->job);
	if (ev->attempt)
		printf(" attempt %d", ev->attempt);
	if (ev->kind[0])
		ctl_put(stdout, " ", ev->kind);
	if (ev->node[0])
		ctl_put(stdout, " ", ev->node);
	if (ev->verdict[0])
		ctl_put(stdout, " -> ", ev->verdict);
	if (ev->spare[0])
		ctl_put(stdout, " spares ", ev->spare);
	if (!strcmp(ev->type, "repair"))
		printf(" exit %d", ev->rc);
	if (ev->text[0])
		ctl_put(stdout, ": ", ev->text);
	printf("\n");
}

/* Send one request, print the reply. Returns the exit code. */
static int ctl_request(const char *path, const char *req, bool history,
		       bool json)
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
		struct evlog_event ev;
		size_t len = strlen(line);

		if (json) {
			fputs(line, stdout); /* JSON escapes its own strings */
			continue;
		}
		if (len && line[len - 1] == '\n')
			line[--len] = '\0';
		if (!strncmp(line, "error: ", 7)) {
			ctl_put(stderr, "sigmactl: ", line + 7);
			fputc('\n', stderr);
			rc = 1;
			continue;
		}
		if (!history) {
			ctl_put(stdout, "", line);
			putchar('\n');
			continue;
		}
		if (!evlog_parse_line(line, len, &ev))
			ctl_print_event(&ev);
	}
	fclose(in);
	return rc;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"socket", required_argument, NULL, 'S'},
	    {"config", required_argument, NULL, 'c'},
	    {"job", required_argument, NULL, 'j'},
	    {"node", required_argument, NULL, 'n'},
	    {"since", required_argument, NULL, 's'},
	    {"reason", required_argument, NULL, 'r'},
	    {"json", no_argument, NULL, 'J'},
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},
	    {NULL, 0, NULL, 0},
	};
	const char *sock = NULL, *config = NULL, *node = NULL, *reason = NULL;
	long job = 0, since = -1;
	bool json = false;
	char path[SIGMAD_SOCKET_MAX], req[4096];
	const char *cmd;
	int c, nargs;
	char *const *args;

	/* options before the command; "+" stops at the command word */
	while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		switch (c) {
		case 'S':
			sock = optarg;
			break;
		case 'c':
			config = optarg;
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
	cmd = argv[optind];
	/* command options may follow the command: parse the rest again */
	optind++;
	{
		int sub_argc = argc - optind + 1;
		char **sub = calloc((size_t)sub_argc + 1, sizeof(*sub));
		char *pos[8];
		int npos = 0;

		if (!sub)
			return 70;
		sub[0] = (char *)cmd;
		for (int i = 1; i < sub_argc; i++)
			sub[i] = argv[optind + i - 1];
		optind = 0; /* 0: glibc starts afresh on a new argv */
		for (;;) {
			c = getopt_long(sub_argc, sub, "-h", opts, NULL);
			if (c == -1)
				break;
			switch (c) {
			case 1:
				if (npos < 8)
					pos[npos++] = optarg;
				else {
					fprintf(
					    stderr,
					    "sigmactl: too many arguments\n");
					free(sub);
					return 64;
				}
				break;
			case 'S':
				sock = optarg;
				break;
			case 'c':
				config = optarg;
				break;
			case 'j':
				if (sigma_parse_long(optarg, 1, UINT32_MAX,
						     &job)) {
					fprintf(
					    stderr,
					    "sigmactl: --job: '%s' is not a job id\n",
					    optarg);
					free(sub);
					return 64;
				}
				break;
			case 'n':
				node = optarg;
				break;
			case 's':
				if (ctl_parse_since(optarg, &since)) {
					fprintf(
					    stderr,
					    "sigmactl: --since: '%s' is not epoch seconds, "
					    "N[smhd] or YYYY-MM-DD[THH:MM[:SS]]\n",
					    optarg);
					free(sub);
					return 64;
				}
				break;
			case 'r':
				reason = optarg;
				break;
			case 'J':
				json = true;
				break;
			case 'h':
				ctl_usage(stdout);
				free(sub);
				return 0;
			default:
				ctl_usage(stderr);
				free(sub);
				return 64;
			}
		}
		free(sub);
		args = pos;
		nargs = npos;
		if (ctl_socket_path(sock, config, path, sizeof(path)))
			return 1;
		if (!strcmp(cmd, "status") && nargs == 0)
			snprintf(req, sizeof(req), "status");
		else if (!strcmp(cmd, "spares") && nargs == 0)
			snprintf(req, sizeof(req), "spares");
		else if (!strcmp(cmd, "spares") && nargs == 2 &&
			 (!strcmp(args[0], "add") ||
			  !strcmp(args[0], "remove")))
			snprintf(req, sizeof(req), "spares\t%s\t%s", args[0],
				 args[1]);
		else if (!strcmp(cmd, "history") && nargs == 0) {
			int n = snprintf(req, sizeof(req), "history");

			if (job)
				n += snprintf(req + n, sizeof(req) - (size_t)n,
					      "\tjob=%ld", job);
			if (node && !strchr(node, '\t'))
				n += snprintf(req + n, sizeof(req) - (size_t)n,
					      "\tnode=%.64s", node);
			if (since >= 0)
				snprintf(req + n, sizeof(req) - (size_t)n,
					 "\tsince=%ld", since);
			return ctl_request(path, req, true, json);
		} else if (!strcmp(cmd, "drain") && nargs == 1) {
			if (!reason || !*reason || strpbrk(reason, "\t\n")) {
				fprintf(
				    stderr,
				    "sigmactl: drain needs --reason TEXT (one line)\n");
				return 64;
			}
			if (sigma_snprintf(req, sizeof(req), "drain\t%s\t%s",
					   args[0], reason) < 0) {
				fprintf(stderr, "sigmactl: reason too long\n");
				return 64;
			}
		} else if (!strcmp(cmd, "resume") && nargs == 1)
			snprintf(req, sizeof(req), "resume\t%.200s", args[0]);
		else {
			ctl_usage(stderr);
			return 64;
		}
	}
	return ctl_request(path, req, false, json);
}
