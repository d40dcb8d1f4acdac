/* SPDX-License-Identifier: MIT */
/*
 * Bulk acquire and release: the single operations' transitions
 * (buffer_state.h), with one CAS on the freelist head per chain.
 */
#include "pool_internal.h"
#include "pool_cache.h"

/* Buffers pushed per CAS by a bulk release. */
#define AP_BULK_CHUNK 64u

/* Build leases whose buffer_index and generation a chain pop filled. */
static void leases_build(struct asyncpool *pool, struct asyncpool_lease *l, unsigned int n,
			 ap_release_token_fn *fn)
{
	struct asyncpool_region *region = pool->region;
	size_t bs = pool->buffer_size;

	for (unsigned int j = 0; j < n; j++) {
		uint32_t idx = l[j].buffer_index;

		ap_lease_init_gen(&l[j], region, (size_t)idx * bs, bs, fn, pool, idx,
				  l[j].generation);
	}
}

/*
 * n buffers straight from the freelist into n records of stride bytes,
 * index at idx and generation at gen (a lease's fields, a token's
 * halves): one CAS per chain (a shared pool: one per AP_STEP_WORDS
 * buffers, what a step records).  An empty pool is reclaimed once
 * (reclaim.c).  How many records were filled: n, or fewer with *rc set,
 * and the caller gives those back.
 */
static unsigned int pop_records(struct asyncpool *pool, char *idx, char *gen, size_t stride,
				unsigned int n, int *rc)
{
	unsigned int j = 0;
	bool reclaimed = false;
	uint32_t got;

	*rc = 0;
	while (j < n) {
		uint32_t chunk = n - j;

		if (pool->fl.shared && chunk > AP_STEP_WORDS)
			chunk = AP_STEP_WORDS;
		*rc = ap_fl_pop_chain(&pool->fl, idx + j * stride, gen + j * stride, stride, chunk,
				      chunk, AP_K_LEASED, &got);
		if (*rc == -ENOBUFS && !reclaimed) {
			reclaimed = true;
			if (ap_reclaim(pool, true) > 0)
				continue;
		}
		if (*rc)
			break;
		j += chunk;
	}
	return j;
}

/* n leases straight from the freelist, all or nothing (pop_records). */
static int pop_leases(struct asyncpool *pool, struct asyncpool_lease *l, unsigned int n,
		      ap_release_token_fn *fn)
{
	int rc;
	unsigned int got = pop_records(pool, (char *)&l->buffer_index, (char *)&l->generation,
				       sizeof(*l), n, &rc);

	leases_build(pool, l, got, fn);
	if (rc) {
		asyncpool_release_bulk(l, got);
		memset(l, 0, (size_t)n * sizeof(*l));
	}
	return rc;
}

/*
 * What both bulk acquires check before they write anything (n may not
 * be the length of anything), and the calling thread's cache, entered,
 * if it has one a flusher does not hold (else *c is NULL): 1 to go on,
 * 0 for nothing to do (n == 0), or -EINVAL.
 */
static int bulk_begin(struct asyncpool *pool, const void *out, unsigned int n,
		      struct ap_cache **c)
{
	*c = NULL;
	if (!out)
		return n ? -EINVAL : 0;
	if (!pool || n > pool->fl.count)
		return -EINVAL;
	if (!n)
		return 0;
	if (pool->cache_size) {
		*c = ap_cache_of(pool);
		if (*c && !ap_cache_enter(*c))
			*c = NULL;              /* a flusher has it (pool_cache.h) */
	}
	return 1;
}

/*
 * The next buffer of the calling thread's cache c for a bulk acquire
 * that still lacks need buffers, leased to the caller: 1 with *idx and
 * *gen set.  An empty cache is refilled with one CAS for what is missing
 * and a refill's worth more; 0 when need is more than a refill may hold
 * (the caller pops the rest straight from the freelist), or -errno.
 */
static inline int cache_next(struct asyncpool *pool, struct ap_cache *c, uint32_t need,
			     uint32_t *idx, uint32_t *gen)
{
	for (;;) {
		uint32_t cn = ap_cache_n(c), got;
		int rc;

		if (!cn) {
			if (need > c->size || (pool->fl.shared && need > AP_STEP_WORDS))
				return 0;
			rc = ap_fl_pop_chain(&pool->fl, c->idx, NULL, sizeof(uint32_t), need,
					     need + c->batch < c->size ? need + c->batch : c->size,
					     AP_K_CACHED, &got);
			if (rc)
				return rc;
			cn = got;
		}
		while (cn) {
			uint32_t i = c->idx[--cn], g;

			if (AP_LIKELY((g = ap_state_cached_to_leased(&pool->fl.state[i], pool->fl.me)))) {
				ap_cache_set_n(c, cn);
				*idx = i;
				*gen = g;
				return 1;
			}
			/* Not cached any more: a copy of it is elsewhere. */
			ap_fl_count_corruption(&pool->fl, 1);
		}
		ap_cache_set_n(c, 0);
	}
}

