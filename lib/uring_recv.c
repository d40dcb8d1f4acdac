/* SPDX-License-Identifier: MIT */
/*
 * The provided-buffer ring of a WRITE region: one buffer group per
 * region, the ring in memory that we map.  Completions turn into leases
 * (one per buffer for a bundle); releasing one puts its buffer back on
 * the ring from any thread.  With ASYNCPOOL_ACCESS_INCREMENTAL the
 * kernel consumes a buffer in parts (IOU_PBUF_RING_INC): a lease covers
 * one part, and the buffer goes back once the kernel and every lease
 * are done with it.  Where the kernel reports its head of the ring
 * (IORING_REGISTER_PBUF_STATUS, 6.8), a completion naming a buffer it
 * has not consumed is refused.  A lease names the ring's handle
 * (uring_handles.c), not its region.
 */
#include "internal.h"

#ifdef HAVE_LIBURING
#include "lease.h"
#include "pool_wait.h"
#include "test_stall.h"
#include "uring_bitmap.h"
#include "uring_handles.h"
#include "uring_internal.h"
#include "uring_recv.h"

#include <sys/mman.h>

/* holds[]: the kernel has the buffer (in the ring, or consumed and not
 * yet completed); the low bits count the leases out on it. */
#define AP_UR_KERNEL		(1u << 31)
#define AP_UR_LEASES		(AP_UR_KERNEL - 1)

/* The provided-buffer ring of a WRITE region. */
struct ur_recv {
	struct io_uring_buf_ring *br;
	size_t br_len;
	uint16_t bgid;
	bool inc;                       /* IOU_PBUF_RING_INC */
	bool checked;                   /* completions checked with PBUF_STATUS */
	uint32_t mask;
	void *handle;                   /* what leases name */
	/*
	 * Releases push their buffer on a lock-free stack (pending/next);
	 * whoever wins `draining` moves the whole stack into the ring with
	 * one tail update.  Releasers never wait for each other.
	 */
	atomic_bool draining;
	_Atomic uint32_t pending;
	_Atomic uint32_t *next;
	uint32_t last;                  /* drainer: the last buffer put in */
	_Atomic uint32_t tail;          /* our tail, 32 bits (the ring's is 16) */
	_Atomic uint32_t *holds;        /* AP_UR_KERNEL | leases */
	_Atomic uint32_t *pos;          /* where in the ring (32-bit) it went */
	_Atomic uint32_t *after;        /* the buffer put in right after it */
	_Atomic uint32_t *consumed;     /* incremental: bytes the kernel used */
	/* Completions become leases one at a time (the chain walk). */
	pthread_mutex_t cqe_lock;
	uint32_t head;                  /* the kernel's head, as last seen */
	_Atomic uint64_t refused, bad_releases;
	/* Completions -ENOBUFS; and the word waiters for buffers sleep on
	 * (the protocol of wait_word.h; private: the ring is ours). */
	_Atomic uint64_t dry;
	_Atomic uint32_t refill;
};

static _Atomic uint64_t g_stale;                /* stale recv releases */

void ap_ur_recv_free(struct ur_recv *rv)
{
	if (rv->br && rv->br != MAP_FAILED)
		munmap(rv->br, rv->br_len);
	free(rv->next);
	free(rv->holds);
	free(rv->pos);
	free(rv->after);
	free(rv->consumed);
	pthread_mutex_destroy(&rv->cqe_lock);
	free(rv);
}

/*
 * Take a group id that is free in our map and in the kernel, and
 * register the buffer ring at br (entries, IOU_PBUF_RING_* flags) under
 * it: 0 and *bgid, or a negative errno.  uring_recv.c and pool_recv.c.
 */
