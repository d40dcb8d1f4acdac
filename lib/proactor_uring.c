/* SPDX-License-Identifier: MIT */
/*
 * The io_uring proactor.  It borrows a ring that the caller set up and
 * registers memory on it; it never submits I/O.
 *
 * READ regions (and READ|WRITE regions) become fixed buffers.  A slab
 * takes one run of fixed-table slots for the whole process (first fit
 * in a process-wide map), the same run on every ring it is registered
 * with, so that a lease's fixed index is valid on each of them and one
 * pool serves a ring per thread.  Where the kernel can clone buffers
 * (IORING_REGISTER_CLONE_BUFFERS with offsets, 6.13), the pages are
 * pinned once, into a private "anchor" ring that no thread owns, and
 * cloned from it into each ring: memlock is charged once.  Elsewhere
 * each ring pins the same pages into the same slots.
 *
 * WRITE regions become provided-buffer rings: one buffer group per
 * region, the ring in memory that we map.  Completions turn into leases
 * (one per buffer for a bundle); releasing one puts its buffer back on
 * the ring from any thread.  With ASYNCPOOL_ACCESS_INCREMENTAL the
 * kernel consumes a buffer in parts (IOU_PBUF_RING_INC): a lease covers
 * one part, and the buffer goes back once the kernel and every lease
 * are done with it.  Where the kernel reports its head of the ring
 * (IORING_REGISTER_PBUF_STATUS, 6.8), a completion naming a buffer it
 * has not consumed is refused.
 *
 * Rings with IORING_SETUP_SINGLE_ISSUER accept registrations only from
 * their owner thread (the one that created the proactor): an
 * unregistration due on another thread waits for
 * asyncpool_proactor_run_deferred().  After fork(), the child shares
 * the parent's rings: it never registers, unregisters or changes them.
 *
 * ASYNCPOOL_URING_DISABLE=clone,pbuf_status,bundle,incremental in the
 * environment of asyncpool_proactor_create_uring() turns features off,
 * so that tests can exercise the paths taken on older kernels.
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
#include "uring_compat.h"
#include "pool_wait.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

/* The kernel's limits (IORING_MAX_REG_BUFFERS, SZ_1G, 1 << 15). */
#define AP_UR_SLOTS		16384u
#define AP_UR_MAX_FIXED		(1ul << 30)
#define AP_UR_MAX_RING		32768u
#define AP_UR_BGIDS		65536u
/* End of a list of buffer ids. */
#define AP_UR_NONE		UINT32_MAX
/* holds[]: the kernel has the buffer (in the ring, or consumed and not
 * yet completed); the low bits count the leases out on it. */
#define AP_UR_KERNEL		(1u << 31)
#define AP_UR_LEASES		(AP_UR_KERNEL - 1)
/* IORING_REGISTER_PBUF_RING / IORING_UNREGISTER_PBUF_RING */
#define AP_IORING_REGISTER_PBUF_RING	22
#define AP_IORING_UNREGISTER_PBUF_RING	23

/* The kernel's struct io_uring_buf_reg, with the flags of 6.12. */
struct ap_uring_buf_reg {
	uint64_t ring_addr;
	uint32_t ring_entries;
	uint16_t bgid;
	uint16_t flags;
	uint64_t resv[3];
};

static pid_t ap_gettid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

/* ------------------------------------------------------------------ */
/* Process-wide state: the slot map, the anchor ring, kernel features.  */

