/* SPDX-License-Identifier: MIT */
/*
 * The AF_XDP backend (lib/xdp.c) on a veth pair in a network namespace
 * of the test's own (tests/xdp-util.h):
 *
 * - bad arguments: exact errno, nothing changed (every build);
 * - zero-copy asked on veth: refused by the kernel, copy mode, the
 *   reason reported (-EOPNOTSUPP): "asked, refused, fell back";
 * - frames sent from the peer with an AF_PACKET socket arrive as leases
 *   of their frames (address, length, offset), each exactly once and
 *   whole; stray frames of other ethertypes are counted and released;
 * - leases acquired from the pool and sent arrive at the peer, and come
 *   back to the pool through the completion ring;
 * - a received frame forwarded on a second socket of the same UMEM
 *   (shared-UMEM mode, another veth) arrives at its peer: no copy, the
 *   lease's address is the address sent;
 * - forged descriptors (the kernel's side faked through the test hooks):
 *   an address outside the UMEM, a frame not in this socket's fill ring,
 *   a length past the frame, a completion of a frame never sent: refused
 *   and counted, never handed out, nothing lost;
 * - at the end every frame is back in the pool and the pool checks.
 *
 * Without root, a netns, veth or XDP the socket part SKIPs with the reason.
 */
#include "config.h"

#include <signal.h>
#include <sys/wait.h>

#include "hooks.h"
#include "../lib/xdp_internal.h"
#include "xdp-util.h"

#define FRAMES   4096u
#define FSIZE    2048u
#define RING     2048u

static uint8_t mac_va[6], mac_vb[6], mac_vc[6], mac_vd[6];

static int frames_out(struct asyncpool_xsk *s)
{
	struct asyncpool_xsk_stats st = { .size = sizeof(st) };

	asyncpool_xsk_stats(s, &st);
	return (int)(st.in_fill + st.in_tx);
}

static void test_args(struct asyncpool *pool)
{
	struct asyncpool_xdp_options xo;
	struct asyncpool_xsk_options so;
	struct asyncpool_xsk_stats st;
	struct asyncpool_xdp *x = (void *)1;
	struct asyncpool_xsk *s = (void *)1;
	struct asyncpool_lease l;
	struct asyncpool_proactor *p;
	struct asyncpool *small;

	{
		struct asyncpool_xdp_places pl = { .size = sizeof(pl) };

		is_int(asyncpool_xdp_places(NULL, &pl), -EINVAL, "places: no UMEM: -EINVAL");
		is_int(asyncpool_xdp_places((void *)1, NULL), -EINVAL, "places: no out: -EINVAL");
	}
	is_int(asyncpool_xdp_create(NULL, NULL, &x), -EINVAL, "create: no pool: -EINVAL");
	ok(x == NULL, "create: *out NULL on failure");
	is_int(asyncpool_xdp_create(pool, NULL, NULL), -EINVAL, "create: no out: -EINVAL");
	memset(&xo, 0, sizeof(xo));
	xo.size = sizeof(xo) - 1;
	is_int(asyncpool_xdp_create(pool, &xo, &x), -EINVAL, "create: options too short: -EINVAL");
	xo.size = sizeof(xo);
	xo.reserved[1] = 1;
	is_int(asyncpool_xdp_create(pool, &xo, &x), -EINVAL, "create: reserved set: -EINVAL");
	xo.reserved[1] = 0;
	xo.flags = 1;
	is_int(asyncpool_xdp_create(pool, &xo, &x), -EINVAL, "create: unknown flag: -EINVAL");
	xo.flags = 0;
	xo.headroom = FSIZE - 256;
	is_int(asyncpool_xdp_create(pool, &xo, &x), -EINVAL,
	       "create: headroom + XDP_PACKET_HEADROOM >= frame: -EINVAL");
	xo.headroom = FSIZE - 257;
	is_int(asyncpool_xdp_create(pool, &xo, &x), 0, "create: the largest headroom");
	is_int(asyncpool_xdp_destroy(x), 0, "destroy");
	if (asyncpool_proactor_create_memory(&p))
		bail_out("a memory proactor");
	small = make_pool(p, 1024, 16, 0);
	is_int(asyncpool_xdp_create(small, NULL, &x), -EINVAL, "create: 1024-byte frames: -EINVAL");
	asyncpool_destroy(small);
	small = make_pool(p, 3072, 16, 0);
	is_int(asyncpool_xdp_create(small, NULL, &x), -EINVAL,
	       "create: frames not a power of two: -EINVAL");
	asyncpool_destroy(small);
	asyncpool_proactor_destroy(p);

	if (asyncpool_xdp_create(pool, NULL, &x))
		bail_out("asyncpool_xdp_create");
	memset(&so, 0, sizeof(so));
	so.size = sizeof(so);
	so.ifname = "lo";
	is_int(asyncpool_xsk_open(NULL, &so, &s), -EINVAL, "open: no UMEM: -EINVAL");
	ok(s == NULL, "open: *out NULL on failure");
	is_int(asyncpool_xsk_open(x, NULL, &s), -EINVAL, "open: no options: -EINVAL");
	so.size = 8;
	is_int(asyncpool_xsk_open(x, &so, &s), -EINVAL, "open: options too short: -EINVAL");
	so.size = sizeof(so);
	so.ifname = NULL;
	is_int(asyncpool_xsk_open(x, &so, &s), -EINVAL, "open: no interface: -EINVAL");
	so.ifname = "lo";
	so.ring_size = 100;
	is_int(asyncpool_xsk_open(x, &so, &s), -EINVAL, "open: ring not a power of two: -EINVAL");
	so.ring_size = 32;
	is_int(asyncpool_xsk_open(x, &so, &s), -EINVAL, "open: ring under 64: -EINVAL");
	so.ring_size = 0;
	so.flags = 1u << 9;
	is_int(asyncpool_xsk_open(x, &so, &s), -EINVAL, "open: unknown flag: -EINVAL");
	so.flags = ASYNCPOOL_XSK_XSKMAP;
	so.xskmap_fd = -1;
	is_int(asyncpool_xsk_open(x, &so, &s), -EINVAL, "open: XSKMAP without a map: -EINVAL");
	so.flags = 0;
	so.fill_batch = 257;
	is_int(asyncpool_xsk_open(x, &so, &s), -EINVAL, "open: fill batch over 256: -EINVAL");
	so.fill_batch = 0;
	so.reserved = 1;
	is_int(asyncpool_xsk_open(x, &so, &s), -EINVAL, "open: reserved set: -EINVAL");
	so.reserved = 0;
	so.ifname = "nosuch-if0";
	is_int(asyncpool_xsk_open(x, &so, &s), -ENODEV, "open: no such interface: -ENODEV");
	is_int(asyncpool_available(pool), FRAMES, "bad opens took no frame");

	is_int(asyncpool_xsk_close(NULL), -EINVAL, "close(NULL): -EINVAL");
	is_int(asyncpool_xsk_fd(NULL), -EINVAL, "fd(NULL): -EINVAL");
	is_int(asyncpool_xsk_refill(NULL, 1), -EINVAL, "refill(NULL): -EINVAL");
	is_int(asyncpool_xsk_recv(NULL, &l, 1), -EINVAL, "recv(NULL): -EINVAL");
	is_int(asyncpool_xsk_send(NULL, &l, 1), -EINVAL, "send(NULL): -EINVAL");
	is_int(asyncpool_xsk_complete(NULL), -EINVAL, "complete(NULL): -EINVAL");
	memset(&st, 0, sizeof(st));
	is_int(asyncpool_xsk_stats(NULL, &st), -EINVAL, "stats(NULL): -EINVAL");
	is_int(asyncpool_xdp_destroy(NULL), -EINVAL, "destroy(NULL): -EINVAL");
	is_int(asyncpool_xdp_destroy(x), 0, "destroy an unused UMEM");
}

