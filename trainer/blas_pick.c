/*
 * blas_pick.c - the BLAS kernel that matches the CPU (blas_pick.h).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sigma.h"
#include "blas_core.h"
#include "blas_pick.h"

#define ENV_PICK   "SIGMA_BLAS_PICK"   /* off: leave the library's choice */
#define ENV_PICKED "SIGMA_BLAS_PICKED" /* set across the exec: the kernel
					* the library had chosen */
#define ENV_ASIF   "SIGMA_BLAS_ASIF"   /* set across the exec of as-if */
#define AS_IF	   "as-if:"

static bool pick_off(int argc, char **argv)
{
	const char *e = getenv(ENV_PICK);

	if (e && !strcmp(e, "off"))
		return true;
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--blas-pick=off") ||
		    (!strcmp(argv[i], "--blas-pick") && i + 1 < argc &&
		     !strcmp(argv[i + 1], "off")))
			return true;
	return false;
}

/*
 * "sigma-train sgemm --check" under kernel core, in a child: 0 when it
 * passed, else -1 with why (a failed check, a signal such as SIGILL).
 */
static int check_core(const char *core, char *why, size_t len)
{
	char *const args[] = { "sigma-train", "sgemm", "--check", NULL };
	int st = 0;
	pid_t pid = fork();

	if (pid < 0)
		return sigma_set_err(why, len, errno, "fork: %s",
				     strerror(errno));
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);

		if (null >= 0)
			dup2(null, STDOUT_FILENO);
		setenv("OPENBLAS_CORETYPE", core, 1);
		setenv(ENV_PICK, "off", 1);
		execv("/proc/self/exe", args);
		_exit(127);
	}
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	if (WIFSIGNALED(st))
		snprintf(why, len, "the check died of %s",
			 strsignal(WTERMSIG(st)));
	else
		snprintf(why, len, "the check exited %d", WEXITSTATUS(st));
	return -1;
}

/*
 * SIGMA_BLAS_PICK=as-if:CORE (for tests and demonstrations): start as if
 * the library had chosen CORE itself, as it does on a CPU newer than it
 * knows. The process executes itself once with OPENBLAS_CORETYPE=CORE,
 * and that start is then judged as the library's choice.
 */
static bool as_if(char **argv)
{
	const char *e = getenv(ENV_PICK), *was = getenv(ENV_ASIF);

	if (was)
		return !strcmp(was, getenv("OPENBLAS_CORETYPE") ?: "");
	if (!e || strncmp(e, AS_IF, strlen(AS_IF)) || getenv(ENV_PICKED))
		return false;
	setenv("OPENBLAS_CORETYPE", e + strlen(AS_IF), 1);
	setenv(ENV_ASIF, e + strlen(AS_IF), 1);
	execv("/proc/self/exe", argv);
	sigma_warn("BLAS: %s=%s: cannot execute sigma-train again: %s",
		   ENV_PICK, e, strerror(errno));
	unsetenv("OPENBLAS_CORETYPE");
	unsetenv(ENV_ASIF);
	return false;
}

/*
 * After the exec of /proc/self/exe the kernel names the process "exe"
 * (ps, top, pgrep -x sigma-train, Slurm's process listings): give it its
 * own name back.
 */
static void keep_name(char **argv)
{
	const char *slash = argv && argv[0] ? strrchr(argv[0], '/') : NULL;

	if (getenv(ENV_PICKED) || getenv(ENV_ASIF))
		prctl(PR_SET_NAME, slash ? slash + 1 : "sigma-train", 0, 0, 0);
}

void blas_pick(int argc, char **argv)
{
	struct cpu_features f;
	const char *now, *best;
	char why[256];

	keep_name(argv);
	if (pick_off(argc, argv))
		return;
	if (!as_if(argv) && (getenv(ENV_PICKED) || getenv("OPENBLAS_CORETYPE")))
		return;
	now = blas_core_now();
	cpu_features_read(&f);
	if (!blas_core_below(now, &f))
		return;
	best = blas_core_best(&f);
	if (check_core(best, why, sizeof(why))) {
		sigma_warn("BLAS: the %s kernel failed its known-answer check on this CPU (%s): keeping %s",
			   best, why, now);
		return;
	}
	setenv("OPENBLAS_CORETYPE", best, 1);
	setenv(ENV_PICKED, now, 1);
	unsetenv(ENV_ASIF);
	execv("/proc/self/exe", argv);
	sigma_warn("BLAS: cannot execute sigma-train again with the %s kernel: %s; keeping %s",
		   best, strerror(errno), now);
	unsetenv("OPENBLAS_CORETYPE");
	unsetenv(ENV_PICKED);
}

void blas_pick_describe(char *buf, size_t len)
{
	struct cpu_features f;
	const char *now = blas_core_now(), *was = getenv(ENV_PICKED);
	const char *user = getenv(ENV_ASIF) ? NULL : getenv("OPENBLAS_CORETYPE");
	char cpu[64];

	cpu_features_read(&f);
	cpu_features_describe(&f, cpu, sizeof(cpu));
	if (was)
		snprintf(buf, len,
			 "BLAS kernel %s for this CPU (%s), in place of the library's choice %s (verified)",
			 now, cpu, was);
	else if (user)
		snprintf(buf, len,
			 "BLAS kernel %s (OPENBLAS_CORETYPE=%s); this CPU (%s) allows %s",
			 now, user, cpu, blas_core_best(&f));
	else if (blas_core_below(now, &f))
		snprintf(buf, len,
			 "BLAS kernel %s, below what this CPU (%s) allows (%s): %s",
			 now, cpu, blas_core_best(&f),
			 getenv(ENV_PICK) && !strcmp(getenv(ENV_PICK), "off")
				 ? "SIGMA_BLAS_PICK=off"
				 : "kept (see the warning above)");
	else
		snprintf(buf, len, "BLAS kernel %s, matching this CPU (%s)",
			 now, cpu);
}
