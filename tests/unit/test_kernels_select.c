/*
 * test_kernels_select.c - sigma_ops_select: the device names, and the
 * messages for an unknown name, a build without CUDA and a machine without
 * a GPU. Runs everywhere; on a GPU machine "cuda" must give the CUDA table.
 */
#include "config.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "ops.h"
#include "bf16.h"
#include "select.h"
#include "cuda/sigma_cuda.h"

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
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
