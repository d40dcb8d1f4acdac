/* SPDX-License-Identifier: MIT */
/*
 * Per-thread caches in front of a pool's freelist (pool_cache.c).
 *
 * A cache is an array of free buffer indices, with the generation of
 * each one's state word, owned by one thread, for one pool handle.
 * Acquire pops from it: in a local pool it lends the buffer without a
 * store to its state (buffer_state.h, "lent"), in a shared pool it
 * marks it leased with a plain store.  Release claims the buffer's
 * state by a CAS, then pushes it (a shared pool), or, in a local pool,
 * the cache that owns the buffer decides it with a load and a store
 * (pool_cache.c, "Ownership"); only a refill (the cache is empty) or a flush
 * (it is full) leaves the thread, moving cache_batch buffers with one
 * CAS: through a local pool's depot (pool_depot.c) as an array, else
 * through the freelist's head as a chain.  A cached buffer's state is CACHED (buffer_state.h):
 * a release of it is refused like a release of a free buffer, and a
 * cache hands out only buffers whose state says cached.
 *
 * Another thread may take a cache's buffers (asyncpool_cache_flush_all,
 * a waiter, an acquire that finds the freelist empty): an asymmetric
 * protocol, so that the owner's fast path stays plain loads and stores.
 *
 *   owner (ap_cache_enter ... leave)      flusher (pool_cache.c, under the lock)
 *   busy = 1                              bypass = 1
 *   compiler barrier                      membarrier(PRIVATE_EXPEDITED)
 *   bypass? -> busy = 0, use the freelist while (busy) sched_yield()
 *   ... the cache, as always ...          take the cache's buffers
 *   busy = 0 (release)                    bypass = 0, or kept while waiting
 *
 * membarrier(2) runs a full memory barrier on every running thread of
 * the process between the flusher's store and its loads, which the
 * owner's program order then makes a Dekker pair: either the owner sees
 * bypass, or the flusher sees busy.  An owner that sees bypass leaves
 * its cache alone and goes to the freelist, so it never waits; a
 * flusher waits at most for an owner's few instructions (longer only if
 * the owner is preempted inside them).  While a thread of this process
 * waits for a buffer, bypass stays set: every release goes to the
 * freelist, where it wakes the waiter.  Proved in tests/model/wait.pml.
 */
#ifndef ASYNCPOOL_POOL_CACHE_H
#define ASYNCPOOL_POOL_CACHE_H

#include "pool_inbox.h"
#include "pool_internal.h"

struct ap_tcache;
struct ap_inbox;

/*
 * Releases of buffers that another cache owns, gathered per owner
 * (pool_cache.c, "Ownership"): a batch goes to its owner's inbox with
 * one CAS.  A few per thread, by owner id modulo AP_OUTBOXES.
 */
#define AP_OUTBOX_BATCH 32u
#define AP_OUTBOXES     4u

struct ap_outbox {
	uint32_t owner;
	uint32_t n;                     /* read by others: relaxed */
	uint64_t tok[AP_OUTBOX_BATCH];
};

struct ap_cache {
	/* Owner thread only, on every operation. */
	struct asyncpool *pool;         /* NULL once the pool is destroyed */
	uint32_t          n;            /* cached buffers (read by others: relaxed) */
	uint32_t          size;
	uint32_t          batch;
	uint32_t          busy;         /* the owner is inside (above) */
	uint32_t          bypass;       /* owners go to the freelist (above) */
	uint32_t          pad;
	uint32_t         *gen;          /* gen[j]: the generation of idx[j]'s word */
	int64_t           lent;         /* lent here less lent ones given back here */
	uint32_t          id;           /* owner id in the words (local pools that lend) */
	struct ap_inbox  *box;          /* this owner's inbox, or NULL */
	/* Under ap_cache_lock. */
	struct ap_cache  *reg_next;     /* the pool's registry */
	struct ap_cache **reg_pprev;
	struct ap_tcache *owner;        /* the owning thread's table */
	/* Owner thread, inside (a flusher under the lock takes them). */
	struct ap_outbox  outbox[AP_OUTBOXES];
	uint32_t          idx[];        /* size entries, then gen's size */
};

/* The calling thread's cache used last, or &ap_cache_none; never NULL. */
extern struct ap_cache ap_cache_none __attribute__((visibility("hidden")));
extern __thread struct ap_cache *ap_tc_last
	__attribute__((tls_model("initial-exec"), visibility("hidden")));

