/* SPDX-License-Identifier: MIT */
/*
 * Zero-copy send from a pool: 10,000 IORING_OP_SEND_ZC of patterned
 * fixed buffers over TCP loopback.  Each lease is released on its
 * notification completion, exactly once; the receiver checks every byte;
 * the pool is full at the end.
 */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>

#include <asyncpool.h>
#include "uring-util.h"

#define NSEND 10000u
#define BS 4096u
#define NBUF 32u
#define BATCH 16u

static int tx, rx;
static size_t rx_bytes, rx_bad;

static void *receiver(void *arg)
{
	static unsigned char buf[65536];

	while (rx_bytes < (size_t)NSEND * BS) {
		ssize_t n = recv(rx, buf, sizeof(buf), 0);

		if (n <= 0)
			break;
		for (ssize_t j = 0; j < n; j++)
			if (buf[j] != ut_pattern(rx_bytes + (size_t)j))
				rx_bad++;
		rx_bytes += (size_t)n;
	}
	return NULL;
}

int main(void)
{
	static unsigned char released[NSEND], results[NSEND];
	struct asyncpool_lease lease_of[NBUF];
	struct asyncpool_stats st = { .size = sizeof(st) };
	struct asyncpool_proactor *p;
	struct asyncpool_region *r;
	struct asyncpool *pool;
	struct io_uring ring;
	struct io_uring_probe *probe;
	pthread_t t;
	unsigned queued = 0, chain = 0, notifs = 0, once = 1, short_sends = 0, no_notif = 0;

	/* A guard against a hang, not a timed assertion. */
	tap_watchdog(120);
	ut_ring_init(&ring, 64);
	probe = io_uring_get_probe_ring(&ring);
	if (!probe || !io_uring_opcode_supported(probe, IORING_OP_SEND_ZC))
		skip_all("this kernel has no IORING_OP_SEND_ZC");
	io_uring_free_probe(probe);

	r = ut_uring_region(&ring, &p, BS, NBUF, ASYNCPOOL_ACCESS_READ, "register READ: fixed buffers");
	is_int(asyncpool_create(r, &pool), 0, "pool over the region");
	asyncpool_region_unref(r);
	if (tcp_loopback_pair(&tx, &rx))
		bail_out("no TCP loopback connection");
	pthread_create(&t, NULL, receiver, NULL);

	while (queued < NSEND || chain || notifs < queued) {
		struct io_uring_cqe *cqe;
		unsigned head, n = 0;

		/*
		 * Sends on one stream socket run in order only when linked:
		 * one chain of up to BATCH at a time.
		 */
		if (!chain) {
			struct io_uring_sqe *sqe = NULL;

			while (chain < BATCH && queued < NSEND) {
				struct asyncpool_lease l;
				unsigned char *d;

				if (asyncpool_acquire(pool, &l))
					break;
				d = asyncpool_span_ptr(l.span);
				for (size_t j = 0; j < BS; j++)
					d[j] = ut_pattern((size_t)queued * BS + j);
				lease_of[l.buffer_index] = l;
				if (sqe)
					sqe->flags |= IOSQE_IO_LINK;
				sqe = io_uring_get_sqe(&ring);
				io_uring_prep_send_zc_fixed(sqe, tx, d, BS, MSG_WAITALL, 0,
							    (unsigned)asyncpool_region_fixed_index(r, l.buffer_index));
				sqe->user_data = (uint64_t)queued << 32 | l.buffer_index;
				queued++;
				chain++;
			}
		}
		cqe = ut_wait(&ring);
		io_uring_for_each_cqe(&ring, head, cqe) {
			unsigned k = (unsigned)(cqe->user_data >> 32);
			unsigned bi = (unsigned)(cqe->user_data & 0xffffffffu);

			n++;
			if (cqe->flags & IORING_CQE_F_NOTIF) {
				/* The kernel is done with the buffer. */
				released[k]++;
				notifs++;
				asyncpool_lease_release(&lease_of[bi]);
				continue;
			}
			chain--;
			results[k]++;
			if (cqe->res != (int)BS) {
				diag("send %u: %d", k, cqe->res);
				short_sends++;
			}
			if (!(cqe->flags & IORING_CQE_F_MORE)) {
				/* No notification will come: give it back now. */
				no_notif++;
				released[k]++;
				notifs++;
				asyncpool_lease_release(&lease_of[bi]);
			}
		}
		io_uring_cq_advance(&ring, n);
		if (short_sends)
			break;
	}
	shutdown(tx, SHUT_WR);
	pthread_join(t, NULL);

	for (unsigned k = 0; k < NSEND; k++)
		if (released[k] != 1 || results[k] != 1)
			once = 0;
	is_int(queued, NSEND, "10,000 zero-copy sends queued");
	is_int(short_sends, 0, "every send completed in full");
	is_int(no_notif, 0, "every send had a notification");
	ok(once, "every lease released exactly once, after its notification");
	is_int(rx_bytes, (size_t)NSEND * BS, "the receiver got every byte");
	is_int(rx_bad, 0, "every byte matches its pattern");
	is_int(asyncpool_available(pool), NBUF, "the pool is full at the end");
	is_int(asyncpool_stats(pool, &st), 0, "stats");
	is_int(st.bad_releases, 0, "no release of a buffer that was not leased");
	is_int(asyncpool_destroy(pool), 0, "destroy the pool");
	is_int(asyncpool_proactor_destroy(p), 0, "destroy the proactor");
	close(tx);
	close(rx);
	io_uring_queue_exit(&ring);
	return done_testing();
}
