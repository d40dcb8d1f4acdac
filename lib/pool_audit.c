/* SPDX-License-Identifier: MIT */
/*
 * asyncpool_check(): the audit of a pool, local or shared.  The header
 * (a shared one may have been rewritten since it was opened), then the
 * freelist and the states of every buffer (pool_check.h, which
 * `asyncpool inspect` shares), then this process's caches against the
 * cached states: a buffer in two caches shows as more entries than
 * cached buffers.
 */
#include "pool_internal.h"
#include "pool_check.h"

#include <stdlib.h>

AP_EXPORT int asyncpool_check(const struct asyncpool *pool)
{
	struct ap_pool_header hdr;
	struct ap_audit a;
	unsigned char *seen;
	uint64_t head;
	uint32_t entries;
	int64_t lent;
	int rc;

	if (!pool)
		return -EINVAL;
	rc = ap_header_check(pool->storage, pool->storage_size, pool->shared, &hdr);
	if (rc)
		return rc == -EPROTONOSUPPORT || rc == -EPROTO ? -EBADMSG : rc;
	if (hdr.buffer_count != pool->fl.count || hdr.buffer_size != pool->buffer_size)
		return -EBADMSG;
	seen = calloc((size_t)pool->fl.count / 8 + 1, 1);
	if (!seen)
		return -ENOMEM;
	head = atomic_load_explicit(&pool->fl.line->head, memory_order_acquire);
	rc = ap_freelist_audit(head, pool->fl.state, pool->fl.link, pool->fl.count,
			       pool->chan_count, seen, &a);
	free(seen);
	if (rc || !ap_pool_cached(pool))
		return rc;
	/* Every cached buffer of a local pool is in a cache of this process,
	 * or lent by one (buffer_state.h); those of a shared pool may be in
	 * other processes' caches too. */
	entries = ap_cache_count(pool, &lent, NULL);
	if (pool->shared ? entries > a.cached : (int64_t)entries + lent != (int64_t)a.cached)
		return -EUCLEAN;
	return 0;
}
