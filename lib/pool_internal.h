/* SPDX-License-Identifier: MIT */
/*
 * The pool object, shared by the files of the pool layer:
 *
 *   pool.c          create, acquire, release, destroy: cache or freelist
 *   pool_pop.c      the pops (a refund when the freelist is empty), the uncached
 *                   release: pool_pop.h
 *   pool_options.c  asyncpool_create_opts()
 *   pool_cache.c    per-thread caches (their state: cache_state.h)
 *   pool_lend.c     lending without a cache
 *   pool_takeover.c taking other threads' caches
 *   pool_owner.c    the owners of lent buffers, and their inboxes
 *   pool_bypass.c   stopping the owners of the caches
 *   pool_depot.c    where a cache's batches go: a local pool's depot, or the freelist
 *   pool_bulk.c     bulk acquire and release
 *   pool_shared.c   shared pools: create, open, release by index, adopt
 *   pool_audit.c    asyncpool_check()
 *   freelist.c      the lock-free freelist underneath them all
 */
#ifndef ASYNCPOOL_POOL_INTERNAL_H
#define ASYNCPOOL_POOL_INTERNAL_H

#include "internal.h"
#include "buffer_state.h"
#include "freelist.h"
#include "lease.h"
#include "pool_layout.h"

struct asyncpool {
	/* Read on every operation: kept together. */
	struct ap_freelist       fl;
	size_t                   buffer_size;
	struct asyncpool_region *region;
	ap_release_token_fn     *release_fn;    /* of this pool's leases */
	struct ap_pool_header   *hdr;
	void                    *storage;       /* the layout */
	size_t                   storage_size;
	bool                     owns_storage;  /* local pool: munmap on destroy */
	bool                     shared;
	/* Per-thread caches (pool_cache.c); cache_size 0: none. */
	uint32_t                 cache_size;
	uint32_t                 cache_batch;   /* moved per refill or flush */
	bool                     cache_default; /* asyncpool_create()'s, not asked for */
	struct ap_cache         *caches;        /* registry, under ap_cache_lock */
	struct asyncpool        *cached_next;   /* list of cached pools, same lock */
	struct asyncpool       **cached_pprev;
	uint32_t                 local_waiters; /* threads waiting here, same lock */
	_Atomic uint32_t         flush_seen;    /* the last flush request honoured */
	struct ap_wait_fd       *wait_fd;       /* asyncpool_wait_fd(), pool_wait.c */
	/* Its hook: installed with wait_fd by pool_wait.c, a layer above
	 * pool.c, whose asyncpool_destroy() calls it (NULL: no wait fd). */
	void                   (*wait_fd_close)(struct asyncpool *pool);
	/* Crash safety (attach.c, reclaim.c): shared pools with a file. */
	int                      lock_fd;       /* our own open file description, or -1 */
	uint32_t                 slot;          /* our attachment, if lock_fd >= 0 */
	/* lock_fd is the description we were sent, not our own (attach.c,
	 * reopen): F_OFD_GETLK through it sees no lock of that description,
	 * whoever holds it, so no liveness test through it says "dead". */
	bool                     lock_borrowed;
	/* Set by any thread while another reclaims (the wait fd's, say). */
	_Atomic uint32_t         quarantine_ms;
	_Atomic uint64_t         reclaim_after; /* no automatic reclaim before (coarse ns) */
	_Atomic bool             reclaiming;    /* a thread of this handle is in ap_reclaim */
	/* Channels (version 5, channel.c), from the header as validated
	 * at create or open: the shared copy is a peer's to rewrite. */
	uint32_t                 chan_count;
	uint32_t                 chan_cap;
	bool                     chan_drop;     /* AP_POOL_F_CHAN_DROP */
	struct ap_depot         *depot;         /* a local pool's, with caches (pool_depot.c) */
	/* Owners' inboxes of a pool whose caches lend, by owner id (1..;
	 * pool_owner.c): a fixed table, so that senders read it unlocked. */
	struct ap_inbox        **boxes;
	_Atomic uint32_t         box_count;     /* ids handed out so far, + 1 */
	uint32_t                 box_cap;       /* tokens per inbox */
	uint32_t                 outbox_batch;  /* tokens a sender gathers per send */
	/*
	 * Per buffer, for the releases on other threads (pool_owner.c):
	 * owner_of[i] the owner id, written when the buffer enters or
	 * leaves a cache, never while it is lent; released[i] the last
	 * generation released, written where a release is decided (never
	 * by a releaser that only sends: its token may be wrong).  Hints that
	 * refuse a stale copy at once without reading the word, whose line
	 * the owner writes: the owner's check of the word decides.
	 */
	_Atomic uint32_t        *owner_of;
	_Atomic uint32_t        *released;
	/* Regions of the same slab on other proactors, held until destroy
	 * (asyncpool_options.siblings, pool_options.c). */
	struct asyncpool_region **siblings;
	uint32_t                 sibling_count;
};

