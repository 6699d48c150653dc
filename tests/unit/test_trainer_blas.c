/*
 * test_trainer_blas.c - the BLAS kernel sigma-train runs:
 *
 *   - blas_core.h's judgement, on feature sets of CPUs that are not this
 *     one: which kernel each allows, which kernels are below it;
 *   - sigma-train as a program on this CPU: the library's choice as it
 *     is, a user's OPENBLAS_CORETYPE kept, and a start as if the library
 *     had chosen Prescott (what it does on a CPU newer than it knows)
 *     corrected to the kernel this CPU allows, with the same loss as a
 *     start on that kernel from the first; a resume on another kernel
 *     said; sgemm --check.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "blas_core.h"
#include "train_cli.h"

static void judge(void **state)
{
	struct cpu_features emr = { CPU_ISA_AVX512, false, true, true };
	struct cpu_features zen3 = { CPU_ISA_AVX2, true, false, false };
	struct cpu_features hsw = { CPU_ISA_AVX2, false, false, false };
	struct cpu_features old = { CPU_ISA_SSE3, false, false, false };
	char buf[64];

	(void)state;
	assert_string_equal(blas_core_best(&emr), "SkylakeX");
	assert_string_equal(blas_core_best(&zen3), "Zen");
	assert_string_equal(blas_core_best(&hsw), "Haswell");
	assert_string_equal(blas_core_best(&old), "Prescott");
	/* the case of a CPU newer than the library: Prescott on AVX-512 */
	assert_true(blas_core_below("Prescott", &emr));
	assert_true(blas_core_below("Haswell", &emr));
	assert_true(blas_core_below("Sandybridge", &hsw));
	assert_false(blas_core_below("SkylakeX", &emr));
	assert_false(blas_core_below("Zen", &zen3));
	assert_false(blas_core_below("HASWELL", &zen3)); /* any case */
	assert_false(blas_core_below("Prescott", &old));
	/* a name not known here is left as the library chose */
	assert_int_equal(blas_core_isa("FutureLake"), -1);
	assert_false(blas_core_below("FutureLake", &old));
	assert_false(blas_core_below(NULL, &emr));
	cpu_features_describe(&emr, buf, sizeof(buf));
	assert_string_equal(buf, "avx512 fma avx512_bf16 amx");
	cpu_features_describe(&zen3, buf, sizeof(buf));
	assert_string_equal(buf, "avx2 fma");
}

/* the final loss line of the last run */
static void final_loss(char *buf, size_t len)
{
	char *out = train_cli_slurp("out"), *p;

	assert_non_null(out);
	p = strstr(out, "done: ");
	assert_non_null(p);
	snprintf(buf, len, "%.*s", (int)strcspn(p, "\n"), p);
	if ((p = strstr(buf, ", peak RSS")))
		*p = '\0';
	free(out);
}

/* environment, program, extra flags */
#define RUN                                                                    \
	"OMP_NUM_THREADS=2 %s%s --train train.tok --preset small --steps 6 " \
	"--warmup 1 --log-every 6%s"

/*
 * The best kernel for this CPU as sigma-train sees it: under valgrind this
 * test's own CPUID is valgrind's, not the CPU's, so the program is asked.
 */
static void best_kernel(char *buf, size_t len)
{
	char *out, *p;

	assert_int_equal(train_cli_run("%s sgemm --size 64 --reps 1",
				       train_cli_prog),
			 0);
	out = train_cli_slurp("out");
	assert_non_null(out);
	p = strstr(out, "best kernel ");
	assert_non_null(p);
	p += strlen("best kernel ");
	snprintf(buf, len, "%.*s", (int)strcspn(p, "\n"), p);
	free(out);
}

static void program(void **state)
{
	char best[64], want[256], direct[256], picked[256];

	(void)state;
	best_kernel(best, sizeof(best));
	assert_int_equal(train_cli_run("%s sgemm --check", train_cli_prog), 0);
	assert_true(train_cli_out_has("sgemm --check: ok"));
	/* a user's own choice wins, and the log says what the CPU allows */
	assert_int_equal(train_cli_run(RUN, "OPENBLAS_CORETYPE=Prescott ",
				       train_cli_prog, ""),
			 0);
	assert_true(train_cli_out_has("BLAS kernel Prescott (OPENBLAS_CORETYPE=Prescott)"));
	/* on the kernel this CPU allows from the start */
	snprintf(want, sizeof(want), "OPENBLAS_CORETYPE=%s ", best);
	assert_int_equal(train_cli_run(RUN, want, train_cli_prog, ""), 0);
	final_loss(direct, sizeof(direct));
	/* as if the library had chosen Prescott: corrected, same numbers */
	if (strcmp(best, "Prescott")) {
		assert_int_equal(train_cli_run(RUN,
					       "SIGMA_BLAS_PICK=as-if:Prescott ",
					       train_cli_prog, ""),
				 0);
		snprintf(want, sizeof(want),
			 "BLAS kernel %s for this CPU (", best);
		assert_true(train_cli_out_has(want));
		assert_true(train_cli_out_has("in place of the library's choice Prescott (verified)"));
		final_loss(picked, sizeof(picked));
		assert_string_equal(picked, direct);
		/* --blas-pick off: nothing is corrected (nor pretended) */
		assert_int_equal(train_cli_run(RUN,
					       "SIGMA_BLAS_PICK=as-if:Prescott ",
					       train_cli_prog, " --blas-pick off"),
				 0);
		assert_false(train_cli_out_has("in place of"));
		/* a resume on another kernel is allowed, and says so */
		assert_int_equal(train_cli_run(RUN, "OPENBLAS_CORETYPE=Prescott ",
					       train_cli_prog,
					       " --ckpt-dir ck --stop-at 3"),
				 75);
		assert_int_equal(train_cli_run(RUN, "", train_cli_prog,
					       " --ckpt-dir ck --resume"),
				 0);
		assert_true(train_cli_out_has("written with the BLAS kernel Prescott"));
	}
}

static int setup(void **state)
{
	(void)state;
	return train_cli_setup_tokens("/tmp/sigma-test-blas.XXXXXX");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(judge),
		cmocka_unit_test(program),
	};

	return cmocka_run_group_tests(tests, setup, train_cli_group_teardown);
}
