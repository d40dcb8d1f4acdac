/* SPDX-License-Identifier: MIT */
/*
 * Recv completions against a real buffer ring over TCP loopback:
 * bundles of 1 to 8 buffers turned into leases with none lost (also on
 * the error paths), incremental consumption, a forged and a replayed
 * completion refused, a stale copy of a lease refused after its region
 * is gone.  Then the same with the newer features forced off
 * (ASYNCPOOL_URING_DISABLE).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>

#include <asyncpool.h>
#include "uring-util.h"

#define NBUF 8
#define BS 4096
#define IBS 16384

#ifndef IORING_RECVSEND_BUNDLE
#define IORING_RECVSEND_BUNDLE (1U << 4)
#endif
#ifndef IORING_CQE_F_BUF_MORE
#define IORING_CQE_F_BUF_MORE (1U << 4)
#endif

static struct io_uring ring;
static int tx, rx;
static uint64_t sent, seen;     /* stream positions */

static unsigned char byte_at(uint64_t pos)
{
	return (unsigned char)(pos * 7 + (pos >> 9));
}

/* Send len bytes of the stream and wait until rx has them all. */
static void send_wait(size_t len)
{
	unsigned char buf[8 * BS + IBS];
	int avail = 0;

	for (size_t i = 0; i < len; i++)
		buf[i] = byte_at(sent + i);
	if (write(tx, buf, len) != (ssize_t)len)
		bail_out("write");
	sent += len;
	while (avail < (int)len)
		if (ioctl(rx, FIONREAD, &avail))
			bail_out("FIONREAD");
}

/* One recv with buffer select; the completion is copied to *out. */
static void recv_one(int group, bool bundle, struct io_uring_cqe *out)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
	struct io_uring_cqe *cqe;

	io_uring_prep_recv(sqe, rx, NULL, 0, 0);
	sqe->flags |= IOSQE_BUFFER_SELECT;
	sqe->buf_group = (uint16_t)group;
	if (bundle)
		sqe->ioprio |= IORING_RECVSEND_BUNDLE;
	cqe = ut_wait(&ring);
	*out = *cqe;
	io_uring_cqe_seen(&ring, cqe);
}

static bool check_lease(const struct asyncpool_lease *l)
{
	const unsigned char *p = asyncpool_span_ptr(l->span);

	for (size_t i = 0; i < l->span.length; i++)
		if (p[i] != byte_at(seen + i))
			return false;
	seen += l->span.length;
	return true;
}

static struct asyncpool_region_stats rstats(struct asyncpool_region *r)
{
	struct asyncpool_region_stats st = { .size = sizeof(st) };

	asyncpool_region_stats(r, &st);
	return st;
}