/*
 * n frames from va, received on s (vb) in bursts: each seq exactly once,
 * whole; a lease's offset is in its frame after the kernel's headroom.
 * Leases are held in hold[] for hold_n at a time, to receive while the
 * caller holds frames.
 */
/* Every place of pl, added. */
static uint32_t places_sum(const struct asyncpool_xdp_places *pl)
{
	return pl->fill + pl->kernel_rx + pl->rx + pl->tx + pl->kernel_tx + pl->completion +
	       pl->moving + pl->leased + pl->free;
}

/*
 * asyncpool_xdp_places() (since 1.11): frames by place after the open
 * (the fill side), with received frames held (leased), after a send of
 * some (the tx side), and once all came back.
 */
static void test_places(struct asyncpool *pool, struct asyncpool_xdp *x, struct asyncpool_xsk *s)
{
	struct asyncpool_xdp_places pl, big[2];
	struct asyncpool_xsk_stats st = { .size = sizeof(st) };
	struct asyncpool_lease l[64], hold[64];
	unsigned int nhold = 0;
	int pk = xt_packet_socket("va", 200);

	if (pk < 0)
		bail_out("a packet socket on va");
	memset(&pl, 0x5a, sizeof(pl));
	pl.size = 8;
	is_int(asyncpool_xdp_places(x, &pl), -EINVAL, "places: size too small: -EINVAL");
	is_int(pl.capacity, 0x5a5a5a5a, "places: nothing written on -EINVAL");
	pl.size = 1u << 20;
	is_int(asyncpool_xdp_places(x, &pl), -EINVAL, "places: size past a page: -EINVAL");
	memset(big, 0x5a, sizeof(big));
	big[0].size = sizeof(big);
	is_int(asyncpool_xdp_places(x, &big[0]), 0, "places: a larger struct");
	ok(big[1].capacity == 0 && big[1].free == 0 && big[0].reserved == 0,
	   "places: the bytes past the known fields zeroed");

	memset(&pl, 0, sizeof(pl));
	pl.size = sizeof(pl);
	is_int(asyncpool_xdp_places(x, &pl), 0, "places after the open");
	is_int(pl.capacity, FRAMES, "places: capacity");
	is_int(pl.sockets, 1, "places: one socket");
	asyncpool_xsk_stats(s, &st);
	is_int(pl.fill + pl.kernel_rx + pl.rx, st.in_fill,
	       "places: the fill ring's frames on the receiving side (fill %u, kernel %u, rx %u)",
	       pl.fill, pl.kernel_rx, pl.rx);
	is_int(pl.tx + pl.kernel_tx + pl.completion + pl.moving + pl.leased, 0,
	       "places: nothing sent, moving or leased");
	is_int(pl.free, FRAMES - st.in_fill, "places: the rest free");
	is_int(places_sum(&pl), FRAMES, "places: they add up to capacity");

	for (uint32_t i = 0; i < 32; i++)
		if (xt_send(pk, mac_vb, mac_va, i))
			bail_out("send from va");
	for (int idle = 0; nhold < 32 && idle < 200;) {
		int k = asyncpool_xsk_recv(s, l, 64);

		if (k <= 0) {
			idle++;
			xt_wait(asyncpool_xsk_fd(s), 10);
			continue;
		}
		for (int i = 0; i < k; i++) {
			if (nhold < 64)
				hold[nhold++] = l[i];
			else
				asyncpool_lease_release(&l[i]);
		}
	}
	ok(nhold >= 32, "places: %u frames received and held", nhold);
	asyncpool_xdp_places(x, &pl);
	asyncpool_xsk_stats(s, &st);
	is_int(pl.leased, nhold, "places: the frames held are leased");
	ok(pl.fill + pl.kernel_rx + pl.rx == st.in_fill && st.in_fill > RING - 64,
	   "places: the fill ring refilled, in batches (%u of %u)", st.in_fill, RING);
	is_int(pl.free, FRAMES - st.in_fill - nhold, "places: free, the rest");
	is_int(places_sum(&pl), FRAMES, "places: they add up to capacity");

	is_int(asyncpool_xsk_send(s, hold, 8), 8, "places: 8 of them sent");
	asyncpool_xdp_places(x, &pl);
	is_int(pl.tx + pl.kernel_tx + pl.completion, 8,
	       "places: 8 on the sending side (tx %u, kernel %u, completion %u)", pl.tx,
	       pl.kernel_tx, pl.completion);
	is_int(pl.leased, nhold - 8, "places: the others still leased");
	is_int(pl.moving, 0, "places: no send moving");
	asyncpool_release_bulk(hold + 8, nhold - 8);
	for (int i = 0; i < 1000 && !asyncpool_xsk_stats(s, &st) && st.in_tx; i++) {
		asyncpool_xsk_complete(s);
		usleep(1000);
	}
	asyncpool_xdp_places(x, &pl);
	asyncpool_xsk_stats(s, &st);
	is_int(pl.tx + pl.kernel_tx + pl.completion + pl.leased, 0,
	       "places: all completed and released");
	is_int(pl.free, FRAMES - st.in_fill, "places: free again");
	is_int(places_sum(&pl), FRAMES, "places: they add up to capacity");
	close(pk);
}

