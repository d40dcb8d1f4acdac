/* SPDX-License-Identifier: MIT */
/*
 * asyncpool demo on io_uring: real zero-copy I/O over TCP loopback.
 *
 * The sender acquires leases from a pool over a READ region (fixed
 * buffers), fills them and sends them with IORING_OP_SEND_ZC; each lease
 * goes back on its notification completion.  The receiver runs a
 * multishot recv on a provided-buffer ring (a WRITE region), turns each
 * completion into a lease, verifies every byte and releases it.  The same
 * data then goes through a plain copying send() for comparison.
 */
#include "config.h"

#ifdef HAVE_LIBURING
#include <errno.h>
#include <liburing.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <asyncpool.h>
#include "../lib/uring_compat.h"    /* SINGLE_ISSUER, DEFER_TASKRUN */
#include "net.h"
#include "pattern.h"
#include "tool.h"
#include "vm_pin.h"

#define TX_BUFS 128u
#define RX_BUFS 64u
#define CHUNK (64u * 1024)
#define CHAIN 32u

struct receiver {
	struct io_uring ring;
	struct asyncpool_proactor *p;
	struct asyncpool_region *r;
	int group;
	/* per run */
	int fd;
	size_t bytes, got, bad;
	unsigned long leases, rearms;
	uint64_t done_ns;
	int err;
};

static void rx_arm(struct receiver *rx)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&rx->ring);

	io_uring_prep_recv_multishot(sqe, rx->fd, NULL, 0, 0);
	sqe->flags |= IOSQE_BUFFER_SELECT;
	sqe->buf_group = (uint16_t)rx->group;
}

/* Until EOF: lease, verify, release every buffer the kernel fills. */
static void *rx_run(void *arg)
{
	struct receiver *rx = arg;

	rx_arm(rx);
	for (;;) {
		struct io_uring_cqe *cqe;
		unsigned head, n = 0;
		bool eof = false, rearm = false;
		int rc = io_uring_submit_and_wait(&rx->ring, 1);

		if (rc < 0 && rc != -EINTR) {
			rx->err = rc;
			return NULL;
		}
		io_uring_for_each_cqe(&rx->ring, head, cqe) {
			struct asyncpool_lease l;

			n++;
			if (cqe->res > 0) {
				rc = asyncpool_region_recv_lease(rx->r, cqe, &l);
				if (rc) {
					rx->err = rc;
					eof = true;
					break;
				}
				rx->bad += pattern_check(asyncpool_span_ptr(l.span), rx->got, l.span.length);
				rx->got += l.span.length;
				rx->leases++;
				asyncpool_lease_release(&l);
				if (rx->got == rx->bytes)
					rx->done_ns = tool_now_ns();
			} else if (cqe->res == 0) {
				eof = true;
			} else if (cqe->res != -ENOBUFS) {
				rx->err = cqe->res;
				eof = true;
			}
			if (!(cqe->flags & IORING_CQE_F_MORE) && !eof)
				rearm = true;
		}
		io_uring_cq_advance(&rx->ring, n);
		if (eof)
			return NULL;
		if (rearm) {
			rx_arm(rx);
			rx->rearms++;
		}
	}
}

struct sender {
	struct io_uring ring;
	struct asyncpool_proactor *p;
	struct asyncpool_region *r;
	struct asyncpool *pool;
	unsigned long sends, notifs;
	int err;
};

/*
 * Sends on one stream socket stay in order only when linked: one chain of
 * up to CHAIN sends is in flight at a time, and the next chain's buffers
 * are filled while it runs.
 */
