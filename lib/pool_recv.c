/* SPDX-License-Identifier: MIT */
/*
 * A recv ring over a pool's buffers (issue 52 item 6): a provided-buffer
 * ring on the caller's io_uring whose buffers are leases of a pool,
 * usually a shared one.  The ring holds up to `entries` leases, acquired
 * from the pool like any other: LEASED by this attachment in the pool's
 * words, so that if the process dies they come back after the quarantine
 * (the kernel may still be writing them) exactly as any lease does.  A
 * completion hands the lease of its buffer to the caller, its span the
 * bytes received: a pool lease, which asyncpool_channel_send() takes.
 * The slot it left is refilled from the pool at once, or by
 * asyncpool_recv_ring_refill() when the pool was empty.
 *
 * Buffer ids are slots of this ring, not buffer indices: a completion
 * is checked against the slot (in range, holding a lease), never used
 * to index the pool.  One thread at a time per ring; no lock.  Each
 * call checks that the ring is this process's (a child after fork(2)
 * gets -EPERM): the pid without a system call (self_pid.c), as
 * ur_foreign() and the socket backend's zc_forked() ask it.
 */
#include "internal.h"
#include "self_pid.h"

#include <asyncpool/pool.h>
#include <asyncpool/region.h>
#include <asyncpool/span.h>

#ifdef HAVE_LIBURING
#include "uring_compat.h"
#include "uring_internal.h"
#include "uring_recv.h"

#include <sys/mman.h>

struct asyncpool_recv_ring {
	struct asyncpool          *pool;
	struct asyncpool_proactor *p;
	struct io_uring_buf_ring  *br;
	size_t                     br_len;
	uint32_t                   entries;
	uint32_t                   lent;    /* slots holding a lease */
	uint32_t                   nfree;
	uint32_t                  *free;    /* free slot ids, a stack */
	struct asyncpool_lease    *held;    /* per slot; generation 0: empty */
	size_t                     bsize;
	uint16_t                   bgid;
	pid_t                      pid;
};

static void rr_free(struct asyncpool_recv_ring *rr)
{
	if (rr->br && rr->br != MAP_FAILED)
		munmap(rr->br, rr->br_len);
	free(rr->free);
	free(rr->held);
	free(rr);
}

/* Lend buffers of the pool to the ring until it is full or the pool empty. */
static int rr_refill(struct asyncpool_recv_ring *rr)
{
	uint32_t k = 0;
	int rc = 0;

	while (rr->lent < rr->entries && rr->nfree) {
		struct asyncpool_lease l;
		uint32_t slot;

		rc = asyncpool_acquire(rr->pool, &l);
		if (rc)
			break;
		slot = rr->free[--rr->nfree];
		rr->held[slot] = l;
		rr->lent++;
		io_uring_buf_ring_add(rr->br, asyncpool_span_ptr(l.span), (unsigned int)rr->bsize,
				      (unsigned short)slot,
				      io_uring_buf_ring_mask(rr->entries), (int)k++);
	}
	if (k)
		io_uring_buf_ring_advance(rr->br, (int)k);
	if (rc && rc != -ENOBUFS)
		return rc;
	return (int)rr->lent;
}

AP_EXPORT int asyncpool_recv_ring_create(struct asyncpool *pool, struct asyncpool_proactor *p,
					 uint32_t entries, struct asyncpool_recv_ring **out)
{
	long page = sysconf(_SC_PAGESIZE);
	struct asyncpool_recv_ring *rr;
	struct ur_proactor *u;
	int rc;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!pool || !p || !entries || entries > AP_UR_MAX_RING || (entries & (entries - 1)) ||
	    asyncpool_buffer_size(pool) > UINT32_MAX)
		return -EINVAL;
	if (!p->ops->recv)
		return -EOPNOTSUPP;     /* a memory proactor: no ring */
	u = ur_of(p);
	if (ur_foreign(u))
		return -EPERM;
	rr = calloc(1, sizeof(*rr));
	if (!rr)
		return -ENOMEM;
	rr->pool = pool;
	rr->p = p;
	rr->entries = entries;
	rr->bsize = asyncpool_buffer_size(pool);
	rr->pid = ap_self_pid();
	rr->free = calloc(entries, sizeof(*rr->free));
	rr->held = calloc(entries, sizeof(*rr->held));
	rr->br_len = ap_align_up(entries * sizeof(struct io_uring_buf),
				 page > 0 ? (size_t)page : 4096);
	rr->br = mmap(NULL, rr->br_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!rr->free || !rr->held || rr->br == MAP_FAILED) {
		rr_free(rr);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < entries; i++)
		rr->free[i] = entries - 1 - i;
	rr->nfree = entries;
	io_uring_buf_ring_init(rr->br);
	rc = ap_ur_group_register(u, rr->br, entries, 0, &rr->bgid);
	if (rc) {
		rr_free(rr);
		return rc;
	}
	rc = rr_refill(rr);
	if (rc < 0) {
		asyncpool_recv_ring_destroy(rr);
		return rc;
	}
	*out = rr;
	return 0;
}

