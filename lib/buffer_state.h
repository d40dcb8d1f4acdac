/* SPDX-License-Identifier: MIT */
/*
 * The state of a buffer, and the only code that changes it.
 *
 * Each buffer has one 64-bit word in state[] (pool_layout.h): its kind,
 * the holder (attachment slot + 1, or 0) and a 32-bit generation that
 * changes on every acquire (its freelist link is apart, in link[]):
 *
 *   FREE     on the list, or being pushed (holder: the pusher) or
 *            popped (holder: the last pusher) by one thread
 *   LEASED   a user holds a lease of this generation
 *   CACHED   free, in a per-thread cache of the holder's process
 *   QUEUED   (layout version 5) in channel c, no holder, the generation
 *            of the lease that was sent (channel.c):
 *
 *            LEASED me g --send--> QUEUED c g --receive--> LEASED you g+1
 *                                     |        ^
 *                                     |        +--redeliver (reclaim: the dead
 *                                     |           receiver held it; LEASED x g)
 *                                     +--reclaim (a dead sender's unpublished
 *                                        send; with CHAN_DROP a dead
 *                                        receiver's queue)--> FREE g
 *
 *            A release, a token release or an adoption of a QUEUED word
 *            is refused (its kind is not LEASED) and counted as any
 *            stale release; the sender's lease and token are stale from
 *            the send's CAS on.
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
 *   lease released at the same instant into two caches exactly one wins;
 *   except where the word has an owner (below): then only the owner
 *   writes it, and decides the copies one after the other.
 * - A dead holder's LEASED, CACHED and unlinked FREE words are claimed
 *   by a reclaim (reclaim.c), by CAS.  A process's own CACHED words only
 *   it or its reclaimer (once it is dead) touch, so cached_to_leased
 *   and uncache, on the cache's fast path, keep a load and a plain
 *   store.
 * - take runs after the pop's CAS on the head, from the word the pop
 *   saw: a reclaim that claimed the buffer (its popper looked dead, or
 *   the last pusher was) changed that word, and then the pop lets go of
 *   it and pops again.
 *
 * A CACHED word already holds the generation of the next lease of its
 * buffer: a release into a cache moves the word to the generation after
 * the lease's, and a refill's take to the one after the word's.  So a
 * cache's entry keeps that generation, and handing the buffer out needs
 * no new one.
 *
 * Lent, not leased: in a local pool with caches (fl->lazy), a cache
 * hands a buffer out with no store at all; the word stays CACHED g and
 * the lease is of generation g.  So the word is written only by the
 * thread that releases the buffer, and a buffer handed from one thread
 * to another does not move its line back and forth between their cores
 * (HACKING.md, "Lent, not leased").  A release of generation g accepts
 * a CACHED g word, holder 0, as it accepts LEASED g; a stale copy (an
 * older generation) is refused as ever.  A CACHED word alone no longer
 * tells a cached buffer from a lent one: what must know by index alone
 * asks the caches with every owner stopped (ap_cache_claim_lent()).
 * Shared pools keep the store: another process cannot ask our caches.
 *
 * Owned (issue 22): such a word also names the cache that holds or lent
 * it (ap_owned_word() below), and only that cache writes it, with a load
 * and a store: its own release (ap_state_owner_back), and the releases
 * other threads send it (pool_inbox.h, pool_owner.c).
 */
#ifndef ASYNCPOOL_BUFFER_STATE_H
#define ASYNCPOOL_BUFFER_STATE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "pool_layout.h"
#include "test_stall.h"

typedef _Atomic uint64_t ap_word;

#define AP_LIKELY_CAS(x) __builtin_expect(!!(x), 1)

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

	if (!ap_state_cas(s, &seen, AP_W_MAKE(kind, me, g)))
		return false;
	*gen = g;
	return true;
}

/*
 * Ownership (issue 22, pool_owner.c): in a local pool whose caches
 * lend, a CACHED word also names its owner, the cache id of the thread
 * whose cache holds it or lent it, in bits 32-54 (zero in every other
 * word, and in every word of a shared pool).  Only the owner writes
 * such a word, with a plain load and store, inside its cache window
 * (pool_cache.h): a release on another thread is sent to the owner
 * (pool_inbox.h), which decides it in turn.  The other writers exclude
 * the owner first (a flusher: bypass, membarrier), or come after it
 * (its thread exited: the id is an orphan), and use a CAS.
 */
#define AP_OWNER_MASK 0x7fffffu
#define AP_W_OWNER(w) ((uint32_t)((w) >> 32) & AP_OWNER_MASK)