static void bundles(struct asyncpool_proactor *p, const char *mode)
{
	struct asyncpool_slab_options so = { .size = sizeof(so), .buffer_size = BS,
					     .buffer_count = NBUF, .numa_node = -1 };
	struct asyncpool_lease l[NBUF];
	struct asyncpool_slab *slab;
	struct asyncpool_region *r;
	struct io_uring_cqe cqe;
	bool right = true, counted = true, tried = false;
	unsigned int n, hist[NBUF + 1] = { 0 }, multi = 0;

	if (asyncpool_slab_create(&so, &slab) ||
	    asyncpool_proactor_register_slab(p, slab, ASYNCPOOL_ACCESS_WRITE, &r))
		bail_out("recv region");
	asyncpool_slab_unref(slab);
	for (unsigned k = 1; k <= NBUF; k++) {
		/* k - 1 full buffers and a part of the last; the kernel may
		 * split them over several completions. */
		uint64_t want = sent + (k - 1) * BS + 100 * k;

		send_wait((k - 1) * BS + 100 * k);
		while (seen < want) {
			unsigned int need;

			recv_one(asyncpool_region_buffer_group(r), true, &cqe);
			if (cqe.res <= 0)
				bail_out("%s: bundle recv: res %d", mode, cqe.res);
			need = (unsigned int)((cqe.res + BS - 1) / BS);
			if (need >= 2 && !tried) {
				/* The error paths first: nothing may change hands. */
				tried = true;
				is_int(asyncpool_region_recv_leases(r, &cqe, l, need - 1, &n), -ENOSPC,
				       "%s: %u buffers into room for %u: -ENOSPC", mode, need, need - 1);
				is_int(asyncpool_region_recv_lease(r, &cqe, &l[0]), -EINVAL,
				       "%s: recv_lease on a bundle of %u: -EINVAL", mode, need);
				is_int(rstats(r).leased, 0, "%s: ... and no buffer leased", mode);
			}
			if (asyncpool_region_recv_leases(r, &cqe, l, NBUF, &n) || n != need)
				bail_out("%s: recv_leases of %d bytes: n %u", mode, cqe.res, n);
			hist[n]++;
			for (unsigned i = 0; i < n; i++) {
				right &= check_lease(&l[i]) &&
					 l[i].span.length == (i + 1 < n ? BS : cqe.res - (n - 1) * BS);
				asyncpool_lease_release(&l[i]);
			}
			counted &= rstats(r).kernel_held == NBUF && rstats(r).leased == 0;
		}
	}
	diag("%s: completions by buffers: 1:%u 2:%u 3:%u 4:%u 5:%u 6:%u 7:%u 8:%u", mode,
	     hist[1], hist[2], hist[3], hist[4], hist[5], hist[6], hist[7], hist[8]);
	if (!tried)
		skip(3, "no completion took more than one buffer");
	for (unsigned i = 2; i <= NBUF; i++)
		multi += hist[i];
	ok(multi > 0, "%s: completions of several buffers happened", mode);
	ok(right, "%s: bundles of 1..8 buffers: one lease per buffer, every byte right", mode);
	ok(counted, "%s: after each bundle all 8 buffers are back with the kernel", mode);
	is_int(rstats(r).ring_unconsumed,
	       (rstats(r).flags & ASYNCPOOL_REGION_CHECKED) ? NBUF : UINT32_MAX,
	       "%s: the kernel reports %s", mode,
	       (rstats(r).flags & ASYNCPOOL_REGION_CHECKED) ? "8 unconsumed" : "nothing");
	/* 40 buffers went through a ring of 8: if one had been lost, a
	 * 9-buffer-worth of data would not fit; show the ring still takes 8. */
	/* 40 buffers' worth went through a ring of 8: had one been lost,
	 * the ring would hold 7; it still takes 8 at once. */
	send_wait(NBUF * BS);
	n = 0;
	for (unsigned got = 0; got < NBUF * BS;) {
		unsigned int k;

		recv_one(asyncpool_region_buffer_group(r), true, &cqe);
		if (cqe.res <= 0 || asyncpool_region_recv_leases(r, &cqe, l + n, NBUF - n, &k))
			bail_out("%s: last bundles", mode);
		got += (unsigned)cqe.res;
		n += k;
	}
	is_int(n, NBUF, "%s: 8 buffers' worth fills 8 leases held at once", mode);
	ok(rstats(r).leased == NBUF && rstats(r).kernel_held == 0, "%s: all 8 leased", mode);
	for (unsigned i = 0; i < n; i++) {
		check_lease(&l[i]);
		asyncpool_lease_release(&l[i]);
	}
	asyncpool_region_unref(r);
}

/* A forged completion (a buffer still in the ring), and a replayed one. */
static void forged(struct asyncpool_proactor *p)
{
	struct asyncpool_slab_options so = { .size = sizeof(so), .buffer_size = BS,
					     .buffer_count = NBUF, .numa_node = -1 };
	struct asyncpool_slab *slab;
	struct asyncpool_region *r;
	struct asyncpool_lease l;
	struct io_uring_cqe cqe, fake;

	if (asyncpool_slab_create(&so, &slab) ||
	    asyncpool_proactor_register_slab(p, slab, ASYNCPOOL_ACCESS_WRITE, &r))
		bail_out("recv region");
	asyncpool_slab_unref(slab);
	memset(&fake, 0, sizeof(fake));
	fake.res = 100;
	fake.flags = IORING_CQE_F_BUFFER | (3u << IORING_CQE_BUFFER_SHIFT);
	is_int(asyncpool_region_recv_lease(r, &fake, &l), -EINVAL,
	       "forged completion of buffer 3, still in the ring: -EINVAL");
	send_wait(100);
	recv_one(asyncpool_region_buffer_group(r), false, &cqe);
	is_int(asyncpool_region_recv_lease(r, &cqe, &l), 0, "the real completion: a lease");
	ok(check_lease(&l), "its bytes are right");
	asyncpool_lease_release(&l);
	is_int(asyncpool_region_recv_lease(r, &cqe, &l), -EINVAL,
	       "the same completion replayed after release: -EINVAL");
	is_int(rstats(r).refused, 2, "both refusals counted");
	is_int(rstats(r).kernel_held, NBUF, "the kernel holds all 8 buffers");
	is_int(rstats(r).ring_unconsumed, NBUF, "and reports 8 in its ring");
	asyncpool_region_unref(r);
}

