/* SPDX-License-Identifier: MIT */
/*
 * The depot of a local pool's caches (pool_cache.h): a few slots, each
 * an array of up to cache_batch buffer indices, through which a full
 * cache hands a batch to an empty one without the freelist.
 *
 * Why: a refill from the freelist walks its links before the head CAS,
 * one dependent load per buffer, and once the pool's order is random
 * each is a miss on a line another core wrote.  A slot is one array the
 * core reads in parallel, as DPDK's ring behind its caches.
 *
 * A buffer in a slot stays CACHED (buffer_state.h), holder 0 as every
 * cache of a local pool, and the slot keeps each entry's generation: a
 * release of it is refused as before, and a cache that takes the slot
 * lends it as its own.  So a batch moves through the depot with no
 * store to any buffer's state.
 *
 * A slot's word is 0 (empty), a count (full) or BUSY (one thread is
 * copying in or out).  Only local pools have a depot: a shared pool's
 * crash recovery would have to know what a dead process left in one.
 *
 * Fork: a slot BUSY in the child was being copied by a thread that did
 * not come along.  The copier moves the cache's count before it lets
 * go of the slot, on the way in and on the way out, so the child finds
 * such a batch in a cache or nowhere, never twice: it empties the slot
 * (a batch a copier had half taken is lost to the child only).
 */
#include "pool_cache.h"

#include <sched.h>
#include <stdlib.h>

#define AP_DEPOT_SLOTS 8u
#define AP_SLOT_BUSY 0x80000000u

struct ap_depot {
	struct {
		_Alignas(AP_CACHE_LINE) _Atomic uint32_t word;
	} slot[AP_DEPOT_SLOTS];
	uint32_t batch;
	uint32_t idx[];         /* AP_DEPOT_SLOTS x batch, then as many generations */
};

static uint32_t *slot_idx(struct ap_depot *d, uint32_t s)
{
	return &d->idx[(size_t)s * d->batch];
}

static uint32_t *slot_gen(struct ap_depot *d, uint32_t s)
{
	return &d->idx[(size_t)(AP_DEPOT_SLOTS + s) * d->batch];
}

int ap_depot_init(struct asyncpool *pool)
{
	struct ap_depot *d;
	size_t size = ap_align_up(sizeof(*d) + 2 * (size_t)AP_DEPOT_SLOTS * pool->cache_batch *
				  sizeof(uint32_t), AP_CACHE_LINE);

	d = aligned_alloc(AP_CACHE_LINE, size);
	if (!d)
		return -ENOMEM;
	memset(d, 0, size);
	d->batch = pool->cache_batch;
	pool->depot = d;
	return 0;
}

void ap_depot_free(struct asyncpool *pool)
{
	free(pool->depot);
	pool->depot = NULL;
}

/*
 * Make a slot BUSY: a full one (full) or an empty one.  Its number, or
 * AP_DEPOT_SLOTS if none; *count gets what a full one held.
 */
static uint32_t slot_grab(struct ap_depot *d, bool full, uint32_t *count)
{
	for (uint32_t s = 0; s < AP_DEPOT_SLOTS; s++) {
		uint32_t w = atomic_load_explicit(&d->slot[s].word, memory_order_relaxed);

		if (full ? (w == 0 || (w & AP_SLOT_BUSY) || w > d->batch) : w != 0)
			continue;
		if (atomic_compare_exchange_strong_explicit(&d->slot[s].word, &w, AP_SLOT_BUSY,
							    memory_order_acquire,
							    memory_order_relaxed)) {
			*count = w;
			return s;
		}
	}
	return AP_DEPOT_SLOTS;
}

static void slot_let_go(struct ap_depot *d, uint32_t s, uint32_t count)
{
	atomic_store_explicit(&d->slot[s].word, count, memory_order_release);
}

bool ap_depot_put(struct asyncpool *pool, struct ap_cache *c)
{
	struct ap_depot *d = pool->depot;
	uint32_t n = ap_cache_n(c), k = d->batch, s, none;

	if (n < k || (s = slot_grab(d, false, &none)) == AP_DEPOT_SLOTS)
		return false;
	memcpy(slot_idx(d, s), &c->idx[n - k], k * sizeof(uint32_t));
	memcpy(slot_gen(d, s), &c->gen[n - k], k * sizeof(uint32_t));
	ap_cache_set_n(c, n - k);       /* before the slot is full: fork (above) */
	slot_let_go(d, s, k);
	return true;
}

uint32_t ap_depot_take(struct asyncpool *pool, struct ap_cache *c)
{
	struct ap_depot *d = pool->depot;
	uint32_t k, s = slot_grab(d, true, &k);

	if (s == AP_DEPOT_SLOTS)
		return 0;
	memcpy(c->idx, slot_idx(d, s), k * sizeof(uint32_t));
	memcpy(c->gen, slot_gen(d, s), k * sizeof(uint32_t));
	ap_cache_set_n(c, k);           /* before the slot is empty: fork (above) */
	slot_let_go(d, s, 0);
	return k;
}

int ap_depot_drain(struct asyncpool *pool)
{
	struct ap_depot *d = pool->depot;
	uint32_t k, s;
	int moved = 0;

	if (!d)
		return 0;
	while ((s = slot_grab(d, true, &k)) != AP_DEPOT_SLOTS) {
		uint32_t kept = ap_cache_uncache(pool, slot_idx(d, s), slot_gen(d, s), k);

		if (ap_fl_push_chain(&pool->fl, slot_idx(d, s), kept) == 0)
			moved += (int)kept;
		slot_let_go(d, s, 0);
	}
	return moved;
}

uint32_t ap_depot_count(const struct asyncpool *pool)
{
	const struct ap_depot *d = pool->depot;
	uint32_t n = 0;

	if (!d)
		return 0;
	for (uint32_t s = 0; s < AP_DEPOT_SLOTS; s++) {
		uint32_t w = atomic_load_explicit(&d->slot[s].word, memory_order_relaxed);

		if (!(w & AP_SLOT_BUSY) && w <= d->batch)
			n += w;
	}
	return n;
}

void ap_depot_forget_busy(struct asyncpool *pool)
{
	struct ap_depot *d = pool->depot;

	if (!d)
		return;
	for (uint32_t s = 0; s < AP_DEPOT_SLOTS; s++)
		if (atomic_load_explicit(&d->slot[s].word, memory_order_relaxed) & AP_SLOT_BUSY)
			atomic_store_explicit(&d->slot[s].word, 0, memory_order_relaxed);
}

/*
 * Whether a full slot holds buffer idx: for ap_cache_lease_gen(), with
 * every cache stopped, so that only a drain (a waiter's, outside the
 * lock) can be moving a slot; it is waited for.
 */
bool ap_depot_holds(struct asyncpool *pool, uint32_t idx)
{
	struct ap_depot *d = pool->depot;

	if (!d)
		return false;
	for (uint32_t s = 0; s < AP_DEPOT_SLOTS; s++) {
		uint32_t w;

		while ((w = atomic_load_explicit(&d->slot[s].word, memory_order_acquire)) &
		       AP_SLOT_BUSY)
			sched_yield();
		for (uint32_t j = 0; j < w && j < d->batch; j++)
			if (slot_idx(d, s)[j] == idx)
				return true;
	}
	return false;
}
