/* SPDX-License-Identifier: MIT */
/*
 * The owners of lent buffers and their inboxes (pool_owner.c, issue
 * 22): in a local pool whose caches lend, each cache has an owner id,
 * the words of the buffers it holds or lent name it, and only it writes
 * them.  The inline helpers here are the owner's decisions (its own
 * release, into its cache or, without a cache, to the freelist) and the
 * hints, for the fast paths of pool_cache.h, pool_bulk.c and
 * pool_lend.c.
 */
#ifndef ASYNCPOOL_POOL_OWNER_H
#define ASYNCPOOL_POOL_OWNER_H

#include "cache_state.h"
#include "pool_inbox.h"

/* Which cache owns buffer idx of a pool that lends, 0 if none: a hint (pool_internal.h). */
static inline uint32_t ap_owner_hint(struct asyncpool *pool, uint32_t idx)
{
	return atomic_load_explicit(&pool->owner_of[idx], memory_order_relaxed);
}

/*
 * The owner's decision of its own release, in a pool that lends
 * (buffer_state.h, "Ownership"): buffer idx, released as generation
 * gen, back to the cache whose id is id, if that cache owns it and lent
 * it at gen.  The hint owner_of[idx] first (the caller loaded it into
 * o, for its next step if this one fails), so that another owner's word
 * is not read (its line is that owner's); then the word, CACHED id gen
 * (word is ap_owned_word(id, 0), which a loop computes once), compared
 * and stored as gen + 1 by ap_state_owner_back_word(), the check the
 * owner's drain decides by too; then the released[] hint, so that a copy
 * released on another thread is refused at once.  false for anything
 * else (another owner's, a lease popped straight from the freelist, a
 * stale or double copy) and for the last generation before the wrap,
 * whose next is not gen + 1: the slow path (ap_owner_release) decides.
 * The single release (ap_cache_push_owned) and the bulk loop
 * (pool_bulk.c) both decide through it.
 */
static inline __attribute__((always_inline)) bool
ap_owner_back(ap_word *state, uint32_t o, _Atomic uint32_t *released, uint32_t id,
	      uint64_t word, uint32_t idx, uint32_t gen)
{
	if (AP_UNLIKELY(o != id || gen + 1 == 0))
		return false;
	if (AP_UNLIKELY(!ap_state_owner_back_word(&state[idx], word, gen)))
		return false;
	atomic_store_explicit(&released[idx], gen, memory_order_relaxed);
	return true;
}

/* ap_owner_back() into entry n of cache c (entered, not full); o: owner_of[idx]. */
static inline __attribute__((always_inline)) bool
ap_cache_push_owned(struct asyncpool *pool, struct ap_cache *c, uint32_t n, uint32_t o,
		    uint32_t idx, uint32_t gen)
{
	if (AP_UNLIKELY(!ap_owner_back(pool->fl.state, o, pool->released, c->id,
				       ap_owned_word(c->id, 0), idx, gen)))
		return false;
	c->tok[n] = AP_TOKEN_MAKE(gen + 1, idx);
	return true;
}

/*
 * Another owner's lent buffer, released on this thread (cache c,
 * entered): its token into c's outbox for owner o, while that outbox
 * is o's and has room for it and one more (the one that fills a batch
 * goes to ap_owner_release(), which sends it).  Only the lease right
 * after the last one decided: a copy of the lease the buffer is lent
 * in (or a token forged with exactly the next generation, the class of
 * a forged pointer); the sender writes the released[] hint and tells
 * the owner so, so that in a hand-off the hint's line stays with the
 * releasing thread as the word's stays with the owner.  Anything else
 * (no owner, ours, an older or a farther generation) is false, for
 * ap_owner_release() to decide.  o: owner_of[idx].
 */
