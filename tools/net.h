/* SPDX-License-Identifier: MIT */
/* TCP over loopback, for the demos and their tests. */
#ifndef ASYNCPOOL_TOOLS_NET_H
#define ASYNCPOOL_TOOLS_NET_H

/*
 * A connected TCP pair over 127.0.0.1: *tx the connected end (TCP_NODELAY),
 * *rx the accepted one.  0, or -errno with both set to -1.
 */
int tcp_loopback_pair(int *tx, int *rx);

#include <stddef.h>
#include <stdint.h>

struct asyncpool;
struct asyncpool_lease;
struct asyncpool_zc;

/*
 * For the MSG_ZEROCOPY demo and tests: a lease of pool into *l, waiting
 * on zs for completions while every buffer is with the kernel.
 * 0 or -errno.
 */
int zc_acquire(struct asyncpool_zc *zs, struct asyncpool *pool, struct asyncpool_lease *l);

/*
 * Send [off, off + len) of *l on zs with flags (0 or ASYNCPOOL_ZC_KEEP):
 * a short send goes on from where it stopped, ENOBUFS waits for
 * completions and tries again.  0, or -errno with the lease still the
 * caller's (what went may be in flight: asyncpool_zc_release()).
 */
int zc_send_span(struct asyncpool_zc *zs, struct asyncpool_lease *l, size_t off, size_t len,
		 uint32_t flags);

/*
 * Fill the socket of zs without blocking: leases of pool (buffers of
 * size bytes) filled with the stream from 0, sent in 4 KiB spans
 * (MSG_DONTWAIT, ASYNCPOOL_ZC_KEEP, each a sequence number) and handed
 * over, until a send takes nothing or the pool is empty.  The bytes sent.
 */
size_t zc_fill_kept(struct asyncpool_zc *zs, struct asyncpool *pool, size_t size);

/*
 * A reader of one stream of the pattern (pattern.h), for a thread:
 * asyncpool_zc_recv() into leases of pool, every byte checked, until the
 * end of the stream (err 0) or an error (err -errno).
 */
struct zc_reader {
	struct asyncpool *pool;
	int fd;
	size_t bytes;           /* when got reaches it, done_ns is set */
	size_t got, bad;        /* bytes received, of them wrong */
	unsigned long leases;
	uint64_t done_ns;       /* CLOCK_MONOTONIC */
	int err;
};
void *zc_reader_run(void *arg);

#endif
