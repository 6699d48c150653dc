/*
 * test_comm_self.c - the bootstrap of a process started alone, the
 * collectives of the single-process back end through the public interface,
 * argument checks, statistics, SIGMA_COMM_TIMEOUT, and the watchdog (in a
 * child process: it must end a call that hangs with COMM_EXIT_PEER and
 * leave a process alone that does not).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "sigma.h"
#include "comm.h"
#include "comm_impl.h"

static int setup_env(void **state)
{
	(void)state;
	unsetenv("PMIX_NAMESPACE");
	unsetenv("SLURM_NTASKS");
	unsetenv("SIGMA_COMM_TIMEOUT");
	return 0;
}

static void test_boot_alone(void **state)
{
	struct boot b;
	char err[256];

	(void)state;
	assert_int_equal(boot_init(&b, err, sizeof(err)), 0);
	assert_int_equal(b.rank, 0);
	assert_int_equal(b.size, 1);
	assert_int_equal(b.local_rank, 0);
	assert_int_equal(b.local_size, 1);
	assert_false(b.pmix);
	assert_true(strlen(b.node) > 0);
	boot_fini(&b);
	boot_fini(&b); /* twice is harmless */

	/* srun without PMIx: a task of several that would train alone */
	setenv("SLURM_NTASKS", "4", 1);
	assert_int_equal(boot_init(&b, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "one of 4 tasks without a PMIx server"));
	assert_non_null(strstr(err, "srun --mpi=pmix"));
	setenv("SLURM_NTASKS", "1", 1);
	assert_int_equal(boot_init(&b, err, sizeof(err)), 0);
	boot_fini(&b);
	unsetenv("SLURM_NTASKS");
}

static void test_boot_exchange_alone(void **state)
{
	unsigned char blob[300], back[300];
	struct boot b;
	char err[256];
	size_t got = 0;
	int i;

	(void)state;
	for (i = 0; i < 300; i++)
		blob[i] = (unsigned char)(i * 7);
	assert_int_equal(boot_init(&b, err, sizeof(err)), 0);
	assert_int_equal(boot_put(&b, "k1", blob, sizeof(blob)), 0);
	assert_int_equal(boot_commit(&b), 0);
	assert_int_equal(boot_fence(&b), 0);
	assert_int_equal(boot_get(&b, 0, "k1", back, sizeof(back), &got), 0);
	assert_int_equal(got, 300);
	assert_memory_equal(back, blob, 300);
	/* a second put replaces the value */
	assert_int_equal(boot_put(&b, "k1", "xy", 2), 0);
	assert_int_equal(boot_get(&b, 0, "k1", back, sizeof(back), &got), 0);
	assert_int_equal(got, 2);
	assert_memory_equal(back, "xy", 2);
	assert_int_equal(boot_get(&b, 0, "k1", back, 1, &got), -EMSGSIZE);
	assert_int_equal(boot_get(&b, 0, "nope", back, sizeof(back), &got),
			 -ENOENT);
	assert_int_equal(boot_get(&b, 1, "k1", back, sizeof(back), &got),
			 -EINVAL);
	assert_int_equal(boot_put(&b, "", blob, 1), -EINVAL);
	assert_int_equal(boot_put(&b, "k", blob, BOOT_BLOB_MAX + 1), -EINVAL);
	/* share: rank 0 keeps its data */
	assert_int_equal(boot_share(&b, "id", blob, 128), 0);
	assert_int_equal(b.seq, 1);
	boot_fini(&b);
}

static void test_backends(void **state)
{
	enum comm_backend be;

	(void)state;
	assert_int_equal(comm_backend_parse("mpi", &be), 0);
	assert_int_equal(be, COMM_MPI);
	assert_int_equal(comm_backend_parse("nccl", &be), 0);
	assert_int_equal(be, COMM_NCCL);
	assert_int_equal(comm_backend_parse("self", &be), 0);
	assert_int_equal(be, COMM_SELF);
	assert_int_equal(comm_backend_parse("gloo", &be), -EINVAL);
	assert_string_equal(comm_backend_name(COMM_NCCL), "nccl");
	assert_true(comm_backend_available(COMM_SELF));
	assert_int_equal(comm_dtype_size(COMM_F32), 4);
	assert_int_equal(comm_dtype_size(COMM_I32), 4);
	assert_int_equal(comm_dtype_size(COMM_U8), 1);
}

