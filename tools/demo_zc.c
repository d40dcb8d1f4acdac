/* SPDX-License-Identifier: MIT */
/*
 * asyncpool demo on the socket backend: the io_uring demo's TCP loopback
 * transfer where io_uring is refused.  The sender acquires leases from a
 * pool of plain memory, fills them and sends them with MSG_ZEROCOPY
 * (asyncpool_zc_send); each lease goes back when the socket's error
 * queue reports its sends complete (asyncpool_zc_wait, asyncpool_zc_reap).
 * The receiver reads into leases of another pool (asyncpool_zc_recv),
 * verifies every byte and releases them.  The same data then goes through
 * copying send()s of the same backend for comparison.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <asyncpool.h>
#include "net.h"
#include "pattern.h"
#include "tool.h"

#define TX_BUFS 128u
#define RX_BUFS 64u
#define CHUNK (64u * 1024)

/* Fill and send every lease whole; wait for completions when the pool is empty. */
static int zc_send_all(struct asyncpool_zc *zs, struct asyncpool *pool, size_t bytes)
{
	size_t pos = 0;

	while (pos < bytes) {
		struct asyncpool_lease l;
		size_t len = bytes - pos < CHUNK ? bytes - pos : CHUNK;
		int rc = zc_acquire(zs, pool, &l);

		if (rc)
			return rc;
		pattern_fill(asyncpool_span_ptr(l.span), pos, len);
		rc = zc_send_span(zs, &l, 0, len, 0);
		if (rc) {
			asyncpool_zc_release(zs, &l);
			return rc;
		}
		pos += len;
	}
	return 0;
}

struct zc_result {
	double gbs;
	struct asyncpool_zc_stats st;
	struct zc_reader rx;
};

static int zc_run(struct asyncpool *tx, struct asyncpool *rxpool, uint32_t flags, size_t bytes,
		  struct zc_result *res)
{
	struct asyncpool_zc_options o;
	struct asyncpool_zc *zs;
	pthread_t t;
	uint64_t start;
	int a, b, rc;

	memset(res, 0, sizeof(*res));
	memset(&o, 0, sizeof(o));
	o.size = sizeof(o);
	o.flags = flags;
	rc = tcp_loopback_pair(&a, &b);
	if (rc)
		return rc;
	rc = asyncpool_zc_open(a, &o, &zs);
	if (rc) {
		close(a);
		close(b);
		return rc;
	}
	res->rx.pool = rxpool;
	res->rx.fd = b;
	res->rx.bytes = bytes;
	pthread_create(&t, NULL, zc_reader_run, &res->rx);
	start = tool_now_ns();
	rc = zc_send_all(zs, tx, bytes);
	/* The caller's socket closes; the backend keeps its own until every
	 * completion is in. */
	shutdown(a, SHUT_WR);
	close(a);
	pthread_join(t, NULL);
	close(b);
	res->st.size = sizeof(res->st);
	while (!asyncpool_zc_stats(zs, &res->st) && res->st.pending)
		if (asyncpool_zc_wait(zs, -1) < 0)
			break;
	asyncpool_zc_stats(zs, &res->st);
	if (asyncpool_zc_close(zs, 10ll * 1000000000) && !rc)
		rc = -EBUSY;
	if (!rc && res->rx.err)
		rc = res->rx.err;
	if (!rc && (res->rx.got != bytes || res->rx.bad))
		rc = -EIO;
	if (!rc && res->rx.done_ns)
		res->gbs = (double)bytes / (double)(res->rx.done_ns - start);
	return rc;
}

