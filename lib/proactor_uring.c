/* SPDX-License-Identifier: MIT */
/*
 * The io_uring proactor.  Built without liburing, it refuses with
 * -EOPNOTSUPP so that the ABI is the same in every build.
 */
#include "internal.h"

#ifndef HAVE_LIBURING
AP_EXPORT int asyncpool_proactor_create_uring(struct io_uring *ring, uint32_t flags,
					      struct asyncpool_proactor **out)
{
	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!ring || flags)
		return -EINVAL;
	return -EOPNOTSUPP;
}
#else
AP_EXPORT int asyncpool_proactor_create_uring(struct io_uring *ring, uint32_t flags,
					      struct asyncpool_proactor **out)
{
	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!ring || flags)
		return -EINVAL;
	return -EOPNOTSUPP;	/* the io_uring backend is not written yet */
}
#endif