int ap_ur_group_register(struct ur_proactor *u, void *br, uint32_t entries, uint16_t flags,
			 uint16_t *bgid)
{
	for (uint32_t tries = 0; tries < AP_UR_BGIDS; tries++) {
		struct ap_uring_buf_reg reg;
		uint32_t id;
		int rc;

		pthread_mutex_lock(&u->lock);
		id = u->bgid_next;
		u->bgid_next = (id + 1) % AP_UR_BGIDS;
		if (bit_get(u->bgids, id)) {
			pthread_mutex_unlock(&u->lock);
			continue;
		}
		bits_set(u->bgids, id, 1, true);
		pthread_mutex_unlock(&u->lock);

		memset(&reg, 0, sizeof(reg));
		reg.ring_addr = (uintptr_t)br;
		reg.ring_entries = entries;
		reg.bgid = (uint16_t)id;
		reg.flags = flags;
		rc = ap_uring_register(u->ring->ring_fd, AP_IORING_REGISTER_PBUF_RING, &reg, 1);
		if (rc == 0) {
			*bgid = (uint16_t)id;
			return 0;
		}
		pthread_mutex_lock(&u->lock);
		bits_set(u->bgids, id, 1, false);
		pthread_mutex_unlock(&u->lock);
		if (rc != -EEXIST)
			return ur_reg_err(ur_feature_err(rc));
		/* -EEXIST: the caller uses this group on the ring (next one),
		 * unless the ring refuses every registration from this thread. */
		if (ur_probe(u->ring) == -EEXIST)
			return -EEXIST;
	}
	/* Every group id is taken. */
	return -ENOBUFS;
}

/* Unregister group bgid and free its id: 0, or the kernel's error. */
int ap_ur_group_unregister(struct ur_proactor *u, uint16_t bgid)
{
	struct ap_uring_buf_reg reg;
	int rc;

	memset(&reg, 0, sizeof(reg));
	reg.bgid = bgid;
	rc = ap_uring_register(u->ring->ring_fd, AP_IORING_UNREGISTER_PBUF_RING, &reg, 1);
	if (rc)
		return rc;
	pthread_mutex_lock(&u->lock);
	bits_set(u->bgids, bgid, 1, false);
	pthread_mutex_unlock(&u->lock);
	return 0;
}

/* Put buffer bid into the ring at tail + off (the drainer, or register). */
static void recv_put(struct ur_recv *rv, struct asyncpool_region *r, uint32_t bid, uint32_t off)
{
	uint32_t pos = atomic_load_explicit(&rv->tail, memory_order_relaxed) + off;

	atomic_store_explicit(&rv->pos[bid], pos, memory_order_relaxed);
	atomic_store_explicit(&rv->consumed[bid], 0, memory_order_relaxed);
	/* What a refill waiter looks at (recv_has_buffers). */
	AP_TSO_STORE(&rv->holds[bid], AP_UR_KERNEL, memory_order_relaxed);
	if (rv->last != AP_UR_NONE)
		atomic_store_explicit(&rv->after[rv->last], bid, memory_order_relaxed);
	rv->last = bid;
	io_uring_buf_ring_add(rv->br, r->base + (size_t)bid * r->buffer_size,
			      (unsigned int)r->buffer_size, (unsigned short)bid,
			      (int)rv->mask, (int)off);
}

/* Publish n buffers put in since the last advance. */
static void recv_advance(struct ur_recv *rv, uint32_t n)
{
	uint32_t tail = atomic_load_explicit(&rv->tail, memory_order_relaxed) + n;

	atomic_store_explicit(&rv->tail, tail, memory_order_release);
	io_uring_smp_store_release(&rv->br->tail, (uint16_t)tail);
}