int demo_zc(size_t bytes, const char *why_not_uring, char *why, size_t whylen)
{
	struct asyncpool_backend_info bi;
	struct asyncpool_proactor *p = NULL;
	struct asyncpool_region *txr = NULL, *rxr = NULL;
	struct asyncpool *tx = NULL, *rxpool = NULL;
	struct zc_result zc, cp;
	int rc, result = DEMO_URING_FAILED;

	bytes = (bytes + CHUNK - 1) / CHUNK * CHUNK;
	memset(&bi, 0, sizeof(bi));
	bi.size = sizeof(bi);
	rc = asyncpool_backend_probe(&bi);
	if (rc || !(bi.backends & ASYNCPOOL_BACKEND_ZEROCOPY_TCP)) {
		snprintf(why, whylen, "no MSG_ZEROCOPY on TCP: %s",
			 strerror(rc ? -rc : -bi.zerocopy_error));
		return DEMO_URING_REFUSED;
	}
	rc = asyncpool_proactor_create_memory(&p);
	if (!rc)
		txr = tool_region(p, CHUNK, TX_BUFS, ASYNCPOOL_ACCESS_READ, &rc);
	if (!rc)
		rc = asyncpool_create(txr, &tx);
	if (!rc)
		rxr = tool_region(p, CHUNK, RX_BUFS, ASYNCPOOL_ACCESS_READ, &rc);
	if (!rc)
		rc = asyncpool_create(rxr, &rxpool);
	if (rc) {
		snprintf(why, whylen, "cannot create the pools: %s", strerror(-rc));
		goto out;
	}
	printf("libasyncpool %s demo (MSG_ZEROCOPY socket backend)\n", asyncpool_version());
	printf("backend: MSG_ZEROCOPY sockets (io_uring: %s%s)\n",
	       bi.uring_error ? strerror(-bi.uring_error) : why_not_uring,
	       bi.uring_disabled > 0 ? bi.uring_disabled == 2 ? ", kernel.io_uring_disabled=2" :
	       ", kernel.io_uring_disabled=1" : "");
	printf("TCP over loopback, %zu MiB each way, in %u KiB buffers\n", bytes >> 20, CHUNK >> 10);
	printf("sender: pool of %u buffers, asyncpool_zc_send() (sendmsg MSG_ZEROCOPY), "
	       "leases back on error-queue completions\n", TX_BUFS);
	printf("receiver: asyncpool_zc_recv() into a pool of %u buffers\n", RX_BUFS);

	rc = zc_run(tx, rxpool, ASYNCPOOL_ZC_NO_FALLBACK, bytes, &zc);
	if (rc) {
		snprintf(why, whylen, "zero-copy transfer: %s", strerror(-rc));
		goto out;
	}
	printf("zero-copy: %llu sends, %llu completions in %llu ranges, %llu copied by the kernel; "
	       "%lu recv leases, %zu bad bytes; pool %zu/%u\n",
	       (unsigned long long)zc.st.sends, (unsigned long long)zc.st.completions,
	       (unsigned long long)zc.st.notifications, (unsigned long long)zc.st.copied,
	       zc.rx.leases, zc.rx.bad, asyncpool_available(tx), TX_BUFS);
	if (zc.st.completions != zc.st.sends || asyncpool_available(tx) != TX_BUFS) {
		snprintf(why, whylen, "a lease was not given back");
		goto out;
	}
	rc = zc_run(tx, rxpool, ASYNCPOOL_ZC_COPY, bytes, &cp);
	if (rc) {
		snprintf(why, whylen, "copying transfer: %s", strerror(-rc));
		goto out;
	}
	printf("copying:   %llu send() calls; %lu recv leases, %zu bad bytes; pool %zu/%u\n",
	       (unsigned long long)cp.st.copy_sends, cp.rx.leases, cp.rx.bad,
	       asyncpool_available(tx), TX_BUFS);
	if (zc.st.copied == zc.st.completions)
		printf("(the kernel copied every MSG_ZEROCOPY send, as it does over loopback: "
		       "skb_orphan_frags_rx)\n");
	printf("zero-copy send (MSG_ZEROCOPY): %.2f GB/s\n", zc.gbs);
	printf("copying send():                %.2f GB/s\n", cp.gbs);
	if (asyncpool_available(tx) != TX_BUFS || asyncpool_available(rxpool) != RX_BUFS) {
		snprintf(why, whylen, "a lease was not given back");
		goto out;
	}
	printf("every lease back: %zu/%u sent, %zu/%u received\n", asyncpool_available(tx), TX_BUFS,
	       asyncpool_available(rxpool), RX_BUFS);
	result = DEMO_URING_OK;
out:
	if (tx)
		asyncpool_destroy(tx);
	if (rxpool)
		asyncpool_destroy(rxpool);
	asyncpool_region_unref(txr);
	asyncpool_region_unref(rxr);
	if (p)
		asyncpool_proactor_destroy(p);
	return result;
}
