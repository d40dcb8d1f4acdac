/* SPDX-License-Identifier: MIT */
/*
 * xdp-bench: frames per second through the pool's AF_XDP backend
 * against the same work on the same UMEM driven the way xdpsock does
 * (libxdp's rings, an array of free frame addresses, one thread), on
 * the same veth, in the same run, interleaved.
 *
 *   xdp-bench [SECONDS-PER-RUN [RUNS [rxdrop|fwd]]]     (defaults: 2 5 rxdrop)
 *   xdp-bench 1 ROUNDS drain2q                           (two threads against one)
 *
 * A network namespace of its own with a veth pair va <-> vb; a sender
 * process pushes 128-byte frames into va as fast as AF_PACKET goes
 * (sendmmsg of 64, qdisc bypassed); the receiver, on vb queue 0 in copy
 * mode (veth has no zero-copy), runs each side in turn for the same
 * time:
 *
 *   plain  libxdp's xsk_umem__create/xsk_socket__create, its inline
 *          ring calls, a stack of free addresses: refill the fill ring
 *          from the stack, peek rx, read the frame, push it back (fwd:
 *          rewrite the MACs, put it on tx, reap the completion ring
 *          into the stack);
 *   pool   asyncpool_xsk_recv (the pool refills the fill ring), read the
 *          frame, asyncpool_release_bulk (fwd: rewrite, asyncpool_xsk_send
 *          on the same socket; the completion ring releases).
 *
 * Per run it prints frames/s, and the receiver's own cost per frame:
 * "work" ns is the time inside the batches that had frames (the rings,
 * the frame read, the allocator), "cpu" ns the thread's CPU time (with
 * the polls and syscalls) per frame.  The sender is the bound on a
 * small VM: frames/s tells little there, the ns per frame is the pool's
 * cost against the stack.  At the end the medians, their ratio and the
 * difference: the pool's cost per frame.
 *
 * XDP_BENCH_CACHE=N gives the pool caches of N buffers (0: none);
 * XDP_BENCH_SHARED=1 makes it a shared pool (asyncpool_shared_create());
 * XDP_BENCH_SINGLE=1 releases lease by lease, not in bulk.
 * XDP_BENCH_ONLY=plain|pool runs one side alone; XDP_BENCH_SPLIT=1
 * prints the pool side's time in asyncpool_xsk_recv() and in
 * asyncpool_release_bulk() a frame.
 *
 * drain2q (since 1.12) times the receive side alone, two threads
 * against one, with the frames already in two rx rings (below, at
 * drain2q()); XDP_BENCH_DEBUG=1 prints each two-thread round's times;
 * XDP_BENCH_SEPARATE=1 gives each socket a UMEM and a pool of its own
 * (the control: nothing shared between the threads),
 * XDP_BENCH_TWO_UMEMS=1 one pool registered as two UMEMs (the pool
 * shared, the backend's per-frame arrays not).
 *
 * Built by `make xdp-bench` (not by make or make check); run as root.
 */
#define _GNU_SOURCE 1
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/if_xdp.h>
#include <xdp/xsk.h>

#include <asyncpool.h>
#include "../../tests/xdp-util.h"

#define FRAMES 4096u
#define FSIZE  2048u
#define RING   2048u
#define BATCH  64u

static uint8_t mac_va[6], mac_vb[6];
static int fwd;

struct result {
	double fps, work_ns, cpu_ns;
	unsigned long frames, batches, polls;
};