/* Frames of ours received on s within a while, the rest released. */
static unsigned int recv_ours(struct asyncpool_xsk *s, unsigned int want)
{
	struct asyncpool_lease l[64];
	unsigned int got = 0;

	for (int idle = 0; got < want && idle < 50;) {
		int k = asyncpool_xsk_recv(s, l, 64);

		if (k <= 0) {
			idle++;
			xt_wait(asyncpool_xsk_fd(s), 10);
			continue;
		}
		for (int i = 0; i < k; i++) {
			got += xt_ours(asyncpool_span_ptr(l[i].span), l[i].span.length);
			asyncpool_lease_release(&l[i]);
		}
	}
	return got;
}

/*
 * Two sockets on two queues of one interface, one UMEM (since 1.11,
 * issue 55's two-thread target): a veth pair with two queues a side;
 * an AF_PACKET socket that bypasses the qdisc (PACKET_QDISC_BYPASS) sends
 * on the queue of the CPU it runs on (packet_pick_tx_queue(); through the
 * qdisc, the flow's hash: one queue for all our frames), and veth delivers on the
 * peer's queue of that number: frames sent from CPU q arrive on the
 * socket of queue q, none on the other.
 */
static void test_queues(struct asyncpool *pool)
{
	struct asyncpool_xsk_options so = { .size = sizeof(so), .ifname = "wb", .ring_size = 512 };
	struct asyncpool_xsk_stats st = { .size = sizeof(st) };
	struct asyncpool_xsk *q[2] = { NULL, NULL };
	struct asyncpool_xdp *x;
	uint8_t mac_wa[6], mac_wb[6];
	cpu_set_t old, one;
	char why[256];
	int pk, rc;

	if (sysconf(_SC_NPROCESSORS_ONLN) < 2 || sched_getaffinity(0, sizeof(old), &old) ||
	    !CPU_ISSET(0, &old) || !CPU_ISSET(1, &old)) {
		skip(8, "two queues: fewer than two CPUs to send from");
		return;
	}
	if (xt_veth_queues("wa", "wb", 2, why, sizeof(why))) {
		skip(8, "%s", why);
		return;
	}
	xt_mac("wa", mac_wa);
	xt_mac("wb", mac_wb);
	pk = xt_packet_socket("wa", 200);
	/* Past the qdisc: its queue is then its CPU's (through it, the flow's hash). */
	if (pk < 0 || setsockopt(pk, SOL_PACKET, PACKET_QDISC_BYPASS, &(int){ 1 }, sizeof(int)) ||
	    asyncpool_xdp_create(pool, NULL, &x))
		bail_out("two queues: a packet socket past the qdisc and a UMEM");
	for (uint32_t i = 0; i < 2; i++) {
		so.queue = i;
		rc = asyncpool_xsk_open(x, &so, &q[i]);
		is_int(rc, 0, "two queues: a socket on wb queue %u, one UMEM", i);
		if (rc)
			bail_out("asyncpool_xsk_open(vf, %u): %s", i, strerror(-rc));
	}
	asyncpool_xsk_stats(q[1], &st);
	ok(st.shared_umem == 1 && st.queue == 1, "two queues: the second shares the first's UMEM");
	for (int cpu = 0; cpu < 2; cpu++) {
		unsigned int got[2];

		CPU_ZERO(&one);
		CPU_SET(cpu, &one);
		if (sched_setaffinity(0, sizeof(one), &one))
			bail_out("sched_setaffinity");
		for (uint32_t i = 0; i < 200; i++)
			if (xt_send(pk, mac_wb, mac_wa, i))
				bail_out("send from wa");
		sched_setaffinity(0, sizeof(old), &old);
		got[cpu] = recv_ours(q[cpu], 200);
		got[!cpu] = recv_ours(q[!cpu], 1);
		ok(got[cpu] == 200 && got[!cpu] == 0,
		   "two queues: 200 frames sent from CPU %d: %u on queue %d, %u on queue %d", cpu,
		   got[cpu], cpu, got[!cpu], !cpu);
	}
	is_int(asyncpool_xsk_close(q[1]), 0, "two queues: close queue 1");
	is_int(asyncpool_xsk_close(q[0]), 0, "two queues: close queue 0");
	is_int(asyncpool_xdp_destroy(x), 0, "two queues: destroy the UMEM");
	close(pk);
}