/*
 * Whether pool has per-thread caches (pool_cache.c): caches of
 * cache_size entries, or, in a local pool without them, caches of no
 * entries that only lend (pool_lend.c).
 */
static inline bool ap_pool_cached(const struct asyncpool *pool)
{
	return pool->cache_size || pool->fl.lazy;
}

/* A lease on buffer idx of pool, generation gen, given back through fn. */
static inline void ap_pool_lease(struct asyncpool *pool, uint32_t idx, uint32_t gen,
				 ap_release_token_fn *fn, struct asyncpool_lease *out)
{
	ap_lease_init_token(out, pool->region, pool->buffer_size, fn, pool, AP_TOKEN_MAKE(gen, idx));
}

/* The callback of a lease: whether it is one of a pool's. */
static inline bool ap_release_is(const struct asyncpool_lease *l, ap_release_token_fn *fn)
{
	return l->release.fn == (ap_release_fn *)(void (*)(void))fn;
}

/* A token that can name a lease of pool: a generation (any of 2^32 - 1), an index in range. */
static inline bool ap_token_ok(const struct asyncpool *pool, uint64_t token)
{
	return pool && AP_TOKEN_GEN(token) && AP_TOKEN_INDEX(token) < pool->fl.count;
}

/* pool.c */
/* asyncpool_create() without its default caches (asyncpool_create_opts). */
int  ap_pool_create_bare(struct asyncpool_region *r, struct asyncpool **out);
int  ap_layout_size(uint32_t count, bool shared, uint32_t channels, uint32_t capacity,
		    size_t *out);
void ap_layout_init(void *mem, uint32_t count, size_t buffer_size, bool shared,
		    uint32_t channels, uint32_t capacity);
void ap_layout_publish(void *mem);
/* pool_shared.c: asyncpool_create_shared() with channels (version 5);
 * chan_flags AP_POOL_F_CHAN_DROP or 0. */
int  ap_create_shared(void *mem, size_t size, struct asyncpool_region *r, uint32_t channels,
		      uint32_t capacity, uint32_t chan_flags, struct asyncpool **out);
void ap_pool_bind(struct asyncpool *pool, void *mem, struct asyncpool_region *r);
int  ap_pool_check_region(const struct asyncpool_region *r);

/* pool_cache.c (the rest of it: pool_cache.h) */
void ap_cache_recycle(void *ctx, uint64_t token);
int  ap_cache_destroy(struct asyncpool *pool);
uint32_t ap_cache_count(const struct asyncpool *pool, int64_t *lent, uint32_t *transit);
int  ap_pool_cache_init(struct asyncpool *pool, uint32_t cache_size);

/* attach.c: attachments (OFD locks); it calls ap_reclaim() when all are taken */
int  ap_attach(struct asyncpool *pool, int fd);
void ap_detach(struct asyncpool *pool);
/* A handle's records and their liveness, for attach.c and reclaim.c
 * both: attach_rec.h; ap_lock_byte() and the test itself: attach_live.h */

/* reclaim.c */
int  ap_reclaim(struct asyncpool *pool);
/* The automatic reclaim: at most one per AP_RECLAIM_AUTO_MS per handle. */
int  ap_reclaim_auto(struct asyncpool *pool);
#define AP_RECLAIM_AUTO_MS 10u

#endif /* ASYNCPOOL_POOL_INTERNAL_H */
