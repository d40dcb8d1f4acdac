/* SPDX-License-Identifier: MIT */
#ifndef ASYNCPOOL_POOL_LEND_H
#define ASYNCPOOL_POOL_LEND_H

#include "cache_state.h"
#include "pool_owner.h"

/*
 * Lending without a cache (pool_lend.c): a local pool with cache_size
 * 0.  ap_lend_token() is its single acquire (0 with the buffer's
 * token, or -errno with 0).
 * ap_lend_enter() is the calling thread's cache of no entries, entered,
 * its inbox emptied, or NULL (none, or a flusher has it: the caller
 * pops as a pool that does not lend); ap_lend_pop() pops n buffers
 * into n records (index, generation; stride bytes apart) as that
 * cache's lent buffers, AP_LEND_CHUNK per CAS: how many, fewer with
 * *rc set (the caller gives those back).  ap_lend_put() gives back to
 * the freelist, as one chain, the tokens tok[0..k) that c (entered, of
 * no entries) owns and lent at their generation; the rest go to
 * rest[], how many is returned, for ap_owner_release().
 */
#define AP_LEND_CHUNK 32u       /* buffers per CAS of a bulk lend (asyncpool_acquire_bulk(3)) */
int ap_lend_token(struct asyncpool *pool, uint64_t *token);
/* Its parts out of line: any thread's cache, entered again (rest); after
 * the first pop of an entered c failed with rc (failed: c left). */
int ap_lend_token_rest(struct asyncpool *pool, uint64_t *token);
int ap_lend_token_failed(struct asyncpool *pool, struct ap_cache *c, uint64_t *token, int rc);

/*
 * One pop of a buffer already marked as c's (c entered, of no entries):
 * the word written once, by the pop (ap_fl_pop_loop(), inline: a pool
 * that lends is local, so it has no step), then the hints and the lent
 * count.  0 with its token in *token, or the pop's -errno.
 */
static inline __attribute__((always_inline)) int ap_lend_once(struct asyncpool *pool,
							     struct ap_cache *c, uint64_t *token)
{
	uint32_t idx, gen;
	int rc = ap_fl_pop_loop(&pool->fl, 0, ap_owned_word(c->id, 0), &idx, &gen, NULL);

	if (AP_UNLIKELY(rc))
		return rc;
	ap_own_hints(pool->released, pool->owner_of, c->id, idx, gen);
	ap_cache_add_lent(c, 1);
	*token = AP_TOKEN_MAKE(gen, idx);
	return 0;
}

/*
 * ap_lend_token() with c, the calling thread's cache, pool's and of no
 * entries: inline in the exported acquire (issue 34), one function on
 * the common path that calls nothing: the window, an empty inbox, one
 * pop, the hints.  Anything else is out of line.
 */
static inline __attribute__((always_inline)) int ap_lend_token_own(struct asyncpool *pool,
								  struct ap_cache *c,
								  uint64_t *token)
{
	struct ap_inbox *b = c->box;
	int rc;

	if (AP_UNLIKELY(!ap_cache_enter(c)))
		return ap_lend_token_rest(pool, token);
	if (AP_UNLIKELY(b->head != atomic_load_explicit(&b->tail, memory_order_relaxed))) {
		/* Releases sent to this owner: the rest drains them first. */
		ap_cache_leave(c);
		return ap_lend_token_rest(pool, token);
	}
	rc = ap_lend_once(pool, c, token);
	if (AP_UNLIKELY(rc))
		return ap_lend_token_failed(pool, c, token, rc);
	ap_cache_leave(c);
	return 0;
}
/* ap_lend_token() into a lease: 0, or -errno with *out zeroed. */
int ap_lend_lease(struct asyncpool *pool, struct asyncpool_lease *out);
struct ap_cache *ap_lend_enter(struct asyncpool *pool);
uint32_t ap_lend_pop(struct asyncpool *pool, struct ap_cache *c, char *idx, char *gen,
		     size_t stride, uint32_t n, int *rc);
uint32_t ap_lend_put(struct asyncpool *pool, struct ap_cache *c, const uint64_t *tok, uint32_t k,
		     uint64_t *rest);

#endif /* ASYNCPOOL_POOL_LEND_H */