/*
 * n leases, all or nothing: from the calling thread's cache c if the
 * caller entered one (cache_next), and what a cache cannot hold straight
 * from the freelist.  Leaves c on every return, so that a flush of every
 * cache never waits for this thread.
 */
static int acquire_leases(struct asyncpool *pool, struct ap_cache *c,
			  struct asyncpool_lease *leases, unsigned int n)
{
	size_t bs = pool->buffer_size;
	unsigned int j = 0;
	uint32_t idx = 0, gen = 0;
	int rc = 0;

	if (c) {
		while (j < n && (rc = cache_next(pool, c, n - j, &idx, &gen)) > 0)
			ap_lease_init_gen(&leases[j++], pool->region, (size_t)idx * bs, bs,
					  ap_cache_recycle, pool, idx, gen);
		ap_cache_leave(c);
	}
	if (!rc && j < n)
		rc = pop_leases(pool, &leases[j], n - j, c ? ap_cache_recycle : pool->release_fn);
	if (rc < 0) {
		/* What was taken goes back (to the cache). */
		asyncpool_release_bulk(leases, j);
		memset(leases, 0, (size_t)n * sizeof(*leases));
		return rc;
	}
	return 0;
}

AP_EXPORT int asyncpool_acquire_bulk(struct asyncpool *pool, struct asyncpool_lease *leases,
				     unsigned int n)
{
	struct ap_cache *c;
	int rc = bulk_begin(pool, leases, n, &c);

	return rc <= 0 ? rc : acquire_leases(pool, c, leases, n);
}

/* Whether lease l continues a run of leases of pool with callback fn. */
static inline bool same_run(const struct asyncpool_lease *l, ap_release_token_fn *fn,
			    const struct asyncpool *pool)
{
	return ap_release_is(l, fn) && l->release.ctx == pool;
}

/*
 * Take lease l of a run: clear it, then move its buffer's state (a claim
 * for the freelist, or into a cache).  false, counted in *bad, for a
 * buffer that is not leased; false for an index out of range.
 */
