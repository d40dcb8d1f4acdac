/* SPDX-License-Identifier: MIT */
/*
 * The one place a lease is built: pools (single, bulk, cached, adopted)
 * fill a lease through ap_lease_init_token(), recv regions through
 * ap_lease_init(), so that the fields and their meaning cannot drift
 * apart.
 */
#ifndef ASYNCPOOL_LEASE_H
#define ASYNCPOOL_LEASE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <asyncpool/span.h>

/*
 * A release callback.  Leases with a generation (pools) have one that
 * takes the token, generation << 32 | index (asyncpool_lease_release()
 * calls it so); the others (recv rings) take the index.
 */
typedef void ap_release_fn(void *ctx, uint32_t buffer_index);
typedef void ap_release_token_fn(void *ctx, uint64_t token);

#define AP_TOKEN_MAKE(gen, idx) (((uint64_t)(gen) << 32) | (uint32_t)(idx))
#define AP_TOKEN_INDEX(t)       ((uint32_t)(t))
#define AP_TOKEN_GEN(t)         ((uint32_t)((t) >> 32))
/* The same buffer's token at the next generation (the caller excludes the wrap). */
#define AP_TOKEN_NEXT(t)        ((t) + ((uint64_t)1 << 32))

/*
 * In memory, a token is two uint32_t that a chain pop fills in place
 * (index and generation at a stride of 8): their byte offsets.
 */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define AP_TOKEN_IDX_AT 0
#define AP_TOKEN_GEN_AT 4
#else
#define AP_TOKEN_IDX_AT 4
#define AP_TOKEN_GEN_AT 0
#endif

static inline void ap_lease_init(struct asyncpool_lease *out, struct asyncpool_region *region,
				 size_t offset, size_t length, ap_release_fn *fn, void *ctx,
				 uint32_t buffer_index)
{
	out->span.region = region;
	out->span.offset = offset;
	out->span.length = length;
	out->release.fn = fn;
	out->release.ctx = ctx;
	out->buffer_index = buffer_index;
	out->generation = 0;
}

/*
 * A pool's lease, of token t (generation << 32 | index; the generation
 * never 0), its callback taking tokens: the buffer at index x length,
 * the index and the generation in one 8-byte store where they lie as a
 * token does (little-endian), as the header's inline lease does
 * (__asyncpool_lease()).
 */
static inline void ap_lease_init_token(struct asyncpool_lease *out,
				       struct asyncpool_region *region, size_t length,
				       ap_release_token_fn *fn, void *ctx, uint64_t t)
{
	out->span.region = region;
	out->span.offset = (size_t)AP_TOKEN_INDEX(t) * length;
	out->span.length = length;
	out->release.fn = (ap_release_fn *)(void (*)(void))fn;
	out->release.ctx = ctx;
#if AP_TOKEN_IDX_AT == 0
	memcpy(&out->buffer_index, &t, sizeof(t));
#else
	out->buffer_index = AP_TOKEN_INDEX(t);
	out->generation = AP_TOKEN_GEN(t);
#endif
}

/* The token of a pool's lease: its generation << 32 | its index. */
static inline uint64_t ap_lease_token(const struct asyncpool_lease *l)
{
#if AP_TOKEN_IDX_AT == 0
	uint64_t t;

	memcpy(&t, &l->buffer_index, sizeof(t));
	return t;
#else
	return AP_TOKEN_MAKE(l->generation, l->buffer_index);
#endif
}

#endif /* ASYNCPOOL_LEASE_H */