static void test_receive(struct asyncpool *pool, struct asyncpool_xsk *s, uint32_t n)
{
	int pk = xt_packet_socket("va", 200);
	uint8_t *seen = calloc(n, 1);
	struct asyncpool_lease l[64], hold[256];
	unsigned int nhold = 0, got = 0, dup = 0, bad = 0, strays = 0, badspan = 0;

	if (pk < 0 || !seen)
		bail_out("a packet socket on va");
	for (uint32_t base = 0; base < n; base += 64) {
		uint32_t burst = n - base < 64 ? n - base : 64, want = got + burst;

		for (uint32_t i = 0; i < burst; i++)
			if (xt_send(pk, mac_vb, mac_va, base + i))
				bail_out("send from va");
		for (int idle = 0; got < want && idle < 200;) {
			int k = asyncpool_xsk_recv(s, l, 64);

			if (k <= 0) {
				idle++;
				xt_wait(asyncpool_xsk_fd(s), 10);
				continue;
			}
			for (int i = 0; i < k; i++) {
				const uint8_t *f = asyncpool_span_ptr(l[i].span);
				uint32_t seq = 1;

				if (l[i].span.offset / FSIZE != l[i].buffer_index ||
				    l[i].span.offset % FSIZE < 256 ||
				    l[i].span.offset % FSIZE + l[i].span.length > FSIZE)
					badspan++;
				if (!xt_ours(f, l[i].span.length)) {
					strays++;
				} else if (!xt_frame_ok(f, l[i].span.length, &seq) || seq >= n) {
					bad++;
				} else if (seen[seq]++) {
					dup++;
				} else {
					got++;
				}
				if (nhold < 256 && (seq & 3) == 0)
					hold[nhold++] = l[i];
				else
					asyncpool_lease_release(&l[i]);
			}
			if (nhold == 256) {
				asyncpool_release_bulk(hold, nhold);
				nhold = 0;
			}
		}
	}
	asyncpool_release_bulk(hold, nhold);
	is_int(got, n, "received every frame sent from the peer (%u)", n);
	is_int(dup, 0, "none twice");
	is_int(bad, 0, "every frame whole");
	is_int(badspan, 0, "each lease a window of its frame, after the kernel's headroom");
	if (strays)
		diag("%u stray frames (not ours: IPv6 and such) received and released", strays);
	is_int(frames_out(s) + (int)asyncpool_available(pool), FRAMES,
	       "every frame in the pool or in the fill ring");
	free(seen);
	close(pk);
}

/*
 * How full the fill ring is kept (since 1.13): no more frames on the
 * receiving side (fill ring, kernel, rx ring: in_fill) than the ring
 * holds, as the kernel can use no more.  300 frames wait in the rx
 * ring; a receive of 64 (held) refills 64, not the fill ring's room; a
 * refill asked for more adds nothing; each receive after refills what
 * it took, from what the caller released.
 */