/* Incremental consumption: leases of parts of one 16 KiB buffer. */
static void incremental(struct asyncpool_proactor *p)
{
	struct asyncpool_slab_options so = { .size = sizeof(so), .buffer_size = IBS,
					     .buffer_count = 2, .numa_node = -1 };
	struct asyncpool_slab *slab;
	struct asyncpool_region *r;
	struct asyncpool_lease a, b, c;
	struct io_uring_cqe cqe;

	if (asyncpool_slab_create(&so, &slab) ||
	    asyncpool_proactor_register_slab(p, slab, ASYNCPOOL_ACCESS_WRITE |
					     ASYNCPOOL_ACCESS_INCREMENTAL, &r))
		bail_out("incremental region");
	asyncpool_slab_unref(slab);
	ok(rstats(r).flags & ASYNCPOOL_REGION_INCREMENTAL, "incremental: the region says so");
	send_wait(1000);
	recv_one(asyncpool_region_buffer_group(r), false, &cqe);
	ok(cqe.res == 1000 && (cqe.flags & IORING_CQE_F_BUF_MORE) && !(cqe.flags >> 16),
	   "incremental: 1000 bytes into buffer 0, the kernel keeps it");
	is_int(asyncpool_region_recv_lease(r, &cqe, &a), 0, "incremental: lease of part 1");
	send_wait(1000);
	recv_one(asyncpool_region_buffer_group(r), false, &cqe);
	is_int(asyncpool_region_recv_lease(r, &cqe, &b), 0, "incremental: lease of part 2");
	ok(a.span.offset == 0 && a.span.length == 1000 && b.span.offset == 1000 &&
	   b.span.length == 1000 && check_lease(&a) && check_lease(&b),
	   "incremental: the parts are where the kernel wrote them");
	asyncpool_lease_release(&a);
	asyncpool_lease_release(&b);
	ok(rstats(r).kernel_held == 2 && rstats(r).leased == 0,
	   "incremental: released parts leave the buffer with the kernel");
	send_wait(IBS - 2000);
	recv_one(asyncpool_region_buffer_group(r), false, &cqe);
	ok(cqe.res == IBS - 2000 && !(cqe.flags & IORING_CQE_F_BUF_MORE),
	   "incremental: the rest of buffer 0 completes it");
	is_int(asyncpool_region_recv_lease(r, &cqe, &c), 0, "incremental: lease of the rest");
	ok(c.span.offset == 2000 && check_lease(&c), "incremental: the rest is right");
	ok(rstats(r).kernel_held == 1 && rstats(r).leased == 1,
	   "incremental: the kernel is done with it, one lease holds it");
	asyncpool_lease_release(&c);
	is_int(rstats(r).kernel_held, 2, "incremental: the buffer is back in the ring");
	/* Both buffers, in order, keep working. */
	send_wait(IBS);
	recv_one(asyncpool_region_buffer_group(r), false, &cqe);
	is_int(asyncpool_region_recv_lease(r, &cqe, &a), 0, "incremental: buffer 1, whole");
	ok(a.buffer_index == 1 && check_lease(&a), "incremental: its bytes are right");
	asyncpool_lease_release(&a);
	asyncpool_region_unref(r);
}

