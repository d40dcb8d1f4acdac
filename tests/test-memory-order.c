/* SPDX-License-Identifier: MIT */
/*
 * Memory order, for ThreadSanitizer (issue 54, kind 8).  A buffer's
 * contents are plain memory: what one thread wrote into a buffer before
 * it let the buffer go must happen before what the next holder writes
 * there, and the only thing that orders the two is the release by which
 * the library publishes the buffer and the acquire by which it takes it.
 * On x86 a release or acquire made relaxed changes no instruction, so no
 * run of the code can see it; ThreadSanitizer sees it as a data race on
 * the contents.  Each hand-off here is made once, with nothing else
 * between the two threads that could order them: they wait for each
 * other through relaxed atomics (which order nothing), the giving
 * thread is joined only at the end, and it touches no lock and no
 * freelist after its writes.  So a run under -fsanitize=thread reports
 * a race for certain, on the first hand-off whose barrier is gone
 * (tests/mutants/run.sh, "sanitizer: thread").  Without the sanitizer
 * the test checks the same hand-offs' results.
 *
 *   inbox:    a thread fills 32 buffers that this thread's cache lent and
 *             releases them: the 32nd sends the batch to this thread's
 *             inbox (release stores of the slots, pool_inbox.h); this
 *             thread drains it (acquire loads: ap_owner_drain(), or
 *             owner_drain_free() for caches of no entries) and fills
 *             them again (mutants order-inbox-send-relaxed,
 *             order-owner-drain-relaxed, order-inbox-next-relaxed);
 *   freelist: a thread fills a buffer of a bare freelist and releases it
 *             (the push's CAS, release: freelist.h); this thread pops it
 *             and fills it again (mutant order-push-relaxed).
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <asyncpool.h>
#include "hooks.h"

#define BS      256
#define LENT    32      /* AP_OUTBOX_BATCH_MIN: the 32nd release sends the batch */
#define COUNT   128

static struct asyncpool_proactor *proactor;
static struct asyncpool *pool;
static struct asyncpool_lease lent[LENT];
/*
 * Fill a buffer word by word: plain stores, each one seen by the
 * sanitizer (a memset of a constant size is expanded inline, past its
 * instrumentation).  Whether it held the word v before.
 */
static bool fill(struct asyncpool_lease *l, uint64_t v, uint64_t was)
{
	uint64_t *p = asyncpool_span_ptr(l->span);
	bool held = true;

	for (size_t i = 0; i < BS / sizeof(*p); i++) {
		held &= p[i] == was;
		p[i] = v;
	}
	return held;
}

#define GIVEN 0xa5a5a5a5a5a5a5a5ull
#define AGAIN 0x5a5a5a5a5a5a5a5aull

/* relaxed: they order nothing, so that only the library's barriers do */
static _Atomic int given, quit;

static void wait_relaxed(_Atomic int *v, int want)
{
	while (atomic_load_explicit(v, memory_order_relaxed) != want)
		sched_yield();
}

/* ---- through an owner's inbox ---- */

static void *giver_inbox(void *arg)
{
	struct asyncpool_lease x;

	(void)arg;
	/* this thread's cache, made before the writes (its registration
	 * takes a lock, which would order them) */
	if (asyncpool_acquire(pool, &x) == 0)
		asyncpool_lease_release(&x);
	for (int i = 0; i < LENT; i++)
		(void)fill(&lent[i], GIVEN, 0);
	for (int i = 0; i < LENT; i++)
		asyncpool_lease_release(&lent[i]);
	atomic_store_explicit(&given, 1, memory_order_relaxed);
	wait_relaxed(&quit, 1);
	return NULL;
}

static void round_inbox(uint32_t cache, const char *what)
{
	struct asyncpool_lease again[COUNT];
	uint32_t n = 0, filled = 0;
	pthread_t t;

	pool = make_pool(proactor, BS, COUNT, cache);
	atomic_store(&given, 0);
	atomic_store(&quit, 0);
	for (int i = 0; i < LENT; i++)
		if (asyncpool_acquire(pool, &lent[i]))
			bail_out("%s: acquire", what);
	if (pthread_create(&t, NULL, giver_inbox, NULL))
		bail_out("pthread_create");
	wait_relaxed(&given, 1);
	/* this thread's flush drains its inbox, then gives its cache back */
	is_int(asyncpool_cache_flush(pool), 0, "%s: the owner drains its inbox", what);
	/* every buffer, the 32 among them, filled again by this thread */
	while (n < COUNT && asyncpool_acquire(pool, &again[n]) == 0)
		filled += fill(&again[n++], AGAIN, GIVEN);
	/* the last one the giver's own, from its cache: the empty pool
	 * takes the other threads' caches (which orders them, but only after
	 * the 32 were filled) */
	is_int(n, COUNT, "%s: every buffer acquired again", what);
	is_int(filled, LENT, "%s: the 32 given back, with what the giver wrote", what);
	for (uint32_t i = 0; i < n; i++)
		asyncpool_lease_release(&again[i]);
	atomic_store_explicit(&quit, 1, memory_order_relaxed);
	pthread_join(t, NULL);
	(void)asyncpool_cache_flush_all(pool);
	is_int(asyncpool_check(pool), 0, "%s: check", what);
	is_int(asyncpool_available(pool), COUNT, "%s: every buffer back", what);
	is_int(asyncpool_destroy(pool), 0, "%s: destroy", what);
}

/* ---- through the freelist ---- */

static void *giver_freelist(void *arg)
{
	(void)arg;
	(void)fill(&lent[0], GIVEN, 0);
	asyncpool_lease_release(&lent[0]);
	atomic_store_explicit(&given, 1, memory_order_relaxed);
	wait_relaxed(&quit, 1);
	return NULL;
}

static void round_freelist(void)
{
	struct asyncpool_lease l;
	pthread_t t;

	pool = make_freelist_pool(proactor, BS, 1);
	atomic_store(&given, 0);
	atomic_store(&quit, 0);
	if (asyncpool_acquire(pool, &lent[0]))
		bail_out("freelist: acquire");
	if (pthread_create(&t, NULL, giver_freelist, NULL))
		bail_out("pthread_create");
	wait_relaxed(&given, 1);
	is_int(asyncpool_acquire(pool, &l), 0, "freelist: the buffer popped again");
	ok(fill(&l, AGAIN, GIVEN), "freelist: with what the giver wrote");
	asyncpool_lease_release(&l);
	atomic_store_explicit(&quit, 1, memory_order_relaxed);
	pthread_join(t, NULL);
	is_int(asyncpool_check(pool), 0, "freelist: check");
	is_int(asyncpool_destroy(pool), 0, "freelist: destroy");
}

int main(void)
{
	plan(2 * 6 + 4 + 1);
	tap_watchdog(60);
	if (asyncpool_proactor_create_memory(&proactor))
		bail_out("proactor");
	round_inbox(64, "inbox, caches of 64");
	round_inbox(0, "inbox, caches of no entries");
	round_freelist();
	is_int(asyncpool_proactor_destroy(proactor), 0, "proactor destroy");
	return done_testing();
}