/* A slab's run of slots, the same on every ring (slab->uring_run). */
struct ur_run {
	uint32_t first, n;
	uint32_t users;         /* rings the slab is registered with */
	bool anchored;          /* pinned in the anchor ring, cloned from it */
	pid_t pid;              /* the process that made it */
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t g_slots[AP_UR_SLOTS / 64];      /* runs taken, process-wide */
static struct io_uring g_anchor;
static bool g_anchor_up;
static pid_t g_anchor_pid;
static uint32_t g_anchor_runs;
static uint64_t g_anchor_failures;              /* slots the anchor kept */
static _Atomic uint64_t g_stale;                /* stale recv releases */

static pthread_once_t g_probe_once = PTHREAD_ONCE_INIT;
static uint32_t g_kernel_features;

static bool bit_get(const uint64_t *map, uint32_t i)
{
	return map[i / 64] & (1ull << (i % 64));
}

static void bits_set(uint64_t *map, uint32_t first, uint32_t n, bool on)
{
	for (uint32_t i = first; i < first + n; i++) {
		if (on)
			map[i / 64] |= 1ull << (i % 64);
		else
			map[i / 64] &= ~(1ull << (i % 64));
	}
}

static bool bits_any(const uint64_t *map, uint32_t first, uint32_t n)
{
	for (uint32_t i = first; i < first + n; i++)
		if (bit_get(map, i))
			return true;
	return false;
}

/* First fit: the lowest run of n free slots; false if there is none. */
static bool bits_find(const uint64_t *map, uint32_t n, uint32_t *first)
{
	uint32_t run = 0;

	for (uint32_t i = 0; i < AP_UR_SLOTS; i++) {
		if (bit_get(map, i)) {
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

/* A fork() while another thread registers must not leave g_lock held. */
static void fork_prepare(void)
{
	pthread_mutex_lock(&g_lock);
}

static void fork_release(void)
{
	pthread_mutex_unlock(&g_lock);
}

/*
 * Does IORING_REGISTER_CLONE_BUFFERS clone a range into a ring that has
 * a table, keeping the entries after the range?  Kernels of 6.13 without
 * the fix "io_uring/rsrc: ... copy original dst nodes from after the
 * cloned range" (io_uring/rsrc.c, io_clone_buffers()) dropped them; we
 * find out with a WRITE_FIXED to /dev/null from each slot.
 */
static bool probe_clone(struct io_uring *src)
{
	struct ap_uring_clone_buffers cb;
	struct io_uring dst;
	struct iovec iov;
	char *mem;
	bool ok = false;
	int fd;

	fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	mem = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED) {
		close(fd);
		return false;
	}
	memset(mem, 0, 8192);
	if (io_uring_queue_init(2, &dst, 0)) {
		munmap(mem, 8192);
		close(fd);
		return false;
	}
	iov.iov_base = mem;
	iov.iov_len = 4096;
	if (io_uring_register_buffers(src, &iov, 1) || io_uring_register_buffers_sparse(&dst, 2))
		goto out;
	iov.iov_base = mem + 4096;
	if (io_uring_register_buffers_update_tag(&dst, 1, &iov, NULL, 1) != 1)
		goto out;
	memset(&cb, 0, sizeof(cb));
	cb.src_fd = (uint32_t)src->ring_fd;
	cb.flags = IORING_REGISTER_DST_REPLACE;
	cb.nr = 1;
	if (ap_uring_register(dst.ring_fd, AP_IORING_REGISTER_CLONE_BUFFERS, &cb, 1))
		goto out;
	ok = true;
	for (int slot = 0; slot < 2 && ok; slot++) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&dst);
		struct io_uring_cqe *cqe;

		io_uring_prep_write_fixed(sqe, fd, mem + 4096 * slot, 64, 0, slot);
		if (io_uring_submit_and_wait(&dst, 1) != 1 || io_uring_wait_cqe(&dst, &cqe)) {
			ok = false;
			break;
		}
		ok = cqe->res == 64;
		io_uring_cqe_seen(&dst, cqe);
	}
out:
	/* Unregister before exit: a ring's teardown is asynchronous, and its
	 * pinned pages would stay charged (VmPin) for a while. */
	io_uring_unregister_buffers(&dst);
	io_uring_queue_exit(&dst);
	io_uring_unregister_buffers(src);
	munmap(mem, 8192);
	close(fd);
	return ok;
}

/* What this kernel can do, found once per process on a scratch ring. */
static void probe_kernel(void)
{
	struct io_uring_params prm;
	struct ap_uring_buf_status st;
	struct ap_uring_buf_reg reg;
	struct io_uring ring;
	uint32_t f = 0;
	void *page;

	pthread_atfork(fork_prepare, fork_release, fork_release);
	memset(&prm, 0, sizeof(prm));
	if (io_uring_queue_init_params(2, &ring, &prm))
		return;
	if (prm.features & IORING_FEAT_RECVSEND_BUNDLE)
		f |= ASYNCPOOL_URING_BUNDLE;
	/* io_register_pbuf_status(): -ENOENT for a group that is not there;
	 * a kernel without the opcode answers -EINVAL. */
	memset(&st, 0, sizeof(st));
	if (ap_uring_register(ring.ring_fd, AP_IORING_REGISTER_PBUF_STATUS, &st, 1) == -ENOENT)
		f |= ASYNCPOOL_URING_PBUF_STATUS;
	/* A kernel without IOU_PBUF_RING_INC refuses the flag with -EINVAL. */
	page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (page != MAP_FAILED) {
		memset(&reg, 0, sizeof(reg));
		reg.ring_addr = (uintptr_t)page;
		reg.ring_entries = 1;
		reg.flags = IOU_PBUF_RING_INC;
		if (ap_uring_register(ring.ring_fd, AP_IORING_REGISTER_PBUF_RING, &reg, 1) == 0) {
			f |= ASYNCPOOL_URING_INCREMENTAL;
			ap_uring_register(ring.ring_fd, AP_IORING_UNREGISTER_PBUF_RING, &reg, 1);
		}
		munmap(page, 4096);
	}
	if (probe_clone(&ring))
		f |= ASYNCPOOL_URING_CLONE_BUFFERS;
	io_uring_queue_exit(&ring);
	g_kernel_features = f;
}

/* Features turned off by ASYNCPOOL_URING_DISABLE (for tests). */
static uint32_t env_disabled(void)
{
	static const struct { const char *name; uint32_t bit; } names[] = {
		{ "clone", ASYNCPOOL_URING_CLONE_BUFFERS },
		{ "pbuf_status", ASYNCPOOL_URING_PBUF_STATUS },
		{ "bundle", ASYNCPOOL_URING_BUNDLE },
		{ "incremental", ASYNCPOOL_URING_INCREMENTAL },
	};
	const char *s = getenv("ASYNCPOOL_URING_DISABLE");
	uint32_t off = 0;

	while (s && *s) {
		size_t len = strcspn(s, ",");

		for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
			if (strlen(names[i].name) == len && !strncmp(s, names[i].name, len))
				off |= names[i].bit;
		s += len;
		if (*s == ',')
			s++;
	}
	return off;
}

/* The anchor ring of this process, with its sparse table (g_lock held). */
static int anchor_get(void)
{
	int rc;

	if (g_anchor_up && g_anchor_pid == getpid())
		return 0;
	if (g_anchor_up) {
		/* Inherited over fork: the parent's.  Closing our copy of the
		 * fd changes nothing for the parent. */
		io_uring_queue_exit(&g_anchor);
		g_anchor_up = false;
		g_anchor_runs = 0;
	}
	rc = io_uring_queue_init(1, &g_anchor, 0);
	if (rc)
		return rc;
	rc = io_uring_register_buffers_sparse(&g_anchor, AP_UR_SLOTS);
	if (rc) {
		io_uring_queue_exit(&g_anchor);
		return rc;
	}
	g_anchor_up = true;
	g_anchor_pid = getpid();
	return 0;
}

/* ------------------------------------------------------------------ */
/* Handles: what a recv lease names, so that a stale copy is refused.  */

/*
 * A recv lease's ctx is not the region (which is freed on its last
 * unref) but a handle, {generation, id}, into a table whose chunks are
 * never freed.  Retiring the region bumps the generation, so that a
 * copy of a lease released afterwards finds no region and is counted.
 */
#define AP_H_CHUNK	256u
#define AP_H_CHUNKS	256u

struct ur_handle {
	_Atomic uint32_t gen;
	_Atomic(struct asyncpool_region *) r;
	uint32_t next_free;                     /* g_lock */
};

static _Atomic(struct ur_handle *) g_hchunks[AP_H_CHUNKS];
static uint32_t g_hfree = AP_UR_NONE, g_hcount;

static struct ur_handle *handle_at(uint32_t id)
{
	struct ur_handle *c;

