/*
 * test_kernels_select.c - sigma_ops_select: the device names, and the
 * messages for an unknown name, a build without CUDA and a machine without
 * a GPU. Runs everywhere; on a GPU machine "cuda" must give the CUDA table.
 * Also the CUDA path's choices that need no GPU (kernels/cuda/cuda_plan.h):
 * the device of a process, with the launchers' variables faked, and the
 * attention kernels a shape gets, with the limits refused by name.
 */
#include "config.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ops.h"
#include "bf16.h"
#include "select.h"
#include "cuda/sigma_cuda.h"
#include "cuda/cuda_plan.h"
#include "cuda/cuda_defer.h"

/* the variables the device choice reads, cleared around each case */
static const char *const launch_vars[] = {
    "SIGMA_CUDA_DEVICE", "OMPI_COMM_WORLD_LOCAL_RANK", "LOCAL_RANK",
    "SLURM_LOCALID"};

static void launch_clear(void)
{
	for (size_t i = 0; i < sizeof(launch_vars) / sizeof(launch_vars[0]);
	     i++)
		unsetenv(launch_vars[i]);
}

/*
 * Four ranks that mpirun started inside a Slurm step on a node of four
 * GPUs: each inherited the step's SLURM_LOCALID=0. The bootstrap's local
 * rank (or mpirun's own variable) must spread them over the GPUs.
 */
static void test_pick_device(void **state)
{
	char err[256] = "";

	(void)state;
	launch_clear();
	setenv("SLURM_LOCALID", "0", 1);
	for (int r = 0; r < 4; r++)
		assert_int_equal(cuda_plan_device(4, r, err, sizeof(err)), r);
	assert_int_equal(cuda_plan_device(4, 6, err, sizeof(err)), 2);
	/* no bootstrap rank: mpirun's variable before the inherited one */
	setenv("OMPI_COMM_WORLD_LOCAL_RANK", "3", 1);
	assert_int_equal(cuda_plan_device(4, -1, err, sizeof(err)), 3);
	setenv("LOCAL_RANK", "2", 1);
	assert_int_equal(cuda_plan_device(4, -1, err, sizeof(err)), 3);
	unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
	assert_int_equal(cuda_plan_device(4, -1, err, sizeof(err)), 2);
	unsetenv("LOCAL_RANK");
	setenv("SLURM_LOCALID", "5", 1); /* srun alone: its variable */
	assert_int_equal(cuda_plan_device(4, -1, err, sizeof(err)), 1);
	setenv("SLURM_LOCALID", "x1", 1); /* malformed: ignored */
	assert_int_equal(cuda_plan_device(4, -1, err, sizeof(err)), 0);
	/* one visible device (--gpus-per-task=1): always it */
	assert_int_equal(cuda_plan_device(1, 3, err, sizeof(err)), 0);
	/* SIGMA_CUDA_DEVICE wins, and is range-checked */
	setenv("SIGMA_CUDA_DEVICE", "1", 1);
	assert_int_equal(cuda_plan_device(4, 3, err, sizeof(err)), 1);
	setenv("SIGMA_CUDA_DEVICE", "4", 1);
	assert_int_equal(cuda_plan_device(4, 3, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "SIGMA_CUDA_DEVICE=4: expected 0..3"));
	launch_clear();
	/* the CUDA table's choice takes the rank handed to the ops */
	if (!sigma_cuda_ops())
		return;
	setenv("SLURM_LOCALID", "0", 1);
	sigma_ops_set_local_rank(2);
	assert_int_equal(sigma_cuda_pick_device(4, err, sizeof(err)), 2);
	sigma_ops_set_local_rank(-1);
	assert_int_equal(sigma_cuda_pick_device(4, err, sizeof(err)), 0);
	launch_clear();
}

