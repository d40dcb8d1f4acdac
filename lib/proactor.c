/* SPDX-License-Identifier: MIT */
/*
 * The backend-neutral half of a proactor: lifetime and registration.
 * Each backend (proactor_memory.c, proactor_uring.c) supplies its ops.
 */
#include "internal.h"

#include <stdlib.h>

int ap_proactor_new(const struct proactor_ops *ops, void *backend,
		    struct asyncpool_proactor **out)
{
	struct asyncpool_proactor *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	p->ops = ops;
	p->backend = backend;
	atomic_init(&p->regions, 0);
	*out = p;
	return 0;
}

AP_EXPORT int asyncpool_proactor_destroy(struct asyncpool_proactor *p)
{
	int rc = 0;

	if (!p)
		return -EINVAL;
	if (atomic_load_explicit(&p->regions, memory_order_acquire) != 0)
		return -EBUSY;
	if (p->ops->destroy)
		rc = p->ops->destroy(p);
	if (rc)
		return rc;
	free(p);
	return 0;
}

AP_EXPORT int asyncpool_proactor_run_deferred(struct asyncpool_proactor *p)
{
	if (!p)
		return -EINVAL;
	return p->ops->run_deferred ? p->ops->run_deferred(p) : 0;
}

AP_EXPORT int asyncpool_proactor_stats(const struct asyncpool_proactor *p,
				       struct asyncpool_proactor_stats *out)
{
	size_t size;

	if (!p || !out || out->size < sizeof(size_t))
		return -EINVAL;
	size = out->size < sizeof(*out) ? out->size : sizeof(*out);
	{
		struct asyncpool_proactor_stats st;

		memset(&st, 0, sizeof(st));
		st.size = size;
		if (p->ops->proactor_stats)
			p->ops->proactor_stats((struct asyncpool_proactor *)p, &st);
		st.live_regions = atomic_load_explicit(&p->regions, memory_order_relaxed);
		memcpy(out, &st, size);
	}
	return 0;
}

AP_EXPORT int asyncpool_proactor_register_slab(struct asyncpool_proactor *p,
					       struct asyncpool_slab *slab,
					       uint32_t access,
					       struct asyncpool_region **out)
{
	struct asyncpool_region *r;
	int rc;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!p || !slab)
		return -EINVAL;
	if (access == 0 || (access & ~(ASYNCPOOL_ACCESS_READ | ASYNCPOOL_ACCESS_WRITE |
				       ASYNCPOOL_ACCESS_INCREMENTAL)))
		return -EINVAL;
	/* Incremental consumption is a kind of recv ring: WRITE only. */
	if ((access & ASYNCPOOL_ACCESS_INCREMENTAL) && access != (ASYNCPOOL_ACCESS_WRITE |
								 ASYNCPOOL_ACCESS_INCREMENTAL))
		return -EINVAL;

	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	atomic_init(&r->refs, 1);
	r->proactor = p;
	r->slab = slab;
	r->base = slab->base;
	r->buffer_size = slab->buffer_size;
	r->buffer_count = slab->buffer_count;
	r->access = access;
	rc = p->ops->register_region(p, r);
	if (rc) {
		free(r);
		return rc;
	}
	asyncpool_slab_ref(slab);
	atomic_fetch_add_explicit(&p->regions, 1, memory_order_relaxed);
	*out = r;
	return 0;
}

AP_EXPORT int asyncpool_proactor_register_slab_many(struct asyncpool_proactor *const *proactors,
						    uint32_t count, struct asyncpool_slab *slab,
						    uint32_t access, struct asyncpool_region **regions)
{
	uint32_t i;
	int rc = 0;

	if (!regions || count == 0)
		return -EINVAL;
	memset(regions, 0, count * sizeof(*regions));
	if (!proactors || !slab)
		return -EINVAL;
	/* Checked before the first registration, so that bad input changes
	 * nothing: a NULL, or one proactor twice (two runs of slots on one
	 * ring is never what a caller of this meant). */
	for (i = 0; i < count; i++) {
		if (!proactors[i])
			return -EINVAL;
		for (uint32_t j = 0; j < i; j++)
			if (proactors[j] == proactors[i])
				return -EINVAL;
	}
	for (i = 0; i < count; i++) {
		rc = asyncpool_proactor_register_slab(proactors[i], slab, access, &regions[i]);
		if (rc)
			break;
	}
	if (rc) {
		/* Undo in reverse.  A region unreferenced on a thread that is
		 * not its ring's owner is unregistered later by the owner
		 * (asyncpool_proactor_run_deferred(3)); it is gone from the
		 * proactor's live count now either way. */
		while (i-- > 0) {
			asyncpool_region_unref(regions[i]);
			regions[i] = NULL;
		}
	}
	return rc;
}
