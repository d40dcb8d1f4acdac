/* SPDX-License-Identifier: MIT */
/*
 * Bulk acquire and release: the single operations' transitions
 * (buffer_state.h), with one CAS on the freelist head per chain.
 */
#include "pool_internal.h"
#include "pool_cache.h"

/* Buffers pushed per CAS by a bulk release. */
#define AP_BULK_CHUNK 64u

/* Build leases whose buffer_index a chain pop filled; locals spare reloads. */
static void leases_build(struct asyncpool *pool, struct asyncpool_lease *l, unsigned int n,
			 ap_release_fn *fn)
{
	struct asyncpool_region *region = pool->region;
	size_t bs = pool->buffer_size;

	for (unsigned int j = 0; j < n; j++) {
		uint32_t idx = l[j].buffer_index;

		ap_lease_init(&l[j], region, (size_t)idx * bs, bs, fn, pool, idx);
	}
}


/*
 * From the calling thread's cache, refilled with one CAS for what it
 * lacks (or, beyond what a cache holds, the rest straight from the
 * freelist).  All or nothing.
 */
static int acquire_bulk_cached(struct asyncpool *pool, struct ap_cache *c,
			       struct asyncpool_lease *leases, unsigned int n)
{
	struct asyncpool_region *region = pool->region;
	size_t bs = pool->buffer_size;
	_Atomic uint32_t *next = pool->fl.next;
	unsigned int j = 0;
	uint32_t got;
	int rc;

	while (j < n) {
		uint32_t cn = ap_cache_n(c), need = n - j;

		if (!cn) {
			if (need > c->size) {
				rc = ap_fl_pop_chain(&pool->fl, &leases[j].buffer_index,
						     sizeof(*leases), need, need, AP_FL_LEASED,
						     &got);
				if (rc)
					goto fail;
				leases_build(pool, &leases[j], need, ap_cache_recycle);
				return 0;
			}
			/* What is missing, and a refill's worth more if there is. */
			rc = ap_fl_pop_chain(&pool->fl, c->idx, sizeof(uint32_t), need,
					     need + c->batch < c->size ? need + c->batch : c->size,
					     AP_FL_CACHED, &got);
			if (rc)
				goto fail;
			cn = got;
		}
		while (cn && j < n) {
			uint32_t idx = c->idx[--cn];

			if (AP_UNLIKELY(!ap_state_cached_to_leased(&next[idx]))) {
				/* Not cached any more: a copy of it is elsewhere. */
				ap_fl_count_corruption(&pool->fl, 1);
				continue;
			}
			ap_lease_init(&leases[j++], region, (size_t)idx * bs, bs,
				      ap_cache_recycle, pool, idx);
		}
		ap_cache_set_n(c, cn);
	}
	return 0;
fail:
	/* All or nothing: what was taken goes back to the cache. */
	asyncpool_release_bulk(leases, j);
	memset(leases, 0, (size_t)n * sizeof(*leases));
	return rc;
}

AP_EXPORT int asyncpool_acquire_bulk(struct asyncpool *pool, struct asyncpool_lease *leases,
				     unsigned int n)
{
	struct ap_cache *c = NULL;
	uint32_t got;
	int rc;

	/* Refuse before writing: n may not be the length of anything. */
	if (!leases)
		return n ? -EINVAL : 0;
	if (!pool || n > pool->fl.count)
		return -EINVAL;
	if (!n)
		return 0;
	if (pool->cache_size)
		c = ap_cache_of(pool);
	if (c)
		return acquire_bulk_cached(pool, c, leases, n);
	/* One CAS for the whole chain. */
	rc = ap_fl_pop_chain(&pool->fl, &leases[0].buffer_index, sizeof(*leases), n, n,
			     AP_FL_LEASED, &got);
	if (rc) {
		memset(leases, 0, (size_t)n * sizeof(*leases));
		return rc;
	}
	leases_build(pool, leases, n, pool->release_fn);
	return 0;
}

