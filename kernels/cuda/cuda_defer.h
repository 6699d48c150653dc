/*
 * cuda_defer.h - device memory whose free is put off (ops.h, free and
 * release): cudaFree waits for every stream of the device, a collective's
 * on NCCL's stream too, so a free inside a step could hang the ranks
 * (each waiting in cudaFree for a collective its peers reach only later).
 * free() puts the pointer here; release(), called where no collective is
 * in flight, frees the lot. Plain C that nvcc compiles too, and that the
 * unit tests run on any machine (tests/unit/test_kernels_select.c).
 */
#ifndef SIGMA_CUDA_DEFER_H
#define SIGMA_CUDA_DEFER_H

#include <errno.h>
#include <stdlib.h>

struct cuda_defer {
	void **p;
	size_t n, cap;
};

/* keep p for later; 0, or -ENOMEM (the caller then frees it at once) */
static inline int cuda_defer_push(struct cuda_defer *l, void *p)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 16;
		void **q = (void **)realloc(l->p, cap * sizeof(*q));

		if (!q)
			return -ENOMEM;
		l->p = q;
		l->cap = cap;
	}
	l->p[l->n++] = p;
	return 0;
}

/* free_now on each kept pointer, in the order kept; how many */
static inline size_t cuda_defer_drain(struct cuda_defer *l,
				      void (*free_now)(void *))
{
	size_t n = l->n;

	for (size_t i = 0; i < n; i++)
		free_now(l->p[i]);
	l->n = 0;
	return n;
}

#endif /* SIGMA_CUDA_DEFER_H */