/* The word of a buffer owned by cache id o, next (or lent) generation g. */
static inline uint64_t ap_owned_word(uint32_t o, uint32_t g)
{
	return ((uint64_t)AP_K_CACHED << 62) | ((uint64_t)o << 32) | g;
}

/*
 * The owner's decision of a release of its lent buffer (inside its
 * window): if the word is w (CACHED owner g, the lease released), it
 * becomes to, with a load and a store.  false if the word is not that
 * (a stale or double copy, or not ours).  Every owner's decision goes
 * through it: back into the cache, or (without one) to the freelist.
 */
static inline bool ap_state_owner_decide(ap_word *s, uint64_t w, uint64_t to)
{
	if (ap_state_load(s) != w)
		return false;
	AP_TEST_STALL(AP_TS_CACHE_CLAIM);
	atomic_store_explicit(s, to, memory_order_relaxed);
	return true;
}

/*
 * The owner's release of its own lent buffer (owner o, inside its
 * window): CACHED o g -> CACHED o g+1.  word is ap_owned_word(o, 0),
 * which a loop computes once (the owner's drain).
 */
static inline bool ap_state_owner_back_word(ap_word *s, uint64_t word, uint32_t g)
{
	uint64_t w = word | g;

	/* word | ap_gen_next(g): w + 1, but at the wrap (a caller that
	 * ruled it out keeps the add alone). */
	return ap_state_owner_decide(s, w, g + 1 ? w + 1 : word | 1);
}

static inline bool ap_state_owner_back(ap_word *s, uint32_t o, uint32_t g)
{
	return ap_state_owner_back_word(s, ap_owned_word(o, 0), g);
}

/*
 * The owner's release of its own lent buffer in a pool without caches
 * (pool_lend.c, "Lending without a cache"): CACHED o g -> FREE g, not
 * yet linked, a load and a store; the caller pushes it.  The pop that
 * takes it next moves it on to the generation after g, as a flush's
 * does (ap_state_uncache).  false if the word is not that.  word is
 * ap_owned_word(o, 0).
 */
static inline bool ap_state_owner_free(ap_word *s, uint64_t word, uint32_t g)
{
	return ap_state_owner_decide(s, word | g, AP_W_MAKE(AP_K_FREE, 0, g));
}

/* A buffer taken into cache o (a refill, a depot batch): its owner is o. */
static inline void ap_state_own(ap_word *s, uint32_t o)
{
	uint64_t w = ap_state_load(s);

	atomic_store_explicit(s, (w & ~((uint64_t)AP_OWNER_MASK << 32)) | ((uint64_t)o << 32),
			      memory_order_relaxed);
}

/*
 * LEASED g (not lent) -> owned by cache o at g+1: a release into the
 * caller's cache, by CAS as every release of a word no one owns (a lease
 * popped straight from the freelist).  false if refused.
 */
static inline bool ap_state_leased_to_owned(ap_word *s, uint32_t gen, uint32_t o)
{
	uint64_t w = AP_W_MAKE(AP_K_LEASED, 0, gen);

	return ap_state_cas(s, &w, ap_owned_word(o, ap_gen_next(gen)));
}

/*
 * What a lent buffer's word holds above its generation, kind CACHED and
 * holder 0 (AP_LENT: bits 32-63 of the word), and what stands for it in
 * a pool that does not lend: holder bits that ap_state_lease_gen()
 * masks out, so no word matches.
 */
#define AP_LENT    ((uint32_t)AP_K_CACHED << 30)
#define AP_NO_LENT ((uint32_t)AP_HOLDER_MASK << 23)

/*
 * The generation of the lease that word w stands for, if a release or
 * adoption of generation gen (0: any) may take it: LEASED, or lent
 * (lent is AP_LENT in a pool that lends, else AP_NO_LENT), at gen.  0 if
 * none.  A lent word with gen 0 may be in a cache or lent: 0 here, and
 * the callers by index ask the caches.  Branch-free in lent, so that
 * the release loops inline one copy of it.
 */
static inline uint32_t ap_state_lease_gen(uint64_t w, uint32_t gen, uint32_t lent)
{
	/* Kind, the zero bits and generation, the holder masked out, and
	 * in a pool that lends the owner too (below). */
	uint64_t kg = w & ~(((uint64_t)AP_HOLDER_MASK << 55) |
			    ((uint64_t)(lent == AP_LENT) * AP_OWNER_MASK << 32));

	if (__builtin_expect(gen != 0, 1))
		return kg == (((uint64_t)AP_K_LEASED << 62) | gen) ||
		       kg == (((uint64_t)lent << 32) | gen) ? gen : 0;
	return (kg >> 32) == ((uint32_t)AP_K_LEASED << 30) ? AP_W_GEN(w) : 0;
}

