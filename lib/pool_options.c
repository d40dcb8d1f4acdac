/* SPDX-License-Identifier: MIT */
/* asyncpool_create_opts(): a pool with options (per-thread caches). */
#include "pool_internal.h"

#include <stdlib.h>

/* The smallest options struct this library accepts: up to flags. */
#define POOL_OPTS_V1 (offsetof(struct asyncpool_options, flags) + sizeof(uint32_t))

/*
 * The siblings of a pool over r: regions of r's slab, READ, each on a
 * proactor of its own that is not r's.  The pool only holds them, so
 * that their fixed-buffer slots live as long as the pool; it never uses
 * them.  (r itself is checked by asyncpool_create().)
 */
static int check_siblings(const struct asyncpool_region *r,
			  struct asyncpool_region *const *sib, uint32_t n)
{
	/* No siblings, whatever the pointer: o.siblings = r + 1 with
	 * o.sibling_count = nrings - 1 must work for a single ring too. */
	if (n == 0)
		return 0;
	if (!sib || !r)
		return -EINVAL;
	for (uint32_t i = 0; i < n; i++) {
		if (!sib[i] || sib[i]->slab != r->slab || !(sib[i]->access & ASYNCPOOL_ACCESS_READ) ||
		    sib[i]->proactor == r->proactor)
			return -EINVAL;
		for (uint32_t j = 0; j < i; j++)
			if (sib[j]->proactor == sib[i]->proactor)
				return -EINVAL;
	}
	return 0;
}

AP_EXPORT int asyncpool_create_opts(struct asyncpool_region *r,
				    const struct asyncpool_options *opts,
				    struct asyncpool **out)
{
	struct asyncpool_options o;
	struct asyncpool_region **sib = NULL;
	struct asyncpool *pool;
	int rc;

	if (!out)
		return -EINVAL;
	*out = NULL;
	memset(&o, 0, sizeof(o));
	if (opts) {
		rc = ap_opts_copy(&o, sizeof(o), opts, POOL_OPTS_V1);
		if (rc)
			return rc;
	}
	if (o.flags)
		return -EINVAL;
	for (size_t i = 0; i < sizeof(o.reserved) / sizeof(o.reserved[0]); i++)
		if (o.reserved[i])
			return -EINVAL;
	if (o.cache_size > ASYNCPOOL_CACHE_MAX ||
	    (r && o.cache_size > r->buffer_count))
		return -EINVAL;
	rc = check_siblings(r, o.siblings, o.sibling_count);
	if (rc)
		return rc;
	if (o.sibling_count) {
		sib = calloc(o.sibling_count, sizeof(*sib));
		if (!sib)
			return -ENOMEM;
	}
	rc = ap_pool_create_bare(r, &pool);
	if (rc) {
		free(sib);
		return rc;
	}
	/* Before the caches: asyncpool_destroy() of a failed init drops them. */
	for (uint32_t i = 0; i < o.sibling_count; i++)
		sib[i] = asyncpool_region_ref(o.siblings[i]);
	pool->siblings = sib;
	pool->sibling_count = o.sibling_count;
	rc = ap_pool_cache_init(pool, o.cache_size);
	if (rc) {
		asyncpool_destroy(pool);
		return rc;
	}
	*out = pool;
	return 0;
}
