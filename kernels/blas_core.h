/*
 * blas_core.h - which kernel the BLAS runs, and which one this CPU allows.
 *
 * OpenBLAS picks its kernel (its "core": Prescott, Haswell, Zen, SkylakeX,
 * ...) from the CPU model when it is loaded, and falls back to an old one
 * for a model newer than it knows: on a CPU with AVX-512 that can cost
 * three quarters of the GEMM rate. OPENBLAS_CORETYPE, read only when the
 * library loads, names the kernel instead. Here the CPU is judged by its
 * CPUID feature bits, never by its model number, and each kernel by the
 * vector ISA it needs (docs/sigma-train.md, "The BLAS kernel").
 */
#ifndef SIGMA_BLAS_CORE_H
#define SIGMA_BLAS_CORE_H

#include <stdbool.h>
#include <stddef.h>

/* vector ISA levels, each implying the ones below */
enum cpu_isa {
	CPU_ISA_SSE3,	/* x86-64 with SSE3: OpenBLAS's Prescott */
	CPU_ISA_AVX,	/* 256-bit, no FMA: Sandybridge */
	CPU_ISA_AVX2,	/* AVX2 and FMA: Haswell, Zen */
	CPU_ISA_AVX512, /* AVX-512 F, CD, BW, DQ, VL: SkylakeX */
};

struct cpu_features {
	enum cpu_isa isa;
	bool amd;	  /* AuthenticAMD: the AVX2 kernel is Zen */
	bool avx512_bf16; /* bf16 dot products */
	bool amx;	  /* AMX tiles (bf16) */
};

/* this CPU's, from CPUID */
void cpu_features_read(struct cpu_features *f);

/* "sse3", "avx", "avx2", "avx512" */
const char *cpu_isa_name(enum cpu_isa isa);

/* the CPU's features as one line, e.g. "avx2 fma" or "avx512 avx512_bf16" */
void cpu_features_describe(const struct cpu_features *f, char *buf,
			   size_t len);

/*
 * The ISA an OpenBLAS kernel name needs (case as the library prints it,
 * compared without case), or -1 for a name not known here.
 */
int blas_core_isa(const char *core);

/* the best kernel of this OpenBLAS (0.3.21: SkylakeX at most) for f */
const char *blas_core_best(const struct cpu_features *f);

/* the kernel the loaded BLAS runs (openblas_get_corename), or "unknown" */
const char *blas_core_now(void);

/*
 * Whether core runs below what f allows: the case to correct. False for a
 * kernel not known here (it is left as the library chose).
 */
bool blas_core_below(const char *core, const struct cpu_features *f);

#endif /* SIGMA_BLAS_CORE_H */
