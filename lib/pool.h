/* SPDX-License-Identifier: MIT */
/* The pool object and its freelist, shared by pool.c and pool_shared.c. */
#ifndef ASYNCPOOL_POOL_INTERNAL_H
#define ASYNCPOOL_POOL_INTERNAL_H

#include "internal.h"
#include "pool_layout.h"

struct asyncpool {
	/* Read on every operation: kept together. */
	struct ap_pool_head     *line;
	_Atomic uint32_t        *next;
	uint32_t                 count;
	size_t                   buffer_size;
	struct asyncpool_region *region;
	struct ap_pool_counters *ctr;
	struct ap_pool_header   *hdr;
	void                    *storage;       /* the layout */
	size_t                   storage_size;
	bool                     owns_storage;  /* local pool: munmap on destroy */
	bool                     shared;
	/* Per-thread caches (pool_cache.c); cache_size 0: none. */
	uint32_t                 cache_size;
	uint32_t                 cache_batch;   /* moved per refill or flush */
	struct ap_cache         *caches;        /* registry, under ap_cache_lock */
	struct asyncpool        *cached_next;   /* list of cached pools, same lock */
	struct asyncpool       **cached_pprev;
};

/* Test builds can stall a thread between reading the head and its CAS. */
#ifdef ASYNCPOOL_TEST_HOOKS
extern void (*ap_test_hook_before_cas)(void);
#define AP_TEST_POINT() do { if (ap_test_hook_before_cas) ap_test_hook_before_cas(); } while (0)
#else
#define AP_TEST_POINT() do { } while (0)
#endif

/* pool.c */
int  ap_layout_size(uint32_t count, bool shared, size_t *out);
void ap_layout_init(void *mem, uint32_t count, size_t buffer_size, bool shared);
void ap_layout_publish(void *mem);
void ap_pool_bind(struct asyncpool *pool, void *mem, struct asyncpool_region *r);
int  ap_pool_check_region(const struct asyncpool_region *r);
int  ap_fl_pop(struct asyncpool *pool, uint32_t *idx);
int  ap_fl_push(struct asyncpool *pool, uint32_t idx);
uint32_t ap_fl_count(const struct asyncpool *pool);
void ap_pool_recycle(void *ctx, uint32_t idx);
void ap_lease_make(struct asyncpool *pool, uint32_t idx, struct asyncpool_lease *out);
int  ap_fl_pop_chain(struct asyncpool *pool, void *out, size_t stride, uint32_t min,
		     uint32_t max, uint32_t mark, uint32_t *got);
int  ap_fl_push_chain(struct asyncpool *pool, const uint32_t *idx, uint32_t n);
/* pool_cache.c: give a pool handle per-thread caches (local or shared). */
int  ap_pool_cache_init(struct asyncpool *pool, uint32_t cache_size);

#endif /* ASYNCPOOL_POOL_INTERNAL_H */
