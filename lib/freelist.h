/* SPDX-License-Identifier: MIT */
/*
 * The lock-free index freelist: the bottom layer of a pool.  It knows
 * the layout (pool_layout.h) and the buffer states (buffer_state.h),
 * nothing of caches, leases or regions.
 */
#ifndef ASYNCPOOL_FREELIST_H
#define ASYNCPOOL_FREELIST_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "pool_layout.h"

struct ap_freelist {
	struct ap_pool_head     *line;  /* the head word */
	_Atomic uint32_t        *next;  /* link and state of each buffer */
	struct ap_pool_counters *ctr;
	uint32_t                 count;
};

/* Test builds can stall a thread between reading the head and its CAS. */
#ifdef ASYNCPOOL_TEST_HOOKS
extern void (*ap_test_hook_before_cas)(void);
#define AP_TEST_POINT() do { if (ap_test_hook_before_cas) ap_test_hook_before_cas(); } while (0)
#else
#define AP_TEST_POINT() do { } while (0)
#endif

/* Pop one buffer and mark it with the state its taker gives (buffer_state.h). */
int ap_fl_pop(struct ap_freelist *fl, uint32_t mark, uint32_t *idx);
/*
 * Pop at least min and at most max buffers as one chain with one CAS,
 * mark each, and store their indices at out, stride bytes apart.
 */
int ap_fl_pop_chain(struct ap_freelist *fl, void *out, size_t stride, uint32_t min,
		    uint32_t max, uint32_t mark, uint32_t *got);
/*
 * leased -> free: claim buffer idx (one release of a lease wins), then
 * link it in.  0, -EINVAL (out of range), -EALREADY (not leased: counted)
 * or -EUCLEAN (the head never held still: the claim is given back).
 */
int ap_fl_release(struct ap_freelist *fl, uint32_t idx);
/* Link in a buffer the caller has claimed (ap_state_claim_leased()). */
int ap_fl_push(struct ap_freelist *fl, uint32_t idx);
/* Link in n claimed buffers as one chain with one CAS. */
int ap_fl_push_chain(struct ap_freelist *fl, const uint32_t *idx, uint32_t n);
/* The buffers on the list, bounded and honest about a cycle. */
uint32_t ap_fl_count(const struct ap_freelist *fl);
void ap_fl_count_corruption(const struct ap_freelist *fl, uint64_t n);
void ap_fl_count_bad_release(const struct ap_freelist *fl, uint64_t n);

#endif /* ASYNCPOOL_FREELIST_H */