static int tx_zc(struct sender *tx, int fd, size_t bytes)
{
	struct asyncpool_lease lease_of[TX_BUFS], ready[CHAIN];
	size_t filled = 0, len_of[CHAIN];
	unsigned chain = 0, out = 0, nready = 0;

	for (;;) {
		struct io_uring_cqe *cqe;
		unsigned head, n = 0;
		int rc;

		if (!chain && nready && !tx->err) {
			struct io_uring_sqe *sqe = NULL;

			for (unsigned k = 0; k < nready; k++) {
				struct asyncpool_lease *l = &ready[k];

				lease_of[l->buffer_index] = *l;
				if (sqe)
					sqe->flags |= IOSQE_IO_LINK;
				sqe = io_uring_get_sqe(&tx->ring);
				io_uring_prep_send_zc_fixed(sqe, fd, asyncpool_span_ptr(l->span),
							    len_of[k], MSG_WAITALL, 0,
							    (unsigned)asyncpool_region_fixed_index(tx->r, l->buffer_index));
				sqe->user_data = l->buffer_index | (uint64_t)len_of[k] << 32;
			}
			chain = nready;
			out += nready;
			tx->sends += nready;
			nready = 0;
			rc = io_uring_submit(&tx->ring);
			if (rc < 0)
				return rc;
		}
		/* Fill the next chain while this one is sent. */
		while (nready < CHAIN && filled < bytes && !tx->err) {
			size_t len = bytes - filled < CHUNK ? bytes - filled : CHUNK;

			if (asyncpool_acquire(tx->pool, &ready[nready]))
				break;
			pattern_fill(asyncpool_span_ptr(ready[nready].span), filled, len);
			len_of[nready++] = len;
			filled += len;
		}
		if (!chain && !out && (!nready || tx->err)) {
			/* A pool shared with other senders may be empty for a
			 * moment while they hold every buffer. */
			if (filled < bytes && !tx->err) {
				sched_yield();
				continue;
			}
			break;
		}
		if (!chain && nready && !tx->err)
			continue;
		rc = io_uring_wait_cqe(&tx->ring, &cqe);
		if (rc < 0 && rc != -EINTR)
			return rc;
		io_uring_for_each_cqe(&tx->ring, head, cqe) {
			uint32_t bi = (uint32_t)cqe->user_data;

			n++;
			if (cqe->flags & IORING_CQE_F_NOTIF) {
				/* The kernel no longer reads the buffer. */
				tx->notifs++;
				out--;
				asyncpool_lease_release(&lease_of[bi]);
				continue;
			}
			chain--;
			if (cqe->res != (int)(cqe->user_data >> 32) && !tx->err)
				tx->err = cqe->res < 0 ? cqe->res : -EIO;
			if (!(cqe->flags & IORING_CQE_F_MORE)) {
				out--;
				asyncpool_lease_release(&lease_of[bi]);
			}
		}
		io_uring_cq_advance(&tx->ring, n);
	}
	for (unsigned k = 0; k < nready; k++)
		asyncpool_lease_release(&ready[k]);
	return tx->err;
}

static int tx_copy(struct sender *tx, int fd, size_t bytes)
{
	size_t pos = 0;

	while (pos < bytes) {
		struct asyncpool_lease l;
		size_t len = bytes - pos < CHUNK ? bytes - pos : CHUNK, off = 0;
		unsigned char *d;
		int rc = asyncpool_acquire(tx->pool, &l);

		if (rc)
			return rc;
		d = asyncpool_span_ptr(l.span);
		pattern_fill(d, pos, len);
		while (off < len) {
			ssize_t w = send(fd, d + off, len - off, MSG_NOSIGNAL);

			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				asyncpool_lease_release(&l);
				return w < 0 ? -errno : -EIO;
			}
			off += (size_t)w;
		}
		asyncpool_lease_release(&l);
		tx->sends++;
		pos += len;
	}
	return 0;
}

/* One transfer of bytes, zero-copy or not; GB/s or a negative errno. */
static double run(struct sender *tx, struct receiver *rx, bool zc, size_t bytes, int *err)
{
	pthread_t t;
	uint64_t start;
	int a, b, rc;

	rc = tcp_loopback_pair(&a, &b);
	if (rc) {
		*err = rc;
		return 0;
	}
	rx->fd = b;
	rx->bytes = bytes;
	rx->got = rx->bad = 0;
	rx->leases = rx->rearms = 0;
	rx->done_ns = 0;
	rx->err = 0;
	tx->sends = tx->notifs = 0;
	tx->err = 0;
	pthread_create(&t, NULL, rx_run, rx);
	start = tool_now_ns();
	rc = zc ? tx_zc(tx, a, bytes) : tx_copy(tx, a, bytes);
	close(a);
	pthread_join(t, NULL);
	close(b);
	*err = rc ? rc : rx->err;
	if (!*err && (rx->got != bytes || rx->bad))
		*err = -EIO;
	if (*err || !rx->done_ns)
		return 0;
	return (double)bytes / (double)(rx->done_ns - start);
}

