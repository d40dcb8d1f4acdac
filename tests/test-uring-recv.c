/* SPDX-License-Identifier: MIT */
/*
 * Multishot recv into a provided-buffer ring of 8 buffers: 1 MiB over
 * TCP loopback, leases released from a second thread (and some from
 * this one), every byte checked, no buffer handed out twice, and all 8
 * buffers back in the ring at the end.
 */
#include "config.h"

#include <stdatomic.h>
#include <stdlib.h>

#include <asyncpool.h>
#include "uring-util.h"

#define NBUF 8
#define BS 4096
/* 1 MiB; ASYNCPOOL_RECV_MIB=N (make check-long) sends N MiB. */
static size_t TOTAL = 1u << 20;

static int tx, rx;

static struct ut_releaser rel;
static atomic_int out[NBUF];    /* 1 while a bid is leased to us */
static atomic_int twice, released_by_thread;

static void release(struct asyncpool_lease *l)
{
	/* Clear our mark first: once released, the kernel may reuse it. */
	atomic_store(&out[l->buffer_index], 0);
	asyncpool_lease_release(l);
}

static void release_in_thread(struct asyncpool_lease *l)
{
	release(l);
	atomic_fetch_add(&released_by_thread, 1);
}

int main(void)
{
	struct asyncpool_proactor *p;
	struct asyncpool_region *r;
	struct asyncpool_lease held[NBUF + 1];
	struct io_uring ring;
	struct io_uring_cqe *cqe;
	struct ut_sender snd;
	size_t got = 0;
	unsigned leases = 0, rearms = 0, nobufs = 0, bad = 0, seen_bids = 0;
	int group, rc;
	bool armed = true;

	if (getenv("ASYNCPOOL_RECV_MIB")) {
		unsigned long n = strtoul(getenv("ASYNCPOOL_RECV_MIB"), NULL, 10);

		if (n > 1 && n < 100000)
			TOTAL = (size_t)n << 20;
	}
	/* A guard against a hang, not a timed assertion. */
	tap_watchdog(120 + (unsigned)(TOTAL >> 20));
	ut_ring_init(&ring, 64);
	r = ut_uring_region(&ring, &p, BS, NBUF, ASYNCPOOL_ACCESS_WRITE,
			    "register WRITE: a ring of 8 buffers");
	group = asyncpool_region_buffer_group(r);
	ok(group >= 0, "buffer group %d", group);
	if (tcp_loopback_pair(&tx, &rx))
		bail_out("no TCP loopback connection");

	ut_releaser_start(&rel, release_in_thread);
	ut_sender_start(&snd, tx, TOTAL);
	ut_arm_recv(&ring, rx, group, 0);
	while (got < TOTAL && !bad) {
		struct asyncpool_lease l;
		bool more;

		cqe = ut_wait(&ring);
		more = armed = cqe->flags & IORING_CQE_F_MORE;
		rc = ut_recv_data(r, cqe, &l, &got, &bad);
		if (rc == 1) {
			if (atomic_exchange(&out[l.buffer_index], 1))
				atomic_fetch_add(&twice, 1);
			seen_bids |= 1u << l.buffer_index;
			/* Two of three go to the other thread. */
			if (leases++ % 3)
				ut_hand_over(&rel, &l);
			else
				release(&l);
		} else if (rc == 0) {
			nobufs++;
		}
		io_uring_cqe_seen(&ring, cqe);
		if (!more && got < TOTAL) {
			/* Out of buffers: let the other thread give them back. */
			ut_wait_released(&rel);
			ut_arm_recv(&ring, rx, group, 0);
			armed = true;
			rearms++;
		}
	}
	ut_sender_join(&snd);
	ut_wait_released(&rel);
	diag("%u leases, %u multishot re-arms, %u -ENOBUFS, %d released by the thread",
	     leases, rearms, nobufs, atomic_load(&released_by_thread));
	is_int(got, TOTAL, "%zu MiB received", TOTAL >> 20);
	is_int(bad, 0, "every byte matches the pattern");
	is_int(atomic_load(&twice), 0, "no buffer handed out twice");
	ok(atomic_load(&released_by_thread) > 0, "leases were released by a second thread");
	is_int(seen_bids, (1u << NBUF) - 1, "all 8 buffers were used");

	/* All 8 back: 8 one-byte messages take 8 distinct buffers, a 9th finds none. */
	{
		unsigned bids = 0, n = 0;

		for (int k = 0; k < NBUF + 1; k++) {
			unsigned char byte = (unsigned char)k;

			if (send(tx, &byte, 1, MSG_NOSIGNAL) != 1)
				bail_out("send: %s", strerror(errno));
			if (!armed) {
				ut_arm_recv(&ring, rx, group, 0);
				armed = true;
			}
			cqe = ut_wait(&ring);
			if (k < NBUF) {
				if (asyncpool_region_recv_lease(r, cqe, &held[n]) == 0 &&
				    held[n].span.length == 1 &&
				    *(unsigned char *)asyncpool_span_ptr(held[n].span) == byte) {
					bids |= 1u << held[n].buffer_index;
					n++;
				}
			} else {
				is_int(cqe->res, -ENOBUFS, "a 9th message finds the ring empty");
			}
			armed = cqe->flags & IORING_CQE_F_MORE;
			io_uring_cqe_seen(&ring, cqe);
		}
		is_int(n, NBUF, "8 one-byte messages: 8 leases");
		is_int(bids, (1u << NBUF) - 1, "in 8 distinct buffers: all were back in the ring");

		/* Release them from the other thread; the 9th byte then arrives. */
		for (unsigned i = 0; i < n; i++)
			ut_hand_over(&rel, &held[i]);
		ut_wait_released(&rel);
		ut_arm_recv(&ring, rx, group, 0);
		cqe = ut_wait(&ring);
		rc = asyncpool_region_recv_lease(r, cqe, &held[0]);
		is_int(rc, 0, "after the releases the 9th byte gets a buffer");
		ok(rc == 0 && held[0].span.length == 1 &&
		   *(unsigned char *)asyncpool_span_ptr(held[0].span) == NBUF, "and it is the 9th byte");
		armed = cqe->flags & IORING_CQE_F_MORE;
		io_uring_cqe_seen(&ring, cqe);
		if (!armed)
			ut_arm_recv(&ring, rx, group, 0);
		asyncpool_lease_release(&held[0]);
		asyncpool_lease_release(&held[0]);
	}

	ut_releaser_stop(&rel);

	/* EOF ends the multishot recv; it carries no buffer. */
	close(tx);
	cqe = ut_wait(&ring);
	is_int(cqe->res, 0, "EOF after the sender closes");
	{
		struct asyncpool_lease l;

		is_int(asyncpool_region_recv_lease(r, cqe, &l), -EINVAL, "EOF completion: no lease");
	}
	io_uring_cqe_seen(&ring, cqe);
	close(rx);
	asyncpool_region_unref(r);
	is_int(asyncpool_proactor_destroy(p), 0, "destroy: every lease gave its region back");
	io_uring_queue_exit(&ring);
	return done_testing();
}
