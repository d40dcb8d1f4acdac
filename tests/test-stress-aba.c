/* SPDX-License-Identifier: MIT */
/*
 * A stress test that can fail on 2 cores.  Two cores rarely interleave a
 * pop badly on their own, so this test
 *   - oversubscribes: 16 threads (ASYNCPOOL_STRESS_THREADS, 1..64), then
 *     4 processes x 4 threads on one freelist in MAP_SHARED memory;
 *   - links the test-hook build of the library (ASYNCPOOL_TEST_HOOKS),
 *     whose pop and push call a hook between reading the head and their
 *     CAS: the hook sometimes yields the CPU or spins, so that the other
 *     threads pop and push the same indices under a stalled thread;
 *   - keeps the pool small, so the same indices come back to the head;
 *   - checks ownership on every lease: an owner word per buffer taken by
 *     CAS (a second holder fails the CAS), and a stamp written into the
 *     buffer checked before its release;
 *   - audits the freelist at the end: a bounded walk from the head meets
 *     no index twice, free + leased == capacity, and the ABA tag moved
 *     once per successful acquire and release.
 * Without the ABA tag in the head word, this test fails (see issue 7).
 *
 * Operations per thread: ASYNCPOOL_STRESS_ITERATIONS (default 100000;
 * `make check-long` sets millions).  Each acquire and each release is
 * one operation.  ENOBUFS cannot happen here: thread t holds at most
 * hold(t) leases and the pool has exactly the sum of hold(t) buffers, so
 * an -ENOBUFS is a lost buffer and fails the test (no thread waits on a
 * lost buffer forever).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <asyncpool.h>
#include "hooks.h"
#include "tap.h"
#include "testutil.h"

#define MAX_THREADS 64
#define PROCS 4
#define PROC_THREADS 4
#define BUFFER_SIZE 64

/* Lives in MAP_SHARED memory so that forked workers report through it. */
struct shared_state {
	_Atomic uint32_t owner[2 * MAX_THREADS * PROCS];
	_Atomic int stop;
	_Atomic uint64_t ops;           /* successful acquires + releases */
	_Atomic uint64_t violations;    /* ownership */
	_Atomic uint64_t stamp_errors;  /* buffer content changed under us */
	_Atomic uint64_t bad_spans;     /* a lease outside the slab */
	_Atomic uint64_t errors;        /* an unexpected return code */
	_Atomic int first_error;
	_Atomic uint64_t hook_calls, yields, spins;
};

static struct shared_state *st;
static struct asyncpool *pool;
static char *slab_base;
static uint32_t capacity;
static long iterations = 100000;

static __thread uint64_t rng;
static __thread uint64_t t_calls, t_yields, t_spins;