int demo_uring(size_t bytes, char *why, size_t whylen)
{
	struct sender tx;
	struct receiver rx;
	struct io_uring_probe *probe;
	double zc_gbs = 0, copy_gbs = 0;
	int rc, err = 0, result = DEMO_URING_FAILED;
	bool zc_ok;

	memset(&tx, 0, sizeof(tx));
	memset(&rx, 0, sizeof(rx));
	bytes = (bytes + CHUNK - 1) / CHUNK * CHUNK;
	rc = io_uring_queue_init(256, &tx.ring, 0);
	if (rc) {
		snprintf(why, whylen, "io_uring_queue_init: %s", strerror(-rc));
		return rc == -EPERM || rc == -ENOSYS || rc == -EOPNOTSUPP ? DEMO_URING_REFUSED :
		       DEMO_URING_FAILED;
	}
	probe = io_uring_get_probe_ring(&tx.ring);
	zc_ok = probe && io_uring_opcode_supported(probe, IORING_OP_SEND_ZC);
	if (probe)
		io_uring_free_probe(probe);
	if (!zc_ok) {
		snprintf(why, whylen, "this kernel has no IORING_OP_SEND_ZC");
		io_uring_queue_exit(&tx.ring);
		return DEMO_URING_REFUSED;
	}
	rc = io_uring_queue_init(64, &rx.ring, 0);
	if (rc) {
		snprintf(why, whylen, "io_uring_queue_init: %s", strerror(-rc));
		io_uring_queue_exit(&tx.ring);
		return DEMO_URING_FAILED;
	}

	rc = asyncpool_proactor_create_uring(&tx.ring, 0, &tx.p);
	if (!rc)
		tx.r = tool_region(tx.p, CHUNK, TX_BUFS, ASYNCPOOL_ACCESS_READ, &rc);
	if (!rc)
		rc = asyncpool_create(tx.r, &tx.pool);
	if (!rc)
		rc = asyncpool_proactor_create_uring(&rx.ring, 0, &rx.p);
	if (!rc)
		rx.r = tool_region(rx.p, CHUNK, RX_BUFS, ASYNCPOOL_ACCESS_WRITE, &rc);
	if (rc) {
		snprintf(why, whylen, "cannot register buffers: %s", strerror(-rc));
		result = rc == -EOPNOTSUPP || rc == -EPERM || rc == -ENOSYS ?
			 DEMO_URING_REFUSED : DEMO_URING_FAILED;
		goto out;
	}
	rx.group = asyncpool_region_buffer_group(rx.r);

	printf("libasyncpool %s demo (io_uring proactor)\n", asyncpool_version());
	printf("TCP over loopback, %zu MiB each way, in %u KiB buffers\n", bytes >> 20, CHUNK >> 10);
	printf("sender: pool of %zu fixed buffers (table slots %d..%d), IORING_OP_SEND_ZC\n",
	       asyncpool_capacity(tx.pool), asyncpool_region_fixed_index(tx.r, 0),
	       asyncpool_region_fixed_index(tx.r, TX_BUFS - 1));
	printf("receiver: multishot recv on a ring of %u provided buffers (group %d)\n",
	       RX_BUFS, rx.group);

	zc_gbs = run(&tx, &rx, true, bytes, &err);
	if (err) {
		snprintf(why, whylen, "zero-copy transfer: %s", strerror(-err));
		goto out;
	}
	printf("zero-copy: %lu sends, %lu notifications; %lu recv leases, %zu bad bytes, "
	       "%lu re-arms; pool %zu/%zu\n", tx.sends, tx.notifs, rx.leases, rx.bad, rx.rearms,
	       asyncpool_available(tx.pool), asyncpool_capacity(tx.pool));
	if (tx.notifs != tx.sends || asyncpool_available(tx.pool) != TX_BUFS) {
		snprintf(why, whylen, "a lease was not given back");
		goto out;
	}
	copy_gbs = run(&tx, &rx, false, bytes, &err);
	if (err) {
		snprintf(why, whylen, "copying transfer: %s", strerror(-err));
		goto out;
	}
	printf("copying:   %lu send() calls; %lu recv leases, %zu bad bytes, %lu re-arms\n",
	       tx.sends, rx.leases, rx.bad, rx.rearms);
	printf("zero-copy send (IORING_OP_SEND_ZC): %.2f GB/s\n", zc_gbs);
	printf("copying send():                     %.2f GB/s\n", copy_gbs);
	result = DEMO_URING_OK;
out:
	if (tx.pool)
		asyncpool_destroy(tx.pool);
	asyncpool_region_unref(tx.r);
	asyncpool_region_unref(rx.r);
	if (tx.p)
		asyncpool_proactor_destroy(tx.p);
	if (rx.p)
		asyncpool_proactor_destroy(rx.p);
	io_uring_queue_exit(&rx.ring);
	io_uring_queue_exit(&tx.ring);
	return result;
}

