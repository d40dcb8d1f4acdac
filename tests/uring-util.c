/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "uring-util.h"

void ut_ring_init(struct io_uring *ring, unsigned entries)
{
	int rc = io_uring_queue_init(entries, ring, 0);

	if (rc == -EPERM || rc == -ENOSYS)
		skip_all("io_uring is refused here: io_uring_queue_init: %s", strerror(-rc));
	if (rc)
		bail_out("io_uring_queue_init: %s", strerror(-rc));
}

struct io_uring_cqe *ut_wait(struct io_uring *ring)
{
	struct io_uring_cqe *cqe;
	int rc;

	do
		rc = io_uring_submit_and_wait(ring, 1);
	while (rc == -EINTR);
	if (rc < 0)
		bail_out("io_uring_submit_and_wait: %s", strerror(-rc));
	do
		rc = io_uring_wait_cqe(ring, &cqe);
	while (rc == -EINTR);
	if (rc)
		bail_out("io_uring_wait_cqe: %s", strerror(-rc));
	return cqe;
}
