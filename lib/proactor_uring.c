/* SPDX-License-Identifier: MIT */
/*
 * The io_uring proactor.  It borrows a ring that the caller set up and
 * registers memory on it; it never submits I/O.
 *
 * READ regions (and READ|WRITE regions) become fixed buffers.  One
 * sparse table of AP_UR_SLOTS entries is registered per proactor, on the
 * first such region; each region takes a contiguous run of slots (first
 * fit) filled with buffer updates, and its last unref clears the run so
 * that the slots can be taken again.
 *
 * WRITE regions become provided-buffer rings: one buffer group per
 * region, the ring in memory that we map.  Completions turn into leases;
 * releasing one puts its buffer back on the ring from any thread.
 *
 * Built without liburing, create refuses with -EOPNOTSUPP so that the
 * ABI is the same in every build.
 */
#include "internal.h"
#include "lease.h"

#ifndef HAVE_LIBURING
AP_EXPORT int asyncpool_proactor_create_uring(struct io_uring *ring, uint32_t flags,
					      struct asyncpool_proactor **out)
{
	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!ring || flags)
		return -EINVAL;
	return -EOPNOTSUPP;
}
#else
#include <liburing.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

/* The kernel's limits (IORING_MAX_REG_BUFFERS, SZ_1G, 1 << 15). */
#define AP_UR_SLOTS		16384u
#define AP_UR_MAX_FIXED		(1ul << 30)
#define AP_UR_MAX_RING		32768u
#define AP_UR_BGIDS		65536u
/* End of a pending-release list. */
#define AP_UR_NONE		UINT32_MAX

struct ur_proactor {
	struct io_uring *ring;
	pthread_mutex_t lock;                   /* everything below */
	bool table;                             /* our sparse table is registered */
	uint64_t slots[AP_UR_SLOTS / 64];       /* 1: slot taken */
	uint64_t bgids[AP_UR_BGIDS / 64];       /* 1: group id taken */
	uint32_t bgid_next;
};

/* The provided-buffer ring of a WRITE region. */
struct ur_recv {
	struct io_uring_buf_ring *br;
	size_t br_len;
	uint16_t bgid;
	uint16_t tail;                  /* ours; only the drainer touches it */
	uint32_t mask;
	/*
	 * Releases push their buffer on a lock-free stack (pending/next);
	 * whoever wins `draining` moves the whole stack into the ring with
	 * one tail update.  Releasers never wait for each other.
	 */
	atomic_bool draining;
	_Atomic uint32_t pending;
	_Atomic uint32_t *next;
	/* 0: the kernel has it (in the ring); 1: leased to the user. */
	_Atomic uint8_t *leased;
};

struct ur_region {
	bool fixed;                     /* has a run of table slots */
	uint32_t first;                 /* its first slot */
	struct ur_recv *recv;           /* or a buffer ring */
};

static struct ur_proactor *ur_of(struct asyncpool_proactor *p)
{
	return p->backend;
}

/* A kernel that does not know a registration opcode answers -EINVAL. */
static int ur_feature_err(int rc)
{
	return rc == -EINVAL ? -EOPNOTSUPP : rc;
}

/* Fold what the kernel says about a registration into the documented set. */
static int ur_reg_err(int rc)
{
	switch (rc) {
	case 0:
	case -ENOMEM:           /* RLIMIT_MEMLOCK, or kernel memory */
	case -EPERM:
	case -ENOSYS:
	case -EOPNOTSUPP:       /* memory the kernel will not pin */
	case -EEXIST:           /* IORING_SETUP_SINGLE_ISSUER, another thread */
	case -ENOBUFS:
		return rc;
	case -EACCES:           /* restricted ring */
		return -EPERM;
	default:                /* -EFAULT: memory that cannot be pinned, ... */
		return -EINVAL;
	}
}

static int ur_probe(struct io_uring *ring)
{
	struct io_uring_probe *probe;
	int rc;

	probe = calloc(1, sizeof(*probe) + 256 * sizeof(struct io_uring_probe_op));
	if (!probe)
		return -ENOMEM;
	rc = io_uring_register_probe(ring, probe, 256);
	free(probe);
	return rc;
}

static bool slot_taken(const struct ur_proactor *u, uint32_t i)
{
	return u->slots[i / 64] & (1ull << (i % 64));
}

static void slots_mark(struct ur_proactor *u, uint32_t first, uint32_t n, bool taken)
{
	for (uint32_t i = first; i < first + n; i++) {
		if (taken)
			u->slots[i / 64] |= 1ull << (i % 64);
		else
			u->slots[i / 64] &= ~(1ull << (i % 64));
	}
}