	if (id >= AP_H_CHUNK * AP_H_CHUNKS)
		return NULL;
	c = atomic_load_explicit(&g_hchunks[id / AP_H_CHUNK], memory_order_acquire);
	return c ? &c[id % AP_H_CHUNK] : NULL;
}

static int handle_new(struct asyncpool_region *r, void **ctx)
{
	struct ur_handle *h;
	uint32_t id, gen;

	pthread_mutex_lock(&g_lock);
	if (g_hfree != AP_UR_NONE) {
		id = g_hfree;
		g_hfree = handle_at(id)->next_free;
	} else {
		if (g_hcount == AP_H_CHUNK * AP_H_CHUNKS) {
			pthread_mutex_unlock(&g_lock);
			return -ENOBUFS;
		}
		id = g_hcount;
		if (id / AP_H_CHUNK < AP_H_CHUNKS && !handle_at(id)) {
			struct ur_handle *c = calloc(AP_H_CHUNK, sizeof(*c));

			if (!c) {
				pthread_mutex_unlock(&g_lock);
				return -ENOMEM;
			}
			atomic_store_explicit(&g_hchunks[id / AP_H_CHUNK], c, memory_order_release);
		}
		g_hcount++;
	}
	h = handle_at(id);
	gen = atomic_load_explicit(&h->gen, memory_order_relaxed) + 1;
	atomic_store_explicit(&h->gen, gen, memory_order_release);
	atomic_store_explicit(&h->r, r, memory_order_release);
	pthread_mutex_unlock(&g_lock);
	/* 16 bits of id, the generation above (truncated on 32-bit). */
	*ctx = (void *)(((uintptr_t)gen << 16) | id);
	return 0;
}

static void handle_retire(void *ctx)
{
	uint32_t id = (uint32_t)((uintptr_t)ctx & 0xffff);
	struct ur_handle *h = handle_at(id);

	pthread_mutex_lock(&g_lock);
	atomic_store_explicit(&h->r, NULL, memory_order_release);
	atomic_fetch_add_explicit(&h->gen, 1, memory_order_acq_rel);
	h->next_free = g_hfree;
	g_hfree = id;
	pthread_mutex_unlock(&g_lock);
}

/* The live region a handle names, or NULL. */
static struct asyncpool_region *handle_region(void *ctx)
{
	uintptr_t v = (uintptr_t)ctx;
	struct ur_handle *h = handle_at((uint32_t)(v & 0xffff));
	struct asyncpool_region *r;
	uint32_t gen = (uint32_t)(v >> 16);

