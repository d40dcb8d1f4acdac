/* SPDX-License-Identifier: MIT */
/*
 * The state of a buffer, and the only code that changes it.
 *
 * Each buffer has one 32-bit word in next[] (pool_layout.h) that is both
 * its freelist link and its state:
 *
 *   free     an index (the next free buffer) or AP_FL_END: on the list,
 *            or claimed by the one thread about to link it in
 *   leased   AP_FL_LEASED: a user holds a lease on it
 *   cached   AP_FL_CACHED: free, in one thread's cache (pool_cache.c)
 *
 *            pop (freelist.c)             cached_to_leased
 *   free ------------------> leased <----------------------- cached
 *     ^  <------------------   |    ----------------------->   |
 *     |   claim_leased, then   |        leased_to_cached       |
 *     |   a push (freelist.c)  |                               |
 *     +------------------------+-------------------------------+
 *          pop with mark CACHED (refill), uncache then push (flush)
 *
 * Who may change what, and so which atomic each transition needs:
 * - A release races with other releases of copies of the same lease,
 *   here or in another process, into the freelist or into any cache:
 *   claim_leased and leased_to_cached are a CAS, so exactly one release
 *   of a lease wins and a second is refused, even at the same instant.
 * - cached_to_leased and uncache are a load and a plain store: a cached
 *   buffer is its cache's alone, so nothing races with them.  The load
 *   is a last defence: a cache that finds one of its buffers in another
 *   state (memory overwritten by a peer) drops it and counts a
 *   corruption instead of handing it out.
 * - A pop marks what it took only after its CAS on the head succeeded,
 *   so no one else can reach the buffer in between.
 */
#ifndef ASYNCPOOL_BUFFER_STATE_H
#define ASYNCPOOL_BUFFER_STATE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "pool_layout.h"

/* free (just popped by the caller) -> leased or cached (mark) */
static inline void ap_state_take(_Atomic uint32_t *s, uint32_t mark)
{
	atomic_store_explicit(s, mark, memory_order_relaxed);
}

/* leased -> to by CAS: of the releases of copies of a lease, one wins. */
static inline bool ap_state_claim(_Atomic uint32_t *s, uint32_t to)
{
	uint32_t expected = AP_FL_LEASED;

	return atomic_compare_exchange_strong_explicit(s, &expected, to,
						       memory_order_relaxed,
						       memory_order_relaxed);
}

/* leased -> free and not yet linked: only one release of a lease wins. */
static inline bool ap_state_claim_leased(_Atomic uint32_t *s)
{
	return ap_state_claim(s, AP_FL_END);
}

/* Undo a claim whose push failed, so that a later release can succeed. */
static inline void ap_state_unclaim(_Atomic uint32_t *s)
{
	atomic_store_explicit(s, AP_FL_LEASED, memory_order_relaxed);
}

/* from -> to with a load and a plain store: only for a holder's own buffer. */
static inline bool ap_state_move(_Atomic uint32_t *s, uint32_t from, uint32_t to)
{
	if (atomic_load_explicit(s, memory_order_relaxed) != from)
		return false;
	atomic_store_explicit(s, to, memory_order_relaxed);
	return true;
}

/*
 * leased -> cached, into the releasing thread's own cache: a CAS, as for
 * the freelist, so that of two releases of copies of a lease racing into
 * two caches exactly one wins.  Once cached, a buffer is its cache's
 * alone, and the moves out of the cache need no atomic read-modify-write.
 */
static inline bool ap_state_leased_to_cached(_Atomic uint32_t *s)
{
	return ap_state_claim(s, AP_FL_CACHED);
}

/* cached -> leased, by the thread whose cache holds it. */
static inline bool ap_state_cached_to_leased(_Atomic uint32_t *s)
{
	return ap_state_move(s, AP_FL_CACHED, AP_FL_LEASED);
}

/* cached -> free and not yet linked: a flush, before the push. */
static inline bool ap_state_uncache(_Atomic uint32_t *s)
{
	return ap_state_move(s, AP_FL_CACHED, AP_FL_END);
}

static inline bool ap_state_is_leased(_Atomic uint32_t *s)
{
	return atomic_load_explicit(s, memory_order_acquire) == AP_FL_LEASED;
}

#endif /* ASYNCPOOL_BUFFER_STATE_H */
