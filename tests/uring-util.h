/* SPDX-License-Identifier: MIT */
/* Helpers of the io_uring tests (tests/uring-util.c, in tests/libtestutil.la
 * when liburing is there): a ring or a clean skip, TCP over loopback. */
#ifndef ASYNCPOOL_URING_UTIL_H
#define ASYNCPOOL_URING_UTIL_H

#include <stddef.h>
#include <sys/types.h>

#include <liburing.h>

#include "tap.h"
#include "testutil.h"
#include "../tools/net.h"

/* A ring, or skip the whole test where io_uring is refused. */
void ut_ring_init(struct io_uring *ring, unsigned entries);

/* Submit what is queued and wait for one completion; bail out on error. */
struct io_uring_cqe *ut_wait(struct io_uring *ring);

/* One IORING_OP_WRITE_FIXED of len bytes at buf (in fixed buffer idx) to
 * fd at off, waited for: its result (bytes written or -errno). */
int ut_write_fixed(struct io_uring *ring, int fd, void *buf, unsigned len, off_t off, int idx);

/* The byte at position pos of a test stream (inline: it runs per byte). */
static inline unsigned char ut_pattern(size_t pos)
{
	return (unsigned char)((pos * 131u) ^ (pos >> 12) ^ (pos >> 20));
}

#endif
