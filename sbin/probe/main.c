/*
 * main.c - sigma-probe: check one node's health and say so by exit code.
 *
 *   sigma-probe [--config FILE] [--node NAME] [--ckpt-root DIR] [--json]
 *               [--metrics FILE] [--drain] [--gpus LIST|none] [--after-job]
 *               [-v] [quick|full]
 *
 * Exit 0 healthy, 1 failing, 2 warning, 3 could not run, 4 cannot judge
 * (a resource others use is busy or full: never drains). Run by slurmd as
 * HealthCheckProgram (no arguments, SLURMD_NODENAME set) it is a quick
 * probe that drains the node itself: `sigma-probe --drain quick`.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sigma.h"
#include "probe.h"

#ifndef SIGMA_SYSCONFDIR
#define SIGMA_SYSCONFDIR "/etc"
#endif

struct main_args {
	const char *config;
	bool config_given;
	char node[PROBE_NODE_MAX];
	const char *ckpt_root;
	const char *metrics;
	bool json, drain, after_job;
	uint64_t gpu_only; /* 0: every GPU */
	bool no_gpus;
	int level;
	int verbose;
};

static void main_usage(FILE *out)
{
	fprintf(
	    out,
	    "usage: sigma-probe [--config FILE] [--node NAME] [--ckpt-root DIR]\n"
	    "                   [--json] [--metrics FILE] [--drain] [--gpus LIST|none]\n"
	    "                   [--after-job] [-v] [quick|full]\n"
	    "Check this node's health (host, and GPUs through NVML when present).\n"
	    "Exit status: 0 healthy, 1 failing, 2 warning, 3 the probe could not run,\n"
	    "4 cannot judge (busy or full, not the node's own fault; never drains).\n"
	    "With no arguments under slurmd (SLURMD_NODENAME set) it runs as the\n"
	    "health check: a quick probe with --drain. See sigma-probe(8).\n");
}

/* "0,2,3" (GPU indexes, as Slurm's SLURM_JOB_GPUS) or "none" */
static int main_gpus(const char *s, struct main_args *a)
{
	if (!strcmp(s, "none")) {
		a->no_gpus = true;
		return 0;
	}
	a->gpu_only = 0;
	for (;;) {
		char *end;
		long v;

		if (!isdigit((unsigned char)*s))
			return -EINVAL;
		v = strtol(s, &end, 10);
		if (v < 0 || v >= PROBE_MAX_GPUS)
			return -ERANGE;
		a->gpu_only |= 1ULL << v;
		if (!*end)
			return 0;
		if (*end != ',')
			return -EINVAL;
		s = end + 1;
	}
}

static bool main_node_ok(const char *s)
{
	if (!s[0] || strlen(s) >= PROBE_NODE_MAX)
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && *s != '-' && *s != '_' &&
		    *s != '.')
			return false;
	return true;
}

/* Returns 0, or PROBE_ERROR after a message; 1 after --help/--version. */
static int main_parse(int argc, char **argv, struct main_args *a)
{
	static const struct option opts[] = {
	    {"config", required_argument, NULL, 'c'},
	    {"node", required_argument, NULL, 'n'},
	    {"ckpt-root", required_argument, NULL, 'r'},
	    {"json", no_argument, NULL, 'j'},
	    {"metrics", required_argument, NULL, 'm'},
	    {"drain", no_argument, NULL, 'd'},
	    {"gpus", required_argument, NULL, 'g'},
	    {"after-job", no_argument, NULL, 'a'},
	    {"verbose", no_argument, NULL, 'v'},
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},
	    {NULL, 0, NULL, 0},
	};
	const char *node = NULL;
	int c;

	memset(a, 0, sizeof(*a));
	a->level = PROBE_QUICK;
	/* slurmd's HealthCheckProgram: no arguments, SLURMD_NODENAME set */
	if (argc == 1 && getenv("SLURMD_NODENAME"))
		a->drain = true;
	while ((c = getopt_long(argc, argv, "c:n:r:jm:dvhV", opts, NULL)) !=
	       -1) {
		switch (c) {
		case 'c':
			a->config = optarg;
			a->config_given = true;
			break;
		case 'n':
			node = optarg;
			break;
		case 'r':
			if (optarg[0] != '/') {
				fprintf(
				    stderr,
				    "sigma-probe: --ckpt-root %s: expected an absolute path\n",
				    optarg);
				return PROBE_ERROR;
			}
			a->ckpt_root = optarg;
			break;
		case 'j':
			a->json = true;
			break;
		case 'm':
			a->metrics = optarg;
			break;
		case 'd':
			a->drain = true;
			break;
		case 'g':
			if (main_gpus(optarg, a) < 0) {
				fprintf(
				    stderr,
				    "sigma-probe: --gpus %s: expected GPU indexes 0-%d separated by commas, or none\n",
				    optarg, PROBE_MAX_GPUS - 1);
				return PROBE_ERROR;
			}
			break;
		case 'a':
			a->after_job = true;
			break;
		case 'v':
			a->verbose++;
			break;
		case 'h':
			main_usage(stdout);
			return 1;
		case 'V':
			printf("sigma-probe %s (git %s)\n", PACKAGE_VERSION,
			       SIGMA_GIT_REVISION);
			return 1;
		default:
			main_usage(stderr);
			return PROBE_ERROR;
		}
	}
	if (optind < argc) {
		if (!strcmp(argv[optind], "quick")) {
			a->level = PROBE_QUICK;
		} else if (!strcmp(argv[optind], "full")) {
			a->level = PROBE_FULL;
		} else {
			fprintf(
			    stderr,
			    "sigma-probe: level '%s': expected quick or full\n",
			    argv[optind]);
			return PROBE_ERROR;
		}
		if (optind + 1 < argc) {
			fprintf(stderr,
				"sigma-probe: unexpected argument '%s'\n",
				argv[optind + 1]);
			return PROBE_ERROR;
		}
	}
	if (!a->config) {
		a->config = getenv("SIGMA_CONF");
		a->config_given = a->config != NULL;
	}
	if (!node)
		node = getenv("SLURMD_NODENAME");
	if (node) {
		sigma_strlcpy(a->node, node, sizeof(a->node));
	} else {
		if (gethostname(a->node, sizeof(a->node)) < 0)
			sigma_strlcpy(a->node, "localhost", sizeof(a->node));
		a->node[sizeof(a->node) - 1] = '\0';
		a->node[strcspn(a->node, ".")] = '\0';
	}
	if (!main_node_ok(a->node)) {
		fprintf(
		    stderr,
		    "sigma-probe: node name '%s': expected letters, digits, '-', '_' or '.'\n",
		    a->node);
		return PROBE_ERROR;
	}
	return 0;
}

