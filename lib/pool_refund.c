/* SPDX-License-Identifier: MIT */
/*
 * What a pop that finds the freelist empty gives it back first
 * (ap_pool_pop(), ap_pool_pop_chain(), the waits of pool_wait.c): a
 * local pool's depot (pool_depot.c), or what dead processes held
 * (reclaim.c).  A file of its own, below pool.c and pool_wait.c, which
 * both pop: pool_wait.c calls pool.c (asyncpool_acquire), so pool.c
 * must not call it back, and neither may what pool.c calls.
 */
#include "pool_internal.h"
#include "pool_cache.h"

int ap_pool_refund(struct asyncpool *pool)
{
	if (pool->depot)
		return ap_depot_drain(pool);
	return ap_reclaim_auto(pool);
}