static inline __attribute__((always_inline)) bool
ap_outbox_gather(struct asyncpool *pool, struct ap_cache *c, uint32_t o, uint32_t idx,
		 uint32_t gen)
{
	uint32_t r = atomic_load_explicit(&pool->released[idx], memory_order_relaxed);
	struct ap_outbox *ob = &c->outbox[o % AP_OUTBOXES];
	uint32_t n = ob->n;

	if (AP_UNLIKELY(!o || o == c->id || gen != ap_gen_next(r) || ob->owner != o ||
			n + 1 >= pool->outbox_batch))
		return false;
	AP_TEST_STALL(AP_TS_CACHE_CLAIM);
	atomic_store_explicit(&pool->released[idx], gen, memory_order_relaxed);
	ob->tok[n] = AP_TOKEN_MAKE(gen, idx) | AP_INBOX_HINTED;
	__atomic_store_n(&ob->n, n + 1, __ATOMIC_RELAXED);
	return true;
}

/*
 * Buffer idx, whose word says owner id at generation gen, is id's in
 * the hints of the pool (its released[] and owner_of[]) too.  Every
 * lease of it so far is older than gen: the released[] hint says so,
 * so that it never lags a lease by 2^31 generations or more (it is
 * compared in serial arithmetic), however many leases went by the
 * freelist alone.  The arrays are arguments, so that a loop keeps them
 * in registers (ap_lend_pop()).
 */
static inline void ap_own_hints(_Atomic uint32_t *released, _Atomic uint32_t *owner_of,
				uint32_t id, uint32_t idx, uint32_t gen)
{
	atomic_store_explicit(&released[idx], ap_gen_prev(gen), memory_order_relaxed);
	atomic_store_explicit(&owner_of[idx], id, memory_order_relaxed);
}

/*
 * Buffer idx, cached at gen, is owner id's now: its word, then the
 * hints (a refill, a depot batch, a single lend).
 */
static inline void ap_own_buffer(struct asyncpool *pool, uint32_t id, uint32_t idx, uint32_t gen)
{
	ap_state_own(&pool->fl.state[idx], id);
	ap_own_hints(pool->released, pool->owner_of, id, idx, gen);
}

/*
 * Buffer idx, lent by cache c (entered) at gen, made free by c, not yet
 * linked.  No owner from now on: a copy released later reads the word,
 * which is free, or another owner's at a later generation.  The
 * released[] hint is left: it matters only while an owner holds the
 * buffer, and the pop that lends it next writes it (ap_lend_pop).
 */
static inline bool ap_owner_free(ap_word *state, _Atomic uint32_t *owner_of, uint64_t word,
				 uint32_t idx, uint32_t gen)
{
	if (AP_UNLIKELY(!gen || !ap_state_owner_free(&state[idx], word, gen)))
		return false;
	atomic_store_explicit(&owner_of[idx], 0, memory_order_relaxed);
	return true;
}

/*
 * The owner's decision of its release of a buffer it lent (c entered,
 * of no entries; left here): true if the buffer is free now, for the
 * caller to push; false if the word says otherwise (not counted: the
 * caller counts it, ap_owner_give_back() or out of line).  Only we
 * write its word and owner_of[]; free and not linked once we leave, so
 * the push comes after (a flusher leaves a free word alone; a corrupt
 * list loses it, counted, as a flush's push does).
 */
static inline bool ap_owner_take_back(struct asyncpool *pool, struct ap_cache *c, uint32_t idx,
				      uint32_t gen)
{
	bool ok = ap_owner_free(pool->fl.state, pool->owner_of, ap_owned_word(c->id, 0), idx, gen);

	if (AP_LIKELY(ok))
		ap_cache_add_lent(c, -1);
	ap_cache_leave(c);
	return ok;
}

/* ap_owner_take_back(), a refused copy counted. */
static inline bool ap_owner_give_back(struct asyncpool *pool, struct ap_cache *c, uint32_t idx,
				      uint32_t gen)
{
	bool ok = ap_owner_take_back(pool, c, idx, gen);

	if (AP_UNLIKELY(!ok))
		ap_fl_count_refused(&pool->fl, idx, gen);
	return ok;
}