/* which attention a shape gets, and the limits named at configuration */
static void test_attention_plan(void **state)
{
	char err[256];
	int fused = CUDA_PLAN_ATT_FUSED, cublas = CUDA_PLAN_ATT_CUBLAS;
	int autom = CUDA_PLAN_ATT_AUTO;

	(void)state;
	/* within every limit: as asked; auto is fused in fp32, cuBLAS in
	 * bf16 (the tensor cores), unless the T x T buffers would take 8 GiB
	 * a layer: then fused, which needs none */
	static const struct {
		int mode, bf16, T, want;
	} within[] = {
	    {CUDA_PLAN_ATT_FUSED, 1, 1024, CUDA_PLAN_ATT_FUSED},
	    {CUDA_PLAN_ATT_CUBLAS, 0, 1024, CUDA_PLAN_ATT_CUBLAS},
	    {CUDA_PLAN_ATT_AUTO, 0, 1024, CUDA_PLAN_ATT_FUSED},
	    {CUDA_PLAN_ATT_AUTO, 1, 1024, CUDA_PLAN_ATT_CUBLAS},
	    {CUDA_PLAN_ATT_AUTO, 1, 4096, CUDA_PLAN_ATT_FUSED},
	};

	for (size_t i = 0; i < sizeof(within) / sizeof(within[0]); i++)
		assert_int_equal(cuda_plan_attention(within[i].mode,
						     within[i].bf16, 8,
						     within[i].T, 16, 128, 1, err,
						     sizeof(err)),
				 within[i].want);
	/* the buffers of the whole model count: 512 MiB a layer is cuBLAS
	 * for 7 layers and the gradient's (4 GiB), fused for 8 */
	assert_int_equal(cuda_plan_attention(autom, 1, 8, 1024, 16, 128, 8,
					     err, sizeof(err)),
			 cublas);
	assert_int_equal(cuda_plan_attention(autom, 1, 8, 1024, 16, 128, 9,
					     err, sizeof(err)),
			 fused);
	/* asked for by name, the cuBLAS path stays: the budget judges */
	assert_int_equal(cuda_plan_attention(cublas, 1, 8, 1024, 16, 128,
					     1000, err, sizeof(err)),
			 cublas);
	/* the fused limits: refused by name when asked for, else cuBLAS */
	err[0] = '\0';
	assert_int_equal(cuda_plan_attention(fused, 0, 1, 64, 2, 512, 1, err,
					     sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "Dh = 512"));
	assert_non_null(strstr(err, "1..256"));
	assert_int_equal(cuda_plan_attention(autom, 0, 1, 64, 2, 512, 1, err,
					     sizeof(err)),
			 cublas);
	err[0] = '\0';
	assert_int_equal(cuda_plan_attention(fused, 0, 4096, 16, 32, 64, 1, err,
					     sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "131072 is above its limit 65535"));
	assert_int_equal(cuda_plan_attention(autom, 0, 4096, 16, 32, 64, 1, err,
					     sizeof(err)),
			 cublas);
	/* beyond both: refused, both limits named */
	err[0] = '\0';
	assert_int_equal(cuda_plan_attention(autom, 0, 65536, 1024, 64, 512,
					     1, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "Dh = 512"));
	assert_non_null(strstr(err, "rows is above its limit"));
	/* the tables: the CPU always uses the buffers; the CUDA one says
	 * what its mode and precision make of a shape */
	assert_int_equal(sigma_ops_cpu.attention_plan(1, 8, 1, 512, 1, err,
						      sizeof(err)),
			 1);
	if (!sigma_cuda_ops())
		return;
	assert_int_equal(sigma_cuda_set_attention(SIGMA_CUDA_ATT_FUSED), 0);
	assert_int_equal(sigma_cuda_ops()->attention_plan(1, 8, 1, 64, 1, err,
							  sizeof(err)),
			 0);
	assert_int_equal(sigma_cuda_ops()->attention_plan(1, 8, 1, 512, 1, err,
							  sizeof(err)),
			 -EINVAL);
	assert_int_equal(sigma_cuda_set_attention(SIGMA_CUDA_ATT_AUTO), 0);
	assert_int_equal(sigma_cuda_ops()->attention_plan(1, 8, 1, 512, 1, err,
							  sizeof(err)),
			 1);
	assert_int_equal(sigma_cuda_get_attention(), SIGMA_CUDA_ATT_AUTO);
}

/* cuda_defer.h: frees put off until the drain, in order, then none */
static void *defer_freed[64];
static size_t defer_nfreed;
static void defer_free(void *p)
{
	if (defer_nfreed < sizeof(defer_freed) / sizeof(*defer_freed))
		defer_freed[defer_nfreed] = p;
	defer_nfreed++;
}

static void test_defer(void **state)
{
	struct cuda_defer l = { 0 };
	static char mem[40];

	(void)state;
	for (int i = 0; i < 40; i++) /* past the first capacity, 16 */
		assert_int_equal(cuda_defer_push(&l, &mem[i]), 0);
	assert_int_equal(defer_nfreed, 0);
	assert_int_equal(cuda_defer_drain(&l, defer_free), 40);
	assert_int_equal(defer_nfreed, 40);
	for (int i = 0; i < 40; i++)
		assert_ptr_equal(defer_freed[i], &mem[i]);
	assert_int_equal(cuda_defer_drain(&l, defer_free), 0);
	assert_int_equal(defer_nfreed, 40);
	free(l.p);
}