static void test_options(void **state)
{
	struct comm_options o;
	char err[256];

	(void)state;
	assert_int_equal(comm_options_default(&o, err, sizeof(err)), 0);
	assert_true(o.timeout_s == COMM_TIMEOUT_DEFAULT);
	assert_int_equal(o.device, -1);
	assert_null(o.stream);
	setenv("SIGMA_COMM_TIMEOUT", "12.5", 1);
	assert_int_equal(comm_options_default(&o, err, sizeof(err)), 0);
	assert_true(o.timeout_s == 12.5);
	setenv("SIGMA_COMM_TIMEOUT", "0", 1);
	assert_int_equal(comm_options_default(&o, err, sizeof(err)), 0);
	assert_true(o.timeout_s == 0);
	setenv("SIGMA_COMM_TIMEOUT", "soon", 1);
	assert_int_equal(comm_options_default(&o, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "SIGMA_COMM_TIMEOUT=soon"));
	setenv("SIGMA_COMM_TIMEOUT", "-1", 1);
	assert_int_equal(comm_options_default(&o, err, sizeof(err)), -EINVAL);
	unsetenv("SIGMA_COMM_TIMEOUT");
}

struct world {
	struct boot b;
	struct comm *c;
};

static int world_up(void **state)
{
	struct world *w = calloc(1, sizeof(*w));
	char err[256];

	setup_env(state);
	if (!w || boot_init(&w->b, err, sizeof(err)) < 0 ||
	    comm_create(&w->c, COMM_SELF, &w->b, NULL, err, sizeof(err)) < 0) {
		free(w);
		return -1;
	}
	*state = w;
	return 0;
}

static int world_down(void **state)
{
	struct world *w = *state;

	comm_destroy(w->c);
	boot_fini(&w->b);
	free(w);
	return 0;
}

static void test_self_create(void **state)
{
	struct world *w = *state;
	struct comm *c = NULL;
	struct boot fake;
	char err[256];

	assert_int_equal(comm_rank(w->c), 0);
	assert_int_equal(comm_size(w->c), 1);
	assert_int_equal(comm_backend_of(w->c), COMM_SELF);
	assert_int_equal(comm_memory(w->c), COMM_MEM_HOST);
	assert_string_equal(comm_name(w->c), "world");
	/* the self back end refuses a job of several */
	fake = w->b;
	fake.size = 2;
	assert_int_equal(
	    comm_create(&c, COMM_SELF, &fake, NULL, err, sizeof(err)), -EINVAL);
	assert_null(c);
	assert_non_null(strstr(err, "the job has 2"));
	comm_destroy(NULL);
}

static void test_self_collectives(void **state)
{
	struct world *w = *state;
	struct comm_request req;
	float f[5] = {1, 2, 3, 4, 5};
	int32_t v[3] = {7, 8, 9};

	assert_int_equal(comm_allreduce_f32(w->c, f, 5), 0);
	assert_true(f[0] == 1 && f[4] == 5); /* sum over one rank */
	assert_int_equal(comm_allreduce_f32(w->c, NULL, 0), 0);
	assert_int_equal(comm_allreduce_f32(w->c, NULL, 3), -EINVAL);
	assert_int_equal(comm_iallreduce_f32(w->c, f, 5, &req), 0);
	assert_int_equal(comm_wait(&req), 0);
	assert_true(f[2] == 3);
	assert_int_equal(comm_wait(&req), -EINVAL); /* already completed */
	assert_int_equal(comm_bcast(w->c, v, 3, COMM_I32, 0), 0);
	assert_int_equal(v[1], 8);
	assert_int_equal(comm_bcast(w->c, v, 3, COMM_I32, 1), -EINVAL);
	assert_int_equal(comm_barrier(w->c), 0);
}