AP_EXPORT int asyncpool_recv_ring_group(const struct asyncpool_recv_ring *rr)
{
	return rr ? (int)rr->bgid : -EINVAL;
}

AP_EXPORT int asyncpool_recv_ring_refill(struct asyncpool_recv_ring *rr)
{
	if (!rr)
		return -EINVAL;
	if (ap_self_pid() != rr->pid)
		return -EPERM;
	return rr_refill(rr);
}

AP_EXPORT int asyncpool_recv_ring_lease(struct asyncpool_recv_ring *rr,
					const struct io_uring_cqe *cqe,
					struct asyncpool_lease *out)
{
	uint32_t bid;

	if (!out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	if (!rr || !cqe)
		return -EINVAL;
	if (ap_self_pid() != rr->pid)
		return -EPERM;
	if (cqe->res == -ENOBUFS)
		return -ENOBUFS;        /* the multishot ended: the ring ran dry */
	if (!(cqe->flags & IORING_CQE_F_BUFFER) || cqe->res < 0 ||
	    (cqe->flags & IORING_CQE_F_BUF_MORE))
		return -EINVAL;
	bid = cqe->flags >> IORING_CQE_BUFFER_SHIFT;
	if (bid >= rr->entries || (size_t)cqe->res > rr->bsize)
		return -EINVAL;
	if (!rr->held[bid].generation)
		return -EALREADY;       /* no lease in that slot: seen already */
	*out = rr->held[bid];
	out->span.length = (size_t)cqe->res;
	memset(&rr->held[bid], 0, sizeof(rr->held[bid]));
	rr->free[rr->nfree++] = bid;
	rr->lent--;
	/* The pool's state is the caller's business; the lease is out. */
	(void)rr_refill(rr);
	return 0;
}

AP_EXPORT int asyncpool_recv_ring_destroy(struct asyncpool_recv_ring *rr)
{
	int rc;

	if (!rr)
		return -EINVAL;
	if (ap_self_pid() != rr->pid) {
		/* A child's copy: the ring and the leases are the parent's. */
		rr_free(rr);
		return 0;
	}
	rc = ap_ur_group_unregister(ur_of(rr->p), rr->bgid);
	if (rc)
		return rc;      /* the kernel may still use the ring: nothing freed */
	for (uint32_t i = 0; i < rr->entries; i++)
		if (rr->held[i].generation)
			asyncpool_lease_release(&rr->held[i]);
	rr_free(rr);
	return 0;
}

#else /* !HAVE_LIBURING */

AP_EXPORT int asyncpool_recv_ring_create(struct asyncpool *pool, struct asyncpool_proactor *p,
					 uint32_t entries, struct asyncpool_recv_ring **out)
{
	(void)pool; (void)p; (void)entries;
	if (!out)
		return -EINVAL;
	*out = NULL;
	return -EOPNOTSUPP;
}

AP_EXPORT int asyncpool_recv_ring_group(const struct asyncpool_recv_ring *rr)
{
	(void)rr;
	return -EINVAL;
}

AP_EXPORT int asyncpool_recv_ring_refill(struct asyncpool_recv_ring *rr)
{
	(void)rr;
	return -EINVAL;
}

AP_EXPORT int asyncpool_recv_ring_lease(struct asyncpool_recv_ring *rr,
					const struct io_uring_cqe *cqe,
					struct asyncpool_lease *out)
{
	(void)rr; (void)cqe;
	if (out)
		memset(out, 0, sizeof(*out));
	return -EINVAL;
}

AP_EXPORT int asyncpool_recv_ring_destroy(struct asyncpool_recv_ring *rr)
{
	(void)rr;
	return -EINVAL;
}

#endif
