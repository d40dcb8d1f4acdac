/* SPDX-License-Identifier: MIT */
/*
 * The AF_XDP backend (since 1.10): a pool's region registered as an
 * AF_XDP UMEM, one frame per buffer, and sockets on it whose rings the
 * pool drives.  The fill ring is refilled with frames leased from the
 * pool; a received descriptor is handed out as a lease of its frame; a
 * lease sent is released when the completion ring returns its frame.
 * asyncpool-xdp(7) has the rings, the modes and the crash rules.
 *
 * Built only with libxdp and libbpf (./configure --without-xdp builds
 * without them): otherwise every call returns -EOPNOTSUPP.
 */
#ifndef ASYNCPOOL_XDP_H
#define ASYNCPOOL_XDP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct asyncpool;
struct asyncpool_lease;
struct asyncpool_xdp;           /* a pool's region as a UMEM */
struct asyncpool_xsk;           /* an AF_XDP socket on it */

/*
 * Options for asyncpool_xdp_create().  Extensible: zero the whole
 * struct, set size, then the fields you need; NULL for the defaults.
 */
struct asyncpool_xdp_options {
	size_t   size;              /* sizeof(struct asyncpool_xdp_options) */
	uint32_t headroom;          /* the UMEM's frame headroom, bytes; 0: none */
	uint32_t flags;             /* must be zero */
	uint64_t reserved[2];       /* must be zero */
};

int asyncpool_xdp_create(struct asyncpool *pool, const struct asyncpool_xdp_options *opts,
			 struct asyncpool_xdp **out);
int asyncpool_xdp_destroy(struct asyncpool_xdp *x);

/* Flags of struct asyncpool_xsk_options. */
#define ASYNCPOOL_XSK_ZEROCOPY (1u << 0) /* ask zero-copy; copy where it is refused */
#define ASYNCPOOL_XSK_XSKMAP   (1u << 1) /* xskmap_fd is the caller's XSKMAP: no program loaded */
#define ASYNCPOOL_XSK_SKB      (1u << 2) /* the default program in generic (SKB) mode */

/* The modes reported by asyncpool_xsk_stats(). */
#define ASYNCPOOL_XSK_MODE_COPY     1u
#define ASYNCPOOL_XSK_MODE_ZEROCOPY 2u

/*
 * Options for asyncpool_xsk_open().  Extensible, as above.  Without
 * ASYNCPOOL_XSK_XSKMAP, libxdp's default program is attached to the
 * interface (or found there) and the socket put in its map.
 */
struct asyncpool_xsk_options {
	size_t      size;           /* sizeof(struct asyncpool_xsk_options) */
	const char *ifname;         /* the interface */
	uint32_t    queue;          /* its queue */
	uint32_t    flags;          /* ASYNCPOOL_XSK_* */
	int         xskmap_fd;      /* with ASYNCPOOL_XSK_XSKMAP: the map; key = queue */
	uint32_t    ring_size;      /* entries of each ring, a power of two; 0: 2048 */
	uint32_t    fill_batch;     /* frames per refill; 0: 64 */
	uint32_t    reserved;       /* must be zero */
};

int asyncpool_xsk_open(struct asyncpool_xdp *x, const struct asyncpool_xsk_options *opts,
		       struct asyncpool_xsk **out);
int asyncpool_xsk_close(struct asyncpool_xsk *s);
int asyncpool_xsk_fd(const struct asyncpool_xsk *s);

/* Frames from the pool into the fill ring: how many, or -errno. */
int asyncpool_xsk_refill(struct asyncpool_xsk *s, unsigned int max);
/* Received frames as leases: how many, or -errno. */
int asyncpool_xsk_recv(struct asyncpool_xsk *s, struct asyncpool_lease *leases, unsigned int n);
/* Leases of the UMEM's frames onto the tx ring: how many were taken. */
int asyncpool_xsk_send(struct asyncpool_xsk *s, struct asyncpool_lease *leases, unsigned int n);
/* Completed frames back to the pool: how many, or -errno. */
int asyncpool_xsk_complete(struct asyncpool_xsk *s);

/* A socket's mode and counters.  Set size before the call. */
struct asyncpool_xsk_stats {
	size_t   size;              /* sizeof(struct asyncpool_xsk_stats) */
	uint32_t mode;              /* ASYNCPOOL_XSK_MODE_* */
	int32_t  zerocopy_error;    /* why zero-copy was refused (-errno); 0 */
	uint32_t ifindex;
	uint32_t queue;
	uint32_t shared_umem;       /* 1: bound to the UMEM of another socket */
	uint32_t need_wakeup;       /* 1: the kernel asks for wakeups */
	uint64_t received;          /* descriptors handed out as leases */
	uint64_t sent;              /* leases put on the tx ring */
	uint64_t completed;         /* frames the completion ring gave back */
	uint64_t refused;           /* descriptors refused (address, length, place) */
	uint64_t fill_empty;        /* refills that found the pool empty */
	uint64_t wakeups;           /* kicks of the kernel */
	uint32_t in_fill;           /* frames in the fill or rx ring */
	uint32_t in_tx;             /* frames in the tx or completion ring */
};
int asyncpool_xsk_stats(const struct asyncpool_xsk *s, struct asyncpool_xsk_stats *out);

/*
 * Where the UMEM's frames are, as this process sees them (since 1.11):
 * a snapshot of the rings of its sockets on x and of the pool.  Set
 * size before the call.  The parts add up to capacity.
 */
struct asyncpool_xdp_places {
	size_t   size;              /* sizeof(struct asyncpool_xdp_places) */
	uint32_t capacity;          /* the UMEM's frames */
	uint32_t fill;              /* in fill rings, not yet taken by the kernel */
	uint32_t kernel_rx;         /* taken by the kernel, not yet in an rx ring */
	uint32_t rx;                /* in rx rings, not yet received */
	uint32_t tx;                /* in tx rings, not yet taken by the kernel */
	uint32_t kernel_tx;         /* taken by the kernel for a send, not yet completed */
	uint32_t completion;        /* in completion rings, not yet reaped */
	uint32_t moving;            /* in a send between its checks and the tx ring */
	uint32_t leased;            /* leased, in no ring here: callers' (or other processes') */
	uint32_t free;              /* in the pool: asyncpool_available() */
	uint32_t sockets;           /* this process's sockets on x */
	uint32_t reserved;          /* zero */
};
int asyncpool_xdp_places(const struct asyncpool_xdp *x, struct asyncpool_xdp_places *out);

#ifdef __cplusplus
}
#endif

#endif /* ASYNCPOOL_XDP_H */