/* ---- asyncpool demo --rings N: a ring per thread, one shared pool ---- */

struct ring_thread {
	pthread_t tid;
	struct asyncpool_shared *sp;
	pthread_barrier_t *registered, *go;
	size_t bytes;
	unsigned flags;                 /* of its ring */
	int first_slot;                 /* fixed index of buffer 0 on its ring */
	bool cloned;
	/* its receiver: a plain blocking reader that checks every byte */
	int rfd;
	size_t got, bad;
	uint64_t done_ns;
	unsigned long sends, notifs;
	int err;
};

static void *ring_reader(void *arg)
{
	struct ring_thread *t = arg;
	unsigned char *buf = malloc(1u << 20);

	if (!buf) {
		t->err = -ENOMEM;
		return NULL;
	}
	for (;;) {
		ssize_t n = read(t->rfd, buf, 1u << 20);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n < 0 && !t->err)
				t->err = -errno;
			break;
		}
		t->bad += pattern_check(buf, t->got, (size_t)n);
		t->got += (size_t)n;
		if (t->got == t->bytes)
			t->done_ns = tool_now_ns();
	}
	free(buf);
	return NULL;
}

/* One thread: its own SINGLE_ISSUER ring, the shared slab registered on
 * it (the same slots as on every other ring), SEND_ZC to its socket. */
static void *ring_worker(void *arg)
{
	struct ring_thread *t = arg;
	struct asyncpool_region_stats st = { .size = sizeof(st) };
	struct sender tx;
	pthread_t reader;
	int a = -1, b = -1, rc;

	memset(&tx, 0, sizeof(tx));
	t->flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
	rc = io_uring_queue_init(256, &tx.ring, t->flags);
	if (rc == -EINVAL) {
		t->flags = 0;
		rc = io_uring_queue_init(256, &tx.ring, 0);
	}
	if (!rc)
		rc = asyncpool_proactor_create_uring(&tx.ring, 0, &tx.p);
	if (!rc)
		rc = asyncpool_proactor_register_slab(tx.p,
			asyncpool_region_slab(asyncpool_shared_region(t->sp)),
			ASYNCPOOL_ACCESS_READ, &tx.r);
	if (!rc) {
		t->first_slot = asyncpool_region_fixed_index(tx.r, 0);
		asyncpool_region_stats(tx.r, &st);
		t->cloned = st.flags & ASYNCPOOL_REGION_CLONED;
	}
	t->err = rc;
	pthread_barrier_wait(t->registered);    /* main reads memlock now */
	pthread_barrier_wait(t->go);
	if (!rc)
		rc = tcp_loopback_pair(&a, &b);
	if (!rc) {
		t->rfd = b;
		tx.pool = asyncpool_shared_pool(t->sp);
		pthread_create(&reader, NULL, ring_reader, t);
		rc = tx_zc(&tx, a, t->bytes);
		close(a);
		pthread_join(reader, NULL);
		close(b);
		t->sends = tx.sends;
		t->notifs = tx.notifs;
	}
	if (rc && !t->err)
		t->err = rc;
	asyncpool_region_unref(tx.r);           /* on the owner thread */
	if (tx.p && asyncpool_proactor_destroy(tx.p) && !t->err)
		t->err = -EBUSY;
	if (tx.ring.ring_fd > 0)
		io_uring_queue_exit(&tx.ring);
	return NULL;
}