/* Whether lease l continues a run of leases of pool with callback fn. */
static inline bool same_run(const struct asyncpool_lease *l, ap_release_fn *fn,
			    const struct asyncpool *pool)
{
	return l->release.fn == fn && l->release.ctx == pool;
}

/*
 * Take lease l of a run: clear it, then move its buffer's state (a claim
 * for the freelist, or into a cache).  false, counted in *bad, for a
 * buffer that is not leased; false for an index out of range.
 */
static inline bool run_take(struct asyncpool_lease *l, _Atomic uint32_t *next, uint32_t count,
			    bool (*move)(_Atomic uint32_t *), uint32_t *bad)
{
	uint32_t i = l->buffer_index;

	l->release.fn = NULL;
	if (AP_UNLIKELY(i >= count))
		return false;
	if (AP_UNLIKELY(!move(&next[i]))) {
		(*bad)++;
		return false;
	}
	return true;
}

/*
 * Release the run of leases of an uncached pool that starts at l (at most
 * n): claim each (leased -> free, as a single release does, so that a
 * racing release of a copy cannot link it in twice), then push them as
 * one chain per AP_BULK_CHUNK.  Returns the length of the run.
 */
static unsigned int release_run_fl(struct asyncpool *pool, struct asyncpool_lease *l,
				   unsigned int n)
{
	ap_release_fn *fn = l->release.fn;
	_Atomic uint32_t *next = pool->fl.next;
	uint32_t idx[AP_BULK_CHUNK];
	uint32_t k = 0, bad = 0, count = pool->fl.count;
	unsigned int j;

	for (j = 0; j < n && same_run(&l[j], fn, pool); j++) {
		if (!run_take(&l[j], next, count, ap_state_claim_leased, &bad))
			continue;
		idx[k++] = l[j].buffer_index;
		if (k == AP_BULK_CHUNK) {
			(void)ap_fl_push_chain(&pool->fl, idx, k);
			k = 0;
		}
	}
	(void)ap_fl_push_chain(&pool->fl, idx, k);
	if (bad)
		ap_fl_count_bad_release(&pool->fl, bad);
	return j;
}

/* The same for a pool with caches: into this thread's cache. */
static unsigned int release_run_cache(struct asyncpool *pool, struct asyncpool_lease *l,
				      unsigned int n)
{
	struct ap_cache *c = ap_cache_of(pool);
	_Atomic uint32_t *next = pool->fl.next;
	uint32_t cn, size, bad = 0, count = pool->fl.count;
	unsigned int j;

	if (!c)
		return release_run_fl(pool, l, n);
	cn = c->n;
	size = c->size;
	for (j = 0; j < n && same_run(&l[j], ap_cache_recycle, pool); j++) {
		if (!run_take(&l[j], next, count, ap_state_leased_to_cached, &bad))
			continue;
		if (AP_UNLIKELY(cn == size)) {
			ap_cache_set_n(c, cn);
			ap_cache_flush_batch(c);
			cn = c->n;
		}
		c->idx[cn++] = l[j].buffer_index;
	}
	ap_cache_set_n(c, cn);
	if (bad)
		ap_fl_count_bad_release(&pool->fl, bad);
	return j;
}

AP_EXPORT void asyncpool_release_bulk(struct asyncpool_lease *leases, unsigned int n)
{
	unsigned int i = 0;

	if (!leases)
		return;
	while (i < n) {
		struct asyncpool_lease *l = &leases[i];
		ap_release_fn *fn = l->release.fn;

		if (!fn) {
			i++;
		} else if (fn == ap_cache_recycle) {
			/* A run of leases of the same pool goes back in one step. */
			i += release_run_cache(l->release.ctx, l, n - i);
		} else if (fn == ap_pool_recycle) {
			i += release_run_fl(l->release.ctx, l, n - i);
		} else {
			/* A recv ring or another owner: its own callback. */
			asyncpool_lease_release(l);
			i++;
		}
	}
}
