/*
 * watchdog.c - the backstop against a collective that never returns (a
 * peer stopped or died without the transport noticing): a thread that
 * looks at the call in progress and ends the process with COMM_EXIT_PEER
 * once it has run longer than the timeout. Slurm then ends the step
 * (srun --kill-on-bad-exit=1) and the controller requeues the job.
 *
 * The calls are made from one thread at a time (comm.h), so the state is
 * one start time and one label, read by the watchdog without locks.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sigma.h"
#include "watchdog.h"

static _Atomic uint64_t watch_since_ns; /* 0: no call in progress */
static _Atomic(const char *) watch_what;
static _Atomic(const char *) watch_name;
static _Atomic uint64_t watch_timeout_ns;
static _Atomic uint64_t watch_longest_ns; /* the longest call that returned */
static atomic_bool watch_hurry;

static pthread_mutex_t watch_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t watch_cond;
static pthread_t watch_thread;
static bool watch_running;
static bool watch_stop;

uint64_t comm_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void comm_watch_enter(const char *what, const char *name)
{
	atomic_store(&watch_what, what);
	atomic_store(&watch_name, name);
	atomic_store(&watch_since_ns, comm_now_ns());
}

void comm_watch_leave(void)
{
	uint64_t since = atomic_load(&watch_since_ns), now = comm_now_ns();

	if (since && now > since &&
	    now - since > atomic_load(&watch_longest_ns))
		atomic_store(&watch_longest_ns, now - since);
	atomic_store(&watch_since_ns, 0);
}

typedef void (*watch_exit_cb)(int code, void *arg);
static _Atomic(watch_exit_cb) watch_exit_fn; /* comm_watchdog_on_exit */
static _Atomic(void *) watch_exit_arg;

void comm_watchdog_on_exit(watch_exit_cb fn, void *arg)
{
	atomic_store(&watch_exit_arg, arg);
	atomic_store(&watch_exit_fn, fn);
}

void comm_watchdog_broken(void)
{
	static atomic_bool told;
	watch_exit_cb fn = atomic_load(&watch_exit_fn);

	if (fn && !atomic_exchange(&told, true))
		fn(COMM_EXIT_PEER, atomic_load(&watch_exit_arg));
}

void comm_watchdog_hurry(void)
{
	atomic_store(&watch_hurry, true);
}

/* how long a call may run now */
static uint64_t watch_limit_ns(void)
{
	uint64_t timeout = atomic_load(&watch_timeout_ns), hurry;

	if (!atomic_load(&watch_hurry))
		return timeout;
	hurry = 4 * atomic_load(&watch_longest_ns);
	if (hurry < (uint64_t)(COMM_HURRY_MIN_S * 1e9))
		hurry = (uint64_t)(COMM_HURRY_MIN_S * 1e9);
	return hurry < timeout ? hurry : timeout;
}

static void *watch_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&watch_lock);
	while (!watch_stop) {
		uint64_t timeout = watch_limit_ns();
		uint64_t since = atomic_load(&watch_since_ns);
		uint64_t now = comm_now_ns();
		uint64_t period = timeout / 10;
		struct timespec ts;

		if (since && now > since && now - since > timeout) {
			const char *what = atomic_load(&watch_what);
			const char *name = atomic_load(&watch_name);
			watch_exit_cb fn = atomic_load(&watch_exit_fn);

			/* one line, then out: no atexit handler may block */
			sigma_error(
			    "comm watchdog: %s on communicator %s has not returned after %.1f s (%s %.1f s): a peer rank died or stopped; exiting %d",
			    what ? what : "?", name ? name : "?",
			    (double)(now - since) / 1e9,
			    atomic_load(&watch_hurry) ? "asked to stop: limit"
						      : "timeout",
			    (double)timeout / 1e9, COMM_EXIT_PEER);
			fflush(stderr);
			if (fn)
				fn(COMM_EXIT_PEER, atomic_load(&watch_exit_arg));
			_exit(COMM_EXIT_PEER);
		}
		if (period < 10000000ull)
			period = 10000000ull; /* 10 ms */
		if (period > 1000000000ull)
			period = 1000000000ull;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_sec += (time_t)(period / 1000000000ull);
		ts.tv_nsec += (long)(period % 1000000000ull);
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&watch_cond, &watch_lock, &ts);
	}
	pthread_mutex_unlock(&watch_lock);
	return NULL;
}

int comm_watchdog_start(double timeout_s)
{
	pthread_condattr_t ca;
	int rc;

	if (!(timeout_s > 0))
		return 0;
	if (timeout_s > COMM_TIMEOUT_MAX)
		return -ERANGE;
	atomic_store(&watch_timeout_ns, (uint64_t)(timeout_s * 1e9));
	pthread_mutex_lock(&watch_lock);
	if (watch_running) {
		pthread_cond_signal(&watch_cond);
		pthread_mutex_unlock(&watch_lock);
		return 0;
	}
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&watch_cond, &ca);
	pthread_condattr_destroy(&ca);
	watch_stop = false;
	rc = pthread_create(&watch_thread, NULL, watch_main, NULL);
	if (rc != 0) {
		pthread_cond_destroy(&watch_cond);
		pthread_mutex_unlock(&watch_lock);
		return -rc;
	}
	watch_running = true;
	pthread_mutex_unlock(&watch_lock);
	return 0;
}

void comm_watchdog_stop(void)
{
	pthread_mutex_lock(&watch_lock);
	if (!watch_running) {
		pthread_mutex_unlock(&watch_lock);
		return;
	}
	watch_stop = true;
	pthread_cond_signal(&watch_cond);
	pthread_mutex_unlock(&watch_lock);
	pthread_join(watch_thread, NULL);
	pthread_mutex_lock(&watch_lock);
	pthread_cond_destroy(&watch_cond);
	watch_running = false;
	pthread_mutex_unlock(&watch_lock);
}
