/*
 * ckpt_async.c - the background checkpoint writer (ckpt.h,
 * docs/checkpoint-format.md "Asynchronous writes"): a submit stages the
 * weights and both moments in host memory, a thread writes them as a
 * full or differential checkpoint, retrying, and prunes.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sigma.h"
#include "ckpt.h"
#include "ckpt_internal.h"
#include "ckpt_h5.h"

struct ckpt_async {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	char dir[PATH_MAX];
	int keep;
	int attempts; /* per checkpoint, the first included */
	unsigned retry_ms; /* before the first retry; doubles */
	const struct model *m; /* layout, configuration, kernels' name */
	float *stage; /* params, m, v: 3 * nparams, host memory */
	struct ckpt_state st;
	bool pending; /* a staged snapshot not yet written */
	bool quit;
	int result; /* of the last finished write: 0 or -errno */
	char err[1024];
	int inject; /* test hook: attempts still to fail */
	struct ckpt_async_stats stats;
	struct ckpt_base *base; /* differentials on: the newest full */
	bool diff; /* the pending snapshot: a differential */
	bool wrote_diff; /* the last write: a differential */
	/* a lazy submit: the model the thread copies from first (host
	 * memory), NULL once copied; copied tells the trainer */
	const struct model *src;
	bool copied;
	int shard; /* >= 0: writes this rank's part of a sharded step */
	unsigned which; /* and these of its tensors (ckpt.h) */
	struct ckpt_diff_stats dstats; /* of it */
};

static double mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/*
 * One attempt: a differential against the base when one was asked for
 * and a base is there, else a full checkpoint, which becomes the base.
 */
static int async_write_once(struct ckpt_async *w, char *path, size_t plen,
			    char *why, size_t wlen)
{
	int rc;

	w->wrote_diff = false;
	if (w->shard >= 0)
		return ckpt_write_shard(w->dir, w->m, w->stage, &w->st,
					w->shard, w->which, path, plen, why,
					wlen);
	if (w->diff && w->base->step >= 0 && w->base->step < w->st.step) {
		rc = ckpt_write_diff(w->dir, w->m, w->stage, &w->st, w->base,
				     &w->dstats, path, plen, why, wlen);
		w->wrote_diff = rc == 0;
		return rc;
	}
	if (w->diff)
		printf("checkpoint step %ld: no full checkpoint of this run to difference against: a full one instead\n",
		       w->st.step);
	rc = ckpt_write_staged(w->dir, w->m, w->stage, &w->st, path, plen,
			       why, wlen);
	if (rc == 0 && w->base)
		ckpt_base_set(w->base, w->m, w->stage, w->st.step, path);
	return rc;
}

/* one snapshot: every attempt until one succeeds or none is left */
static int async_write(struct ckpt_async *w, double *ms)
{
	char path[PATH_MAX], why[1024];
	unsigned delay = w->retry_ms;
	double t0 = mono_ms();
	int rc = -EIO;

	for (int a = 1; a <= w->attempts; a++) {
		bool inject;

		pthread_mutex_lock(&w->mu);
		inject = w->inject > 0;
		if (inject)
			w->inject--;
		pthread_mutex_unlock(&w->mu);
		if (inject) {
			rc = sigma_set_err(why, sizeof(why), EIO,
					   "%s: injected write failure",
					   w->dir);
		} else {
			ckpt_h5_lock();
			rc = async_write_once(w, path, sizeof(path), why,
					      sizeof(why));
			ckpt_h5_unlock();
		}
		if (rc == 0)
			break;
		pthread_mutex_lock(&w->mu);
		w->stats.failures++;
		pthread_mutex_unlock(&w->mu);
		if (rc == -ESTALE) {
			/* a newer instance owns the directory: no retry */
			sigma_error("checkpoint step %ld: %s", w->st.step, why);
			break;
		}
		if (a < w->attempts) {
			sigma_warn("checkpoint step %ld: attempt %d of %d failed: %s; retrying in %u ms",
				   w->st.step, a, w->attempts, why, delay);
			sleep_ms(delay);
			delay = delay < 30000 ? delay * 2 : delay;
		} else {
			sigma_error("checkpoint step %ld: all %d attempts failed: %s",
				    w->st.step, w->attempts, why);
		}
	}
	*ms = mono_ms() - t0;
	if (rc == 0) {
		if (w->shard < 0) /* the index's writer prunes parts */
			ckpt_prune(w->dir, w->keep);
		printf("checkpoint step %ld: %s (%.2f s, in the background)\n",
		       w->st.step, path, *ms / 1000.0);
		fflush(stdout);
	}
	pthread_mutex_lock(&w->mu);
	if (rc)
		sigma_strlcpy(w->err, why, sizeof(w->err));
	pthread_mutex_unlock(&w->mu);
	return rc;
}