int ap_ur_recv_register(struct ur_proactor *u, struct asyncpool_region *r, struct ur_region *ur)
{
	uint32_t n = r->buffer_count;
	long page = sysconf(_SC_PAGESIZE);
	struct ur_recv *rv;
	int rc;

	/* A ring of up to 2^15 entries; a buffer length is a u32. */
	if (n > AP_UR_MAX_RING || (n & (n - 1)) || r->buffer_size > UINT32_MAX)
		return -EINVAL;
	if ((r->access & ASYNCPOOL_ACCESS_INCREMENTAL) &&
	    !(u->features & ASYNCPOOL_URING_INCREMENTAL))
		return -EOPNOTSUPP;
	rv = calloc(1, sizeof(*rv));
	if (!rv)
		return -ENOMEM;
	pthread_mutex_init(&rv->cqe_lock, NULL);
	rv->inc = r->access & ASYNCPOOL_ACCESS_INCREMENTAL;
	rv->checked = u->features & ASYNCPOOL_URING_PBUF_STATUS;
	rv->next = calloc(n, sizeof(*rv->next));
	rv->holds = calloc(n, sizeof(*rv->holds));
	rv->pos = calloc(n, sizeof(*rv->pos));
	rv->after = calloc(n, sizeof(*rv->after));
	rv->consumed = calloc(n, sizeof(*rv->consumed));
	rv->br_len = ap_align_up(n * sizeof(struct io_uring_buf), page > 0 ? (size_t)page : 4096);
	rv->br = mmap(NULL, rv->br_len, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!rv->next || !rv->holds || !rv->pos || !rv->after || !rv->consumed ||
	    rv->br == MAP_FAILED) {
		ap_ur_recv_free(rv);
		return -ENOMEM;
	}
	rv->mask = n - 1;
	rv->last = AP_UR_NONE;
	atomic_init(&rv->draining, false);
	atomic_init(&rv->pending, AP_UR_NONE);
	io_uring_buf_ring_init(rv->br);
	rc = ap_ur_handle_new(r, &rv->handle);
	if (rc) {
		ap_ur_recv_free(rv);
		return rc;
	}
	rc = ap_ur_group_register(u, rv->br, n, rv->inc ? IOU_PBUF_RING_INC : 0, &rv->bgid);
	if (rc) {
		ap_ur_handle_retire(rv->handle);
		ap_ur_recv_free(rv);
		return rc;
	}
	/* Every buffer starts in the ring. */
	for (uint32_t i = 0; i < n; i++)
		recv_put(rv, r, i, i);
	recv_advance(rv, n);
	ur->recv = rv;
	return 0;
}

int ap_ur_recv_unregister(struct ur_proactor *u, struct ur_recv *rv)
{
	/* On failure the kernel may still use the ring: keep it mapped. */
	int rc = ap_ur_group_unregister(u, rv->bgid);

	if (rc)
		return rc;
	ap_ur_recv_free(rv);
	return 0;
}

void ap_ur_recv_retire(struct ur_recv *rv)
{
	ap_ur_handle_retire(rv->handle);
}

int ap_ur_recv_group(const struct ur_recv *rv)
{
	return (int)rv->bgid;
}

/* Move every pending release into the ring, with one tail update each round. */
static void recv_drain(struct ur_recv *rv, struct asyncpool_region *r)
{
	/*
	 * seq_cst on draining and pending: a releaser writes pending then
	 * reads draining, the drainer writes draining then reads pending,
	 * and one of them must see the other's write (a Dekker pair; so are
	 * the buffers put in and the refill word's waiters, below:
	 * tests/test-uring-recv-tso).
	 */
	while (!atomic_exchange(&rv->draining, true)) {
		uint32_t i = atomic_exchange(&rv->pending, AP_UR_NONE);
		uint32_t n = 0;

		for (uint32_t k = 0; i != AP_UR_NONE && k <= rv->mask; k++) {
			recv_put(rv, r, i, n++);
			i = atomic_load_explicit(&rv->next[i], memory_order_relaxed);
		}
		if (n) {
			recv_advance(rv, n);
			/* The tail before the look at the waiters (wait_word.h). */
			AP_TSO_FENCE();
			ap_word_wake(&rv->refill, false);
			AP_TEST_STALL(AP_TS_RECV_WAKE_LOOKED);
		}
		AP_TSO_STORE_SC(&rv->draining, false, memory_order_seq_cst);
		/* A release that found us draining left its buffer to us. */
		if (atomic_load(&rv->pending) == AP_UR_NONE)
			break;
		AP_TSO_FLUSH();         /* as the exchange's locked RMW drains it */
	}
	AP_TEST_STALL(AP_TS_RECV_DRAINED);
	AP_TSO_FLUSH();                 /* the end of the test's store buffer */
}