static inline bool run_take(struct asyncpool_lease *l, struct ap_freelist *fl, bool to_cache,
			    uint32_t *bad)
{
	uint32_t i = l->buffer_index;
	uint64_t was;
	bool ok;

	l->release.fn = NULL;
	if (AP_UNLIKELY(i >= fl->count))
		return false;
	ok = to_cache ? ap_state_leased_to_cached(&fl->state[i], l->generation, fl->me) :
			ap_state_claim_leased(&fl->state[i], l->generation, fl->me, &was);
	if (AP_UNLIKELY(!ok)) {
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
	ap_release_token_fn *fn = ap_release_is(l, ap_cache_recycle) ? ap_cache_recycle :
				  ap_pool_recycle;
	uint32_t idx[AP_BULK_CHUNK];
	uint32_t k = 0, bad = 0;
	unsigned int j;

	for (j = 0; j < n && same_run(&l[j], fn, pool); j++) {
		if (!run_take(&l[j], &pool->fl, false, &bad))
			continue;
		AP_TEST_AT(AP_TP_RELEASE_CLAIMED);
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
	uint32_t cn, size, bad = 0;
	unsigned int j;

	if (!c || !ap_cache_enter(c))
		return release_run_fl(pool, l, n);
	cn = c->n;
	size = c->size;
	for (j = 0; j < n && same_run(&l[j], ap_cache_recycle, pool); j++) {
		if (!run_take(&l[j], &pool->fl, true, &bad))
			continue;
		if (AP_UNLIKELY(cn == size)) {
			ap_cache_set_n(c, cn);
			ap_cache_flush_batch(c);
			cn = c->n;
		}
		c->idx[cn++] = l[j].buffer_index;
	}
	ap_cache_set_n(c, cn);
	ap_cache_leave(c);
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

		if (!l->release.fn) {
			i++;
		} else if (ap_release_is(l, ap_cache_recycle)) {
			/* A run of leases of the same pool goes back in one step. */
			i += release_run_cache(l->release.ctx, l, n - i);
		} else if (ap_release_is(l, ap_pool_recycle)) {
			i += release_run_fl(l->release.ctx, l, n - i);
		} else {
			/* A recv ring or another owner: its own callback. */
			asyncpool_lease_release(l);
			i++;
		}
	}
}

/* ---- bulk by token: 8 bytes a buffer, no lease built ---- */

/*
 * A token is generation << 32 | index: in memory, two uint32_t that a
 * chain pop fills in place (index and generation at a stride of 8).
 */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define AP_TOKEN_IDX_AT 0
#define AP_TOKEN_GEN_AT 4
#else
#define AP_TOKEN_IDX_AT 4
#define AP_TOKEN_GEN_AT 0
#endif

/*
 * Release n tokens of pool that ap_token_ok() accepted: into the calling
 * thread's cache if the pool has caches and it may use its cache, else
 * claimed and pushed as chains.  Returns the stale ones (counted).
 */
static uint32_t release_tokens(struct asyncpool *pool, const uint64_t *tokens, unsigned int n)
{
	struct ap_freelist *fl = &pool->fl;
	struct ap_cache *c = pool->cache_size ? ap_cache_of(pool) : NULL;
	uint32_t bad = 0;

	if (c && ap_cache_enter(c)) {
		uint32_t cn = c->n, size = c->size;

		for (unsigned int j = 0; j < n; j++) {
			uint32_t i = AP_TOKEN_INDEX(tokens[j]);

			if (AP_UNLIKELY(!ap_state_leased_to_cached(&fl->state[i],
								   AP_TOKEN_GEN(tokens[j]), fl->me))) {
				bad++;
				continue;
			}
			if (AP_UNLIKELY(cn == size)) {
				ap_cache_set_n(c, cn);
				ap_cache_flush_batch(c);
				cn = c->n;
			}
			c->idx[cn++] = i;
		}
		ap_cache_set_n(c, cn);
		ap_cache_leave(c);
	} else {
		uint32_t idx[AP_BULK_CHUNK], k = 0;

		for (unsigned int j = 0; j < n; j++) {
			uint32_t i = AP_TOKEN_INDEX(tokens[j]);
			uint64_t was;

			if (AP_UNLIKELY(!ap_state_claim_leased(&fl->state[i], AP_TOKEN_GEN(tokens[j]),
							       fl->me, &was))) {
				bad++;
				continue;
			}
			AP_TEST_AT(AP_TP_RELEASE_CLAIMED);
			idx[k++] = i;
			if (k == AP_BULK_CHUNK) {
				(void)ap_fl_push_chain(fl, idx, k);
				k = 0;
			}
		}
		(void)ap_fl_push_chain(fl, idx, k);
	}
	if (AP_UNLIKELY(bad))
		ap_fl_count_bad_release(fl, bad);
	return bad;
}

/* n tokens straight from the freelist, all or nothing (pop_records). */
static int pop_tokens(struct asyncpool *pool, uint64_t *tokens, unsigned int n)
{
	int rc;
	unsigned int got = pop_records(pool, (char *)tokens + AP_TOKEN_IDX_AT,
				       (char *)tokens + AP_TOKEN_GEN_AT, sizeof(*tokens), n, &rc);

	if (rc) {
		(void)release_tokens(pool, tokens, got);
		memset(tokens, 0, (size_t)n * sizeof(*tokens));
	}
	return rc;
}

/* n tokens, all or nothing, as acquire_leases; leaves c. */
static int acquire_tokens(struct asyncpool *pool, struct ap_cache *c, uint64_t *tokens,
			  unsigned int n)
{
	unsigned int j = 0;
	uint32_t idx = 0, gen = 0;
	int rc = 0;

	if (c) {
		while (j < n && (rc = cache_next(pool, c, n - j, &idx, &gen)) > 0)
			tokens[j++] = AP_TOKEN_MAKE(gen, idx);
		ap_cache_leave(c);
	}
	if (!rc && j < n)
		rc = pop_tokens(pool, &tokens[j], n - j);
	if (rc < 0) {
		/* What was taken goes back (to the cache). */
		(void)release_tokens(pool, tokens, j);
		memset(tokens, 0, (size_t)n * sizeof(*tokens));
		return rc;
	}
	return 0;
}

AP_EXPORT int asyncpool_acquire_tokens(struct asyncpool *pool, uint64_t *tokens, unsigned int n)
{
	struct ap_cache *c;
	int rc = bulk_begin(pool, tokens, n, &c);

	return rc <= 0 ? rc : acquire_tokens(pool, c, tokens, n);
}

AP_EXPORT int asyncpool_release_tokens(struct asyncpool *pool, const uint64_t *tokens,
				       unsigned int n)
{
	if (!pool || (!tokens && n) || n > pool->fl.count)
		return -EINVAL;
	/* Bad input changes nothing: every token is checked first. */
	for (unsigned int j = 0; j < n; j++)
		if (!ap_token_ok(pool, tokens[j]))
			return -EINVAL;
	return n && release_tokens(pool, tokens, n) ? -ESTALE : 0;
}
