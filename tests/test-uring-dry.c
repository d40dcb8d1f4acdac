/* SPDX-License-Identifier: MIT */
/*
 * A recv ring that runs dry and refills: a multishot recv into a ring of
 * 4 buffers, 64 times as many bytes as the ring holds over TCP loopback,
 * leases released by a second thread.  The ring runs dry on every run,
 * whatever the speeds: the releaser holds its first lease until the
 * receiver has seen -ENOBUFS, which it must, since the leases it is
 * handed then hold the whole ring while the sender has more to send.
 * (After that a small delay makes the ring run dry more often; nothing
 * counts on it.)  Whenever the
 * receive ends with -ENOBUFS the receiver waits for the ring to hold a
 * buffer again (asyncpool_region_wait, or IORING_OP_FUTEX_WAIT from
 * asyncpool_region_prep_wait, in turn) and re-arms: every byte arrives
 * in order, the region's dry count equals the -ENOBUFS completions, and
 * all buffers are back at the end.
 */
#include "config.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include <asyncpool.h>
#include "uring-util.h"

#define NBUF 4
#define BS 4096
#define TOTAL ((size_t)64 * NBUF * BS)
#define UD_RECV 1
#define UD_FUTEX 2

static int tx, rx;
static struct ut_releaser rel;

static atomic_bool ran_dry;

/* Not before the ring ran dry (above); then slower than the sender. */
static void slow_release(struct asyncpool_lease *l)
{
	struct timespec delay = { 0, 200 * 1000 };

	while (!atomic_load(&ran_dry))
		sched_yield();
	nanosleep(&delay, NULL);
	asyncpool_lease_release(l);
}

/* Wait on the ring for the futex completion; its result. */
static int futex_wait_on_ring(struct io_uring *ring, struct asyncpool_region *r, int *prc)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
	struct io_uring_cqe *cqe;
	int res;

	*prc = asyncpool_region_prep_wait(r, sqe);
	if (*prc) {
		/* Hand the SQE back as a no-op. */
		io_uring_prep_nop(sqe);
		sqe->user_data = 0;
		io_uring_submit(ring);
		cqe = ut_wait(ring);
		io_uring_cqe_seen(ring, cqe);
		return 0;
	}
	sqe->user_data = UD_FUTEX;
	io_uring_submit(ring);
	cqe = ut_wait(ring);
	if (cqe->user_data != UD_FUTEX)
		bail_out("a completion %llu while waiting on the futex",
			 (unsigned long long)cqe->user_data);
	res = cqe->res;
	io_uring_cqe_seen(ring, cqe);
	return res;
}