static void recv_recycle(void *ctx, uint32_t bid)
{
	struct asyncpool_region *r = ap_ur_handle_region(ctx);
	struct ur_recv *rv;
	uint32_t h;

	if (!r) {
		/* A copy of a lease of a region that is gone: refuse it
		 * without touching anything of it. */
		atomic_fetch_add_explicit(&g_stale, 1, memory_order_relaxed);
		return;
	}
	rv = ((struct ur_region *)r->backend)->recv;
	if (bid > rv->mask) {
		atomic_fetch_add_explicit(&rv->bad_releases, 1, memory_order_relaxed);
		return;
	}
	h = atomic_load_explicit(&rv->holds[bid], memory_order_relaxed);
	do {
		if (!(h & AP_UR_LEASES)) {
			atomic_fetch_add_explicit(&rv->bad_releases, 1, memory_order_relaxed);
			return;
		}
	} while (!atomic_compare_exchange_weak_explicit(&rv->holds[bid], &h, h - 1,
							memory_order_acq_rel,
							memory_order_relaxed));
	if (h - 1 == 0) {
		/* The kernel and every lease are done with it: back in. */
		h = atomic_load_explicit(&rv->pending, memory_order_relaxed);
		do {
			atomic_store_explicit(&rv->next[bid], h, memory_order_relaxed);
		} while (!atomic_compare_exchange_weak(&rv->pending, &h, bid));
		recv_drain(rv, r);
	}
	/* The lease held a reference: the region outlives its leases. */
	asyncpool_region_unref(r);
}

/*
 * Has the kernel consumed ring positions up to last (and first..last
 * before it)?  With incremental consumption the buffer at the head may
 * be in use (more).  Without PBUF_STATUS, or from a thread the ring
 * refuses, we cannot tell: yes.
 */
static int recv_check_ring(struct ur_proactor *u, struct ur_recv *rv, uint32_t last, bool more)
{
	struct ap_uring_buf_status st;
	uint32_t tail, head, d;

	if (!rv->checked || ur_foreign(u))
		return 0;
	for (int round = 0; round < 2; round++) {
		int32_t ahead = (int32_t)(rv->head - last);

		if (ahead > 0 || (more && ahead == 0))
			return 0;
		if (round)
			break;
		tail = atomic_load_explicit(&rv->tail, memory_order_acquire);
		memset(&st, 0, sizeof(st));
		st.buf_group = rv->bgid;
		if (ap_uring_register(u->ring->ring_fd, AP_IORING_REGISTER_PBUF_STATUS, &st, 1))
			return 0;
		/* The kernel's head is 16 bits, at most the ring size behind
		 * our tail (or ahead of the tail we read before asking). */
		d = (uint16_t)((uint16_t)tail - (uint16_t)st.head);
		if (d <= rv->mask + 1)
			head = tail - d;
		else
			head = tail + (uint16_t)((uint16_t)st.head - (uint16_t)tail);
		if ((int32_t)(head - rv->head) > 0)
			rv->head = head;
	}
	return -EINVAL;
}

/*
 * Turn a completion into leases, one per buffer it used.  bundle: the
 * buffers after the first come from the ring in order (IORING_RECVSEND_
 * BUNDLE; io_uring/net.c io_bundle_nbufs() counts them by length), and
 * a completion of 0 bytes used none.  All or nothing: on error no
 * buffer changed hands and out[0..max) is zeroed.
 */
int ap_ur_recv(struct asyncpool_region *r, const struct io_uring_cqe *cqe,
	       struct asyncpool_lease *out, unsigned int max, unsigned int *n, bool bundle)
{
	struct ur_proactor *u = ur_of(r->proactor);
	struct ur_recv *rv = ((struct ur_region *)r->backend)->recv;
	uint32_t bid, left, k = 0, b, flags = cqe->flags;
	bool more = flags & IORING_CQE_F_BUF_MORE;
	int rc = 0;

