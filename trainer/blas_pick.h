/*
 * blas_pick.h - sigma-train runs the best BLAS kernel the CPU allows
 * (blas_core.h, docs/sigma-train.md "The BLAS kernel").
 *
 * When OpenBLAS chose a kernel below the CPU's vector ISA (an old one
 * for a CPU newer than it knows), the process runs the known-answer check
 * of "sigma-train sgemm --check" under the better kernel in a child, and
 * when that passes executes itself again with OPENBLAS_CORETYPE set,
 * before anything else starts (PMIx, threads, files). A user's own
 * OPENBLAS_CORETYPE always wins; SIGMA_BLAS_PICK=off or --blas-pick off
 * leaves the library's choice.
 */
#ifndef SIGMA_TRAIN_BLAS_PICK_H
#define SIGMA_TRAIN_BLAS_PICK_H

#include <stddef.h>

/* returns only when this process keeps its kernel (or exec failed) */
void blas_pick(int argc, char **argv);

/* one line for the log: the kernel, the CPU, and who chose it */
void blas_pick_describe(char *buf, size_t len);

#endif /* SIGMA_TRAIN_BLAS_PICK_H */