static void test_fill_bound(struct asyncpool *pool, struct asyncpool_xdp *x,
			    struct asyncpool_xsk *s)
{
	struct asyncpool_xsk_stats st = { .size = sizeof(st) };
	struct asyncpool_xdp_places pl = { .size = sizeof(pl) };
	struct asyncpool_lease l[64];
	unsigned int wrong = 0, got = 0;
	int pk = xt_packet_socket("va", 200), k;

	if (pk < 0)
		bail_out("a packet socket on va");
	/* A receive of less than a batch left the rest (asyncpool_xsk_refill(3)). */
	asyncpool_xsk_stats(s, &st);
	ok(st.in_fill > RING - 64 && st.in_fill <= RING, "fill bound: less than a batch short at rest");
	is_int(asyncpool_xsk_refill(s, RING - (unsigned int)st.in_fill), (int)(RING - st.in_fill),
	       "fill bound: the rest refilled when asked for");
	asyncpool_xsk_stats(s, &st);
	is_int(st.in_fill, RING, "fill bound: a ring's worth on the receiving side");
	for (uint32_t i = 0; i < 300; i++)
		if (xt_send(pk, mac_vb, mac_va, i))
			bail_out("send from va");
	for (int i = 0; i < 2000 && !asyncpool_xdp_places(x, &pl) && pl.rx < 300; i++)
		usleep(1000);
	ok(pl.rx >= 300, "fill bound: %u frames in the rx ring", pl.rx);
	k = asyncpool_xsk_recv(s, l, 64);
	is_int(k, 64, "fill bound: a receive of 64");
	asyncpool_xsk_stats(s, &st);
	is_int(st.in_fill, RING, "fill bound: the 64 taken refilled, no more (in_fill)");
	asyncpool_xdp_places(x, &pl);
	is_int(pl.fill + pl.kernel_rx, RING - pl.rx, "fill bound: the fill ring holds the rx ring's room");
	is_int(asyncpool_available(pool), FRAMES - RING - 64,
	       "fill bound: the pool gave the 64 only (64 leased)");
	is_int(asyncpool_xsk_refill(s, RING), 0, "fill bound: a refill asked for more adds none");
	asyncpool_release_bulk(l, 64);
	while ((k = asyncpool_xsk_recv(s, l, 64)) > 0) {
		got += (unsigned int)k;
		asyncpool_xsk_stats(s, &st);
		wrong += st.in_fill > RING || st.in_fill <= RING - 64;
		asyncpool_release_bulk(l, (unsigned int)k);
	}
	ok(got >= 236, "fill bound: the other %u received", got);
	is_int(wrong, 0, "fill bound: after each receive, a ring's worth, less than a batch short");
	asyncpool_xsk_stats(s, &st);
	is_int(asyncpool_available(pool), FRAMES - st.in_fill, "fill bound: the rest in the pool");
	close(pk);
}

/* n leases acquired, written and sent on s (vb): they arrive at va, and come back. */
static void test_send(struct asyncpool *pool, struct asyncpool_xsk *s, uint32_t n)
{
	int pk = xt_packet_socket("va", 200);
	uint8_t *seen = calloc(n, 1), buf[2048];
	struct asyncpool_xsk_stats st = { .size = sizeof(st) };
	unsigned int got = 0;
	size_t avail = asyncpool_available(pool);

	if (pk < 0 || !seen)
		bail_out("a packet socket on va");
	for (uint32_t i = 0; i < n; i++) {
		struct asyncpool_lease l;
		int rc;

		if (asyncpool_acquire(pool, &l))
			bail_out("acquire");
		l.span.length = XT_FRAME_LEN;
		xt_frame(asyncpool_span_ptr(l.span), XT_FRAME_LEN, mac_va, mac_vb, i);
		for (int tries = 0; (rc = asyncpool_xsk_send(s, &l, 1)) == 0 && tries < 1000; tries++)
			usleep(100);
		if (rc != 1)
			bail_out("send: %d", rc);
	}
	for (int idle = 0; got < n && idle < 20;) {
		ssize_t k = recv(pk, buf, sizeof(buf), 0);
		uint32_t seq;

		asyncpool_xsk_complete(s);
		if (k <= 0) {
			idle++;
			continue;
		}
		if (xt_frame_ok(buf, (size_t)k, &seq) && seq < n && !seen[seq]++)
			got++;
	}
	for (int i = 0; i < 1000 && (asyncpool_xsk_stats(s, &st), st.in_tx); i++) {
		asyncpool_xsk_complete(s);
		usleep(1000);
	}
	is_int(got, n, "every lease sent arrived at the peer (%u)", n);
	asyncpool_xsk_stats(s, &st);
	is_int(st.in_tx, 0, "none left in the tx or completion ring");
	is_int(st.sent, n, "each lease put on the tx ring once (sent)");
	is_int(st.completed, n, "each came back through the completion ring");
	ok(st.wakeups > 0, "the kernel was kicked to send (%llu wakeups)",
	   (unsigned long long)st.wakeups);
	is_int(asyncpool_available(pool), avail, "every sent frame back in the pool");
	free(seen);
	close(pk);
}