/* Whether c, the calling thread's cache, is pool's (not NULL) and of no entries: it only lends. */
static inline bool ap_lends_only(const struct asyncpool *pool, const struct ap_cache *c)
{
	return c->pool == pool && !c->size && pool->fl.lazy;
}

/*
 * The release of buffer idx at generation gen by c, the calling thread's
 * cache of pool, of no entries (ap_lends_only): one function, the push
 * inline.  0; -EINVAL for an index out of range; stale for a buffer
 * that no lease of generation gen holds (refused, counted); or the
 * push's error.
 */
int ap_owner_release_uncached(struct asyncpool *pool, struct ap_cache *c, uint32_t idx,
			      uint32_t gen, int stale);
/* Its parts out of line: another owner's buffer (inside: c entered), a
 * cache bypassed; a refused copy (counted, stale returned). */
int ap_owner_release_uncached_rest(struct asyncpool *pool, struct ap_cache *c, uint32_t idx,
				   uint32_t gen, int stale, bool inside);
int ap_owner_release_refused(struct asyncpool *pool, uint32_t idx, uint32_t gen, int stale);

/*
 * ap_owner_release_uncached() of an index in range, inline in the
 * exported release: the owner's release of its own buffer calls
 * nothing and keeps no stack frame (issue 34); the rest is out of line.
 */
static inline __attribute__((always_inline)) int
ap_owner_release_own(struct asyncpool *pool, struct ap_cache *c, uint32_t idx, uint32_t gen,
		     int stale)
{
	if (AP_UNLIKELY(!ap_cache_enter(c)))
		return ap_owner_release_uncached_rest(pool, c, idx, gen, stale, false);
	if (AP_UNLIKELY(ap_owner_hint(pool, idx) != c->id))
		return ap_owner_release_uncached_rest(pool, c, idx, gen, stale, true);
	/* Ours: checked by the word, then the push (freelist.h); a refused
	 * copy counted out of line. */
	if (AP_UNLIKELY(!ap_owner_take_back(pool, c, idx, gen)))
		return ap_owner_release_refused(pool, idx, gen, stale);
	return ap_fl_push_loop(&pool->fl, &idx, NULL, 1);
}
/* Owner ids and inboxes of a pool that lends: 0 or -ENOMEM; all freed. */
int ap_owner_table_init(struct asyncpool *pool);
void ap_owner_table_free(struct asyncpool *pool);
/* An owner id and inbox for cache c (the lock held): the id, 0 if every id is in use. */
uint32_t ap_owner_id_take(struct asyncpool *pool, struct ap_cache *c);
/* A lent buffer of owner o came back other than through o: counted. */
void ap_owner_lent_back(struct asyncpool *pool, uint32_t o);
/*
 * The owner's look at its inbox (c entered): each token decided with a
 * load and a store, into the cache, or, for a cache of no entries, to
 * the freelist.  At most max tokens; true if any.
 */
bool ap_owner_drain(struct asyncpool *pool, struct ap_cache *c, uint32_t max);
/* Send what cache c gathered for other owners (its thread, outside). */
void ap_owner_send_all(struct asyncpool *pool, struct ap_cache *c);
/* The lock held: whether any release is on its way to an owner. */
bool ap_owners_moving(const struct asyncpool *pool);
/* The lock held, every owner stopped (ap_bypass_all) or gone: decide them all. */
void ap_owners_settle(struct asyncpool *pool);
/* In a forked child (the lock held): every inbox decided and emptied. */
void ap_owners_after_fork(struct asyncpool *pool);
/* The thread of cache c exits (the lock held): its id becomes an orphan. */
void ap_owner_leave_thread(struct ap_cache *c);
/*
 * A release of a pool that lends which the fast path did not take (the
 * caller outside its cache), by the calling thread's cache c of pool
 * (NULL: none): 0, -EINVAL, or -EALREADY (refused, counted).
 */
int ap_owner_release(struct asyncpool *pool, struct ap_cache *c, uint32_t idx, uint32_t gen);

#endif /* ASYNCPOOL_POOL_OWNER_H */
