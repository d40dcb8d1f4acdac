/* SPDX-License-Identifier: MIT */
/*
 * pool_takeover.c: taking other threads' caches, with every owner
 * stopped (pool_bypass.c).  Above the owners (pool_owner.c), below the
 * caches (pool_cache.c), the lending (pool_lend.c) and every file that
 * waits or finds the pool empty.
 */
#ifndef ASYNCPOOL_POOL_TAKEOVER_H
#define ASYNCPOOL_POOL_TAKEOVER_H

#include "pool_internal.h"

/*
 * Give every cache of pool in this process back to the freelist (the
 * calling thread's too, outside it), with what is on its way to an
 * owner and the depot: the buffers moved, or -EOPNOTSUPP without
 * membarrier(2).  Only when some cache has buffers, unless force.
 */
int  ap_cache_flush_others(struct asyncpool *pool, bool force);
/* A thread of this process starts or stops waiting for a buffer of pool. */
void ap_cache_wait_begin(struct asyncpool *pool);
void ap_cache_wait_end(struct asyncpool *pool);
/* Ask the other processes of a shared pool for their cached buffers. */
void ap_flush_request(struct asyncpool *pool);
/* Honour another process's request: on the slow paths, never inside a cache. */
void ap_cache_honour_flush(struct asyncpool *pool);
/*
 * A release (adopt false) or an adoption (true: *newgen) of a lent
 * buffer, by index (gen 0) or of generation gen, with every owner of
 * the process stopped: the kind the word had (AP_K_CACHED), 0 if
 * refused, -1 if the word is LEASED (lent by no one: the caller's
 * usual CAS decides).
 */
int  ap_cache_claim_lent(struct asyncpool *pool, uint32_t idx, uint32_t gen, bool adopt,
			 uint32_t *newgen);

#endif /* ASYNCPOOL_POOL_TAKEOVER_H */
