/*
 * compute.c - known-answer compute checks: a GEMM whose exact answer is
 * known, on the CPU and (built with CUDA) on each GPU, and a memory pattern
 * test (host memory in full probes, a slice of each GPU's memory too).
 *
 * The matrices hold small integers, so every partial sum is an integer
 * below 2^24 and float arithmetic is exact in any order: a result that
 * differs from the integer reference by any amount is a fault, never
 * rounding.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sigma.h"
#include "probe.h"
#include "probe_kat.h"

/* element generators shared with the CUDA check (probe_kat.h) */
int probe_cpu_gemm_kat(long n, char *why, size_t whylen)
{
	float *a, *b, *c;
	int rc = 0;

	if (n < 1 || n > 4096)
		return sigma_set_err(why, whylen, ERANGE, "gemm size %ld", n);
	a = malloc(sizeof(float) * (size_t)(n * n));
	b = malloc(sizeof(float) * (size_t)(n * n));
	c = calloc((size_t)(n * n), sizeof(float));
	if (!a || !b || !c) {
		rc = sigma_set_err(why, whylen, ENOMEM, "no memory for gemm");
		goto out_free;
	}
	for (long i = 0; i < n; i++)
		for (long k = 0; k < n; k++) {
			a[i * n + k] = (float)SIGMA_KAT_A(i, k);
			b[i * n + k] = (float)SIGMA_KAT_B(i, k);
		}
	/* the computation under test: c = a * b, in float */
	for (long i = 0; i < n; i++)
		for (long k = 0; k < n; k++) {
			float aik = a[i * n + k];

			for (long j = 0; j < n; j++)
				c[i * n + j] += aik * b[k * n + j];
		}
	/* the reference: exact integers, another loop order */
	for (long i = 0; i < n && !rc; i++)
		for (long j = 0; j < n; j++) {
			int64_t want = 0;

			for (long k = 0; k < n; k++)
				want += (int64_t)SIGMA_KAT_A(i, k) *
					SIGMA_KAT_B(k, j);
			if (c[i * n + j] != (float)want) {
				snprintf(
				    why, whylen,
				    "cpu gemm %ldx%ld: c[%ld][%ld]=%g, expected %lld",
				    n, n, i, j, (double)c[i * n + j],
				    (long long)want);
				rc = 1;
				break;
			}
		}
out_free:
	free(a);
	free(b);
	free(c);
	return rc;
}

int probe_cpu_memtest(long mb, char *why, size_t whylen)
{
	size_t words = (size_t)mb * (1 << 20) / sizeof(uint64_t);
	volatile uint64_t *m;
	int rc = 0;

	if (mb <= 0)
		return 0;
	m = malloc(words * sizeof(uint64_t));
	if (!m)
		return sigma_set_err(
		    why, whylen, ENOMEM,
		    "cannot allocate %ld MiB for the memory test", mb);
	for (int pass = 0; pass < 2 && !rc; pass++) {
		uint64_t flip = pass ? ~(uint64_t)0 : 0;

		for (size_t i = 0; i < words; i++)
			m[i] = SIGMA_KAT_PATTERN(i) ^ flip;
		for (size_t i = 0; i < words; i++) {
			if (m[i] != (SIGMA_KAT_PATTERN(i) ^ flip)) {
				snprintf(
				    why, whylen,
				    "host memory test: word %zu of %zu differs (pass %d)",
				    i, words, pass);
				rc = 1;
				break;
			}
		}
	}
	free((void *)m);
	return rc;
}

static struct probe_reading *compute_add(const struct probe_conf *conf,
					 struct probe_report *rep,
					 const char *comp, const char *key,
					 bool ok)
{
	double warn, fail;
	const char *unit;
	int sense;

	probe_thresholds(conf, key, &sense, &warn, &fail, &unit);
	return probe_add(rep, comp, key, ok ? 1 : 0, sense, warn, fail, unit);
}

int probe_compute(const struct probe_conf *conf, struct probe_report *rep)
{
	long n =
	    rep->level == PROBE_FULL ? conf->full_gemm_n : conf->quick_gemm_n;
	char why[256] = "";
	int rc;

	rc = probe_cpu_gemm_kat(n, why, sizeof(why));
	if (rc < 0)
		return sigma_set_err(rep->error, sizeof(rep->error), -rc, "%s",
				     why);
	if (rc > 0)
		sigma_error("%s", why);
	compute_add(conf, rep, "host", "compute", rc == 0);
	if (rep->level == PROBE_FULL && conf->full_mem_mb > 0) {
		rc = probe_cpu_memtest(conf->full_mem_mb, why, sizeof(why));
		if (rc < 0)
			return sigma_set_err(rep->error, sizeof(rep->error),
					     -rc, "%s", why);
		if (rc > 0)
			sigma_error("%s", why);
		compute_add(conf, rep, "host", "memtest", rc == 0);
	}
	/* the same known answer on each GPU (built with CUDA) */
	for (int g = 0; g < rep->ngpus; g++) {
		char comp[16];
		long mem = rep->level == PROBE_FULL ? conf->gpu_mem_mb : 0;
		struct probe_reading *r;

		if (!probe_gpu_wanted(conf, g))
			continue; /* not the job's */
		snprintf(comp, sizeof(comp), "gpu%d", g);
		rc = sigma_probe_kat_gpu(g, (int)n, mem, why, sizeof(why));
		if (rc == SIGMA_KAT_UNAVAILABLE)
			break; /* not built with CUDA, or no CUDA device */
		if (rc == SIGMA_KAT_BUSY) {
			/* another job holds it: no verdict on its compute */
			sigma_warn("%s: cannot judge: %s", comp, why);
			r = compute_add(conf, rep, comp, "compute", false);
			if (r)
				r->not_ours = true;
			continue;
		}
		if (rc < 0) {
			sigma_error("%s: %s", comp, why);
			compute_add(conf, rep, comp, "compute", false);
			continue;
		}
		if (rc & SIGMA_KAT_GEMM_BAD)
			sigma_error("%s: %s", comp, why);
		compute_add(conf, rep, comp, "compute",
			    !(rc & SIGMA_KAT_GEMM_BAD));
		if (mem > 0)
			compute_add(conf, rep, comp, "memtest",
				    !(rc & SIGMA_KAT_MEM_BAD));
	}
	return 0;
}
