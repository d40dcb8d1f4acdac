/* SPDX-License-Identifier: MIT */
/*
 * The public calls that no test made (issue 54, kind 2; the script
 * tests/test-symbols-called.sh finds the next one):
 *   - asyncpool_channel_prep_wait(): its errors (-EINVAL for a NULL
 *     end, a sending end, a NULL SQE), and its rule that a wait
 *     prepared while something is queued completes at once with
 *     -EAGAIN (a value the wake word cannot hold), while one prepared
 *     on an empty channel completes with 0 on the next send;
 *   - asyncpool_shared_open_named_proactor(): -EINVAL and *out NULL for
 *     a NULL name; a name opens the pool with its buffers on the given
 *     proactor.
 * tests/mutants/chan-prep-wait-queued-ignored, open-named-proactor-dropped.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#ifdef HAVE_LIBURING
#include <liburing.h>
#endif

#include <asyncpool.h>
#include "tap.h"
#include "testutil.h"

#define N  4
#define BS 64

static struct asyncpool_shared *chan_pool(void)
{
	struct asyncpool_shared_options o;
	struct asyncpool_shared *sp;

	shared_options(&o, BS, N);
	o.channels = 1;
	o.channel_capacity = N;
	if (asyncpool_shared_create(&o, &sp))
		bail_out("shared_create");
	return sp;
}

#ifdef HAVE_LIBURING
/* Submit sqe's copy; its completion's res, or 1 if none came within 1 s. */
static int complete(struct io_uring *ring, const struct io_uring_sqe *sqe, bool submit)
{
	struct __kernel_timespec ts = { .tv_sec = 1 };
	struct io_uring_cqe *cqe;
	int res;

	if (submit) {
		*io_uring_get_sqe(ring) = *sqe;
		if (io_uring_submit(ring) != 1)
			bail_out("submit");
	}
	if (io_uring_wait_cqe_timeout(ring, &cqe, &ts))
		return 1;
	res = cqe->res;
	io_uring_cqe_seen(ring, cqe);
	return res;
}
#endif

static void test_channel_prep_wait(void)
{
	struct asyncpool_shared *sp = chan_pool();
	struct asyncpool *pool = asyncpool_shared_pool(sp);
	struct asyncpool_channel *tx, *rx;
	struct asyncpool_lease l;
	int rc;
#ifdef HAVE_LIBURING
	struct io_uring_sqe sqe;
	struct io_uring ring;
#else
	char sqe[64];
#endif

	if (asyncpool_channel_open(pool, 0, ASYNCPOOL_CHANNEL_SEND, &tx) ||
	    asyncpool_channel_open(pool, 0, ASYNCPOOL_CHANNEL_RECV, &rx))
		bail_out("channel_open");
	is_int(asyncpool_channel_prep_wait(NULL, (void *)&sqe), -EINVAL, "channel_prep_wait: NULL end: -EINVAL");
	is_int(asyncpool_channel_prep_wait(tx, (void *)&sqe), -EINVAL,
	       "channel_prep_wait: a sending end: -EINVAL");
	is_int(asyncpool_channel_prep_wait(rx, NULL), -EINVAL, "channel_prep_wait: NULL sqe: -EINVAL");
#ifdef HAVE_LIBURING
	if (io_uring_queue_init(4, &ring, 0)) {
		skip(4, "no io_uring here");
		goto out;
	}
	/* something queued: completes at once with -EAGAIN */
	if (asyncpool_acquire(pool, &l) || asyncpool_channel_send(tx, &l))
		bail_out("send");
	rc = asyncpool_channel_prep_wait(rx, &sqe);
	if (rc == -EOPNOTSUPP) {
		skip(4, "the kernel has no IORING_OP_FUTEX_WAIT (Linux 6.7)");
		io_uring_queue_exit(&ring);
		goto out;
	}
	is_int(rc, 0, "channel_prep_wait with one queued: 0");
	is_int(complete(&ring, &sqe, true), -EAGAIN,
	       "channel_prep_wait with one queued: completes at once with -EAGAIN");
	if (asyncpool_channel_recv(rx, &l))
		bail_out("recv");
	asyncpool_lease_release(&l);
	/* nothing queued: waits, and the next send completes it with 0 */
	is_int(asyncpool_channel_prep_wait(rx, &sqe), 0, "channel_prep_wait, empty: 0");
	*io_uring_get_sqe(&ring) = sqe;
	if (io_uring_submit(&ring) != 1)
		bail_out("submit");
	if (asyncpool_acquire(pool, &l) || asyncpool_channel_send(tx, &l))
		bail_out("send");
	is_int(complete(&ring, NULL, false), 0, "channel_prep_wait, empty: the send completes it with 0");
	io_uring_queue_exit(&ring);
#else
	(void)rc;
	(void)l;
	skip(4, "built without liburing: channel_prep_wait is -EOPNOTSUPP");
#endif
out:
	while (asyncpool_channel_recv(rx, &l) == 0)
		asyncpool_lease_release(&l);
	asyncpool_channel_close(tx);
	asyncpool_channel_close(rx);
	is_int(asyncpool_available(pool), N, "channel_prep_wait: every buffer back");
	asyncpool_shared_close(sp);
}

static void test_open_named_proactor(void)
{
	struct asyncpool_shared_options o;
	struct asyncpool_shared *creator, *sp = (void *)1;
	struct asyncpool_proactor *p;
	struct asyncpool_lease l;
	char name[128];

	if (asyncpool_proactor_create_memory(&p))
		bail_out("proactor");
	is_int(asyncpool_shared_open_named_proactor(NULL, p, &sp), -EINVAL,
	       "shared_open_named_proactor(NULL name): -EINVAL");
	ok(sp == NULL, "shared_open_named_proactor(NULL name): *out NULL");
	test_shm_name(name, sizeof(name), "named-proactor");
	shared_options(&o, BS, N);
	o.name = name;
	if (asyncpool_shared_create(&o, &creator))
		bail_out("shared_create named");
	is_int(asyncpool_shared_open_named_proactor(name, p, &sp), 0, "shared_open_named_proactor: opens");
	ok(sp && asyncpool_region_proactor(asyncpool_shared_region(sp)) == p,
	   "shared_open_named_proactor: its buffers are on the given proactor");
	is_int(asyncpool_acquire(asyncpool_shared_pool(sp), &l), 0,
	       "shared_open_named_proactor: it hands out a lease");
	asyncpool_lease_release(&l);
	asyncpool_shared_close(sp);
	asyncpool_shared_close(creator);
	asyncpool_shm_unlink_named(name);
	is_int(asyncpool_proactor_destroy(p), 0, "the proactor is free after the close");
}

int main(void)
{
	plan(14);
	tap_watchdog(60);
	test_channel_prep_wait();
	test_open_named_proactor();
	return done_testing();
}
