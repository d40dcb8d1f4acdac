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

/* No ring: no fixed buffers, no buffer rings, no receive completions
 * (the ops it leaves out answer -EOPNOTSUPP). */
static const struct proactor_ops memory_ops = {
	.register_region = memory_register,
	.unregister_region = memory_unregister,
};

AP_EXPORT int asyncpool_proactor_create_memory(struct asyncpool_proactor **out)
{
	if (!out)
		return -EINVAL;
	*out = NULL;
	return ap_proactor_new(&memory_ops, NULL, out);
}
