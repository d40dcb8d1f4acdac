/* SPDX-License-Identifier: MIT */
/*
 * Per-thread caches in front of a pool's freelist (pool_cache.c).
 *
 * A cache (cache_state.h) is an array of free buffer indices, with the
 * generation of each one's state word, owned by one thread, for one
 * pool handle.  Acquire pops from it: in a local pool it lends the
 * buffer without a store to its state (buffer_state.h, "lent"), in a
 * shared pool it marks it leased with a plain store.  Release claims
 * the buffer's state by a CAS, then pushes it (a shared pool), or, in a
 * local pool, the cache that owns the buffer decides it with a load and
 * a store (pool_owner.c); only a refill (the cache is empty) or a flush
 * (it is full) leaves the thread, moving cache_batch buffers with one
 * CAS: through a local pool's depot (pool_depot.c) as an array, else
 * through the freelist's head as a chain.  A cached buffer's state is
 * CACHED (buffer_state.h): a release of it is refused like a release of
 * a free buffer, and a cache hands out only buffers whose state says
 * cached.  Another thread may take a cache's buffers (pool_takeover.c)
 * through the window of cache_state.h.
 */
#ifndef ASYNCPOOL_POOL_CACHE_H
#define ASYNCPOOL_POOL_CACHE_H

#include "cache_state.h"
#include "pool_owner.h"

/*
 * The calling thread's cache used last, or &ap_cache_none; never NULL.
 * The exported thread variable that the public header's inline paths
 * read (<asyncpool/inline.h>), of the public type, whose fields are
 * the leading ones of struct ap_cache; ap_tc_last reads it as the
 * library's, ap_tc_set() writes it.
 */
extern struct ap_cache ap_cache_none __attribute__((visibility("hidden")));
extern __thread struct asyncpool_inline_cache *asyncpool_inline_tc
	__attribute__((tls_model("initial-exec")));
#define ap_tc_last ((struct ap_cache *)asyncpool_inline_tc)

static inline struct ap_cache *ap_tc_set(struct ap_cache *c)
{
	asyncpool_inline_tc = (struct asyncpool_inline_cache *)c;
	return c;
}

/*
 * Hand out entry j of the calling thread's cache c of pool (entered):
 * the lease's generation, or 0 if a shared pool's buffer is not in the
 * cached state (the caller drops it and counts a corruption).  A local
 * pool's cache lends it, and counts it in *lent for the caller to add
 * (once for a bulk, not a store per buffer): no store to the state, and
 * so none to a line that the thread which releases it last wrote.
 */
static inline uint32_t ap_cache_lend(struct asyncpool *pool, struct ap_cache *c, uint32_t j,
				     uint32_t *lent)
{
	if (AP_LIKELY(pool->fl.lazy)) {
		++*lent;
		return ap_cache_gen(c, j);
	}
	return ap_state_cached_to_leased(&pool->fl.state[ap_cache_idx(c, j)], pool->fl.me,
					 ap_cache_gen(c, j));
}

/*
 * Put buffer idx, released by a lease of generation gen (0: any), at
 * entry n of cache c (entered, not full): the CAS that refuses a stale
 * or racing copy (false, not counted here).  A lent one is counted in
 * *back, for the caller to take from the cache's lent.
 */
static inline __attribute__((always_inline)) bool
ap_cache_push(struct asyncpool *pool, struct ap_cache *c, uint32_t n, uint32_t idx, uint32_t gen,
	      uint32_t *back)
{
	uint32_t kind;

	/* A pool that lends: only a buffer this cache owns and lent. */
	if (AP_LIKELY(pool->fl.lazy)) {
		if (AP_UNLIKELY(!ap_cache_push_owned(pool, c, n, ap_owner_hint(pool, idx), idx,
						     gen)))
			return false;
		++*back;
		return true;
	}
	kind = ap_state_leased_to_cached(&pool->fl.state[idx], gen, pool->fl.me, AP_NO_LENT);
	if (AP_UNLIKELY(!kind))
		return false;
	/* The word's new generation; of a lease of any generation (0), read
	 * back: the buffer is this cache's now, no one else changes it. */
	c->tok[n] = AP_TOKEN_MAKE(gen ? ap_gen_next(gen) : AP_W_GEN(ap_state_load(&pool->fl.state[idx])),
				  idx);
	*back += kind == AP_K_CACHED;
	return true;
}

