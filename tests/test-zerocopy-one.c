/* SPDX-License-Identifier: MIT */
/*
 * One backend object per socket (issue 36, item 3).  Each follows the
 * kernel's per-socket counter of MSG_ZEROCOPY sends from 0 and reads the
 * socket's error queue: a second object on the socket, or one used on
 * both sides of a fork(), would number its sends wrong and take the
 * other's completions.  Real TCP sockets over 127.0.0.1, a real fork():
 *  - a second object on the socket, or on a duplicate of it: -EBUSY;
 *    the first keeps working;
 *  - after a close, the socket takes a new object only if the old one
 *    never moved the kernel's counter (SO_ZEROCOPY is given back);
 *  - a socket the caller set SO_ZEROCOPY on: -EBUSY;
 *  - another process between its look and its set (it holds the record
 *    lock): -EBUSY, the socket unchanged;
 *  - a child of fork(): the parent's object refuses to send, reap, wait
 *    and release (-EBUSY), the socket refuses a new object, and a close
 *    frees the child's copy touching nothing: the parent's completion
 *    stays in the error queue for the parent, the socket keeps
 *    SO_ZEROCOPY.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <asyncpool.h>
#include "tap.h"
#include "testutil.h"
#include "shared-common.h"
#include "../lib/zerocopy_internal.h"
#include "../tools/net.h"

#define BUF  4096u
#define NBUF 8u
/* A failure bound on the waits for a completion, not a measure. */
#define BOUND_NS (10ll * 1000000000)

#ifndef SO_ZEROCOPY
#define SO_ZEROCOPY 60
#endif

static struct asyncpool *pool;

static int so_zerocopy(int fd)
{
	int on = -1;
	socklen_t len = sizeof(on);

	return getsockopt(fd, SOL_SOCKET, SO_ZEROCOPY, &on, &len) ? -errno : on;
}

static uint64_t zc_stats_sends(struct asyncpool_zc *zs)
{
	struct asyncpool_zc_stats st = { .size = sizeof(st) };

	return asyncpool_zc_stats(zs, &st) ? 0 : st.sends;
}

static void pair(int *a, int *b)
{
	if (tcp_loopback_pair(a, b))
		bail_out("tcp_loopback_pair");
}

/* Read n bytes from fd (the peer's side of a send). */
static void drain(int fd, size_t n)
{
	char buf[BUF];

	while (n > 0) {
		ssize_t got = read(fd, buf, n < sizeof(buf) ? n : sizeof(buf));

		if (got <= 0)
			bail_out("peer read");
		n -= (size_t)got;
	}
}

/* Send one whole lease on zs, handed over; the peer b reads it. */
static int send_one(struct asyncpool_zc *zs, int b)
{
	struct asyncpool_lease l;
	int rc;

	if (asyncpool_acquire(pool, &l))
		bail_out("acquire");
	memset(asyncpool_span_ptr(l.span), 'x', BUF);
	rc = asyncpool_zc_send(zs, &l, 0, BUF, 0, 0);
	if (rc == (int)BUF)
		drain(b, BUF);
	else
		asyncpool_lease_release(&l);
	return rc;
}

/* Wait (10 s at most, a failure bound) until the error queue of fd has
 * something: the completion of a send, not read yet. */
static void await_completion(int fd)
{
	struct pollfd pfd = { .fd = fd };

	if (poll(&pfd, 1, 10000) != 1 || !(pfd.revents & POLLERR))
		bail_out("no completion in the error queue within 10 s");
}

