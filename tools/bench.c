/* SPDX-License-Identifier: MIT */
/*
 * asyncpool bench: acquire+release pairs per second, over repetitions,
 * with and without per-thread caches, beside a pthread-mutex freelist
 * (mutex-baseline) and two uncontended CAS on a private word
 * (cas2-baseline), all in the same run; handoff-queue-baseline is the
 * hand-off queue alone, passing lease-sized values without a pool.
 *
 * ns_per_op is the wall time of one acquire+release pair as one thread
 * sees it (for bulk32: per buffer; for handoff: per lease handed over);
 * mops_per_s is the total pairs per second of all threads, in millions.
 * Medians over the repetitions, with min and max.
 *
 * --sweep measures the cost per pair from 64 to 16M buffers after the
 * freelist has been put in a random order.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <asyncpool.h>
#include "tool.h"

#define BENCH_CACHE 256u        /* per-thread cache of the -cached cases */
#define BULK 32u

/* ---- the mutex baseline: an index stack under one pthread mutex ---- */
struct mutex_pool {
	pthread_mutex_t lock;
	uint32_t *stack;
	uint32_t top;
};

static struct mutex_pool *mutex_pool_new(uint32_t n)
{
	struct mutex_pool *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	m->stack = malloc(sizeof(uint32_t) * n);
	if (!m->stack) {
		free(m);
		return NULL;
	}
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

/*
 * ---- a single-producer single-consumer ring of leases ----
 * Each side keeps its position private and publishes it every
 * RING_BATCH entries, or before it waits, so that the two index lines
 * cross between the cores once per batch rather than once per lease.
 */
#define RING_SIZE 256u          /* a power of two */
#define RING_BATCH 16u

struct spsc {
	_Alignas(64) _Atomic uint32_t head;     /* published by the producer */
	uint32_t head_local, tail_cache;        /* the producer's */
	_Alignas(64) _Atomic uint32_t tail;     /* published by the consumer */
	uint32_t tail_local, head_cache;        /* the consumer's */
	_Alignas(64) struct asyncpool_lease slot[RING_SIZE];
};

static void spsc_publish_head(struct spsc *q)
{
	atomic_store_explicit(&q->head, q->head_local, memory_order_release);
}

static bool spsc_push(struct spsc *q, const struct asyncpool_lease *l)
{
	uint32_t h = q->head_local;

	if (h - q->tail_cache == RING_SIZE) {
		spsc_publish_head(q);
		q->tail_cache = atomic_load_explicit(&q->tail, memory_order_acquire);
		if (h - q->tail_cache == RING_SIZE)
			return false;
	}
	q->slot[h & (RING_SIZE - 1)] = *l;
	q->head_local = ++h;
	if (h % RING_BATCH == 0)
		spsc_publish_head(q);
	return true;
}

static bool spsc_pop(struct spsc *q, struct asyncpool_lease *l)
{
	uint32_t t = q->tail_local;

	if (t == q->head_cache) {
		atomic_store_explicit(&q->tail, t, memory_order_release);
		q->head_cache = atomic_load_explicit(&q->head, memory_order_acquire);
		if (t == q->head_cache)
			return false;
	}
	*l = q->slot[t & (RING_SIZE - 1)];
	q->tail_local = ++t;
	if (t % RING_BATCH == 0)
		atomic_store_explicit(&q->tail, t, memory_order_release);
	return true;
}

/* ---- cases ---- */
struct bench_case;

struct run {
	const struct bench_case *c;
	struct asyncpool *pool;         /* NULL for the baselines */
	struct mutex_pool *mutex;
	struct spsc *ring;
	unsigned long ops;
	atomic_uint ready;
	atomic_uint next_id;
	atomic_int go;
	unsigned threads;
};

/*
 * One case of `asyncpool bench`, one line of the table.  A new case is
 * one more line in cases[] below (and its name in asyncpool(1)).
 */
struct bench_case {
	const char *name;
	const char *description;
	/* The loop of thread number id (0 to threads - 1) for r->ops pairs;
	 * NULL for BENCH_PROCESSES. */
	void (*body)(struct run *r, unsigned id);
	unsigned threads;               /* 0: the --threads option */
	unsigned flags;
};
#define BENCH_CACHED 1u         /* the pool with per-thread caches */
#define BENCH_NO_POOL 2u        /* a baseline: no pool at all */
#define BENCH_PER_LEASE 4u      /* one op per lease handed over, not per thread */
#define BENCH_PROCESSES 8u      /* a shared pool in two processes (bench_shared.c) */
#define BENCH_WAKE 16u          /* wake-up latency of a waiter (bench_wait.c) */

static volatile uint64_t sink;

static void body_pool(struct run *r, unsigned id)
{
	(void)id;
	for (unsigned long i = 0; i < r->ops; i++) {
		struct asyncpool_lease l;

		if (asyncpool_acquire(r->pool, &l) == 0)
			asyncpool_lease_release(&l);
	}
}

static void body_bulk(struct run *r, unsigned id)
{
	struct asyncpool_lease l[BULK];

	(void)id;
	for (unsigned long i = 0; i < r->ops; i += BULK)
		if (asyncpool_acquire_bulk(r->pool, l, BULK) == 0)
			asyncpool_release_bulk(l, BULK);
}

static void body_tokens(struct run *r, unsigned id)
{
	uint64_t t[BULK];

	(void)id;
	for (unsigned long i = 0; i < r->ops; i += BULK)
		if (asyncpool_acquire_tokens(r->pool, t, BULK) == 0)
			(void)asyncpool_release_tokens(r->pool, t, BULK);
}

/* Thread 0 acquires (or makes up) leases and queues them; thread 1 takes
 * them off the queue and releases them. */
static void body_handoff(struct run *r, unsigned id)
{
	struct asyncpool_lease l;
	unsigned long done = 0;

	/* Waits yield now and then: on a busy machine the other side may
	 * need this CPU to make progress. */
	memset(&l, 0, sizeof(l));
	if (id == 0) {
		while (done < r->ops) {
			unsigned spins = 0;

			if (r->pool && asyncpool_acquire(r->pool, &l)) {
				spsc_publish_head(r->ring);
				sched_yield();  /* the other side holds them all */
				continue;
			}
			while (!spsc_push(r->ring, &l))
				if (++spins % 256 == 0)
					sched_yield();
			done++;
		}
		spsc_publish_head(r->ring);
	} else {
		unsigned spins = 0;

		while (done < r->ops) {
			if (!spsc_pop(r->ring, &l)) {
				if (++spins % 256 == 0)
					sched_yield();
				continue;
			}
			if (r->pool)
				asyncpool_lease_release(&l);
			done++;
		}
	}
}

static void body_mutex(struct run *r, unsigned id)
{
	(void)id;
	for (unsigned long i = 0; i < r->ops; i++) {
		uint32_t idx;

		if (mutex_pool_get(r->mutex, &idx) == 0)
			mutex_pool_put(r->mutex, idx);
	}
}

static void body_cas2(struct run *r, unsigned id)
{
	_Atomic uint64_t word = 0;

	(void)id;
	for (unsigned long i = 0; i < r->ops; i++) {
		uint64_t v = atomic_load_explicit(&word, memory_order_relaxed);

		atomic_compare_exchange_strong(&word, &v, v + 1);
		v = atomic_load_explicit(&word, memory_order_relaxed);
		atomic_compare_exchange_strong(&word, &v, v + 1);
	}
	sink = atomic_load(&word);
}

/* In the order of the table and of the JSON results. */
static const struct bench_case cases[] = {
	{ "pool", "one thread acquires and releases", body_pool, 1, 0 },
	{ "pool-cached", "the same, with a per-thread cache", body_pool, 1, BENCH_CACHED },
	{ "pool-threads", "every thread acquires and releases", body_pool, 0, 0 },
	{ "pool-cached-threads", "the same, with per-thread caches", body_pool, 0, BENCH_CACHED },
	{ "handoff", "one thread acquires, another releases, through a queue",
	  body_handoff, 2, BENCH_PER_LEASE },
	{ "handoff-cached", "the same, with per-thread caches",
	  body_handoff, 2, BENCH_PER_LEASE | BENCH_CACHED },
	{ "bulk32", "32 leases per call (time per buffer)", body_bulk, 1, 0 },
	{ "bulk32-cached", "the same, with a per-thread cache", body_bulk, 1, BENCH_CACHED },
	{ "tokens32", "32 tokens per call, no leases (time per buffer)", body_tokens, 1, 0 },
	{ "tokens32-cached", "the same, with a per-thread cache", body_tokens, 1, BENCH_CACHED },
	{ "shared-2proc", "a shared pool used by two processes at once",
	  NULL, 2, BENCH_PROCESSES },
	{ "shared-2proc-cached", "the same, with per-thread caches",
	  NULL, 2, BENCH_PROCESSES | BENCH_CACHED },
	{ "wake-threads", "a release wakes a thread in asyncpool_acquire_wait",
	  NULL, 2, BENCH_WAKE },
	{ "wake-2proc", "a release wakes a process in asyncpool_acquire_wait",
	  NULL, 2, BENCH_WAKE | BENCH_PROCESSES },
	{ "mutex-baseline", "a stack of indices under one pthread mutex",
	  body_mutex, 1, BENCH_NO_POOL },
	{ "mutex-baseline-threads", "the same, on every thread", body_mutex, 0, BENCH_NO_POOL },
	{ "cas2-baseline", "two compare-and-swaps on a private word per pair",
	  body_cas2, 1, BENCH_NO_POOL },
	{ "handoff-queue-baseline", "the hand-off queue alone, without a pool",
	  body_handoff, 2, BENCH_NO_POOL | BENCH_PER_LEASE },
};
#define N_CASES (sizeof(cases) / sizeof(cases[0]))

static void *bench_thread(void *arg)
{
	struct run *r = arg;
	unsigned id = atomic_fetch_add(&r->next_id, 1);

	atomic_fetch_add(&r->ready, 1);
	while (!atomic_load_explicit(&r->go, memory_order_acquire))
		;
	r->c->body(r, id);
	/* Leave nothing in this thread's cache: it exits next anyway. */
	if (r->pool)
		asyncpool_cache_flush(r->pool);
	return NULL;
}

/* One repetition: elapsed wall nanoseconds for threads x ops pairs. */
static uint64_t run_once(struct run *r)
{
	pthread_t t[64];
	unsigned n = r->threads < 64 ? r->threads : 64;
	uint64_t start;

	atomic_store(&r->ready, 0);
	atomic_store(&r->next_id, 0);
	atomic_store(&r->go, 0);
	for (unsigned i = 0; i < n; i++)
		pthread_create(&t[i], NULL, bench_thread, r);
	while (atomic_load(&r->ready) != n)
		;
	start = tool_now_ns();
	atomic_store_explicit(&r->go, 1, memory_order_release);
	for (unsigned i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	return tool_now_ns() - start;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
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
	qsort(ns, reps, sizeof(double), cmp_double);
	qsort(mops, reps, sizeof(double), cmp_double);
	out->threads = threads;
	out->ns[0] = ns[reps / 2];
	out->ns[1] = ns[0];
	out->ns[2] = ns[reps - 1];
	out->mops[0] = mops[reps / 2];
	out->mops[1] = mops[0];
	out->mops[2] = mops[reps - 1];
}

static void measure(struct run *r, unsigned reps, struct bench_result *out)
{
	uint64_t el[64];
	unsigned long total = r->ops * r->threads;

	if (r->c->flags & BENCH_PER_LEASE)
		total = r->ops;         /* one pair per lease handed over */
	run_once(r);                    /* warm up: page faults, caches, frequency */
	for (unsigned i = 0; i < reps; i++)
		el[i] = run_once(r);
	bench_summarize(out, el, reps, r->ops, r->threads, total);
}

static void print_table(const struct bench_result *res, size_t n, unsigned reps)
{
	printf("%-22s %7s %10s %10s %10s %12s\n", "case", "threads", "ns/op", "min", "max", "Mops/s");
	for (size_t i = 0; i < n; i++)
		printf("%-22s %7u %10.2f %10.2f %10.2f %12.2f\n", res[i].name, res[i].threads,
		       res[i].ns[0], res[i].ns[1], res[i].ns[2], res[i].mops[0]);
	printf("(medians of %u repetitions; one op is an acquire+release pair;\n"
	       " bulk32, tokens32: per buffer; handoff: per lease, acquired by one thread, released by the other;\n"
	       " wake-*: ns from a release to the return of the waiter's asyncpool_acquire_wait(),\n"
	       " 2000 wake-ups: ns/op the median, min the minimum, max the 99th percentile)\n",
	       reps);
}

static void print_json(const struct bench_result *res, size_t n, unsigned reps, unsigned long ops)
{
	printf("{\"library\":\"libasyncpool\",\"version\":\"%s\",\"repetitions\":%u,"
	       "\"ops_per_thread\":%lu,\"cpus\":%ld,\"results\":[",
	       asyncpool_version(), reps, ops, sysconf(_SC_NPROCESSORS_ONLN));
	for (size_t i = 0; i < n; i++) {
		printf("%s{\"name\":\"%s\",\"threads\":%u,\"ns_per_op\":%.3f,\"mops_per_s\":%.3f,"
		       "\"ns_per_op_min\":%.3f,\"ns_per_op_max\":%.3f,"
		       "\"mops_per_s_min\":%.3f,\"mops_per_s_max\":%.3f",
		       i ? "," : "", res[i].name, res[i].threads, res[i].ns[0], res[i].mops[0],
		       res[i].ns[1], res[i].ns[2], res[i].mops[1], res[i].mops[2]);
		if (res[i].buffers)
			printf(",\"buffers\":%lu", res[i].buffers);
		if (res[i].extra_name)
			printf(",\"%s\":%.3f", res[i].extra_name, res[i].extra);
		printf("}");
	}
	printf("]}\n");
}

/* ---- the sweep: cost per pair from 64 to 16M buffers ---- */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint32_t rng_below(uint32_t n)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(((rng_state >> 32) * (uint64_t)n) >> 32);
}

static void shuffle(uint32_t *v, uint32_t n)
{
	for (uint32_t i = n; i > 1; i--) {
		uint32_t j = rng_below(i), t = v[i - 1];

		v[i - 1] = v[j];
		v[j] = t;
	}
}

#define SWEEP_WINDOW 256u

/* Rounds of SWEEP_WINDOW acquires, then their releases in a random order. */
static void sweep_steady(struct asyncpool *pool, uint32_t win, unsigned long ops,
			 unsigned reps, double *steady)
{
	struct asyncpool_lease w[SWEEP_WINDOW];
	uint32_t perm[8][SWEEP_WINDOW];
	unsigned long rounds = ops / win;

	for (unsigned k = 0; k < 8; k++) {
		for (uint32_t i = 0; i < win; i++)
			perm[k][i] = i;
		shuffle(perm[k], win);
	}
	for (unsigned k = 0; k < reps; k++) {
		uint64_t t0 = tool_now_ns();

		for (unsigned long r = 0; r < rounds; r++) {
			const uint32_t *pm = perm[r & 7];

			for (uint32_t i = 0; i < win; i++)
				asyncpool_acquire(pool, &w[i]);
			for (uint32_t i = 0; i < win; i++)
				asyncpool_lease_release(&w[pm[i]]);
		}
		steady[k] = (double)(tool_now_ns() - t0) / (double)(rounds * win);
	}
}

/*
 * One pool of count buffers: put its freelist in a random order (acquire
 * every buffer, release them shuffled), time one pass over it (cold: each
 * buffer once, in that order), then time steady rounds without caches,
 * turn caches on (asyncpool_set_cache()) and time them again.  ns per
 * acquire+release pair.
 */
static int sweep_one(uint32_t count, uint32_t cache, unsigned long ops, unsigned reps,
		     double *steady, double *steady_cached, double *cold)
{
	struct asyncpool_proactor *p;
	struct asyncpool *pool;
	struct asyncpool_lease tmpl;
	uint32_t *idx, win = count < SWEEP_WINDOW ? count : SWEEP_WINDOW;
	uint64_t t0;
	int rc = tool_memory_pool(&p, &pool, 64, count, 0, false);

	if (rc)
		return rc;
	idx = malloc(sizeof(uint32_t) * count);
	if (!idx) {
		tool_memory_pool_free(p, pool);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < count; i++) {
		rc = asyncpool_acquire(pool, &tmpl);
		if (rc)
			break;
		idx[i] = tmpl.buffer_index;
	}
	if (rc) {
		free(idx);
		return rc;      /* leases out: the pool cannot be destroyed */
	}
	shuffle(idx, count);
	/* A lease is a value: the template with another index is that lease. */
	for (uint32_t i = 0; i < count; i++) {
		struct asyncpool_lease l = tmpl;

		l.buffer_index = idx[i];
		asyncpool_lease_release(&l);
	}
	/* cold: one pass over the shuffled list; it stays in random order */
	t0 = tool_now_ns();
	for (uint32_t i = 0; i < count && !rc; i++) {
		rc = asyncpool_acquire(pool, &tmpl);
		idx[i] = tmpl.buffer_index;
	}
	for (uint32_t i = 0; i < count && !rc; i++) {
		struct asyncpool_lease l = tmpl;

		l.buffer_index = idx[i];
		asyncpool_lease_release(&l);
	}
	*cold = (double)(tool_now_ns() - t0) / count;
	free(idx);
	if (!rc) {
		sweep_steady(pool, win, ops, reps, steady);
		rc = asyncpool_set_cache(pool, cache);
	}
	if (!rc) {
		sweep_steady(pool, win, ops, reps, steady_cached);
		asyncpool_cache_flush(pool);
	}
	tool_memory_pool_free(p, pool);
	return rc;
}

static int cmd_sweep(int json, unsigned long ops, unsigned reps)
{
	static const uint32_t sizes[] = { 64, 1024, 16384, 262144, 1u << 20, 1u << 22, 1u << 24 };
	struct bench_result res[2 * sizeof(sizes) / sizeof(sizes[0])];
	size_t n = 0;

	memset(res, 0, sizeof(res));

	if (!json)
		printf("%10s %14s %14s %14s\n", "buffers", "pool ns/op", "cached ns/op", "cold ns/op");
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		uint32_t cache = sizes[s] / 4 < BENCH_CACHE ? sizes[s] / 4 : BENCH_CACHE;
		double st[2][64], cold;
		int rc = sweep_one(sizes[s], cache, ops, reps, st[0], st[1], &cold);

		if (rc) {
			fprintf(stderr, "asyncpool bench: sweep of %u buffers: %s\n",
				sizes[s], strerror(-rc));
			return TOOL_EXIT_FAILURE;
		}
		for (unsigned c = 0; c < 2; c++) {
			qsort(st[c], reps, sizeof(double), cmp_double);
			res[n].name = c ? "pool-cached" : "pool";
			res[n].threads = 1;
			res[n].buffers = sizes[s];
			res[n].ns[0] = st[c][reps / 2];
			res[n].ns[1] = st[c][0];
			res[n].ns[2] = st[c][reps - 1];
			for (int k = 0; k < 3; k++)
				res[n].mops[k] = 1000.0 / res[n].ns[2 - k];
			res[n].extra_name = "cold_ns_per_op";
			res[n].extra = cold;
			n++;
		}
		if (!json) {
			printf("%10u %14.2f %14.2f %14.2f\n", sizes[s], res[n - 2].ns[0],
			       res[n - 1].ns[0], cold);
			fflush(stdout);
		}
	}
	if (json)
		print_json(res, n, reps, ops);
	else
		printf("(steady: medians of %u repetitions of rounds of %u acquires then their\n"
		       " releases in random order, on a freelist put in random order first;\n"
		       " cold: one pass over every buffer in that random order, no caches)\n",
		       reps, SWEEP_WINDOW);
	return TOOL_EXIT_OK;
}

