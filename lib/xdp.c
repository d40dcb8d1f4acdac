/* SPDX-License-Identifier: MIT */
/*
 * The AF_XDP backend: a pool's region as a UMEM, and sockets whose
 * rings the pool drives (Documentation/networking/af_xdp.rst).
 *
 * The UMEM is the region's memory, frame i = buffer i (aligned chunks:
 * the buffer size is a power of two between 2048 and a page), so that a
 * frame's address is its buffer's offset in the region, and a lease's
 * span is a window of its frame.  The UMEM is registered on the first
 * socket opened (the kernel wants a socket to register it on, and that
 * socket bound, before another binds to it with XDP_SHARED_UMEM); each
 * further socket, on another (interface, queue), has its own fill and
 * completion rings on the same UMEM.
 *
 * Where a frame is, as the pool sees it: in the pool (free or cached),
 * leased to a caller (after a receive, or acquired), or held by a socket
 * of this process: in its fill or rx ring (FILL), or in its tx or
 * completion ring (TX).  A frame a socket holds is leased from the pool
 * under this process's name: its token (generation << 32 | index) is in
 * tok[], its place and socket in place[], and nowhere else.  So in a
 * shared pool a process that dies holding frames in any of its rings
 * held leases, which the pool's reclaim returns after the quarantine
 * (the kernel may still write a frame of the fill ring, or read one of
 * the tx ring, until it has torn the socket down).
 *
 * What the kernel writes in the rx and completion rings is checked
 * before use: an address outside the UMEM, a length past the frame, or
 * a frame that this socket did not give the kernel (not FILL of this
 * socket for rx, not TX of this socket for completion) is refused and
 * counted, never handed out.
 *
 * Locks: a socket's fill and rx rings under rx_lock, its tx and
 * completion rings under tx_lock (each ring has one producer and one
 * consumer; the lock makes any thread that one).  place[] and tok[] of
 * a frame are written by whoever holds the frame, under the lock of the
 * ring it goes into or comes out of; a frame handed between threads as
 * a lease is ordered by the hand-off.
 */
#include "internal.h"
#include "pool_internal.h"

#include <stdlib.h>
#include <unistd.h>

#include "xdp_internal.h"

#ifdef ASYNCPOOL_TEST_HOOKS
unsigned int (*ap_xdp_test_rx)(struct asyncpool_xsk *s, struct xdp_desc *d, unsigned int n);
unsigned int (*ap_xdp_test_comp)(struct asyncpool_xsk *s, uint64_t *addr, unsigned int n);
void (*ap_xdp_test_hook_point)(enum ap_xdp_point p);
#endif

#ifdef HAVE_XDP
#include <fcntl.h>
#include <linux/if_link.h>
#include <linux/if_xdp.h>
#include <net/if.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <xdp/libxdp.h>

#ifndef AF_XDP
#define AF_XDP 44
#endif
#ifndef SOL_XDP
#define SOL_XDP 283
#endif

#define XDP_OPTS_V1   sizeof(struct asyncpool_xdp_options)
#define XSK_OPTS_V1   sizeof(struct asyncpool_xsk_options)
#define XSK_STATS_V1  sizeof(struct asyncpool_xsk_stats)
#define XDP_PLACES_V1 sizeof(struct asyncpool_xdp_places)
#define XSK_RING_DEFAULT 2048u
#define XSK_RING_MAX     (1u << 16)
#define XSK_BATCH_DEFAULT 64u
#define XSK_BATCH_MAX     256u
#define XSK_KNOWN_FLAGS  (ASYNCPOOL_XSK_ZEROCOPY | ASYNCPOOL_XSK_XSKMAP | ASYNCPOOL_XSK_SKB)
/* The kernel's XDP_PACKET_HEADROOM, in front of every received frame. */
#define AP_XDP_PACKET_HEADROOM 256u


/* ---------------------------------------------------------------- rings */

static int ring_map(struct ap_xring *r, int fd, uint64_t pgoff, const struct xdp_ring_offset *off,
		    uint32_t entries, size_t entry_size)
{
	size_t len = off->desc + (size_t)entries * entry_size;
	void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd,
		       (off_t)pgoff);

	if (m == MAP_FAILED)
		return -errno;
	r->map = m;
	r->map_len = len;
	r->prod = (_Atomic uint32_t *)((char *)m + off->producer);
	r->cons = (_Atomic uint32_t *)((char *)m + off->consumer);
	r->flags = (_Atomic uint32_t *)((char *)m + off->flags);
	r->desc = (char *)m + off->desc;
	r->size = entries;
	r->mask = entries - 1;
	r->cached_prod = atomic_load_explicit(r->prod, memory_order_relaxed);
	r->cached_cons = atomic_load_explicit(r->cons, memory_order_relaxed);
	return 0;
}

static void ring_unmap(struct ap_xring *r)
{
	if (r->map)
		munmap(r->map, r->map_len);
	memset(r, 0, sizeof(*r));
}

/* A producer's free entries, at least want if it can (reads the consumer then). */
static uint32_t ring_prod_free(struct ap_xring *r, uint32_t want)
{
	uint32_t used = r->cached_prod - r->cached_cons;

	if (r->size - used >= want)
		return r->size - used;
	r->cached_cons = atomic_load_explicit(r->cons, memory_order_acquire);
	used = r->cached_prod - r->cached_cons;
	/* The kernel's consumer is trusted, but never more than a ring behind. */
	if (used > r->size)
		return 0;
	return r->size - used;
}

static void ring_prod_submit(struct ap_xring *r, uint32_t n)
{
	r->cached_prod += n;
	atomic_store_explicit(r->prod, r->cached_prod, memory_order_release);
}

/* A consumer's entries ready, at most max (bounded by the ring). */
static uint32_t ring_cons_peek(struct ap_xring *r, uint32_t max)
{
	uint32_t n = r->cached_prod - r->cached_cons;

	if (!n) {
		r->cached_prod = atomic_load_explicit(r->prod, memory_order_acquire);
		n = r->cached_prod - r->cached_cons;
	}
	if (n > r->size)
		n = r->size;
	return n < max ? n : max;
}

static void ring_cons_release(struct ap_xring *r, uint32_t n)
{
	r->cached_cons += n;
	atomic_store_explicit(r->cons, r->cached_cons, memory_order_release);
}

static bool ring_needs_wakeup(const struct ap_xring *r)
{
	return atomic_load_explicit(r->flags, memory_order_relaxed) & XDP_RING_NEED_WAKEUP;
}

/* ---------------------------------------------------------------- frames */

static inline uint32_t place_get(const struct asyncpool_xdp *x, uint32_t idx)
{
	return atomic_load_explicit(&x->place[idx], memory_order_relaxed);
}

