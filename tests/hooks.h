/* SPDX-License-Identifier: MIT */
/*
 * The library's internals, for the tests that link its test-hook build
 * (tests/libasyncpool-testhooks.la: Makefile.am's hook_ldadd).  The one
 * place that names the internal headers.
 */
#ifndef ASYNCPOOL_TEST_HOOKS_H
#define ASYNCPOOL_TEST_HOOKS_H

#ifndef ASYNCPOOL_TEST_HOOKS
#define ASYNCPOOL_TEST_HOOKS 1
#endif
#include "../lib/pool_internal.h"
#include "../lib/pool_cache.h"
#include "../lib/pool_depot.h"
#include "../lib/pool_lend.h"
#include "../lib/pool_takeover.h"
#include "../lib/attach_rec.h"
#include "tap.h"
#include "testutil.h"

/*
 * A local pool that is the freelist alone, for the tests of freelist.c
 * and buffer_state.h: asyncpool_create_opts() gives a local pool without
 * caches caches that lend (pool_lend.c), whose acquires leave CACHED
 * words; this one's leave LEASED ones.
 */
static inline struct asyncpool *make_freelist_pool(struct asyncpool_proactor *p,
						   size_t buffer_size, uint32_t count)
{
	struct asyncpool_region *r = make_region(p, buffer_size, count, ASYNCPOOL_ACCESS_READ);
	struct asyncpool *pool;

	if (ap_pool_create_bare(r, &pool))
		bail_out("a freelist pool of %u x %zu", count, buffer_size);
	asyncpool_region_unref(r);
	return pool;
}

/*
 * After a release that must wake the pool's waiters, one of which sleeps
 * on the wait word's value slept (read once it slept): whether the word
 * moved, as a wake moves it before its futex(2) call (wait_word.h).  A
 * check that needs no clock.  If it did not move, the test wakes the
 * waiter itself, so that the failure is reported and the test ends
 * (tests/mutants/wake-never, owner-send-no-wake).
 */
static inline bool woke_waiters(struct asyncpool *pool, uint32_t slept)
{
	_Atomic uint32_t *w = &pool->fl.line->wait;

	if (atomic_load(w) != slept)
		return true;
	atomic_fetch_add(w, 1);
	ap_futex_wake_all(w, pool->fl.shared);
	return false;
}

#endif