static void test_self_alltoallv(void **state)
{
	struct world *w = *state;
	int32_t send[6] = {0, 0, 11, 12, 13, 0}, recv[6];
	size_t sc = 3, sd = 2, rc = 3, rd = 1, bad = 2;
	size_t huge = SIZE_MAX / 2;

	memset(recv, 0xff, sizeof(recv));
	assert_int_equal(
	    comm_alltoallv(w->c, send, &sc, &sd, recv, &rc, &rd, COMM_I32), 0);
	assert_int_equal(recv[0], -1); /* before the block: untouched */
	assert_int_equal(recv[1], 11);
	assert_int_equal(recv[2], 12);
	assert_int_equal(recv[3], 13);
	assert_int_equal(recv[4], -1); /* after it too */
	/* the counts must agree with oneself */
	assert_int_equal(
	    comm_alltoallv(w->c, send, &sc, &sd, recv, &bad, &rd, COMM_I32),
	    -EINVAL);
	assert_int_equal(
	    comm_alltoallv(w->c, send, &huge, &huge, recv, &rc, &rd, COMM_I32),
	    -EINVAL);
	assert_int_equal(
	    comm_alltoallv(w->c, NULL, &sc, &sd, recv, &rc, &rd, COMM_I32),
	    -EINVAL);
	assert_int_equal(
	    comm_alltoallv(w->c, send, NULL, &sd, recv, &rc, &rd, COMM_I32),
	    -EINVAL);
}

static void test_self_p2p(void **state)
{
	struct world *w = *state;
	float a[3] = {1, 2, 3}, b[3] = {4, 5, 6}, r[3];

	/* messages to oneself wait for the receive with the same tag, in order
	 */
	assert_int_equal(comm_send(w->c, a, 3, COMM_F32, 0, 1), 0);
	assert_int_equal(comm_send(w->c, b, 3, COMM_F32, 0, 2), 0);
	assert_int_equal(comm_send(w->c, b, 3, COMM_F32, 0, 1), 0);
	assert_int_equal(comm_recv(w->c, r, 3, COMM_F32, 0, 2), 0);
	assert_memory_equal(r, b, sizeof(b));
	assert_int_equal(comm_recv(w->c, r, 3, COMM_F32, 0, 1), 0);
	assert_memory_equal(r, a, sizeof(a));
	assert_int_equal(comm_recv(w->c, r, 2, COMM_F32, 0, 1), -EMSGSIZE);
	assert_int_equal(comm_recv(w->c, r, 3, COMM_F32, 0, 1), 0);
	assert_memory_equal(r, b, sizeof(b));
	/* nothing left: waiting would be forever */
	assert_int_equal(comm_recv(w->c, r, 3, COMM_F32, 0, 1), -EDEADLK);
	assert_int_equal(comm_sendrecv(w->c, a, 3, 0, r, 3, 0, COMM_F32, 5), 0);
	assert_memory_equal(r, a, sizeof(a));
	assert_int_equal(comm_send(w->c, a, 3, COMM_F32, 1, 0), -EINVAL);
	assert_int_equal(comm_recv(w->c, r, 3, COMM_F32, -1, 0), -EINVAL);
	assert_int_equal(comm_send(w->c, a, 3, COMM_F32, 0, -2), -EINVAL);
}

static void test_self_split_and_stats(void **state)
{
	struct world *w = *state;
	struct comm *sub = (struct comm *)1;
	struct comm_stats st, st2;
	float f = 2;

	comm_get_stats(w->c, &st);
	assert_int_equal(comm_split(w->c, COMM_COLOR_NONE, 0, "none", &sub), 0);
	assert_null(sub);
	assert_int_equal(comm_split(w->c, 3, 0, "dp", &sub), 0);
	assert_non_null(sub);
	assert_int_equal(comm_size(sub), 1);
	assert_string_equal(comm_name(sub), "dp");
	assert_int_equal(comm_allreduce_f32(sub, &f, 1), 0);
	comm_destroy(sub);
	assert_int_equal(comm_split(w->c, -2, 0, "bad", &sub), -EINVAL);
	assert_null(sub);
	assert_int_equal(comm_split(w->c, 0, 0, NULL, &sub), -EINVAL);

	comm_get_stats(w->c, &st);
	assert_int_equal(comm_allreduce_f32(w->c, &f, 1), 0);
	comm_get_stats(w->c, &st2);
	assert_int_equal(st2.calls, st.calls + 1);
	/* one rank sends nothing to itself */
	assert_int_equal(st2.bytes, st.bytes);
	assert_true(st2.ns >= st.ns);
}

