/*
 * host.c - the host through sysfs and procfs: thermal zones, EDAC memory
 * controllers (corrected and uncorrected errors), available memory (and
 * what tmpfs files hold of it), and the free space of the checkpoint root,
 * which users fill and so is never the node's fault. Roots are configurable so that the
 * unit tests run against a fake tree.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include "sigma.h"
#include "probe.h"

/*
 * Read a small kernel file whole. procfs files report size 0, so this
 * reads to end of file rather than trusting fstat.
 */
static int host_read_small(const char *path, char *buf, size_t size)
{
	size_t used = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	while (used + 1 < size) {
		ssize_t n = read(fd, buf + used, size - 1 - used);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;

			close(fd);
			return -e;
		}
		if (n == 0)
			break;
		used += (size_t)n;
	}
	close(fd);
	buf[used] = '\0';
	return (int)used;
}

/* one number from a small sysfs file */
static int host_read_number(const char *path, double *out)
{
	char buf[128];
	int rc;

	rc = host_read_small(path, buf, sizeof(buf));
	if (rc < 0)
		return rc;
	buf[strcspn(buf, "\n")] = '\0';
	return sigma_parse_double(buf, -1e18, 1e18, out);
}

static struct probe_reading *host_add(const struct probe_conf *conf,
				      struct probe_report *rep,
				      const char *key, double value)
{
	double warn, fail;
	const char *unit;
	int sense;

	probe_thresholds(conf, key, &sense, &warn, &fail, &unit);
	return probe_add(rep, "host", key, value, sense, warn, fail, unit);
}

/* the hottest thermal zone, in degrees C */
static void host_thermal(const struct probe_conf *conf,
			 struct probe_report *rep)
{
	char dir[PATH_MAX + 32], path[PATH_MAX + 600];
	double max = NAN;
	struct dirent *de;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/class/thermal", conf->sysfs);
	d = opendir(dir);
	if (!d)
		return;
	while ((de = readdir(d))) {
		double milli;

		if (strncmp(de->d_name, "thermal_zone", 12))
			continue;
		snprintf(path, sizeof(path), "%s/%s/temp", dir, de->d_name);
		/* a zone that cannot be read (or reads < 0) is skipped */
		if (host_read_number(path, &milli) < 0 || milli < 0)
			continue;
		if (isnan(max) || milli / 1000.0 > max)
			max = milli / 1000.0;
	}
	closedir(d);
	if (!isnan(max))
		host_add(conf, rep, "temp_c", max);
}

/* sums of ce_count and ue_count over the EDAC memory controllers */
static void host_edac(const struct probe_conf *conf, struct probe_report *rep)
{
	char dir[PATH_MAX + 32], path[PATH_MAX + 600];
	double ce = 0, ue = 0;
	bool any = false;
	struct dirent *de;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/devices/system/edac/mc", conf->sysfs);
	d = opendir(dir);
	if (!d)
		return;
	while ((de = readdir(d))) {
		double v;

		if (strncmp(de->d_name, "mc", 2))
			continue;
		snprintf(path, sizeof(path), "%s/%s/ce_count", dir, de->d_name);
		if (host_read_number(path, &v) == 0 && v >= 0) {
			ce += v;
			any = true;
		}
		snprintf(path, sizeof(path), "%s/%s/ue_count", dir, de->d_name);
		if (host_read_number(path, &v) == 0 && v >= 0) {
			ue += v;
			any = true;
		}
	}
	closedir(d);
	if (!any)
		return;
	host_add(conf, rep, "ecc_corrected", ce);
	host_add(conf, rep, "ecc_uncorrected", ue);
}

/* one "Name:   N kB" line of meminfo, in MiB; NAN when absent */
static double host_meminfo_mb(const char *buf, const char *name)
{
	const char *p = strstr(buf, name);
	unsigned long long kb;

	if (!p || sscanf(p + strlen(name), "%llu", &kb) != 1)
		return NAN;
	return (double)kb / 1024.0;
}

