/*
 * runtime_ckpt_none.c - the checkpoint verbs of sigma_runtime.h in a
 * library built without HDF5 or xxHash: open says so, nothing else can
 * be reached (there is no object).
 */
#include "config.h"

#include <errno.h>

#include "sigma.h"
#include "sigma_runtime.h"

int sigma_rt_ckpt_open(struct sigma_rt_ckpt **ck, const char *dir,
		       const char *run, int rank, const char *settings,
		       char *err, size_t len)
{
	(void)dir, (void)run, (void)rank, (void)settings;
	*ck = NULL;
	return sigma_set_err(err, len, ENOTSUP,
			     "libsigma-runtime was built without HDF5 and xxHash: no checkpoints");
}

int sigma_rt_ckpt_save(struct sigma_rt_ckpt *ck, long step,
		       const struct sigma_rt_tensor *t, size_t n, char *err,
		       size_t len)
{
	(void)ck, (void)step, (void)t, (void)n;
	return sigma_set_err(err, len, ENOTSUP, "no checkpoints");
}

void sigma_rt_ckpt_fence(struct sigma_rt_ckpt *ck)
{
	(void)ck;
}

int sigma_rt_ckpt_wait(struct sigma_rt_ckpt *ck, char *err, size_t len)
{
	(void)ck, (void)err, (void)len;
	return 0;
}

int sigma_rt_ckpt_steps(struct sigma_rt_ckpt *ck, long *steps, int max)
{
	(void)ck, (void)steps, (void)max;
	return -ENOTSUP;
}

int sigma_rt_ckpt_load(struct sigma_rt_ckpt *ck, long step,
		       const struct sigma_rt_tensor *t, size_t n, char *err,
		       size_t len)
{
	(void)ck, (void)step, (void)t, (void)n;
	return sigma_set_err(err, len, ENOTSUP, "no checkpoints");
}

int sigma_rt_ckpt_load_resharded(struct sigma_rt_ckpt *ck, long step,
				 int writers,
				 const struct sigma_rt_tensor *t, size_t n,
				 char *err, size_t len)
{
	(void)ck, (void)step, (void)writers, (void)t, (void)n;
	return sigma_set_err(err, len, ENOTSUP, "no checkpoints");
}

int sigma_rt_ckpt_shape(struct sigma_rt_ckpt *ck, long step,
			const char *name, int *dtype, int *ndim,
			int64_t *shape, char *err, size_t len)
{
	(void)ck, (void)step, (void)name, (void)dtype, (void)ndim, (void)shape;
	return sigma_set_err(err, len, ENOTSUP, "no checkpoints");
}

void sigma_rt_ckpt_close(struct sigma_rt_ckpt *ck)
{
	(void)ck;
}
