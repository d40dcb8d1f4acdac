/* SPDX-License-Identifier: MIT */
/* Helpers of the io_uring tests (tests/uring-util.c, in tests/libtestutil.la
 * when liburing is there): a ring or a clean skip, TCP over loopback. */
#ifndef ASYNCPOOL_URING_UTIL_H
#define ASYNCPOOL_URING_UTIL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
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

/* A uring proactor on ring (*p) and a region of count x buffer_size on a
 * new slab, registered for access: three test points, "create_uring",
 * "slab of COUNT x N KiB" and what.  The region holds the slab.  (Inline:
 * its test points count in the calling test's TAP stream.) */
static inline struct asyncpool_region *ut_uring_region(struct io_uring *ring,
							struct asyncpool_proactor **p,
							size_t buffer_size, uint32_t count,
							uint32_t access, const char *what)
{
	struct asyncpool_slab_options o;
	struct asyncpool_slab *s;
	struct asyncpool_region *r = NULL;

	slab_options(&o, buffer_size, count);
	is_int(asyncpool_proactor_create_uring(ring, 0, p), 0, "create_uring");
	is_int(asyncpool_slab_create(&o, &s), 0, "slab of %u x %zu KiB", count, buffer_size >> 10);
	is_int(asyncpool_proactor_register_slab(*p, s, access, &r), 0, "%s", what);
	asyncpool_slab_unref(s);
	return r;
}

/* A completion of a multishot receive into r.  Data: its lease in *l, the
 * bytes checked against ut_pattern() from stream position *got (mismatches
 * added to *bad, *got moved past them), 1.  The ring ran dry (-ENOBUFS):
 * 0.  Anything else, or no lease: a diag, *bad + 1, -1. */
int ut_recv_data(struct asyncpool_region *r, const struct io_uring_cqe *cqe,
		 struct asyncpool_lease *l, size_t *got, unsigned *bad);

/* Queue and submit a multishot receive on fd into buffer group group. */
void ut_arm_recv(struct io_uring *ring, int fd, int group, uint64_t user_data);

/* A thread that sends total bytes of ut_pattern() to fd in odd-sized
 * writes (a receive sees chunks unrelated to its buffers). */
struct ut_sender {
	int fd;
	size_t total;
	pthread_t thread;
};

void ut_sender_start(struct ut_sender *s, int fd, size_t total);
void ut_sender_join(struct ut_sender *s);

/* A thread that releases the leases handed to it, in order, each with
 * release().  A lease stays counted until it is released, so that
 * ut_wait_released() returns only once its buffer is back. */
#define UT_RELEASER_MAX 64
struct ut_releaser {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct asyncpool_lease q[UT_RELEASER_MAX];
	unsigned head, count;
	bool stop;
	void (*release)(struct asyncpool_lease *l);
	pthread_t thread;
};

void ut_releaser_start(struct ut_releaser *rel, void (*release)(struct asyncpool_lease *l));
void ut_hand_over(struct ut_releaser *rel, const struct asyncpool_lease *l);
void ut_wait_released(struct ut_releaser *rel);
/* Release what is still queued, then end the thread. */
void ut_releaser_stop(struct ut_releaser *rel);

/* The byte at position pos of a test stream (inline: it runs per byte). */
static inline unsigned char ut_pattern(size_t pos)
{
	return (unsigned char)((pos * 131u) ^ (pos >> 12) ^ (pos >> 20));
}

#endif