static inline uint32_t ap_cache_n(const struct ap_cache *c)
{
	return __atomic_load_n(&c->n, __ATOMIC_RELAXED);
}

static inline void ap_cache_set_n(struct ap_cache *c, uint32_t n)
{
	__atomic_store_n(&c->n, n, __ATOMIC_RELAXED);
}

/* The owner starts using its cache: false if a flusher has it (above). */
static inline bool ap_cache_enter(struct ap_cache *c)
{
	__atomic_store_n(&c->busy, 1, __ATOMIC_RELAXED);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (AP_UNLIKELY(__atomic_load_n(&c->bypass, __ATOMIC_ACQUIRE))) {
		__atomic_store_n(&c->busy, 0, __ATOMIC_RELEASE);
		return false;
	}
	return true;
}

static inline void ap_cache_leave(struct ap_cache *c)
{
	__atomic_store_n(&c->busy, 0, __ATOMIC_RELEASE);
}

/* Count d more buffers lent by cache c (entered), less given back to it. */
static inline void ap_cache_add_lent(struct ap_cache *c, int64_t d)
{
	/* Only the owner writes it; the audit reads it. */
	__atomic_store_n(&c->lent, c->lent + d, __ATOMIC_RELAXED);
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
		return c->gen[j];
	}
	return ap_state_cached_to_leased(&pool->fl.state[c->idx[j]], pool->fl.me, c->gen[j]);
}