/* Frames from va received on a (vb), their MACs rewritten, forwarded on b (vc): at vd. */
static void test_forward(struct asyncpool *pool, struct asyncpool_xsk *a, struct asyncpool_xsk *b,
			 uint32_t n)
{
	int tx = xt_packet_socket("va", 200), rx = xt_packet_socket("vd", 200);
	uint8_t *seen = calloc(n, 1), buf[2048];
	struct asyncpool_xsk_stats st = { .size = sizeof(st) };
	unsigned int got = 0, fwd = 0, moved = 0;

	if (tx < 0 || rx < 0 || !seen)
		bail_out("packet sockets on va and vd");
	for (uint32_t base = 0; base < n; base += 32) {
		uint32_t burst = n - base < 32 ? n - base : 32, want = fwd + burst;

		for (uint32_t i = 0; i < burst; i++)
			if (xt_send(tx, mac_vb, mac_va, base + i))
				bail_out("send from va");
		for (int idle = 0; fwd < want && idle < 200;) {
			struct asyncpool_lease l[32];
			int k = asyncpool_xsk_recv(a, l, 32), m = 0;

			if (k <= 0) {
				idle++;
				xt_wait(asyncpool_xsk_fd(a), 10);
				continue;
			}
			for (int i = 0; i < k; i++) {
				uint8_t *f = asyncpool_span_ptr(l[i].span);

				if (!xt_ours(f, l[i].span.length)) {
					asyncpool_lease_release(&l[i]);
					continue;
				}
				memcpy(f, mac_vd, 6);
				memcpy(f + 6, mac_vc, 6);
				l[m++] = l[i];
			}
			for (int sent = 0, tries = 0; sent < m && tries < 1000; tries++) {
				int r = asyncpool_xsk_send(b, l + sent, (unsigned int)(m - sent));

				if (r < 0)
					bail_out("forward: %d", r);
				for (int i = sent; i < sent + r; i++)
					moved += l[i].span.region == NULL;  /* spent, not copied */
				sent += r;
				if (sent < m)
					usleep(100);
			}
			fwd += (unsigned int)m;
		}
	}
	for (int idle = 0; got < n && idle < 20;) {
		ssize_t k = recv(rx, buf, sizeof(buf), 0);
		uint32_t seq;

		asyncpool_xsk_complete(b);
		if (k <= 0) {
			idle++;
			continue;
		}
		if (xt_frame_ok(buf, (size_t)k, &seq) && seq < n && !seen[seq]++ &&
		    !memcmp(buf, mac_vd, 6))
			got++;
	}
	for (int i = 0; i < 1000 && (asyncpool_xsk_stats(b, &st), st.in_tx); i++) {
		asyncpool_xsk_complete(b);
		usleep(1000);
	}
	is_int(moved, n, "each lease forwarded was handed over (spent), none copied");
	is_int(got, n, "every forwarded frame arrived at vd, rewritten (%u)", n);
	asyncpool_xsk_stats(b, &st);
	is_int(st.shared_umem, 1, "the second socket shares the UMEM");
	is_int(st.completed, n, "the forwarding socket's completions released them");
	is_int(frames_out(a) + frames_out(b) + (int)asyncpool_available(pool), FRAMES,
	       "every frame in the pool or in a ring");
	free(seen);
	close(tx);
	close(rx);
}

static void test_bad_sends(struct asyncpool *pool, struct asyncpool_xsk *s)
{
	struct asyncpool_lease l, two[2], other;
	struct asyncpool_proactor *p;
	struct asyncpool *op;
	size_t avail;

	if (asyncpool_acquire(pool, &l))
		bail_out("acquire");
	avail = asyncpool_available(pool);
	l.span.length = FSIZE + 1;
	is_int(asyncpool_xsk_send(s, &l, 1), -EINVAL, "send: length past the frame: -EINVAL");
	l.span.length = 60;
	l.span.offset += FSIZE;
	is_int(asyncpool_xsk_send(s, &l, 1), -EINVAL, "send: a window of another frame: -EINVAL");
	l.span.offset -= FSIZE;
	l.span.length = 0;
	is_int(asyncpool_xsk_send(s, &l, 1), -EINVAL, "send: empty: -EINVAL");
	l.span.length = 60;
	two[0] = l;
	two[1] = l;
	is_int(asyncpool_xsk_send(s, two, 2), -EINVAL, "send: one frame twice in a batch: -EINVAL");
	ok(two[0].span.region && two[1].span.region, "a refused batch: the leases unchanged");
	if (asyncpool_proactor_create_memory(&p))
		bail_out("a memory proactor");
	op = make_pool(p, FSIZE, 4, 0);
	if (asyncpool_acquire(op, &other))
		bail_out("acquire");
	other.span.length = 60;
	/* Our own frame's lease, not in any ring, named by another region:
	 * refused by its region alone, whatever else of it matches. */
	two[0] = l;
	two[0].span.region = other.span.region;
	is_int(asyncpool_xsk_send(s, two, 1), -EINVAL,
	       "send: our frame's lease under another region: -EINVAL");
	ok(two[0].span.region == other.span.region, "the refused lease unchanged");
	two[0] = l;
	two[1] = other;
	is_int(asyncpool_xsk_send(s, two, 2), -EINVAL, "send: a lease of another region: -EINVAL");
	is_int(asyncpool_xsk_send(s, &l, 1), 1, "the same lease, good, is sent after the refusals");
	ok(l.span.region == NULL, "a lease sent is spent");
	asyncpool_lease_release(&other);
	asyncpool_destroy(op);
	asyncpool_proactor_destroy(p);
	for (int i = 0; i < 1000 && asyncpool_available(pool) != avail + 1; i++) {
		asyncpool_xsk_complete(s);
		usleep(1000);
	}
	is_int(asyncpool_available(pool), avail + 1, "and came back once");
}

