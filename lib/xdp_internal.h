/* SPDX-License-Identifier: MIT */
/*
 * The AF_XDP backend's objects (lib/xdp.c): a UMEM over a pool's
 * region, its sockets, their four rings, and where each frame is.
 */
#ifndef ASYNCPOOL_XDP_INTERNAL_H
#define ASYNCPOOL_XDP_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <linux/if_xdp.h>

/* At most this many sockets on one UMEM. */
#define AP_XSK_MAX 64

/* One of the four rings, as mapped (Documentation/networking/af_xdp.rst). */
struct ap_xring {
	_Atomic uint32_t *prod;
	_Atomic uint32_t *cons;
	_Atomic uint32_t *flags;
	void     *desc;             /* uint64_t addresses (fill, completion) or struct xdp_desc */
	uint32_t  size, mask;
	uint32_t  cached_prod, cached_cons;
	void     *map;
	size_t    map_len;
};

/*
 * Where a frame is, beside the pool: 0 (the pool's or a caller's), or
 * a kind and the slot of the socket that holds it.
 */
#define AP_XP_FILL    1u            /* in the fill or rx ring */
#define AP_XP_TX      2u            /* in the tx or completion ring */
#define AP_XP_CHECKED 3u            /* a send's, between its check and the ring */
#define AP_XP_MAKE(kind, slot) (((uint32_t)(kind) << 16) | (uint32_t)(slot))
#define AP_XP_KIND(p)  ((p) >> 16)
#define AP_XP_SLOT(p)  ((p) & 0xffffu)

/* A counter with one writer (under a socket's lock), read by anyone. */
#define AP_XCNT(c) atomic_load_explicit(&(c), memory_order_relaxed)
#define AP_XCNT_ADD(c, n) \
	atomic_store_explicit(&(c), AP_XCNT(c) + (uint64_t)(n), memory_order_relaxed)

/*
 * A ring's lock: held for a batch of ring operations, never across a
 * wait; uncontended it is one exchange.  A waiter yields after a while.
 */
static inline void ap_xlock(_Atomic uint32_t *l)
{
	for (unsigned int spins = 0;
	     atomic_exchange_explicit(l, 1, memory_order_acquire); spins++) {
		while (atomic_load_explicit(l, memory_order_relaxed)) {
			if (++spins >= 256) {
				sched_yield();
				spins = 0;
			} else {
#if defined(__x86_64__) || defined(__i386__)
				__builtin_ia32_pause();
#endif
			}
		}
	}
}

static inline void ap_xunlock(_Atomic uint32_t *l)
{
	atomic_store_explicit(l, 0, memory_order_release);
}

struct asyncpool_xsk;
struct ap_xdp_sum;

/* A UMEM's geometry, passed by value: a store through a lease cannot alias it. */
struct ap_xgeom {
	uint64_t umem_len;
	uint32_t frame_size, frame_shift;
};

struct asyncpool_xdp {
	struct asyncpool        *pool;
	struct asyncpool_region *region;    /* a reference */
	char     *base;                     /* the UMEM: the region's memory */
	struct ap_xgeom geom;               /* the UMEM's length, its frames' size */
	uint32_t  count, headroom;
	uint64_t *tok;                      /* [count]: the token of a frame a socket holds */
	_Atomic uint32_t *place;            /* [count]: AP_XP_MAKE(), or 0 */
	/* A pool lease's release callback, for received frames' leases. */
	void    (*rel_fn)(void *ctx, uint32_t buffer_index);
	void     *rel_ctx;
	_Atomic bool rel_known;             /* rel_fn and rel_ctx are set */
	/* The summary of where the frames of this process's sockets are, in
	 * its attachment record (since 1.12, pool_layout.h), or NULL. */
	struct ap_xdp_sum *sum;
	pthread_mutex_t lock;               /* the sockets, the owner, rel_fn */
	int       owner_fd;                 /* the socket the UMEM is registered on */
	struct asyncpool_xsk *owner;
	unsigned int nsockets;
	struct asyncpool_xsk *sockets[AP_XSK_MAX];
};

struct asyncpool_xsk {
	struct asyncpool_xdp *x;
	int       fd, map_fd;
	uint32_t  slot, ifindex, queue, fill_batch;
	uint32_t  mode, shared_umem, need_wakeup;
	int32_t   zerocopy_error;
	_Atomic uint32_t rx_lock;           /* fill and rx: ap_xlock() */
	_Atomic uint32_t tx_lock;           /* tx and completion */
	struct ap_xring fill, rx;
	struct ap_xring tx, comp;
	_Atomic uint64_t received, refused_rx, fill_empty, in_fill;      /* rx_lock */
	_Atomic uint64_t sent, completed, refused_comp, in_tx, wakeups;  /* tx_lock */
	/* What this socket last added to x->sum->place[]: [0, 3) under
	 * rx_lock, [3, 6) under tx_lock (AP_XS_*). */
	uint32_t pub[6];
};

/*
 * Kill points of the AF_XDP steps (since 1.11): where a process of a
 * shared pool may die between taking a frame from the pool and handing
 * it to a ring, between taking it off a ring and handing it on.
 * tests/test-xdp-crash kills a child at the k-th pass of each and gets
 * every frame back; it reads lib/xdp.c and fails for a point it does
 * not know or no longer finds (HACKING.md, "Adding a kill point").
 * Apart from freelist.h's: they need root, a netns and XDP to reach.
 */
enum ap_xdp_point {
	AP_XTP_FILL_LEASED,     /* a refill leased its batch, before any descriptor */
	AP_XTP_FILL_WRITTEN,    /* a refill wrote its descriptors, before it submits them */
	AP_XTP_RX_TAKEN,        /* a receive read descriptors in the rx ring, before its leases */
	AP_XTP_RX_LEASED,       /* a receive made one lease of a frame, before the next */
	AP_XTP_TX_CHECKED,      /* a send marked its leases CHECKED, before the tx ring */
	AP_XTP_TX_WRITTEN,      /* a send wrote its descriptors, before it submits them */
	AP_XTP_TX_SUBMITTED,    /* a send submitted its descriptors, before its kick */
	AP_XTP_COMP_TAKEN,      /* a reap took addresses off the completion ring, before the pool */
	AP_XTP_COMP_RELEASED,   /* a reap gave its frames back to the pool, before its counters */
	AP_XTP_COUNT
};

#ifdef ASYNCPOOL_TEST_HOOKS
extern void (*ap_xdp_test_hook_point)(enum ap_xdp_point p);
#define AP_XDP_KILL_AT(p) do { if (ap_xdp_test_hook_point) ap_xdp_test_hook_point(p); } while (0)
#else
#define AP_XDP_KILL_AT(p) do { } while (0)
#endif

#ifdef ASYNCPOOL_TEST_HOOKS
/* The kernel's side faked: descriptors in place of the rx or completion ring's. */
extern unsigned int (*ap_xdp_test_rx)(struct asyncpool_xsk *s, struct xdp_desc *d, unsigned int n);
extern unsigned int (*ap_xdp_test_comp)(struct asyncpool_xsk *s, uint64_t *addr, unsigned int n);
#endif

#endif /* ASYNCPOOL_XDP_INTERNAL_H */