static void same_process(void)
{
	struct asyncpool_zc_options o;
	struct asyncpool_zc *zs, *z2 = (void *)1;
	int a, b, d;

	pair(&a, &b);
	is_int(asyncpool_zc_open(a, NULL, &zs), 0, "one process: open");
	is_int(asyncpool_zc_open(a, NULL, &z2), -EBUSY, "one process: a second object: -EBUSY");
	ok(z2 == NULL, "one process: and *out NULL");
	d = dup(a);
	is_int(asyncpool_zc_open(d, NULL, &z2), -EBUSY, "one process: on a duplicate: -EBUSY");
	close(d);
	memset(&o, 0, sizeof(o));
	o.size = sizeof(o);
	o.flags = ASYNCPOOL_ZC_COPY;
	is_int(asyncpool_zc_open(a, &o, &z2), 0,
	       "one process: ASYNCPOOL_ZC_COPY beside it (no counter, no error queue): 0");
	is_int(asyncpool_zc_close(z2, 0), 0, "one process: the copying one closes");
	is_int(so_zerocopy(a), 1, "one process: and leaves SO_ZEROCOPY to the first");
	is_int(send_one(zs, b), (int)BUF, "one process: the first still sends");
	is_int(asyncpool_zc_wait(zs, BOUND_NS) >= 0 && asyncpool_zc_close(zs, BOUND_NS) == 0, 1,
	       "one process: its completion comes, it closes");
	is_int(asyncpool_available(pool), NBUF, "one process: its lease back");
	is_int(asyncpool_zc_open(a, NULL, &zs), -EBUSY,
	       "after a close that moved the counter: a new object would count from 0: -EBUSY");
	is_int(so_zerocopy(a), 1, "after a close that moved the counter: SO_ZEROCOPY kept");
	close(a);
	close(b);

	pair(&a, &b);
	is_int(asyncpool_zc_open(a, NULL, &zs), 0, "no send: open");
	is_int(asyncpool_zc_close(zs, 0), 0, "no send: close");
	is_int(so_zerocopy(a), 0, "no send: the socket is as it was (SO_ZEROCOPY 0)");
	is_int(asyncpool_zc_open(a, NULL, &zs), 0, "no send: a new object opens");
	is_int(send_one(zs, b), (int)BUF, "no send: and sends");
	is_int(asyncpool_zc_close(zs, BOUND_NS), 0, "no send: close");
	close(a);
	close(b);

	pair(&a, &b);
	if (setsockopt(a, SOL_SOCKET, SO_ZEROCOPY, &(int){ 1 }, sizeof(int)))
		bail_out("SO_ZEROCOPY");
	is_int(asyncpool_zc_open(a, NULL, &zs), -EBUSY,
	       "the caller's own SO_ZEROCOPY (sends we cannot count): -EBUSY");
	close(a);
	close(b);
}

/* Another process holds the claim's record lock: it is between its
 * look at SO_ZEROCOPY and its set. */
static void other_process(void)
{
	struct asyncpool_zc *zs = (void *)1;
	int a, b, go[2], done[2], st;
	char c = 0;
	pid_t pid;

	pair(&a, &b);
	if (pipe(go) || pipe(done))
		bail_out("pipe");
	pid = fork_or_bail();
	if (pid == 0) {
		struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET,
				    .l_start = AP_ZC_CLAIM_BYTE, .l_len = 1 };

		alarm(30);
		if (fcntl(a, F_SETLK, &fl) || write(go[1], "l", 1) != 1 ||
		    read(done[0], &c, 1) != 1)
			_exit(2);
		_exit(0);
	}
	if (read(go[0], &c, 1) != 1)
		bail_out("the locker");
	is_int(asyncpool_zc_open(a, NULL, &zs), -EBUSY,
	       "another process between its look and its set: -EBUSY");
	is_int(so_zerocopy(a), 0, "another process: the socket unchanged");
	if (write(done[1], "d", 1) != 1)
		bail_out("pipe");
	st = wait_peer(pid);
	is_int(st, 0, "another process: it exited 0");
	is_int(asyncpool_zc_open(a, NULL, &zs), 0, "once it is gone: open");
	is_int(asyncpool_zc_close(zs, 0), 0, "once it is gone: close");
	close(go[0]);
	close(go[1]);
	close(done[0]);
	close(done[1]);
	close(a);
	close(b);
}

/* What the child of fork() reports. */
struct report {
	int send, reap, wait, release, held, open, close;
};

