/* SPDX-License-Identifier: MIT */
/*
 * Taking other threads' caches: what a thread of this process does when
 * the buffers it needs sit in the caches of the others, or in the
 * inboxes on their way to an owner.  asyncpool_cache_flush_all(), an
 * acquire that finds the freelist empty, a waiter (who keeps every
 * owner off its cache while it waits, so that each release goes where
 * it looks), a flush request of another process sharing the pool, and a
 * release or adoption by index of a lent buffer (the claims).  Each
 * stops every owner first (ap_bypass_all(), pool_bypass.c), under
 * ap_cache_lock; the owners' inboxes and outboxes are decided by
 * pool_owner.c (ap_owners_settle()), the caches and the depot emptied
 * by pool_depot.c.
 */
#include "pool_takeover.h"
#include "pool_bypass.h"
#include "pool_depot.h"
#include "pool_owner.h"

/*
 * Give every cache of pool in this process back to the freelist, the
 * calling thread's too (it is not inside its own).  Only when some
 * cache has buffers, unless force: a membarrier(2) costs every running
 * thread of the process an interrupt.  The buffers moved, or -EOPNOTSUPP
 * without membarrier(2).
 */
int ap_cache_flush_others(struct asyncpool *pool, bool force)
{
	uint64_t moved = 0;
	bool any = force;
	int rc = 0;

	if (!ap_pool_cached(pool))
		return 0;
	pthread_mutex_lock(&ap_cache_lock);
	for (struct ap_cache *c = pool->caches; c && !any; c = c->reg_next)
		any = ap_cache_n(c) != 0;
	if (!any && pool->boxes)
		any = ap_owners_moving(pool);
	if (!any) {
		/* Empty caches put nothing into the depot. */
		moved = (uint64_t)ap_depot_drain(pool);
	} else {
		if (ap_bypass_all(pool)) {
			uint32_t before = ap_fl_free(&pool->fl);

			for (struct ap_cache *c = pool->caches; c; c = c->reg_next) {
				moved += ap_cache_n(c);
				ap_cache_drain(c);
			}
			if (pool->boxes) {
				ap_owners_settle(pool);
				/* What it gave back is now on the list. */
				if (ap_fl_free(&pool->fl) > before + moved)
					moved = ap_fl_free(&pool->fl) - before;
			}
			/* No cache puts into the depot while bypassed. */
			moved += (uint64_t)ap_depot_drain(pool);
			ap_bypass_end(pool);
		} else {
			rc = -EOPNOTSUPP;
		}
	}
	pthread_mutex_unlock(&ap_cache_lock);
	if (rc)
		return rc;
	return moved > INT32_MAX ? INT32_MAX : (int)moved;
}

/* A thread of this process starts or stops waiting for a buffer of pool. */
void ap_cache_wait_begin(struct asyncpool *pool)
{
	if (!ap_pool_cached(pool))
		return;
	pthread_mutex_lock(&ap_cache_lock);
	if (pool->local_waiters++ == 0 && ap_bypass_all(pool)) {
		for (struct ap_cache *c = pool->caches; c; c = c->reg_next)
			ap_cache_drain(c);
		if (pool->boxes)
			ap_owners_settle(pool);
	}
	pthread_mutex_unlock(&ap_cache_lock);
	/* After the bypass no cache puts into the depot until the last
	 * waiter leaves: what it holds goes where the waiter looks. */
	(void)ap_depot_drain(pool);
}

void ap_cache_wait_end(struct asyncpool *pool)
{
	if (!ap_pool_cached(pool))
		return;
	pthread_mutex_lock(&ap_cache_lock);
	pool->local_waiters--;
	ap_bypass_end(pool);
	pthread_mutex_unlock(&ap_cache_lock);
}

/* Ask the other processes of a shared pool for their cached buffers. */
void ap_flush_request(struct asyncpool *pool)
{
	uint32_t f = atomic_fetch_add_explicit(&pool->fl.line->flush, 1, memory_order_relaxed);

	/* Our own request needs no answer from us: the caller flushes. */
	atomic_store_explicit(&pool->flush_seen, f + 1, memory_order_relaxed);
}

/*
 * Honour a flush request of another process: called on the slow paths
 * (a refill, a full cache, a wait), never inside a cache.
 */
void ap_cache_honour_flush(struct asyncpool *pool)
{
	uint32_t f;

	if (!pool->shared)
		return;
	f = atomic_load_explicit(&pool->fl.line->flush, memory_order_relaxed);
	if (AP_LIKELY(f == atomic_load_explicit(&pool->flush_seen, memory_order_relaxed)))
		return;
	atomic_store_explicit(&pool->flush_seen, f, memory_order_relaxed);
	(void)ap_cache_flush_others(pool, false);
}

AP_EXPORT int asyncpool_cache_flush_all(struct asyncpool *pool)
{
	int rc;

	if (!pool)
		return -EINVAL;
	rc = ap_cache_flush_others(pool, false);
	return rc < 0 ? rc : 0;
}

/*
 * A release or adoption of a lent buffer by someone other than its
 * owner's fast path, with every owner of the process stopped as a flush
 * stops them (ap_bypass_all), and every release on its way to an owner
 * decided first (ap_owners_settle): then a CACHED word is a buffer in a
 * cache or the depot, or lent; a release by index, which knows no
 * generation, takes only one that no cache holds.  Slow (a membarrier),
 * and only for a release by index and an adoption of a lent buffer: not
 * for the acquire and release of every lease.
 */
int ap_cache_claim_lent(struct asyncpool *pool, uint32_t idx, uint32_t gen, bool adopt,
			uint32_t *newgen)
{
	ap_word *s = &pool->fl.state[idx];
	uint64_t w;
	uint32_t g;
	bool held = false;
	int kind = 0;

	pthread_mutex_lock(&ap_cache_lock);
	if (!ap_bypass_all(pool)) {
		pthread_mutex_unlock(&ap_cache_lock);
		return 0;
	}
	ap_owners_settle(pool);
	w = ap_state_load(s);
	if (AP_W_KIND(w) == AP_K_LEASED) {
		kind = -1;
		goto out;
	}
	g = AP_W_GEN(w);
	if (AP_W_KIND(w) != AP_K_CACHED || (gen && g != gen))
		goto out;
	for (struct ap_cache *c = pool->caches; c && !held; c = c->reg_next)
		for (uint32_t j = 0; j < ap_cache_n(c) && !held; j++)
			held = ap_cache_idx(c, j) == idx;
	if (held || ap_depot_holds(pool, idx))
		goto out;
	if (adopt) {
		uint64_t to = AP_W_MAKE(AP_K_LEASED, pool->fl.me, ap_gen_next(g));

		if (!ap_state_cas(s, &w, to))
			goto out;
		ap_fl_fence(&pool->fl, idx, g);
		*newgen = ap_gen_next(g);
	} else {
		if (!ap_state_cas(s, &w, AP_W_MAKE(AP_K_FREE, pool->fl.me, g)))
			goto out;
		if (ap_fl_push(&pool->fl, idx)) {
			ap_state_unclaim(s, w);
			goto out;
		}
	}
	atomic_store_explicit(&pool->owner_of[idx], 0, memory_order_relaxed);
	ap_owner_lent_back(pool, AP_W_OWNER(w));
	kind = AP_K_CACHED;
out:
	ap_bypass_end(pool);
	pthread_mutex_unlock(&ap_cache_lock);
	return kind;
}
