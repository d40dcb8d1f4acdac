/* SPDX-License-Identifier: MIT */
/*
 * pool_bypass.c: the lock of the caches' registries, and the flusher's
 * half of the window (cache_state.h): stopping every owner of a pool's
 * caches, so that another thread may take what they hold.  Below the
 * owners (pool_owner.c, whose sender stops an owner to empty its full
 * inbox), the takeover (pool_takeover.c) and the caches (pool_cache.c).
 */
#ifndef ASYNCPOOL_POOL_BYPASS_H
#define ASYNCPOOL_POOL_BYPASS_H

#include <pthread.h>

#include "cache_state.h"

/*
 * The one process-wide lock of the caches, taken only off the fast
 * path: the registries (pool->caches, the list of pools with caches),
 * creating a cache, thread exit, destroy, fork, every flusher.
 */
extern pthread_mutex_t ap_cache_lock __attribute__((visibility("hidden")));

/* Whether membarrier(2) can stop the owners (registered once). */
bool ap_mb_available(void);
/*
 * Raise bypass on the caches of pool that do not have it, then wait
 * for each owner to be outside.  The lock is held.  false: membarrier(2)
 * is not available, nothing was changed.
 */
bool ap_bypass_all(struct asyncpool *pool);
/* Lower bypass again, unless a thread of this process waits.  The lock is held. */
void ap_bypass_end(struct asyncpool *pool);

#endif /* ASYNCPOOL_POOL_BYPASS_H */