/* First fit: the lowest run of n free slots; false if there is none. */
static bool slots_find(const struct ur_proactor *u, uint32_t n, uint32_t *first)
{
	uint32_t run = 0;

	for (uint32_t i = 0; i < AP_UR_SLOTS; i++) {
		if (slot_taken(u, i)) {
			run = 0;
			continue;
		}
		if (++run == n) {
			*first = i + 1 - n;
			return true;
		}
	}
	return false;
}

/* Empty n slots from first; returns 0 or the kernel's error. */
static int slots_clear(struct io_uring *ring, uint32_t first, uint32_t n)
{
	static const struct iovec empty[64];

	while (n) {
		uint32_t k = n < 64 ? n : 64;
		int rc = io_uring_register_buffers_update_tag(ring, first, empty, NULL, k);

		if (rc <= 0)
			return rc ? rc : -EIO;
		first += (uint32_t)rc;
		n -= (uint32_t)rc;
	}
	return 0;
}

static int register_fixed(struct ur_proactor *u, struct asyncpool_region *r,
			  struct ur_region *ur)
{
	struct iovec *iov;
	uint32_t first, done = 0;
	int rc = 0;

	/* The kernel's limits, checked before any system call. */
	if (r->buffer_size > AP_UR_MAX_FIXED || r->buffer_count > AP_UR_SLOTS)
		return -EINVAL;
	iov = malloc(sizeof(*iov) * r->buffer_count);
	if (!iov)
		return -ENOMEM;
	for (uint32_t i = 0; i < r->buffer_count; i++) {
		iov[i].iov_base = r->base + (size_t)i * r->buffer_size;
		iov[i].iov_len = r->buffer_size;
	}

	pthread_mutex_lock(&u->lock);
	if (!u->table) {
		rc = io_uring_register_buffers_sparse(u->ring, AP_UR_SLOTS);
		/* -EBUSY: the caller registered a table of its own. */
		if (rc == -EBUSY)
			rc = -EEXIST;
		rc = ur_reg_err(ur_feature_err(rc));
		u->table = rc == 0;
	}
	if (!rc && !slots_find(u, r->buffer_count, &first))
		rc = -ENOBUFS;
	if (!rc)
		slots_mark(u, first, r->buffer_count, true);
	pthread_mutex_unlock(&u->lock);
	if (rc) {
		free(iov);
		return rc;
	}

	/*
	 * An update stops at the first buffer it cannot pin (RLIMIT_MEMLOCK)
	 * and reports how many it did; the next call then reports why.
	 */
	while (done < r->buffer_count) {
		rc = io_uring_register_buffers_update_tag(u->ring, first + done, iov + done,
							  NULL, r->buffer_count - done);
		if (rc <= 0) {
			rc = rc ? rc : -EIO;
			break;
		}
		done += (uint32_t)rc;
		rc = 0;
	}
	free(iov);
	if (rc) {
		/* Nothing stays half-registered.  Slots we cannot clear stay
		 * taken rather than be handed out dirty. */
		bool clean = slots_clear(u->ring, first, done) == 0;

		if (clean) {
			pthread_mutex_lock(&u->lock);
			slots_mark(u, first, r->buffer_count, false);
			pthread_mutex_unlock(&u->lock);
		}
		return ur_reg_err(rc);
	}
	ur->fixed = true;
	ur->first = first;
	return 0;
}

static void unregister_fixed(struct ur_proactor *u, struct asyncpool_region *r,
			     struct ur_region *ur)
{
	if (slots_clear(u->ring, ur->first, r->buffer_count))
		return;         /* leave the run taken: it is not empty */
	pthread_mutex_lock(&u->lock);
	slots_mark(u, ur->first, r->buffer_count, false);
	pthread_mutex_unlock(&u->lock);
}

static void recv_free(struct ur_recv *rv)
{
	if (rv->br && rv->br != MAP_FAILED)
		munmap(rv->br, rv->br_len);
	free(rv->next);
	free(rv->leased);
	free(rv);
}

