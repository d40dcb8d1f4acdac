/* SPDX-License-Identifier: MIT */
/*
 * pool_pop.c: the pops of a pool and the release of a lease of a pool
 * without caches, below every file that pops; the inline pops here are
 * its own.
 */
#ifndef ASYNCPOOL_POOL_POP_H
#define ASYNCPOOL_POOL_POP_H

#include "pool_internal.h"

/*
 * Every pop of a pool's freelist goes through ap_pool_pop() or
 * ap_pool_pop_chain(): a pop that finds it empty gives the freelist
 * what the pool holds elsewhere (ap_pool_refund: a local pool's depot,
 * pool_depot.c; what dead processes held, reclaim.c) and pops once more
 * if that brought buffers back.  A pool with neither (uncached local,
 * or shared over raw memory) pays one test, and only after -ENOBUFS.
 */
int ap_pool_refund(struct asyncpool *pool);

static inline bool ap_pool_refunded(struct asyncpool *pool, int rc)
{
	return AP_UNLIKELY(rc == -ENOBUFS) && (pool->depot || pool->lock_fd >= 0) &&
	       ap_pool_refund(pool) > 0;
}

/* One buffer, marked kind (ap_fl_pop). */
static inline int ap_pool_pop(struct asyncpool *pool, uint32_t kind, uint32_t *idx, uint32_t *gen)
{
	int rc = ap_fl_pop(&pool->fl, kind, idx, gen);

	if (ap_pool_refunded(pool, rc))
		rc = ap_fl_pop(&pool->fl, kind, idx, gen);
	return rc;
}

/*
 * A chain of min to max buffers, marked kind (ap_fl_pop_chain).  Out of
 * line (pool.c): inlined, it kept the bulk acquire's per-buffer loop
 * from inlining cache_next() (113 -> 145 instructions per buffer).
 */
int ap_pool_pop_chain(struct asyncpool *pool, void *out, void *gens, size_t stride,
		      uint32_t min, uint32_t max, uint32_t kind, uint32_t *got);
/* Exactly n buffers of a local pool, owned by cache owner (ap_fl_pop_owned). */
int ap_pool_pop_owned(struct asyncpool *pool, uint32_t *idx, uint32_t *gen, uint32_t n,
		      uint32_t owner);

/* The release callback of the leases of a pool without caches. */
void ap_pool_recycle(void *ctx, uint64_t token);

#endif /* ASYNCPOOL_POOL_POP_H */