int demo_rings(unsigned nrings, size_t bytes, char *why, size_t whylen)
{
	struct asyncpool_shared_options o;
	struct asyncpool_shared *sp;
	struct ring_thread *t;
	pthread_barrier_t registered, go;
	size_t total = 0, bad = 0;
	uint64_t start, end = 0;
	long pin0, pin1;
	bool same = true, cloned = true;
	int rc, result = DEMO_URING_FAILED;

	bytes = (bytes + CHUNK - 1) / CHUNK * CHUNK;
	memset(&o, 0, sizeof(o));
	o.size = sizeof(o);
	o.buffer_size = CHUNK;
	o.buffer_count = TX_BUFS;
	rc = asyncpool_shared_create(&o, &sp);
	if (rc) {
		snprintf(why, whylen, "asyncpool_shared_create: %s", strerror(-rc));
		return DEMO_URING_FAILED;
	}
	/* Fault the buffers in, so that memlock counts only pinning. */
	memset(asyncpool_region_base(asyncpool_shared_region(sp)), 0, (size_t)CHUNK * TX_BUFS);
	t = calloc(nrings, sizeof(*t));
	if (!t) {
		asyncpool_shared_close(sp);
		snprintf(why, whylen, "out of memory");
		return DEMO_URING_FAILED;
	}
	pthread_barrier_init(&registered, NULL, nrings + 1);
	pthread_barrier_init(&go, NULL, nrings + 1);
	pin0 = vm_pin_kib();
	for (unsigned i = 0; i < nrings; i++) {
		t[i].sp = sp;
		t[i].registered = &registered;
		t[i].go = &go;
		t[i].bytes = bytes;
		pthread_create(&t[i].tid, NULL, ring_worker, &t[i]);
	}
	pthread_barrier_wait(&registered);
	pin1 = vm_pin_kib();
	for (unsigned i = 0; i < nrings; i++) {
		if (t[i].err) {
			snprintf(why, whylen, "ring %u: cannot register the shared slab: %s",
				 i, strerror(-t[i].err));
			result = t[i].err == -EPERM || t[i].err == -ENOSYS || t[i].err == -EOPNOTSUPP ?
				 DEMO_URING_REFUSED : DEMO_URING_FAILED;
		}
		same &= t[i].first_slot == t[0].first_slot;
		cloned &= t[i].cloned;
	}
	printf("libasyncpool %s demo: %u rings, one shared pool\n", asyncpool_version(), nrings);
	printf("shared pool: %u buffers of %u KiB (memfd); each thread its own ring (%s)\n",
	       TX_BUFS, CHUNK >> 10, t[0].flags ? "SINGLE_ISSUER|DEFER_TASKRUN" : "plain");
	printf("fixed slots %d..%d %s on every ring; pages %s\n", t[0].first_slot,
	       t[0].first_slot + TX_BUFS - 1, same ? "the same" : "NOT the same",
	       cloned ? "pinned once and cloned (IORING_REGISTER_CLONE_BUFFERS)" :
	       "pinned by each ring");
	if (pin0 >= 0)
		printf("memlock charged (VmPin): %ld KiB for a %u KiB slab on %u ring%s\n",
		       pin1 - pin0, (CHUNK >> 10) * TX_BUFS, nrings, nrings > 1 ? "s" : "");
	start = tool_now_ns();
	pthread_barrier_wait(&go);
	for (unsigned i = 0; i < nrings; i++) {
		pthread_join(t[i].tid, NULL);
		total += t[i].got;
		bad += t[i].bad;
		if (t[i].done_ns > end)
			end = t[i].done_ns;
		if (t[i].err && result != DEMO_URING_REFUSED) {
			snprintf(why, whylen, "ring %u: %s", i, strerror(-t[i].err));
			result = DEMO_URING_FAILED;
		}
		printf("ring %u: %lu SEND_ZC, %lu notifications, %zu bytes received, %zu bad\n",
		       i, t[i].sends, t[i].notifs, t[i].got, t[i].bad);
	}
	pthread_barrier_destroy(&registered);
	pthread_barrier_destroy(&go);
	if (!*why) {
		if (!same || total != bytes * nrings || bad) {
			snprintf(why, whylen, "%s", !same ? "fixed slots differ between rings" :
				 "the data did not arrive whole");
		} else if (asyncpool_available(asyncpool_shared_pool(sp)) != TX_BUFS) {
			snprintf(why, whylen, "a lease was not given back");
		} else {
			printf("pool: %zu/%u buffers back\n",
			       asyncpool_available(asyncpool_shared_pool(sp)), TX_BUFS);
			printf("%u rings, SEND_ZC from one shared pool: %.2f GB/s\n", nrings,
			       (double)total / (double)(end - start));
			result = DEMO_URING_OK;
		}
	}
	free(t);
	asyncpool_shared_close(sp);
	return result;
}
#else
#include <stdio.h>
#include <stddef.h>
#include "tool.h"

int demo_uring(size_t bytes, char *why, size_t whylen)
{
	snprintf(why, whylen, "built without liburing");
	return DEMO_URING_REFUSED;
}

int demo_rings(unsigned nrings, size_t bytes, char *why, size_t whylen)
{
	snprintf(why, whylen, "built without liburing");
	return DEMO_URING_REFUSED;
}
#endif