static inline void place_set(struct asyncpool_xdp *x, uint32_t idx, uint32_t v)
{
	atomic_store_explicit(&x->place[idx], v, memory_order_relaxed);
}

/* The frame of UMEM address a, with its offset in the frame: false if outside. */
static inline bool frame_of(const struct ap_xgeom x, uint64_t a, uint32_t *idx, uint32_t *off)
{
	if (a >= x.umem_len)
		return false;
	*idx = (uint32_t)(a >> x.frame_shift);
	*off = (uint32_t)(a & (x.frame_size - 1));
	return true;
}

/* ---------------------------------------------------------------- the summary */

/*
 * Where this process's frames are, for another process to read
 * (asyncpool inspect): the AF_XDP summary of its attachment record
 * (pool_layout.h, struct ap_xdp_sum).  Each socket keeps what it added
 * (pub[]) and, at the end of a batch that moved frames, adds the
 * difference to what it sees now: its counters (in_fill, in_tx: exact)
 * split by the indices the kernel published last (a frame the kernel
 * took and did not yet put in a ring is the kernel's).  A relaxed add
 * per place that changed, per batch: the sockets of one process run
 * under locks of their own, in threads of their own.  Nothing reads it
 * here.
 */
_Static_assert(AP_XS_PLACES == 6, "pub[] of struct asyncpool_xsk");

static pthread_mutex_t sum_lock = PTHREAD_MUTEX_INITIALIZER;

/*
 * The summary of pool's attachment, for this epoch of it (zeroed first
 * if a former holder of the slot left one): NULL for a pool with no
 * attachment (local, or raw shared memory), and for a forked child's
 * copy of its parent's handle (the record is the parent's).
 */
static struct ap_xdp_sum *sum_claim(struct asyncpool *pool)
{
	struct ap_attach *a = pool->shared && pool->lock_fd >= 0 ? pool->fl.att : NULL;
	struct ap_xdp_sum *sum;
	uint32_t epoch;

	if (!a || atomic_load_explicit(&a->pid, memory_order_relaxed) != (uint32_t)getpid())
		return NULL;
	sum = &a->xdp;
	epoch = (uint32_t)AP_ATT_EPOCH(atomic_load_explicit(&a->life, memory_order_relaxed));
	pthread_mutex_lock(&sum_lock);
	if (atomic_load_explicit(&sum->epoch, memory_order_relaxed) != epoch) {
		atomic_store_explicit(&sum->epoch, 0, memory_order_relaxed);
		atomic_store_explicit(&sum->sockets, 0, memory_order_relaxed);
		for (unsigned int i = 0; i < AP_XS_PLACES; i++)
			atomic_store_explicit(&sum->place[i], 0, memory_order_relaxed);
		atomic_store_explicit(&sum->epoch, epoch, memory_order_release);
	}
	pthread_mutex_unlock(&sum_lock);
	return sum;
}

/* Place i of socket s is now n: the difference added to the summary. */
static inline void sum_put(struct asyncpool_xsk *s, unsigned int i, uint32_t n)
{
	if (n == s->pub[i])
		return;
	atomic_fetch_add_explicit(&s->x->sum->place[i], n - s->pub[i], memory_order_relaxed);
	s->pub[i] = n;
}

/* Of held frames, those in a ring with n entries (at most held): the rest stay in *held. */
static inline uint32_t sum_take(uint32_t *held, uint32_t n)
{
	if (n > *held)
		n = *held;
	*held -= n;
	return n;
}

/*
 * One side of s, published: of its held frames, those in the ring we
 * produce to (fill, tx: place base), those in the ring the kernel
 * produces to (rx, completion: base + 2), the rest the kernel's
 * (base + 1).  Under the side's lock (rx_lock, tx_lock).
 */
_Static_assert(AP_XS_KERNEL_RX == AP_XS_FILL + 1 && AP_XS_RX == AP_XS_FILL + 2 &&
	       AP_XS_KERNEL_TX == AP_XS_TX + 1 && AP_XS_COMPLETION == AP_XS_TX + 2,
	       "sum_side(): a side's three places in a row");

static inline void sum_side(struct asyncpool_xsk *s, uint64_t count, const struct ap_xring *out,
			    const struct ap_xring *back, unsigned int base)
{
	uint32_t held = (uint32_t)count;
	uint32_t in_out = sum_take(&held, out->cached_prod -
					  atomic_load_explicit(out->cons, memory_order_relaxed));
	uint32_t in_back = sum_take(&held, atomic_load_explicit(back->prod, memory_order_relaxed) -
					   back->cached_cons);

	sum_put(s, base, in_out);
	sum_put(s, base + 2, in_back);
	sum_put(s, base + 1, held);
}

static inline void sum_rx(struct asyncpool_xsk *s)
{
	if (s->x->sum)
		sum_side(s, AP_XCNT(s->in_fill), &s->fill, &s->rx, AP_XS_FILL);
}

static void sum_tx(struct asyncpool_xsk *s)
{
	if (s->x->sum)
		sum_side(s, AP_XCNT(s->in_tx), &s->tx, &s->comp, AP_XS_TX);
}

/* ---------------------------------------------------------------- the UMEM */

AP_EXPORT int asyncpool_xdp_create(struct asyncpool *pool, const struct asyncpool_xdp_options *opts,
				   struct asyncpool_xdp **out)
{
	struct asyncpool_xdp_options o = { .size = XDP_OPTS_V1 };
	struct asyncpool_region *r;
	struct asyncpool_xdp *x;
	long page = sysconf(_SC_PAGESIZE);
	size_t fs;
	uint32_t count;

	if (out)
		*out = NULL;
	if (!pool || !out)
		return -EINVAL;
	if (opts) {
		if (opts->size < XDP_OPTS_V1 || opts->size > AP_STRUCT_SIZE_MAX)
			return -EINVAL;
		for (size_t i = XDP_OPTS_V1; i < opts->size; i++)
			if (((const char *)opts)[i])
				return -EINVAL;
		memcpy(&o, opts, XDP_OPTS_V1);
		if (o.flags || o.reserved[0] || o.reserved[1])
			return -EINVAL;
	}
	r = asyncpool_region(pool);
	fs = asyncpool_region_buffer_size(r);
	count = asyncpool_region_buffer_count(r);
	if (page <= 0)
		page = 4096;
	/* Aligned chunks: a power of two, 2048 to a page; the UMEM page-aligned. */
	if (!r || !count || fs < 2048 || fs > (size_t)page || (fs & (fs - 1)) ||
	    ((uintptr_t)asyncpool_region_base(r) & ((uintptr_t)page - 1)))
		return -EINVAL;
	if ((size_t)o.headroom + AP_XDP_PACKET_HEADROOM >= fs)
		return -EINVAL;
	x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	x->tok = calloc(count, sizeof(*x->tok));
	x->place = calloc(count, sizeof(*x->place));
	if (!x->tok || !x->place) {
		free(x->tok);
		free(x->place);
		free(x);
		return -ENOMEM;
	}
	pthread_mutex_init(&x->lock, NULL);
	x->pool = pool;
	x->region = asyncpool_region_ref(r);
	x->base = asyncpool_region_base(r);
	x->geom.frame_size = (uint32_t)fs;
	x->geom.frame_shift = (uint32_t)__builtin_ctzll(fs);
	x->count = count;
	x->geom.umem_len = (uint64_t)fs * count;
	x->headroom = o.headroom;
	x->owner_fd = -1;
	x->sum = sum_claim(pool);
	*out = x;
	return 0;
}