/* users' processes are jobs' (uids below this are the system's) */
#define HOST_FIRST_USER_UID 1000

/*
 * Memory held now by the processes of users (jobs that run on the node
 * beside the one probed, or left behind), in MiB: the sum of their
 * resident sizes (VmRSS), read from procfs. Shared pages count once per
 * process, so this errs high, towards "cannot judge", never towards a
 * fault.
 */
static double host_jobs_mb(const struct probe_conf *conf)
{
	char path[PATH_MAX + 300], buf[4096];
	struct dirent *e;
	double mb = 0;
	DIR *d = opendir(conf->procfs);

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		unsigned long uid;
		const char *p;

		if (e->d_name[0] < '1' || e->d_name[0] > '9' ||
		    strspn(e->d_name, "0123456789") != strlen(e->d_name))
			continue;
		snprintf(path, sizeof(path), "%s/%s/status", conf->procfs,
			 e->d_name);
		if (host_read_small(path, buf, sizeof(buf)) < 0 ||
		    !(p = strstr(buf, "\nUid:")) ||
		    sscanf(p + 5, "%lu", &uid) != 1 ||
		    uid < HOST_FIRST_USER_UID)
			continue;
		mb += isnan(host_meminfo_mb(buf, "VmRSS:"))
			  ? 0
			  : host_meminfo_mb(buf, "VmRSS:");
	}
	closedir(d);
	return mb;
}

/*
 * MemAvailable, in MiB. Memory held by files in tmpfs (/dev/shm, a tmpfs
 * /tmp: meminfo's Shmem), or by the processes of other jobs on the node,
 * is not available, but it is the jobs', not the node's: when the node
 * would be healthy with it, a low reading cannot be judged.
 */
static void host_meminfo(const struct probe_conf *conf,
			 struct probe_report *rep)
{
	char path[PATH_MAX + 16], buf[8192];
	double avail, shmem, jobs = 0;
	struct probe_reading *r;

	snprintf(path, sizeof(path), "%s/meminfo", conf->procfs);
	if (host_read_small(path, buf, sizeof(buf)) < 0)
		return;
	avail = host_meminfo_mb(buf, "MemAvailable:");
	if (isnan(avail))
		return;
	r = host_add(conf, rep, "mem_avail_mb", avail);
	shmem = host_meminfo_mb(buf, "Shmem:");
	if (isnan(shmem))
		shmem = 0;
	else
		host_add(conf, rep, "shmem_mb", shmem);
	if (r && avail < conf->mem_avail_warn_mb) {
		jobs = host_jobs_mb(conf);
		host_add(conf, rep, "jobs_mem_mb", jobs);
	}
	if (r && avail < conf->mem_avail_warn_mb &&
	    avail + shmem + jobs >= conf->mem_avail_warn_mb)
		r->not_ours = true;
}

/*
 * The free space of the checkpoint root. Users fill it (and on shared
 * storage, users of every node): it is reported, never the node's fault.
 */
static void host_disk(const struct probe_conf *conf, struct probe_report *rep)
{
	struct probe_reading *r;
	struct statvfs sv;
	double gb = 0;

	if (!conf->ckpt_root[0])
		return;
	if (statvfs(conf->ckpt_root, &sv) < 0)
		sigma_warn("ckpt_root %s: %s", conf->ckpt_root,
			   strerror(errno));
	else
		gb = (double)sv.f_bavail * (double)sv.f_frsize / 1e9;
	r = host_add(conf, rep, "disk_free_gb", gb);
	if (r)
		r->not_ours = true;
}

int probe_host(const struct probe_conf *conf, struct probe_report *rep)
{
	host_thermal(conf, rep);
	host_edac(conf, rep);
	host_meminfo(conf, rep);
	host_disk(conf, rep);
	return 0;
}