static void forked(void)
{
	struct asyncpool_lease kept;
	struct asyncpool_zc *zs;
	struct report r;
	int a, b, p[2], st;
	pid_t pid;

	pair(&a, &b);
	is_int(asyncpool_zc_open(a, NULL, &zs), 0, "fork: open");
	is_int(send_one(zs, b), (int)BUF, "fork: a send, its completion unread");
	await_completion(a);
	if (asyncpool_acquire(pool, &kept) || pipe(p))
		bail_out("acquire, pipe");
	memset(asyncpool_span_ptr(kept.span), 'k', BUF);
	pid = fork_or_bail();
	if (pid == 0) {
		struct asyncpool_zc *z2 = NULL;

		alarm(30);
		memset(&r, 0, sizeof(r));
		r.send = asyncpool_zc_send(zs, &kept, 0, BUF, 0, 0);
		r.reap = asyncpool_zc_reap(zs);
		r.wait = asyncpool_zc_wait(zs, 0);
		r.release = asyncpool_zc_release(zs, &kept);
		r.held = asyncpool_lease_held(&kept);
		r.open = asyncpool_zc_open(a, NULL, &z2);
		r.close = asyncpool_zc_close(zs, 0);
		_exit(write_full(p[1], &r, sizeof(r)) ? 9 : 0);
	}
	close(p[1]);
	if (read_full(p[0], &r, sizeof(r)))
		bail_out("the child's report");
	close(p[0]);
	st = wait_peer(pid);
	is_int(st, 0, "fork: the child exited 0");
	is_int(r.send, -EBUSY, "fork: the child sends on the parent's object: -EBUSY");
	is_int(r.reap, -EBUSY, "fork: reaps: -EBUSY");
	is_int(r.wait, -EBUSY, "fork: waits: -EBUSY");
	ok(r.release == -EBUSY && r.held, "fork: releases: -EBUSY (%d), the lease its own still",
	   r.release);
	is_int(r.open, -EBUSY, "fork: opens a new object on the socket: -EBUSY");
	is_int(r.close, 0, "fork: closes its copy: 0");
	is_int(so_zerocopy(a), 1, "fork: the child's close left SO_ZEROCOPY to the parent");
	is_int(asyncpool_zc_reap(zs), 1, "fork: the parent reaps its completion (the child took none)");
	is_int(send_one(zs, b), (int)BUF, "fork: the parent sends");
	ok(asyncpool_zc_wait(zs, BOUND_NS) >= 0 && asyncpool_zc_release(zs, &kept) == 0,
	   "fork: its completion comes, it hands over the kept lease");
	is_int(asyncpool_zc_close(zs, BOUND_NS), 0, "fork: the parent closes");
	is_int(asyncpool_available(pool), NBUF, "fork: every lease back");
	close(a);
	close(b);

	/* A child's close of an object that never sent: the socket stays
	 * the parent's (a close in the parent would give SO_ZEROCOPY back). */
	pair(&a, &b);
	is_int(asyncpool_zc_open(a, NULL, &zs), 0, "fork, nothing sent: open");
	pid = fork_or_bail();
	if (pid == 0) {
		alarm(30);
		_exit(asyncpool_zc_close(zs, 0) ? 3 : 0);
	}
	is_int(wait_peer(pid), 0, "fork, nothing sent: the child closed its copy");
	is_int(so_zerocopy(a), 1, "fork, nothing sent: SO_ZEROCOPY still the parent's");
	is_int(send_one(zs, b), (int)BUF, "fork, nothing sent: the parent sends");
	is_int(asyncpool_zc_wait(zs, BOUND_NS) >= 0 && zc_stats_sends(zs) == 1, 1,
	       "fork, nothing sent: with MSG_ZEROCOPY, its completion comes");
	is_int(asyncpool_zc_close(zs, BOUND_NS), 0, "fork, nothing sent: close");
	is_int(asyncpool_available(pool), NBUF, "fork, nothing sent: every lease back");
	close(a);
	close(b);
}

int main(void)
{
	struct asyncpool_proactor *mp;
	struct asyncpool_zc *zs;
	int a, b, rc;

	if (asyncpool_proactor_create_memory(&mp))
		bail_out("proactor");
	pool = make_pool(mp, BUF, NBUF, 0);
	pair(&a, &b);
	rc = asyncpool_zc_open(a, NULL, &zs);
	close(a);
	close(b);
	if (rc == -EOPNOTSUPP) {
		skip_all("no MSG_ZEROCOPY on TCP here");
	}
	if (rc || asyncpool_zc_close(zs, 0))
		bail_out("open: %d", rc);
	plan(19 + 5 + 22 + 1);
	same_process();
	other_process();
	forked();
	is_int(asyncpool_check(pool), 0, "the pool is consistent");
	asyncpool_destroy(pool);
	asyncpool_proactor_destroy(mp);
	return done_testing();
}
