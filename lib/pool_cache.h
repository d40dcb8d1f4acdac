/* SPDX-License-Identifier: MIT */
/*
 * Per-thread caches in front of a pool's freelist (pool_cache.c).
 *
 * A cache is an array of free buffer indices owned by one thread, for
 * one pool handle.  Acquire pops from it and release pushes into it with
 * plain loads and stores; only a refill (the cache is empty) or a flush
 * (it is full) touches the shared head, moving cache_batch buffers with
 * one CAS.
 *
 * next[] holds each buffer's state, as for the freelist: a link while on
 * the list, AP_FL_LEASED while leased, AP_FL_CACHED while in some
 * thread's cache.  Only the thread that holds a buffer (in its cache, or
 * as the one legitimate releaser of a lease) writes its state, so the
 * cache flips it with plain stores: a release checks AP_FL_LEASED and
 * writes AP_FL_CACHED, which refuses a later release of a copy of the
 * lease, in any thread or process.  What plain stores cannot do is refuse
 * the second of two releases of the same buffer racing at the same
 * instant (the uncached paths, ap_fl_push() and the bulk release, can:
 * they claim by CAS); such a program already has a data race on its lease.
 */
#ifndef ASYNCPOOL_POOL_CACHE_H
#define ASYNCPOOL_POOL_CACHE_H

#include "pool.h"

struct ap_tcache;

struct ap_cache {
	/* Owner thread only, on every operation. */
	struct asyncpool *pool;         /* NULL once the pool is destroyed */
	uint32_t          n;            /* cached buffers (read by others: relaxed) */
	uint32_t          size;
	uint32_t          batch;
	uint32_t          pad;
	/* Under ap_cache_lock. */
	struct ap_cache  *reg_next;     /* the pool's registry */
	struct ap_cache **reg_pprev;
	struct ap_tcache *owner;        /* the owning thread's table */
	uint32_t          idx[];        /* size entries */
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

/* pool_cache.c */
void ap_cache_recycle(void *ctx, uint32_t idx);
int  ap_cache_acquire_slow(struct asyncpool *pool, struct asyncpool_lease *out);
int  ap_cache_destroy(struct asyncpool *pool);
uint32_t ap_cache_count(const struct asyncpool *pool);

static inline void ap_lease_fill(struct asyncpool *pool, uint32_t idx,
				 void (*fn)(void *, uint32_t), struct asyncpool_lease *out)
{
	out->span.region = pool->region;
	out->span.offset = (size_t)idx * pool->buffer_size;
	out->span.length = pool->buffer_size;
	out->release.fn = fn;
	out->release.ctx = pool;
	out->buffer_index = idx;
}

/*
 * Lease a buffer from the calling thread's cache of pool, if it has one
 * with a buffer in it: the fast path of asyncpool_acquire().
 */
static inline bool ap_cache_take(struct asyncpool *pool, struct asyncpool_lease *out)
{
	struct ap_cache *c = ap_tc_last;
	uint32_t n, idx;

	/* pool may be NULL: it then matches ap_cache_none, which is empty. */
	if (AP_LIKELY(c->pool == pool && (n = c->n) != 0)) {
		/* In range: the refill that cached it checked it. */
		idx = c->idx[n - 1];
		ap_cache_set_n(c, n - 1);
		atomic_store_explicit(&pool->next[idx], AP_FL_LEASED, memory_order_relaxed);
		ap_lease_fill(pool, idx, ap_cache_recycle, out);
		return true;
	}
	return false;
}

static inline int ap_cache_acquire(struct asyncpool *pool, struct asyncpool_lease *out)
{
	if (AP_LIKELY(ap_cache_take(pool, out)))
		return 0;
	return ap_cache_acquire_slow(pool, out);
}

#endif /* ASYNCPOOL_POOL_CACHE_H */
