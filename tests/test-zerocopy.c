/* SPDX-License-Identifier: MIT */
/*
 * The socket backend on real sockets over 127.0.0.1: TCP and UDP
 * transfers with every byte checked and every lease back, completions
 * that coalesce and that arrive after the caller closed the socket, a
 * peer that resets the connection half way, the copying fallback, and
 * ENOBUFS from a spent RLIMIT_MEMLOCK.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <linux/if_tun.h>
#include <linux/vm_sockets.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <asyncpool.h>
#include "tap.h"
#include "testutil.h"
#include "../tools/net.h"
#include "../tools/pattern.h"

#define BUF (64u * 1024)
#define NBUF 32u

#ifndef SO_ZEROCOPY
#define SO_ZEROCOPY 60
#endif

static struct asyncpool_zc_options zc_opts(uint32_t flags)
{
	struct asyncpool_zc_options o;

	memset(&o, 0, sizeof(o));
	o.size = sizeof(o);
	o.flags = flags;
	return o;
}

static struct asyncpool_zc_stats zc_stats(struct asyncpool_zc *zs)
{
	struct asyncpool_zc_stats st;

	memset(&st, 0, sizeof(st));
	st.size = sizeof(st);
	if (asyncpool_zc_stats(zs, &st))
		bail_out("asyncpool_zc_stats");
	return st;
}

/*
 * Send bytes of pattern over zs from pool: whole leases, every eighth
 * one in two halves kept (ASYNCPOOL_ZC_KEEP) and then handed over with
 * asyncpool_zc_release(); short sends go on from where they stopped
 * (tools/net.c).  0 or -errno.
 */
static int send_stream(struct asyncpool_zc *zs, struct asyncpool *pool, size_t bytes)
{
	size_t pos = 0;
	unsigned k = 0;

	while (pos < bytes) {
		struct asyncpool_lease l;
		size_t len = bytes - pos < BUF ? bytes - pos : BUF;
		int rc = zc_acquire(zs, pool, &l);

		if (rc)
			return rc;
		pattern_fill(asyncpool_span_ptr(l.span), pos, len);
		if (++k % 8 == 0) {
			rc = zc_send_span(zs, &l, 0, len / 2, ASYNCPOOL_ZC_KEEP);
			if (!rc)
				rc = zc_send_span(zs, &l, len / 2, len - len / 2, ASYNCPOOL_ZC_KEEP);
			if (rc)
				return rc;
			if (!asyncpool_lease_held(&l))
				return -EPROTO;
			rc = asyncpool_zc_release(zs, &l);
			if (rc)
				return rc;
		} else {
			rc = zc_send_span(zs, &l, 0, len, 0);
			if (rc)
				return rc;
		}
		if (asyncpool_lease_held(&l))
			return -EPROTO;
		pos += len;
	}
	return 0;
}

static struct asyncpool_proactor *mp;