/*
 * LEASED (generation gen, or any for 0), or lent -> FREE, holder me,
 * not yet linked, at the lease's generation: only one release of a
 * lease wins.  The kind the word had (AP_K_CACHED: it was lent), or 0
 * if refused; *was gets the word, for ap_state_unclaim().
 */
static inline uint32_t ap_state_claim_leased_was(ap_word *s, uint32_t gen, uint32_t me,
						 uint32_t lent, uint64_t *was)
{
	uint64_t w = ap_state_load(s);
	uint32_t g;

	do {
		if (!(g = ap_state_lease_gen(w, gen, lent)))
			return 0;
		*was = w;
		AP_TEST_STALL(AP_TS_RELEASE_CLAIM);
	} while (!ap_state_cas(s, &w, AP_W_MAKE(AP_K_FREE, me, g)));
	return AP_W_KIND(*was);
}

/* A claim's CAS lost to another change of the word: out of line. */
static __attribute__((noinline, unused)) uint32_t
ap_state_claim_again(ap_word *s, uint32_t gen, uint32_t me, uint32_t lent)
{
	uint64_t was;

	return ap_state_claim_leased_was(s, gen, me, lent, &was);
}

/*
 * The same for the bulk release, which needs no *was: one try inline,
 * the rest out of line.  With the loop inline the bulk release kept its
 * values on the stack and each CAS waited on their reloads.  The kind
 * comes from the word loaded before the CAS (the same, if it succeeds):
 * a use of the CAS's own result made the next release wait for it.  me
 * is 64 bits wide: the release loops spill it, and a 64-bit reload of
 * a 32-bit spill cannot be forwarded from the store (a stall before
 * every CAS, measured: bulk release a third slower).
 */
static inline uint32_t ap_state_claim_leased(ap_word *s, uint32_t gen, uint64_t me, uint32_t lent)
{
	uint64_t w = ap_state_load(s);
	uint32_t g = ap_state_lease_gen(w, gen, lent), kind = AP_W_KIND(w);

	if (!g)
		return 0;
	if (AP_LIKELY_CAS(ap_state_cas(s, &w, AP_W_MAKE(AP_K_FREE, me, g))))
		return kind;
	return ap_state_claim_again(s, gen, me, lent);
}

/* Undo a claim whose push failed, so that a later release can succeed. */
static inline void ap_state_unclaim(ap_word *s, uint64_t was)
{
	atomic_store_explicit(s, was, memory_order_relaxed);
}

/* The link of a FREE buffer its pusher owns (before the head CAS). */
static inline void ap_state_set_link(_Atomic uint32_t *l, uint32_t link)
{
	atomic_store_explicit(l, link, memory_order_relaxed);
}

/*
 * LEASED (generation gen, or any), or lent -> CACHED by me at the
 * generation after the lease's (above), into the releasing thread's
 * own cache: a CAS, as for the freelist, so that of two releases of
 * copies of a lease racing into two caches exactly one wins (and a dead
 * holder's reclaim cannot claim it at the same time).  The kind the
 * word had (AP_K_CACHED: it was lent), or 0 if refused.  Inline and out
 * of line as ap_state_claim_leased(), for the same reasons.
 */
static __attribute__((noinline, unused)) uint32_t
ap_state_cache_again(ap_word *s, uint32_t gen, uint32_t me, uint32_t lent)
{
	uint64_t w = ap_state_load(s);
	uint32_t g;

	do {
		if (!(g = ap_state_lease_gen(w, gen, lent)))
			return 0;
	} while (!ap_state_cas(s, &w, AP_W_MAKE(AP_K_CACHED, me, ap_gen_next(g))));
	return AP_W_KIND(w);
}

static inline uint32_t ap_state_leased_to_cached(ap_word *s, uint32_t gen, uint64_t me,
						 uint32_t lent)
{
	uint64_t w = ap_state_load(s);
	uint32_t g = ap_state_lease_gen(w, gen, lent), kind = AP_W_KIND(w);

	if (!g)
		return 0;
	AP_TEST_STALL(AP_TS_CACHE_CLAIM);
	if (AP_LIKELY_CAS(ap_state_cas(s, &w, AP_W_MAKE(AP_K_CACHED, me, ap_gen_next(g)))))
		return kind;
	return ap_state_cache_again(s, gen, me, lent);
}