AP_EXPORT int asyncpool_xdp_destroy(struct asyncpool_xdp *x)
{
	if (!x)
		return -EINVAL;
	pthread_mutex_lock(&x->lock);
	if (x->nsockets) {
		pthread_mutex_unlock(&x->lock);
		return -EBUSY;
	}
	pthread_mutex_unlock(&x->lock);
	pthread_mutex_destroy(&x->lock);
	asyncpool_region_unref(x->region);
	free(x->tok);
	free(x->place);
	free(x);
	return 0;
}

/* ---------------------------------------------------------------- sockets */

static void xsk_unmap(struct asyncpool_xsk *s)
{
	ring_unmap(&s->rx);
	ring_unmap(&s->tx);
	ring_unmap(&s->fill);
	ring_unmap(&s->comp);
}

/*
 * A socket with its four rings, bound: the UMEM registered on it if it
 * is the first (bind flags: the mode asked, need_wakeup), or bound to
 * the owner's with XDP_SHARED_UMEM (which takes no mode: the owner's).
 */
static int xsk_build(struct asyncpool_xsk *s, uint32_t ring, uint16_t bind_flags)
{
	struct asyncpool_xdp *x = s->x;
	struct xdp_mmap_offsets off;
	struct sockaddr_xdp sxdp;
	socklen_t len = sizeof(off);
	int fd, rc;

	fd = socket(AF_XDP, SOCK_RAW | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	s->fd = fd;
	if (x->owner_fd < 0) {
		struct xdp_umem_reg mr;

		memset(&mr, 0, sizeof(mr));
		mr.addr = (uintptr_t)x->base;
		mr.len = x->geom.umem_len;
		mr.chunk_size = x->geom.frame_size;
		mr.headroom = x->headroom;
		if (setsockopt(fd, SOL_XDP, XDP_UMEM_REG, &mr, sizeof(mr)))
			goto fail_errno;
	}
	if (setsockopt(fd, SOL_XDP, XDP_UMEM_FILL_RING, &ring, sizeof(ring)) ||
	    setsockopt(fd, SOL_XDP, XDP_UMEM_COMPLETION_RING, &ring, sizeof(ring)) ||
	    setsockopt(fd, SOL_XDP, XDP_RX_RING, &ring, sizeof(ring)) ||
	    setsockopt(fd, SOL_XDP, XDP_TX_RING, &ring, sizeof(ring)) ||
	    getsockopt(fd, SOL_XDP, XDP_MMAP_OFFSETS, &off, &len))
		goto fail_errno;
	rc = ring_map(&s->fill, fd, XDP_UMEM_PGOFF_FILL_RING, &off.fr, ring, sizeof(uint64_t));
	if (!rc)
		rc = ring_map(&s->comp, fd, XDP_UMEM_PGOFF_COMPLETION_RING, &off.cr, ring,
			      sizeof(uint64_t));
	if (!rc)
		rc = ring_map(&s->rx, fd, XDP_PGOFF_RX_RING, &off.rx, ring,
			      sizeof(struct xdp_desc));
	if (!rc)
		rc = ring_map(&s->tx, fd, XDP_PGOFF_TX_RING, &off.tx, ring,
			      sizeof(struct xdp_desc));
	if (rc)
		goto fail;
	memset(&sxdp, 0, sizeof(sxdp));
	sxdp.sxdp_family = AF_XDP;
	sxdp.sxdp_ifindex = s->ifindex;
	sxdp.sxdp_queue_id = s->queue;
	if (x->owner_fd >= 0) {
		sxdp.sxdp_flags = XDP_SHARED_UMEM;
		sxdp.sxdp_shared_umem_fd = (uint32_t)x->owner_fd;
	} else {
		sxdp.sxdp_flags = bind_flags | XDP_USE_NEED_WAKEUP;
	}
	if (bind(fd, (struct sockaddr *)&sxdp, sizeof(sxdp)))
		goto fail_errno;
	return 0;
fail_errno:
	rc = -errno;
fail:
	xsk_unmap(s);
	close(fd);
	s->fd = -1;
	return rc;
}

/* The mode the kernel chose, from XDP_OPTIONS. */
static uint32_t xsk_mode(int fd)
{
	struct xdp_options xo;
	socklen_t len = sizeof(xo);

	if (!getsockopt(fd, SOL_XDP, XDP_OPTIONS, &xo, &len) &&
	    (xo.flags & XDP_OPTIONS_ZEROCOPY))
		return ASYNCPOOL_XSK_MODE_ZEROCOPY;
	return ASYNCPOOL_XSK_MODE_COPY;
}

/* The program of libxdp's default object, and the name of its map. */
#define AP_XSK_DEF_OBJECT  "xsk_def_xdp_prog.o"
#define AP_XSK_DEF_PROGRAM "xsk_def_prog"
#define AP_XSK_DEF_MAP     "xsks_map"
#define AP_XSK_MAP_ENTRIES 64u

/* The fd of the map named AP_XSK_DEF_MAP that program fd prog uses, or -errno. */
static int prog_xsk_map(int prog)
{
	struct bpf_prog_info info;
	uint32_t ids[16], len = sizeof(info);
	int rc = -ENOENT;

	memset(&info, 0, sizeof(info));
	info.nr_map_ids = 16;
	info.map_ids = (uintptr_t)ids;
	if (bpf_obj_get_info_by_fd(prog, &info, &len))
		return -errno ? -errno : -EINVAL;
	for (uint32_t i = 0; i < info.nr_map_ids && i < 16; i++) {
		struct bpf_map_info mi;
		uint32_t mlen = sizeof(mi);
		int fd = bpf_map_get_fd_by_id(ids[i]);

		if (fd < 0)
			continue;
		memset(&mi, 0, sizeof(mi));
		if (!bpf_obj_get_info_by_fd(fd, &mi, &mlen) &&
		    !strncmp(mi.name, AP_XSK_DEF_MAP, sizeof(mi.name)) &&
		    mi.type == BPF_MAP_TYPE_XSKMAP)
			return fd;
		close(fd);
	}
	return rc;
}

/*
 * The XSKMAP of libxdp's default program attached alone on ifindex
 * (native or generic mode), asked of the kernel through libbpf; -ENOENT
 * if none is.  (libxdp 1.3's xdp_multiprog__close() leaves the fd of
 * such a program open: asked this way, nothing stays open.)
 */
static int default_map_alone(int ifindex)
{
	LIBBPF_OPTS(bpf_xdp_query_opts, q);
	uint32_t ids[2];
	int rc = -ENOENT;

	if (bpf_xdp_query(ifindex, 0, &q))
		return -ENOENT;
	ids[0] = q.drv_prog_id;
	ids[1] = q.skb_prog_id;
	for (int i = 0; i < 2 && rc < 0; i++) {
		struct bpf_prog_info info;
		uint32_t len = sizeof(info);
		int fd;

		if (!ids[i])
			continue;
		fd = bpf_prog_get_fd_by_id(ids[i]);
		if (fd < 0)
			continue;
		memset(&info, 0, sizeof(info));
		if (!bpf_obj_get_info_by_fd(fd, &info, &len) &&
		    !strncmp(info.name, AP_XSK_DEF_PROGRAM, sizeof(info.name)))
			rc = prog_xsk_map(fd);
		close(fd);
	}
	return rc;
}

/* The XSKMAP of libxdp's default program on ifindex, if it is attached there. */
static int default_map_attached(int ifindex)
{
	struct xdp_multiprog *mp;
	struct xdp_program *p = NULL;
	int rc = default_map_alone(ifindex);

	if (rc >= 0)
		return rc;
	/* libxdp's dispatcher, with the default program among its programs. */
	rc = -ENOENT;
	mp = xdp_multiprog__get_from_ifindex(ifindex);
	if (!mp || libxdp_get_error(mp))
		return -ENOENT;
	if (xdp_multiprog__is_legacy(mp)) {
		p = xdp_multiprog__main_prog(mp);
		if (p && strcmp(xdp_program__name(p), AP_XSK_DEF_PROGRAM))
			p = NULL;
	} else {
		while ((p = xdp_multiprog__next_prog(p, mp)))
			if (!strcmp(xdp_program__name(p), AP_XSK_DEF_PROGRAM))
				break;
	}
	if (p)
		rc = prog_xsk_map(xdp_program__fd(p));
	xdp_multiprog__close(mp);
	return rc;
}

/*
 * libxdp's default program (it redirects a frame of queue q to the
 * socket at key q of its map, and passes the rest) on ifindex: found
 * there, or loaded and attached (generic mode with ASYNCPOOL_XSK_SKB,
 * native otherwise).  It stays attached after the sockets close, as
 * libxdp leaves it.  Its map's fd, or -errno.  Nothing of libxdp stays
 * open: the kernel holds the program, the program its map.
 */
static int default_map(int ifindex, uint32_t flags)
{
	struct xdp_program *prog;
	struct bpf_map *map;
	int rc, fd;

	fd = default_map_attached(ifindex);
	if (fd >= 0)
		return fd;
	prog = xdp_program__find_file(AP_XSK_DEF_OBJECT, NULL, NULL);
	rc = (int)libxdp_get_error(prog);
	if (rc || !prog)
		return rc < 0 ? rc : -EOPNOTSUPP;
	map = bpf_object__find_map_by_name(xdp_program__bpf_obj(prog), AP_XSK_DEF_MAP);
	if (!map) {
		rc = -ENOENT;
		goto out;
	}
	rc = bpf_map__set_max_entries(map, AP_XSK_MAP_ENTRIES);
	if (!rc)
		rc = xdp_program__attach(prog, ifindex,
					 (flags & ASYNCPOOL_XSK_SKB) ? XDP_MODE_SKB : XDP_MODE_NATIVE, 0);
	if (!rc) {
		fd = fcntl(bpf_map__fd(map), F_DUPFD_CLOEXEC, 0);
		rc = fd < 0 ? -errno : fd;
	} else if (rc == -EEXIST || rc == -EBUSY) {
		/* Another attached it meanwhile: its map. */
		rc = default_map_attached(ifindex);
	}
out:
	xdp_program__close(prog);
	return rc;
}

/* The socket into the XSKMAP at key queue: the caller's, or libxdp's default program's. */
static int xsk_attach_map(struct asyncpool_xsk *s, const struct asyncpool_xsk_options *o)
{
	int map = -1, rc;
	uint32_t key = s->queue;

	if (o->flags & ASYNCPOOL_XSK_XSKMAP) {
		map = fcntl(o->xskmap_fd, F_DUPFD_CLOEXEC, 0);
		if (map < 0)
			return -errno;
	} else {
		map = default_map((int)s->ifindex, o->flags);
		if (map < 0)
			return map;
	}
	rc = bpf_map_update_elem(map, &key, &s->fd, 0);
	if (rc) {
		rc = rc < 0 ? rc : -errno;
		close(map);
		return rc < 0 ? rc : -EINVAL;
	}
	s->map_fd = map;
	return 0;
}

AP_EXPORT int asyncpool_xsk_open(struct asyncpool_xdp *x, const struct asyncpool_xsk_options *opts,
				 struct asyncpool_xsk **out)
{
	struct asyncpool_xsk_options o;
	struct asyncpool_xsk *s;
	uint32_t ring;
	unsigned int ifindex;
	int rc, slot = -1;

	if (out)
		*out = NULL;
	if (!x || !opts || !out || opts->size < XSK_OPTS_V1 || opts->size > AP_STRUCT_SIZE_MAX)
		return -EINVAL;
	for (size_t i = XSK_OPTS_V1; i < opts->size; i++)
		if (((const char *)opts)[i])
			return -EINVAL;
	memcpy(&o, opts, XSK_OPTS_V1);
	ring = o.ring_size ? o.ring_size : XSK_RING_DEFAULT;
	if (!o.ifname || (o.flags & ~XSK_KNOWN_FLAGS) || o.reserved ||
	    ring < 64 || ring > XSK_RING_MAX || (ring & (ring - 1)) ||
	    o.fill_batch > XSK_BATCH_MAX || ((o.flags & ASYNCPOOL_XSK_XSKMAP) && o.xskmap_fd < 0))
		return -EINVAL;
	ifindex = if_nametoindex(o.ifname);
	if (!ifindex)
		return -ENODEV;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->x = x;
	s->fd = -1;
	s->map_fd = -1;
	s->ifindex = ifindex;
	s->queue = o.queue;
	s->fill_batch = o.fill_batch ? o.fill_batch : XSK_BATCH_DEFAULT;
	if (s->fill_batch > ring)
		s->fill_batch = ring;

	pthread_mutex_lock(&x->lock);
	for (int i = 0; i < AP_XSK_MAX; i++) {
		if (!x->sockets[i]) {
			if (slot < 0)
				slot = i;
		} else if (x->sockets[i]->ifindex == ifindex && x->sockets[i]->queue == o.queue) {
			rc = -EEXIST;       /* one socket per (interface, queue) */
			goto fail;
		}
	}
	if (slot < 0) {
		rc = -EMFILE;
		goto fail;
	}
	s->slot = (uint32_t)slot;
	if (x->owner_fd < 0 && (o.flags & ASYNCPOOL_XSK_ZEROCOPY)) {
		/* Ask; a driver without zero-copy refuses the bind: copy, and say why. */
		rc = xsk_build(s, ring, XDP_ZEROCOPY);
		if (rc == -EOPNOTSUPP || rc == -EPROTONOSUPPORT) {
			s->zerocopy_error = rc;
			rc = xsk_build(s, ring, XDP_COPY);
		}
	} else if (x->owner_fd < 0) {
		rc = xsk_build(s, ring, XDP_COPY);
	} else {
		rc = xsk_build(s, ring, 0);
		s->shared_umem = 1;
		if (!rc && (o.flags & ASYNCPOOL_XSK_ZEROCOPY) &&
		    xsk_mode(s->fd) != ASYNCPOOL_XSK_MODE_ZEROCOPY)
			s->zerocopy_error = -EOPNOTSUPP;   /* the owner's mode, copy */
	}
	if (rc)
		goto fail;
	s->mode = xsk_mode(s->fd);
	s->need_wakeup = 1;
	rc = xsk_attach_map(s, &o);
	if (rc) {
		xsk_unmap(s);
		close(s->fd);
		goto fail;
	}
	if (x->owner_fd < 0) {
		x->owner_fd = s->fd;
		x->owner = s;
	}
	x->sockets[slot] = s;
	x->nsockets++;
	if (x->sum)
		atomic_fetch_add_explicit(&x->sum->sockets, 1, memory_order_relaxed);
	pthread_mutex_unlock(&x->lock);
	/* The fill ring full from the start, as far as the pool has frames. */
	(void)asyncpool_xsk_refill(s, ring);
	*out = s;
	return 0;
fail:
	pthread_mutex_unlock(&x->lock);
	free(s);
	return rc;
}

AP_EXPORT int asyncpool_xsk_fd(const struct asyncpool_xsk *s)
{
	return s ? s->fd : -EINVAL;
}

/* Frames this socket holds back to the pool: after its socket is gone. */
static void xsk_return_frames(struct asyncpool_xsk *s)
{
	struct asyncpool_xdp *x = s->x;
	uint64_t batch[64];
	unsigned int n = 0;

	for (uint32_t i = 0; i < x->count; i++) {
		uint32_t p = place_get(x, i);

		if (p && AP_XP_SLOT(p) == s->slot) {
			place_set(x, i, 0);
			batch[n++] = x->tok[i];
			if (n == 64) {
				(void)asyncpool_release_tokens(x->pool, batch, n);
				n = 0;
			}
		}
	}
	if (n)
		(void)asyncpool_release_tokens(x->pool, batch, n);
}

AP_EXPORT int asyncpool_xsk_close(struct asyncpool_xsk *s)
{
	struct asyncpool_xdp *x;

	if (!s)
		return -EINVAL;
	x = s->x;
	pthread_mutex_lock(&x->lock);
	/* The UMEM was registered on this socket: the others are bound to it. */
	if (x->owner == s && x->nsockets > 1) {
		pthread_mutex_unlock(&x->lock);
		return -EBUSY;
	}
	x->sockets[s->slot] = NULL;
	x->nsockets--;
	if (x->owner == s) {
		x->owner = NULL;
		x->owner_fd = -1;
	}
	pthread_mutex_unlock(&x->lock);
	if (s->map_fd >= 0) {
		uint32_t key = s->queue;

		(void)bpf_map_delete_elem(s->map_fd, &key);
		close(s->map_fd);
	}
	/* The kernel lets go of the rings when the socket is released. */
	xsk_unmap(s);
	close(s->fd);
	xsk_return_frames(s);
	if (x->sum) {
		/* No other thread may use s now: both halves at once. */
		for (unsigned int i = 0; i < AP_XS_PLACES; i++)
			sum_put(s, i, 0);
		atomic_fetch_sub_explicit(&x->sum->sockets, 1, memory_order_relaxed);
	}
	free(s);
	return 0;
}

/* ---------------------------------------------------------------- fill and rx */

/*
 * A received frame's lease is the pool's lease of its frame, with the
 * pool's release callback: learnt from the first lease of the pool,
 * before any frame goes into a fill ring.
 */
static bool learn_release(struct asyncpool_xdp *x)
{
	struct asyncpool_lease l;
	bool ok;

	if (AP_LIKELY(atomic_load_explicit(&x->rel_known, memory_order_acquire)))
		return true;
	pthread_mutex_lock(&x->lock);
	if (!x->rel_fn && asyncpool_acquire(x->pool, &l) == 0) {
		x->rel_ctx = l.release.ctx;
		x->rel_fn = l.release.fn;
		asyncpool_lease_release(&l);
		atomic_store_explicit(&x->rel_known, true, memory_order_release);
	}
	ok = x->rel_fn != NULL;
	pthread_mutex_unlock(&x->lock);
	return ok;
}

/* Under rx_lock: up to max frames of the pool into the fill ring. */
static int refill_locked(struct asyncpool_xsk *s, unsigned int max)
{
	struct asyncpool_xdp *x = s->x;
	uint64_t toks[XSK_BATCH_MAX];
	uint64_t *ring = s->fill.desc;
	unsigned int done = 0;

	if (!learn_release(x))
		max = 0;
	while (done < max) {
		uint32_t room = ring_prod_free(&s->fill, s->fill_batch), n, at;
		/*
		 * No more frames on the receive side (fill ring, kernel, rx
		 * ring) than the rx ring holds: the kernel can place a frame
		 * only where the rx ring has room, so a frame beyond that
		 * would only wait in the fill ring.  After a burst the ring
		 * is then refilled as its frames are received, from what
		 * the caller released, not with a ring's worth from the
		 * freelist while the burst's own frames pile up behind.
		 */
		uint64_t held = AP_XCNT(s->in_fill);
		uint32_t budget = held < s->rx.size ? s->rx.size - (uint32_t)held : 0;
		int rc;

		if (budget < room)
			room = budget;
		n = max - done;
		if (n > room)
			n = room;
		if (n > s->fill_batch)
			n = s->fill_batch;
		/*
		 * Whole batches only (unless the caller asked for less): a
		 * ring with less room than a batch is far from starving, and
		 * a batch costs the pool what a frame does.
		 */
		if (!n || (n < s->fill_batch && n < max - done))
			break;
		/* All or nothing: halve until the pool has them. */
		while ((rc = asyncpool_acquire_tokens(x->pool, toks, n)) == -ENOBUFS && n > 1)
			n /= 2;
		if (rc == -ENOBUFS) {
			AP_XCNT_ADD(s->fill_empty, 1);
			break;
		}
		if (rc < 0)
			return done ? (int)done : rc;
		AP_XDP_KILL_AT(AP_XTP_FILL_LEASED);
		at = s->fill.cached_prod;
		{
			const uint32_t shift = x->geom.frame_shift, mask = s->fill.mask;
			const uint32_t mine = AP_XP_MAKE(AP_XP_FILL, s->slot);
			uint64_t *const tok = x->tok;
			_Atomic uint32_t *const place = x->place;

			for (uint32_t i = 0; i < n; i++) {
				uint32_t idx = (uint32_t)toks[i];

				tok[idx] = toks[i];
				atomic_store_explicit(&place[idx], mine, memory_order_relaxed);
				ring[(at + i) & mask] = (uint64_t)idx << shift;
			}
		}
		AP_XDP_KILL_AT(AP_XTP_FILL_WRITTEN);
		ring_prod_submit(&s->fill, n);
		AP_XCNT_ADD(s->in_fill, n);
		done += n;
	}
	return (int)done;
}

AP_EXPORT int asyncpool_xsk_refill(struct asyncpool_xsk *s, unsigned int max)
{
	int rc;

	if (!s)
		return -EINVAL;
	ap_xlock(&s->rx_lock);
	rc = refill_locked(s, max);
	if (rc > 0)
		sum_rx(s);
	ap_xunlock(&s->rx_lock);
	return rc;
}

/* Kick the kernel: rx (fill ring wants a wakeup) or tx. */
static void xsk_kick(struct asyncpool_xsk *s, bool tx)
{
	AP_XCNT_ADD(s->wakeups, 1);
	if (tx)
		(void)sendto(s->fd, NULL, 0, MSG_DONTWAIT, NULL, 0);
	else
		(void)recvfrom(s->fd, NULL, 0, MSG_DONTWAIT, NULL, NULL);
}

/*
 * Up to n descriptors of the rx ring, read in place: the i-th at
 * (*ring)[(*base + i) & *mask], until rx_release() gives them back to
 * the kernel (which does not write them before).  No copy.
 */
static unsigned int rx_peek(struct asyncpool_xsk *s, struct xdp_desc *fake, unsigned int n,
			    const struct xdp_desc **ring, uint32_t *base, uint32_t *mask)
{
#ifdef ASYNCPOOL_TEST_HOOKS
	if (ap_xdp_test_rx) {
		*ring = fake;
		*base = 0;
		*mask = UINT32_MAX;
		return ap_xdp_test_rx(s, fake, n);
	}
#else
	(void)fake;
#endif
	*ring = s->rx.desc;
	*base = s->rx.cached_cons;
	*mask = s->rx.mask;
	return ring_cons_peek(&s->rx, n);
}

static void rx_release(struct asyncpool_xsk *s, unsigned int k)
{
#ifdef ASYNCPOOL_TEST_HOOKS
	if (ap_xdp_test_rx)
		return;
#endif
	ring_cons_release(&s->rx, k);
}

AP_EXPORT int asyncpool_xsk_recv(struct asyncpool_xsk *s, struct asyncpool_lease *leases,
				 unsigned int n)
{
#ifdef ASYNCPOOL_TEST_HOOKS
	struct xdp_desc fake[XSK_BATCH_MAX];
#else
	struct xdp_desc *fake = NULL;
#endif
	const struct xdp_desc *ring;
	uint32_t base, mask;
	struct asyncpool_xdp *x;
	unsigned int got = 0, k, taken = 0;
	uint64_t bad[XSK_BATCH_MAX];
	unsigned int nbad = 0;

	if (!s || (!leases && n))
		return -EINVAL;
	x = s->x;
	if (n > XSK_BATCH_MAX)
		n = XSK_BATCH_MAX;
	ap_xlock(&s->rx_lock);
	k = rx_peek(s, fake, n, &ring, &base, &mask);
	if (k) {
		/*
		 * In locals: a store to leases[] may alias x's fields, and
		 * reload them.  rel_fn is set: a refill puts a frame in the
		 * fill ring only once it is known (learn_release()), and a
		 * frame is taken here only if this socket's refill put it.
		 */
		const struct ap_xgeom g = x->geom;
		const uint32_t mine = AP_XP_MAKE(AP_XP_FILL, s->slot);
		struct asyncpool_region *const region = x->region;
		void (*const rel_fn)(void *ctx, uint32_t buffer_index) = x->rel_fn;
		void *const rel_ctx = x->rel_ctx;
		const uint64_t *const tok = x->tok;
		_Atomic uint32_t *const place = x->place;
		struct asyncpool_lease *l = leases;
		const uint32_t end = base + k;

		AP_XDP_KILL_AT(AP_XTP_RX_TAKEN);
		for (uint32_t at = base; at != end; at++) {
			const struct xdp_desc *d = &ring[at & mask];
			const uint64_t a = d->addr;
			const uint32_t len = d->len;
			uint32_t idx, off;
			uint64_t t;

			/* Not a frame we gave: never handed out (refused, below). */
			if (!frame_of(g, a, &idx, &off) ||
			    atomic_load_explicit(&place[idx], memory_order_relaxed) != mine)
				continue;
			atomic_store_explicit(&place[idx], 0, memory_order_relaxed);
			t = tok[idx];
			if ((uint64_t)off + len > g.frame_size) {
				bad[nbad++] = t;        /* ours, a bad length: back to the pool */
				continue;
			}
			/* Field by field: a compound literal goes through the stack. */
			l->span.region = region;
			l->span.offset = (size_t)a;
			l->span.length = len;
			l->release.fn = rel_fn;
			l->release.ctx = rel_ctx;
#if AP_TOKEN_IDX_AT == 0
			/* Index and generation in one store: the token (lease.h). */
			memcpy(&l->buffer_index, &t, sizeof(t));
#else
			l->buffer_index = idx;
			l->generation = AP_TOKEN_GEN(t);
#endif
			l++;
			AP_XDP_KILL_AT(AP_XTP_RX_LEASED);
		}
		got = (unsigned int)(l - leases);
		taken = got + nbad;
		if (k != got)
			AP_XCNT_ADD(s->refused_rx, k - got);
		rx_release(s, k);
		AP_XCNT_ADD(s->received, got);
		AP_XCNT_ADD(s->in_fill, -(uint64_t)taken);
	}
	if (nbad)
		(void)asyncpool_release_tokens(x->pool, bad, nbad);
	/* A batch that moved frames is published; an empty poll is not. */
	if (refill_locked(s, s->fill.size) > 0 || k)
		sum_rx(s);
	if (!got && ring_needs_wakeup(&s->fill))
		xsk_kick(s, false);
	ap_xunlock(&s->rx_lock);
	return (int)got;
}

/* ---------------------------------------------------------------- tx and completion */

static unsigned int comp_peek(struct asyncpool_xsk *s, uint64_t *a, unsigned int n)
{
	uint64_t *ring = s->comp.desc;
	uint32_t k;

#ifdef ASYNCPOOL_TEST_HOOKS
	if (ap_xdp_test_comp)
		return ap_xdp_test_comp(s, a, n);
#endif
	k = ring_cons_peek(&s->comp, n);
	for (uint32_t i = 0; i < k; i++)
		a[i] = ring[(s->comp.cached_cons + i) & s->comp.mask];
	ring_cons_release(&s->comp, k);
	return k;
}

/* Under tx_lock: the completion ring's frames back to the pool; kick while any are in flight. */
static int complete_locked(struct asyncpool_xsk *s, bool kick)
{
	struct asyncpool_xdp *x = s->x;
	uint64_t a[XSK_BATCH_MAX], toks[XSK_BATCH_MAX];
	unsigned int total = 0;

	for (unsigned int round = 0; round <= s->comp.size / XSK_BATCH_MAX; round++) {
		unsigned int k = comp_peek(s, a, XSK_BATCH_MAX), n = 0;

		if (k)
			AP_XDP_KILL_AT(AP_XTP_COMP_TAKEN);
		for (unsigned int i = 0; i < k; i++) {
			uint32_t idx, off;

			if (!frame_of(x->geom, a[i], &idx, &off) ||
			    place_get(x, idx) != AP_XP_MAKE(AP_XP_TX, s->slot)) {
				AP_XCNT_ADD(s->refused_comp, 1);
				continue;
			}
			place_set(x, idx, 0);
			toks[n++] = x->tok[idx];
		}
		if (n) {
			(void)asyncpool_release_tokens(x->pool, toks, n);
			AP_XDP_KILL_AT(AP_XTP_COMP_RELEASED);
		}
		AP_XCNT_ADD(s->in_tx, -(uint64_t)n);
		AP_XCNT_ADD(s->completed, n);
		total += n;
		if (k < XSK_BATCH_MAX)
			break;
	}
	/* Copy mode sends a few frames per kick: kick while any wait. */
	if (kick && AP_XCNT(s->in_tx) && (ring_needs_wakeup(&s->tx) || s->mode == ASYNCPOOL_XSK_MODE_COPY))
		xsk_kick(s, true);
	/* A send publishes after its own kick. */
	if (kick && (total || AP_XCNT(s->in_tx)))
		sum_tx(s);
	return (int)total;
}

AP_EXPORT int asyncpool_xsk_complete(struct asyncpool_xsk *s)
{
	int rc;

	if (!s)
		return -EINVAL;
	ap_xlock(&s->tx_lock);
	rc = complete_locked(s, true);
	ap_xunlock(&s->tx_lock);
	return rc;
}

/* A lease this socket may send: a window of one frame of this UMEM, whole, not in a ring. */
static bool lease_sendable(const struct asyncpool_xdp *x, const struct asyncpool_lease *l)
{
	uint32_t idx, off;

	return l->span.region == x->region && l->generation && l->span.length &&
	       l->buffer_index < x->count && l->span.offset <= x->geom.umem_len &&
	       frame_of(x->geom, l->span.offset, &idx, &off) && idx == l->buffer_index &&
	       (uint64_t)off + l->span.length <= x->geom.frame_size && !place_get(x, idx);
}

AP_EXPORT int asyncpool_xsk_send(struct asyncpool_xsk *s, struct asyncpool_lease *leases,
				 unsigned int n)
{
	struct asyncpool_xdp *x;
	struct xdp_desc *ring;
	uint32_t room, at;
	unsigned int i;

	if (!s || (!leases && n))
		return -EINVAL;
	x = s->x;
	/* Every lease checked before anything changes; a frame twice is refused too. */
	for (i = 0; i < n; i++) {
		uint32_t free_place = 0;

		if (!lease_sendable(x, &leases[i]) ||
		    !atomic_compare_exchange_strong_explicit(&x->place[leases[i].buffer_index],
							     &free_place,
							     AP_XP_MAKE(AP_XP_CHECKED, s->slot),
							     memory_order_relaxed,
							     memory_order_relaxed))
			goto refuse;
	}
	if (n)
		AP_XDP_KILL_AT(AP_XTP_TX_CHECKED);
	ap_xlock(&s->tx_lock);
	(void)complete_locked(s, false);      /* the send kicks */
	room = ring_prod_free(&s->tx, n);
	if (room < n) {
		for (i = room; i < n; i++)
			place_set(x, leases[i].buffer_index, 0);
		n = room;
	}
	ring = s->tx.desc;
	at = s->tx.cached_prod;
	for (i = 0; i < n; i++) {
		struct xdp_desc *d = &ring[(at + i) & s->tx.mask];
		uint32_t idx = leases[i].buffer_index;

		d->addr = leases[i].span.offset;
		d->len = (uint32_t)leases[i].span.length;
		d->options = 0;
		x->tok[idx] = ((uint64_t)leases[i].generation << 32) | idx;
		place_set(x, idx, AP_XP_MAKE(AP_XP_TX, s->slot));
		/* Handed over: the caller's lease is spent (a release of it does nothing). */
		memset(&leases[i], 0, sizeof(leases[i]));
	}
	if (n)
		AP_XDP_KILL_AT(AP_XTP_TX_WRITTEN);
	ring_prod_submit(&s->tx, n);
	AP_XCNT_ADD(s->in_tx, n);
	AP_XCNT_ADD(s->sent, n);
	if (n)
		AP_XDP_KILL_AT(AP_XTP_TX_SUBMITTED);
	if (n && (ring_needs_wakeup(&s->tx) || s->mode == ASYNCPOOL_XSK_MODE_COPY))
		xsk_kick(s, true);
	sum_tx(s);
	ap_xunlock(&s->tx_lock);
	return (int)n;
refuse:
	while (i--)
		place_set(x, leases[i].buffer_index, 0);
	return -EINVAL;
}

AP_EXPORT int asyncpool_xsk_stats(const struct asyncpool_xsk *s, struct asyncpool_xsk_stats *out)
{
	struct asyncpool_xsk_stats st;
	size_t sz;

	if (!s || !out || out->size < XSK_STATS_V1 || out->size > AP_STRUCT_SIZE_MAX)
		return -EINVAL;
	sz = out->size;
	memset(&st, 0, sizeof(st));
	st.size = sz;
	st.mode = s->mode;
	st.zerocopy_error = s->zerocopy_error;
	st.ifindex = s->ifindex;
	st.queue = s->queue;
	st.shared_umem = s->shared_umem;
	st.need_wakeup = s->need_wakeup;
	st.received = AP_XCNT(s->received);
	st.sent = AP_XCNT(s->sent);
	st.completed = AP_XCNT(s->completed);
	st.refused = AP_XCNT(s->refused_rx) + AP_XCNT(s->refused_comp);
	st.fill_empty = AP_XCNT(s->fill_empty);
	st.wakeups = AP_XCNT(s->wakeups);
	st.in_fill = (uint32_t)AP_XCNT(s->in_fill);
	st.in_tx = (uint32_t)AP_XCNT(s->in_tx);
	memset(out, 0, sz);
	memcpy(out, &st, XSK_STATS_V1);
	return 0;
}

/* Entries of a ring between the two indices, as read now: at most its size. */
static uint32_t ring_between(const struct ap_xring *r)
{
	uint32_t n = atomic_load_explicit(r->prod, memory_order_acquire) -
		     atomic_load_explicit(r->cons, memory_order_acquire);

	return n > r->size ? r->size : n;
}

static uint32_t take_at_most(uint32_t *from, uint32_t n)
{
	if (n > *from)
		n = *from;
	*from -= n;
	return n;
}

AP_EXPORT int asyncpool_xdp_places(const struct asyncpool_xdp *x, struct asyncpool_xdp_places *out)
{
	struct asyncpool_xdp_places pl;
	uint32_t fill_all = 0, tx_all = 0, rest;
	uint32_t in_fill_ring = 0, in_rx_ring = 0, in_tx_ring = 0, in_comp_ring = 0;
	size_t sz, avail;

	if (!x || !out || out->size < XDP_PLACES_V1 || out->size > AP_STRUCT_SIZE_MAX)
		return -EINVAL;
	sz = out->size;
	memset(&pl, 0, sizeof(pl));
	pl.size = sz;
	pl.capacity = x->count;
	/* Where place[] says: in a socket's fill or rx side, tx side, or a send's. */
	for (uint32_t i = 0; i < x->count; i++) {
		uint32_t p = place_get(x, i);

		if (AP_XP_KIND(p) == AP_XP_FILL)
			fill_all++;
		else if (AP_XP_KIND(p) == AP_XP_TX)
			tx_all++;
		else if (AP_XP_KIND(p) == AP_XP_CHECKED)
			pl.moving++;
	}
	/* Which ring, from the indices the kernel and we publish. */
	pthread_mutex_lock((pthread_mutex_t *)&x->lock);
	for (unsigned int i = 0; i < AP_XSK_MAX; i++) {
		const struct asyncpool_xsk *s = x->sockets[i];

		if (!s)
			continue;
		pl.sockets++;
		in_fill_ring += ring_between(&s->fill);
		in_rx_ring += ring_between(&s->rx);
		in_tx_ring += ring_between(&s->tx);
		in_comp_ring += ring_between(&s->comp);
	}
	pthread_mutex_unlock((pthread_mutex_t *)&x->lock);
	/* A snapshot while frames move: each part bounded by what place[] counted. */
	rest = fill_all;
	pl.fill = take_at_most(&rest, in_fill_ring);
	pl.rx = take_at_most(&rest, in_rx_ring);
	pl.kernel_rx = rest;
	rest = tx_all;
	pl.tx = take_at_most(&rest, in_tx_ring);
	pl.completion = take_at_most(&rest, in_comp_ring);
	pl.kernel_tx = rest;
	avail = asyncpool_available(x->pool);
	rest = x->count - fill_all - tx_all - pl.moving;
	pl.free = take_at_most(&rest, avail > UINT32_MAX ? UINT32_MAX : (uint32_t)avail);
	pl.leased = rest;
	memset(out, 0, sz);
	memcpy(out, &pl, XDP_PLACES_V1);
	return 0;
}

#else /* !HAVE_XDP: built without libxdp and libbpf */

AP_EXPORT int asyncpool_xdp_create(struct asyncpool *pool, const struct asyncpool_xdp_options *opts,
				   struct asyncpool_xdp **out)
{
	if (out)
		*out = NULL;
	return -EOPNOTSUPP;
}

AP_EXPORT int asyncpool_xdp_destroy(struct asyncpool_xdp *x)
{
	return x ? -EOPNOTSUPP : -EINVAL;
}

AP_EXPORT int asyncpool_xsk_open(struct asyncpool_xdp *x, const struct asyncpool_xsk_options *opts,
				 struct asyncpool_xsk **out)
{
	if (out)
		*out = NULL;
	return -EOPNOTSUPP;
}

AP_EXPORT int asyncpool_xsk_close(struct asyncpool_xsk *s) { return -EOPNOTSUPP; }
AP_EXPORT int asyncpool_xsk_fd(const struct asyncpool_xsk *s) { return -EOPNOTSUPP; }
AP_EXPORT int asyncpool_xsk_refill(struct asyncpool_xsk *s, unsigned int max) { return -EOPNOTSUPP; }
AP_EXPORT int asyncpool_xsk_recv(struct asyncpool_xsk *s, struct asyncpool_lease *leases,
				 unsigned int n) { return -EOPNOTSUPP; }
AP_EXPORT int asyncpool_xsk_send(struct asyncpool_xsk *s, struct asyncpool_lease *leases,
				 unsigned int n) { return -EOPNOTSUPP; }
AP_EXPORT int asyncpool_xsk_complete(struct asyncpool_xsk *s) { return -EOPNOTSUPP; }
AP_EXPORT int asyncpool_xsk_stats(const struct asyncpool_xsk *s, struct asyncpool_xsk_stats *out)
{
	return -EOPNOTSUPP;
}

AP_EXPORT int asyncpool_xdp_places(const struct asyncpool_xdp *x, struct asyncpool_xdp_places *out)
{
	return -EOPNOTSUPP;
}

#endif /* HAVE_XDP */
