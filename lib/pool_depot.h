/* SPDX-License-Identifier: MIT */
/*
 * pool_depot.c: where a cache's buffers go when it gives them back, and
 * a local pool's depot of full batches, between its caches and its
 * freelist.  Below the files of the caches (pool_owner.c, pool_cache.c,
 * pool_takeover.c) and pool_pop.c, which all hand buffers back.
 */
#ifndef ASYNCPOOL_POOL_DEPOT_H
#define ASYNCPOOL_POOL_DEPOT_H

#include "cache_state.h"

/*
 * Make room in cache c (full, entered): a batch to a depot slot, else
 * to the freelist as one chain (one CAS either way).
 */
void ap_cache_flush_batch(struct ap_cache *c);
/* The top k buffers of cache c back to the freelist as one chain: 0 or as ap_fl_push_chain(). */
int ap_cache_flush_top(struct ap_cache *c, uint32_t k);
/* All of cache c back to its pool's freelist (c's owner outside, or stopped). */
void ap_cache_drain(struct ap_cache *c);

/*
 * The depot: put and take move one batch of the calling thread's
 * cache c (entered); drain gives every full slot back to the freelist
 * (how many buffers); count is what the slots hold.
 */
int ap_depot_init(struct asyncpool *pool, uint32_t batch);
void ap_depot_free(struct asyncpool *pool);
bool ap_depot_put(struct asyncpool *pool, struct ap_cache *c);
uint32_t ap_depot_take(struct asyncpool *pool, struct ap_cache *c);
int ap_depot_drain(struct asyncpool *pool);
uint32_t ap_depot_count(const struct asyncpool *pool);
bool ap_depot_holds(struct asyncpool *pool, uint32_t idx);
void ap_depot_forget_busy(struct asyncpool *pool);

/*
 * A slot the caller holds (BUSY), filled or emptied in place by the
 * bulk lends of a pool without caches (pool_lend.c): its arrays, the
 * count it held, the batch it holds at most, and the owner id whose
 * words and hints its entries are (0: unknown, a cache's batch).  grab
 * takes a full slot (full) or an empty one: false if none; let go
 * leaves count entries in it, tok[0..count), of owner.
 */
struct ap_depot_slot {
	uint64_t *tok;                  /* entries, as a cache's (cache_state.h) */
	uint32_t s, n, batch, owner;
};
bool ap_depot_grab(struct asyncpool *pool, bool full, struct ap_depot_slot *sl);
/* What a slot holds at most: UINT32_MAX without a depot. */
uint32_t ap_depot_batch(const struct asyncpool *pool);
void ap_depot_let_go(struct asyncpool *pool, const struct ap_depot_slot *sl, uint32_t count);

#endif /* ASYNCPOOL_POOL_DEPOT_H */
