/* SPDX-License-Identifier: MIT */
/* asyncpool_create_opts(): a pool with options (per-thread caches). */
#include "pool_internal.h"

/* The smallest options struct this library accepts: up to flags. */
#define POOL_OPTS_V1 (offsetof(struct asyncpool_options, flags) + sizeof(uint32_t))

AP_EXPORT int asyncpool_create_opts(struct asyncpool_region *r,
				    const struct asyncpool_options *opts,
				    struct asyncpool **out)
{
	struct asyncpool_options o;
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
	rc = asyncpool_create(r, &pool);
	if (rc)
		return rc;
	rc = ap_pool_cache_init(pool, o.cache_size);
	if (rc) {
		asyncpool_destroy(pool);
		return rc;
	}
	*out = pool;
	return 0;
}
