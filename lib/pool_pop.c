/* SPDX-License-Identifier: MIT */
/*
 * The bottom of the pool layer, above the freelist: the pops of a pool
 * and the release of a lease of a pool without caches.  A pop that
 * finds the freelist empty is given back first (ap_pool_pop(),
 * ap_pool_pop_chain(), the waits of pool_wait.c) a local pool's depot
 * (pool_depot.c), or what dead processes held (reclaim.c).  A file of
 * its own, below pool.c, pool_cache.c and pool_wait.c, which all pop:
 * pool_wait.c calls pool.c (asyncpool_acquire), and pool.c calls
 * pool_cache.c, so none of them may be called back.
 */
#include "pool_pop.h"
#include "pool_depot.h"

int ap_pool_refund(struct asyncpool *pool)
{
	if (pool->depot)
		return ap_depot_drain(pool);
	return ap_reclaim_auto(pool);
}

int ap_pool_pop_chain(struct asyncpool *pool, void *out, void *gens, size_t stride,
		      uint32_t min, uint32_t max, uint32_t kind, uint32_t *got)
{
	int rc = ap_fl_pop_chain(&pool->fl, out, gens, stride, min, max, kind, got);

	if (ap_pool_refunded(pool, rc))
		rc = ap_fl_pop_chain(&pool->fl, out, gens, stride, min, max, kind, got);
	return rc;
}

int ap_pool_pop_owned(struct asyncpool *pool, uint32_t *idx, uint32_t *gen, uint32_t n,
		      uint32_t owner)
{
	uint64_t mark = ap_owned_word(owner, 0);
	int rc = ap_fl_pop_owned(&pool->fl, idx, gen, n, mark);

	if (ap_pool_refunded(pool, rc))
		rc = ap_fl_pop_owned(&pool->fl, idx, gen, n, mark);
	return rc;
}

void ap_pool_recycle(void *ctx, uint64_t token)
{
	struct asyncpool *pool = ctx;

	(void)ap_fl_release(&pool->fl, AP_TOKEN_INDEX(token), AP_TOKEN_GEN(token));
}
