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

#endif /* ASYNCPOOL_POOL_INTERNAL_H */