static uint64_t ns_now(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static volatile uint64_t sink;

static void touch(const uint8_t *f, uint32_t len)
{
	sink += f[0] + f[len - 1];
}

static void rewrite(uint8_t *f)
{
	memcpy(f, mac_va, 6);
	memcpy(f + 6, mac_vb, 6);
}

/* ---------------------------------------------------------------- sender */

static void sender(void)
{
	int fd = socket(AF_PACKET, SOCK_RAW, 0), one = 1;
	struct sockaddr_ll sll = { .sll_family = AF_PACKET, .sll_ifindex = (int)if_nametoindex("va"),
				   .sll_halen = 6 };
	static uint8_t frames[BATCH][XT_FRAME_LEN];
	struct mmsghdr m[BATCH];
	struct iovec iov[BATCH];

	if (fd < 0)
		_exit(1);
	setsockopt(fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof(one));
	memcpy(sll.sll_addr, mac_vb, 6);
	memset(m, 0, sizeof(m));
	for (unsigned int i = 0; i < BATCH; i++) {
		xt_frame(frames[i], XT_FRAME_LEN, mac_vb, mac_va, i);
		iov[i].iov_base = frames[i];
		iov[i].iov_len = XT_FRAME_LEN;
		m[i].msg_hdr.msg_iov = &iov[i];
		m[i].msg_hdr.msg_iovlen = 1;
		m[i].msg_hdr.msg_name = &sll;
		m[i].msg_hdr.msg_namelen = sizeof(sll);
	}
	for (;;)
		(void)sendmmsg(fd, m, BATCH, 0);
}

/* ---------------------------------------------------------------- plain */

static struct result run_plain(double seconds)
{
	struct xsk_umem_config uc = { .fill_size = RING, .comp_size = RING, .frame_size = FSIZE,
				      .frame_headroom = 0, .flags = 0 };
	struct xsk_socket_config sc = { .rx_size = RING, .tx_size = RING,
					.bind_flags = XDP_COPY | XDP_USE_NEED_WAKEUP };
	/*
	 * Zeroed: libxdp 1.3's xsk_umem__create() sets the fill ring's
	 * cached_cons but not its cached_prod (xdpsock callocs them).  A
	 * stack's garbage there made the first submit move the producer
	 * far past the consumer: the kernel then read stale entries,
	 * wrote many frames into the same few, and the stack never ran
	 * out (until 1.13 this side was measured so).
	 */
	struct xsk_ring_prod fq = { 0 }, tx = { 0 };
	struct xsk_ring_cons cq = { 0 }, rx = { 0 };
	struct xsk_umem *umem;
	struct xsk_socket *xsk;
	struct result res = { 0 };
	uint64_t stack[FRAMES], work = 0, t_end, t0, c0, frames = 0;
	unsigned int top = 0, outstanding = 0;
	void *area = mmap(NULL, (size_t)FRAMES * FSIZE, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	int rc;

	if (area == MAP_FAILED || xsk_umem__create(&umem, area, (uint64_t)FRAMES * FSIZE, &fq, &cq, &uc))
		exit(1);
	for (int tries = 0; (rc = xsk_socket__create(&xsk, "vb", 0, umem, &rx, &tx, &sc)) == -EBUSY &&
	     tries < 2000; tries++)
		usleep(1000);
	if (rc) {
		fprintf(stderr, "xsk_socket__create: %s\n", strerror(-rc));
		exit(1);
	}
	for (unsigned int i = 0; i < FRAMES; i++)
		stack[top++] = (uint64_t)i * FSIZE;
	t0 = ns_now(CLOCK_MONOTONIC);
	c0 = ns_now(CLOCK_THREAD_CPUTIME_ID);
	t_end = t0 + (uint64_t)(seconds * 1e9);
	for (;;) {
		uint64_t t1 = ns_now(CLOCK_MONOTONIC);
		uint32_t idx, fidx, n, rcvd;

		if (t1 >= t_end)
			break;
		/* Refill the fill ring from the stack. */
		n = xsk_prod_nb_free(&fq, top);
		if (n > top)
			n = top;
		if (n > BATCH)
			n = BATCH;
		if (n && xsk_ring_prod__reserve(&fq, n, &fidx) == n) {
			for (uint32_t i = 0; i < n; i++)
				*xsk_ring_prod__fill_addr(&fq, fidx + i) = stack[--top];
			xsk_ring_prod__submit(&fq, n);
		}
		if (fwd && outstanding) {
			uint32_t cidx, c = xsk_ring_cons__peek(&cq, BATCH, &cidx);

			for (uint32_t i = 0; i < c; i++)
				stack[top++] = *xsk_ring_cons__comp_addr(&cq, cidx + i);
			xsk_ring_cons__release(&cq, c);
			outstanding -= c;
			if (outstanding)
				(void)sendto(xsk_socket__fd(xsk), NULL, 0, MSG_DONTWAIT, NULL, 0);
		}
		rcvd = xsk_ring_cons__peek(&rx, BATCH, &idx);
		if (!rcvd) {
			struct pollfd p = { .fd = xsk_socket__fd(xsk), .events = POLLIN };

			if (xsk_ring_prod__needs_wakeup(&fq))
				(void)recvfrom(xsk_socket__fd(xsk), NULL, 0, MSG_DONTWAIT, NULL, NULL);
			poll(&p, 1, 1);
			res.polls++;
			continue;
		}
		if (!fwd) {
			for (uint32_t i = 0; i < rcvd; i++) {
				const struct xdp_desc *d = xsk_ring_cons__rx_desc(&rx, idx + i);

				touch(xsk_umem__get_data(area, d->addr), d->len);
				stack[top++] = xsk_umem__extract_addr(d->addr);
			}
			xsk_ring_cons__release(&rx, rcvd);
		} else {
			uint32_t tidx;

			while (xsk_ring_prod__reserve(&tx, rcvd, &tidx) != rcvd)
				(void)sendto(xsk_socket__fd(xsk), NULL, 0, MSG_DONTWAIT, NULL, 0);
			for (uint32_t i = 0; i < rcvd; i++) {
				const struct xdp_desc *d = xsk_ring_cons__rx_desc(&rx, idx + i);
				struct xdp_desc *t = xsk_ring_prod__tx_desc(&tx, tidx + i);

				rewrite(xsk_umem__get_data(area, d->addr));
				t->addr = d->addr;
				t->len = d->len;
				t->options = 0;
			}
			xsk_ring_prod__submit(&tx, rcvd);
			xsk_ring_cons__release(&rx, rcvd);
			outstanding += rcvd;
			(void)sendto(xsk_socket__fd(xsk), NULL, 0, MSG_DONTWAIT, NULL, 0);
		}
		frames += rcvd;
		res.batches++;
		work += ns_now(CLOCK_MONOTONIC) - t1;
	}
	/* Never more than a ring past the kernel's consumer (tools/bench_xdp.c). */
	if (__atomic_load_n(fq.producer, __ATOMIC_ACQUIRE) -
	    __atomic_load_n(fq.consumer, __ATOMIC_ACQUIRE) > fq.size) {
		fprintf(stderr, "xdp-bench: the frame stack's fill ring overran the kernel's consumer\n");
		exit(1);
	}
	res.frames = frames;
	res.fps = frames / ((ns_now(CLOCK_MONOTONIC) - t0) / 1e9);
	res.cpu_ns = frames ? (double)(ns_now(CLOCK_THREAD_CPUTIME_ID) - c0) / frames : 0;
	res.work_ns = frames ? (double)work / frames : 0;
	xsk_socket__delete(xsk);
	xsk_umem__delete(umem);
	munmap(area, (size_t)FRAMES * FSIZE);
	return res;
}

/* ---------------------------------------------------------------- pool */

static uint64_t recv_ns, rel_ns;

static struct result run_pool(double seconds)
{
	struct asyncpool_proactor *p;
	struct asyncpool_region *r;
	struct asyncpool *pool;
	struct asyncpool_xdp *x;
	struct asyncpool_xsk *s;
	struct asyncpool_xsk_options so = { .size = sizeof(so), .ifname = "vb", .ring_size = RING };
	struct asyncpool_slab_options sl = { .size = sizeof(sl), .buffer_size = FSIZE,
					     .buffer_count = FRAMES, .numa_node = -1,
					     .flags = ASYNCPOOL_SLAB_POPULATE };
	struct asyncpool_slab *slab;
	struct result res = { 0 };
	uint64_t work = 0, t_end, t0, c0, frames = 0;
	/* XDP_BENCH_CACHE=N: a pool with caches of N (0: none); default asyncpool_create()'s. */
	struct asyncpool_options po = { .size = sizeof(po),
					.cache_size = (uint32_t)atoi(getenv("XDP_BENCH_CACHE") ?: "0") };
	bool single = getenv("XDP_BENCH_SINGLE") != NULL;
	int rc;

	struct asyncpool_shared_options sho = { .size = sizeof(sho), .buffer_size = FSIZE,
						.buffer_count = FRAMES };
	struct asyncpool_shared *sp = NULL;

	/* XDP_BENCH_SHARED=1: a shared pool (asyncpool_shared_create()'s memfd,
	 * an attachment: the summary of where the frames are is written). */
	if (getenv("XDP_BENCH_SHARED")) {
		if (asyncpool_shared_create(&sho, &sp) ||
		    asyncpool_xdp_create(asyncpool_shared_pool(sp), NULL, &x))
			exit(1);
		pool = asyncpool_shared_pool(sp);
	} else if (asyncpool_slab_create(&sl, &slab) || asyncpool_proactor_create_memory(&p) ||
	    asyncpool_proactor_register_slab(p, slab, ASYNCPOOL_ACCESS_READ, &r) ||
	    (getenv("XDP_BENCH_CACHE") ? asyncpool_create_opts(r, &po, &pool) : asyncpool_create(r, &pool)) ||
	    asyncpool_xdp_create(pool, NULL, &x))
		exit(1);
	for (int tries = 0; (rc = asyncpool_xsk_open(x, &so, &s)) == -EBUSY && tries < 2000; tries++)
		usleep(1000);
	if (rc) {
		fprintf(stderr, "asyncpool_xsk_open: %s\n", strerror(-rc));
		exit(1);
	}
	t0 = ns_now(CLOCK_MONOTONIC);
	c0 = ns_now(CLOCK_THREAD_CPUTIME_ID);
	t_end = t0 + (uint64_t)(seconds * 1e9);
	for (;;) {
		uint64_t t1 = ns_now(CLOCK_MONOTONIC);
		struct asyncpool_lease l[BATCH];
		int k;

		if (t1 >= t_end)
			break;
		if (fwd)
			asyncpool_xsk_complete(s);
		k = asyncpool_xsk_recv(s, l, BATCH);
		if (k <= 0) {
			struct pollfd pf = { .fd = asyncpool_xsk_fd(s), .events = POLLIN };

			poll(&pf, 1, 1);
			res.polls++;
			continue;
		}
		if (!fwd) {
			uint64_t t2 = ns_now(CLOCK_MONOTONIC), t3;

			recv_ns += t2 - t1;
			for (int i = 0; i < k; i++)
				touch(asyncpool_span_ptr(l[i].span), (uint32_t)l[i].span.length);
			t3 = ns_now(CLOCK_MONOTONIC);
			if (single)
				for (int i = 0; i < k; i++)
					asyncpool_lease_release(&l[i]);
			else
				asyncpool_release_bulk(l, (unsigned int)k);
			rel_ns += ns_now(CLOCK_MONOTONIC) - t3;
		} else {
			for (int i = 0; i < k; i++)
				rewrite(asyncpool_span_ptr(l[i].span));
			for (int sent = 0; sent < k;) {
				int n = asyncpool_xsk_send(s, l + sent, (unsigned int)(k - sent));

				if (n < 0)
					exit(1);
				sent += n;
			}
		}
		frames += (uint64_t)k;
		res.batches++;
		work += ns_now(CLOCK_MONOTONIC) - t1;
	}
	res.frames = frames;
	res.fps = frames / ((ns_now(CLOCK_MONOTONIC) - t0) / 1e9);
	res.cpu_ns = frames ? (double)(ns_now(CLOCK_THREAD_CPUTIME_ID) - c0) / frames : 0;
	res.work_ns = frames ? (double)work / frames : 0;
	if (getenv("XDP_BENCH_SPLIT") && frames)
		fprintf(stderr, "pool: recv %.1f ns, release %.1f ns a frame\n",
			(double)recv_ns / frames, (double)rel_ns / frames);
	recv_ns = rel_ns = 0;
	for (int i = 0; i < 1000; i++) {
		struct asyncpool_xsk_stats st = { .size = sizeof(st) };

		asyncpool_xsk_complete(s);
		asyncpool_xsk_stats(s, &st);
		if (!st.in_tx)
			break;
		usleep(1000);
	}
	asyncpool_xsk_close(s);
	asyncpool_xdp_destroy(x);
	asyncpool_cache_flush_all(pool);
	if (asyncpool_available(pool) != FRAMES)
		fprintf(stderr, "pool: %zu of %u frames back\n", asyncpool_available(pool), FRAMES);
	if (sp) {
		asyncpool_shared_close(sp);
		return res;
	}
	asyncpool_destroy(pool);
	asyncpool_region_unref(r);
	asyncpool_slab_unref(slab);
	asyncpool_proactor_destroy(p);
	return res;
}

static double median(double *v, int n);

/* ---------------------------------------------------------------- drain2q */

/*
 * drain2q: two threads against one, the receive side alone, where the
 * sender cannot be the bound.  A veth with two queues, a socket on each
 * (one pool, one UMEM); each round first puts DRAIN_N frames in each rx
 * ring (sent from this thread pinned to CPU 0, then to CPU 1: a frame
 * sent on CPU q lands on queue q), waits until the kernel has put them
 * all there, then times their receipt: receive, read, release, refill,
 * until both rings are empty, by one thread reading both sockets or by
 * two threads, a socket and a CPU each.  The kernel's copy into the
 * frames happened before the clock starts: what is timed is the
 * library's receive path and the program's, on two CPUs or one.
 */
#define DRAIN_N 2000u
#define DRAIN_BLOCK 8u

struct drainer {
	struct asyncpool_xsk *s[2];
	unsigned nsock;
	unsigned long frames;
	uint64_t t_end;
	_Atomic unsigned go, done, spin;
	pthread_t th;
};

/* Receive, read and release until every socket's rx ring is empty. */
static void drain(struct drainer *d)
{
	struct asyncpool_lease l[BATCH];
	unsigned idle = 0;

	while (idle < d->nsock * 2) {
		idle++;
		for (unsigned i = 0; i < d->nsock; i++) {
			int k = asyncpool_xsk_recv(d->s[i], l, BATCH);

			if (k <= 0)
				continue;
			idle = 0;
			for (int j = 0; j < k; j++)
				touch(asyncpool_span_ptr(l[j].span), (uint32_t)l[j].span.length);
			asyncpool_release_bulk(l, (unsigned int)k);
			d->frames += (unsigned long)k;
		}
	}
	d->t_end = ns_now(CLOCK_MONOTONIC);
}

static void pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	(void)sched_setaffinity(0, sizeof(set), &set);
}

/* The second thread: on CPU 1, a drain per round it is told to start. */
static void *drain_thread(void *arg)
{
	struct drainer *d = arg;
	unsigned seen = 0;

	pin(1);
	for (;;) {
		unsigned go;

		/* Spins only in a block of two-thread rounds (spin 1), else naps. */
		while ((go = atomic_load(&d->go)) == seen) {
			if (atomic_load(&d->spin))
				__builtin_ia32_pause();
			else
				usleep(200);
		}
		if (go == ~0u)
			return NULL;
		seen = go;
		d->frames = 0;
		drain(d);
		atomic_store(&d->done, go);
	}
}

/* n test frames into va from the CPU we run on. */
static void send_n(int fd, unsigned n)
{
	static uint8_t frames[BATCH][XT_FRAME_LEN];
	struct sockaddr_ll sll = { .sll_family = AF_PACKET, .sll_ifindex = (int)if_nametoindex("va"),
				   .sll_halen = 6 };
	struct mmsghdr m[BATCH];
	struct iovec iov[BATCH];

	memcpy(sll.sll_addr, mac_vb, 6);
	memset(m, 0, sizeof(m));
	for (unsigned i = 0; i < BATCH; i++) {
		xt_frame(frames[i], XT_FRAME_LEN, mac_vb, mac_va, i);
		iov[i] = (struct iovec){ .iov_base = frames[i], .iov_len = XT_FRAME_LEN };
		m[i].msg_hdr.msg_iov = &iov[i];
		m[i].msg_hdr.msg_iovlen = 1;
		m[i].msg_hdr.msg_name = &sll;
		m[i].msg_hdr.msg_namelen = sizeof(sll);
	}
	for (unsigned sent = 0, tries = 0; sent < n && tries < 100000; tries++) {
		int k = sendmmsg(fd, m, n - sent < BATCH ? n - sent : BATCH, 0);

		if (k > 0)
			sent += (unsigned)k;
	}
}

static int drain2q(int rounds)
{
	struct asyncpool_slab_options sl = { .size = sizeof(sl), .buffer_size = FSIZE,
					     .buffer_count = 2 * FRAMES, .numa_node = -1,
					     .flags = ASYNCPOOL_SLAB_POPULATE };
	struct asyncpool_xsk_options so = { .size = sizeof(so), .ifname = "vb", .ring_size = RING };
	struct asyncpool_proactor *p;
	struct asyncpool_region *r;
	struct asyncpool_slab *slab;
	struct asyncpool *pool;
	struct asyncpool_xdp *xs[2];
	struct asyncpool_xsk *s[2];
	struct drainer one, two;
	/* XDP_BENCH_SEPARATE=1: a UMEM and a pool per socket, the control:
	 * the same code with nothing shared between the threads. */
	const unsigned nx = getenv("XDP_BENCH_SEPARATE") || getenv("XDP_BENCH_TWO_UMEMS") ? 2 : 1;
	/* XDP_BENCH_TWO_UMEMS=1: one pool, registered as a UMEM twice (a
	 * socket on each): the pool shared, the UMEMs' own arrays not. */
	const bool two_umems = getenv("XDP_BENCH_TWO_UMEMS") != NULL;
	static double f1[1000], f2[1000];
	unsigned long short_rounds = 0, split[2] = { 0, 0 };
	struct asyncpool_options po = { .size = sizeof(po),
					.cache_size = (uint32_t)atoi(getenv("XDP_BENCH_CACHE") ?: "0") };
	int fd = socket(AF_PACKET, SOCK_RAW, 0), on = 1;

	if (fd < 0 || setsockopt(fd, SOL_PACKET, PACKET_QDISC_BYPASS, &on, sizeof(on)) ||
	    asyncpool_proactor_create_memory(&p))
		return 1;
	for (unsigned k = 0; k < nx; k++)
		if (k && two_umems ? asyncpool_xdp_create(pool, NULL, &xs[k]) :
		    asyncpool_slab_create(&sl, &slab) ||
		    asyncpool_proactor_register_slab(p, slab, ASYNCPOOL_ACCESS_READ, &r) ||
		    (getenv("XDP_BENCH_CACHE") ? asyncpool_create_opts(r, &po, &pool) :
						 asyncpool_create(r, &pool)) ||
		    asyncpool_xdp_create(pool, NULL, &xs[k]))
			return 1;
	for (unsigned q = 0; q < 2; q++) {
		struct asyncpool_xdp *x = xs[nx == 2 ? q : 0];
		int rc;

		so.queue = q;
		for (int tries = 0; (rc = asyncpool_xsk_open(x, &so, &s[q])) == -EBUSY && tries < 2000;
		     tries++)
			usleep(1000);
		if (rc) {
			fprintf(stderr, "asyncpool_xsk_open queue %u: %s\n", q, strerror(-rc));
			return 1;
		}
	}
	memset(&one, 0, sizeof(one));
	memset(&two, 0, sizeof(two));
	one.s[0] = s[0], one.s[1] = s[1], one.nsock = 2;
	two.s[0] = s[1], two.nsock = 1;
	if (pthread_create(&two.th, NULL, drain_thread, &two))
		return 1;
	printf("# drain2q: %d rounds each way, %u frames a queue a round, in blocks of %u rounds"
	       " (the first of each not counted: the frames change owner), alternating; %s\n",
	       rounds, DRAIN_N, DRAIN_BLOCK, two_umems ? "one pool, a UMEM per socket" :
	       nx == 2 ? "a UMEM and a pool per socket" : "one UMEM, one pool");
	for (int i = 0, n1 = 0, n2 = 0; n1 < rounds || n2 < rounds; i++) {
		bool both = (i / DRAIN_BLOCK) % 2, counted = i % DRAIN_BLOCK != 0;
		struct asyncpool_xdp_places pl = { .size = sizeof(pl) };
		uint64_t t0, t;

		atomic_store(&two.spin, both);
		/* Fill: DRAIN_N frames on each queue; wait until all are in the rings. */
		for (int q = 0; q < 2; q++) {
			pin(q);
			send_n(fd, DRAIN_N);
		}
		pin(0);
		for (int w = 0; w < 5000; w++) {
			uint32_t rx = 0;

			for (unsigned k = 0; k < nx; k++) {
				asyncpool_xdp_places(xs[k], &pl);
				rx += pl.rx;
			}
			pl.rx = rx;
			if (pl.rx >= 2 * DRAIN_N)
				break;
			usleep(200);
		}
		short_rounds += pl.rx < 2 * DRAIN_N;
		one.frames = 0;
		/* Both CPUs busy when the clock starts, as the second thread's is
		 * (it spins): a CPU back from a nap runs slower for a while. */
		for (uint64_t until = ns_now(CLOCK_MONOTONIC) + 500000; ns_now(CLOCK_MONOTONIC) < until;)
			__builtin_ia32_pause();
		t0 = ns_now(CLOCK_MONOTONIC);
		if (both) {
			struct drainer mine = { .s = { s[0] }, .nsock = 1 };

			atomic_store(&two.go, (unsigned)i + 1);
			drain(&mine);
			while (atomic_load(&two.done) != (unsigned)i + 1)
				__builtin_ia32_pause();
			t = (mine.t_end > two.t_end ? mine.t_end : two.t_end) - t0;
			if (getenv("XDP_BENCH_DEBUG"))
				fprintf(stderr, "round %d: cpu0 %lu frames %.1f us, cpu1 %lu frames %.1f us\n", i,
					mine.frames, (mine.t_end - t0) / 1e3, two.frames, (two.t_end - t0) / 1e3);
			if (counted && n2 < rounds) {
				f2[n2++] = (mine.frames + two.frames) / (t / 1e9);
				split[0] += mine.frames;
				split[1] += two.frames;
			}
		} else {
			drain(&one);
			t = one.t_end - t0;
			if (counted && n1 < rounds)
				f1[n1++] = one.frames / (t / 1e9);
		}
	}
	atomic_store(&two.go, ~0u);
	pthread_join(two.th, NULL);
	{
		double m1 = median(f1, rounds), m2 = median(f2, rounds);

		printf("one thread, both sockets:  median %.0f frames/s\n", m1);
		printf("two threads, a socket each: median %.0f frames/s (queue 0 %lu, queue 1 %lu frames)\n",
		       m2, split[0], split[1]);
		printf("two threads / one: %.2f; rounds short of %u frames in the rings: %lu\n", m2 / m1,
		       2 * DRAIN_N, short_rounds);
	}
	asyncpool_xsk_close(s[1]);
	asyncpool_xsk_close(s[0]);
	for (unsigned k = 0; k < nx; k++)
		asyncpool_xdp_destroy(xs[k]);
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 2.0;
	int runs = argc > 2 ? atoi(argv[2]) : 5;
	double pf[64], pw[64], pc[64], qf[64], qw[64], qc[64];
	char why[256];
	pid_t snd;

	/* XDP_BENCH_ONLY=plain|pool: one side alone (for perf stat -e cycles:u). */
	const char *only = getenv("XDP_BENCH_ONLY");

	fwd = argc > 3 && !strcmp(argv[3], "fwd");
	if (argc > 3 && !strcmp(argv[3], "drain2q")) {
		if (runs < 1 || runs > 1000 || xt_netns(why, sizeof(why)) ||
		    xt_veth_queues("va", "vb", 2, why, sizeof(why))) {
			fprintf(stderr, "xdp-bench drain2q: %s\n", runs < 1 || runs > 1000 ?
				"1 to 1000 rounds" : why);
			return 77;
		}
		xt_mac("va", mac_va);
		xt_mac("vb", mac_vb);
		if (system("sysctl -qw net.ipv6.conf.all.disable_ipv6=1 >/dev/null 2>&1"))
			fprintf(stderr, "# IPv6 stays on\n");
		return drain2q(runs);
	}
	if (runs < 1 || runs > 64 || seconds <= 0) {
		fprintf(stderr, "usage: xdp-bench [SECONDS-PER-RUN [RUNS(1-64) [rxdrop|fwd]]] | 1 ROUNDS drain2q\n");
		return 2;
	}
	if (xt_netns(why, sizeof(why)) || xt_veth("va", "vb", why, sizeof(why))) {
		fprintf(stderr, "xdp-bench: %s\n", why);
		return 77;
	}
	xt_mac("va", mac_va);
	xt_mac("vb", mac_vb);
	snd = fork();
	if (snd == 0)
		sender();
	printf("# %s, %d runs of %.1f s each side, interleaved; 128-byte frames, copy mode\n",
	       fwd ? "fwd (rx, rewrite, tx on the same socket)" : "rxdrop", runs, seconds);
	printf("%-6s %3s %12s %12s %9s %9s %7s %8s\n", "side", "run", "frames", "frames/s", "work-ns",
	       "cpu-ns", "batch", "polls");
	for (int i = 0; i < runs; i++) {
		struct result a, b;

		memset(&a, 0, sizeof(a));
		memset(&b, 0, sizeof(b));
		if (only && strcmp(only, "pool")) {
			a = run_plain(seconds);
		} else if (only) {
			b = run_pool(seconds);
		} else if (i % 2) {
			b = run_pool(seconds);
			a = run_plain(seconds);
		} else {
			a = run_plain(seconds);
			b = run_pool(seconds);
		}
		printf("%-6s %3d %12lu %12.0f %9.1f %9.1f %7.1f %8lu\n", "plain", i, a.frames, a.fps,
		       a.work_ns, a.cpu_ns, a.batches ? (double)a.frames / a.batches : 0, a.polls);
		printf("%-6s %3d %12lu %12.0f %9.1f %9.1f %7.1f %8lu\n", "pool", i, b.frames, b.fps,
		       b.work_ns, b.cpu_ns, b.batches ? (double)b.frames / b.batches : 0, b.polls);
		fflush(stdout);
		pf[i] = a.fps, pw[i] = a.work_ns, pc[i] = a.cpu_ns;
		qf[i] = b.fps, qw[i] = b.work_ns, qc[i] = b.cpu_ns;
	}
	kill(snd, SIGKILL);
	waitpid(snd, NULL, 0);
	{
		double mpf = median(pf, runs), mqf = median(qf, runs), mpw = median(pw, runs),
		       mqw = median(qw, runs), mpc = median(pc, runs), mqc = median(qc, runs);

		printf("median plain: %.0f frames/s, work %.1f ns, cpu %.1f ns a frame\n", mpf, mpw, mpc);
		printf("median pool:  %.0f frames/s, work %.1f ns, cpu %.1f ns a frame\n", mqf, mqw, mqc);
		printf("pool/plain frames/s: %.3f; the pool's cost a frame: %+.1f ns work, %+.1f ns cpu\n",
		       mqf / mpf, mqw - mpw, mqc - mpc);
	}
	return 0;
}