/*
 * The common release of a pool that lends: buffer idx, of generation
 * gen, lent by a cache of the calling thread's, back into it while it
 * has room (ap_cache_push_owned), or lent by another thread's, into an
 * outbox (ap_outbox_gather).  Inline, with nothing to spill, so that
 * the exported release that calls it needs no stack frame; false leaves
 * everything else (a full cache or outbox, a stale copy, a shared pool)
 * to the caller's out-of-line rest (ap_cache_release()).
 */
static inline __attribute__((always_inline)) bool ap_cache_put_lent(struct asyncpool *pool,
								     uint32_t idx, uint32_t gen)
{
	struct ap_cache *c = ap_tc_last;
	uint32_t n, o;

	/* ap_tc_last->pool is this pool only if it has caches.  (pool is
	 * not NULL; lazy first: a shared pool's release looks no further.) */
	if (AP_LIKELY(pool->fl.lazy && c->pool == pool && idx < pool->fl.count &&
		      ap_cache_enter(c))) {
		n = c->n;
		o = ap_owner_hint(pool, idx);
		if (AP_LIKELY(n != c->size && ap_cache_push_owned(pool, c, n, o, idx, gen))) {
			ap_cache_leave_n(c, n + 1);         /* lent back: held unchanged */
			return true;
		}
		if (ap_outbox_gather(pool, c, o, idx, gen)) {
			ap_cache_leave(c);
			return true;
		}
		ap_cache_leave(c);
	}
	return false;
}

/*
 * Lease a buffer from the calling thread's cache of pool, if it has one
 * with a buffer in it: the fast path of asyncpool_acquire().  A pool
 * that lends hands it out here, inline, with nothing to spill; a shared
 * pool's cache marks it leased (ap_cache_take_shared, below).  A buffer
 * that is not in the cached state is left to the slow path, which drops
 * it and counts a corruption.
 */
static inline __attribute__((always_inline)) bool ap_cache_take_gen(struct asyncpool *pool,
								     uint32_t *idx, uint32_t *gen)
{
	struct ap_cache *c = ap_tc_last;
	uint32_t n;

	/* pool may be NULL: it then matches ap_cache_none, which is empty. */
	if (AP_UNLIKELY(c->pool != pool || !pool))
		return false;
	if (AP_LIKELY(pool->fl.lazy && ap_cache_enter(c))) {
		/* n only once inside: a flusher may have emptied it. */
		if (AP_LIKELY((n = c->n) != 0)) {
			/* In range: the refill or release that cached it checked it;
			 * lent: its word stays as it is (ap_cache_lend). */
			*gen = ap_cache_gen(c, n - 1);
			*idx = ap_cache_idx(c, n - 1);
			ap_cache_leave_n(c, n - 1);         /* lent: held unchanged */
			return true;
		}
		ap_cache_leave(c);
	}
	return false;
}

static inline bool ap_cache_take(struct asyncpool *pool, struct asyncpool_lease *out)
{
	uint32_t idx, gen;

	if (AP_LIKELY(ap_cache_take_gen(pool, &idx, &gen))) {
		ap_pool_lease(pool, idx, gen, ap_cache_recycle, out);
		return true;
	}
	return false;
}

/*
 * ap_cache_take_gen() of a pool that does not lend, from c, the calling
 * thread's cache of pool (the caller looked): the top buffer is marked
 * leased, CACHED(me, g) -> LEASED(me, g), a load and a store
 * (asyncpool-shared(7): only its holder writes a CACHED word).  Its
 * token, or 0: none left, a flusher inside, or a word that is not as
 * cached (the slow path drops that one and counts a corruption).
 * Inline, with nothing to spill, in the exported acquires.
 */
static inline __attribute__((always_inline)) uint64_t ap_cache_take_shared(struct asyncpool *pool,
									 struct ap_cache *c)
{
	uint64_t t = 0;
	uint32_t n, idx, gen;

