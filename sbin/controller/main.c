/*
 * sigmad - sigma's controller daemon: hot spares, requeue on failure, moves
 * on early warning, return to service. See sigmad(8) and docs/sigmad.md.
 *
 * main reads straight down: settings, command line, daemon, run, teardown
 * in reverse. Startup errors reach the shell: the parent waits on a pipe
 * for the daemon to say it is up.
 */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "conf.h"
#include "ctl.h"
#include "server.h"
#include "sigma.h"
#include "slurm_api.h"

#ifndef SIGMA_SYSCONFDIR
#define SIGMA_SYSCONFDIR "/etc"
#endif

static volatile sig_atomic_t got_term;
static volatile sig_atomic_t got_hup;

static void on_signal(int sig)
{
	if (sig == SIGHUP)
		got_hup = 1;
	else
		got_term = 1;
}

struct sigmad_args {
	const char *config;
	const char *pidfile;
	const char *logfile;
	bool foreground;
	bool syslog;
};

static void sigmad_usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: sigmad [--config FILE] [--pidfile FILE] [--logfile FILE]\n"
	    "              [--syslog] [--foreground] [--version] [--help]\n");
}

static int sigmad_args(int argc, char **argv, struct sigmad_args *a)
{
	static const struct option opts[] = {
	    {"config", required_argument, NULL, 'c'},
	    {"pidfile", required_argument, NULL, 'p'},
	    {"logfile", required_argument, NULL, 'l'},
	    {"syslog", no_argument, NULL, 's'},
	    {"foreground", no_argument, NULL, 'F'},
	    {"version", no_argument, NULL, 'V'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int c;

	a->config = SIGMA_SYSCONFDIR "/sigma/sigma.conf";
	while ((c = getopt_long(argc, argv, "c:p:l:sFVh", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			a->config = optarg;
			break;
		case 'p':
			a->pidfile = optarg;
			break;
		case 'l':
			a->logfile = optarg;
			break;
		case 's':
			a->syslog = true;
			break;
		case 'F':
			a->foreground = true;
			break;
		case 'V':
			printf("sigmad %s (git %s)\n", PACKAGE_VERSION,
			       SIGMA_GIT_REVISION);
			exit(0);
		case 'h':
			sigmad_usage(stdout);
			exit(0);
		default:
			sigmad_usage(stderr);
			return -EINVAL;
		}
	}
	if (optind != argc) {
		sigmad_usage(stderr);
		return -EINVAL;
	}
	return 0;
}

/*
 * Detach: the caller returns in the daemon; the original process stays in
 * sigmad_wait_child until the daemon reports through *report.
 */
static int sigmad_daemonize(int *report)
{
	int fds[2];
	pid_t pid;
	char msg[512];
	ssize_t n;

	if (pipe2(fds, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid > 0) {
		/* the shell's process: wait for "ok" or the error text */
		close(fds[1]);
		n = read(fds[0], msg, sizeof(msg) - 1);
		if (n > 0 && !strncmp(msg, "ok", 2))
			_exit(0);
		if (n > 0) {
			msg[n] = '\0';
			fprintf(stderr, "sigmad: %s\n", msg);
		} else {
			fprintf(stderr,
				"sigmad: the daemon died during startup\n");
		}
		_exit(1);
	}
	close(fds[0]);
	if (setsid() < 0)
		return -errno;
	pid = fork(); /* not a session leader: never gets a terminal again */
	if (pid < 0)
		return -errno;
	if (pid > 0)
		_exit(0);
	umask(022);
	*report = fds[1];
	return 0;
}

static void sigmad_report(int *report, const char *msg)
{
	if (*report < 0)
		return;
	if (write(*report, msg, strlen(msg)) < 0) {
		/* the parent is gone: nothing to tell */
	}
	close(*report);
	*report = -1;
}

static int sigmad_pidfile_write(const char *path)
{
	char buf[32], *old = NULL;
	size_t len;
	long pid;

	if (sigma_file_read(path, 64, &old, &len) == 0) {
		old[strcspn(old, "\n")] = '\0';
		if (!sigma_parse_long(old, 1, __INT_MAX__, &pid) &&
		    kill((pid_t)pid, 0) == 0 && pid != getpid()) {
			free(old);
			return -EEXIST;
		}
		free(old);
	}
	snprintf(buf, sizeof(buf), "%ld\n", (long)getpid());
	return sigma_file_write_atomic(path, buf, strlen(buf), 0644);
}

static void sigmad_stdio_null(void)
{
	int fd = open("/dev/null", O_RDWR | O_CLOEXEC);

	if (fd < 0)
		return;
	dup2(fd, 0);
	dup2(fd, 1);
	dup2(fd, 2);
	close(fd);
}

static void sigmad_loop(struct ctl *ctl, struct srv *srv,
			struct sigmad_config *cfg, const char *config_path)
{
	uint64_t next = 0;
	char err[512];

	while (!got_term) {
		uint64_t now = sigma_now_ms();

		if (got_hup) {
			struct sigmad_config fresh = *cfg;

			got_hup = 0;
			if (sigmad_config_load(&fresh, config_path, err,
					       sizeof(err)))
				sigma_error(
				    "reload refused, keeping the running settings: %s",
				    err);
			else if (strcmp(fresh.socket_path, cfg->socket_path))
				sigma_error(
				    "reload refused: sigmad_socket changes need a restart");
			else {
				*cfg = fresh;
				sigma_log_set_level(cfg->log_level);
				ctl_reload(ctl, cfg);
				sigma_info("reloaded %s", config_path);
				next = 0;
			}
		}
		if (now >= next) {
			int rc = ctl_tick(ctl);

			if (rc)
				sigma_warn(
				    "cannot see the cluster this round: %s",
				    strerror(-rc));
			next = sigma_now_ms() +
			       (uint64_t)cfg->poll_interval_s * 1000;
			continue;
		}
		/* no client can hold this: see server.h */
		srv_run(srv, ctl, (int)(next - now));
	}
}

int main(int argc, char **argv)
{
	struct sigmad_args args = {0};
	struct sigmad_config cfg;
	struct sigaction sa = {0};
	struct ctl *ctl = NULL;
	uint32_t slurm_user = 0;
	bool private_jobs = true;
	struct srv *srv = NULL;
	char err[512], msg[640];
	int report = -1, rc;

	/* 1. settings and command line */
	if (sigmad_args(argc, argv, &args))
		return 64;
	sigma_log_init("sigmad", SIGMA_LOG_INFO);
	sigmad_config_init(&cfg);
	if (sigmad_config_load(&cfg, args.config, err, sizeof(err))) {
		fprintf(stderr, "sigmad: %s\n", err);
		return 1;
	}
	sigma_log_set_level(cfg.log_level);

	/* 2. detach (or not), then everything that can fail at startup */
	if (!args.foreground && (rc = sigmad_daemonize(&report))) {
		fprintf(stderr, "sigmad: cannot detach: %s\n", strerror(-rc));
		return 1;
	}
	if (args.logfile && (rc = sigma_log_open_file(args.logfile))) {
		snprintf(msg, sizeof(msg), "log file %s: %s", args.logfile,
			 strerror(-rc));
		goto out_fail;
	}
	if (args.syslog)
		sigma_log_use_syslog(true);
	if (args.pidfile && (rc = sigmad_pidfile_write(args.pidfile))) {
		snprintf(msg, sizeof(msg), "pid file %s: %s", args.pidfile,
			 rc == -EEXIST ? "another sigmad is running"
				       : strerror(-rc));
		goto out_fail;
	}
	ctl_slurm_init();
	if (ctl_slurm_user(&slurm_user, &private_jobs))
		sigma_warn(
		    "cannot learn SlurmUser and PrivateData: only root may change things, and users see only their own jobs");
	if ((rc = ctl_create(&ctl, &cfg, args.config))) {
		(void)sigma_snprintf(
		    msg, sizeof(msg),
		    "cannot start the controller (state %s): %s", cfg.state_dir,
		    strerror(-rc));
		goto out_slurm;
	}
	if ((rc = srv_create(&srv, cfg.socket_path, (uid_t)slurm_user,
			     private_jobs))) {
		snprintf(msg, sizeof(msg), "socket %s: %s", cfg.socket_path,
			 rc == -EADDRINUSE ? "another sigmad answers there"
					   : strerror(-rc));
		goto out_ctl;
	}
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	sigma_info("started (pid %ld, config %s, socket %s, event log %s)",
		   (long)getpid(), args.config, cfg.socket_path,
		   ctl_event_log(ctl)->path);
	if (!args.foreground)
		sigmad_stdio_null();
	sigmad_report(&report, "ok");

	/* 3. run */
	sigmad_loop(ctl, srv, &cfg, args.config);

	/* 4. teardown, in reverse */
	sigma_info("stopping");
	srv_destroy(srv);
	ctl_destroy(ctl);
	ctl_slurm_fini();
	if (args.pidfile)
		unlink(args.pidfile);
	sigma_log_close();
	return 0;

out_ctl:
	ctl_destroy(ctl);
out_slurm:
	ctl_slurm_fini();
	if (args.pidfile)
		unlink(args.pidfile);
out_fail:
	sigma_error("%s", msg);
	if (report >= 0)
		sigmad_report(&report, msg);
	else
		fprintf(stderr, "sigmad: %s\n", msg);
	return 1;
}