static void bench_usage(FILE *f)
{
	fputs("Usage: asyncpool bench [--json] [--threads N] [--ops N] [--reps N] [--buffers N]\n"
	      "       asyncpool bench --sweep [--json] [--ops N] [--reps N]\n"
	      "\nCases:\n", f);
	for (size_t i = 0; i < N_CASES; i++)
		fprintf(f, "  %-23s %s\n", cases[i].name, cases[i].description);
}

/* Runs every case of cases[] into res; the number of results. */
static size_t run_cases(struct run *r, struct asyncpool *const pools[2], uint32_t buffers,
			unsigned threads, unsigned reps, struct bench_result *res)
{
	size_t n = 0;

	for (size_t i = 0; i < N_CASES; i++) {
		const struct bench_case *c = &cases[i];
		bool cached = c->flags & BENCH_CACHED;

		memset(&res[n], 0, sizeof(res[n]));
		res[n].name = c->name;
		if (c->flags & BENCH_WAKE) {
			int rc = bench_wake(c->flags & BENCH_PROCESSES, 2000, &res[n]);

			if (rc)
				fprintf(stderr, "asyncpool bench: %s: %s\n", c->name, strerror(-rc));
			else
				n++;
			continue;
		}
		if (c->flags & BENCH_PROCESSES) {
			int rc = bench_shared(buffers, cached ? BENCH_CACHE : 0, r->ops, reps, &res[n]);

			/* Not every machine can share memory this way: say so, go on. */
			if (rc)
				fprintf(stderr, "asyncpool bench: %s: %s\n", c->name, strerror(-rc));
			else
				n++;
			continue;
		}
		r->c = c;
		r->pool = (c->flags & BENCH_NO_POOL) ? NULL : pools[cached];
		r->threads = c->threads ? c->threads : threads;
		measure(r, reps, &res[n++]);
	}
	return n;
}

