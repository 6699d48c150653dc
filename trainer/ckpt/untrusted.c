/*
 * untrusted.c - a checkpoint from elsewhere, read in a child process
 * (untrusted.h).
 */
#include "config.h"

#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sigma.h"
#include "ckpt.h"
#include "model.h"
#include "untrusted.h"

/* what the child hands back: its answer, then the weights */
struct untrusted_reply {
	int rc;
	char err[1024];
};

/* the child's limits: no core file, no writes, bounded CPU; none of the
 * parent's signal handlers (a crash is the child's death, and the
 * parent's stop requests are the parent's) */
static void child_limits(void)
{
	struct rlimit zero = {0, 0}, cpu = {UNTRUSTED_CPU_S, UNTRUSTED_CPU_S};
	static const int crash[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT,
				    SIGTERM, SIGINT, SIGXCPU};

	for (size_t i = 0; i < sizeof(crash) / sizeof(crash[0]); i++)
		(void)signal(crash[i], SIG_DFL);
	(void)signal(SIGUSR1, SIG_IGN);
	(void)signal(SIGUSR2, SIG_IGN);

	(void)setrlimit(RLIMIT_CORE, &zero);
	(void)setrlimit(RLIMIT_FSIZE, &zero);
	(void)setrlimit(RLIMIT_CPU, &cpu);
	(void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	(void)prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
	/* freed and fresh heap blocks filled, so that a read past a block
	 * finds junk; heap corruption found aborts at once */
	(void)mallopt(M_PERTURB, 0xa5);
	(void)mallopt(M_CHECK_ACTION, 3);
}

int untrusted_read_weights(const char *path, struct model *m, char *err,
			   size_t len)
{
	size_t bytes = sizeof(float) * m->nparams;
	size_t size = sizeof(struct untrusted_reply) + bytes;
	struct untrusted_reply *r;
	float *w;
	pid_t pid;
	int status, rc;

	r = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		 -1, 0);
	if (r == MAP_FAILED)
		return sigma_set_err(err, len, errno,
				     "cannot map %zu bytes for the reader", size);
	w = (float *)(r + 1);
	r->rc = -EBADMSG;
	snprintf(r->err, sizeof(r->err), "the reader gave no answer");
	fflush(NULL); /* nothing buffered is written twice */
	pid = fork();
	if (pid < 0) {
		rc = sigma_set_err(err, len, errno, "cannot start the reader");
		munmap(r, size);
		return rc;
	}
	if (pid == 0) {
		child_limits();
		r->rc = ckpt_read_weights_host(path, m, w, r->err,
					       sizeof(r->err));
		_exit(0);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR) {
			rc = sigma_set_err(err, len, errno,
					   "the reader of %s is lost", path);
			munmap(r, size);
			return rc;
		}
	if (WIFSIGNALED(status))
		rc = sigma_set_err(err, len, EBADMSG,
				   "%s: the reader died of signal %d (%s): the "
				   "file is refused",
				   path, WTERMSIG(status),
				   strsignal(WTERMSIG(status)));
	else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		rc = sigma_set_err(err, len, EBADMSG,
				   "%s: the reader exited %d: the file is refused",
				   path, WEXITSTATUS(status));
	else if ((rc = r->rc) != 0)
		sigma_set_err(err, len, rc < 0 ? -rc : EBADMSG, "%.*s",
			      (int)sizeof(r->err) - 1, r->err);
	if (rc == 0)
		rc = ckpt_load_weights(m, w);
	munmap(r, size);
	return rc;
}
