/* SPDX-License-Identifier: MIT */
/*
 * Where a cache's buffers go when it gives them back (a full cache's
 * batch, a flush, a drain), and the depot of a local pool's caches: a
 * few slots, each an array of up to cache_batch buffer indices, through
 * which a full cache hands a batch to an empty one without the freelist.
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
#include "pool_depot.h"

#include <sched.h>
#include <stdlib.h>

#define AP_DEPOT_SLOTS 8u
#define AP_SLOT_BUSY 0x80000000u

struct ap_depot {
	struct {
		_Alignas(AP_CACHE_LINE) _Atomic uint32_t word;
		/* The owner whose words and hints a lend's batch left as
		 * they are (pool_lend.c), 0 for a cache's: written by the
		 * slot's holder, read by the next. */
		uint32_t owner;
	} slot[AP_DEPOT_SLOTS];
	uint32_t batch;
	uint64_t tok[];         /* AP_DEPOT_SLOTS x batch entries, as a cache's */
};

static uint64_t *slot_tok(struct ap_depot *d, uint32_t s)
{
	return &d->tok[(size_t)s * d->batch];
}

/*
 * Make k cached buffers (entries of a cache or of a depot slot) free,
 * not yet linked, keeping them at the front of t: how many.  A buffer
 * whose state is no longer cached (a copy of it went into another cache
 * too) (or its generation moved on) is dropped and counted, never
 * linked in twice.
 */
static uint32_t uncache(struct asyncpool *pool, uint64_t *t, uint32_t k)
{
	uint32_t kept = 0, dropped = 0;

	for (uint32_t j = 0; j < k; j++) {
		uint32_t idx = AP_TOKEN_INDEX(t[j]);

		if (pool->owner_of)     /* to the freelist: no owner */
			atomic_store_explicit(&pool->owner_of[idx], 0, memory_order_relaxed);
		if (AP_LIKELY(ap_state_uncache(&pool->fl.state[idx], pool->fl.me, AP_TOKEN_GEN(t[j]))))
			t[kept++] = t[j];
		else
			dropped++;
		AP_TEST_AT(AP_TP_FLUSH_UNCACHED);
	}
	if (AP_UNLIKELY(dropped))
		ap_fl_count_corruption(&pool->fl, dropped);
	return kept;
}

int ap_depot_init(struct asyncpool *pool, uint32_t batch)
{
	struct ap_depot *d;
	size_t size = ap_align_up(sizeof(*d) + (size_t)AP_DEPOT_SLOTS * batch * sizeof(uint64_t),
				  AP_CACHE_LINE);

	d = aligned_alloc(AP_CACHE_LINE, size);
	if (!d)
		return -ENOMEM;
	memset(d, 0, size);
	d->batch = batch;
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
	memcpy(slot_tok(d, s), &c->tok[n - k], k * sizeof(uint64_t));
	d->slot[s].owner = 0;
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
	memcpy(c->tok, slot_tok(d, s), k * sizeof(uint64_t));
	ap_cache_set_n(c, k);           /* before the slot is empty: fork (above) */
	slot_let_go(d, s, 0);
	return k;
}

bool ap_depot_grab(struct asyncpool *pool, bool full, struct ap_depot_slot *sl)
{
	struct ap_depot *d = pool->depot;

	sl->s = slot_grab(d, full, &sl->n);
	if (sl->s == AP_DEPOT_SLOTS)
		return false;
	sl->tok = slot_tok(d, sl->s);
	sl->batch = d->batch;
	sl->owner = d->slot[sl->s].owner;
	return true;
}

uint32_t ap_depot_batch(const struct asyncpool *pool)
{
	return pool->depot ? pool->depot->batch : UINT32_MAX;
}

void ap_depot_let_go(struct asyncpool *pool, const struct ap_depot_slot *sl, uint32_t count)
{
	pool->depot->slot[sl->s].owner = sl->owner;
	slot_let_go(pool->depot, sl->s, count);
}

int ap_depot_drain(struct asyncpool *pool)
{
	struct ap_depot *d = pool->depot;
	uint32_t k, s;
	int moved = 0;

	if (!d)
		return 0;
	while ((s = slot_grab(d, true, &k)) != AP_DEPOT_SLOTS) {
		uint32_t kept = uncache(pool, slot_tok(d, s), k);

		if (ap_fl_push_tokens(&pool->fl, slot_tok(d, s), kept) == 0)
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
 * Whether a full slot holds buffer idx: for ap_cache_claim_lent(), with
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
			if (AP_TOKEN_INDEX(slot_tok(d, s)[j]) == idx)
				return true;
	}
	return false;
}

/* ---- a cache gives its buffers back ---- */

/* Give the top k buffers of a cache back to the freelist as one chain. */
int ap_cache_flush_top(struct ap_cache *c, uint32_t k)
{
	struct asyncpool *pool = c->pool;
	uint32_t from = ap_cache_n(c) - k;
	uint32_t kept = uncache(pool, &c->tok[from], k);

	ap_cache_set_n(c, from);
	return ap_fl_push_tokens(&pool->fl, &c->tok[from], kept);
}

/* Give all of a cache back to its pool's freelist. */
void ap_cache_drain(struct ap_cache *c)
{
	if (c->pool && ap_cache_n(c))
		(void)ap_cache_flush_top(c, ap_cache_n(c));
	ap_cache_set_n(c, 0);
}

/* Make room in a full cache: batch buffers to the freelist, one CAS. */
__attribute__((noinline)) void ap_cache_flush_batch(struct ap_cache *c)
{
	uint32_t n = ap_cache_n(c);

	/* A local pool's depot first: the next refill takes it as it is. */
	if (c->pool->depot && ap_depot_put(c->pool, c))
		return;
	(void)ap_cache_flush_top(c, c->batch < n ? c->batch : n);
}
