/*
 * blas_core.c - the BLAS's kernel against the CPU's vector ISA
 * (blas_core.h). The CPU is read through the compiler's CPUID builtins.
 */
#include "config.h"

#include <cblas.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "blas_core.h"

void cpu_features_read(struct cpu_features *f)
{
	__builtin_cpu_init();
	memset(f, 0, sizeof(*f));
	f->amd = __builtin_cpu_is("amd");
	f->isa = CPU_ISA_SSE3;
	if (__builtin_cpu_supports("avx"))
		f->isa = CPU_ISA_AVX;
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
		f->isa = CPU_ISA_AVX2;
	if (__builtin_cpu_supports("avx512f") &&
	    __builtin_cpu_supports("avx512cd") &&
	    __builtin_cpu_supports("avx512bw") &&
	    __builtin_cpu_supports("avx512dq") &&
	    __builtin_cpu_supports("avx512vl"))
		f->isa = CPU_ISA_AVX512;
#if __GNUC__ >= 11
	f->avx512_bf16 = __builtin_cpu_supports("avx512bf16");
	f->amx = __builtin_cpu_supports("amx-bf16");
#endif
}

const char *cpu_isa_name(enum cpu_isa isa)
{
	static const char *const names[] = { "sse3", "avx", "avx2", "avx512" };

	return (unsigned)isa < sizeof(names) / sizeof(names[0]) ? names[isa]
								: "?";
}

void cpu_features_describe(const struct cpu_features *f, char *buf,
			   size_t len)
{
	snprintf(buf, len, "%s%s%s%s", cpu_isa_name(f->isa),
		 f->isa >= CPU_ISA_AVX2 ? " fma" : "",
		 f->avx512_bf16 ? " avx512_bf16" : "", f->amx ? " amx" : "");
}

/* OpenBLAS's x86-64 kernels (driver/others/dynamic.c), by the ISA each
 * needs; the older ones all need SSE3 at most */
static const struct {
	const char *core;
	enum cpu_isa isa;
} cores[] = {
	{ "Prescott", CPU_ISA_SSE3 },	  { "Core2", CPU_ISA_SSE3 },
	{ "Penryn", CPU_ISA_SSE3 },	  { "Dunnington", CPU_ISA_SSE3 },
	{ "Nehalem", CPU_ISA_SSE3 },	  { "Atom", CPU_ISA_SSE3 },
	{ "Opteron", CPU_ISA_SSE3 },	  { "Opteron_SSE3", CPU_ISA_SSE3 },
	{ "Barcelona", CPU_ISA_SSE3 },	  { "Nano", CPU_ISA_SSE3 },
	{ "Sandybridge", CPU_ISA_AVX },	  { "Bulldozer", CPU_ISA_AVX },
	{ "Piledriver", CPU_ISA_AVX },	  { "Steamroller", CPU_ISA_AVX },
	{ "Excavator", CPU_ISA_AVX2 },	  { "Haswell", CPU_ISA_AVX2 },
	{ "Zen", CPU_ISA_AVX2 },	  { "SkylakeX", CPU_ISA_AVX512 },
	{ "CooperLake", CPU_ISA_AVX512 }, { "SapphireRapids", CPU_ISA_AVX512 },
};

int blas_core_isa(const char *core)
{
	for (size_t i = 0; core && i < sizeof(cores) / sizeof(cores[0]); i++)
		if (!strcasecmp(core, cores[i].core))
			return (int)cores[i].isa;
	return -1;
}

const char *blas_core_best(const struct cpu_features *f)
{
	switch (f->isa) {
	case CPU_ISA_AVX512:
		return "SkylakeX";
	case CPU_ISA_AVX2:
		return f->amd ? "Zen" : "Haswell";
	case CPU_ISA_AVX:
		return "Sandybridge";
	default:
		return "Prescott";
	}
}

const char *blas_core_now(void)
{
#ifdef HAVE_OPENBLAS_SET_NUM_THREADS
	const char *c = openblas_get_corename();

	return c && *c ? c : "unknown";
#else
	return "unknown";
#endif
}

bool blas_core_below(const char *core, const struct cpu_features *f)
{
	int have = blas_core_isa(core);

	return have >= 0 && have < (int)f->isa;
}
