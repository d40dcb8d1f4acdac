/* SPDX-License-Identifier: MIT */
/*
 * The one place a lease is built: pools (single, bulk, cached, adopted)
 * and recv regions all fill a lease through ap_lease_init(), so that the
 * fields and their meaning cannot drift apart.
 */
#ifndef ASYNCPOOL_LEASE_H
#define ASYNCPOOL_LEASE_H

#include <stddef.h>
#include <stdint.h>

#include <asyncpool/span.h>

typedef void ap_release_fn(void *ctx, uint32_t buffer_index);

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
}

#endif /* ASYNCPOOL_LEASE_H */