	/*
	 * A CQE names only the buffer id, not the group: the caller passes
	 * the region whose group its SQE named.  What we can check, we do.
	 */
	if (rv && cqe->res == -ENOBUFS) {
		/* The multishot ended: the ring ran dry.  Count it. */
		atomic_fetch_add_explicit(&rv->dry, 1, memory_order_relaxed);
		return -ENOBUFS;
	}
	if (!rv || !(flags & IORING_CQE_F_BUFFER) || cqe->res < 0)
		return -EINVAL;
	bid = flags >> IORING_CQE_BUFFER_SHIFT;
	if (bid > rv->mask || (more && !rv->inc))
		return -EINVAL;
	if (bundle && cqe->res == 0) {
		*n = 0;
		return 0;
	}
	left = (uint32_t)cqe->res;
	pthread_mutex_lock(&rv->cqe_lock);
	for (b = bid;;) {
		uint32_t h = atomic_load_explicit(&rv->holds[b], memory_order_acquire);
		uint32_t off = rv->inc ? atomic_load_explicit(&rv->consumed[b],
							       memory_order_relaxed) : 0;
		uint32_t take = (uint32_t)r->buffer_size - off;

		if (!(h & AP_UR_KERNEL)) {
			rc = k ? -EINVAL : -EALREADY;   /* not the kernel's to give */
			break;
		}
		if (k == max) {
			rc = -ENOSPC;
			break;
		}
		if (take > left)
			take = left;
		out[k].buffer_index = b;
		out[k].span.offset = (size_t)b * r->buffer_size + off;
		out[k].span.length = take;
		k++;
		left -= take;
		if (!left)
			break;
		if (!bundle) {
			rc = -EINVAL;   /* more than one buffer: recv_leases() */
			break;
		}
		{
			uint32_t nb = atomic_load_explicit(&rv->after[b], memory_order_relaxed);

			if (nb > rv->mask || atomic_load_explicit(&rv->pos[nb], memory_order_relaxed) !=
			    atomic_load_explicit(&rv->pos[b], memory_order_relaxed) + 1) {
				rc = -EINVAL;
				break;
			}
			b = nb;
		}
	}
	if (!rc)
		rc = recv_check_ring(u, rv, atomic_load_explicit(&rv->pos[b], memory_order_relaxed),
				     more);
	if (rc) {
		if (rc != -ENOSPC)
			atomic_fetch_add_explicit(&rv->refused, 1, memory_order_relaxed);
		pthread_mutex_unlock(&rv->cqe_lock);
		memset(out, 0, sizeof(*out) * k);
		return rc;
	}
	for (uint32_t i = 0; i < k; i++) {
		uint32_t bi = out[i].buffer_index;
		/* The kernel keeps the last buffer of a part-consumption. */
		bool kept = more && i + 1 == k;
		uint32_t h = atomic_load_explicit(&rv->holds[bi], memory_order_relaxed);
		uint32_t nh;

		do
			nh = (h + 1) & (kept ? UINT32_MAX : AP_UR_LEASES);
		while (!atomic_compare_exchange_weak_explicit(&rv->holds[bi], &h, nh,
							      memory_order_acq_rel,
							      memory_order_relaxed));
		if (kept)
			atomic_fetch_add_explicit(&rv->consumed[bi], (uint32_t)out[i].span.length,
						  memory_order_relaxed);
		ap_lease_init(&out[i], asyncpool_region_ref(r), out[i].span.offset,
			      out[i].span.length, recv_recycle, rv->handle, bi);
	}
	pthread_mutex_unlock(&rv->cqe_lock);
	*n = k;
	return 0;
}

/*
 * Does the ring hold a buffer for the kernel?  Any buffer the kernel
 * holds: one in the ring, or one it filled whose completion the caller
 * has not turned into a lease yet (after -ENOBUFS, which comes after
 * every completion of the receive, there are none of those).
 */
