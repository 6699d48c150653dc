/*
 * probe.h - sigma-probe, the node health probe: readings from backends
 * (host sysfs/procfs, NVIDIA GPUs through NVML, known-answer compute
 * checks), thresholds from sigma.conf, one verdict.
 *
 * Each backend adds readings to a report; report.c judges them against
 * their thresholds and formats the summary line, JSON and Prometheus text.
 * Injected readings (inject.c) replace measured ones of the same name.
 */
#ifndef SIGMA_PROBE_H
#define SIGMA_PROBE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "contract.h"

/* verdicts are exit codes: the contract's (lib/contract.h) */
enum probe_verdict {
	PROBE_OK = SIGMA_PROBE_EXIT_OK,
	PROBE_FAIL = SIGMA_PROBE_EXIT_FAIL,
	PROBE_WARN = SIGMA_PROBE_EXIT_WARN,
	PROBE_ERROR = SIGMA_PROBE_EXIT_ERROR,
	PROBE_UNJUDGED = SIGMA_PROBE_EXIT_UNJUDGED,
};

enum probe_level {
	PROBE_QUICK = SIGMA_LEVEL_QUICK,
	PROBE_FULL = SIGMA_LEVEL_FULL,
};

/* how a reading is judged */
enum probe_sense {
	PROBE_INFO = 0, /* shown, never judged */
	PROBE_HIGH_BAD, /* value >= warn/fail is bad */
	PROBE_LOW_BAD,	/* value < warn/fail is bad */
};

#define PROBE_MAX_READINGS 256
#define PROBE_MAX_GPUS	   64
#define PROBE_NODE_MAX	   64

struct probe_conf {
	char inject_dir[PATH_MAX];   /* "" = injection off */
	char sysfs[PATH_MAX];	     /* /sys */
	char procfs[PATH_MAX];	     /* /proc */
	char nvml_library[PATH_MAX]; /* libnvidia-ml.so.1 */
	char state_dir[PATH_MAX];    /* counters between runs, "" = none */
	char ckpt_root[PATH_MAX];    /* free space checked, "" = not */
	char slurm_conf[PATH_MAX];   /* for --drain when SLURM_CONF unset */
	bool gpus;		     /* look for GPUs at all */
	bool drain_resume;	     /* resume nodes this probe drained */
	double temp_warn_c, temp_fail_c;
	double ecc_uncorrected_fail;
	double ecc_corrected_rate_warn; /* per hour */
	double retired_pages_warn, retired_pages_fail;
	double power_spike_ratio;  /* x enforced power limit */
	double power_spike_warn_w; /* when the limit is unknown */
	double mem_avail_warn_mb, mem_avail_fail_mb;
	double disk_free_warn_gb, disk_free_fail_gb;
	long quick_gemm_n, full_gemm_n;
	long full_mem_mb;   /* host memory pattern test */
	long gpu_mem_mb;    /* GPU memory pattern test (full) */
	long power_samples; /* power readings per GPU */
	long warn_confirm;  /* consecutive warnings before one drains */
	/* set from the command line, not sigma.conf: */
	uint64_t gpu_only; /* bit i: probe GPU i only; 0: every GPU */
	bool after_job;	   /* the epilog: the job's heat is not judged */
};

/* true when GPU index i is to be probed */
static inline bool probe_gpu_wanted(const struct probe_conf *conf, int i)
{
	return !conf->gpu_only || (i < 64 && (conf->gpu_only >> i) & 1);
}

struct probe_reading {
	char comp[16]; /* "host", "gpu0", ... */
	char key[32];  /* "temp_c", "ecc_uncorrected", ... */
	double value;
	double warn, fail; /* NAN when there is none */
	int sense;	   /* enum probe_sense */
	int verdict;	   /* PROBE_OK, _WARN, _FAIL or _UNJUDGED */
	bool injected;
	/*
	 * A bad value here says a resource others use is full or busy (shared
	 * storage, memory held by files in tmpfs, a GPU another job holds),
	 * not that the node is at fault: it is judged PROBE_UNJUDGED.
	 */
	bool not_ours;
	const char *unit; /* appended in text: "/h", "" */
};

struct probe_report {
	char node[PROBE_NODE_MAX];
	int level;
	int ngpus;	    /* -1: not looked */
	char gpu_note[160]; /* why there are no GPUs */
	struct probe_reading r[PROBE_MAX_READINGS];
	int n;
	int verdict;
	char error[256]; /* set with PROBE_ERROR */
	uint64_t started_ms, elapsed_ms;
};