/* Take a group id that is free in our map and in the kernel. */
static int recv_register(struct ur_proactor *u, struct ur_recv *rv, uint32_t entries)
{
	for (uint32_t tries = 0; tries < AP_UR_BGIDS; tries++) {
		struct io_uring_buf_reg reg;
		uint32_t id;
		int rc;

		pthread_mutex_lock(&u->lock);
		id = u->bgid_next;
		u->bgid_next = (id + 1) % AP_UR_BGIDS;
		if (u->bgids[id / 64] & (1ull << (id % 64))) {
			pthread_mutex_unlock(&u->lock);
			continue;
		}
		u->bgids[id / 64] |= 1ull << (id % 64);
		pthread_mutex_unlock(&u->lock);

		memset(&reg, 0, sizeof(reg));
		reg.ring_addr = (uintptr_t)rv->br;
		reg.ring_entries = entries;
		reg.bgid = (uint16_t)id;
		rc = io_uring_register_buf_ring(u->ring, &reg, 0);
		if (rc == 0) {
			rv->bgid = (uint16_t)id;
			return 0;
		}
		pthread_mutex_lock(&u->lock);
		u->bgids[id / 64] &= ~(1ull << (id % 64));
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

static int register_recv(struct ur_proactor *u, struct asyncpool_region *r,
			 struct ur_region *ur)
{
	uint32_t n = r->buffer_count;
	long page = sysconf(_SC_PAGESIZE);
	struct ur_recv *rv;
	int rc;

	/* A ring of up to 2^15 entries; a buffer length is a u32. */
	if (n > AP_UR_MAX_RING || (n & (n - 1)) || r->buffer_size > UINT32_MAX)
		return -EINVAL;
	rv = calloc(1, sizeof(*rv));
	if (!rv)
		return -ENOMEM;
	rv->next = calloc(n, sizeof(*rv->next));
	rv->leased = calloc(n, sizeof(*rv->leased));
	rv->br_len = ap_align_up(n * sizeof(struct io_uring_buf), page > 0 ? (size_t)page : 4096);
	rv->br = mmap(NULL, rv->br_len, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!rv->next || !rv->leased || rv->br == MAP_FAILED) {
		recv_free(rv);
		return -ENOMEM;
	}
	rv->mask = n - 1;
	atomic_init(&rv->draining, false);
	atomic_init(&rv->pending, AP_UR_NONE);
	io_uring_buf_ring_init(rv->br);
	rc = recv_register(u, rv, n);
	if (rc) {
		recv_free(rv);
		return rc;
	}
	/* Every buffer starts in the ring. */
	for (uint32_t i = 0; i < n; i++)
		io_uring_buf_ring_add(rv->br, r->base + (size_t)i * r->buffer_size,
				      (unsigned int)r->buffer_size, (unsigned short)i,
				      (int)rv->mask, (int)i);
	io_uring_buf_ring_advance(rv->br, (int)n);
	rv->tail = (uint16_t)n;
	ur->recv = rv;
	return 0;
}

static void unregister_recv(struct ur_proactor *u, struct ur_region *ur)
{
	struct ur_recv *rv = ur->recv;

	/* On failure the kernel may still use the ring: keep it mapped. */
	if (io_uring_unregister_buf_ring(u->ring, rv->bgid) != 0)
		return;
	pthread_mutex_lock(&u->lock);
	u->bgids[rv->bgid / 64] &= ~(1ull << (rv->bgid % 64));
	pthread_mutex_unlock(&u->lock);
	recv_free(rv);
}

static int uring_register(struct asyncpool_proactor *p, struct asyncpool_region *r)
{
	struct ur_region *ur = calloc(1, sizeof(*ur));
	int rc;

	if (!ur)
		return -ENOMEM;
	/* READ|WRITE: fixed buffers serve read_fixed and write_fixed alike. */
	if (r->access & ASYNCPOOL_ACCESS_READ)
		rc = register_fixed(ur_of(p), r, ur);
	else
		rc = register_recv(ur_of(p), r, ur);
	if (rc) {
		free(ur);
		return rc;
	}
	r->backend = ur;
	return 0;
}

static void uring_unregister(struct asyncpool_proactor *p, struct asyncpool_region *r)
{
	struct ur_region *ur = r->backend;

	if (ur->fixed)
		unregister_fixed(ur_of(p), r, ur);
	else
		unregister_recv(ur_of(p), ur);
	free(ur);
}

static int uring_fixed_index(const struct asyncpool_region *r, uint32_t buffer_index)
{
	const struct ur_region *ur = r->backend;

	return ur->fixed ? (int)(ur->first + buffer_index) : -EINVAL;
}

static int uring_buffer_group(const struct asyncpool_region *r)
{
	const struct ur_region *ur = r->backend;

	return ur->recv ? (int)ur->recv->bgid : -EINVAL;
}

/* Move every pending release into the ring, with one tail update each round. */
static void recv_drain(struct ur_recv *rv, struct asyncpool_region *r)
{
	/*
	 * seq_cst on draining and pending: a releaser writes pending then
	 * reads draining, the drainer writes draining then reads pending,
	 * and one of them must see the other's write.
	 */
	while (!atomic_exchange(&rv->draining, true)) {
		uint32_t i = atomic_exchange(&rv->pending, AP_UR_NONE);
		int n = 0;

		for (uint32_t k = 0; i != AP_UR_NONE && k <= rv->mask; k++) {
			io_uring_buf_ring_add(rv->br, r->base + (size_t)i * r->buffer_size,
					      (unsigned int)r->buffer_size, (unsigned short)i,
					      (int)rv->mask, n++);
			i = atomic_load_explicit(&rv->next[i], memory_order_relaxed);
		}
		if (n) {
			rv->tail = (uint16_t)(rv->tail + n);
			io_uring_smp_store_release(&rv->br->tail, rv->tail);
		}
		atomic_store(&rv->draining, false);
		/* A release that found us draining left its buffer to us. */
		if (atomic_load(&rv->pending) == AP_UR_NONE)
			break;
	}
}

static void recv_recycle(void *ctx, uint32_t bid)
{
	struct asyncpool_region *r = ctx;
	struct ur_recv *rv = ((struct ur_region *)r->backend)->recv;
	uint8_t one = 1;
	uint32_t h;

	if (bid > rv->mask ||
	    !atomic_compare_exchange_strong_explicit(&rv->leased[bid], &one, 0,
						     memory_order_relaxed,
						     memory_order_relaxed))
		return;
	h = atomic_load_explicit(&rv->pending, memory_order_relaxed);
	do {
		atomic_store_explicit(&rv->next[bid], h, memory_order_relaxed);
	} while (!atomic_compare_exchange_weak(&rv->pending, &h, bid));
	recv_drain(rv, r);
	/* The lease held a reference: the region outlives its leases. */
	asyncpool_region_unref(r);
}

static int uring_recv_lease(struct asyncpool_region *r, const struct io_uring_cqe *cqe,
			    struct asyncpool_lease *out)
{
	struct ur_recv *rv = ((struct ur_region *)r->backend)->recv;
	uint32_t bid;
	uint8_t zero = 0;

	/*
	 * A CQE names only the buffer id, not the group: the caller passes
	 * the region whose group its SQE named.  What we can check, we do.
	 */
	if (!rv || !(cqe->flags & IORING_CQE_F_BUFFER) || cqe->res < 0)
		return -EINVAL;
	bid = cqe->flags >> IORING_CQE_BUFFER_SHIFT;
	if (bid > rv->mask || (size_t)cqe->res > r->buffer_size)
		return -EINVAL;
	if (!atomic_compare_exchange_strong_explicit(&rv->leased[bid], &zero, 1,
						     memory_order_acquire,
						     memory_order_relaxed))
		return -EALREADY;
	ap_lease_init(out, asyncpool_region_ref(r), (size_t)bid * r->buffer_size,
		      (size_t)cqe->res, recv_recycle, r, bid);
	return 0;
}

static void uring_destroy(struct asyncpool_proactor *p)
{
	struct ur_proactor *u = ur_of(p);

	if (u->table)
		io_uring_unregister_buffers(u->ring);
	pthread_mutex_destroy(&u->lock);
	free(u);
}

static const struct proactor_ops uring_ops = {
	.name = "io_uring",
	.register_region = uring_register,
	.unregister_region = uring_unregister,
	.fixed_index = uring_fixed_index,
	.buffer_group = uring_buffer_group,
	.recv_lease = uring_recv_lease,
	.destroy = uring_destroy,
};

/* Is this a live ring, and does the kernel let us register on it? */
static int ur_check_ring(struct io_uring *ring)
{
	int rc;

	/* Kernels since 6.x take fd -1 for "no ring" registrations. */
	if (ring->ring_fd < 0)
		return -EINVAL;
	rc = ur_probe(ring);
	switch (rc) {
	case 0:
		return 0;
	case -EBADF:            /* not an open file */
	case -EOPNOTSUPP:       /* an open file, not a ring */
		return -EINVAL;
	case -EACCES:           /* registration restricted on this ring */
		return -EPERM;
	case -EINVAL:           /* a kernel before probing (5.6) */
		return -EOPNOTSUPP;
	case -ENOMEM:
	case -EPERM:
	case -ENOSYS:
	case -EEXIST:           /* IORING_SETUP_SINGLE_ISSUER, another thread */
		return rc;
	default:
		return -EINVAL;
	}
}

AP_EXPORT int asyncpool_proactor_create_uring(struct io_uring *ring, uint32_t flags,
					      struct asyncpool_proactor **out)
{
	struct ur_proactor *u;
	int rc;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!ring || flags)
		return -EINVAL;
	rc = ur_check_ring(ring);
	if (rc)
		return rc;
	u = calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	u->ring = ring;
	pthread_mutex_init(&u->lock, NULL);
	rc = ap_proactor_new(&uring_ops, u, out);
	if (rc) {
		pthread_mutex_destroy(&u->lock);
		free(u);
	}
	return rc;
}
#endif