static void test_args(struct asyncpool *pool)
{
	struct asyncpool_zc_options o = zc_opts(0);
	struct asyncpool_zc *zs = (void *)1;
	struct asyncpool_lease l, none;
	int pfd[2], a, b, u;

	is_int(asyncpool_zc_open(-1, NULL, &zs), -EINVAL, "open: fd -1: -EINVAL");
	ok(zs == NULL, "and *out is NULL");
	if (pipe(pfd))
		bail_out("pipe");
	is_int(asyncpool_zc_open(pfd[0], NULL, &zs), -ENOTSOCK, "open: a pipe: -ENOTSOCK");
	close(pfd[0]);
	close(pfd[1]);
	u = socket(AF_UNIX, SOCK_STREAM, 0);
	is_int(asyncpool_zc_open(u, NULL, &zs), -EOPNOTSUPP, "open: a Unix socket: -EOPNOTSUPP");
	close(u);
	/* vsock takes SO_ZEROCOPY (Linux 6.7) but reports on SOL_VSOCK. */
	u = socket(AF_VSOCK, SOCK_STREAM, 0);
	if (u >= 0) {
		is_int(asyncpool_zc_open(u, NULL, &zs), -EOPNOTSUPP, "open: a vsock socket: -EOPNOTSUPP");
		close(u);
	} else {
		skip(1, "no AF_VSOCK here");
	}
	if (tcp_loopback_pair(&a, &b))
		bail_out("tcp_loopback_pair");
	o.flags = 1u << 7;
	is_int(asyncpool_zc_open(a, &o, &zs), -EINVAL, "open: an unknown flag: -EINVAL");
	o = zc_opts(0);
	o.reserved[2] = 1;
	is_int(asyncpool_zc_open(a, &o, &zs), -EINVAL, "open: a reserved field set: -EINVAL");
	o = zc_opts(0);
	o.size = 8;
	is_int(asyncpool_zc_open(a, &o, &zs), -EINVAL, "open: size below the first version: -EINVAL");
	is_int(asyncpool_zc_open(a, NULL, NULL), -EINVAL, "open: out NULL: -EINVAL");
	is_int(asyncpool_zc_open(a, NULL, &zs), 0, "open: defaults");
	ok(asyncpool_zc_fd(zs) >= 0 && asyncpool_zc_fd(zs) != a, "it holds its own descriptor");
	if (asyncpool_acquire(pool, &l))
		bail_out("acquire");
	memset(&none, 0, sizeof(none));
	is_int(asyncpool_zc_send(zs, &none, 0, 1, 0, 0), -EINVAL, "send: a lease not held: -EINVAL");
	is_int(asyncpool_zc_send(zs, &l, 0, 0, 0, 0), -EINVAL, "send: length 0: -EINVAL");
	is_int(asyncpool_zc_send(zs, &l, 1, BUF, 0, 0), -EINVAL, "send: beyond the span: -EINVAL");
	is_int(asyncpool_zc_send(zs, &l, BUF + 1, 0, 0, 0), -EINVAL, "send: offset beyond: -EINVAL");
	is_int(asyncpool_zc_send(zs, &l, 0, 1, 0, 1u << 5), -EINVAL, "send: an unknown flag: -EINVAL");
	is_int(asyncpool_zc_send(zs, &l, 0, 1, 0x4000000 /* MSG_ZEROCOPY */, 0), -EINVAL,
	       "send: MSG_ZEROCOPY is the backend's to give: -EINVAL");
	ok(asyncpool_lease_held(&l), "the lease is still the caller's after each");
	is_int(asyncpool_zc_release(zs, &none), -EINVAL, "release: a lease not held: -EINVAL");
	is_int(asyncpool_zc_release(zs, &l), 0, "release: a lease never sent goes back at once");
	is_int(asyncpool_available(pool), NBUF, "pool full");
	{
		struct asyncpool_zc_stats st;

		memset(&st, 0, sizeof(st));
		is_int(asyncpool_zc_stats(zs, &st), -EINVAL, "stats: size 0: -EINVAL");
		st.size = 8192;
		is_int(asyncpool_zc_stats(zs, &st), -E2BIG, "stats: size beyond a page: -E2BIG");
		st.size = sizeof(st);
		is_int(asyncpool_zc_stats(NULL, &st), -EINVAL, "stats: NULL: -EINVAL");
		is_int(asyncpool_zc_stats(zs, &st), 0, "stats");
		ok(st.flags == ASYNCPOOL_ZC_ZEROCOPY && st.sends == 0 && st.leases_out == 0,
		   "stats: zero-copy, nothing sent, nothing out");
	}
	is_int(asyncpool_zc_wait(zs, 0), 0, "wait with nothing in flight: 0");
	is_int(asyncpool_zc_wait(NULL, 0), -EINVAL, "wait NULL: -EINVAL");
	is_int(asyncpool_zc_fd(NULL), -EINVAL, "fd NULL: -EINVAL");
	is_int(asyncpool_zc_close(zs, 0), 0, "close with nothing in flight: 0");
	is_int(asyncpool_zc_close(NULL, 0), -EINVAL, "close NULL: -EINVAL");
	is_int(asyncpool_zc_reap(NULL), -EINVAL, "reap NULL: -EINVAL");
	is_int(asyncpool_zc_recv(NULL, b, 0, &l), -EINVAL, "recv: pool NULL: -EINVAL");
	is_int(asyncpool_zc_recv(pool, b, MSG_DONTWAIT, &l), -EAGAIN, "recv: nothing to read: -EAGAIN");
	ok(!asyncpool_lease_held(&l) && asyncpool_available(pool) == NBUF,
	   "and the lease went back");
	close(a);
	is_int(asyncpool_zc_recv(pool, b, 0, &l), 0, "recv at end of stream: 0");
	ok(!asyncpool_lease_held(&l) && asyncpool_available(pool) == NBUF,
	   "and the lease went back");
	close(b);
}

/* A TCP stream of bytes, zero-copy or copying; every byte and lease back. */
static void test_tcp(struct asyncpool *pool, struct asyncpool *rxpool, uint32_t flags,
		     size_t bytes, const char *what)
{
	struct asyncpool_zc_options o = zc_opts(flags);
	struct asyncpool_zc_stats st;
	struct asyncpool_zc *zs;
	struct zc_reader r;
	pthread_t tid;
	int a, b, rc;

	if (tcp_loopback_pair(&a, &b))
		bail_out("tcp_loopback_pair");
	is_int(asyncpool_zc_open(a, &o, &zs), 0, "%s: open", what);
	memset(&r, 0, sizeof(r));
	r.pool = rxpool;
	r.fd = b;
	pthread_create(&tid, NULL, zc_reader_run, &r);
	rc = send_stream(zs, pool, bytes);
	is_int(rc, 0, "%s: %zu MiB sent", what, bytes >> 20);
	shutdown(a, SHUT_WR);
	pthread_join(tid, NULL);
	ok(r.err == 0 && r.got == bytes && r.bad == 0,
	   "%s: every byte received and right (%zu of %zu, %zu wrong, in %lu leases)", what,
	   r.got, bytes, r.bad, r.leases);
	rc = 0;
	while (zc_stats(zs).pending && rc >= 0)
		rc = asyncpool_zc_wait(zs, -1);
	st = zc_stats(zs);
	if (flags & ASYNCPOOL_ZC_COPY) {
		ok(st.sends == 0 && st.copy_sends >= bytes / BUF && st.notifications == 0,
		   "%s: %llu copying sends, no sequence number used", what,
		   (unsigned long long)st.copy_sends);
		ok(!(st.flags & ASYNCPOOL_ZC_ZEROCOPY), "%s: stats say it copies", what);
	} else {
		ok(st.sends >= bytes / BUF && st.completions == st.sends && st.pending == 0,
		   "%s: %llu sends, every one reported complete", what,
		   (unsigned long long)st.sends);
		ok(st.notifications >= 1 && st.notifications <= st.completions && st.bad_ranges == 0,
		   "%s: in %llu ranges (%llu copied), none bad", what,
		   (unsigned long long)st.notifications, (unsigned long long)st.copied);
	}
	is_int(st.leases_out, 0, "%s: no lease out", what);
	is_int(asyncpool_available(pool), NBUF, "%s: every lease back in the pool", what);
	is_int(asyncpool_zc_close(zs, 0), 0, "%s: close", what);
	close(a);
	close(b);
}

