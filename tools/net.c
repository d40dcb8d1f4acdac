/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <unistd.h>

#include <asyncpool.h>
#include "net.h"
#include "pattern.h"

int tcp_loopback_pair(int *tx, int *rx)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);
	int l, rc = 0, one = 1;

	*tx = *rx = -1;
	l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (l < 0)
		return -errno;
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 1) ||
	    getsockname(l, (struct sockaddr *)&a, &len))
		rc = -errno;
	if (!rc) {
		*tx = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (*tx < 0 || connect(*tx, (struct sockaddr *)&a, sizeof(a)))
			rc = -errno;
	}
	if (!rc && (*rx = accept4(l, NULL, NULL, SOCK_CLOEXEC)) < 0)
		rc = -errno;
	close(l);
	if (rc) {
		if (*tx >= 0)
			close(*tx);
		*tx = *rx = -1;
		return rc;
	}
	/* Small writes go out at once: the tests wait on what they send. */
	setsockopt(*tx, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return 0;
}

int zc_acquire(struct asyncpool_zc *zs, struct asyncpool *pool, struct asyncpool_lease *l)
{
	for (;;) {
		int rc = asyncpool_acquire(pool, l);

		if (rc != -ENOBUFS)
			return rc;
		/* Every buffer is with the kernel: wait for POLLERR. */
		rc = asyncpool_zc_wait(zs, -1);
		if (rc < 0)
			return rc;
	}
}

int zc_send_span(struct asyncpool_zc *zs, struct asyncpool_lease *l, size_t off, size_t len,
		 uint32_t flags)
{
	size_t end = off + len;

	while (off < end) {
		int rc = asyncpool_zc_send(zs, l, off, end - off, 0, flags);

		if (rc == -ENOBUFS && asyncpool_zc_wait(zs, -1) >= 0)
			continue;
		if (rc < 0)
			return rc;
		off += (size_t)rc;
	}
	return 0;
}

void *zc_reader_run(void *arg)
{
	struct zc_reader *r = arg;

	for (;;) {
		struct asyncpool_lease l;
		int n = asyncpool_zc_recv(r->pool, r->fd, 0, &l);

		if (n == -ENOBUFS)
			continue;       /* cannot happen: one lease at a time */
		if (n <= 0) {
			r->err = n;
			return NULL;
		}
		r->bad += pattern_check(asyncpool_span_ptr(l.span), r->got, l.span.length);
		r->got += l.span.length;
		r->leases++;
		asyncpool_lease_release(&l);
		if (r->got == r->bytes) {
			struct timespec ts;

			clock_gettime(CLOCK_MONOTONIC, &ts);
			r->done_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
		}
	}
}

size_t zc_fill_kept(struct asyncpool_zc *zs, struct asyncpool *pool, size_t size)
{
	size_t sent = 0;
	int rc = 1;

	while (rc > 0) {
		struct asyncpool_lease l;

		if (asyncpool_acquire(pool, &l))
			break;
		pattern_fill(asyncpool_span_ptr(l.span), sent, size);
		for (size_t off = 0; off < size; off += (size_t)rc) {
			rc = asyncpool_zc_send(zs, &l, off, size - off < 4096 ? size - off : 4096,
					       MSG_DONTWAIT, ASYNCPOOL_ZC_KEEP);
			if (rc <= 0)
				break;
			sent += (size_t)rc;
		}
		/* Kept, then handed over: what did not go stays unsent. */
		asyncpool_zc_release(zs, &l);
	}
	return sent;
}