static void test_cpu(void **state)
{
	char err[256] = "untouched";

	(void)state;
	assert_ptr_equal(sigma_ops_select("cpu", err, sizeof(err)),
			 &sigma_ops_cpu);
	assert_ptr_equal(sigma_ops_select(NULL, err, sizeof(err)),
			 &sigma_ops_cpu);
	assert_string_equal(err, "untouched");
}

static void test_bf16(void **state)
{
	(void)state;
	assert_ptr_equal(sigma_bf16_select(&sigma_ops_cpu), &sigma_bf16_cpu);
	assert_null(sigma_bf16_select(NULL));
	if (sigma_cuda_ops()) {
		assert_non_null(sigma_cuda_bf16());
		assert_ptr_equal(sigma_bf16_select(sigma_cuda_ops()),
				 sigma_cuda_bf16());
		assert_string_equal(sigma_cuda_bf16()->ops->name, "cuda-bf16");
	} else {
		assert_null(sigma_cuda_bf16());
	}
}

static void test_unknown(void **state)
{
	static const char *const bad[] = {"gpu", "cudax",    "CUDA",
					  "",	 "cpu:bf16", "rocm"};
	char err[256];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		assert_null(sigma_ops_select(bad[i], err, sizeof(err)));
		assert_non_null(strstr(err, "unknown device"));
		assert_non_null(strstr(err, bad[i]));
	}
	/* no buffer, or a short one: no message, no overflow */
	assert_null(sigma_ops_select("gpu", NULL, 0));
	memset(err, 'x', sizeof(err));
	assert_null(sigma_ops_select("gpu", err, 8));
	assert_int_equal(strlen(err), 7);
	assert_int_equal(err[8], 'x');
}

/* where a table placed this process: nowhere for the CPU, and for the
 * CUDA table nowhere until its init ran (dist.c asks after init) */
static void test_device(void **state)
{
	char id[32] = "untouched";

	(void)state;
	assert_int_equal(sigma_ops_device(&sigma_ops_cpu), -1);
	assert_int_equal(sigma_ops_device(NULL), -1);
	assert_int_equal(sigma_ops_device_id(&sigma_ops_cpu, id, sizeof(id)),
			 -ENODEV);
	assert_string_equal(id, "untouched");
	if (!sigma_cuda_ops())
		return;
	assert_int_equal(sigma_ops_device(sigma_cuda_ops()), -1);
	assert_int_equal(sigma_ops_device_id(sigma_cuda_ops(), id, sizeof(id)),
			 -ENODEV);
	if (sigma_cuda_ops()->init(1) != 0)
		return; /* no GPU here */
	assert_true(sigma_ops_device(sigma_cuda_ops()) >= 0);
	assert_int_equal(sigma_ops_device_id(sigma_cuda_ops(), id, sizeof(id)),
			 0);
	assert_non_null(strchr(id, ':')); /* a PCI address, 0000:3b:00.0 */
	printf("cuda device %d at %s\n", sigma_ops_device(sigma_cuda_ops()),
	       id);
}

static void test_cuda(void **state)
{
	char err[256] = "", why[256] = "";
	const struct sigma_ops *o;
	int n = sigma_cuda_device_count(why, sizeof(why));

	(void)state;
	o = sigma_ops_select("cuda:fp16", err, sizeof(err));
	assert_null(o);
	if (!sigma_cuda_ops()) {
		assert_non_null(strstr(err, "this build has no CUDA path"));
		assert_null(sigma_ops_select("cuda", err, sizeof(err)));
		assert_non_null(strstr(err, "this build has no CUDA path"));
		return;
	}
	assert_non_null(strstr(err, "unknown precision 'fp16'"));
	o = sigma_ops_select("cuda:bf16", err, sizeof(err));
	if (n < 1) {
		assert_null(o);
		assert_non_null(strstr(err, "no CUDA device: "));
		printf("sigma_ops_select(cuda:bf16): %s\n", err);
		return;
	}
	assert_ptr_equal(o, sigma_cuda_ops());
	assert_string_equal(o->name, "cuda");
	assert_int_equal(sigma_cuda_get_precision(), SIGMA_CUDA_BF16);
	assert_ptr_equal(sigma_ops_select("cuda", err, sizeof(err)), o);
	assert_int_equal(sigma_cuda_get_precision(), SIGMA_CUDA_FP32);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_cpu),
	    cmocka_unit_test(test_bf16),
	    cmocka_unit_test(test_unknown),
	    cmocka_unit_test(test_cuda),
	    cmocka_unit_test(test_device),
	    cmocka_unit_test(test_pick_device),
	    cmocka_unit_test(test_attention_plan),
	    cmocka_unit_test(test_defer),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