/*
 * The receiver reads nothing until the sender is stuck: the leases sit in
 * the sender's write queue.  The caller closes its socket; the backend's
 * own reference keeps the completions coming, coalesced, once the reader
 * drains the stream.
 */
static void test_after_close(struct asyncpool *pool)
{
	struct asyncpool_zc_options o = zc_opts(ASYNCPOOL_ZC_NO_FALLBACK);
	struct asyncpool_zc_stats st;
	struct asyncpool_zc *zs;
	size_t sent = 0, got = 0, bad = 0;
	int a, b, small = 32 * 1024;
	unsigned char *buf = malloc(BUF);

	if (!buf || tcp_loopback_pair(&a, &b))
		bail_out("tcp_loopback_pair");
	setsockopt(a, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
	setsockopt(b, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	is_int(asyncpool_zc_open(a, &o, &zs), 0, "after close: open");
	/* 4 KiB sends, each a sequence number, until the socket is full. */
	sent = zc_fill_kept(zs, pool, BUF);
	st = zc_stats(zs);
	ok(sent > 0 && st.pending > 0 && st.leases_out > 0,
	   "after close: %zu bytes sent, %llu sends pending, %u leases out", sent,
	   (unsigned long long)st.pending, st.leases_out);
	close(a);       /* the caller's descriptor: the socket lives on in the backend */
	is_int(asyncpool_zc_close(zs, 0), -EBUSY, "after close: close(timeout 0) with sends pending: -EBUSY");
	ok(asyncpool_available(pool) < NBUF, "after close: the leases stay out");
	while (got < sent) {
		ssize_t n = read(b, buf, BUF);

		if (n <= 0)
			break;
		bad += pattern_check(buf, got, (size_t)n);
		got += (size_t)n;
	}
	ok(got == sent && bad == 0, "after close: the reader got every byte right (%zu of %zu)",
	   got, sent);
	while ((st = zc_stats(zs)).pending && asyncpool_zc_wait(zs, -1) >= 0)
		;
	st = zc_stats(zs);
	ok(st.completions == st.sends && st.leases_out == 0,
	   "after close: %llu completions arrived after close(2)", (unsigned long long)st.completions);
	ok(st.sends < 2 || st.notifications < st.sends,
	   "after close: ranges coalesced (%llu ranges for %llu sends)",
	   (unsigned long long)st.notifications, (unsigned long long)st.sends);
	is_int(asyncpool_available(pool), NBUF, "after close: every lease back");
	is_int(asyncpool_zc_close(zs, -1), 0, "after close: close");
	close(b);
	free(buf);
}

/* The peer resets the connection with unread data: the sends in flight
 * complete (the kernel purges them), the failing one stays the caller's. */
static void test_reset(struct asyncpool *pool)
{
	struct asyncpool_zc_options o = zc_opts(ASYNCPOOL_ZC_NO_FALLBACK);
	struct asyncpool_zc_stats st;
	struct asyncpool_zc *zs;
	struct linger lg = { 1, 0 };
	int a, b, rc = 0, i;

	if (tcp_loopback_pair(&a, &b))
		bail_out("tcp_loopback_pair");
	is_int(asyncpool_zc_open(a, &o, &zs), 0, "reset: open");
	for (i = 0; i < 4; i++) {
		struct asyncpool_lease l;

		if (asyncpool_acquire(pool, &l))
			bail_out("acquire");
		rc = asyncpool_zc_send(zs, &l, 0, BUF, MSG_DONTWAIT, 0);
		if (rc != (int)BUF)
			asyncpool_zc_release(zs, &l);
	}
	setsockopt(b, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(b);       /* unread data and linger 0: a reset */
	for (i = 0; i < 10000; i++) {
		struct asyncpool_lease l;

		while (asyncpool_acquire(pool, &l))
			if (asyncpool_zc_wait(zs, -1) < 0)
				bail_out("wait");
		rc = asyncpool_zc_send(zs, &l, 0, BUF, 0, 0);
		if (rc < 0) {
			ok(asyncpool_lease_held(&l), "reset: the failed send left the lease with the caller");
			asyncpool_lease_release(&l);
			break;
		}
	}
	ok(rc == -ECONNRESET || rc == -EPIPE, "reset: the send failed with %d (-ECONNRESET or -EPIPE)", rc);
	is_int(asyncpool_zc_close(zs, -1), 0, "reset: close waits for the purged sends");
	is_int(asyncpool_available(pool), NBUF, "reset: every lease back");
	(void)st;
	close(a);
}

/* The kernel copies loopback traffic (skb_orphan_frags_rx): by default
 * the socket gives up MSG_ZEROCOPY after fallback_after copied ones. */
static void test_fallback_stats(struct asyncpool *pool, struct asyncpool *rxpool)
{
	struct asyncpool_zc_options o = zc_opts(0);
	struct asyncpool_zc_stats st;
	struct asyncpool_zc *zs;
	struct zc_reader r;
	pthread_t tid;
	int a, b;

	o.fallback_after = 8;
	if (tcp_loopback_pair(&a, &b))
		bail_out("tcp_loopback_pair");
	if (asyncpool_zc_open(a, &o, &zs))
		bail_out("open");
	memset(&r, 0, sizeof(r));
	r.pool = rxpool;
	r.fd = b;
	pthread_create(&tid, NULL, zc_reader_run, &r);
	send_stream(zs, pool, 4u << 20);
	shutdown(a, SHUT_WR);
	pthread_join(tid, NULL);
	while (zc_stats(zs).pending && asyncpool_zc_wait(zs, -1) >= 0)
		;
	st = zc_stats(zs);
	if (st.copied == st.completions && st.completions >= 8) {
		ok((st.flags & ASYNCPOOL_ZC_FELL_BACK) && !(st.flags & ASYNCPOOL_ZC_ZEROCOPY),
		   "fallback: every completion copied (%llu): the socket fell back to copying",
		   (unsigned long long)st.copied);
		ok(st.copy_sends > 0, "fallback: and sent %llu times by copying after",
		   (unsigned long long)st.copy_sends);
	} else if (st.copied == 0) {
		ok(!(st.flags & ASYNCPOOL_ZC_FELL_BACK) && st.copy_sends == 0,
		   "fallback: the kernel copied nothing: no fallback");
		skip(1, "this kernel does not copy loopback MSG_ZEROCOPY sends");
	} else {
		/* Whether fallback_after came in a row is the kernel's
		 * doing; that the socket copies exactly when it fell back
		 * is ours. */
		ok(!(st.flags & ASYNCPOOL_ZC_ZEROCOPY) == !!(st.flags & ASYNCPOOL_ZC_FELL_BACK),
		   "fallback: %llu of %llu copied: the socket copies iff it fell back (flags %#x)",
		   (unsigned long long)st.copied, (unsigned long long)st.completions, st.flags);
		skip(1, "mixed copied and zero-copy completions");
	}
	asyncpool_zc_close(zs, -1);
	close(a);
	close(b);
	is_int(asyncpool_available(pool), NBUF, "fallback: every lease back");
}

/* UDP (Linux 5.0): connected datagrams, each a lease, each received whole. */
static void test_udp(struct asyncpool *pool, struct asyncpool *rxpool)
{
	struct asyncpool_zc_options o = zc_opts(ASYNCPOOL_ZC_NO_FALLBACK);
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct asyncpool_zc_stats st;
	struct asyncpool_zc *zs;
	socklen_t sl = sizeof(sa);
	size_t bad = 0, got = 0;
	const size_t dgram = 8192;
	int s, r, rc = 0;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	s = socket(AF_INET, SOCK_DGRAM, 0);
	r = socket(AF_INET, SOCK_DGRAM, 0);
	if (bind(r, (struct sockaddr *)&sa, sizeof(sa)) || getsockname(r, (struct sockaddr *)&sa, &sl) ||
	    connect(s, (struct sockaddr *)&sa, sizeof(sa)))
		bail_out("udp sockets");
	is_int(asyncpool_zc_open(s, &o, &zs), 0, "udp: open");
	for (unsigned i = 0; i < 256 && rc >= 0; i++) {
		struct asyncpool_lease l, in;

		while (asyncpool_acquire(pool, &l))
			if (asyncpool_zc_wait(zs, -1) < 0)
				bail_out("wait");
		pattern_fill(asyncpool_span_ptr(l.span), (uint64_t)i * dgram, dgram);
		rc = asyncpool_zc_send(zs, &l, 0, dgram, 0, 0);
		if (rc != (int)dgram)
			break;
		rc = asyncpool_zc_recv(rxpool, r, 0, &in);
		if (rc != (int)dgram)
			break;
		bad += pattern_check(asyncpool_span_ptr(in.span), (uint64_t)i * dgram, in.span.length);
		got += in.span.length;
		asyncpool_lease_release(&in);
	}
	ok(got == 256 * dgram && bad == 0, "udp: 256 datagrams of 8 KiB, every byte right (rc %d)", rc);
	while (zc_stats(zs).pending && asyncpool_zc_wait(zs, -1) >= 0)
		;
	st = zc_stats(zs);
	ok(st.sends == 256 && st.completions == 256, "udp: 256 sends, 256 completions (%llu ranges)",
	   (unsigned long long)st.notifications);
	is_int(asyncpool_available(pool), NBUF, "udp: every lease back");
	is_int(asyncpool_zc_close(zs, 0), 0, "udp: close");
	close(s);
	close(r);
}

/*
 * RLIMIT_MEMLOCK 0 without CAP_IPC_LOCK: the kernel refuses to pin the
 * pages of any send (mm_account_pinned_pages: ENOBUFS).  With nothing in
 * flight to wait for, the backend reaps, tries again, and copies.
 */
static int enobufs_child(struct asyncpool *pool)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];
	struct rlimit rl = { 0, 0 };
	struct asyncpool_zc_options o = zc_opts(ASYNCPOOL_ZC_NO_FALLBACK);
	struct asyncpool_zc_stats st;
	struct asyncpool_zc *zs;
	struct asyncpool_lease l;
	unsigned char *buf = malloc(BUF);
	int a, b, rc;

	if (syscall(SYS_capget, &h, d))
		return 10;
	d[CAP_IPC_LOCK / 32].effective &= ~(1u << (CAP_IPC_LOCK % 32));
	d[CAP_IPC_LOCK / 32].permitted &= ~(1u << (CAP_IPC_LOCK % 32));
	if (syscall(SYS_capset, &h, d) || setrlimit(RLIMIT_MEMLOCK, &rl))
		return 11;
	if (tcp_loopback_pair(&a, &b) || asyncpool_zc_open(a, &o, &zs))
		return 12;
	if (asyncpool_acquire(pool, &l))
		return 13;
	pattern_fill(asyncpool_span_ptr(l.span), 0, BUF);
	rc = asyncpool_zc_send(zs, &l, 0, BUF, 0, 0);
	if (rc != (int)BUF)
		return 14;
	st = zc_stats(zs);
	if (st.enobufs != 2 || st.enobufs_copies != 1 || st.sends != 0 || st.copy_sends != 1)
		return 15;
	if (asyncpool_lease_held(&l) || asyncpool_available(pool) != NBUF)
		return 16;
	if (read(b, buf, BUF) <= 0 || pattern_check(buf, 0, 1000))
		return 17;
	return asyncpool_zc_close(zs, 0) ? 18 : 0;
}

static void test_enobufs(struct asyncpool *pool)
{
	pid_t pid;
	int st;

	fflush(stdout);
	pid = fork_or_bail();
	if (pid == 0)
		_exit(enobufs_child(pool));
	waitpid(pid, &st, 0);
	if (WIFEXITED(st) && (WEXITSTATUS(st) == 10 || WEXITSTATUS(st) == 11)) {
		skip(1, "cannot drop CAP_IPC_LOCK or lower RLIMIT_MEMLOCK");
		return;
	}
	is_int(WIFEXITED(st) ? WEXITSTATUS(st) : -1, 0,
	       "ENOBUFS (RLIMIT_MEMLOCK 0): reaped, tried again, copied; the lease back");
}

static void drain(int fd)
{
	char tmp[BUF];

	while (read(fd, tmp, sizeof(tmp)) > 0)
		;
}

/* Both ends shut down for writing: the socket reports POLLHUP at once,
 * whatever it waits for.  Sends in flight that do not complete must make
 * asyncpool_zc_wait() wait its time and answer -ETIMEDOUT, not 0 at once
 * (a close loop around it would spin). */
static void test_wait_hup(struct asyncpool *pool)
{
	struct asyncpool_zc_options o = zc_opts(ASYNCPOOL_ZC_NO_FALLBACK);
	struct asyncpool_zc *zs;
	int a, b;

	if (tcp_loopback_pair(&a, &b))
		bail_out("tcp_loopback_pair");
	is_int(asyncpool_zc_open(a, &o, &zs), 0, "hup: open");
	zc_fill_kept(zs, pool, BUF);
	/* What was delivered is acknowledged: those completions first. */
	while (asyncpool_zc_wait(zs, 100 * 1000000) >= 0)
		;
	shutdown(b, SHUT_WR);
	shutdown(a, SHUT_WR);
	ok(zc_stats(zs).pending > 0, "hup: sends in flight, the peer reads nothing");
	is_int(asyncpool_zc_wait(zs, 50 * 1000000), -ETIMEDOUT,
	       "hup: wait with POLLHUP up and nothing complete: -ETIMEDOUT");
	is_int(asyncpool_zc_close(zs, 0), -EBUSY, "hup: close with no time: -EBUSY");
	drain(b);
	is_int(asyncpool_zc_close(zs, -1), 0, "hup: the peer read all: close");
	is_int(asyncpool_available(pool), NBUF, "hup: every lease back");
	close(a);
	close(b);
}

/* A peer that never reads: the backend's reference keeps the connection
 * open whatever the caller closes; connect(2) with AF_UNSPEC resets it
 * (tcp_disconnect() purges the queue), as asyncpool_zc_close(3) says. */
static void test_disconnect(struct asyncpool *pool)
{
	struct asyncpool_zc_options o = zc_opts(ASYNCPOOL_ZC_NO_FALLBACK);
	struct sockaddr sa = { .sa_family = AF_UNSPEC };
	struct asyncpool_zc *zs;
	int a, b;

	if (tcp_loopback_pair(&a, &b))
		bail_out("tcp_loopback_pair");
	is_int(asyncpool_zc_open(a, &o, &zs), 0, "disconnect: open");
	zc_fill_kept(zs, pool, BUF);
	ok(zc_stats(zs).pending > 0, "disconnect: sends in flight, the peer reads nothing");
	is_int(connect(a, &sa, sizeof(sa)), 0, "disconnect: connect(AF_UNSPEC)");
	close(a);
	is_int(asyncpool_zc_close(zs, 10ll * 1000000000), 0, "disconnect: the sends complete: close");
	is_int(asyncpool_available(pool), NBUF, "disconnect: every lease back");
	close(b);
}

/* IPv6: the completions come as IPV6_RECVERR at SOL_IPV6. */
static void test_ipv6(struct asyncpool *pool)
{
	struct asyncpool_zc_options o = zc_opts(ASYNCPOOL_ZC_NO_FALLBACK);
	struct sockaddr_in6 sa = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	socklen_t sl = sizeof(sa);
	struct asyncpool_zc_stats st;
	struct asyncpool_lease l;
	struct asyncpool_zc *zs;
	char tmp[4096];
	int lfd, a, b;

	lfd = socket(AF_INET6, SOCK_STREAM, 0);
	a = socket(AF_INET6, SOCK_STREAM, 0);
	if (lfd < 0 || a < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 1) ||
	    getsockname(lfd, (struct sockaddr *)&sa, &sl) ||
	    connect(a, (struct sockaddr *)&sa, sizeof(sa))) {
		skip(1, "no IPv6 loopback here");
		if (lfd >= 0)
			close(lfd);
		if (a >= 0)
			close(a);
		return;
	}
	b = accept(lfd, NULL, NULL);
	close(lfd);
	is_int(asyncpool_zc_open(a, &o, &zs), 0, "ipv6: open");
	if (asyncpool_acquire(pool, &l))
		bail_out("acquire");
	is_int(asyncpool_zc_send(zs, &l, 0, 4096, 0, 0), 4096, "ipv6: send");
	is_int((int)read(b, tmp, sizeof(tmp)), 4096, "ipv6: received");
	while (zc_stats(zs).pending && asyncpool_zc_wait(zs, 5ll * 1000000000) >= 0)
		;
	st = zc_stats(zs);
	ok(st.completions == 1 && st.other == 0 && st.bad_ranges == 0,
	   "ipv6: one completion, nothing else");
	is_int(asyncpool_zc_close(zs, 1000000000), 0, "ipv6: close");
	is_int(asyncpool_available(pool), NBUF, "ipv6: the lease back");
	close(a);
	close(b);
}

