/* SPDX-License-Identifier: MIT */
/* Regions: a registered slab, ref-counted, and its accessors. */
#include "internal.h"

#include <stdlib.h>

AP_EXPORT struct asyncpool_region *asyncpool_region_ref(struct asyncpool_region *r)
{
	if (r)
		atomic_fetch_add_explicit(&r->refs, 1, memory_order_relaxed);
	return r;
}

AP_EXPORT void asyncpool_region_unref(struct asyncpool_region *r)
{
	struct asyncpool_proactor *p;

	if (!r || atomic_fetch_sub_explicit(&r->refs, 1, memory_order_acq_rel) != 1)
		return;
	p = r->proactor;
	p->ops->unregister_region(p, r);
	asyncpool_slab_unref(r->slab);
	free(r);
	atomic_fetch_sub_explicit(&p->regions, 1, memory_order_release);
}

AP_ACCESSOR(struct asyncpool_slab *, asyncpool_region_slab, struct asyncpool_region, slab, NULL)

AP_ACCESSOR(struct asyncpool_proactor *, asyncpool_region_proactor, struct asyncpool_region, proactor, NULL)

AP_ACCESSOR(void *, asyncpool_region_base, struct asyncpool_region, base, NULL)

AP_ACCESSOR(size_t, asyncpool_region_buffer_size, struct asyncpool_region, buffer_size, 0)

AP_ACCESSOR(uint32_t, asyncpool_region_buffer_count, struct asyncpool_region, buffer_count, 0)

AP_ACCESSOR(uint32_t, asyncpool_region_access, struct asyncpool_region, access, 0)

AP_EXPORT int asyncpool_region_fixed_index(const struct asyncpool_region *r,
					   uint32_t buffer_index)
{
	if (!r || buffer_index >= r->buffer_count)
		return -EINVAL;
	if (!r->proactor->ops->fixed_index)
		return -EOPNOTSUPP;
	return r->proactor->ops->fixed_index(r, buffer_index);
}

AP_EXPORT int asyncpool_region_buffer_group(const struct asyncpool_region *r)
{
	if (!r)
		return -EINVAL;
	if (!r->proactor->ops->buffer_group)
		return -EOPNOTSUPP;
	return r->proactor->ops->buffer_group(r);
}

AP_EXPORT int asyncpool_region_recv_lease(struct asyncpool_region *r,
					  const struct io_uring_cqe *cqe,
					  struct asyncpool_lease *out)
{
	unsigned int n;

	if (!out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	if (!r || !cqe)
		return -EINVAL;
	if (!r->proactor->ops->recv)
		return -EOPNOTSUPP;
	return r->proactor->ops->recv(r, cqe, out, 1, &n, false);
}

AP_EXPORT int asyncpool_region_recv_leases(struct asyncpool_region *r,
					   const struct io_uring_cqe *cqe,
					   struct asyncpool_lease *leases, unsigned int max,
					   unsigned int *n)
{
	if (n)
		*n = 0;
	if (!leases || !n || max == 0)
		return -EINVAL;
	memset(leases, 0, sizeof(*leases) * max);
	if (!r || !cqe)
		return -EINVAL;
	if (!r->proactor->ops->recv)
		return -EOPNOTSUPP;
	return r->proactor->ops->recv(r, cqe, leases, max, n, true);
}

AP_EXPORT int asyncpool_region_wait(struct asyncpool_region *r, int64_t timeout_ns)
{
	if (!r || !r->proactor->ops->region_wait)
		return -EINVAL;
	return r->proactor->ops->region_wait(r, timeout_ns);
}

AP_EXPORT int asyncpool_region_prep_wait(struct asyncpool_region *r, struct io_uring_sqe *sqe)
{
	if (!r || !sqe || !r->proactor->ops->region_prep_wait)
		return -EINVAL;
	return r->proactor->ops->region_prep_wait(r, sqe);
}

AP_EXPORT int asyncpool_region_stats(const struct asyncpool_region *r,
				     struct asyncpool_region_stats *out)
{
	struct asyncpool_region_stats st;
	size_t size;

	if (!r || !out || out->size < sizeof(size_t))
		return -EINVAL;
	size = out->size < sizeof(st) ? out->size : sizeof(st);
	memset(&st, 0, sizeof(st));
	st.size = size;
	st.buffer_count = r->buffer_count;
	st.ring_unconsumed = UINT32_MAX;
	if (r->proactor->ops->region_stats)
		r->proactor->ops->region_stats(r, &st);
	memcpy(out, &st, size);
	return 0;
}