/* Measure: every backend, then rates and injection, then the verdict. */
static void main_probe(const struct probe_conf *conf, struct probe_report *rep)
{
	char note[600];
	int rc;

	probe_nvml(conf, rep);
	probe_host(conf, rep);
	if (probe_compute(conf, rep) < 0) {
		rep->verdict = PROBE_ERROR;
		return;
	}
	probe_rates(conf, rep);
	rc = probe_inject(conf, rep, 0, note, sizeof(note));
	if (note[0])
		sigma_warn("%s", note);
	if (rc < 0) {
		sigma_strlcpy(rep->error, note, sizeof(rep->error));
		rep->verdict = PROBE_ERROR;
		return;
	}
	if (rc > 0)
		sigma_info("%d injected reading%s from %s/%s", rc,
			   rc == 1 ? "" : "s", conf->inject_dir, rep->node);
	probe_judge(rep);
}

#ifdef HAVE_SLURM
/*
 * Whether --drain acts on this verdict. A warning drains only once
 * warn_confirm probes in a row found one; before that it is reported and
 * the node left as it is. "Cannot judge" never drains, nor resumes.
 */
static bool main_confirmed(const struct probe_conf *conf,
			   const struct probe_report *rep)
{
	int streak = probe_warn_streak(conf, rep);

	if (rep->verdict == PROBE_UNJUDGED) {
		sigma_warn("cannot judge this node (busy or full, not its own fault): node state not changed");
		return false;
	}
	if (rep->verdict != PROBE_WARN || streak >= conf->warn_confirm)
		return true;
	sigma_warn("warning %d of the %ld in a row that drain: not drained yet",
		   streak, conf->warn_confirm);
	return false;
}

static void main_drain(const struct probe_conf *conf,
		       const struct probe_report *rep, const char *summary)
{
	struct probe_drain_result res;

	if (probe_drain(conf, rep->node, rep->level, rep->verdict, summary,
			&res) < 0)
		sigma_error("--drain: %s", res.what);
	else if (res.changed)
		sigma_warn("%s", res.what);
	else
		sigma_info("%s", res.what);
}
#endif

static void main_metrics(const struct probe_report *rep, const char *path)
{
	static char buf[1 << 16];
	int n = probe_format_metrics(rep, buf, sizeof(buf));
	int rc;

	if (n < 0) {
		sigma_error("--metrics: too many readings for the buffer");
		return;
	}
	rc = sigma_file_write_atomic(path, buf, (size_t)n, 0644);
	if (rc < 0)
		sigma_error("--metrics %s: %s", path, strerror(-rc));
}

int main(int argc, char **argv)
{
	static struct probe_report rep;
	struct probe_conf conf;
	struct main_args args;
	char err[600], summary[1024];
	const char *config;
	int rc;

	sigma_log_init("sigma-probe", SIGMA_LOG_WARN);
	rc = main_parse(argc, argv, &args);
	if (rc == 1)
		return 0;
	if (rc)
		return PROBE_ERROR;
	sigma_log_set_level(SIGMA_LOG_WARN + args.verbose);
	/* CUDA numbers devices like NVML does (by PCI bus) */
	setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID", 0);

	probe_conf_init(&conf);
	probe_report_init(&rep, args.node, args.level);
	config =
	    args.config ? args.config : SIGMA_SYSCONFDIR "/sigma/sigma.conf";
	if ((args.config_given || access(config, F_OK) == 0) &&
	    probe_conf_load(&conf, config, err, sizeof(err)) < 0) {
		sigma_strlcpy(rep.error, err, sizeof(rep.error));
		rep.verdict = PROBE_ERROR;
	}
	if (args.ckpt_root)
		sigma_strlcpy(conf.ckpt_root, args.ckpt_root,
			      sizeof(conf.ckpt_root));
	conf.gpu_only = args.gpu_only;
	conf.after_job = args.after_job;
	if (args.no_gpus)
		conf.gpus = false;
	if (rep.verdict != PROBE_ERROR)
		main_probe(&conf, &rep);
	rep.elapsed_ms = sigma_now_ms() - rep.started_ms;

	probe_summary(&rep, summary, sizeof(summary));
	if (args.json) {
		if (probe_print_json(&rep, stdout))
			sigma_error("--json: the report could not be written");
	} else
		printf("%s\n", summary);
	fflush(stdout);
	if (args.metrics)
		main_metrics(&rep, args.metrics);
	if (args.drain) {
#ifdef HAVE_SLURM
		if (main_confirmed(&conf, &rep))
			main_drain(&conf, &rep, summary);
#else
		sigma_error("--drain: built without Slurm");
		return PROBE_ERROR;
#endif
	}
	return rep.verdict;
}