/* A copy of a lease released after the region is gone is refused. */
static void stale_copy(struct asyncpool_proactor *p)
{
	struct asyncpool_proactor_stats ps = { .size = sizeof(ps) };
	struct asyncpool_slab_options so = { .size = sizeof(so), .buffer_size = BS,
					     .buffer_count = NBUF, .numa_node = -1 };
	struct asyncpool_slab *slab;
	struct asyncpool_region *r;
	struct asyncpool_lease l, copy;
	struct io_uring_cqe cqe;
	uint64_t before;

	if (asyncpool_slab_create(&so, &slab) ||
	    asyncpool_proactor_register_slab(p, slab, ASYNCPOOL_ACCESS_WRITE, &r))
		bail_out("recv region");
	asyncpool_slab_unref(slab);
	send_wait(100);
	recv_one(asyncpool_region_buffer_group(r), false, &cqe);
	if (asyncpool_region_recv_lease(r, &cqe, &l))
		bail_out("recv_lease");
	check_lease(&l);
	copy = l;
	asyncpool_proactor_stats(p, &ps);
	before = ps.stale_releases;
	asyncpool_lease_release(&l);
	asyncpool_region_unref(r);      /* the last reference: the region is freed */
	asyncpool_lease_release(&copy); /* ASan: no use after free */
	asyncpool_proactor_stats(p, &ps);
	is_int(ps.stale_releases - before, 1, "a stale copy released after the region is gone: counted");
}

static struct asyncpool_proactor *proactor(void)
{
	struct asyncpool_proactor *p;

	if (asyncpool_proactor_create_uring(&ring, 0, &p))
		bail_out("create_uring");
	return p;
}

static uint32_t features(struct asyncpool_proactor *p)
{
	struct asyncpool_proactor_stats st = { .size = sizeof(st) };

	asyncpool_proactor_stats(p, &st);
	return st.features;
}

int main(void)
{
	struct asyncpool_proactor *p;
	struct asyncpool_slab_options so = { .size = sizeof(so), .buffer_size = IBS,
					     .buffer_count = 2, .numa_node = -1 };
	struct asyncpool_slab *slab;
	struct asyncpool_region *r;
	uint32_t f;

	plan(44);
	ut_ring_init(&ring, 16);
	if (tcp_loopback_pair(&tx, &rx))
		bail_out("tcp pair");
	p = proactor();
	f = features(p);
	diag("features %#x", f);
	if (f & ASYNCPOOL_URING_BUNDLE)
		bundles(p, "bundles");
	else
		skip(9, "the kernel has no IORING_RECVSEND_BUNDLE");
	if (f & ASYNCPOOL_URING_PBUF_STATUS)
		forged(p);
	else
		skip(7, "the kernel has no IORING_REGISTER_PBUF_STATUS");
	if (f & ASYNCPOOL_URING_INCREMENTAL)
		incremental(p);
	else
		skip(13, "the kernel has no IOU_PBUF_RING_INC");
	stale_copy(p);
	is_int(asyncpool_proactor_destroy(p), 0, "destroy");

	/* The older paths, forced. */
	setenv("ASYNCPOOL_URING_DISABLE", "pbuf_status,bundle,incremental", 1);
	p = proactor();
	f = features(p);
	ok(!(f & (ASYNCPOOL_URING_PBUF_STATUS | ASYNCPOOL_URING_BUNDLE |
		  ASYNCPOOL_URING_INCREMENTAL)), "forced off: no status, bundles, incremental");
	if (asyncpool_slab_create(&so, &slab))
		bail_out("slab");
	is_int(asyncpool_proactor_register_slab(p, slab, ASYNCPOOL_ACCESS_WRITE |
						ASYNCPOOL_ACCESS_INCREMENTAL, &r), -EOPNOTSUPP,
	       "forced off: an incremental ring is -EOPNOTSUPP");
	asyncpool_slab_unref(slab);
	/* Without PBUF_STATUS nothing is checked against the ring, but the
	 * bookkeeping stays right (the kernel still takes bundles here). */
	bundles(p, "unchecked");
	stale_copy(p);
	is_int(asyncpool_proactor_destroy(p), 0, "destroy");
	close(tx);
	close(rx);
	io_uring_queue_exit(&ring);
	return done_testing();
}
