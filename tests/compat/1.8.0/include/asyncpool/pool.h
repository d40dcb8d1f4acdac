/* SPDX-License-Identifier: MIT */
/*
 * A pool: a lock-free O(1) freelist of the buffers of a region.  Local
 * (its freelist on the heap) or shared (its freelist in memory that
 * other processes map).
 */
#ifndef ASYNCPOOL_POOL_H
#define ASYNCPOOL_POOL_H

#include <stddef.h>
#include <stdint.h>
#include <asyncpool/span.h>

#ifdef __cplusplus
extern "C" {
#endif

struct asyncpool;
struct asyncpool_region;
struct io_uring_sqe;

/* The largest buffer_count of a pool: 2^31 - 2. */
#define ASYNCPOOL_MAX_BUFFERS 0x7ffffffeu

/*
 * Counters of a pool, for asyncpool_stats().  Extensible: set size to
 * sizeof(struct asyncpool_stats) before the call.
 */
struct asyncpool_stats {
	size_t   size;             /* sizeof(struct asyncpool_stats) */
	uint32_t capacity;         /* buffers in the pool */
	uint32_t available;        /* as asyncpool_available() */
	uint64_t bad_releases;     /* releases of buffers that were not leased */
	uint64_t corruptions;      /* inconsistent shared state seen (-EUCLEAN) */
	uint64_t empty;            /* acquires that found the pool empty */
	/* Since 1.4: releases of a lease that an adoption had fenced, not
	 * counted in bad_releases (asyncpool_stats(3)). */
	uint64_t fenced_releases;
};

/* The largest per-thread cache of a pool, in buffers. */
#define ASYNCPOOL_CACHE_MAX 4096u

/*
 * Options for asyncpool_create_opts().  Extensible: zero the whole
 * struct, set size to sizeof(struct asyncpool_options), then the fields
 * you need.  Fields beyond size that this build does not know must be
 * zero.
 */
struct asyncpool_options {
	size_t   size;             /* sizeof(struct asyncpool_options) */
	uint32_t cache_size;       /* buffers per thread cache; 0: no caches */
	uint32_t flags;            /* none defined yet: 0 */
	uint64_t reserved[4];      /* must be zero */
	/*
	 * Since 1.2: regions of the same slab on other proactors (READ, one
	 * per proactor, none on the pool's own), for a pool whose leases are
	 * sent on several rings.  The pool takes a reference on each and
	 * drops it in asyncpool_destroy(), so the caller may unref its own
	 * right after the create.  An older caller's size ends before these.
	 */
	struct asyncpool_region *const *siblings;
	uint32_t sibling_count;
};

int    asyncpool_create(struct asyncpool_region *r, struct asyncpool **out);
int    asyncpool_create_opts(struct asyncpool_region *r, const struct asyncpool_options *opts,
			     struct asyncpool **out);
int    asyncpool_set_cache(struct asyncpool *pool, uint32_t cache_size);
int    asyncpool_cache_flush(struct asyncpool *pool);
int    asyncpool_acquire_bulk(struct asyncpool *pool, struct asyncpool_lease *leases,
			      unsigned int n);
void   asyncpool_release_bulk(struct asyncpool_lease *leases, unsigned int n);
int    asyncpool_destroy(struct asyncpool *pool);
int    asyncpool_acquire(struct asyncpool *pool, struct asyncpool_lease *out);
size_t asyncpool_available(const struct asyncpool *pool);
size_t asyncpool_capacity(const struct asyncpool *pool);
size_t asyncpool_buffer_size(const struct asyncpool *pool);
struct asyncpool_region *asyncpool_region(const struct asyncpool *pool);
int    asyncpool_stats(const struct asyncpool *pool, struct asyncpool_stats *out);

/* Waiting for a buffer (LIBASYNCPOOL_1.1). */
int    asyncpool_acquire_wait(struct asyncpool *pool, struct asyncpool_lease *out,
			      int64_t timeout_ns);
int    asyncpool_prep_wait(struct asyncpool *pool, struct io_uring_sqe *sqe);
int    asyncpool_wait_fd(struct asyncpool *pool);
int    asyncpool_cache_flush_all(struct asyncpool *pool);

/* Shared pools: the freelist lives in memory the caller provides. */
int asyncpool_shared_storage_size(uint32_t buffer_count, size_t *out);
int asyncpool_create_shared(void *mem, size_t size, struct asyncpool_region *r,
			    struct asyncpool **out);
int asyncpool_open_shared(void *mem, size_t size, struct asyncpool_region *r,
			  struct asyncpool **out);
int asyncpool_release_index(struct asyncpool *pool, uint32_t buffer_index);
int asyncpool_lease_adopt(struct asyncpool *pool, uint32_t buffer_index,
			  struct asyncpool_lease *out);
/*
 * Hand-off by token (since 1.1): the index and generation of a lease in
 * 64 bits.  A release or adoption of a token whose lease is gone (the
 * buffer was released, reclaimed, or leased again) gives -ESTALE.
 */
uint64_t asyncpool_lease_token(const struct asyncpool_lease *lease);
int asyncpool_release_token(struct asyncpool *pool, uint64_t token);
int asyncpool_lease_adopt_token(struct asyncpool *pool, uint64_t token,
				struct asyncpool_lease *out);
/*
 * Bulk by token (since 1.1): n buffers as 8-byte tokens, no lease built.
 * Acquire is all or nothing; release refuses (and counts) each stale
 * token, releases the others, and then returns -ESTALE.
 */
int asyncpool_acquire_tokens(struct asyncpool *pool, uint64_t *tokens, unsigned int n);
int asyncpool_release_tokens(struct asyncpool *pool, const uint64_t *tokens, unsigned int n);
/*
 * Return to the freelist the buffers of the processes attached to a
 * shared pool that died (since 1.1): the number that came back, or a
 * negative errno.  Leased ones only after the quarantine (milliseconds
 * since the death was first seen; default ASYNCPOOL_QUARANTINE_MS).
 */
#define ASYNCPOOL_QUARANTINE_MS 5000u
int asyncpool_reclaim(struct asyncpool *pool);
int asyncpool_set_quarantine(struct asyncpool *pool, uint32_t ms);
/* Audit the freelist: 0, -EUCLEAN (freelist) or -EBADMSG (header). */
int asyncpool_check(const struct asyncpool *pool);

#ifdef ASYNCPOOL_INLINE_PATHS
/*
 * The fast paths, inline (since 1.4; inline.h): a buffer the calling
 * thread's cache of pool holds, or a buffer it lent, back into it; the
 * exported function for everything else.  Their exported names, for
 * the inline code to call without calling itself.
 */
extern int __asyncpool_acquire_call(struct asyncpool *pool, struct asyncpool_lease *out)
	__asm__("asyncpool_acquire");
extern int __asyncpool_acquire_tokens_call(struct asyncpool *pool, uint64_t *tokens,
					   unsigned int n) __asm__("asyncpool_acquire_tokens");
extern int __asyncpool_release_token_call(struct asyncpool *pool, uint64_t token)
	__asm__("asyncpool_release_token");
extern int __asyncpool_release_tokens_call(struct asyncpool *pool, const uint64_t *tokens,
					   unsigned int n) __asm__("asyncpool_release_tokens");

/* The lease of token t from cache c: its fields, with the index and the generation in one store. */
ASYNCPOOL_GNU_INLINE void
__asyncpool_lease(const struct asyncpool_inline_cache *c, uint64_t t, struct asyncpool_lease *out)
{
	out->span.region = c->region;
	out->span.offset = (size_t)(uint32_t)t * c->buffer_size;
	out->span.length = c->buffer_size;
	out->release.fn = c->recycle;
	out->release.ctx = c->pool;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	__builtin_memcpy(&out->buffer_index, &t, sizeof(t));
#else
	out->buffer_index = (uint32_t)t;
	out->generation = (uint32_t)(t >> 32);
#endif
}

ASYNCPOOL_GNU_INLINE int asyncpool_acquire(struct asyncpool *pool, struct asyncpool_lease *out)
{
	struct asyncpool_inline_cache *c = __asyncpool_cache_of(pool);
	uint64_t t;

	if (__asyncpool_likely(c && out && __asyncpool_take(c, &t))) {
		__asyncpool_lease(c, t, out);
		return 0;
	}
	c = __asyncpool_shared_cache_of(pool);
	if (c && out && __asyncpool_take_shared(c, &t)) {
		__asyncpool_lease(c, t, out);
		return 0;
	}
	return __asyncpool_acquire_call(pool, out);
}

ASYNCPOOL_GNU_INLINE int asyncpool_acquire_tokens(struct asyncpool *pool, uint64_t *tokens,
						  unsigned int n)
{
	struct asyncpool_inline_cache *c = __asyncpool_cache_of(pool);

	if (__asyncpool_likely(c && tokens)) {
		if (n == 1) {
			if (__asyncpool_likely(__asyncpool_take(c, tokens)))
				return 0;
		} else if (n && __asyncpool_take_n(c, tokens, n)) {
			return 0;
		}
	} else if (n == 1 && tokens && (c = __asyncpool_shared_cache_of(pool)) &&
		   __asyncpool_take_shared(c, tokens)) {
		return 0;
	}
	return __asyncpool_acquire_tokens_call(pool, tokens, n);
}

ASYNCPOOL_GNU_INLINE int asyncpool_release_token(struct asyncpool *pool, uint64_t token)
{
	struct asyncpool_inline_cache *c = __asyncpool_cache_of(pool);

	if (__asyncpool_likely(c && __asyncpool_put(c, token)))
		return 0;
	if (!c && (c = __asyncpool_shared_cache_of(pool)) && __asyncpool_put_shared(c, token))
		return 0;
	return __asyncpool_release_token_call(pool, token);
}

ASYNCPOOL_GNU_INLINE int asyncpool_release_tokens(struct asyncpool *pool, const uint64_t *tokens,
						  unsigned int n)
{
	struct asyncpool_inline_cache *c = __asyncpool_cache_of(pool);
	unsigned int k;

	if (__asyncpool_likely(c && tokens)) {
		k = __asyncpool_put_n(c, tokens, n);
		if (__asyncpool_likely(k == n))
			return 0;
		return __asyncpool_release_tokens_call(pool, tokens + k, n - k);
	}
	return __asyncpool_release_tokens_call(pool, tokens, n);
}
#endif /* ASYNCPOOL_INLINE_PATHS */

#ifdef __cplusplus
}
#endif

#endif /* ASYNCPOOL_POOL_H */