/*
 * ASYNCPOOL_ZC_COPY on a Unix socket: recvmsg(2) there knows no
 * MSG_ERRQUEUE and reads the data instead: a stream gave 0 bytes for ever
 * (a reap that never ended), datagrams were eaten.  A socket that never
 * sends with MSG_ZEROCOPY has nothing to reap.
 */
static int copy_unix_child(int type)
{
	struct asyncpool_zc_options o = zc_opts(ASYNCPOOL_ZC_COPY);
	struct asyncpool_zc *zs;
	char c = 0;
	int sv[2];

	alarm(10);
	if (socketpair(AF_UNIX, type, 0, sv) || write(sv[1], "x", 1) != 1)
		return 10;
	if (asyncpool_zc_open(sv[0], &o, &zs))
		return 11;
	if (asyncpool_zc_reap(zs) != 0)
		return 12;
	if (asyncpool_zc_close(zs, 0) != 0)
		return 13;
	if (recv(sv[0], &c, 1, MSG_DONTWAIT) != 1 || c != 'x')
		return 14;
	return 0;
}

static void test_copy_unix(void)
{
	static const int types[] = { SOCK_STREAM, SOCK_DGRAM };

	for (unsigned i = 0; i < 2; i++) {
		pid_t pid;
		int st;

		fflush(stdout);
		pid = fork();
		if (pid == 0)
			_exit(copy_unix_child(types[i]));
		if (pid < 0 || waitpid(pid, &st, 0) != pid)
			bail_out("fork");
		ok(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		   "COPY on a Unix %s socket: reap and close return, the data is still there "
		   "(exit %d, signal %d)", i ? "datagram" : "stream",
		   WIFEXITED(st) ? WEXITSTATUS(st) : -1, WIFSIGNALED(st) ? WTERMSIG(st) : 0);
	}
}