/* Which cache owns buffer idx of a pool that lends, 0 if none: a hint (pool_cache.c). */
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
	c->idx[n] = idx;
	c->gen[n] = gen + 1;
	return true;
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
	c->idx[n] = idx;
	/* The word's new generation; of a lease of any generation (0), read
	 * back: the buffer is this cache's now, no one else changes it. */
	c->gen[n] = gen ? ap_gen_next(gen) : AP_W_GEN(ap_state_load(&pool->fl.state[idx]));
	*back += kind == AP_K_CACHED;
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
			n + 1 >= AP_OUTBOX_BATCH))
		return false;
	AP_TEST_STALL(AP_TS_CACHE_CLAIM);
	atomic_store_explicit(&pool->released[idx], gen, memory_order_relaxed);
	ob->tok[n] = AP_TOKEN_MAKE(gen, idx) | AP_INBOX_HINTED;
	__atomic_store_n(&ob->n, n + 1, __ATOMIC_RELAXED);
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

	/* ap_tc_last->pool is this pool only if it has caches. */
	if (AP_LIKELY(c->pool == pool && pool->fl.lazy && idx < pool->fl.count &&
		      ap_cache_enter(c))) {
		n = c->n;
		o = ap_owner_hint(pool, idx);
		if (AP_LIKELY(n != c->size && ap_cache_push_owned(pool, c, n, o, idx, gen))) {
			ap_cache_add_lent(c, -1);
			ap_cache_set_n(c, n + 1);
			ap_cache_leave(c);
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
 * pool's cache marks it leased out of line (ap_cache_take_shared).  A
 * buffer that is not in the cached state is left to the slow path,
 * which drops it and counts a corruption.
 */
uint64_t ap_cache_take_shared(struct asyncpool *pool);

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
			*gen = c->gen[n - 1];
			*idx = c->idx[n - 1];
			ap_cache_add_lent(c, 1);
			ap_cache_set_n(c, n - 1);
			ap_cache_leave(c);
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
 * Make k cached buffers (of a cache or of a depot slot) free, not yet
 * linked, keeping them at the front of v: how many.  A buffer whose
 * state is no longer cached (a copy of it went into another cache too)
 * (or its generation moved on) is dropped and counted, never linked in
 * twice.
 */
/* Inline: the depot (pool_depot.c) uses it, and is below pool_cache.c. */
static inline uint32_t ap_cache_uncache(struct asyncpool *pool, uint32_t *v, uint32_t *gens,
					uint32_t k)
{
	uint32_t kept = 0, dropped = 0;

	for (uint32_t j = 0; j < k; j++) {
		if (pool->owner_of)     /* to the freelist: no owner */
			atomic_store_explicit(&pool->owner_of[v[j]], 0, memory_order_relaxed);
		if (AP_LIKELY(ap_state_uncache(&pool->fl.state[v[j]], pool->fl.me, gens[j]))) {
			gens[kept] = gens[j];
			v[kept++] = v[j];
		} else
			dropped++;
		AP_TEST_AT(AP_TP_FLUSH_UNCACHED);
	}
	if (AP_UNLIKELY(dropped))
		ap_fl_count_corruption(&pool->fl, dropped);
	return kept;
}

/* pool_cache.c, for the bulk operations and the depot */
/* The calling thread's cache of pool, made if it has none: NULL if out of memory. */
struct ap_cache *ap_cache_get(struct asyncpool *pool);

/* The same, with no call when it is the cache the thread used last (the usual case). */
static inline struct ap_cache *ap_cache_of(struct asyncpool *pool)
{
	struct ap_cache *c = ap_tc_last;

	return AP_LIKELY(c->pool == pool) ? c : ap_cache_get(pool);
}

void ap_cache_flush_batch(struct ap_cache *c);
/* A release that ap_cache_put_lent() did not take: 0, or as ap_fl_release(). */
int ap_cache_release(struct asyncpool *pool, uint32_t idx, uint32_t gen);
/*
 * Fill the calling thread's empty or part-full cache c (entered) to at
 * least min and at most max entries: its inbox, a depot batch, the
 * freelist.  0 or -errno (c->n as it got).
 */
int ap_cache_fill(struct asyncpool *pool, struct ap_cache *c, uint32_t min, uint32_t max);
/*
 * A release of a pool that lends which the fast path did not take (the
 * caller is outside its cache): 0, or -EALREADY (refused, counted).
 */
int ap_owner_release(struct asyncpool *pool, uint32_t idx, uint32_t gen);
/*
 * A release (adopt false) or an adoption (true: *newgen) of a lent
 * buffer, by index (gen 0) or of generation gen, with every owner of
 * the process stopped: the kind the word had (AP_K_CACHED), 0 if
 * refused, -1 if the word is LEASED (lent by no one: the caller's
 * usual CAS decides).
 */
int ap_cache_claim_lent(struct asyncpool *pool, uint32_t idx, uint32_t gen, bool adopt,
			uint32_t *newgen);

/*
 * Lending without a cache (pool_cache.c): a local pool with cache_size
 * 0.  ap_lend_acquire() is its single acquire (0 or -errno).
 * ap_lend_enter() is the calling thread's cache of no entries, entered,
 * its inbox emptied, or NULL (none, or a flusher has it: the caller
 * pops as a pool that does not lend); ap_lend_pop() pops n buffers
 * into n records (index, generation; stride bytes apart) as that
 * cache's lent buffers, AP_LEND_CHUNK per CAS: how many, fewer with
 * *rc set (the caller gives those back).  ap_lend_put() gives back to
 * the freelist, as one chain, the tokens tok[0..k) that c (entered, of
 * no entries) owns and lent at their generation; the rest go to
 * rest[], how many is returned, for ap_owner_release().
 */
#define AP_LEND_CHUNK 32u       /* buffers per CAS of a bulk lend (asyncpool_acquire_bulk(3)) */
int ap_lend_acquire(struct asyncpool *pool, uint32_t *idx, uint32_t *gen);
/* ap_lend_acquire() into a lease: 0, or -errno with *out zeroed. */
int ap_lend_lease(struct asyncpool *pool, struct asyncpool_lease *out);
struct ap_cache *ap_lend_enter(struct asyncpool *pool);
uint32_t ap_lend_pop(struct asyncpool *pool, struct ap_cache *c, char *idx, char *gen,
		     size_t stride, uint32_t n, int *rc);
uint32_t ap_lend_put(struct asyncpool *pool, struct ap_cache *c, const uint64_t *tok, uint32_t k,
		     uint64_t *rest);

/*
 * pool_depot.c: a local pool's depot of full batches, between its
 * caches and its freelist.  put and take move one batch of the calling
 * thread's cache c (entered); drain gives every full slot back to the
 * freelist (how many buffers); count is what the slots hold.
 */
int ap_depot_init(struct asyncpool *pool);
void ap_depot_free(struct asyncpool *pool);
bool ap_depot_put(struct asyncpool *pool, struct ap_cache *c);
uint32_t ap_depot_take(struct asyncpool *pool, struct ap_cache *c);
int ap_depot_drain(struct asyncpool *pool);
uint32_t ap_depot_count(const struct asyncpool *pool);
bool ap_depot_holds(struct asyncpool *pool, uint32_t idx);
void ap_depot_forget_busy(struct asyncpool *pool);

#endif /* ASYNCPOOL_POOL_CACHE_H */