	if (AP_LIKELY(ap_cache_enter(c))) {
		/* n only once inside: a flusher may have emptied it. */
		if (AP_LIKELY((n = c->n) != 0)) {
			idx = ap_cache_idx(c, n - 1);
			gen = ap_state_cached_to_leased(&pool->fl.state[idx], pool->fl.me,
							ap_cache_gen(c, n - 1));
			if (AP_LIKELY(gen)) {
				ap_cache_leave_n(c, n - 1);
				return AP_TOKEN_MAKE(gen, idx);
			}
		}
		ap_cache_leave(c);
	}
	return t;
}

/*
 * The common release of a pool that does not lend (a shared pool's):
 * buffer idx, of a lease of generation gen (not 0), into the calling
 * thread's cache of pool while it has room, by one CAS LEASED(any
 * holder, gen) -> CACHED(me, gen + 1) (asyncpool-shared(7)).  false
 * leaves everything else (another pool's cache, a full one, a flusher
 * inside, a refused or racing copy: nothing changed) to
 * ap_cache_release(), which decides and counts.  Inline, with nothing
 * to spill.
 */
static inline __attribute__((always_inline)) bool ap_cache_put_shared(struct asyncpool *pool,
								       uint32_t idx, uint32_t gen)
{
	struct ap_cache *c = ap_tc_last;
	uint32_t n;
	uint64_t w;
	bool done = false;

	if (AP_UNLIKELY(c->pool != pool || !pool || pool->fl.lazy || idx >= pool->fl.count || !gen))
		return false;
	if (AP_LIKELY(ap_cache_enter(c))) {
		n = c->n;
		w = ap_state_load(&pool->fl.state[idx]);
		if (AP_LIKELY(n != c->size && ap_state_lease_gen(w, gen, AP_NO_LENT))) {
			AP_TEST_STALL(AP_TS_CACHE_CLAIM);
			if (AP_LIKELY_CAS(ap_state_cas(&pool->fl.state[idx], &w,
						       AP_W_MAKE(AP_K_CACHED, pool->fl.me,
								 ap_gen_next(gen))))) {
				c->tok[n] = AP_TOKEN_MAKE(ap_gen_next(gen), idx);
				ap_cache_leave_n(c, n + 1);
				return true;
			}
		}
		ap_cache_leave(c);
	}
	return done;
}

/* The calling thread's cache of pool, made if it has none: NULL if out of memory. */
struct ap_cache *ap_cache_get(struct asyncpool *pool);

/* The same, with no call when it is the cache the thread used last (the usual case). */
static inline struct ap_cache *ap_cache_of(struct asyncpool *pool)
{
	struct ap_cache *c = ap_tc_last;

	return AP_LIKELY(c->pool == pool) ? c : ap_cache_get(pool);
}

/* A release that ap_cache_put_lent() did not take: 0, or as ap_fl_release(). */
int ap_cache_release(struct asyncpool *pool, uint32_t idx, uint32_t gen);
/*
 * Fill the calling thread's empty or part-full cache c (entered) to at
 * least min and at most max entries: its inbox, a depot batch, the
 * freelist.  0 or -errno (c->n as it got).
 */
int ap_cache_fill(struct asyncpool *pool, struct ap_cache *c, uint32_t min, uint32_t max);
/*
 * ap_owner_release() by the calling thread's cache of pool, made if it
 * has none (pool_owner.h): 0, -EINVAL, or -EALREADY.
 */
static inline int ap_cache_owner_release(struct asyncpool *pool, uint32_t idx, uint32_t gen)
{
	if (AP_UNLIKELY(idx >= pool->fl.count))
		return -EINVAL;
	return ap_owner_release(pool, ap_cache_of(pool), idx, gen);
}

/*
 * One try at a lease from the calling thread's cache, refilled from
 * the freelist: 0, -errno, or AP_CACHE_LENDS: the thread's cache has no
 * entries (made before the pool had caches, asyncpool_set_cache(), and
 * not grown), the caller lends instead (pool_lend.c).
 */
#define AP_CACHE_LENDS 1
int ap_cache_acquire_once(struct asyncpool *pool, struct asyncpool_lease *out);

#endif /* ASYNCPOOL_POOL_CACHE_H */
