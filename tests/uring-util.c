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

int ut_write_fixed(struct io_uring *ring, int fd, void *buf, unsigned len, off_t off, int idx)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
	struct io_uring_cqe *cqe;
	int res;

	io_uring_prep_write_fixed(sqe, fd, buf, len, off, idx);
	cqe = ut_wait(ring);
	res = cqe->res;
	io_uring_cqe_seen(ring, cqe);
	return res;
}
