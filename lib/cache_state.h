/* SPDX-License-Identifier: MIT */
/*
 * The state of a per-thread cache, below every file that uses one:
 * the cache's struct, its count, and its owner's half of the window.
 *
 * A cache is an array of free buffers as tokens (the generation of
 * each one's state word << 32 | its index), owned by one thread, for one pool handle
 * (pool_cache.c makes and finds them; pool_depot.c moves their batches;
 * pool_owner.c decides what comes back to them; pool_bypass.c stops
 * their owners; pool_takeover.c takes their buffers; pool_lend.c lends
 * through caches of no entries).
 *
 * Another thread may take a cache's buffers (asyncpool_cache_flush_all,
 * a waiter, an acquire that finds the freelist empty): an asymmetric
 * protocol, so that the owner's fast path stays plain loads and stores.
 *
 *   owner (ap_cache_enter ... leave)      flusher (pool_bypass.c, under the lock)
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
#ifndef ASYNCPOOL_CACHE_STATE_H
#define ASYNCPOOL_CACHE_STATE_H

#include "pool_internal.h"

struct ap_tcache;
struct ap_inbox;

/*
 * Releases of buffers that another cache owns, gathered per owner
 * (pool_owner.c): a batch goes to its owner's inbox with one CAS.  A
 * few per thread, by owner id modulo AP_OUTBOXES.  A batch is
 * pool->outbox_batch tokens, from AP_OUTBOX_BATCH_MIN up to
 * AP_OUTBOX_BATCH_MAX as the pool grows (ap_owner_table_init()).
 */
#define AP_OUTBOX_BATCH_MIN 32u
#define AP_OUTBOX_BATCH_MAX 128u
#define AP_OUTBOXES     4u

/* The inline paths gather into them too (<asyncpool/inline.h>, since 1.8). */
struct ap_outbox {
	uint32_t owner;
	uint32_t n;                     /* read by others: relaxed */
	uint64_t tok[AP_OUTBOX_BATCH_MAX];
};

/*
 * A thread's cache.  Its first 128 bytes are struct
 * asyncpool_inline_cache (<asyncpool/inline.h>), field for field
 * (pool_cache.c asserts it): the ABI that the inline fast paths of the
 * public header read, whose version the cache publishes in abi when
 * the inline code may use it (pool_cache.c, cache_publish()).  The
 * pool's fields in it are copies, constant while the cache is the
 * pool's.
 */
struct ap_cache {
	/* Owner thread only, on every operation. */
	uint32_t          abi;          /* ASYNCPOOL_INLINE_ABI, or 0: the exported paths */
	uint32_t          bypass;       /* owners go to the freelist (above) */
	struct asyncpool *pool;         /* NULL once the pool is destroyed */
	uint32_t          size;
	uint32_t          count;        /* pool->fl.count */
	uint32_t          n __attribute__((aligned(8))); /* cached buffers (read by others: relaxed) */
	uint32_t          busy;         /* the owner is inside (above); with n, one word */
	uint64_t         *tok;          /* tok[j]: an entry (slots[]), ap_cache_idx/gen */
	struct ap_outbox *outboxes;     /* outbox[], for the inline paths */
#if UINTPTR_MAX < UINT64_MAX
	uint32_t          __outboxes_pad;
#endif
	uint64_t          owned;        /* ap_owned_word(id, 0) */
	uint32_t          id;           /* owner id in the words (local pools that lend) */
	uint32_t          outbox_limit; /* pool->outbox_batch where the inline paths gather, or 0 */
	ap_word          *state;        /* pool->fl.state */
	_Atomic uint32_t *owner_of;     /* pool->owner_of */
	_Atomic uint32_t *released;     /* pool->released */
	void            (*recycle)(void *ctx, uint32_t buffer_index); /* its leases' */
	struct asyncpool_region *region;
	size_t            buffer_size;
	struct asyncpool *gate;         /* pool while bypass is 0 (ap_cache_set_bypass()), else NULL */
#if UINTPTR_MAX < UINT64_MAX
	uint32_t          __gate_pad;
#endif
	uint64_t          reserved1;
	/* The library's alone from here. */
	uint32_t          batch;
	/*
	 * Lent here less lent ones given back here, plus n: the lent count
	 * derived (ap_cache_lent()), so that a lend and the owner's release,
	 * which move a buffer between n and lent, store n alone.
	 */
	int64_t           held;
	struct ap_inbox  *box;          /* this owner's inbox, or NULL */
	/* Under ap_cache_lock (pool_bypass.c). */
	struct ap_cache  *reg_next;     /* the pool's registry */
	struct ap_cache **reg_pprev;
	struct ap_tcache *owner;        /* the owning thread's table */
	/* Owner thread, inside (a flusher under the lock takes them). */
	struct ap_outbox  outbox[AP_OUTBOXES];
	uint64_t          slots[];      /* size entries */
};