/* recv(2) with MSG_TRUNC answers a datagram's whole length, more than the
 * buffer holds: refused, rather than a span beyond the buffer. */
static void test_recv_trunc(void)
{
	struct asyncpool *small = make_pool(mp, 4096, 2, 0);
	struct sockaddr_in sin;
	socklen_t sl = sizeof(sin);
	struct asyncpool_lease l;
	static char dgram[8192];
	int u, v;

	u = socket(AF_INET, SOCK_DGRAM, 0);
	v = socket(AF_INET, SOCK_DGRAM, 0);
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (u < 0 || v < 0 || bind(v, (struct sockaddr *)&sin, sizeof(sin)) ||
	    getsockname(v, (struct sockaddr *)&sin, &sl) ||
	    sendto(u, dgram, sizeof(dgram), 0, (struct sockaddr *)&sin, sizeof(sin)) !=
	    (ssize_t)sizeof(dgram))
		bail_out("udp");
	is_int(asyncpool_zc_recv(small, v, MSG_TRUNC | MSG_DONTWAIT, &l), -EINVAL,
	       "recv: MSG_TRUNC: -EINVAL");
	ok(!asyncpool_lease_held(&l) && asyncpool_available(small) == 2,
	   "recv: MSG_TRUNC: no lease taken");
	is_int(asyncpool_zc_recv(small, v, MSG_DONTWAIT, &l), 4096,
	       "recv: the datagram is still there, truncated to the buffer");
	ok(l.span.length == 4096, "recv: the span is the buffer's length");
	asyncpool_lease_release(&l);
	asyncpool_destroy(small);
	close(u);
	close(v);
}

