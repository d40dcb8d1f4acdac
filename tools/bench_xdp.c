/* SPDX-License-Identifier: MIT */
/*
 * tools/bench_xdp.c: the xdp-* cases of `asyncpool bench` (issue 55).
 * Frames per second through the pool's AF_XDP backend against the same
 * work on a UMEM driven the way xdpsock drives it (libxdp's rings, an
 * array of free frame addresses, one thread), on the same veth, in the
 * same run, the two sides interleaved.
 *
 * A child process goes into a network namespace of its own
 * (unshare(CLONE_NEWNET): the kernel deletes it, with its veth pair,
 * when the child and its sender exit, however they exit), makes the
 * pair va <-> vb, and forks a sender that pushes 128-byte frames into
 * va as fast as AF_PACKET goes.  The receiver, on vb queue 0 in copy
 * mode (veth has no zero-copy), runs each side in turn for ops / 2e6
 * seconds (at least 0.05 s), after a warm-up of each:
 *
 *   plain  refill the fill ring from the stack, peek rx, read the frame,
 *          push its address back (fwd: rewrite the MACs, put it on tx,
 *          reap the completion ring into the stack);
 *   pool   asyncpool_xsk_recv() (the pool refills the fill ring), read
 *          the frame, asyncpool_release_bulk() (fwd: rewrite,
 *          asyncpool_xsk_send() on the same socket; the completion ring
 *          releases).
 *
 * Per repetition: the frames/s of each side and its "work" ns a frame
 * (the time inside the batches that had frames: the rings, the frame,
 * the allocator).  The row: ns/op the pool's work ns a frame (median,
 * min, max), Mops/s its Mframes/s; pool_vs_plain_pct the ratio of the
 * median frames/s, in per cent; pool_cost_ns the difference of the
 * median work ns a frame, pool minus plain.  The sender bounds the
 * frames/s on a small machine, and shares its CPUs with the receiver.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tool.h"

#ifdef HAVE_XDP
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/mman.h>

#include <linux/if_xdp.h>
#include <xdp/xsk.h>

#include <asyncpool.h>
#include "../tests/xdp-util.h"

#define BX_FRAMES 4096u
#define BX_FSIZE  2048u
#define BX_RING   2048u
#define BX_BATCH  64u
#define BX_REPS_MAX 64u
#define BX_OVERRAN "the frame stack's fill ring overran the kernel's consumer: no measure"

struct bx_side {
	double fps, work_ns;
	unsigned long frames;
};

/* What the child sends back through its pipe. */
struct bx_report {
	int rc;                         /* 0, or -errno */
	char why[256];
	unsigned reps;
	double plain_fps[BX_REPS_MAX], plain_ns[BX_REPS_MAX];
	double pool_fps[BX_REPS_MAX], pool_ns[BX_REPS_MAX];
	unsigned long lost;             /* pool frames not back after a side */
	double q1_share[BX_REPS_MAX];   /* two queues: the share of frames on queue 1 */
};

static uint8_t bx_mac_va[6], bx_mac_vb[6];
/* The frame stack's ring overran (bx_plain()): its -EUCLEAN is that. */
static bool bx_overran;
/* Per thread: the two-queue case touches frames on two threads. */
static _Thread_local volatile uint64_t bx_sink;

static uint64_t bx_now(void)
{
	return tool_now_ns();
}

static void bx_touch(const uint8_t *f, uint32_t len)
{
	bx_sink += f[0] + f[len - 1];
}

static void bx_rewrite(uint8_t *f)
{
	memcpy(f, bx_mac_va, 6);
	memcpy(f + 6, bx_mac_vb, 6);
}

