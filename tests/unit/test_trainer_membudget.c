/*
 * test_trainer_membudget.c - where a rank's memory is held against what it
 * may use (trainer/membudget.c): the host's limit for the CPU kernels, and
 * for kernels on a device the device's memory for the model and the host's
 * for the checkpoint copies. A GPU job on a machine whose host memory is
 * small next to its GPU's was refused for host memory it never uses.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "membudget.h"
#include "ops.h"

#define MiB (1ull << 20)
#define GiB (1ull << 30)

static int fake_rc;
static uint64_t fake_free, fake_total;

static int fake_mem_info(uint64_t *free_bytes, uint64_t *total_bytes)
{
	*free_bytes = fake_free;
	*total_bytes = fake_total;
	return fake_rc;
}

static const struct sigma_ops fake_gpu = {.name = "fake",
					  .mem_info = fake_mem_info};
static const struct sigma_ops fake_cpu = {.name = "cpu"};

/* the 0.87 B-parameter stage's shape: 13 GiB of state and activations,
 * 10 GiB of checkpoint copies */
static const struct mem_need big = {.state = 10 * GiB,
				    .acts = 3 * GiB,
				    .staging = 10 * GiB,
				    .total = 23 * GiB};

static void test_device_limit(void **state)
{
	struct mem_limit dev;

	(void)state;
	assert_int_equal(mem_device_limit(&fake_cpu, &dev), 0);
	assert_int_equal(dev.bytes, 0);
	fake_rc = 0;
	fake_free = 139 * GiB;
	fake_total = 141 * GiB;
	assert_int_equal(mem_device_limit(&fake_gpu, &dev), 0);
	assert_true(dev.bytes == 139 * GiB);
	assert_non_null(strstr(dev.why, "142336 MiB free of 144384 MiB"));
	fake_rc = -EIO;
	assert_int_equal(mem_device_limit(&fake_gpu, &dev), -EIO);
}

static void test_short(void **state)
{
	struct mem_limit host = {.bytes = 16 * GiB, .why = "host"};
	struct mem_limit dev = {.bytes = 0};
	const char *what;
	uint64_t needed;

	(void)state;
	/* the CPU kernels: everything in host memory, 23 GiB of 16 */
	assert_ptr_equal(mem_short(&big, &host, &dev, &needed, &what), &host);
	assert_true(needed == 23 * GiB);
	assert_string_equal(what, "");
	/* on a 139 GiB GPU the same job fits: 13 GiB there, 10 on the host */
	dev.bytes = 139 * GiB;
	assert_null(mem_short(&big, &host, &dev, &needed, &what));
	/* a GPU too small is named, with the bytes held on it */
	dev.bytes = 12 * GiB;
	assert_ptr_equal(mem_short(&big, &host, &dev, &needed, &what), &dev);
	assert_true(needed == 13 * GiB);
	assert_string_equal(what, " of device memory");
	/* the copies still need the host's memory */
	dev.bytes = 139 * GiB;
	host.bytes = 9 * GiB;
	assert_ptr_equal(mem_short(&big, &host, &dev, &needed, &what), &host);
	assert_true(needed == 10 * GiB);
	assert_string_equal(what, " of host memory for checkpoint copies");
	/* an unknown limit (0) holds anything */
	host.bytes = 0;
	dev.bytes = 0;
	assert_null(mem_short(&big, &host, &dev, &needed, &what));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_device_limit),
		cmocka_unit_test(test_short),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
