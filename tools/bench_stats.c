/* SPDX-License-Identifier: MIT */
/* The summaries of `asyncpool bench`: median, min and max over repetitions. */
#include "config.h"

#include <stdlib.h>

#include "tool.h"

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Sort the n values of v; out[] = their median, min and max. */
void bench_spread(double out[3], double *v, unsigned n)
{
	qsort(v, n, sizeof(double), cmp_double);
	out[0] = v[n / 2];
	out[1] = v[0];
	out[2] = v[n - 1];
}

/* The median, min and max of reps timings of ops pairs on each of threads. */
void bench_summarize(struct bench_result *out, const uint64_t *elapsed, unsigned reps,
		     unsigned long ops, unsigned threads, unsigned long ops_total)
{
	double ns[64], mops[64];

	for (unsigned i = 0; i < reps; i++) {
		ns[i] = (double)elapsed[i] / (double)ops;
		mops[i] = (double)ops_total / ((double)elapsed[i] / 1000.0);
	}
	out->threads = threads;
	bench_spread(out->ns, ns, reps);
	bench_spread(out->mops, mops, reps);
}