	if (!h)
		return NULL;
	r = atomic_load_explicit(&h->r, memory_order_acquire);
	if (atomic_load_explicit(&h->gen, memory_order_acquire) != gen)
		return NULL;
	return r;
}

/* ------------------------------------------------------------------ */
/* The proactor.                                                        */

struct ur_recv;

/* A region's registration; kept past the region while it is deferred. */
struct ur_region {
	bool fixed;                     /* has a run of table slots */
	bool cloned;                    /* its pages came from the anchor */
	uint32_t first, n;              /* its slots */
	struct ur_recv *recv;           /* or a buffer ring */
	struct asyncpool_slab *slab;    /* a reference while deferred */
	struct ur_region *next;         /* on the deferred list */
};

struct ur_proactor {
	struct io_uring *ring;
	pid_t pid;                      /* the creator: only it touches the ring */
	pid_t owner;                    /* the creating thread */
	uint32_t features;
	pthread_mutex_t lock;           /* everything below */
	bool table;                     /* our sparse table is registered */
	uint64_t slots[AP_UR_SLOTS / 64];       /* 1: slot filled on this ring */
	uint64_t bgids[AP_UR_BGIDS / 64];       /* 1: group id taken */
	uint32_t bgid_next;
	struct ur_region *deferred;
	uint32_t ndeferred;
	uint64_t deferred_done;
	uint64_t unregister_failures;
};

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

static struct ur_proactor *ur_of(struct asyncpool_proactor *p)
{
	return p->backend;
}

/* In a child after fork(), the ring is the parent's: hands off. */
static bool ur_foreign(const struct ur_proactor *u)
{
	return getpid() != u->pid;
}

/* A SINGLE_ISSUER ring takes registrations from its owner only. */
static bool ur_must_defer(const struct ur_proactor *u)
{
	return (u->features & ASYNCPOOL_URING_SINGLE_ISSUER) && ap_gettid() != u->owner;
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

/* Pin iov[0..n) into slots first.. of ring; all or nothing. */
static int slots_fill(struct io_uring *ring, uint32_t first, const struct iovec *iov, uint32_t n)
{
	uint32_t done = 0;
	int rc = 0;

	/*
	 * An update stops at the first buffer it cannot pin (RLIMIT_MEMLOCK)
	 * and reports how many it did; the next call then reports why.
	 */
	while (done < n) {
		rc = io_uring_register_buffers_update_tag(ring, first + done, iov + done,
							  NULL, n - done);
		if (rc <= 0) {
			rc = rc ? rc : -EIO;
			break;
		}
		done += (uint32_t)rc;
		rc = 0;
	}
	if (rc && done && slots_clear(ring, first, done))
		return -EUCLEAN;        /* half-registered: the caller keeps the slots */
	return rc;
}

/* Drop one ring's use of a slab's run (g_lock held). */
static void run_put(struct asyncpool_slab *slab)
{
	struct ur_run *run = slab->uring_run;

	if (!run || --run->users)
		return;
	slab->uring_run = NULL;
	if (run->anchored && run->pid == getpid() && g_anchor_up && g_anchor_pid == run->pid) {
		if (slots_clear(&g_anchor, run->first, run->n)) {
			/* The anchor still holds them: never hand them out again. */
			g_anchor_failures++;
			free(run);
			return;
		}
		if (--g_anchor_runs == 0) {
			io_uring_queue_exit(&g_anchor);
			g_anchor_up = false;
		}
	}
	bits_set(g_slots, run->first, run->n, false);
	free(run);
}

/* The run of slab, made (and pinned into the anchor) if it has none. */
static int run_get(struct ur_proactor *u, struct asyncpool_slab *slab, const struct iovec *iov,
		   struct ur_run **out)
{
	struct ur_run *run = slab->uring_run;
	int rc;

	if (run) {
		*out = run;
		return 0;
	}
	run = calloc(1, sizeof(*run));
	if (!run)
		return -ENOMEM;
	if (!bits_find(g_slots, slab->buffer_count, &run->first)) {
		free(run);
		return -ENOBUFS;
	}
	run->n = slab->buffer_count;
	run->pid = getpid();
	if ((u->features & ASYNCPOOL_URING_CLONE_BUFFERS) && anchor_get() == 0) {
		rc = slots_fill(&g_anchor, run->first, iov, run->n);
		if (rc == -EUCLEAN) {
			bits_set(g_slots, run->first, run->n, true);
			g_anchor_failures++;
			free(run);
			return -EINVAL;
		}
		if (rc) {
			if (g_anchor_runs == 0) {
				io_uring_queue_exit(&g_anchor);
				g_anchor_up = false;
			}
			free(run);
			return rc;
		}
		run->anchored = true;
		g_anchor_runs++;
	}
	bits_set(g_slots, run->first, run->n, true);
	slab->uring_run = run;
	*out = run;
	return 0;
}

/* Clone the run's slots from the anchor into ring (6.13: offsets, replace). */
static int clone_run(struct io_uring *ring, const struct ur_run *run)
{
	struct ap_uring_clone_buffers cb;

	memset(&cb, 0, sizeof(cb));
	cb.src_fd = (uint32_t)g_anchor.ring_fd;
	cb.flags = IORING_REGISTER_DST_REPLACE;
	cb.src_off = run->first;
	cb.dst_off = run->first;
	cb.nr = run->n;
	return ap_uring_register(ring->ring_fd, AP_IORING_REGISTER_CLONE_BUFFERS, &cb, 1);
}

static int register_fixed(struct ur_proactor *u, struct asyncpool_region *r,
			  struct ur_region *ur)
{
	struct ur_run *run = NULL;
	struct iovec *iov;
	bool fresh;
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

	pthread_mutex_lock(&g_lock);
	pthread_mutex_lock(&u->lock);
	if (!u->table) {
		rc = io_uring_register_buffers_sparse(u->ring, AP_UR_SLOTS);
		/* -EBUSY: the caller registered a table of its own. */
		if (rc == -EBUSY)
			rc = -EEXIST;
		rc = ur_reg_err(ur_feature_err(rc));
		u->table = rc == 0;
	}
	pthread_mutex_unlock(&u->lock);
	fresh = !r->slab->uring_run;
	if (!rc)
		rc = run_get(u, r->slab, iov, &run);
	/* The same slab twice on one ring would share (and clear) slots. */
	if (!rc && bits_any(u->slots, run->first, run->n))
		rc = -EEXIST;
	if (!rc) {
		run->users++;
		ur->cloned = false;
		if (run->anchored && run->pid == getpid()) {
			rc = clone_run(u->ring, run);
			ur->cloned = rc == 0;
			/* A refused clone (a ring of another user, ...): pin. */
			if (rc && rc != -EEXIST && rc != -ENOMEM)
				rc = 0;
		}
		if (!rc && !ur->cloned)
			rc = slots_fill(u->ring, run->first, iov, run->n);
		if (rc == -EUCLEAN) {
			/* Slots we cannot clear stay taken rather than dirty. */
			bits_set(u->slots, run->first, run->n, true);
			rc = -EINVAL;
		} else if (rc) {
			run_put(r->slab);
			run = NULL;
		}
	} else if (run && fresh) {
		run->users++;
		run_put(r->slab);
	}
	if (!rc) {
		pthread_mutex_lock(&u->lock);
		bits_set(u->slots, run->first, run->n, true);
		pthread_mutex_unlock(&u->lock);
	}
	pthread_mutex_unlock(&g_lock);
	free(iov);
	if (rc)
		return ur_reg_err(rc);
	ur->fixed = true;
	ur->first = run->first;
	ur->n = run->n;
	return 0;
}

static void recv_free(struct ur_recv *rv)
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

/* Take a group id that is free in our map and in the kernel. */
static int recv_register(struct ur_proactor *u, struct ur_recv *rv, uint32_t entries)
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
		reg.ring_addr = (uintptr_t)rv->br;
		reg.ring_entries = entries;
		reg.bgid = (uint16_t)id;
		reg.flags = rv->inc ? IOU_PBUF_RING_INC : 0;
		rc = ap_uring_register(u->ring->ring_fd, AP_IORING_REGISTER_PBUF_RING, &reg, 1);
		if (rc == 0) {
			rv->bgid = (uint16_t)id;
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

/* Put buffer bid into the ring at tail + off (the drainer, or register). */
static void recv_put(struct ur_recv *rv, struct asyncpool_region *r, uint32_t bid, uint32_t off)
{
	uint32_t pos = atomic_load_explicit(&rv->tail, memory_order_relaxed) + off;

	atomic_store_explicit(&rv->pos[bid], pos, memory_order_relaxed);
	atomic_store_explicit(&rv->consumed[bid], 0, memory_order_relaxed);
	atomic_store_explicit(&rv->holds[bid], AP_UR_KERNEL, memory_order_relaxed);
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
		recv_free(rv);
		return -ENOMEM;
	}
	rv->mask = n - 1;
	rv->last = AP_UR_NONE;
	atomic_init(&rv->draining, false);
	atomic_init(&rv->pending, AP_UR_NONE);
	io_uring_buf_ring_init(rv->br);
	rc = handle_new(r, &rv->handle);
	if (rc) {
		recv_free(rv);
		return rc;
	}
	rc = recv_register(u, rv, n);
	if (rc) {
		handle_retire(rv->handle);
		recv_free(rv);
		return rc;
	}
	/* Every buffer starts in the ring. */
	for (uint32_t i = 0; i < n; i++)
		recv_put(rv, r, i, i);
	recv_advance(rv, n);
	ur->recv = rv;
	return 0;
}

static int uring_register(struct asyncpool_proactor *p, struct asyncpool_region *r)
{
	struct ur_proactor *u = ur_of(p);
	struct ur_region *ur;
	int rc;

	/* A child's ring is its parent's: it registers nothing there. */
	if (ur_foreign(u))
		return -EPERM;
	ur = calloc(1, sizeof(*ur));
	if (!ur)
		return -ENOMEM;
	/* READ|WRITE: fixed buffers serve read_fixed and write_fixed alike. */
	if (r->access & ASYNCPOOL_ACCESS_READ)
		rc = register_fixed(u, r, ur);
	else
		rc = register_recv(u, r, ur);
	if (rc) {
		free(ur);
		return rc;
	}
	r->backend = ur;
	return 0;
}

/* Undo a registration on the ring; 0, or the kernel's error (nothing freed). */
static int unregister_now(struct ur_proactor *u, struct ur_region *ur, struct asyncpool_slab *slab)
{
	int rc;

	if (ur->fixed) {
		rc = slots_clear(u->ring, ur->first, ur->n);
		if (rc)
			return rc;
		pthread_mutex_lock(&g_lock);
		pthread_mutex_lock(&u->lock);
		bits_set(u->slots, ur->first, ur->n, false);
		pthread_mutex_unlock(&u->lock);
		run_put(slab);
		pthread_mutex_unlock(&g_lock);
		return 0;
	} else {
		struct ur_recv *rv = ur->recv;
		struct ap_uring_buf_reg reg;

		memset(&reg, 0, sizeof(reg));
		reg.bgid = rv->bgid;
		/* On failure the kernel may still use the ring: keep it mapped. */
		rc = ap_uring_register(u->ring->ring_fd, AP_IORING_UNREGISTER_PBUF_RING, &reg, 1);
		if (rc)
			return rc;
		pthread_mutex_lock(&u->lock);
		bits_set(u->bgids, rv->bgid, 1, false);
		pthread_mutex_unlock(&u->lock);
		recv_free(rv);
		return 0;
	}
}

/* In a child: forget a registration of the parent's ring, touching nothing. */
static void unregister_forget(struct ur_proactor *u, struct ur_region *ur,
			      struct asyncpool_slab *slab)
{
	if (ur->fixed) {
		pthread_mutex_lock(&g_lock);
		pthread_mutex_lock(&u->lock);
		bits_set(u->slots, ur->first, ur->n, false);
		pthread_mutex_unlock(&u->lock);
		run_put(slab);          /* run_put() clears nothing of another pid */
		pthread_mutex_unlock(&g_lock);
	} else {
		recv_free(ur->recv);    /* our copy of the ring memory */
	}
}

static void defer(struct ur_proactor *u, struct ur_region *ur, struct asyncpool_slab *slab)
{
	ur->slab = asyncpool_slab_ref(slab);
	pthread_mutex_lock(&u->lock);
	ur->next = u->deferred;
	u->deferred = ur;
	u->ndeferred++;
	pthread_mutex_unlock(&u->lock);
}

static void uring_unregister(struct asyncpool_proactor *p, struct asyncpool_region *r)
{
	struct ur_proactor *u = ur_of(p);
	struct ur_region *ur = r->backend;
	int rc;

	/* From here on, a copy of one of its leases finds no region. */
	if (ur->recv)
		handle_retire(ur->recv->handle);
	if (ur_foreign(u)) {
		unregister_forget(u, ur, r->slab);
		free(ur);
		return;
	}
	if (ur_must_defer(u)) {
		defer(u, ur, r->slab);
		return;
	}
	rc = unregister_now(u, ur, r->slab);
	if (rc == -EEXIST) {            /* the kernel says: not the owner */
		defer(u, ur, r->slab);
		return;
	}
	if (rc) {
		/* The kernel still uses it: keep its memory and its slots
		 * (the run keeps this ring's use), and say so. */
		pthread_mutex_lock(&u->lock);
		u->unregister_failures++;
		pthread_mutex_unlock(&u->lock);
	}
	free(ur);
}

static int uring_run_deferred(struct asyncpool_proactor *p)
{
	struct ur_proactor *u = ur_of(p);
	struct ur_region *list, *keep = NULL;
	int done = 0, err = 0;
	uint32_t kept = 0;

	if (ur_foreign(u))
		return 0;
	if (ur_must_defer(u))
		return -EEXIST;
	pthread_mutex_lock(&u->lock);
	list = u->deferred;
	u->deferred = NULL;
	u->ndeferred = 0;
	pthread_mutex_unlock(&u->lock);
	while (list) {
		struct ur_region *ur = list;
		int rc;

		list = ur->next;
		rc = unregister_now(u, ur, ur->slab);
		if (rc) {
			ur->next = keep;
			keep = ur;
			kept++;
			if (!err)
				err = ur_reg_err(rc);
			continue;
		}
		asyncpool_slab_unref(ur->slab);
		free(ur);
		done++;
	}
	pthread_mutex_lock(&u->lock);
	u->deferred_done += (uint64_t)done;
	u->unregister_failures += kept;
	while (keep) {
		struct ur_region *ur = keep;

		keep = ur->next;
		ur->next = u->deferred;
		u->deferred = ur;
		u->ndeferred++;
	}
	pthread_mutex_unlock(&u->lock);
	return err ? err : done;
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
		uint32_t n = 0;

		for (uint32_t k = 0; i != AP_UR_NONE && k <= rv->mask; k++) {
			recv_put(rv, r, i, n++);
			i = atomic_load_explicit(&rv->next[i], memory_order_relaxed);
		}
		if (n) {
			recv_advance(rv, n);
			/* The tail before the look at the waiters (wait_word.h). */
			atomic_thread_fence(memory_order_seq_cst);
			ap_word_wake(&rv->refill, false);
		}
		atomic_store(&rv->draining, false);
		/* A release that found us draining left its buffer to us. */
		if (atomic_load(&rv->pending) == AP_UR_NONE)
			break;
	}
}

static void recv_recycle(void *ctx, uint32_t bid)
{
	struct asyncpool_region *r = handle_region(ctx);
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
static int uring_recv(struct asyncpool_region *r, const struct io_uring_cqe *cqe,
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

static int uring_region_wait(struct asyncpool_region *r, int64_t timeout_ns)
{
	struct ur_recv *rv = ((struct ur_region *)r->backend)->recv;
	struct timespec deadline;
	bool interrupted = false;

	if (!rv)
		return -EINVAL;
	if (timeout_ns > 0)
		ap_deadline_after(timeout_ns, &deadline);
	for (;;) {
		uint32_t v = ap_word_announce(&rv->refill);

		/* The announcement before the look at the ring (wait_word.h). */
		atomic_thread_fence(memory_order_seq_cst);
		if (recv_has_buffers(rv))
			return 0;
		if (interrupted)
			return -EINTR;
		if (timeout_ns == 0 || (timeout_ns > 0 && ap_deadline_passed(&deadline)))
			return -ETIMEDOUT;
		if (ap_futex_wait(&rv->refill, v, timeout_ns > 0 ? &deadline : NULL, false) == -EINTR)
			interrupted = true;     /* one more look, then -EINTR */
	}
}

static int uring_region_prep_wait(struct asyncpool_region *r, struct io_uring_sqe *sqe)
{
	struct ur_recv *rv = ((struct ur_region *)r->backend)->recv;
	uint32_t v;

	if (!rv)
		return -EINVAL;
	v = ap_word_announce(&rv->refill);
	atomic_thread_fence(memory_order_seq_cst);
	/* Buffers there already: a value the word cannot hold, -EAGAIN at once. */
	if (recv_has_buffers(rv))
		v &= ~AP_WAIT_WAITERS;
	return ap_prep_futex_wait(sqe, &rv->refill, v, false);
}

static void uring_region_stats(const struct asyncpool_region *r, struct asyncpool_region_stats *st)
{
	struct ur_proactor *u = ur_of(r->proactor);
	const struct ur_region *ur = r->backend;
	struct ur_recv *rv = ur->recv;

	if (ur->cloned)
		st->flags |= ASYNCPOOL_REGION_CLONED;
	if (!rv)
		return;
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

static void uring_proactor_stats(struct asyncpool_proactor *p, struct asyncpool_proactor_stats *st)
{
	struct ur_proactor *u = ur_of(p);

	pthread_mutex_lock(&u->lock);
	st->features = u->features;
	st->deferred = u->ndeferred;
	st->deferred_done = u->deferred_done;
	st->unregister_failures = u->unregister_failures;
	pthread_mutex_unlock(&u->lock);
	pthread_mutex_lock(&g_lock);
	st->unregister_failures += g_anchor_failures;
	pthread_mutex_unlock(&g_lock);
	st->stale_releases = atomic_load_explicit(&g_stale, memory_order_relaxed);
}

static int uring_destroy(struct asyncpool_proactor *p)
{
	struct ur_proactor *u = ur_of(p);

	if (ur_foreign(u)) {
		/* A child frees its copy; the parent's ring stays as it is. */
		while (u->deferred) {
			struct ur_region *ur = u->deferred;

			u->deferred = ur->next;
			unregister_forget(u, ur, ur->slab);
			asyncpool_slab_unref(ur->slab);
			free(ur);
		}
	} else {
		if (u->deferred) {
			int rc = uring_run_deferred(p);

			if (rc < 0)
				return rc;
		}
		if (u->table) {
			int rc = io_uring_unregister_buffers(u->ring);

			/* -ENXIO: the caller unregistered the table already. */
			if (rc && rc != -ENXIO) {
				pthread_mutex_lock(&u->lock);
				u->unregister_failures++;
				pthread_mutex_unlock(&u->lock);
				return ur_reg_err(rc);
			}
			u->table = false;
		}
	}
	pthread_mutex_destroy(&u->lock);
	free(u);
	return 0;
}

static const struct proactor_ops uring_ops = {
	.register_region = uring_register,
	.unregister_region = uring_unregister,
	.fixed_index = uring_fixed_index,
	.buffer_group = uring_buffer_group,
	.recv = uring_recv,
	.region_wait = uring_region_wait,
	.region_prep_wait = uring_region_prep_wait,
	.region_stats = uring_region_stats,
	.proactor_stats = uring_proactor_stats,
	.run_deferred = uring_run_deferred,
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
	pthread_once(&g_probe_once, probe_kernel);
	u = calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	u->ring = ring;
	u->pid = getpid();
	u->owner = ap_gettid();
	u->features = g_kernel_features & ~env_disabled();
	if (!(ring->features & IORING_FEAT_RECVSEND_BUNDLE))
		u->features &= ~ASYNCPOOL_URING_BUNDLE;
	if (ring->flags & IORING_SETUP_SINGLE_ISSUER)
		u->features |= ASYNCPOOL_URING_SINGLE_ISSUER;
	pthread_mutex_init(&u->lock, NULL);
	rc = ap_proactor_new(&uring_ops, u, out);
	if (rc) {
		pthread_mutex_destroy(&u->lock);
		free(u);
	}
	return rc;
}
#endif