/* ---------------------------------------------------------------- forged */

static struct xdp_desc forged_rx[8];
static unsigned int forged_rx_n;
static uint64_t forged_comp[8];
static unsigned int forged_comp_n;

static unsigned int fake_rx(struct asyncpool_xsk *s, struct xdp_desc *d, unsigned int n)
{
	unsigned int k = forged_rx_n < n ? forged_rx_n : n;

	memcpy(d, forged_rx, k * sizeof(*d));
	forged_rx_n = 0;
	return k;
}

static unsigned int fake_comp(struct asyncpool_xsk *s, uint64_t *a, unsigned int n)
{
	unsigned int k = forged_comp_n < n ? forged_comp_n : n;

	memcpy(a, forged_comp, k * sizeof(*a));
	forged_comp_n = 0;
	return k;
}

static void test_forged(struct asyncpool *pool, struct asyncpool_xdp *x, struct asyncpool_xsk *s,
			struct asyncpool_xsk *other)
{
	struct asyncpool_xsk_stats st0 = { .size = sizeof(st0) }, st = { .size = sizeof(st) };
	struct asyncpool_lease l[8], held;
	uint32_t infill[2], k = 0;
	int got;

	for (uint32_t i = 0; i < x->count && k < 2; i++)
		if (atomic_load(&x->place[i]) == AP_XP_MAKE(AP_XP_FILL, s->slot))
			infill[k++] = i;
	if (k < 2 || asyncpool_acquire(pool, &held))
		bail_out("two frames in the fill ring and one leased");
	asyncpool_xsk_stats(s, &st0);
	forged_rx[0] = (struct xdp_desc){ .addr = (uint64_t)FRAMES * FSIZE, .len = 60 };
	forged_rx[1] = (struct xdp_desc){ .addr = ~0ull, .len = 60 };
	forged_rx[2] = (struct xdp_desc){ .addr = (uint64_t)held.buffer_index * FSIZE + 256,
					  .len = 60 };
	forged_rx[3] = (struct xdp_desc){ .addr = (uint64_t)infill[0] * FSIZE + 256,
					  .len = FSIZE - 255 };
	forged_rx[4] = (struct xdp_desc){ .addr = (uint64_t)infill[1] * FSIZE + 256, .len = 60 };
	forged_rx[5] = forged_rx[4];
	forged_rx_n = 6;
	ap_xdp_test_rx = fake_rx;
	got = asyncpool_xsk_recv(s, l, 8);
	ap_xdp_test_rx = NULL;
	is_int(got, 1, "forged rx: one good descriptor of six handed out");
	ok(got == 1 && l[0].buffer_index == infill[1] && l[0].span.length == 60 &&
	   l[0].span.offset == (size_t)infill[1] * FSIZE + 256,
	   "forged rx: the lease is the good one's frame, offset and length");
	asyncpool_xsk_stats(s, &st);
	is_int(st.refused - st0.refused, 5,
	       "forged rx: outside, far outside, a leased frame, past the frame, twice: refused");
	is_int(st.received - st0.received, 1, "forged rx: one received");
	ok(held.span.region != NULL && asyncpool_lease_token(&held) != 0,
	   "forged rx: the frame a caller holds was not handed out again");
	if (got == 1)
		asyncpool_lease_release(&l[0]);

	/* A completion of a frame never sent, and of one outside: refused, none released. */
	asyncpool_xsk_stats(s, &st0);
	forged_comp[0] = (uint64_t)held.buffer_index * FSIZE;
	forged_comp[1] = (uint64_t)FRAMES * FSIZE + 4096;
	forged_comp[2] = (uint64_t)infill[0] * FSIZE;
	forged_comp_n = 3;
	ap_xdp_test_comp = fake_comp;
	got = asyncpool_xsk_complete(s);
	ap_xdp_test_comp = NULL;
	is_int(got, 0, "forged completions: none released");
	asyncpool_xsk_stats(s, &st);
	is_int(st.refused - st0.refused, 3, "forged completions: refused and counted");
	is_int(asyncpool_lease_token(&held) != 0 && asyncpool_release_token(pool,
	       asyncpool_lease_token(&held)) == 0, 1, "the held frame is still the caller's");
	is_int(frames_out(s) + frames_out(other) + (int)asyncpool_available(pool), FRAMES,
	       "forged descriptors lost no frame");
}

