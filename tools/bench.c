/* SPDX-License-Identifier: MIT */
/*
 * asyncpool bench: acquire+release pairs per second, over repetitions,
 * beside a pthread-mutex freelist (mutex-baseline) and two uncontended
 * CAS on a private word (cas2-baseline), all in the same run.
 *
 * ns_per_op is the wall time of one acquire+release pair as one thread
 * sees it; mops_per_s is the total pairs per second of all threads, in
 * millions.  Medians over the repetitions, with min and max.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <asyncpool.h>
#include "tool.h"

/* ---- the mutex baseline: an index stack under one pthread mutex ---- */
struct mutex_pool {
	pthread_mutex_t lock;
	uint32_t *stack;
	uint32_t top;
};

static struct mutex_pool *mutex_pool_new(uint32_t n)
{
	struct mutex_pool *m = calloc(1, sizeof(*m));

	m->stack = malloc(sizeof(uint32_t) * n);
	for (uint32_t i = 0; i < n; i++)
		m->stack[i] = i;
	m->top = n;
	pthread_mutex_init(&m->lock, NULL);
	return m;
}

static int mutex_pool_get(struct mutex_pool *m, uint32_t *idx)
{
	int rc = -ENOBUFS;

	pthread_mutex_lock(&m->lock);
	if (m->top) {
		*idx = m->stack[--m->top];
		rc = 0;
	}
	pthread_mutex_unlock(&m->lock);
	return rc;
}

static void mutex_pool_put(struct mutex_pool *m, uint32_t idx)
{
	pthread_mutex_lock(&m->lock);
	m->stack[m->top++] = idx;
	pthread_mutex_unlock(&m->lock);
}

static void mutex_pool_free(struct mutex_pool *m)
{
	pthread_mutex_destroy(&m->lock);
	free(m->stack);
	free(m);
}

/* ---- cases ---- */
enum kind { K_POOL, K_MUTEX, K_CAS2 };

struct run {
	enum kind kind;
	struct asyncpool *pool;
	struct mutex_pool *mutex;
	unsigned long ops;
	atomic_uint ready;
	atomic_int go;
	unsigned threads;
};

static volatile uint64_t sink;

static void *bench_thread(void *arg)
{
	struct run *r = arg;
	_Atomic uint64_t word = 0;

	atomic_fetch_add(&r->ready, 1);
	while (!atomic_load_explicit(&r->go, memory_order_acquire))
		;
	switch (r->kind) {
	case K_POOL:
		for (unsigned long i = 0; i < r->ops; i++) {
			struct asyncpool_lease l;

			if (asyncpool_acquire(r->pool, &l) == 0)
				asyncpool_lease_release(&l);
		}
		break;
	case K_MUTEX:
		for (unsigned long i = 0; i < r->ops; i++) {
			uint32_t idx;

			if (mutex_pool_get(r->mutex, &idx) == 0)
				mutex_pool_put(r->mutex, idx);
		}
		break;
	case K_CAS2:
		for (unsigned long i = 0; i < r->ops; i++) {
			uint64_t v = atomic_load_explicit(&word, memory_order_relaxed);

			atomic_compare_exchange_strong(&word, &v, v + 1);
			v = atomic_load_explicit(&word, memory_order_relaxed);
			atomic_compare_exchange_strong(&word, &v, v + 1);
		}
		sink = atomic_load(&word);
		break;
	}
	return NULL;
}