int cmd_bench(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "threads", required_argument, NULL, 't' },
		{ "ops", required_argument, NULL, 'n' },
		{ "reps", required_argument, NULL, 'r' },
		{ "buffers", required_argument, NULL, 'b' },
		{ "sweep", no_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	unsigned threads = (unsigned)sysconf(_SC_NPROCESSORS_ONLN), reps = 5;
	unsigned long ops = 2000000;
	uint32_t buffers = 1024;
	struct bench_result res[N_CASES];
	struct asyncpool_proactor *p[2] = { NULL, NULL };
	struct asyncpool *pools[2] = { NULL, NULL };
	struct run r;
	int json = 0, sweep = 0, c, rc = TOOL_EXIT_OK;
	size_t n;

	while ((c = getopt_long(argc, argv, "jt:n:r:b:sh", longopts, NULL)) != -1) {
		switch (c) {
		case 'j': json = 1; break;
		case 't': threads = (unsigned)tool_number("--threads", optarg, 64); break;
		case 'n': ops = tool_number("--ops", optarg, 1ul << 40); break;
		case 'r': reps = (unsigned)tool_number("--reps", optarg, 64); break;
		case 'b': buffers = (uint32_t)tool_number("--buffers", optarg, ASYNCPOOL_MAX_BUFFERS); break;
		case 's': sweep = 1; break;
		case 'h':
			bench_usage(stdout);
			return TOOL_EXIT_OK;
		default:
			return TOOL_EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "asyncpool bench: unexpected argument '%s' (see --help)\n",
			argv[optind]);
		return TOOL_EXIT_USAGE;
	}
	if (threads < 2)
		threads = 2;
	if (sweep)
		return cmd_sweep(json, ops, reps);
	if (buffers < 4 * BENCH_CACHE)
		buffers = 4 * BENCH_CACHE;      /* room for two caches and the ring */

	memset(&r, 0, sizeof(r));
	r.ops = ops;
	r.mutex = mutex_pool_new(buffers);
	r.ring = aligned_alloc(64, sizeof(*r.ring));
	if (!r.mutex || !r.ring) {
		fprintf(stderr, "asyncpool bench: out of memory\n");
		rc = TOOL_EXIT_FAILURE;
		goto out;
	}
	memset(r.ring, 0, sizeof(*r.ring));
	/* pools[0] without caches, pools[1] with (BENCH_CACHED) */
	for (int i = 0; i < 2; i++) {
		int err = tool_memory_pool(&p[i], &pools[i], 64, buffers, i ? BENCH_CACHE : 0, true);

		if (err) {
			fprintf(stderr, "asyncpool bench: cannot create a pool: %s\n", strerror(-err));
			rc = TOOL_EXIT_FAILURE;
			goto out;
		}
	}

	n = run_cases(&r, pools, buffers, threads, reps, res);
	if (json)
		print_json(res, n, reps, ops);
	else
		print_table(res, n, reps);
out:
	if (r.mutex)
		mutex_pool_free(r.mutex);
	free(r.ring);
	for (int i = 0; i < 2; i++)
		if (pools[i])
			tool_memory_pool_free(p[i], pools[i]);
	return rc;
}