int main(void)
{
	struct asyncpool_proactor *p, *mp;
	struct asyncpool_region *r, *rr, *mr;
	struct asyncpool_slab *s;
	struct asyncpool_region_stats st;
	struct asyncpool_lease held[NBUF];
	struct io_uring ring;
	struct io_uring_cqe *cqe;
	struct io_uring_sqe sqe;
	struct ut_sender snd;
	size_t got = 0;
	unsigned nobufs = 0, other_ends = 0, bad = 0, waited_sync = 0, waited_ring = 0;
	unsigned futex_bad = 0, lease_not_nobufs = 0;
	bool ring_wait = true;
	int group, rc, prc;

	tap_watchdog(120);     /* a guard against a hang, not a timed assertion */
	ut_ring_init(&ring, 64);
	r = ut_uring_region(&ring, &p, BS, NBUF, ASYNCPOOL_ACCESS_WRITE,
			    "register WRITE: a ring of 4 buffers");
	s = asyncpool_region_slab(r);
	is_int(asyncpool_proactor_register_slab(p, s, ASYNCPOOL_ACCESS_READ, &rr), 0,
	       "register READ");
	is_int(asyncpool_proactor_create_memory(&mp), 0, "memory proactor");
	is_int(asyncpool_proactor_register_slab(mp, s, ASYNCPOOL_ACCESS_WRITE, &mr), 0,
	       "register with the memory proactor");

	/* Bad input. */
	is_int(asyncpool_region_wait(NULL, 0), -EINVAL, "wait(NULL): -EINVAL");
	is_int(asyncpool_region_wait(rr, 0), -EINVAL, "wait on a READ region: -EINVAL");
	is_int(asyncpool_region_wait(mr, 0), -EINVAL, "wait on a memory region: -EINVAL");
	is_int(asyncpool_region_prep_wait(NULL, &sqe), -EINVAL, "prep_wait(NULL, sqe): -EINVAL");
	is_int(asyncpool_region_prep_wait(r, NULL), -EINVAL, "prep_wait(r, NULL): -EINVAL");
	is_int(asyncpool_region_prep_wait(rr, &sqe), -EINVAL, "prep_wait on READ: -EINVAL");
	is_int(asyncpool_region_prep_wait(mr, &sqe), -EINVAL, "prep_wait on memory: -EINVAL");
	is_int(asyncpool_region_wait(r, 0), 0, "a fresh ring holds buffers: wait(0) is 0");
	asyncpool_region_unref(rr);
	asyncpool_region_unref(mr);
	is_int(asyncpool_proactor_destroy(mp), 0, "memory proactor destroyed");

	group = asyncpool_region_buffer_group(r);
	if (tcp_loopback_pair(&tx, &rx))
		bail_out("no TCP loopback connection");

	ut_releaser_start(&rel, slow_release);
	ut_sender_start(&snd, tx, TOTAL);
	ut_arm_recv(&ring, rx, group, UD_RECV);
	while (got < TOTAL && !bad) {
		struct asyncpool_lease l;
		bool more;

		cqe = ut_wait(&ring);
		more = cqe->flags & IORING_CQE_F_MORE;
		rc = ut_recv_data(r, cqe, &l, &got, &bad);
		if (rc == 1) {
			ut_hand_over(&rel, &l);
		} else if (rc == 0) {
			nobufs++;
			atomic_store(&ran_dry, true);
			if (asyncpool_region_recv_lease(r, cqe, &l) != -ENOBUFS ||
			    asyncpool_lease_held(&l))
				lease_not_nobufs++;
		}
		io_uring_cqe_seen(&ring, cqe);
		if (!more && got < TOTAL) {
			if (cqe->res != -ENOBUFS) {
				other_ends++;
			} else if (ring_wait && (waited_ring + waited_sync) % 2 == 0) {
				rc = futex_wait_on_ring(&ring, r, &prc);
				if (prc == -EOPNOTSUPP) {
					ring_wait = false;
					rc = asyncpool_region_wait(r, -1);
					waited_sync++;
				} else {
					if (prc || rc == -EAGAIN)
						rc = prc;
					waited_ring++;
				}
				if (rc)
					futex_bad++;
			} else {
				if (asyncpool_region_wait(r, -1) != 0)
					futex_bad++;
				waited_sync++;
			}
			/* Buffers are there now: the re-armed receive goes on. */
			ut_arm_recv(&ring, rx, group, UD_RECV);
		}
	}
	ut_sender_join(&snd);
	ut_wait_released(&rel);
	diag("%zu bytes, %u -ENOBUFS, %u waits with region_wait, %u on the ring, %u other ends",
	     got, nobufs, waited_sync, waited_ring, other_ends);
	is_int(got, TOTAL, "%zu bytes received (64 times the ring)", TOTAL);
	is_int(bad, 0, "every byte matches the pattern, in order");
	ok(nobufs > 0, "the ring ran dry (%u times)", nobufs);
	is_int(lease_not_nobufs, 0, "recv_lease of a -ENOBUFS completion: -ENOBUFS, no lease");
	is_int(futex_bad, 0, "every wait returned 0 (or -EAGAIN on the ring)");
	is_int(other_ends, 0, "no receive ended otherwise");
	memset(&st, 0, sizeof(st));
	st.size = sizeof(st);
	is_int(asyncpool_region_stats(r, &st), 0, "region_stats");
	is_int(st.dry, nobufs, "dry counts every -ENOBUFS completion");
	is_int(st.kernel_held, NBUF, "all 4 buffers back in the ring");
	is_int(st.leased, 0, "no leases out");

	/* Hold all 4 buffers: the ring is empty, waits time out. */
	{
		unsigned n = 0;
		bool armed = true;

		for (int k = 0; k < NBUF; k++) {
			unsigned char byte = (unsigned char)k;

			if (send(tx, &byte, 1, MSG_NOSIGNAL) != 1)
				bail_out("send: %s", strerror(errno));
			cqe = ut_wait(&ring);
			if (asyncpool_region_recv_lease(r, cqe, &held[n]) == 0)
				n++;
			armed = cqe->flags & IORING_CQE_F_MORE;
			io_uring_cqe_seen(&ring, cqe);
			if (!armed && k + 1 < NBUF)
				ut_arm_recv(&ring, rx, group, UD_RECV);
		}
		is_int(n, NBUF, "4 one-byte messages: 4 leases");
		is_int(asyncpool_region_wait(r, 0), -ETIMEDOUT, "empty ring: wait(0) -ETIMEDOUT");
		is_int(asyncpool_region_wait(r, 1000000), -ETIMEDOUT,
		       "empty ring: wait(1 ms) -ETIMEDOUT");
		asyncpool_lease_release(&held[0]);
		is_int(asyncpool_region_wait(r, 0), 0, "one released: wait(0) is 0");
		rc = futex_wait_on_ring(&ring, r, &prc);
		if (prc == -EOPNOTSUPP)
			skip(1, "no IORING_OP_FUTEX_WAIT");
		else
			is_int(rc, -EAGAIN, "prep_wait with buffers there: -EAGAIN at once");
		for (unsigned i = 1; i < n; i++)
			asyncpool_lease_release(&held[i]);
	}
	memset(&st, 0, sizeof(st));
	st.size = sizeof(st);
	asyncpool_region_stats(r, &st);
	is_int(st.kernel_held, NBUF, "all 4 buffers back in the ring at the end");

	ut_releaser_stop(&rel);
	close(tx);
	close(rx);
	asyncpool_region_unref(r);
	is_int(asyncpool_proactor_destroy(p), 0, "proactor destroyed");
	io_uring_queue_exit(&ring);
	return done_testing();
}