static inline uint64_t next_rand(void)
{
	/* xorshift64 */
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Called by pop and push between reading the head and their CAS. */
static void stall(void)
{
	uint64_t r = next_rand();

	t_calls++;
	switch (r & 31) {
	case 0:
		t_yields++;
		sched_yield();
		break;
	case 1:
	case 2:
		t_spins++;
		for (volatile uint32_t n = (uint32_t)(r >> 40) & 1023; n; n--)
			;
		break;
	}
}

static void fail(_Atomic uint64_t *what, int rc)
{
	int none = 0;

	atomic_fetch_add(what, 1);
	atomic_compare_exchange_strong(&st->first_error, &none, rc ? rc : -1);
	atomic_store(&st->stop, 1);
}

struct held {
	uint32_t idx;
	uint64_t stamp;
};

static void take(uint32_t id, struct held *h, long i)
{
	struct asyncpool_lease l;
	uint32_t free_owner = 0;
	volatile uint64_t *word;
	char *p;
	int rc = asyncpool_acquire(pool, &l);

	if (rc) {
		fail(&st->errors, rc);
		return;
	}
	atomic_fetch_add_explicit(&st->ops, 1, memory_order_relaxed);
	p = asyncpool_span_ptr(l.span);
	if (l.buffer_index >= capacity || p != slab_base + (size_t)l.buffer_index * BUFFER_SIZE ||
	    l.span.length != BUFFER_SIZE) {
		fail(&st->bad_spans, 0);
		h->idx = UINT32_MAX;
		return;
	}
	if (!atomic_compare_exchange_strong(&st->owner[l.buffer_index], &free_owner, id)) {
		fail(&st->violations, 0);
		h->idx = UINT32_MAX;
		return;
	}
	h->idx = l.buffer_index;
	h->stamp = ((uint64_t)id << 40) ^ (uint64_t)i;
	word = (volatile uint64_t *)p;
	word[0] = id;
	word[1] = h->stamp;
}

static void give(uint32_t id, struct held *h)
{
	volatile uint64_t *word = (volatile uint64_t *)(slab_base + (size_t)h->idx * BUFFER_SIZE);
	uint32_t mine = id;
	int rc;

	if (word[0] != id || word[1] != h->stamp)
		fail(&st->stamp_errors, 0);
	if (!atomic_compare_exchange_strong(&st->owner[h->idx], &mine, 0)) {
		fail(&st->violations, 0);
		return;
	}
	rc = ap_fl_release(&pool->fl, h->idx, 0);
	if (rc) {
		fail(&st->errors, rc);
		return;
	}
	atomic_fetch_add_explicit(&st->ops, 1, memory_order_relaxed);
}

struct worker {
	pthread_t thread;
	uint32_t id;            /* 1-based, unique across processes */
	uint32_t hold;          /* at most this many leases at once */
};

static void *work(void *arg)
{
	struct worker *w = arg;
	struct held held[2];
	uint32_t n = 0;

	rng = 0x9e3779b97f4a7c15ull * w->id;
	for (long i = 0; i < iterations && !atomic_load_explicit(&st->stop, memory_order_relaxed); i++) {
		if (n < w->hold && (n == 0 || (next_rand() & 1))) {
			take(w->id, &held[n], i);
			if (held[n].idx == UINT32_MAX || atomic_load(&st->stop))
				break;
			n++;
		} else {
			uint32_t k = n == 2 ? (uint32_t)(next_rand() & 1) : 0;

			give(w->id, &held[k]);
			held[k] = held[--n];
		}
	}
	/* Give back what is held, unless the run already failed. */
	while (n && !atomic_load(&st->stop))
		give(w->id, &held[--n]);
	atomic_fetch_add(&st->hook_calls, t_calls);
	atomic_fetch_add(&st->yields, t_yields);
	atomic_fetch_add(&st->spins, t_spins);
	return NULL;
}

static int run_threads(uint32_t first_id, uint32_t threads)
{
	struct worker w[MAX_THREADS];

	for (uint32_t t = 0; t < threads; t++) {
		w[t].id = first_id + t;
		w[t].hold = 1 + (w[t].id & 1);
		if (pthread_create(&w[t].thread, NULL, work, &w[t]))
			return -1;
	}
	for (uint32_t t = 0; t < threads; t++)
		pthread_join(w[t].thread, NULL);
	return 0;
}

static uint32_t holds(uint32_t first_id, uint32_t threads)
{
	uint32_t sum = 0;

	for (uint32_t id = first_id; id < first_id + threads; id++)
		sum += 1 + (id & 1);
	return sum;
}

/*
 * Walk the freelist against the internal layout: bounded by the capacity,
 * every index in range and met once, every buffer either on the list or
 * marked leased.  Returns NULL or what is wrong.
 */
static const char *audit(uint32_t *free_out, uint32_t *leased_out)
{
	static unsigned char seen[2 * MAX_THREADS * PROCS];
	uint64_t h = atomic_load(&pool->fl.line->head);
	uint32_t i = AP_HEAD_INDEX(h), nfree = 0, nleased = 0;

	memset(seen, 0, sizeof(seen));
	*free_out = *leased_out = 0;
	while (i != AP_FL_END) {
		if (i >= pool->fl.count)
			return "an index out of range on the list";
		if (seen[i])
			return "an index twice on the list (a cycle)";
		if (++nfree > pool->fl.count)
			return "a walk longer than the capacity";
		seen[i] = 1;
		if (AP_W_KIND(atomic_load(&pool->fl.state[i])) != AP_K_FREE)
			return "a leased buffer on the list";
		i = atomic_load(&pool->fl.link[i]);
	}
	for (i = 0; i < pool->fl.count; i++) {
		uint64_t n = atomic_load(&pool->fl.state[i]);

		if (AP_W_KIND(n) == AP_K_LEASED) {
			if (seen[i])
				return "a buffer both free and leased";
			nleased++;
		} else if (!seen[i]) {
			return "a buffer neither free nor leased (lost)";
		}
	}
	*free_out = nfree;
	*leased_out = nleased;
	if (nfree + nleased != pool->fl.count)
		return "free + leased != capacity";
	return NULL;
}

static void report(const char *phase, uint64_t tag_before)
{
	uint32_t nfree, nleased;
	const char *why = audit(&nfree, &nleased);
	uint64_t ops = atomic_load(&st->ops);
	uint64_t h = atomic_load(&pool->fl.line->head);
	struct asyncpool_stats s;

	diag("%s: %" PRIu64 " operations; hook ran %" PRIu64 " times: %" PRIu64
	     " yields, %" PRIu64 " spins", phase, ops, atomic_load(&st->hook_calls),
	     atomic_load(&st->yields), atomic_load(&st->spins));
	if (atomic_load(&st->first_error))
		diag("%s: first error %d", phase, atomic_load(&st->first_error));
	is_int(atomic_load(&st->violations), 0, "%s: no buffer leased to two holders", phase);
	is_int(atomic_load(&st->stamp_errors), 0, "%s: no buffer written by another holder", phase);
	is_int(atomic_load(&st->bad_spans), 0, "%s: every lease inside the slab", phase);
	is_int(atomic_load(&st->errors), 0, "%s: every acquire and release returned 0", phase);
	ok(atomic_load(&st->hook_calls) > 0, "%s: the hook stalled pops and pushes", phase);
	ok(!why, "%s: freelist audit: %s", phase, why ? why : "consistent");
	is_int(nfree, pool->fl.count, "%s: all %u buffers free at the end", phase, pool->fl.count);
	is_int(nleased, 0, "%s: none marked leased", phase);
	is_int((uint32_t)(AP_HEAD_TAG(h) - (uint32_t)tag_before), (uint32_t)ops,
	       "%s: the tag moved once per acquire and release", phase);
	s.size = sizeof(s);
	asyncpool_stats(pool, &s);
	is_int(s.corruptions, 0, "%s: no corruption counted", phase);
	is_int(s.bad_releases, 0, "%s: no bad release counted", phase);
}

static void reset_state(void)
{
	memset(st, 0, sizeof(*st));
}

/* Phase 1: one process, many threads, a local pool that is its freelist alone. */
static void phase_threads(struct asyncpool_proactor *p, uint32_t threads)
{
	capacity = holds(1, threads);
	pool = make_freelist_pool(p, BUFFER_SIZE, capacity);
	slab_base = asyncpool_region_base(asyncpool_region(pool));
	reset_state();
	diag("threads: %u threads x %ld operations on %u buffers", threads, iterations, capacity);
	if (run_threads(1, threads))
		bail_out("pthread_create");
	report("threads", 0);
	is_int(asyncpool_destroy(pool), 0, "threads: destroy");
	pool = NULL;
}

/*
 * Phase 2: processes.  The freelist layout and the buffers live in
 * MAP_SHARED memory and every process binds the same layout, the way a
 * shared pool does (built from the internal functions, so that this runs
 * before asyncpool_create_shared exists).
 */
static void phase_processes(struct asyncpool_proactor *p)
{
	uint32_t count = holds(1, PROCS * PROC_THREADS);
	size_t lsize;
	void *layout, *bufs;
	struct asyncpool_slab *s;
	struct asyncpool_region *r;
	struct asyncpool handle;
	pid_t pid[PROCS];
	int bad_exit = 0;

	if (ap_layout_size(count, true, 0, 0, &lsize))
		bail_out("layout size");
	layout = mmap(NULL, lsize, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	bufs = mmap(NULL, (size_t)count * BUFFER_SIZE, PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (layout == MAP_FAILED || bufs == MAP_FAILED)
		bail_out("mmap");
	if (asyncpool_slab_wrap(bufs, BUFFER_SIZE, count, NULL, NULL, &s) ||
	    asyncpool_proactor_register_slab(p, s, ASYNCPOOL_ACCESS_READ, &r))
		bail_out("setup of the processes phase");
	asyncpool_slab_unref(s);
	ap_layout_init(layout, count, BUFFER_SIZE, true, 0, 0);
	ap_layout_publish(layout);
	memset(&handle, 0, sizeof(handle));
	ap_pool_bind(&handle, layout, r);
	asyncpool_region_unref(r);
	handle.storage_size = lsize;
	handle.shared = true;
	pool = &handle;
	slab_base = bufs;
	capacity = count;
	reset_state();
	diag("processes: %d processes x %d threads x %ld operations on %u buffers",
	     PROCS, PROC_THREADS, iterations, count);
	for (int k = 0; k < PROCS; k++) {
		pid[k] = fork();
		if (pid[k] < 0)
			bail_out("fork");
		if (pid[k] == 0)
			_exit(run_threads(1 + (uint32_t)k * PROC_THREADS, PROC_THREADS) ? 2 : 0);
	}
	for (int k = 0; k < PROCS; k++) {
		int status;

		if (waitpid(pid[k], &status, 0) != pid[k] || !WIFEXITED(status) ||
		    WEXITSTATUS(status) != 0) {
			diag("process %d: status 0x%x", k, status);
			bad_exit++;
		}
	}
	is_int(bad_exit, 0, "processes: every process exited 0");
	report("processes", 0);
	asyncpool_region_unref(handle.region);
	munmap(layout, lsize);
	munmap(bufs, (size_t)count * BUFFER_SIZE);
	pool = NULL;
}

int main(void)
{
	const char *tenv = getenv("ASYNCPOOL_STRESS_THREADS");
	uint32_t threads = 16;
	struct asyncpool_proactor *p;

	iterations = stress_iterations(iterations);
	if (tenv)
		threads = (uint32_t)strtoul(tenv, NULL, 10);
	if (iterations < 1 || threads < 1 || threads > MAX_THREADS)
		bail_out("ASYNCPOOL_STRESS_ITERATIONS >= 1, 1 <= ASYNCPOOL_STRESS_THREADS <= %d",
			 MAX_THREADS);
	st = mmap(NULL, sizeof(*st), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (st == MAP_FAILED)
		bail_out("mmap");
	if (asyncpool_proactor_create_memory(&p))
		bail_out("proactor");
	plan(12 + 12 + 1);
	ap_test_hook_before_cas = stall;

	phase_threads(p, threads);
	phase_processes(p);

	ap_test_hook_before_cas = NULL;
	munmap(st, sizeof(*st));
	is_int(asyncpool_proactor_destroy(p), 0, "proactor destroy: no region left");
	return done_testing();
}
