/* SPDX-License-Identifier: MIT */
/*
 * Spans and leases are values.  A span is a window of a region; a
 * lease is a span that must be given back, with the callback that gives
 * it back to where it came from (a pool's freelist or a recv ring).
 */
#ifndef ASYNCPOOL_SPAN_H
#define ASYNCPOOL_SPAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <asyncpool/region.h>
#include <asyncpool/inline.h>

#ifdef __cplusplus
extern "C" {
#endif

struct asyncpool_span {
	struct asyncpool_region *region;
	size_t offset;          /* from the start of the region */
	size_t length;          /* bytes */
};

struct asyncpool_recycle {
	void (*fn)(void *ctx, uint32_t buffer_index);
	void *ctx;
};

struct asyncpool_lease {
	struct asyncpool_span    span;
	struct asyncpool_recycle release;
	uint32_t                 buffer_index;
	/*
	 * The buffer's generation when this lease was given (pool leases;
	 * never 0 there), 0 for other leases.  A release of a lease whose
	 * generation is no longer the buffer's is refused.  Since 1.1: it
	 * fills what was tail padding, so the size and offsets are unchanged.
	 */
	uint32_t                 generation;
};

static inline struct asyncpool_span
asyncpool_span_make(struct asyncpool_region *region, size_t offset, size_t length)
{
	struct asyncpool_span s;

	s.region = region;
	s.offset = offset;
	s.length = length;
	return s;
}

/* The first byte of the span, or NULL for a span without a region. */
static inline void *asyncpool_span_ptr(struct asyncpool_span span)
{
	if (!span.region)
		return NULL;
	return (char *)asyncpool_region_base(span.region) + span.offset;
}

static inline size_t asyncpool_span_length(struct asyncpool_span span)
{
	return span.length;
}

static inline bool asyncpool_span_empty(struct asyncpool_span span)
{
	return span.length == 0;
}

/*
 * Give back a lease that has a generation (a pool's), out of line: the
 * library calls the pool's callback through the callback's own type.
 * Since 1.2; asyncpool_lease_release() calls it for such leases.
 */
void asyncpool_lease_release_gen(struct asyncpool_lease *lease);

/*
 * Give the leased buffer back.  Idempotent on the same lease object:
 * the callback is cleared before it runs, so a second call does nothing.
 * Every callback is called through its own type: a lease without a
 * generation's here, a pool's (which takes the token, generation << 32
 * | index) inside the library.
 */
#ifdef ASYNCPOOL_INLINE_PATHS
/* Inline at every call: a call of its own would cost the pair more than its body. */
__attribute__((always_inline))
#endif
static inline void asyncpool_lease_release(struct asyncpool_lease *lease)
{
	void (*fn)(void *, uint32_t);

	if (!lease || !lease->release.fn)
		return;
#if defined(ASYNCPOOL_INLINE_PATHS) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	/* The token, index and generation, in one load, and the generation
	 * tested from it: a 4-byte load of the generation alone, from the
	 * 8 bytes the acquire stored just before, is not forwarded from
	 * that store on some CPUs (AMD Zen 4: 6 cycles, not 0). */
	uint64_t t;

	__builtin_memcpy(&t, &lease->buffer_index, sizeof(t));
	if (t >> 32) {
#else
	if (lease->generation) {
#endif
#ifdef ASYNCPOOL_INLINE_PATHS
		/* A lease of the pool whose cache this thread used last: its
		 * owner's release, inline (inline.h). */
		struct asyncpool_inline_cache *c = asyncpool_inline_tc;

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
		uint64_t t = (uint64_t)lease->generation << 32 | lease->buffer_index;
#endif
		if (__asyncpool_likely(c->abi == ASYNCPOOL_INLINE_ABI_EXPECTED &&
				       lease->release.fn == c->recycle &&
				       lease->release.ctx == (void *)c->pool &&
				       __asyncpool_put(c, t))) {
			lease->release.fn = NULL;
			return;
		}
		/* A shared pool's cache: the release's CAS, inline too. */
		if (__atomic_load_n(&c->abi, __ATOMIC_RELAXED) == __ASYNCPOOL_SHARED_EXPECTED &&
		    lease->release.fn == c->recycle &&
		    lease->release.ctx == (void *)c->pool && __asyncpool_put_shared(c, t)) {
			lease->release.fn = NULL;
			return;
		}
#endif
		asyncpool_lease_release_gen(lease);
		return;
	}
	fn = lease->release.fn;
	lease->release.fn = NULL;
	fn(lease->release.ctx, lease->buffer_index);
}

/* True while the lease object still holds its buffer. */
static inline bool asyncpool_lease_held(const struct asyncpool_lease *lease)
{
	return lease && lease->release.fn != NULL;
}

#ifdef __cplusplus
}
#endif

#endif /* ASYNCPOOL_SPAN_H */