/* params, m and v of m into the stage */
static void stage_copy(struct ckpt_async *w, const struct model *m)
{
	const size_t n = m->nparams;

	m->ops->to_host(w->stage, m->params, sizeof(float) * n);
	/* a sharded optimizer's own blocks: its caller gathers the rest */
	model_moments_store(m, w->stage + n, w->stage + 2 * n);
}

static void *async_main(void *arg)
{
	struct ckpt_async *w = arg;

	pthread_mutex_lock(&w->mu);
	for (;;) {
		double ms;
		int rc;

		while (!w->pending && !w->quit)
			pthread_cond_wait(&w->cv, &w->mu);
		if (!w->pending)
			break;
		/* the stage and st belong to this thread until pending
		 * is cleared: submit waits for that before it copies */
		pthread_mutex_unlock(&w->mu);
		if (w->src) {
			stage_copy(w, w->src);
			pthread_mutex_lock(&w->mu);
			w->src = NULL;
			w->copied = true;
			pthread_cond_broadcast(&w->cv);
			pthread_mutex_unlock(&w->mu);
		}
		rc = async_write(w, &ms);
		pthread_mutex_lock(&w->mu);
		w->result = rc;
		w->stats.write_ms = ms;
		w->stats.total_write_ms += ms;
		if (rc == 0) {
			w->stats.writes++;
			w->stats.write_step = w->st.step;
			if (w->wrote_diff) {
				w->stats.diff_writes++;
				w->stats.diff = w->dstats;
			}
		} else {
			w->stats.lost++;
		}
		w->pending = false;
		pthread_cond_broadcast(&w->cv);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

int ckpt_async_create(struct ckpt_async **out, const char *dir, int keep,
		      int attempts, unsigned retry_ms, const struct model *m,
		      char *err, size_t len)
{
	struct ckpt_async *w;
	int rc;

	*out = NULL;
	if (keep < 1 || attempts < 1 || attempts > 100 || retry_ms > 600000)
		return sigma_set_err(err, len, EINVAL,
				     "checkpoint writer: keep %d, attempts %d, retry %u ms out of range",
				     keep, attempts, retry_ms);
	w = calloc(1, sizeof(*w));
	if (!w)
		return sigma_set_err(err, len, ENOMEM, "out of memory");
	if (sigma_strlcpy(w->dir, dir, sizeof(w->dir)) >= sizeof(w->dir)) {
		free(w);
		return sigma_set_err(err, len, ENAMETOOLONG,
				     "%s: checkpoint path too long", dir);
	}
	w->stage = malloc(sizeof(float) * 3 * m->nparams);
	if (!w->stage) {
		free(w);
		return sigma_set_err(err, len, ENOMEM,
				     "out of memory for a %zu MiB checkpoint stage",
				     sizeof(float) * 3 * m->nparams >> 20);
	}
	/*
	 * Touched now, so that its page faults come before the first step:
	 * taken inside the first copy, beside the training threads, they
	 * made that copy 40 times slower (3 s against 80 ms, dp 4 on the
	 * testbed), and the first exchange waited for it. explicit_bzero,
	 * because a compiler may fold malloc and memset into a calloc that
	 * touches nothing. A node short of memory also shows it here.
	 */
	explicit_bzero(w->stage, sizeof(float) * 3 * m->nparams);
	w->keep = keep;
	w->shard = -1;
	w->attempts = attempts;
	w->retry_ms = retry_ms;
	w->m = m;
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	rc = pthread_create(&w->thread, NULL, async_main, w);
	if (rc) {
		pthread_cond_destroy(&w->cv);
		pthread_mutex_destroy(&w->mu);
		free(w->stage);
		free(w);
		return sigma_set_err(err, len, rc,
				     "cannot start the checkpoint writer: %s",
				     strerror(rc));
	}
	*out = w;
	return 0;
}

/* with w->mu held: until no write is in flight; the time it took */
static double async_drain(struct ckpt_async *w)
{
	double t0 = mono_ms();

	while (w->pending)
		pthread_cond_wait(&w->cv, &w->mu);
	return mono_ms() - t0;
}

static int async_submit(struct ckpt_async *w, const struct model *m,
			const struct ckpt_state *st, bool diff, bool lazy,
			char *err, size_t len)
{
	double t0 = mono_ms(), waited;
	int rc;

	if (m->nparams != w->m->nparams)
		return sigma_set_err(err, len, EINVAL,
				     "checkpoint writer: model layout changed");
	pthread_mutex_lock(&w->mu);
	if (w->pending)
		w->stats.stalls++;
	waited = async_drain(w);
	rc = w->result;
	if (rc) {
		/* the previous snapshot could not be written: say so now,
		 * and keep failing until the caller gives up */
		sigma_set_err(err, len, -rc, "checkpoint step %ld: %s",
			      w->st.step, w->err);
		pthread_mutex_unlock(&w->mu);
		return rc;
	}
	if (lazy) {
		w->src = m;
		w->copied = false;
	} else {
		stage_copy(w, m);
		w->copied = true;
	}
	w->st = *st;
	w->diff = diff && w->base;
	w->pending = true;
	w->stats.wait_ms = waited;
	w->stats.stall_ms = mono_ms() - t0;
	w->stats.total_stall_ms += w->stats.stall_ms;
	w->stats.submits++;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	return 0;
}

int ckpt_async_submit(struct ckpt_async *w, const struct model *m,
		      const struct ckpt_state *st, char *err, size_t len)
{
	return async_submit(w, m, st, false, false, err, len);
}

int ckpt_async_submit_lazy(struct ckpt_async *w, const struct model *m,
			   const struct ckpt_state *st, char *err, size_t len)
{
	return async_submit(w, m, st, false, true, err, len);
}

double ckpt_async_copied(struct ckpt_async *w)
{
	double t0 = mono_ms();

	pthread_mutex_lock(&w->mu);
	while (!w->copied && w->pending)
		pthread_cond_wait(&w->cv, &w->mu);
	pthread_mutex_unlock(&w->mu);
	return mono_ms() - t0;
}

int ckpt_async_submit_diff(struct ckpt_async *w, const struct model *m,
			   const struct ckpt_state *st, char *err, size_t len)
{
	if (!w->base)
		return sigma_set_err(err, len, EINVAL,
				     "checkpoint writer: differentials not enabled");
	return async_submit(w, m, st, true, false, err, len);
}

int ckpt_async_enable_diff(struct ckpt_async *w, const struct model *m,
			   char *err, size_t len)
{
	struct ckpt_base *b;
	int rc;

	if (w->base)
		return 0;
	b = malloc(sizeof(*b));
	if (!b)
		return sigma_set_err(err, len, ENOMEM, "out of memory");
	rc = ckpt_base_init(b, m, err, len);
	if (rc) {
		free(b);
		return rc;
	}
	pthread_mutex_lock(&w->mu);
	async_drain(w);
	w->base = b;
	pthread_mutex_unlock(&w->mu);
	return 0;
}

void ckpt_async_set_base(struct ckpt_async *w, const struct model *m,
			 long step, const char *path)
{
	pthread_mutex_lock(&w->mu);
	async_drain(w);
	if (w->base)
		ckpt_base_set(w->base, m, NULL, step, path);
	pthread_mutex_unlock(&w->mu);
}

void ckpt_async_set_shard(struct ckpt_async *w, int rank, unsigned which)
{
	pthread_mutex_lock(&w->mu);
	async_drain(w);
	w->shard = rank;
	w->which = which;
	pthread_mutex_unlock(&w->mu);
}

int ckpt_async_poll(struct ckpt_async *w, long *step)
{
	int rc;

	pthread_mutex_lock(&w->mu);
	rc = w->pending ? 0 : w->result ? w->result : 1;
	*step = w->stats.writes ? w->stats.write_step : -1;
	pthread_mutex_unlock(&w->mu);
	return rc;
}

int ckpt_async_wait(struct ckpt_async *w, char *err, size_t len)
{
	int rc;

	pthread_mutex_lock(&w->mu);
	async_drain(w);
	rc = w->result;
	if (rc)
		sigma_set_err(err, len, -rc, "checkpoint step %ld: %s",
			      w->st.step, w->err);
	pthread_mutex_unlock(&w->mu);
	return rc;
}

void ckpt_async_stats(struct ckpt_async *w, struct ckpt_async_stats *s)
{
	pthread_mutex_lock(&w->mu);
	*s = w->stats;
	pthread_mutex_unlock(&w->mu);
}

void ckpt_async_inject_failures(struct ckpt_async *w, int n)
{
	pthread_mutex_lock(&w->mu);
	w->inject = n;
	pthread_mutex_unlock(&w->mu);
}

void ckpt_async_destroy(struct ckpt_async *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->mu);
	async_drain(w);
	w->quit = true;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->thread, NULL);
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
	ckpt_base_fini(w->base);
	free(w->base);
	free(w->stage);
	free(w);
}

const float *ckpt_async_staged(struct ckpt_async *w)
{
	return w->stage;
}

float *ckpt_async_claim(struct ckpt_async *w, char *err, size_t len)
{
	int rc;

	pthread_mutex_lock(&w->mu);
	if (w->pending)
		w->stats.stalls++;
	async_drain(w);
	rc = w->result;
	if (rc)
		sigma_set_err(err, len, -rc, "checkpoint step %ld: %s",
			      w->st.step, w->err);
	pthread_mutex_unlock(&w->mu);
	return rc ? NULL : w->stage;
}

void ckpt_async_commit(struct ckpt_async *w, const struct ckpt_state *st)
{
	pthread_mutex_lock(&w->mu);
	w->st = *st;
	w->diff = false;
	w->copied = true; /* the claimer filled the stage */
	w->pending = true;
	w->stats.submits++;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
}