static int bx_plain(bool fwd, double seconds, struct bx_side *out)
{
	struct xsk_umem_config uc = { .fill_size = BX_RING, .comp_size = BX_RING,
				      .frame_size = BX_FSIZE, .frame_headroom = 0, .flags = 0 };
	struct xsk_socket_config sc = { .rx_size = BX_RING, .tx_size = BX_RING,
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
	static uint64_t stack[BX_FRAMES];
	uint64_t work = 0, t_end, t0, frames = 0;
	unsigned int top = 0, outstanding = 0;
	size_t len = (size_t)BX_FRAMES * BX_FSIZE;
	void *area = mmap(NULL, len, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	int rc, fd;

	if (area == MAP_FAILED)
		return -errno;
	rc = xsk_umem__create(&umem, area, len, &fq, &cq, &uc);
	if (rc) {
		munmap(area, len);
		return rc;
	}
	/* -EBUSY: the last socket on the queue is torn down later (deferred). */
	for (int tries = 0; (rc = xsk_socket__create(&xsk, "vb", 0, umem, &rx, &tx, &sc)) == -EBUSY &&
	     tries < 2000; tries++)
		usleep(1000);
	if (rc) {
		xsk_umem__delete(umem);
		munmap(area, len);
		return rc;
	}
	fd = xsk_socket__fd(xsk);
	for (unsigned int i = 0; i < BX_FRAMES; i++)
		stack[top++] = (uint64_t)i * BX_FSIZE;
	t0 = bx_now();
	t_end = t0 + (uint64_t)(seconds * 1e9);
	for (;;) {
		uint64_t t1 = bx_now();
		uint32_t idx, fidx, n, got;

		if (t1 >= t_end)
			break;
		n = xsk_prod_nb_free(&fq, top);
		if (n > top)
			n = top;
		if (n > BX_BATCH)
			n = BX_BATCH;
		if (n && xsk_ring_prod__reserve(&fq, n, &fidx) == n) {
			for (uint32_t i = 0; i < n; i++)
				*xsk_ring_prod__fill_addr(&fq, fidx + i) = stack[--top];
			xsk_ring_prod__submit(&fq, n);
		}
		if (fwd && outstanding) {
			uint32_t cidx, c = xsk_ring_cons__peek(&cq, BX_BATCH, &cidx);

			for (uint32_t i = 0; i < c; i++)
				stack[top++] = *xsk_ring_cons__comp_addr(&cq, cidx + i);
			xsk_ring_cons__release(&cq, c);
			outstanding -= c;
			if (outstanding)
				(void)sendto(fd, NULL, 0, MSG_DONTWAIT, NULL, 0);
		}
		got = xsk_ring_cons__peek(&rx, BX_BATCH, &idx);
		if (!got) {
			struct pollfd p = { .fd = fd, .events = POLLIN };

			if (xsk_ring_prod__needs_wakeup(&fq))
				(void)recvfrom(fd, NULL, 0, MSG_DONTWAIT, NULL, NULL);
			(void)poll(&p, 1, 1);
			continue;
		}
		if (!fwd) {
			for (uint32_t i = 0; i < got; i++) {
				const struct xdp_desc *d = xsk_ring_cons__rx_desc(&rx, idx + i);

				bx_touch(xsk_umem__get_data(area, d->addr), d->len);
				stack[top++] = xsk_umem__extract_addr(d->addr);
			}
			xsk_ring_cons__release(&rx, got);
		} else {
			uint32_t tidx;

			for (int tries = 0; xsk_ring_prod__reserve(&tx, got, &tidx) != got; tries++) {
				if (tries > 100000) {
					rc = -EIO;
					goto out;
				}
				(void)sendto(fd, NULL, 0, MSG_DONTWAIT, NULL, 0);
			}
			for (uint32_t i = 0; i < got; i++) {
				const struct xdp_desc *d = xsk_ring_cons__rx_desc(&rx, idx + i);
				struct xdp_desc *t = xsk_ring_prod__tx_desc(&tx, tidx + i);

				bx_rewrite(xsk_umem__get_data(area, d->addr));
				t->addr = d->addr;
				t->len = d->len;
				t->options = 0;
			}
			xsk_ring_prod__submit(&tx, got);
			xsk_ring_cons__release(&rx, got);
			outstanding += got;
			(void)sendto(fd, NULL, 0, MSG_DONTWAIT, NULL, 0);
		}
		frames += got;
		work += bx_now() - t1;
	}
	/*
	 * The stack's own check: its producer never more than a ring past
	 * the consumer the kernel published (past it, the kernel reads
	 * entries it had read before: frames twice, the measure void).
	 */
	if (__atomic_load_n(fq.producer, __ATOMIC_ACQUIRE) -
	    __atomic_load_n(fq.consumer, __ATOMIC_ACQUIRE) > fq.size) {
		bx_overran = true;      /* bx_child() says so */
		rc = -EUCLEAN;
		goto out;
	}
	out->frames = frames;
	out->fps = frames / ((bx_now() - t0) / 1e9);
	out->work_ns = frames ? (double)work / frames : 0;
	rc = 0;
out:
	xsk_socket__delete(xsk);
	xsk_umem__delete(umem);
	munmap(area, len);
	return rc;
}

/*
 * A side's pool, region, slab and proactor undone (its sockets and UMEM
 * first, by the caller); after a run that went well, the frames of the
 * pool's want that are not back are counted lost.
 */
static void bx_teardown(struct asyncpool_proactor *p, struct asyncpool_slab *slab,
			struct asyncpool_region *r, struct asyncpool *pool, int rc,
			uint32_t want, unsigned long *lost)
{
	if (pool) {
		(void)asyncpool_cache_flush_all(pool);
		if (!rc && asyncpool_available(pool) != want)
			*lost += want - asyncpool_available(pool);
		(void)asyncpool_destroy(pool);
	}
	if (r)
		asyncpool_region_unref(r);
	if (slab)
		asyncpool_slab_unref(slab);
	if (p)
		(void)asyncpool_proactor_destroy(p);
}

static int bx_pool(bool fwd, double seconds, struct bx_side *out, unsigned long *lost)
{
	struct asyncpool_slab_options sl = { .size = sizeof(sl), .buffer_size = BX_FSIZE,
					     .buffer_count = BX_FRAMES, .numa_node = -1,
					     .flags = ASYNCPOOL_SLAB_POPULATE };
	struct asyncpool_xsk_options so = { .size = sizeof(so), .ifname = "vb", .ring_size = BX_RING };
	struct asyncpool_proactor *p = NULL;
	struct asyncpool_region *r = NULL;
	struct asyncpool_slab *slab = NULL;
	struct asyncpool *pool = NULL;
	struct asyncpool_xdp *x = NULL;
	struct asyncpool_xsk *s = NULL;
	uint64_t work = 0, t_end, t0, frames = 0;
	int rc;

	if ((rc = asyncpool_slab_create(&sl, &slab)) || (rc = asyncpool_proactor_create_memory(&p)) ||
	    (rc = asyncpool_proactor_register_slab(p, slab, ASYNCPOOL_ACCESS_READ, &r)) ||
	    (rc = asyncpool_create(r, &pool)) || (rc = asyncpool_xdp_create(pool, NULL, &x)))
		goto out;
	for (int tries = 0; (rc = asyncpool_xsk_open(x, &so, &s)) == -EBUSY && tries < 2000; tries++)
		usleep(1000);
	if (rc)
		goto out;
	t0 = bx_now();
	t_end = t0 + (uint64_t)(seconds * 1e9);
	for (;;) {
		uint64_t t1 = bx_now();
		struct asyncpool_lease l[BX_BATCH];
		int k;

		if (t1 >= t_end)
			break;
		if (fwd)
			(void)asyncpool_xsk_complete(s);
		k = asyncpool_xsk_recv(s, l, BX_BATCH);
		if (k <= 0) {
			struct pollfd pf = { .fd = asyncpool_xsk_fd(s), .events = POLLIN };

			(void)poll(&pf, 1, 1);
			continue;
		}
		if (!fwd) {
			for (int i = 0; i < k; i++)
				bx_touch(asyncpool_span_ptr(l[i].span), (uint32_t)l[i].span.length);
			asyncpool_release_bulk(l, (unsigned int)k);
		} else {
			for (int i = 0; i < k; i++)
				bx_rewrite(asyncpool_span_ptr(l[i].span));
			for (int sent = 0, tries = 0; sent < k; tries++) {
				int n = asyncpool_xsk_send(s, l + sent, (unsigned int)(k - sent));

				if (n < 0 || tries > 100000) {
					rc = n < 0 ? n : -EIO;
					goto out;
				}
				sent += n;
			}
		}
		frames += (uint64_t)k;
		work += bx_now() - t1;
	}
	out->frames = frames;
	out->fps = frames / ((bx_now() - t0) / 1e9);
	out->work_ns = frames ? (double)work / frames : 0;
	/* What is in flight comes back through the completion ring. */
	for (int i = 0; i < 1000; i++) {
		struct asyncpool_xsk_stats st = { .size = sizeof(st) };

		(void)asyncpool_xsk_complete(s);
		if (asyncpool_xsk_stats(s, &st) || !st.in_tx)
			break;
		usleep(1000);
	}
out:
	if (s)
		(void)asyncpool_xsk_close(s);
	if (x)
		(void)asyncpool_xdp_destroy(x);
	bx_teardown(p, slab, r, pool, rc, BX_FRAMES, lost);
	return rc;
}

/* ---------------------------------------------------------------- two queues */

/*
 * Two sockets on vb's queues 0 and 1, on one UMEM (XDP_SHARED_UMEM, each
 * with its own fill and completion rings) over one pool, read by one
 * thread (both sockets in turn) or by two (a socket each).
 */
struct bx_q {
	struct asyncpool_xsk *s[2];
	unsigned nsock;
	double seconds;
	uint64_t frames[2], work;
	int rc;
};

static void *bx_q_loop(void *arg)
{
	struct bx_q *q = arg;
	uint64_t t0 = bx_now(), t_end = t0 + (uint64_t)(q->seconds * 1e9);

	for (;;) {
		uint64_t t1 = bx_now();
		struct asyncpool_lease l[BX_BATCH];
		struct pollfd pf[2];
		unsigned any = 0;

		if (t1 >= t_end)
			break;
		for (unsigned i = 0; i < q->nsock; i++) {
			int k = asyncpool_xsk_recv(q->s[i], l, BX_BATCH);

			if (k < 0) {
				q->rc = k;
				return NULL;
			}
			for (int j = 0; j < k; j++)
				bx_touch(asyncpool_span_ptr(l[j].span), (uint32_t)l[j].span.length);
			asyncpool_release_bulk(l, (unsigned int)k);
			q->frames[i] += (uint64_t)k;
			any += (unsigned)k;
		}
		if (any) {
			q->work += bx_now() - t1;
			continue;
		}
		for (unsigned i = 0; i < q->nsock; i++)
			pf[i] = (struct pollfd){ .fd = asyncpool_xsk_fd(q->s[i]), .events = POLLIN };
		(void)poll(pf, q->nsock, 1);
	}
	return NULL;
}

static int bx_queues(unsigned threads, double seconds, struct bx_side *out, double *q1_share,
		     unsigned long *lost)
{
	struct asyncpool_slab_options sl = { .size = sizeof(sl), .buffer_size = BX_FSIZE,
					     .buffer_count = 2 * BX_FRAMES, .numa_node = -1,
					     .flags = ASYNCPOOL_SLAB_POPULATE };
	struct asyncpool_xsk_options so = { .size = sizeof(so), .ifname = "vb", .ring_size = BX_RING };
	struct asyncpool_proactor *p = NULL;
	struct asyncpool_region *r = NULL;
	struct asyncpool_slab *slab = NULL;
	struct asyncpool *pool = NULL;
	struct asyncpool_xdp *x = NULL;
	struct asyncpool_xsk *s[2] = { NULL, NULL };
	struct bx_q q[2];
	pthread_t t;
	uint64_t f0 = 0, f1 = 0, work = 0, t0;
	int rc;

	memset(q, 0, sizeof(q));
	if ((rc = asyncpool_slab_create(&sl, &slab)) || (rc = asyncpool_proactor_create_memory(&p)) ||
	    (rc = asyncpool_proactor_register_slab(p, slab, ASYNCPOOL_ACCESS_READ, &r)) ||
	    (rc = asyncpool_create(r, &pool)) || (rc = asyncpool_xdp_create(pool, NULL, &x)))
		goto out;
	for (unsigned i = 0; i < 2; i++) {
		so.queue = i;
		for (int tries = 0; (rc = asyncpool_xsk_open(x, &so, &s[i])) == -EBUSY && tries < 2000;
		     tries++)
			usleep(1000);
		if (rc)
			goto out;
	}
	if (threads == 1) {
		q[0] = (struct bx_q){ .s = { s[0], s[1] }, .nsock = 2, .seconds = seconds };
	} else {
		q[0] = (struct bx_q){ .s = { s[0] }, .nsock = 1, .seconds = seconds };
		q[1] = (struct bx_q){ .s = { s[1] }, .nsock = 1, .seconds = seconds };
	}
	t0 = bx_now();
	if (threads == 2 && (rc = -pthread_create(&t, NULL, bx_q_loop, &q[1])))
		goto out;
	bx_q_loop(&q[0]);
	if (threads == 2)
		pthread_join(t, NULL);
	rc = q[0].rc ? q[0].rc : q[1].rc;
	if (threads == 1) {
		f0 = q[0].frames[0];
		f1 = q[0].frames[1];
	} else {
		f0 = q[0].frames[0];
		f1 = q[1].frames[0];
	}
	work = q[0].work + q[1].work;
	out->frames = f0 + f1;
	out->fps = out->frames / ((bx_now() - t0) / 1e9);
	out->work_ns = out->frames ? (double)work / out->frames : 0;
	*q1_share = out->frames ? (double)f1 / out->frames : 0;
out:
	for (int i = 1; i >= 0; i--)    /* the UMEM's first socket last */
		if (s[i])
			(void)asyncpool_xsk_close(s[i]);
	if (x)
		(void)asyncpool_xdp_destroy(x);
	bx_teardown(p, slab, r, pool, rc, 2 * BX_FRAMES, lost);
	return rc;
}

/* A sender on CPU cpu (its tx queue is the CPU's, modulo the queues), flooding va. */
static pid_t bx_sender(int cpu)
{
	pid_t pid = fork();

	if (pid == 0) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(cpu, &set);
		(void)sched_setaffinity(0, sizeof(set), &set);
		xt_flood("va", bx_mac_vb, bx_mac_va);
	}
	return pid;
}

/*
 * The two-queue child: veth ends with 2 queues each, a sender on each
 * CPU (packet_pick_tx_queue() records the sender's CPU as the queue),
 * one thread reading both sockets against two threads, interleaved.
 */
static void bx_child_queues(double seconds, unsigned reps, struct bx_report *rep)
{
	struct bx_side a, b;
	double share;
	pid_t snd[2] = { -1, -1 };
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	int rc = 0;

	if (xt_netns(rep->why, sizeof(rep->why)) ||
	    xt_veth_queues("va", "vb", 2, rep->why, sizeof(rep->why))) {
		rep->rc = geteuid() ? -EPERM : -EOPNOTSUPP;
		return;
	}
	xt_mac("va", bx_mac_va);
	xt_mac("vb", bx_mac_vb);
	for (int i = 0; i < 2; i++)
		snd[i] = bx_sender(cpus > 1 ? i : 0);
	memset(&a, 0, sizeof(a));
	if ((rc = bx_queues(1, 0.1, &a, &share, &rep->lost)) ||
	    (rc = bx_queues(2, 0.1, &a, &share, &rep->lost))) {
		snprintf(rep->why, sizeof(rep->why), "two AF_XDP sockets on two queues of a veth: %s",
			 strerror(-rc));
		goto out;
	}
	for (unsigned i = 0; i < reps; i++) {
		memset(&a, 0, sizeof(a));
		memset(&b, 0, sizeof(b));
		if (i % 2)
			rc = bx_queues(2, seconds, &b, &rep->q1_share[i], &rep->lost) ?:
			     bx_queues(1, seconds, &a, &share, &rep->lost);
		else
			rc = bx_queues(1, seconds, &a, &share, &rep->lost) ?:
			     bx_queues(2, seconds, &b, &rep->q1_share[i], &rep->lost);
		if (rc) {
			snprintf(rep->why, sizeof(rep->why), "repetition %u: %s", i, strerror(-rc));
			goto out;
		}
		rep->plain_fps[i] = a.fps;      /* one thread, both sockets */
		rep->plain_ns[i] = a.work_ns;
		rep->pool_fps[i] = b.fps;       /* two threads, a socket each */
		rep->pool_ns[i] = b.work_ns;
	}
	rep->reps = reps;
out:
	rep->rc = rc;
	for (int i = 0; i < 2; i++) {
		if (snd[i] <= 0)
			continue;
		kill(snd[i], SIGKILL);
		while (waitpid(snd[i], NULL, 0) < 0 && errno == EINTR)
			;
	}
}

/* The child: the namespace, the veth pair, the sender, the runs. */
static void bx_child(bool fwd, double seconds, unsigned reps, struct bx_report *rep)
{
	struct bx_side a, b;
	pid_t snd;
	int rc = 0;

	if (xt_netns(rep->why, sizeof(rep->why)) ||
	    xt_veth("va", "vb", rep->why, sizeof(rep->why))) {
		rep->rc = geteuid() ? -EPERM : -EOPNOTSUPP;
		return;
	}
	xt_mac("va", bx_mac_va);
	xt_mac("vb", bx_mac_vb);
	snd = fork();
	if (snd < 0) {
		rep->rc = -errno;
		return;
	}
	if (snd == 0)
		xt_flood("va", bx_mac_vb, bx_mac_va);   /* never returns */
	/* A warm-up of each side: the program attached, pages and caches. */
	memset(&a, 0, sizeof(a));
	if ((rc = bx_plain(fwd, 0.1, &a)) || (rc = bx_pool(fwd, 0.1, &a, &rep->lost))) {
		snprintf(rep->why, sizeof(rep->why), "%s: %s",
			 bx_overran ? "the warm-up" : "an AF_XDP socket on a veth",
			 bx_overran ? BX_OVERRAN : strerror(-rc));
		goto out;
	}
	for (unsigned i = 0; i < reps; i++) {
		memset(&a, 0, sizeof(a));
		memset(&b, 0, sizeof(b));
		/* Interleaved: each side first in every other repetition. */
		if (i % 2)
			rc = bx_pool(fwd, seconds, &b, &rep->lost) ?: bx_plain(fwd, seconds, &a);
		else
			rc = bx_plain(fwd, seconds, &a) ?: bx_pool(fwd, seconds, &b, &rep->lost);
		if (rc) {
			snprintf(rep->why, sizeof(rep->why), "repetition %u: %s", i,
				 bx_overran ? BX_OVERRAN : strerror(-rc));
			goto out;
		}
		rep->plain_fps[i] = a.fps;
		rep->plain_ns[i] = a.work_ns;
		rep->pool_fps[i] = b.fps;
		rep->pool_ns[i] = b.work_ns;
	}
	rep->reps = reps;
out:
	rep->rc = rc;
	kill(snd, SIGKILL);
	while (waitpid(snd, NULL, 0) < 0 && errno == EINTR)
		;
}

int bench_xdp(enum bench_xdp_kind kind, unsigned long ops, unsigned reps,
	      struct bench_result *out, char *why, size_t whylen)
{
	bool fwd = kind == BENCH_XDP_FWD_1Q;
	double seconds = (double)ops / 2e6, pf[BX_REPS_MAX], qf[BX_REPS_MAX], pn[BX_REPS_MAX],
	       qn[BX_REPS_MAX], mops[BX_REPS_MAX], s_pf[3], s_qf[3], s_pn[3];
	struct bx_report *rep;
	int status;
	pid_t pid;

	if (seconds < 0.05)
		seconds = 0.05;
	if (seconds > 10)
		seconds = 10;
	if (reps < 1 || reps > BX_REPS_MAX)
		return -EINVAL;
	rep = mmap(NULL, sizeof(*rep), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (rep == MAP_FAILED)
		return -errno;
	memset(rep, 0, sizeof(*rep));
	rep->rc = -ECHILD;
	snprintf(rep->why, sizeof(rep->why), "the bench process died");
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0) {
		munmap(rep, sizeof(*rep));
		return -errno;
	}
	if (pid == 0) {
		if (kind == BENCH_XDP_RXDROP_2Q)
			bx_child_queues(seconds, reps, rep);
		else
			bx_child(fwd, seconds, reps, rep);
		_exit(0);
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (rep->rc || rep->reps != reps) {
		int rc = rep->rc ? rep->rc : -ECHILD;

		snprintf(why, whylen, "%s", rep->why);
		munmap(rep, sizeof(*rep));
		return rc;
	}
	for (unsigned i = 0; i < reps; i++) {
		pf[i] = rep->plain_fps[i];
		qf[i] = rep->pool_fps[i];
		pn[i] = rep->plain_ns[i];
		qn[i] = rep->pool_ns[i];
		mops[i] = qf[i] / 1e6;
	}
	bench_spread(out->ns, qn, reps);
	bench_spread(out->mops, mops, reps);
	bench_spread(s_pf, pf, reps);
	bench_spread(s_qf, qf, reps);
	bench_spread(s_pn, pn, reps);
	out->threads = 1;
	out->extra_name = "pool_vs_plain_pct";
	out->extra = s_pf[0] > 0 ? 100.0 * s_qf[0] / s_pf[0] : 0;
	out->extra2_name = "pool_cost_ns";
	out->extra2 = out->ns[0] - s_pn[0];
	if (kind == BENCH_XDP_RXDROP_2Q) {
		double sh[3];

		/* "plain" is one thread on both sockets, "pool" two threads. */
		bench_spread(sh, rep->q1_share, reps);
		out->threads = 2;
		out->extra_name = "vs_1t_pct";
		out->extra2_name = "queue1_pct";
		out->extra2 = 100.0 * sh[0];
	}
	if (rep->lost) {
		snprintf(why, whylen, "%lu frames of the pool did not come back", rep->lost);
		munmap(rep, sizeof(*rep));
		return -EUCLEAN;
	}
	munmap(rep, sizeof(*rep));
	return 0;
}

#else /* !HAVE_XDP */

int bench_xdp(enum bench_xdp_kind kind, unsigned long ops, unsigned reps,
	      struct bench_result *out, char *why, size_t whylen)
{
	(void)kind, (void)ops, (void)reps, (void)out;
	snprintf(why, whylen, "built without libxdp and libbpf (--without-xdp)");
	return -EOPNOTSUPP;
}

#endif /* HAVE_XDP */