/*
 * CACHED by me at generation gen (a cache entry's) -> LEASED at it: the
 * lease's generation, or 0 if not mine, not cached, or not at gen.
 */
static inline uint32_t ap_state_cached_to_leased(ap_word *s, uint32_t me, uint32_t gen)
{
	if (ap_state_load(s) != AP_W_MAKE(AP_K_CACHED, me, gen))
		return 0;
	atomic_store_explicit(s, AP_W_MAKE(AP_K_LEASED, me, gen), memory_order_relaxed);
	return gen;
}

/*
 * CACHED by me at generation gen (a cache entry's) -> FREE by me, not
 * yet linked: a flush, before the push.  At the generation before gen,
 * which no lease had (pool_layout.h, ap_gen_prev).
 */
static inline bool ap_state_uncache(ap_word *s, uint32_t me, uint32_t gen)
{
	/* A local pool's word names its owner, which is the caller. */
	if ((ap_state_load(s) & ~((uint64_t)AP_OWNER_MASK << 32)) != AP_W_MAKE(AP_K_CACHED, me, gen))
		return false;
	atomic_store_explicit(s, AP_W_MAKE(AP_K_FREE, me, ap_gen_prev(gen)), memory_order_relaxed);
	return true;
}

/*
 * A lease of generation gen (0: any) changes hands: LEASED or lent ->
 * LEASED by me at the next generation, in one CAS.  The holder becomes
 * me, so that the giver's death no longer reclaims it, and the giver's
 * lease and token (of the old generation) are refused from then on,
 * however they race with it: exactly one of the adoption and a release
 * of the old generation wins.  *out_gen gets the new generation.  The
 * kind the word had (AP_K_CACHED: it was lent, and is not any more), or
 * 0 if refused.
 */
static inline uint32_t ap_state_adopt(ap_word *s, uint32_t gen, uint32_t me, uint32_t lent,
				      uint32_t *out_gen)
{
	uint64_t w = atomic_load_explicit(s, memory_order_acquire);
	uint32_t g;

	do {
		if (!(g = ap_state_lease_gen(w, gen, lent)))
			return 0;
	} while (!ap_state_cas(s, &w, AP_W_MAKE(AP_K_LEASED, me, ap_gen_next(g))));
	*out_gen = ap_gen_next(g);
	return AP_W_KIND(w);
}

/*
 * A send (channel.c): LEASED by me at gen -> QUEUED in channel c at gen,
 * by CAS, so that of a send and a release (or another send) of the same
 * lease exactly one wins.  false if the word is not that lease of ours.
 */
static inline bool ap_state_send(ap_word *s, uint32_t me, uint32_t gen, uint32_t c)
{
	uint64_t w = AP_W_MAKE(AP_K_LEASED, me, gen);

	return ap_state_cas(s, &w, ap_queued_word(c, gen));
}

/*
 * A receive: QUEUED in channel c at gen -> LEASED by me at the next
 * generation, by CAS (a reclaim may claim the same word).  The token
 * read from the ring is only a hint: a word that is not that QUEUED one
 * refuses it.  The new generation, or 0 if refused.
 */
static inline uint32_t ap_state_receive(ap_word *s, uint32_t c, uint32_t gen, uint32_t me)
{
	uint64_t w = ap_queued_word(c, gen);
	uint32_t g = ap_gen_next(gen);

	return ap_state_cas(s, &w, AP_W_MAKE(AP_K_LEASED, me, g)) ? g : 0;
}

/*
 * The same, *was the word it saw (when refused: what it is instead).
 */
static inline uint32_t ap_state_receive_was(ap_word *s, uint32_t c, uint32_t gen, uint32_t me,
					    uint64_t *was)
{
	uint32_t g = ap_gen_next(gen);

	*was = ap_queued_word(c, gen);
	return ap_state_cas(s, was, AP_W_MAKE(AP_K_LEASED, me, g)) ? g : 0;
}

/*
 * A redelivery (reclaim.c, version 5): LEASED by a dead receiver at gen
 * -> QUEUED in channel c at gen, by CAS from the word w the reclaim read.
 */
static inline bool ap_state_redeliver(ap_word *s, uint64_t w, uint32_t c)
{
	return AP_W_KIND(w) == AP_K_LEASED && ap_state_cas(s, &w, ap_queued_word(c, AP_W_GEN(w)));
}

#endif /* ASYNCPOOL_BUFFER_STATE_H */
