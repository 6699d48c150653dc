/*
 * bf16.h - matrix products in bfloat16 for the layers that run in reduced
 * precision (sigma-train --precision=bf16, docs/guardrails.md).
 *
 * A struct sigma_bf16 offers an op table identical to its fp32 table
 * except for matmul_forward and grouped_matmul_forward: these round their
 * inputs and weights to bf16 (round to nearest even), multiply with fp32
 * accumulation, and round each output (the activation) to bf16. The
 * master weights, the optimizer and the backward pass stay fp32.
 *
 * Every output that is not finite after the rounding is an overflow; the
 * table adds their number to the counter named by begin(). The counter
 * and the test hook are state of the implementation, meant for one model
 * driven by one thread (the kernels themselves are OpenMP-parallel).
 */
#ifndef SIGMA_BF16_H
#define SIGMA_BF16_H

#include <stdint.h>

#include "ops.h"

struct sigma_bf16 {
	const char *name; /* "cpu-avx512bf16", "cpu-emulated" */
	/* the table whose dense products run in bf16 */
	const struct sigma_ops *ops;
	/*
	 * Direct the overflow counts of the following bf16 products to
	 * *overflow (adds; NULL: not counted). With inject, the next product
	 * forces its first output to +inf, as an overflowing unit would (the
	 * fault injection of docs/guardrails.md), and counts it.
	 */
	void (*begin)(uint64_t *overflow, int inject);
};

/* The CPU implementation: AVX-512 BF16 where the CPU has it, else the
 * same arithmetic in portable C. */
extern const struct sigma_bf16 sigma_bf16_cpu;

/* round to bf16 and back (nearest even; NaN stays NaN) */
float sigma_bf16_round(float x);
/* 1 when the CPU path uses AVX-512 BF16 instructions */
int sigma_bf16_native(void);
/* tests: on, the portable path even where the CPU has AVX-512 BF16 */
void sigma_bf16_force_portable(int on);

#endif /* SIGMA_BF16_H */
