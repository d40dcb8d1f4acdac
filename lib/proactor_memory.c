/* SPDX-License-Identifier: MIT */
/*
 * The memory proactor registers nothing: regions are plain memory, for
 * epoll/poll programs, for systems without io_uring, and for tests.
 */
#include "internal.h"

static int memory_register(struct asyncpool_proactor *p, struct asyncpool_region *r)
{
	/* Incremental consumption is a property of a kernel buffer ring. */
	if (r->access & ASYNCPOOL_ACCESS_INCREMENTAL)
		return -EOPNOTSUPP;
	return 0;
}

static void memory_unregister(struct asyncpool_proactor *p, struct asyncpool_region *r)
{
}

/* There are no fixed buffers or buffer rings without a ring. */
static int memory_fixed_index(const struct asyncpool_region *r, uint32_t buffer_index)
{
	return -EOPNOTSUPP;
}

static int memory_buffer_group(const struct asyncpool_region *r)
{
	return -EOPNOTSUPP;
}

static int memory_recv_lease(struct asyncpool_region *r, const struct io_uring_cqe *cqe,
			     struct asyncpool_lease *out)
{
	return -EOPNOTSUPP;
}

static const struct proactor_ops memory_ops = {
	.name = "memory",
	.register_region = memory_register,
	.unregister_region = memory_unregister,
	.fixed_index = memory_fixed_index,
	.buffer_group = memory_buffer_group,
	.recv_lease = memory_recv_lease,
};

AP_EXPORT int asyncpool_proactor_create_memory(struct asyncpool_proactor **out)
{
	if (!out)
		return -EINVAL;
	*out = NULL;
	return ap_proactor_new(&memory_ops, NULL, out);
}