/* A notification with a timestamp (SO_TIMESTAMP) is one completion, not
 * an "other" message as well. */
static void test_other_counts_messages(struct asyncpool *pool)
{
	struct asyncpool_zc_options o = zc_opts(ASYNCPOOL_ZC_NO_FALLBACK);
	struct asyncpool_zc_stats st;
	struct asyncpool_lease l;
	struct asyncpool_zc *zs;
	int a, b, one = 1;

	if (tcp_loopback_pair(&a, &b))
		bail_out("tcp_loopback_pair");
	if (setsockopt(a, SOL_SOCKET, SO_TIMESTAMP, &one, sizeof(one)))
		bail_out("SO_TIMESTAMP");
	is_int(asyncpool_zc_open(a, &o, &zs), 0, "timestamps: open");
	if (asyncpool_acquire(pool, &l))
		bail_out("acquire");
	is_int(asyncpool_zc_send(zs, &l, 0, 4096, 0, 0), 4096, "timestamps: send");
	while (zc_stats(zs).pending)
		if (asyncpool_zc_wait(zs, -1) < 0)
			bail_out("wait");
	st = zc_stats(zs);
	ok(st.completions == 1 && st.other == 0,
	   "timestamps: one completion, no other message (completions %llu, other %llu)",
	   (unsigned long long)st.completions, (unsigned long long)st.other);
	is_int(asyncpool_zc_close(zs, -1), 0, "timestamps: close");
	is_int(asyncpool_available(pool), NBUF, "timestamps: the lease back");
	close(a);
	close(b);
}

