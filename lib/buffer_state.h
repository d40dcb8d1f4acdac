/* SPDX-License-Identifier: MIT */
/*
 * The state of a buffer, and the only code that changes it.
 *
 * Each buffer has one 64-bit word in state[] (pool_layout.h): its
 * freelist link, its kind, the holder (attachment slot + 1, or 0) and a
 * generation that changes on every acquire:
 *
 *   FREE     on the list, or being pushed (holder: the pusher) or
 *            popped (holder: the last pusher) by one thread
 *   LEASED   a user holds a lease of this generation
 *   CACHED   free, in a per-thread cache of the holder's process
 *
 *            pop + take (freelist.c)       cached_to_leased
 *   FREE ------------------> LEASED <----------------------- CACHED
 *     ^  <------------------   |    ----------------------->   |
 *     |   claim_leased, then   |        leased_to_cached       |
 *     |   a push (freelist.c)  |                               |
 *     +------------------------+-------------------------------+
 *          pop + take CACHED (refill), uncache then push (flush)
 *
 * Who may change what, and so which atomic each transition needs:
 * - A release carries the lease's generation: claim_leased is a CAS on
 *   the whole word, so exactly one release of a lease wins, and a stale
 *   copy (an older generation) never does, raced or not.
 * - A release into a cache is a CAS too, so that of two copies of a
 *   lease released at the same instant into two caches exactly one wins.
 * - A dead holder's LEASED, CACHED and unlinked FREE words are claimed
 *   by a reclaim (reclaim.c), by CAS.  A process's own CACHED words only
 *   it or its reclaimer (once it is dead) touch, so cached_to_leased
 *   and uncache, on the cache's fast path, keep a load and a plain
 *   store.
 * - take runs after the pop's CAS on the head, from the word the pop
 *   saw: a reclaim that claimed the buffer (its popper looked dead, or
 *   the last pusher was) changed that word, and then the pop lets go of
 *   it and pops again.
 */
#ifndef ASYNCPOOL_BUFFER_STATE_H
#define ASYNCPOOL_BUFFER_STATE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "pool_layout.h"

typedef _Atomic uint64_t ap_word;

static inline uint64_t ap_state_load(const ap_word *s)
{
	return atomic_load_explicit((ap_word *)s, memory_order_relaxed);
}

static inline bool ap_state_cas(ap_word *s, uint64_t *expected, uint64_t to)
{
	return atomic_compare_exchange_strong_explicit(s, expected, to, memory_order_relaxed,
						       memory_order_relaxed);
}

/*
 * FREE (seen by the pop before its head CAS) -> LEASED or CACHED, a new
 * generation, holder me.  false: a reclaim claimed it first.
 */
static inline bool ap_state_take(ap_word *s, uint64_t seen, uint32_t kind, uint32_t me,
				 uint32_t *gen)
{
	uint32_t g = ap_gen_next(AP_W_GEN(seen));

	if (!ap_state_cas(s, &seen, AP_W_MAKE(kind, me, g, AP_W_LINK(seen))))
		return false;
	*gen = g;
	return true;
}

/* A lease of generation gen (0: any) still holds buffer s. */
static inline bool ap_state_leased_as(uint64_t w, uint32_t gen)
{
	return AP_W_KIND(w) == AP_K_LEASED && (!gen || AP_W_GEN(w) == gen);
}

/*
 * LEASED (generation gen, or any for 0) -> FREE, holder me, not yet
 * linked: only one release of a lease wins.  *was gets the word it had,
 * for ap_state_unclaim().
 */
static inline bool ap_state_claim_leased(ap_word *s, uint32_t gen, uint32_t me, uint64_t *was)
{
	uint64_t w = ap_state_load(s);

	do {
		if (!ap_state_leased_as(w, gen))
			return false;
		*was = w;
	} while (!ap_state_cas(s, &w, AP_W_MAKE(AP_K_FREE, me, AP_W_GEN(w), AP_FL_END)));
	return true;
}

/* Undo a claim whose push failed, so that a later release can succeed. */
static inline void ap_state_unclaim(ap_word *s, uint64_t was)
{
	atomic_store_explicit(s, was, memory_order_relaxed);
}

/* The link of a FREE buffer its pusher owns (before the head CAS). */
static inline void ap_state_set_link(ap_word *s, uint32_t link)
{
	atomic_store_explicit(s, AP_W_HIGH(ap_state_load(s)) | link, memory_order_relaxed);
}

/*
 * LEASED (generation gen, or any) -> CACHED by me, into the releasing
 * thread's own cache: a CAS, as for the freelist, so that of two
 * releases of copies of a lease racing into two caches exactly one wins
 * (and a dead holder's reclaim cannot claim it at the same time).
 */
static inline bool ap_state_leased_to_cached(ap_word *s, uint32_t gen, uint32_t me)
{
	uint64_t w = ap_state_load(s);

	do {
		if (!ap_state_leased_as(w, gen))
			return false;
	} while (!ap_state_cas(s, &w, AP_W_MAKE(AP_K_CACHED, me, AP_W_GEN(w), AP_W_LINK(w))));
	return true;
}

/* CACHED by me -> LEASED, a new generation (0: not mine, not cached). */
static inline uint32_t ap_state_cached_to_leased(ap_word *s, uint32_t me)
{
	uint64_t w = ap_state_load(s);
	uint32_t g;

	if ((uint32_t)(w >> 55) != ((AP_K_CACHED << 7) | me))
		return 0;
	g = ap_gen_next(AP_W_GEN(w));
	atomic_store_explicit(s, AP_W_MAKE(AP_K_LEASED, me, g, AP_W_LINK(w)),
			      memory_order_relaxed);
	return g;
}

/* CACHED by me -> FREE by me, not yet linked: a flush, before the push. */
static inline bool ap_state_uncache(ap_word *s, uint32_t me)
{
	uint64_t w = ap_state_load(s);

	if ((uint32_t)(w >> 55) != ((AP_K_CACHED << 7) | me))
		return false;
	atomic_store_explicit(s, AP_W_MAKE(AP_K_FREE, me, AP_W_GEN(w), AP_FL_END),
			      memory_order_relaxed);
	return true;
}

/*
 * A lease of generation gen (0: any) changes hands: the holder becomes
 * me, so that the giver's death no longer reclaims it.  *out_gen gets
 * the generation.
 */
static inline bool ap_state_adopt(ap_word *s, uint32_t gen, uint32_t me, uint32_t *out_gen)
{
	uint64_t w = atomic_load_explicit(s, memory_order_acquire);

	do {
		if (!ap_state_leased_as(w, gen))
			return false;
		if (AP_W_HOLDER(w) == me)
			break;
	} while (!ap_state_cas(s, &w, AP_W_MAKE(AP_K_LEASED, me, AP_W_GEN(w), AP_W_LINK(w))));
	*out_gen = AP_W_GEN(w);
	return true;
}

#endif /* ASYNCPOOL_BUFFER_STATE_H */
