/* SPDX-License-Identifier: MIT */
/*
 * Shared pools: the pool layout in memory that several processes map.
 * The creator initialises it and publishes the magic last; everyone else
 * validates the header before touching the rest.  Hand-off by index.
 */
#include "pool_internal.h"
#include "pool_cache.h"
#include "pool_takeover.h"
#include "pool_check.h"

#include <stdlib.h>

_Static_assert(AP_MAX_COUNT == ASYNCPOOL_MAX_BUFFERS, "one limit");

AP_EXPORT int asyncpool_shared_storage_size(uint32_t buffer_count, size_t *out)
{
	if (!out)
		return -EINVAL;
	*out = 0;
	return ap_layout_size(buffer_count, true, 0, 0, out);
}

/*
 * The arguments of create (size must hold the layout of r's buffers) and
 * open (size must hold a header); *need is the layout's size for create.
 */
static int shared_args(void *mem, size_t size, struct asyncpool_region *r, bool create,
		       uint32_t channels, uint32_t capacity, size_t *need, struct asyncpool **out)
{
	int rc;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!mem || (uintptr_t)mem % AP_CACHE_LINE)
		return -EINVAL;
	rc = ap_pool_check_region(r);
	if (rc)
		return rc;
	*need = sizeof(struct ap_pool_header);
	if (create) {
		rc = ap_layout_size(r->buffer_count, true, channels, capacity, need);
		if (rc)
			return rc;
	}
	return size < *need ? -EINVAL : 0;
}

static int shared_handle(void *mem, size_t storage_size, struct asyncpool_region *r,
			 uint32_t channels, uint32_t capacity, struct asyncpool **out)
{
	struct asyncpool *pool = calloc(1, sizeof(*pool));

	if (!pool)
		return -ENOMEM;
	ap_pool_bind(pool, mem, r);
	pool->storage_size = storage_size;
	pool->owns_storage = false;
	pool->shared = true;
	pool->fl.shared = true;
	pool->chan_count = channels;
	pool->chan_cap = capacity;
	*out = pool;
	return 0;
}

/* A layout of version 3, or 4 with channels x capacity (channel.c). */
int ap_create_shared(void *mem, size_t size, struct asyncpool_region *r, uint32_t channels,
		     uint32_t capacity, uint32_t chan_flags, struct asyncpool **out)
{
	struct ap_pool_header *hdr = mem;
	struct asyncpool *pool;
	size_t need;
	int rc;

	rc = shared_args(mem, size, r, true, channels, capacity, &need, out);
	if (rc)
		return rc;
	/* Never initialise over a pool that others may be using. */
	if (atomic_load_explicit(&hdr->magic, memory_order_acquire) == AP_POOL_MAGIC)
		return -EEXIST;
	rc = shared_handle(mem, need, r, channels, capacity, &pool);
	if (rc)
		return rc;
	ap_layout_init(mem, r->buffer_count, r->buffer_size, true, channels, capacity);
	if (channels && (chan_flags & AP_POOL_F_CHAN_DROP)) {
		hdr->flags |= AP_POOL_F_CHAN_DROP;
		pool->chan_drop = true;
	}
	ap_layout_publish(mem);
	*out = pool;
	return 0;
}

AP_EXPORT int asyncpool_create_shared(void *mem, size_t size, struct asyncpool_region *r,
				      struct asyncpool **out)
{
	return ap_create_shared(mem, size, r, 0, 0, 0, out);
}

AP_EXPORT int asyncpool_open_shared(void *mem, size_t size, struct asyncpool_region *r,
				    struct asyncpool **out)
{
	struct ap_pool_header hdr;
	struct ap_pool_head *line;
	uint32_t head;
	size_t need;
	int rc;

	rc = shared_args(mem, size, r, false, 0, 0, &need, out);
	if (rc)
		return rc;
	rc = ap_header_check(mem, size, true, &hdr);
	if (rc)
		return rc;
	if (hdr.buffer_count != r->buffer_count || hdr.buffer_size != r->buffer_size)
		return -EBADMSG;
	line = (void *)((char *)mem + AP_OFF_HEAD);
	head = AP_HEAD_INDEX(atomic_load_explicit(&line->head, memory_order_acquire));
	if (head >= hdr.buffer_count && head != AP_FL_END)
		return -EBADMSG;
	rc = shared_handle(mem, hdr.storage_size, r, hdr.channel_count, hdr.channel_capacity,
			   out);
	if (!rc)
		(*out)->chan_drop = !!(hdr.flags & AP_POOL_F_CHAN_DROP);
	return rc;
}

/*
 * By index: any generation (the caller vouches for the lease).  A pool
 * whose caches lend asks them which it is (ap_cache_lease_gen): none,
 * if a cache holds the buffer.
 */