/* A failed open leaves the socket as it was: SO_ZEROCOPY not set when no
 * descriptor is left for the backend's reference (EMFILE). */
static void test_open_emfile(void)
{
	pid_t pid;
	int a, b, st;

	if (tcp_loopback_pair(&a, &b))
		bail_out("tcp_loopback_pair");
	pid = fork();
	if (pid == 0) {
		struct rlimit rl = { 64, 64 };
		struct asyncpool_zc *zs;
		socklen_t len = sizeof(int);
		int v = -1, rc;

		if (setrlimit(RLIMIT_NOFILE, &rl))
			_exit(10);
		while (dup(0) >= 0)
			;
		rc = asyncpool_zc_open(a, NULL, &zs);
		if (rc != -EMFILE)
			_exit(11);
		if (getsockopt(a, SOL_SOCKET, SO_ZEROCOPY, &v, &len))
			_exit(12);
		_exit(v == 0 ? 0 : 13);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		bail_out("fork");
	is_int(WIFEXITED(st) ? WEXITSTATUS(st) : -1, 0,
	       "open: -EMFILE, and SO_ZEROCOPY left unset on the socket");
	close(a);
	close(b);
}

/*
 * A UDP datagram dropped after the kernel built it (and gave it a
 * sequence number): a full device queue (tun, no qdisc) answers ENOBUFS to a
 * socket with IP_RECVERR (a netfilter or BPF drop would answer EPERM), yet the number
 * is taken and its completion comes.  A tun device nobody reads, in a
 * network namespace of our own, is the full queue.  Every lease must come
 * back all the same, none before the kernel is done with it.
 */
static int udp_dropped_child(struct asyncpool *pool)
{
	struct asyncpool_zc_options o = zc_opts(ASYNCPOOL_ZC_NO_FALLBACK);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(9) };
	struct asyncpool_zc_stats st;
	struct asyncpool_zc *zs;
	struct ifreq ifr;
	char pkt[2048];
	int t, c, u, one = 1, rc = 0, i;

	if (unshare(CLONE_NEWNET))
		return 77;
	t = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (t < 0)
		return 77;
	memset(&ifr, 0, sizeof(ifr));
	ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
	strcpy(ifr.ifr_name, "apzc0");
	c = socket(AF_INET, SOCK_DGRAM, 0);
	if (ioctl(t, TUNSETIFF, &ifr) || c < 0)
		return 77;
	sa.sin_addr.s_addr = htonl(0x0a4d0001);        /* 10.77.0.1/24 */
	memcpy(&ifr.ifr_addr, &sa, sizeof(sa));
	if (ioctl(c, SIOCSIFADDR, &ifr))
		return 20;
	sa.sin_addr.s_addr = htonl(0xffffff00);
	memcpy(&ifr.ifr_netmask, &sa, sizeof(sa));
	if (ioctl(c, SIOCSIFNETMASK, &ifr))
		return 21;
	ifr.ifr_qlen = 8;                               /* the queue: 8 datagrams */
	if (ioctl(c, SIOCSIFTXQLEN, &ifr))
		return 22;
	if (ioctl(c, SIOCGIFFLAGS, &ifr))
		return 23;
	ifr.ifr_flags |= IFF_UP;
	if (ioctl(c, SIOCSIFFLAGS, &ifr))
		return 24;
	/* No qdisc: the device's drop comes back to the sender (ENOBUFS). */
	if (system("tc qdisc replace dev apzc0 root noqueue >/dev/null 2>&1"))
		return 77;
	u = socket(AF_INET, SOCK_DGRAM, 0);
	sa.sin_addr.s_addr = htonl(0x0a4d0002);
	if (u < 0 || connect(u, (struct sockaddr *)&sa, sizeof(sa)) ||
	    setsockopt(u, SOL_IP, IP_RECVERR, &one, sizeof(one)))
		return 25;
	if (asyncpool_zc_open(u, &o, &zs))
		return 26;
	/* Fill the device's queue until it drops. */
	for (i = 0; i < 64; i++) {
		struct asyncpool_lease l;

		if (asyncpool_acquire(pool, &l))
			return 27;
		rc = asyncpool_zc_send(zs, &l, 0, 1000, 0, 0);
		if (rc != 1000) {
			asyncpool_zc_release(zs, &l);
			break;
		}
	}
	if (rc != -ENOBUFS)
		return 28;
	/* The device sends what it queued; three datagrams more; sent too. */
	while (read(t, pkt, sizeof(pkt)) > 0)
		;
	for (i = 0; i < 3; i++) {
		struct asyncpool_lease l;

		while (asyncpool_acquire(pool, &l))
			if (asyncpool_zc_wait(zs, 1000000000) < 0)
				return 29;
		rc = asyncpool_zc_send(zs, &l, 0, 1000, 0, 0);
		if (rc != 1000)
			return 30;
	}
	while (read(t, pkt, sizeof(pkt)) > 0)
		;
	rc = asyncpool_zc_close(zs, 2000000000);
	if (rc) {
		st = zc_stats(zs);
		diag("close: %d; %llu sends, %llu pending, %llu completions in %llu ranges, "
		     "%llu bad ranges, %llu ENOBUFS, %u leases out", rc,
		     (unsigned long long)st.sends, (unsigned long long)st.pending,
		     (unsigned long long)st.completions, (unsigned long long)st.notifications,
		     (unsigned long long)st.bad_ranges, (unsigned long long)st.enobufs,
		     st.leases_out);
		return 33;
	}
	if (asyncpool_available(pool) != NBUF)
		return 34;
	return 0;
}