int main(void)
{
	struct asyncpool_xsk_options so;
	struct asyncpool_xsk_stats st = { .size = sizeof(st) };
	struct asyncpool_proactor *p;
	struct asyncpool_xdp *x;
	struct asyncpool_xsk *a = NULL, *b = NULL, *dup;
	struct asyncpool *pool;
	char why[256];
	int rc;

	tap_watchdog(0);
#ifndef HAVE_XDP
	{
		struct asyncpool_xdp *none = (void *)1;

		plan(2);
		if (asyncpool_proactor_create_memory(&p))
			bail_out("a memory proactor");
		pool = make_pool(p, FSIZE, 16, 0);
		is_int(asyncpool_xdp_create(pool, NULL, &none), -EOPNOTSUPP,
		       "built without libxdp: asyncpool_xdp_create() is -EOPNOTSUPP");
		ok(none == NULL, "and *out NULL");
		asyncpool_destroy(pool);
		asyncpool_proactor_destroy(p);
		return done_testing();
	}
#endif
	if (asyncpool_proactor_create_memory(&p))
		bail_out("a memory proactor");
	pool = make_pool(p, FSIZE, FRAMES, 0);
	test_args(pool);

	if (xt_netns(why, sizeof(why)) || xt_veth("va", "vb", why, sizeof(why)) ||
	    xt_veth("vc", "vd", why, sizeof(why))) {
		skip(1, "%s", why);
		goto out;
	}
	xt_mac("va", mac_va);
	xt_mac("vb", mac_vb);
	xt_mac("vc", mac_vc);
	xt_mac("vd", mac_vd);
	if (asyncpool_xdp_create(pool, NULL, &x))
		bail_out("asyncpool_xdp_create");
	memset(&so, 0, sizeof(so));
	so.size = sizeof(so);
	so.ifname = "vb";
	so.queue = 0;
	so.ring_size = RING;
	so.flags = ASYNCPOOL_XSK_ZEROCOPY;
	rc = asyncpool_xsk_open(x, &so, &a);
	if (rc == -EPERM || rc == -EAFNOSUPPORT || rc == -EOPNOTSUPP || rc == -EINVAL) {
		skip(1, "no AF_XDP socket with an XDP program here: %s", strerror(-rc));
		asyncpool_xdp_destroy(x);
		goto out;
	}
	is_int(rc, 0, "a socket on vb queue 0");
	if (rc)
		bail_out("asyncpool_xsk_open: %s", strerror(-rc));
	asyncpool_xsk_stats(a, &st);
	is_int(st.mode, ASYNCPOOL_XSK_MODE_COPY, "zero-copy asked on veth: copy mode");
	is_int(st.zerocopy_error, -EOPNOTSUPP, "zero-copy refused by the kernel: -EOPNOTSUPP");
	is_int(st.shared_umem, 0, "the first socket owns the UMEM");
	is_int(st.ifindex, if_nametoindex("vb"), "its interface is vb");
	is_int(st.queue, 0, "its queue is 0");
	is_int(st.need_wakeup, 1, "it asks the kernel for wakeups (need_wakeup)");
	is_int(st.in_fill, RING, "the fill ring full from the start");
	is_int(st.fill_empty, 0, "no refill found the pool empty");
	is_int(asyncpool_available(pool), FRAMES - RING, "its frames leased from the pool");
	ok(asyncpool_xsk_fd(a) >= 0, "its fd");
	is_int(asyncpool_xsk_open(x, &so, &dup), -EEXIST, "a second socket on vb queue 0: -EEXIST");
	is_int(asyncpool_xdp_destroy(x), -EBUSY, "destroy with a socket open: -EBUSY");

	test_receive(pool, a, 4000);
	test_fill_bound(pool, x, a);
	test_send(pool, a, 300);
	test_bad_sends(pool, a);
	test_places(pool, x, a);

	so.ifname = "vc";
	so.flags = ASYNCPOOL_XSK_SKB;
	so.ring_size = 1024;
	rc = asyncpool_xsk_open(x, &so, &b);
	is_int(rc, 0, "a second socket, on vc (generic mode), on the same UMEM");
	if (!rc) {
		is_int(asyncpool_xsk_close(a), -EBUSY,
		       "the UMEM's first socket does not close before the others: -EBUSY");
		test_forward(pool, a, b, 1000);
		test_forged(pool, x, a, b);
		is_int(asyncpool_xsk_close(b), 0, "close the second socket");
	}
	is_int(asyncpool_xsk_close(a), 0, "close the first");
	is_int(asyncpool_xdp_destroy(x), 0, "destroy the UMEM");
	test_queues(pool);
out:
	is_int(asyncpool_available(pool), FRAMES, "every frame back in the pool");
	is_int(asyncpool_check(pool), 0, "the pool checks");
	is_int(asyncpool_destroy(pool), 0, "destroy the pool");
	asyncpool_proactor_destroy(p);
	return done_testing();
}