AP_EXPORT int asyncpool_release_index(struct asyncpool *pool, uint32_t buffer_index)
{
	if (!pool)
		return -EINVAL;
	if (pool->fl.lazy && buffer_index < pool->fl.count) {
		/* Lent, or in a cache: only with every owner stopped. */
		int kind = ap_cache_claim_lent(pool, buffer_index, 0, false, NULL);

		if (kind > 0)
			return 0;
		if (!kind) {
			ap_fl_count_bad_release(&pool->fl, 1);
			return -EALREADY;
		}
	}
	return ap_fl_release(&pool->fl, buffer_index, 0);
}

static int adopt(struct asyncpool *pool, uint32_t idx, uint32_t gen,
		 struct asyncpool_lease *out, int stale)
{
	uint32_t g, kind;

	if (!out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	if (!pool || idx >= pool->fl.count)
		return -EINVAL;
	if (pool->fl.lazy &&
	    AP_W_KIND(ap_state_load(&pool->fl.state[idx])) != AP_K_LEASED) {
		/* Lent: its owner decides its releases, so it is stopped
		 * while the lease changes hands. */
		int k = ap_cache_claim_lent(pool, idx, gen, true, &g);

		if (!k)
			return stale;
		if (k > 0) {
			ap_pool_lease(pool, idx, g, pool->release_fn, out);
			return 0;
		}
	}
	/*
	 * The holder becomes us, at a new generation: the giver's death no
	 * longer reclaims it, and the giver's lease and token are stale.
	 */
	kind = ap_state_adopt(&pool->fl.state[idx], gen, pool->fl.me, pool->fl.lent_tag, &g);
	if (!kind)
		return stale;
	/* The giver's generation, fenced: its release is not a double one. */
	ap_fl_fence(&pool->fl, idx, ap_gen_prev(g));
	if (kind == AP_K_CACHED)
		ap_fl_lent_back(&pool->fl, 1);  /* no longer lent: leased */
	ap_pool_lease(pool, idx, g, pool->release_fn, out);
	return 0;
}

AP_EXPORT int asyncpool_lease_adopt(struct asyncpool *pool, uint32_t buffer_index,
				    struct asyncpool_lease *out)
{
	return adopt(pool, buffer_index, 0, out, -EALREADY);
}

AP_EXPORT uint64_t asyncpool_lease_token(const struct asyncpool_lease *lease)
{
	if (!lease || !lease->generation)
		return 0;
	return AP_TOKEN_MAKE(lease->generation, lease->buffer_index);
}

/* All but the common case of asyncpool_release_token(): out of line. */
static __attribute__((noinline)) int release_token_rest(struct asyncpool *pool, uint64_t token)
{
	int rc;

	/* Into a shared pool's cache, by its CAS: no stack frame (ap_cache_put_shared). */
	if (!pool->fl.lazy &&
	    AP_LIKELY(ap_cache_put_shared(pool, AP_TOKEN_INDEX(token), AP_TOKEN_GEN(token))))
		return 0;
	/* Into the calling thread's cache, as a lease's release goes. */
	if (ap_pool_cached(pool))
		rc = ap_cache_release(pool, AP_TOKEN_INDEX(token), AP_TOKEN_GEN(token));
	else
		rc = ap_fl_release(&pool->fl, AP_TOKEN_INDEX(token), AP_TOKEN_GEN(token));
	return rc == -EALREADY ? -ESTALE : rc;
}

AP_EXPORT int asyncpool_release_token(struct asyncpool *pool, uint64_t token)
{
	AP_TEST_EXPORTED_CALL();
	if (!ap_token_ok(pool, token))
		return -EINVAL;
	/* A pool that lends without a cache: one function. */
	if (ap_lends_only(pool, ap_tc_last))
		return ap_owner_release_own(pool, ap_tc_last, AP_TOKEN_INDEX(token),
					    AP_TOKEN_GEN(token), -ESTALE);
	/* A buffer the calling thread's cache lent: no stack frame. */
	if (AP_LIKELY(ap_cache_put_lent(pool, AP_TOKEN_INDEX(token), AP_TOKEN_GEN(token))))
		return 0;
	return release_token_rest(pool, token);
}

AP_EXPORT int asyncpool_lease_adopt_token(struct asyncpool *pool, uint64_t token,
					  struct asyncpool_lease *out)
{
	if (out && !ap_token_ok(pool, token)) {
		memset(out, 0, sizeof(*out));
		return -EINVAL;
	}
	return adopt(pool, AP_TOKEN_INDEX(token), AP_TOKEN_GEN(token), out, -ESTALE);
}
