/*
 * straggler.c - which ranks are slow (straggler.h): medians, MADs and the
 * band a rank is judged by.
 */
#include <math.h>
#include <stdlib.h>

#include "straggler.h"

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

double straggler_median(double *v, size_t n)
{
	if (n == 0)
		return 0.0;
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void straggler_column(const double *win, int nwin, int stride, int r,
		      double *med, double *mad)
{
	double v[STRAGGLER_MAX_WINDOW], d[STRAGGLER_MAX_WINDOW];
	int n = nwin < STRAGGLER_MAX_WINDOW ? nwin : STRAGGLER_MAX_WINDOW;

	for (int i = 0; i < n; i++)
		v[i] = win[(size_t)i * (size_t)stride + (size_t)r];
	*med = straggler_median(v, (size_t)n);
	for (int i = 0; i < n; i++)
		d[i] = fabs(v[i] - *med);
	*mad = straggler_median(d, (size_t)n);
}

int straggler_judge(const struct straggler_band *b, double med, double mad,
		    double M, bool *slow, int *streak)
{
	double x = med - M;
	bool now = *slow ? med > (1.0 + b->slow) / 2 * M && x > b->floor / 2
			 : med > b->slow * M && x > 3 * mad && x > b->floor;
	int *s = streak;

	*s = now ? (*s > 0 ? *s + 1 : 1) : (*s < 0 ? *s - 1 : -1);
	if (*slow == now || (now ? *s : -*s) < b->confirm)
		return 0;
	*slow = now;
	return now ? 1 : -1;
}
