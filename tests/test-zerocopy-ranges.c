/* SPDX-License-Identifier: MIT */
/*
 * The socket backend's bookkeeping, driven by hand: sendmsg(2) replaced
 * through the test hook (short sends, failed sends, ENOBUFS), and
 * completion ranges given as the error queue would give them: out of
 * order, coalesced over several leases, wrapping the u32 counter,
 * bogus.  What the kernel cannot be made to do on demand.
 */
#include "config.h"

#include <errno.h>
#include <time.h>
#include <linux/errqueue.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define ASYNCPOOL_TEST_HOOKS 1
#include <asyncpool.h>
#include "tap.h"
#include "testutil.h"
#include "../lib/zerocopy_internal.h"
#include "../tools/net.h"

#ifndef MSG_ZEROCOPY
#define MSG_ZEROCOPY 0x4000000
#endif

/* The fake sendmsg: answers from a script, records what it was asked. */
static ssize_t script[64];
static int script_errno[64];
static unsigned nscript, calls;
static int last_flags;

static ssize_t fake_sendmsg(int fd, const struct msghdr *msg, int flags)
{
	ssize_t v;

	(void)fd;
	last_flags = flags;
	if (calls >= nscript)
		return (ssize_t)msg->msg_iov[0].iov_len;
	v = script[calls];
	if (v < 0)
		errno = script_errno[calls];
	calls++;
	return v;
}

/*
 * The fake error queue: messages of up to two control messages each,
 * as recvmsg(2) with MSG_ERRQUEUE gives them; then EAGAIN.
 */
struct fake_cmsg {
	int level, type;                /* SOL_IP/IP_RECVERR, ...; type 0: none */
	struct sock_extended_err ee;
};
static struct fake_cmsg queue[8][2];
static unsigned nqueue, queued_at;

static ssize_t fake_recvmsg(int fd, struct msghdr *msg, int flags)
{
	struct cmsghdr *cm;
	size_t used = 0;

	(void)fd;
	if (!(flags & MSG_ERRQUEUE) || queued_at >= nqueue) {
		errno = EAGAIN;
		return -1;
	}
	cm = CMSG_FIRSTHDR(msg);
	for (int k = 0; k < 2 && cm; k++) {
		struct fake_cmsg *f = &queue[queued_at][k];

		if (!f->type)
			break;
		cm->cmsg_level = f->level;
		cm->cmsg_type = f->type;
		cm->cmsg_len = CMSG_LEN(sizeof(f->ee));
		memcpy(CMSG_DATA(cm), &f->ee, sizeof(f->ee));
		used += CMSG_SPACE(sizeof(f->ee));
		cm = CMSG_NXTHDR(msg, cm);
	}
	msg->msg_controllen = used;
	queued_at++;
	return 0;
}

/* Queue a message: a control message of level/type, origin, errno, code, range. */
static void enqueue(unsigned k, int level, int type, uint8_t origin, uint32_t err, uint8_t code,
		    uint32_t lo, uint32_t hi)
{
	struct fake_cmsg *f = &queue[nqueue][k];

	memset(f, 0, sizeof(*f));
	f->level = level;
	f->type = type;
	f->ee.ee_origin = origin;
	f->ee.ee_errno = err;
	f->ee.ee_code = code;
	f->ee.ee_info = lo;
	f->ee.ee_data = hi;
	if (k == 0)
		memset(&queue[nqueue][1], 0, sizeof(queue[nqueue][1]));
}

static void answer(ssize_t v, int err)
{
	script[nscript] = v;
	script_errno[nscript++] = err;
}

static struct asyncpool_zc_stats stats(struct asyncpool_zc *zs)
{
	struct asyncpool_zc_stats st = { .size = sizeof(st) };

	asyncpool_zc_stats(zs, &st);
	return st;
}

/* The sockets of open_zc(), closed at the end. */
static int socks[16], nsocks;

/* A backend on a socket of its own: one socket takes one backend, and
 * the fake sends below count numbers the kernel never gave. */
static struct asyncpool_zc *open_zc(uint32_t flags, uint32_t fallback_after)
{
	struct asyncpool_zc_options o;
	struct asyncpool_zc *zs;
	int fd;