/* One repetition: elapsed wall nanoseconds for threads x ops pairs. */
static uint64_t run_once(struct run *r)
{
	pthread_t *t = calloc(r->threads, sizeof(*t));
	uint64_t start;

	atomic_store(&r->ready, 0);
	atomic_store(&r->go, 0);
	for (unsigned i = 0; i < r->threads; i++)
		pthread_create(&t[i], NULL, bench_thread, r);
	while (atomic_load(&r->ready) != r->threads)
		;
	start = tool_now_ns();
	atomic_store_explicit(&r->go, 1, memory_order_release);
	for (unsigned i = 0; i < r->threads; i++)
		pthread_join(t[i], NULL);
	free(t);
	return tool_now_ns() - start;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

struct result {
	const char *name;
	unsigned threads;
	double ns[3];           /* median, min, max per pair per thread */
	double mops[3];         /* median, min, max, all threads */
};

static void measure(struct run *r, unsigned reps, struct result *out)
{
	double ns[64], mops[64];

	run_once(r);            /* warm up: page faults, caches, frequency */
	for (unsigned i = 0; i < reps; i++) {
		uint64_t el = run_once(r);

		ns[i] = (double)el / (double)r->ops;
		mops[i] = (double)r->ops * r->threads / ((double)el / 1000.0);
	}
	qsort(ns, reps, sizeof(double), cmp_double);
	qsort(mops, reps, sizeof(double), cmp_double);
	out->threads = r->threads;
	out->ns[0] = ns[reps / 2];
	out->ns[1] = ns[0];
	out->ns[2] = ns[reps - 1];
	out->mops[0] = mops[reps / 2];
	out->mops[1] = mops[0];
	out->mops[2] = mops[reps - 1];
}

static void print_table(const struct result *res, int n, unsigned reps)
{
	printf("%-22s %7s %10s %10s %10s %12s\n", "case", "threads", "ns/op", "min", "max", "Mops/s");
	for (int i = 0; i < n; i++)
		printf("%-22s %7u %10.2f %10.2f %10.2f %12.2f\n", res[i].name, res[i].threads,
		       res[i].ns[0], res[i].ns[1], res[i].ns[2], res[i].mops[0]);
	printf("(medians of %u repetitions; one op is an acquire+release pair)\n", reps);
}

static void print_json(const struct result *res, int n, unsigned reps, unsigned long ops)
{
	printf("{\"library\":\"libasyncpool\",\"version\":\"%s\",\"repetitions\":%u,"
	       "\"ops_per_thread\":%lu,\"cpus\":%ld,\"results\":[",
	       asyncpool_version(), reps, ops, sysconf(_SC_NPROCESSORS_ONLN));
	for (int i = 0; i < n; i++)
		printf("%s{\"name\":\"%s\",\"threads\":%u,\"ns_per_op\":%.3f,\"mops_per_s\":%.3f,"
		       "\"ns_per_op_min\":%.3f,\"ns_per_op_max\":%.3f,"
		       "\"mops_per_s_min\":%.3f,\"mops_per_s_max\":%.3f}",
		       i ? "," : "", res[i].name, res[i].threads, res[i].ns[0], res[i].mops[0],
		       res[i].ns[1], res[i].ns[2], res[i].mops[1], res[i].mops[2]);
	printf("]}\n");
}

int cmd_bench(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "threads", required_argument, NULL, 't' },
		{ "ops", required_argument, NULL, 'n' },
		{ "reps", required_argument, NULL, 'r' },
		{ "buffers", required_argument, NULL, 'b' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	unsigned threads = (unsigned)sysconf(_SC_NPROCESSORS_ONLN), reps = 5;
	unsigned long ops = 2000000;
	uint32_t buffers = 1024;
	struct result res[8];
	struct asyncpool_proactor *p;
	struct run r;
	int json = 0, n = 0, c, rc;

	while ((c = getopt_long(argc, argv, "jt:n:r:b:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'j': json = 1; break;
		case 't': threads = (unsigned)tool_number("--threads", optarg, 1024); break;
		case 'n': ops = tool_number("--ops", optarg, 1ul << 40); break;
		case 'r': reps = (unsigned)tool_number("--reps", optarg, 64); break;
		case 'b': buffers = (uint32_t)tool_number("--buffers", optarg, ASYNCPOOL_MAX_BUFFERS); break;
		case 'h':
			puts("Usage: asyncpool bench [--json] [--threads N] [--ops N] [--reps N] [--buffers N]");
			return 0;
		default:
			return 2;
		}
	}
	if (threads < 2)
		threads = 2;

	memset(&r, 0, sizeof(r));
	r.ops = ops;
	rc = tool_memory_pool(&p, &r.pool, 64, buffers);
	if (rc) {
		fprintf(stderr, "asyncpool bench: cannot create a pool: %s\n", strerror(-rc));
		return 1;
	}
	r.mutex = mutex_pool_new(buffers);

	r.kind = K_POOL; r.threads = 1; res[n].name = "pool"; measure(&r, reps, &res[n++]);
	r.kind = K_POOL; r.threads = threads; res[n].name = "pool-threads"; measure(&r, reps, &res[n++]);
	r.kind = K_MUTEX; r.threads = 1; res[n].name = "mutex-baseline"; measure(&r, reps, &res[n++]);
	r.kind = K_MUTEX; r.threads = threads; res[n].name = "mutex-baseline-threads"; measure(&r, reps, &res[n++]);
	r.kind = K_CAS2; r.threads = 1; res[n].name = "cas2-baseline"; measure(&r, reps, &res[n++]);

	if (json)
		print_json(res, n, reps, ops);
	else
		print_table(res, n, reps);
	mutex_pool_free(r.mutex);
	tool_memory_pool_free(p, r.pool);
	return 0;
}