static void test_udp_dropped(struct asyncpool *pool)
{
	pid_t pid;
	int st;

	fflush(stdout);
	pid = fork();
	if (pid == 0)
		_exit(udp_dropped_child(pool));
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		bail_out("fork");
	if (WIFEXITED(st) && WEXITSTATUS(st) == 77) {
		skip(1, "no network namespace, tun device or tc(8) here");
		return;
	}
	is_int(WIFEXITED(st) ? WEXITSTATUS(st) : -1, 0,
	       "udp, a datagram dropped after it was numbered (ENOBUFS, IP_RECVERR): "
	       "every lease back, close 0");
}

int main(void)
{
	struct asyncpool_backend_info bi;
	struct asyncpool *pool, *rxpool;

	alarm(120);
	memset(&bi, 0, sizeof(bi));
	is_int(asyncpool_backend_probe(&bi), -EINVAL, "probe: size 0: -EINVAL");
	is_int(asyncpool_backend_probe(NULL), -EINVAL, "probe: NULL: -EINVAL");
	bi.size = sizeof(bi);
	is_int(asyncpool_backend_probe(&bi), 0, "probe");
	ok(bi.backends & ASYNCPOOL_BACKEND_MEMORY, "probe: the memory backend is always there");
	ok(bi.best == ((bi.backends & ASYNCPOOL_BACKEND_URING) ? ASYNCPOOL_BACKEND_URING :
		       (bi.backends & ASYNCPOOL_BACKEND_ZEROCOPY_TCP) ?
		       ASYNCPOOL_BACKEND_ZEROCOPY_TCP : ASYNCPOOL_BACKEND_MEMORY),
	   "probe: best is io_uring, else MSG_ZEROCOPY, else memory (0x%x of 0x%x; io_uring %d, "
	   "io_uring_disabled %d)", bi.best, bi.backends, bi.uring_error, bi.uring_disabled);
#ifdef HAVE_LIBURING
	ok(!(bi.backends & ASYNCPOOL_BACKEND_URING) == !!bi.uring_error,
	   "probe: io_uring there exactly when its setup worked");
#else
	ok(!(bi.backends & ASYNCPOOL_BACKEND_URING) && bi.best != ASYNCPOOL_BACKEND_URING,
	   "probe: built without liburing, io_uring is no backend (its setup answered %d)",
	   bi.uring_error);
#endif
	if (!(bi.backends & ASYNCPOOL_BACKEND_ZEROCOPY_TCP)) {
		skip(1, "no SO_ZEROCOPY on TCP here (%d): Linux 4.14 or later", bi.zerocopy_error);
		return done_testing();
	}
	if (asyncpool_proactor_create_memory(&mp))
		bail_out("proactor");
	pool = make_pool(mp, BUF, NBUF, 0);
	rxpool = make_pool(mp, BUF, 8, 0);

	test_args(pool);
	test_tcp(pool, rxpool, ASYNCPOOL_ZC_NO_FALLBACK, 64u << 20, "tcp zero-copy");
	test_tcp(pool, rxpool, ASYNCPOOL_ZC_COPY, 16u << 20, "tcp copying");
	test_after_close(pool);
	test_reset(pool);
	test_fallback_stats(pool, rxpool);
	if (bi.backends & ASYNCPOOL_BACKEND_ZEROCOPY_UDP)
		test_udp(pool, rxpool);
	else
		skip(1, "no SO_ZEROCOPY on UDP here: Linux 5.0 or later");
	test_enobufs(pool);
	test_wait_hup(pool);
	test_disconnect(pool);
	test_ipv6(pool);
	test_copy_unix();
	test_recv_trunc();
	test_other_counts_messages(pool);
	test_open_emfile();
	if (bi.backends & ASYNCPOOL_BACKEND_ZEROCOPY_UDP)
		test_udp_dropped(pool);

	is_int(asyncpool_available(rxpool), 8, "the receive pool is full too");
	asyncpool_destroy(rxpool);
	asyncpool_destroy(pool);
	asyncpool_proactor_destroy(mp);
	return done_testing();
}
