/*
 * run_manifest.c - the run manifest of a checkpoint directory
 * (trainer/ckpt/run.c run_read): the input is the bytes of DIR/run.
 *
 * FUZZ_SOURCES: trainer/ckpt/run.c lib/seal.c lib/str.c lib/log.c lib/file.c
 * FUZZ_LIBS: -lxxhash
 *
 * Invariants:
 * - run_read accepts exactly when an independent reader of the format
 *   (docs/checkpoint-format.md, "Runs": "sigma-run 1 ID JOB\n", ID
 *   "local" or a job id, a dash and 16 lowercase hex digits, JOB digits
 *   or "-", nothing after the line) does, and then returns those fields;
 *   anything else is -EBADMSG with a message;
 * - what it accepts, run_write writes back byte for byte.
 */
#include "fuzz.h"

#include "run.h"

static char dir[512], path[600];

FUZZ_INITIALIZE_QUIET

static bool all_of(const char *s, size_t n, const char *set)
{
	if (n == 0)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!strchr(set, s[i]) || s[i] == '\0')
			return false;
	return true;
}

/* the independent reader */
static bool manifest_ok(const uint8_t *d, size_t n, char *id, char *job)
{
	const char *s = (const char *)d, *sp1, *sp2, *dash;
	size_t il, jl;

	if (n < 12 || n >= RUN_LINE_MAX || memcmp(s, "sigma-run 1 ", 12) ||
	    s[n - 1] != '\n' || memchr(s, '\0', n))
		return false;
	sp1 = memchr(s + 12, ' ', n - 12);
	if (!sp1)
		return false;
	sp2 = sp1 + 1;
	il = (size_t)(sp1 - (s + 12));
	jl = n - 1 - (size_t)(sp2 - s);
	if (il >= RUN_ID_MAX || jl >= RUN_JOB_MAX)
		return false;
	memcpy(id, s + 12, il), id[il] = '\0';
	memcpy(job, sp2, jl), job[jl] = '\0';
	dash = strrchr(id, '-');
	if (!dash || strlen(dash + 1) != 16 ||
	    !all_of(dash + 1, 16, "0123456789abcdef"))
		return false;
	if (!((dash - id == 5 && !strncmp(id, "local", 5)) ||
	      (dash - id <= 20 && all_of(id, (size_t)(dash - id), "0123456789"))))
		return false;
	return !strcmp(job, "-") ||
	       (jl <= 20 && all_of(job, jl, "0123456789"));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char id[RUN_LINE_MAX], job[RUN_LINE_MAX], err[1024];
	struct run_manifest rm;
	bool ok;
	int rc;

	if (!dir[0]) {
		snprintf(dir, sizeof(dir), "%s", fuzz_scratch());
		snprintf(path, sizeof(path), "%s/%s", dir, RUN_FILE);
	}
	fuzz_write_file(path, data, size);
	chmod(path, 0644);
	ok = manifest_ok(data, size, id, job);
	rc = run_read(dir, &rm, err, sizeof(err));
	if (!ok) {
		CHECK(rc == -EBADMSG);
		CHECK_ERR(err, sizeof(err));
		return 0;
	}
	CHECK(rc == 0);
	CHECK(!strcmp(rm.id, id) && !strcmp(rm.job, job));
	/* written back: the same bytes */
	CHECK(run_write(dir, &rm, err, sizeof(err)) == 0);
	{
		char back[RUN_LINE_MAX + 1];
		int fd = open(path, O_RDONLY);
		ssize_t k = fd >= 0 ? read(fd, back, sizeof(back)) : -1;

		if (fd >= 0)
			close(fd);
		CHECK(k == (ssize_t)size && !memcmp(back, data, size));
	}
	return 0;
}