static void test_self_memory(void **state)
{
	struct world *w = *state;
	float in[4] = {1, 2, 3, 4}, out[4] = {0};
	float *d = comm_alloc(w->c, sizeof(in));

	assert_non_null(d);
	assert_true(d[0] == 0 && d[3] == 0); /* zeroed */
	assert_int_equal(comm_from_host(w->c, d, in, sizeof(in)), 0);
	assert_int_equal(comm_to_host(w->c, out, d, sizeof(out)), 0);
	assert_memory_equal(out, in, sizeof(in));
	assert_int_equal(comm_to_host(w->c, NULL, d, 4), -EINVAL);
	comm_free(w->c, d);
	comm_free(w->c, NULL);
}

/*
 * In a child: start the watchdog, a first call of first_ms, asked to stop
 * when hurry, then a "call" of hang_ms. Exit status.
 */
static int child_hurry(double timeout_s, int first_ms, bool hurry,
		       int hang_ms)
{
	pid_t pid = fork();
	int status = 0;

	assert_true(pid >= 0);
	if (pid == 0) {
		if (comm_watchdog_start(timeout_s) < 0)
			_exit(2);
		comm_watch_enter("allreduce", "test");
		usleep((useconds_t)first_ms * 1000);
		comm_watch_leave();
		if (hurry)
			comm_watchdog_hurry();
		comm_watch_enter("allreduce", "test");
		usleep((useconds_t)hang_ms * 1000);
		comm_watch_leave();
		comm_watchdog_stop();
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

static int told_code, told_calls;
static void told(int code, void *arg)
{
	(void)arg;
	told_code = code;
	told_calls++;
}

/* a broken communicator tells the exit hook at once, and once */
static void test_watchdog_broken(void **state)
{
	(void)state;
	comm_watchdog_broken(); /* no hook yet: nothing */
	comm_watchdog_on_exit(told, NULL);
	comm_watchdog_broken();
	comm_watchdog_broken();
	comm_watchdog_on_exit(NULL, NULL);
	assert_int_equal(told_calls, 1);
	assert_int_equal(told_code, COMM_EXIT_PEER);
}

static void test_watchdog(void **state)
{
	(void)state;
	/* a call that hangs 10 s with a 0.2 s timeout: ended with the code */
	assert_int_equal(child_hurry(0.2, 10000, false, 0), COMM_EXIT_PEER);
	/* calls shorter than the timeout: nothing happens */
	assert_int_equal(child_hurry(2.0, 50, false, 300), 0);
	/* asked to stop: a call 3 s long ends the process with a 300 s
	 * timeout; without the request, or when a call of 1 s came first (4 s
	 * allowed), it does not */
	assert_int_equal(child_hurry(300, 0, true, 3000), COMM_EXIT_PEER);
	assert_int_equal(child_hurry(300, 0, false, 3000), 0);
	assert_int_equal(child_hurry(300, 1000, true, 3000), 0);
	/* no timeout, no watchdog */
	assert_int_equal(comm_watchdog_start(0), 0);
	assert_int_equal(comm_watchdog_start(COMM_TIMEOUT_MAX * 2), -ERANGE);
	/* start, change, stop in this process */
	assert_int_equal(comm_watchdog_start(100), 0);
	assert_int_equal(comm_watchdog_start(50), 0);
	comm_watchdog_stop();
	comm_watchdog_stop();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(test_boot_alone, setup_env),
	    cmocka_unit_test_setup(test_boot_exchange_alone, setup_env),
	    cmocka_unit_test(test_backends),
	    cmocka_unit_test_setup(test_options, setup_env),
	    cmocka_unit_test_setup_teardown(test_self_create, world_up,
					    world_down),
	    cmocka_unit_test_setup_teardown(test_self_collectives, world_up,
					    world_down),
	    cmocka_unit_test_setup_teardown(test_self_alltoallv, world_up,
					    world_down),
	    cmocka_unit_test_setup_teardown(test_self_p2p, world_up,
					    world_down),
	    cmocka_unit_test_setup_teardown(test_self_split_and_stats, world_up,
					    world_down),
	    cmocka_unit_test_setup_teardown(test_self_memory, world_up,
					    world_down),
	    cmocka_unit_test(test_watchdog),
	    cmocka_unit_test(test_watchdog_broken),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