/* ---- conf.c ----------------------------------------------------------------
 */
void probe_conf_init(struct probe_conf *conf);
/* Parse a sigma.conf buffer/file over conf; keys "sigmad_*" are skipped. */
int probe_conf_parse_buf(struct probe_conf *conf, const char *buf, size_t len,
			 const char *name, char *err, size_t errlen);
int probe_conf_load(struct probe_conf *conf, const char *path, char *err,
		    size_t errlen);
const char *probe_level_name(int level);

/* ---- report.c --------------------------------------------------------------
 */
void probe_report_init(struct probe_report *rep, const char *node, int level);
/*
 * Add or replace (same comp and key) a reading. Returns it, or NULL when
 * the report is full.
 */
struct probe_reading *probe_add(struct probe_report *rep, const char *comp,
				const char *key, double value, int sense,
				double warn, double fail, const char *unit);
struct probe_reading *probe_find(struct probe_report *rep, const char *comp,
				 const char *key);
/* Judge every reading, set rep->verdict (keeps PROBE_ERROR). */
int probe_judge(struct probe_report *rep);
/* The one-line summary (also the drain reason). */
void probe_summary(const struct probe_report *rep, char *buf, size_t size);
/* The report as one JSON line (docs/probe.md): 0, or -EIO. */
int probe_print_json(const struct probe_report *rep, FILE *out);
/* Prometheus text format (node_exporter textfile collector). */
int probe_format_metrics(const struct probe_report *rep, char *buf,
			 size_t size);
const char *probe_verdict_name(int verdict);
/* The thresholds sigma.conf gives a key (NAN = none), by key name. */
void probe_thresholds(const struct probe_conf *conf, const char *key,
		      int *sense, double *warn, double *fail,
		      const char **unit);

/* ---- host.c: sysfs and procfs ----------------------------------------------
 */
int probe_host(const struct probe_conf *conf, struct probe_report *rep);

/* ---- compute.c: known-answer checks ---------------------------------------
 */
/*
 * A GEMM of integer-valued float matrices (n x n) against its exact
 * integer answer. Returns 0 when every element matches, 1 on a mismatch,
 * -ENOMEM.
 */
int probe_cpu_gemm_kat(long n, char *why, size_t whylen);
/* Write, read back and check patterns over mb MiB. 0 ok, 1 bad, -errno. */
int probe_cpu_memtest(long mb, char *why, size_t whylen);
int probe_compute(const struct probe_conf *conf, struct probe_report *rep);

/* ---- nvml.c: NVIDIA GPUs through NVML, loaded at run time -----------------
 */
int probe_nvml(const struct probe_conf *conf, struct probe_report *rep);

/* ---- state.c: counters kept between runs, for rates -----------------------
 */
/* Turn counters (key ecc_corrected) into ecc_corrected_rate readings. */
int probe_rates(const struct probe_conf *conf, struct probe_report *rep);
/*
 * Record this probe's verdict in the node's run of consecutive warnings
 * (state_dir/NODE.warn) and return the run's length, this probe included:
 * 0 for any other verdict. Without a state directory every warning counts
 * as confirmed (returns conf->warn_confirm).
 */
int probe_warn_streak(const struct probe_conf *conf,
		      const struct probe_report *rep);

/* ---- inject.c -------------------------------------------------------------
 */
/*
 * Apply inject_dir/NODE when it and its directory are root-owned (or owned
 * by trusted_uid) and not group- or world-writable. A refused file is
 * reported in note and ignored. Returns the number of readings applied or
 * -errno for a malformed file.
 */
int probe_inject(const struct probe_conf *conf, struct probe_report *rep,
		 uid_t trusted_uid, char *note, size_t notelen);

/* ---- drain.c: libslurm ----------------------------------------------------
 */
struct probe_drain_result {
	bool changed;
	char what[320]; /* what was done or why nothing was */
};
#ifdef HAVE_SLURM
/*
 * Act on a verdict for node: drain on PROBE_FAIL, PROBE_WARN, PROBE_ERROR
 * (reason = summary), never touching a node drained or down for a reason
 * that is not sigma's; resume (with conf->drain_resume) only a node whose
 * reason this probe level wrote. Returns 0 or -errno.
 */
int probe_drain(const struct probe_conf *conf, const char *node, int level,
		int verdict, const char *reason,
		struct probe_drain_result *res);
#endif
#endif /* SIGMA_PROBE_H */