static bool recv_has_buffers(const struct ur_recv *rv)
{
	for (uint32_t i = 0; i <= rv->mask; i++)
		if (atomic_load_explicit(&rv->holds[i], memory_order_relaxed) & AP_UR_KERNEL)
			return true;
	return false;
}

int ap_ur_region_wait(struct asyncpool_region *r, int64_t timeout_ns)
{
	struct ur_recv *rv = ((struct ur_region *)r->backend)->recv;
	struct timespec deadline;
	bool interrupted = false;

	if (!rv)
		return -EINVAL;
	if (timeout_ns > 0)
		ap_deadline_after(timeout_ns, &deadline);
	for (;;) {
		uint32_t v = AP_TSO_ANNOUNCE(&rv->refill);

		/* The announcement before the look at the ring (wait_word.h). */
		AP_TSO_FENCE();
		if (recv_has_buffers(rv))
			return 0;
		if (interrupted)
			return -EINTR;
		if (timeout_ns == 0 || (timeout_ns > 0 && ap_deadline_passed(&deadline)))
			return -ETIMEDOUT;
		AP_TEST_STALL(AP_TS_RECV_WAITER_LOOKED);
		AP_TSO_FLUSH();         /* the end of the test's store buffer */
		if (ap_futex_wait(&rv->refill, v, timeout_ns > 0 ? &deadline : NULL, false) == -EINTR)
			interrupted = true;     /* one more look, then -EINTR */
	}
}

int ap_ur_region_prep_wait(struct asyncpool_region *r, struct io_uring_sqe *sqe)
{
	struct ur_recv *rv = ((struct ur_region *)r->backend)->recv;
	uint32_t v;

	if (!rv)
		return -EINVAL;
	v = AP_TSO_ANNOUNCE(&rv->refill);
	AP_TSO_FENCE();
	/* Buffers there already: a value the word cannot hold, -EAGAIN at once. */
	if (recv_has_buffers(rv))
		v &= ~AP_WAIT_WAITERS;
	AP_TEST_STALL(AP_TS_RECV_WAITER_LOOKED);
	AP_TSO_FLUSH();
	return ap_prep_futex_wait(sqe, &rv->refill, v, false);
}

void ap_ur_recv_stats(struct ur_proactor *u, struct ur_recv *rv, struct asyncpool_region_stats *st)
{
	if (rv->checked)
		st->flags |= ASYNCPOOL_REGION_CHECKED;
	if (rv->inc)
		st->flags |= ASYNCPOOL_REGION_INCREMENTAL;
	for (uint32_t i = 0; i <= rv->mask; i++) {
		uint32_t h = atomic_load_explicit(&rv->holds[i], memory_order_relaxed);

		st->kernel_held += (h & AP_UR_KERNEL) != 0;
		st->leased += (h & AP_UR_LEASES) != 0;
	}
	st->refused = atomic_load_explicit(&rv->refused, memory_order_relaxed);
	st->bad_releases = atomic_load_explicit(&rv->bad_releases, memory_order_relaxed);
	if (st->size >= offsetof(struct asyncpool_region_stats, dry) + sizeof(st->dry))
		st->dry = atomic_load_explicit(&rv->dry, memory_order_relaxed);
	if (rv->checked && !ur_foreign(u)) {
		struct ap_uring_buf_status bs;
		uint32_t tail = atomic_load_explicit(&rv->tail, memory_order_acquire);

		memset(&bs, 0, sizeof(bs));
		bs.buf_group = rv->bgid;
		if (ap_uring_register(u->ring->ring_fd, AP_IORING_REGISTER_PBUF_STATUS, &bs, 1) == 0)
			st->ring_unconsumed = (uint16_t)((uint16_t)tail - (uint16_t)bs.head);
	}
}

uint64_t ap_ur_stale_releases(void)
{
	return atomic_load_explicit(&g_stale, memory_order_relaxed);
}
#endif
