/* SPDX-License-Identifier: MIT */
/* Shared by the io_uring tests: a ring or a clean skip, TCP over loopback. */
#ifndef ASYNCPOOL_URING_UTIL_H
#define ASYNCPOOL_URING_UTIL_H

#include <arpa/inet.h>
#include <errno.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tap.h"

/* A ring, or skip the whole test where io_uring is refused. */
static inline void ut_ring_init(struct io_uring *ring, unsigned entries)
{
	int rc = io_uring_queue_init(entries, ring, 0);

	if (rc == -EPERM || rc == -ENOSYS)
		skip_all("io_uring is refused here: io_uring_queue_init: %s", strerror(-rc));
	if (rc)
		bail_out("io_uring_queue_init: %s", strerror(-rc));
}

/* A connected TCP pair over 127.0.0.1: *tx connected, *rx accepted. */
static inline int ut_tcp_pair(int *tx, int *rx)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);
	int l, one = 1;

	*tx = *rx = -1;
	l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (l < 0)
		return -errno;
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 1) ||
	    getsockname(l, (struct sockaddr *)&a, &len))
		goto fail;
	*tx = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (*tx < 0 || connect(*tx, (struct sockaddr *)&a, sizeof(a)))
		goto fail;
	*rx = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	if (*rx < 0)
		goto fail;
	setsockopt(*tx, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	close(l);
	return 0;
fail:
	one = -errno;
	close(l);
	if (*tx >= 0)
		close(*tx);
	*tx = -1;
	return one ? one : -EIO;
}

/* Submit what is queued and wait for one completion; bail out on error. */
static inline struct io_uring_cqe *ut_wait(struct io_uring *ring)
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

/* The byte at position pos of a test stream. */
static inline unsigned char ut_pattern(size_t pos)
{
	return (unsigned char)((pos * 131u) ^ (pos >> 12) ^ (pos >> 20));
}

#endif
