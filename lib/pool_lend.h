/* SPDX-License-Identifier: MIT */
#ifndef ASYNCPOOL_POOL_LEND_H
#define ASYNCPOOL_POOL_LEND_H

#include "cache_state.h"

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
/* ap_lend_token() into a lease: 0, or -errno with *out zeroed. */
int ap_lend_lease(struct asyncpool *pool, struct asyncpool_lease *out);
struct ap_cache *ap_lend_enter(struct asyncpool *pool);
uint32_t ap_lend_pop(struct asyncpool *pool, struct ap_cache *c, char *idx, char *gen,
		     size_t stride, uint32_t n, int *rc);
uint32_t ap_lend_put(struct asyncpool *pool, struct ap_cache *c, const uint64_t *tok, uint32_t k,
		     uint64_t *rest);

#endif /* ASYNCPOOL_POOL_LEND_H */
