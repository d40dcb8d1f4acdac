/* SPDX-License-Identifier: MIT */
/*
 * Multishot recv into a provided-buffer ring of 8 buffers: 1 MiB over
 * TCP loopback, leases released from a second thread (and some from
 * this one), every byte checked, no buffer handed out twice, and all 8
 * buffers back in the ring at the end.
 */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include <asyncpool.h>
#include "uring-util.h"

#define NBUF 8
#define BS 4096
/* 1 MiB; ASYNCPOOL_RECV_MIB=N (make check-long) sends N MiB. */
static size_t TOTAL = 1u << 20;

static int tx, rx;

/* Leases for the release thread. */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct asyncpool_lease q[NBUF];
	unsigned head, count;
	bool stop;
} rel = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };

static atomic_int out[NBUF];    /* 1 while a bid is leased to us */
static atomic_int twice, released_by_thread;

static void release(struct asyncpool_lease *l)
{
	/* Clear our mark first: once released, the kernel may reuse it. */
	atomic_store(&out[l->buffer_index], 0);
	asyncpool_lease_release(l);
}

static void *releaser(void *arg)
{
	pthread_mutex_lock(&rel.lock);
	for (;;) {
		struct asyncpool_lease l;

		while (!rel.count && !rel.stop)
			pthread_cond_wait(&rel.cond, &rel.lock);
		if (!rel.count)
			break;
		/* It stays counted until released, so that wait_released()
		 * returns only once the buffer is back in the ring. */
		l = rel.q[rel.head];
		pthread_mutex_unlock(&rel.lock);
		release(&l);
		atomic_fetch_add(&released_by_thread, 1);
		pthread_mutex_lock(&rel.lock);
		rel.head = (rel.head + 1) % NBUF;
		rel.count--;
		pthread_cond_broadcast(&rel.cond);
	}
	pthread_mutex_unlock(&rel.lock);
	return NULL;
}

static void hand_over(const struct asyncpool_lease *l)
{
	pthread_mutex_lock(&rel.lock);
	rel.q[(rel.head + rel.count) % NBUF] = *l;
	rel.count++;
	pthread_cond_broadcast(&rel.cond);
	pthread_mutex_unlock(&rel.lock);
}

static void wait_released(void)
{
	pthread_mutex_lock(&rel.lock);
	while (rel.count)
		pthread_cond_wait(&rel.cond, &rel.lock);
	pthread_mutex_unlock(&rel.lock);
}

static void *sender(void *arg)
{
	static unsigned char buf[3000];
	size_t pos = 0;

	/* Odd-sized writes: recv sees chunks unrelated to the buffers. */
	while (pos < TOTAL) {
		size_t n = TOTAL - pos < sizeof(buf) ? TOTAL - pos : sizeof(buf);
		ssize_t w;

		for (size_t j = 0; j < n; j++)
			buf[j] = ut_pattern(pos + j);
		w = send(tx, buf, n, MSG_NOSIGNAL);
		if (w <= 0)
			break;
		pos += (size_t)w;
	}
	return NULL;
}

static void arm(struct io_uring *ring, int group)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);

	io_uring_prep_recv_multishot(sqe, rx, NULL, 0, 0);
	sqe->flags |= IOSQE_BUFFER_SELECT;
	sqe->buf_group = (uint16_t)group;
	io_uring_submit(ring);
}

int main(void)
{
	struct asyncpool_slab_options o;
	struct asyncpool_proactor *p;
	struct asyncpool_region *r;
	struct asyncpool_slab *s;
	struct asyncpool_lease held[NBUF + 1];
	struct io_uring ring;
	struct io_uring_cqe *cqe;
	pthread_t ts, tr;
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
	alarm(120 + (unsigned)(TOTAL >> 20));
	ut_ring_init(&ring, 64);
	slab_options(&o, BS, NBUF);
	is_int(asyncpool_proactor_create_uring(&ring, 0, &p), 0, "create_uring");
	is_int(asyncpool_slab_create(&o, &s), 0, "slab of 8 x 4 KiB");
	is_int(asyncpool_proactor_register_slab(p, s, ASYNCPOOL_ACCESS_WRITE, &r), 0,
	       "register WRITE: a ring of 8 buffers");
	asyncpool_slab_unref(s);
	group = asyncpool_region_buffer_group(r);
	ok(group >= 0, "buffer group %d", group);
	if (tcp_loopback_pair(&tx, &rx))
		bail_out("no TCP loopback connection");

	pthread_create(&tr, NULL, releaser, NULL);
	pthread_create(&ts, NULL, sender, NULL);
	arm(&ring, group);
	while (got < TOTAL && !bad) {
		bool more;

		cqe = ut_wait(&ring);
		more = armed = cqe->flags & IORING_CQE_F_MORE;
		if (cqe->res > 0) {
			struct asyncpool_lease l;
			const unsigned char *d;

			rc = asyncpool_region_recv_lease(r, cqe, &l);
			if (rc) {
				diag("recv_lease: %s", strerror(-rc));
				bad++;
				break;
			}
			if (atomic_exchange(&out[l.buffer_index], 1))
				atomic_fetch_add(&twice, 1);
			seen_bids |= 1u << l.buffer_index;
			d = asyncpool_span_ptr(l.span);
			for (size_t j = 0; j < l.span.length; j++)
				if (d[j] != ut_pattern(got + j))
					bad++;
			got += l.span.length;
			/* Two of three go to the other thread. */
			if (leases++ % 3)
				hand_over(&l);
			else
				release(&l);
		} else if (cqe->res == -ENOBUFS) {
			nobufs++;
		} else {
			diag("recv completion: %d", cqe->res);
			bad++;
		}
		io_uring_cqe_seen(&ring, cqe);
		if (!more && got < TOTAL) {
			/* Out of buffers: let the other thread give them back. */
			wait_released();
			arm(&ring, group);
			armed = true;
			rearms++;
		}
	}
	pthread_join(ts, NULL);
	wait_released();
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
				arm(&ring, group);
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
			hand_over(&held[i]);
		wait_released();
		arm(&ring, group);
		cqe = ut_wait(&ring);
		rc = asyncpool_region_recv_lease(r, cqe, &held[0]);
		is_int(rc, 0, "after the releases the 9th byte gets a buffer");
		ok(rc == 0 && held[0].span.length == 1 &&
		   *(unsigned char *)asyncpool_span_ptr(held[0].span) == NBUF, "and it is the 9th byte");
		armed = cqe->flags & IORING_CQE_F_MORE;
		io_uring_cqe_seen(&ring, cqe);
		if (!armed)
			arm(&ring, group);
		asyncpool_lease_release(&held[0]);
		asyncpool_lease_release(&held[0]);
	}

	pthread_mutex_lock(&rel.lock);
	rel.stop = true;
	pthread_cond_broadcast(&rel.cond);
	pthread_mutex_unlock(&rel.lock);
	pthread_join(tr, NULL);

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