/* Entry j of cache c: its buffer, and the generation of the buffer's word. */
static inline uint32_t ap_cache_idx(const struct ap_cache *c, uint32_t j)
{
	return AP_TOKEN_INDEX(c->tok[j]);
}

static inline uint32_t ap_cache_gen(const struct ap_cache *c, uint32_t j)
{
	return AP_TOKEN_GEN(c->tok[j]);
}

static inline uint32_t ap_cache_n(const struct ap_cache *c)
{
	return __atomic_load_n(&c->n, __ATOMIC_RELAXED);
}

/*
 * The cache holds n entries now, the buffers that came or went not lent
 * ones (a refill, a flush, a batch taken): held follows n.
 */
static inline void ap_cache_set_n(struct ap_cache *c, uint32_t n)
{
	/* Only the owner (or a flusher with it stopped) writes them; the audit reads them. */
	__atomic_store_n(&c->held, c->held + ((int64_t)n - (int64_t)c->n), __ATOMIC_RELAXED);
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

/*
 * Close cache c to its owner (bypass) or open it again: bypass, which
 * the library's owner paths and the inline code of 1.6 to 1.8 read,
 * and gate, which the inline code since 1.9 compares with the pool in
 * its place (inline.h): the pool while open, NULL while closed or of no
 * pool.  order: relaxed before a flusher's membarrier(2), release when
 * it opens the cache after writing it.
 */
static inline void ap_cache_set_bypass(struct ap_cache *c, bool bypass, int order)
{
	__atomic_store_n(&c->gate, bypass ? NULL : c->pool, order);
	__atomic_store_n(&c->bypass, bypass ? 1u : 0u, order);
}

static inline void ap_cache_leave(struct ap_cache *c)
{
	__atomic_store_n(&c->busy, 0, __ATOMIC_RELEASE);
}

/*
 * Leave c holding n entries, n and busy = 0 in one release store where
 * they are one word (inline.h, __asyncpool_leave_n()), held unchanged:
 * the buffers that came or went are lent ones (a lend: n less, as many
 * more lent; the owner's release of what it lent: the reverse), or the
 * cache is a shared pool's, which lends nothing and keeps no held on
 * its fast paths (ap_cache_lent() counts pools that lend only).
 */
static inline void ap_cache_leave_n(struct ap_cache *c, uint32_t n)
{
#if __SIZEOF_POINTER__ == 8 && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ && \
	!defined(__ASYNCPOOL_TSAN)
	typedef uint64_t __attribute__((may_alias)) ap_count_word;

	__atomic_store_n((ap_count_word *)&c->n, (uint64_t)n, __ATOMIC_RELEASE);
#else
	__atomic_store_n(&c->n, n, __ATOMIC_RELAXED);
	ap_cache_leave(c);
#endif
}

/* Count d more buffers lent by cache c (entered), less given back to it, n unchanged. */
static inline void ap_cache_add_lent(struct ap_cache *c, int64_t d)
{
	/* Only the owner writes it; the audit reads it. */
	__atomic_store_n(&c->held, c->held + d, __ATOMIC_RELAXED);
}

/*
 * What cache c lent and was not given back to it (an estimate unless c
 * is stopped); of a pool that lends only (ap_cache_leave_n()).
 */
static inline int64_t ap_cache_lent(const struct ap_cache *c)
{
	return __atomic_load_n(&c->held, __ATOMIC_RELAXED) - (int64_t)ap_cache_n(c);
}

#endif /* ASYNCPOOL_CACHE_STATE_H */