	if (nsocks + 2 > 16 || tcp_loopback_pair(&socks[nsocks], &socks[nsocks + 1]))
		bail_out("tcp_loopback_pair");
	fd = socks[nsocks];
	nsocks += 2;
	memset(&o, 0, sizeof(o));
	o.size = sizeof(o);
	o.flags = flags;
	o.fallback_after = fallback_after;
	if (asyncpool_zc_open(fd, &o, &zs))
		bail_out("asyncpool_zc_open");
	nscript = calls = 0;
	return zs;
}

#define NB 256u

int main(void)
{
	struct asyncpool_proactor *p;
	struct asyncpool *pool;
	struct asyncpool_zc *zs;
	struct asyncpool_lease a, b, c, l[NB];
	struct asyncpool_zc_stats st;

	alarm(60);
	if (asyncpool_proactor_create_memory(&p))
		bail_out("proactor");
	pool = make_pool(p, 4096, NB, 0);
	ap_zc_test_sendmsg = fake_sendmsg;

	/* Sequence numbers: whole sends, a short one, out-of-order ranges. */
	zs = open_zc(ASYNCPOOL_ZC_NO_FALLBACK, 0);
	asyncpool_acquire(pool, &a);
	asyncpool_acquire(pool, &b);
	asyncpool_acquire(pool, &c);
	is_int(asyncpool_zc_send(zs, &a, 0, 4096, 0, 0), 4096, "A sent whole: seq 0");
	ok(last_flags & MSG_ZEROCOPY, "with MSG_ZEROCOPY");
	ok(!asyncpool_lease_held(&a), "A handed over");
	answer(1000, 0);
	is_int(asyncpool_zc_send(zs, &b, 0, 4096, 0, 0), 1000, "B short: 1000 bytes, seq 1");
	ok(asyncpool_lease_held(&b), "a short send leaves B with the caller");
	answer(-1, EINTR);
	answer(-1, EAGAIN);
	is_int(asyncpool_zc_send(zs, &b, 1000, 3096, MSG_DONTWAIT, 0), -EAGAIN,
	       "B's rest: EINTR retried, then -EAGAIN: no sequence number");
	ok(asyncpool_lease_held(&b), "B still the caller's");
	is_int(asyncpool_zc_send(zs, &b, 1000, 3096, 0, 0), 3096, "B's rest: seq 2, B handed over");
	is_int(asyncpool_zc_send(zs, &c, 0, 4096, 0, 0), 4096, "C: seq 3");
	st = stats(zs);
	ok(st.sends == 4 && st.pending == 4 && st.failed == 1 && st.leases_out == 3,
	   "4 sends pending, 1 failed, 3 leases out");
	is_int(asyncpool_available(pool), NB - 3, "the pool lent 3");
	is_int(ap_zc_complete(zs, 3, 3, false), 1, "[3,3] first (out of order): C back");
	is_int(ap_zc_complete(zs, 1, 1, false), 0, "[1,1]: B has seq 2 pending, stays out");
	is_int(zs->tail, 0, "the tail waits for seq 0");
	is_int(ap_zc_complete(zs, 0, 0, false), 1, "[0,0]: A back");
	is_int(zs->tail, 2, "the tail moves past 0 and 1");
	is_int(ap_zc_complete(zs, 2, 2, false), 1, "[2,2]: B back");
	is_int(zs->tail, 4, "the tail at 4, nothing pending");
	is_int(asyncpool_available(pool), NB, "every lease back");

	/* A coalesced range over six sends of three leases. */
	for (int i = 0; i < 3; i++) {
		asyncpool_acquire(pool, &l[i]);
		asyncpool_zc_send(zs, &l[i], 0, 2048, 0, ASYNCPOOL_ZC_KEEP);
		asyncpool_zc_send(zs, &l[i], 2048, 2048, 0, 0);
	}
	is_int(stats(zs).pending, 6, "six sends of three leases pending (seq 4..9)");
	is_int(ap_zc_complete(zs, 4, 9, false), 3, "[4,9] in one range: three leases back");
	st = stats(zs);
	ok(st.completions == 10 && st.notifications == 5 && st.pending == 0,
	   "10 completions in 5 ranges");

	/* A kept lease whose sends complete stays the caller's until handed over. */
	asyncpool_acquire(pool, &a);
	is_int(asyncpool_zc_send(zs, &a, 0, 4096, 0, ASYNCPOOL_ZC_KEEP), 4096, "KEEP: seq 10");
	is_int(ap_zc_complete(zs, 10, 10, false), 0, "[10,10]: nothing released");
	ok(asyncpool_lease_held(&a) && asyncpool_available(pool) == NB - 1,
	   "the caller still holds it, the pool lent 1");
	is_int(asyncpool_zc_release(zs, &a), 0, "handed over with nothing in flight");
	ok(!asyncpool_lease_held(&a) && asyncpool_available(pool) == NB, "back at once");

	/* Ranges that name nothing of ours change nothing. */
	asyncpool_acquire(pool, &a);
	asyncpool_zc_send(zs, &a, 0, 4096, 0, 0);
	is_int(ap_zc_complete(zs, 4, 4, false), 0, "[4,4] again: refused");
	is_int(ap_zc_complete(zs, 12, 12, false), 0, "[12,12], not yet given: refused");
	is_int(ap_zc_complete(zs, 11, 12, false), 0, "[11,12], half beyond: refused");
	is_int(ap_zc_complete(zs, 11, 10, false), 0, "[11,10], backwards: refused");
	st = stats(zs);
	ok(st.bad_ranges == 4 && st.pending == 1 && st.leases_out == 1, "4 bad ranges, A still out");
	is_int(ap_zc_complete(zs, 11, 11, false), 1, "[11,11]: A back");

	/* A failed send (EPIPE) takes no number: the next one takes 12. */
	asyncpool_acquire(pool, &a);
	answer(-1, EPIPE);
	is_int(asyncpool_zc_send(zs, &a, 0, 4096, 0, 0), -EPIPE, "EPIPE: -EPIPE");
	ok(asyncpool_lease_held(&a), "the lease stays the caller's");
	is_int(asyncpool_zc_send(zs, &a, 0, 4096, 0, 0), 4096, "sent again: seq 12");
	is_int(ap_zc_complete(zs, 12, 12, false), 1, "[12,12]: back");

	/* ENOBUFS with sends of ours in flight: reap, retry, then the caller's to wait. */
	asyncpool_acquire(pool, &a);
	asyncpool_acquire(pool, &b);
	asyncpool_zc_send(zs, &a, 0, 4096, 0, 0);          /* seq 13 */
	answer(-1, ENOBUFS);
	answer(-1, ENOBUFS);
	is_int(asyncpool_zc_send(zs, &b, 0, 4096, 0, 0), -ENOBUFS,
	       "ENOBUFS twice with a send in flight: -ENOBUFS");
	ok(asyncpool_lease_held(&b) && stats(zs).enobufs == 2, "B still the caller's, 2 counted");
	answer(-1, ENOBUFS);
	is_int(asyncpool_zc_send(zs, &b, 0, 4096, 0, 0), 4096, "ENOBUFS once: the retry went (seq 14)");
	is_int(ap_zc_complete(zs, 13, 14, false), 2, "[13,14]: both back");
	/* With nothing in flight it copies: waiting would never end. */
	asyncpool_acquire(pool, &a);
	answer(-1, ENOBUFS);
	answer(-1, ENOBUFS);
	is_int(asyncpool_zc_send(zs, &a, 0, 4096, 0, 0), 4096,
	       "ENOBUFS twice, nothing in flight: sent by copying");
	ok(!(last_flags & MSG_ZEROCOPY), "without MSG_ZEROCOPY");
	st = stats(zs);
	ok(st.enobufs_copies == 1 && st.copy_sends == 1 && st.pending == 0 &&
	   asyncpool_available(pool) == NB, "counted; the lease back at once");

	/* The u32 counter wraps: 0xfffffffe, 0xffffffff, 0, 1. */
	zs->tail = zs->head = 0xfffffffeu;
	for (int i = 0; i < 4; i++) {
		asyncpool_acquire(pool, &l[i]);
		asyncpool_zc_send(zs, &l[i], 0, 4096, 0, 0);
	}
	is_int(ap_zc_complete(zs, 0xffffffffu, 0, false), 2, "[0xffffffff,0] across the wrap: 2 back");
	is_int(ap_zc_complete(zs, 0xfffffffeu, 1, false), 2, "[0xfffffffe,1]: the other 2");
	is_int(asyncpool_available(pool), NB, "every lease back");

	/* More in flight than the ring's first size: it grows, in order. */
	for (unsigned i = 0; i < 200; i++) {
		asyncpool_acquire(pool, &l[i]);
		asyncpool_zc_send(zs, &l[i], 0, 4096, 0, 0);
	}
	ok(zs->cap >= 200, "the ring grew to %u slots", zs->cap);
	is_int(ap_zc_complete(zs, zs->tail + 100, zs->tail + 199, false), 100, "the second 100 back");
	is_int(ap_zc_complete(zs, zs->tail, zs->tail + 99, false), 100, "then the first 100");
	is_int(asyncpool_available(pool), NB, "every lease back");

	/* close() waits, with a timeout, for what is in flight. */
	asyncpool_acquire(pool, &a);
	asyncpool_zc_send(zs, &a, 0, 4096, 0, 0);
	is_int(asyncpool_zc_close(zs, 1000000), -EBUSY, "close with a send in flight, 1 ms: -EBUSY");
	is_int(ap_zc_complete(zs, zs->tail, zs->tail, false), 1, "it completes: back");
	is_int(asyncpool_zc_close(zs, 0), 0, "close");

	/* The fallback: fallback_after copied completions in a row. */
	zs = open_zc(0, 4);
	for (int i = 0; i < 8; i++) {
		asyncpool_acquire(pool, &l[i]);
		asyncpool_zc_send(zs, &l[i], 0, 4096, 0, 0);
	}
	ap_zc_complete(zs, 0, 2, true);
	ap_zc_complete(zs, 3, 3, false);
	ap_zc_complete(zs, 4, 6, true);
	st = stats(zs);
	ok((st.flags & ASYNCPOOL_ZC_ZEROCOPY) && st.copied == 6,
	   "3 copied, 1 not, 3 copied: still zero-copy (6 copied counted)");
	ap_zc_complete(zs, 7, 7, true);
	st = stats(zs);
	ok(!(st.flags & ASYNCPOOL_ZC_ZEROCOPY) && (st.flags & ASYNCPOOL_ZC_FELL_BACK),
	   "the 4th in a row: the socket fell back to copying");
	asyncpool_acquire(pool, &a);
	is_int(asyncpool_zc_send(zs, &a, 0, 4096, 0, 0), 4096, "the next send");
	ok(!(last_flags & MSG_ZEROCOPY) && asyncpool_available(pool) == NB,
	   "copies, and its lease is back at once");
	is_int(asyncpool_zc_close(zs, 0), 0, "close");

	/* ASYNCPOOL_ZC_NO_FALLBACK keeps zero-copy. */
	zs = open_zc(ASYNCPOOL_ZC_NO_FALLBACK, 1);
	asyncpool_acquire(pool, &a);
	asyncpool_zc_send(zs, &a, 0, 4096, 0, 0);
	ap_zc_complete(zs, 0, 0, true);
	ok(stats(zs).flags & ASYNCPOOL_ZC_ZEROCOPY, "NO_FALLBACK: still zero-copy after a copied one");
	is_int(asyncpool_zc_close(zs, 0), 0, "close");

	/*
	 * A datagram socket (as the backend sees it): a send that fails with
	 * EPERM (a netfilter drop) may have been numbered; the socket copies
	 * from then on, and a range may name that number past ours.
	 */
	zs = open_zc(ASYNCPOOL_ZC_NO_FALLBACK, 0);
	zs->dgram = true;
	asyncpool_acquire(pool, &a);
	asyncpool_acquire(pool, &b);
	is_int(asyncpool_zc_send(zs, &a, 0, 4096, 0, 0), 4096, "dgram: A, seq 0");
	answer(-1, EAGAIN);
	is_int(asyncpool_zc_send(zs, &b, 0, 4096, MSG_DONTWAIT, 0), -EAGAIN,
	       "dgram: EAGAIN takes no number");
	ok(stats(zs).flags & ASYNCPOOL_ZC_ZEROCOPY, "dgram: still zero-copy");
	answer(-1, EPERM);
	is_int(asyncpool_zc_send(zs, &b, 0, 4096, 0, 0), -EPERM, "dgram: EPERM (maybe seq 1)");
	st = stats(zs);
	ok(asyncpool_lease_held(&b) && !(st.flags & ASYNCPOOL_ZC_ZEROCOPY) &&
	   (st.flags & ASYNCPOOL_ZC_FELL_BACK), "dgram: B the caller's; the socket copies now");
	is_int(asyncpool_zc_send(zs, &b, 0, 4096, 0, 0), 4096, "dgram: B sent again");
	ok(!(last_flags & MSG_ZEROCOPY) && asyncpool_available(pool) == NB - 1,
	   "dgram: by copying, B back at once");
	/*
	 * A range must start at a number our sends took, [tail, head): the
	 * lost datagram's own notification, [head, head], starts past them.
	 * Counted and left alone (taken, it would walk from head round the
	 * u32 counter to head - 1).
	 */
	st = stats(zs);
	is_int(ap_zc_complete(zs, 1, 1, false), 0,
	       "dgram: [1,1], the lost number alone, starting at head: refused");
	ok(stats(zs).bad_ranges == st.bad_ranges + 1 && stats(zs).pending == 1 &&
	   stats(zs).completions == 0, "dgram: counted as bad, A still pending");
	is_int(ap_zc_complete(zs, 0, 2, false), 0, "dgram: [0,2], two past ours: refused");
	is_int(ap_zc_complete(zs, 0, 1, false), 1, "dgram: [0,1], seq 1 the lost one: A back");
	st = stats(zs);
	ok(st.bad_ranges == 3 && st.pending == 0 && st.completions == 1 && st.failed == 2,
	   "dgram: 3 bad ranges, 1 completion, 2 failed");
	is_int(asyncpool_zc_close(zs, 0), 0, "close");

	/*
	 * The error queue as asyncpool_zc_reap() reads it: a completion
	 * per message, on IP_RECVERR or IPV6_RECVERR (an AF_INET6 socket,
	 * v4-mapped peers too), with SO_EE_CODE_ZEROCOPY_COPIED or not,
	 * beside another control message; messages of another origin, or
	 * with an errno, are no completion ("other").
	 */
	zs = open_zc(ASYNCPOOL_ZC_NO_FALLBACK, 0);
	for (int i = 0; i < 4; i++) {
		asyncpool_acquire(pool, &l[i]);
		asyncpool_zc_send(zs, &l[i], 0, 4096, 0, 0);
	}
	ap_zc_test_recvmsg = fake_recvmsg;
	nqueue = queued_at = 0;
	enqueue(0, SOL_IP, IP_RECVERR, SO_EE_ORIGIN_ZEROCOPY, 0, SO_EE_CODE_ZEROCOPY_COPIED, 0, 1);
	nqueue++;
	enqueue(0, SOL_IPV6, IPV6_RECVERR, SO_EE_ORIGIN_ZEROCOPY, 0, 0, 2, 2);
	nqueue++;
	enqueue(0, SOL_IP, IP_RECVERR, SO_EE_ORIGIN_ICMP, ECONNREFUSED, 3, 0, 0);
	nqueue++;
	enqueue(0, SOL_IP, IP_RECVERR, SO_EE_ORIGIN_LOCAL, 0, 0, 3, 3);
	nqueue++;
	enqueue(0, SOL_SOCKET, SO_TIMESTAMP, 0, 0, 0, 0, 0);
	enqueue(1, SOL_IP, IP_RECVERR, SO_EE_ORIGIN_ZEROCOPY, 0, 0, 3, 3);
	nqueue++;
	is_int(asyncpool_zc_reap(zs), 4, "error queue: 4 leases back from 3 completions");
	st = stats(zs);
	ok(st.completions == 4 && st.copied == 2 && st.notifications == 3 && st.other == 2 &&
	   st.pending == 0, "error queue: 4 completed, 2 copied (the range with the code), "
	   "3 ranges, 2 other (%llu %llu %llu %llu)", (unsigned long long)st.completions,
	   (unsigned long long)st.copied, (unsigned long long)st.notifications,
	   (unsigned long long)st.other);
	is_int(queued_at, nqueue, "error queue: every message read");
	ap_zc_test_recvmsg = NULL;
	is_int(asyncpool_zc_close(zs, 0), 0, "close");

	ap_zc_test_sendmsg = NULL;
	is_int(asyncpool_available(pool), NB, "the pool is full");
	is_int(asyncpool_check(pool), 0, "and consistent");
	asyncpool_destroy(pool);
	asyncpool_proactor_destroy(p);
	while (nsocks > 0)
		close(socks[--nsocks]);
	return done_testing();
}
