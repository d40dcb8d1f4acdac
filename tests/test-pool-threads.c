/* SPDX-License-Identifier: MIT */
/*
 * 8 threads x 1M acquire/release on one pool, with an ownership check:
 * each buffer has an in-use flag that its acquirer sets by exchange (it
 * must find it clear) and clears by exchange before the release (it
 * must find its own id): a buffer handed to two holders at once is
 * seen by the second exchange, however short the overlap.  The test-hook
 * build widens the window between reading the head and its CAS: every
 * 16th time a thread gets there it yields, so that the others pop and
 * push under it.  A head without its ABA tag then hands buffers out
 * twice here (tests/mutants/head-no-aba-tag).
 * Beside them, waiters (tests/waiters.h) hold 8, 7 and 1 buffers at a
 * time with asyncpool_acquire_wait(): with the workers that is more than
 * the 16 buffers, so they wait, woken by the workers' releases.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <asyncpool.h>
#include "tap.h"
#include "testutil.h"
#include "waiters.h"
#include "hooks.h"

#define THREADS 8
#define BUFFERS 16

static long iterations = 1000000;
static struct asyncpool *pool;
static atomic_long violations, empties, others;
static _Atomic uint64_t in_use[BUFFERS];        /* holder id, or 0 */

/* Between reading the head and its CAS: now and then, let others run. */
static void yield_now_and_then(void)
{
	static __thread unsigned n;

	if (++n % 16 == 0)
		sched_yield();
}

static void *worker(void *arg)
{
	uint64_t id = (uintptr_t)arg;

	for (long i = 0; i < iterations; i++) {
		struct asyncpool_lease l;
		volatile uint64_t *word;
		uint64_t holder;
		int rc = asyncpool_acquire(pool, &l);

		if (rc == -ENOBUFS) {
			atomic_fetch_add(&empties, 1);
			i--;
			continue;
		}
		if (rc) {
			atomic_fetch_add(&others, 1);
			break;
		}
		if (l.buffer_index >= BUFFERS)
			bail_out("thread %lu acquired buffer %u of %d", (unsigned long)id,
				 l.buffer_index, BUFFERS);
		holder = atomic_exchange(&in_use[l.buffer_index], id);
		if (holder != 0) {
			/* the pool is broken: say so now, before its lost
			 * buffers leave the others waiting for ever */
			bail_out("buffer %u acquired by thread %lu while thread %lu holds it",
				 l.buffer_index, (unsigned long)id, (unsigned long)holder);
		}
		word = asyncpool_span_ptr(l.span);
		word[0] = id;
		word[1] = (uint64_t)i;
		word[7] = id ^ (uint64_t)i;
		if (word[0] != id || word[1] != (uint64_t)i || word[7] != (id ^ (uint64_t)i))
			atomic_fetch_add(&violations, 1);
		if (atomic_exchange(&in_use[l.buffer_index], 0) != id)
			atomic_fetch_add(&violations, 1);
		asyncpool_lease_release(&l);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct asyncpool_proactor *p;
	struct asyncpool_stats st;
	struct asyncpool_lease all[BUFFERS];
	struct waiters ws;
	pthread_t t[THREADS];

	tap_watchdog(300);     /* a lost wake-up hangs a waiter: fail, do not hang */
	iterations = stress_iterations(iterations);
	if (asyncpool_proactor_create_memory(&p))
		bail_out("proactor");
	pool = make_pool(p, 64, BUFFERS, 0);
	ap_test_hook_before_cas = yield_now_and_then;

	/* The waiters start on an empty pool. */
	for (int i = 0; i < BUFFERS; i++)
		if (asyncpool_acquire(pool, &all[i]))
			bail_out("acquire %d", i);
	waiters_start(&ws, pool, 8, 7, (unsigned long)iterations);
	for (uintptr_t i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, worker, (void *)(i + 1));
	for (int i = 0; i < BUFFERS; i++)
		asyncpool_lease_release(&all[i]);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	waiters_finish(&ws);
	ap_test_hook_before_cas = NULL;
	diag("%d threads x %ld acquire/release on %d buffers; %ld empty retries",
	     THREADS, iterations, BUFFERS, atomic_load(&empties));
	is_int(atomic_load(&violations), 0, "no buffer was held by two threads at once");
	is_int(atomic_load(&others), 0, "no error but -ENOBUFS");
	waiters_assert(&ws);
	is_int(asyncpool_available(pool), BUFFERS, "available == capacity at the end");
	is_int(asyncpool_check(pool), 0, "the freelist audit is clean");
	st.size = sizeof(st);
	asyncpool_stats(pool, &st);
	is_int(st.bad_releases, 0, "no bad release");
	is_int(st.corruptions, 0, "no corruption");
	is_int(asyncpool_destroy(pool), 0, "destroy");
	is_int(asyncpool_proactor_destroy(p), 0, "proactor destroy");
	return done_testing();
}
