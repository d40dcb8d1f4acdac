/* SPDX-License-Identifier: MIT */
/*
 * A region: a slab registered with a proactor for one kind of access.
 * Ref-counted; it holds its slab and unregisters on its last unref.
 */
#ifndef ASYNCPOOL_REGION_H
#define ASYNCPOOL_REGION_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct io_uring_cqe;            /* from <liburing.h>; not included here */
struct io_uring_sqe;
struct asyncpool_region;
struct asyncpool_slab;
struct asyncpool_proactor;
struct asyncpool_lease;
struct asyncpool;
struct asyncpool_recv_ring;

/* Flags of struct asyncpool_region_stats. */
#define ASYNCPOOL_REGION_CLONED      (1u << 0) /* fixed buffers cloned, pinned once */
#define ASYNCPOOL_REGION_CHECKED     (1u << 1) /* completions checked against the ring head */
#define ASYNCPOOL_REGION_INCREMENTAL (1u << 2) /* incremental consumption */

/*
 * State of a region, for asyncpool_region_stats().  Extensible: set
 * size to sizeof(struct asyncpool_region_stats) before the call.
 */
struct asyncpool_region_stats {
	size_t   size;              /* sizeof(struct asyncpool_region_stats) */
	uint32_t flags;             /* ASYNCPOOL_REGION_* */
	uint32_t buffer_count;
	uint32_t kernel_held;       /* recv: buffers the kernel holds (in the ring,
				       or consumed and not yet completed) */
	uint32_t leased;            /* recv: buffers with leases out */
	uint32_t ring_unconsumed;   /* recv: in the ring, not yet consumed, as the
				       kernel reports; UINT32_MAX if it cannot */
	uint32_t reserved;
	uint64_t refused;           /* recv: completions refused (forged, replayed) */
	uint64_t bad_releases;      /* recv: releases of buffers not leased */
	uint64_t dry;               /* recv: completions -ENOBUFS (the ring ran dry) */
};

struct asyncpool_region *asyncpool_region_ref(struct asyncpool_region *r);
void asyncpool_region_unref(struct asyncpool_region *r);

struct asyncpool_slab *asyncpool_region_slab(const struct asyncpool_region *r);
struct asyncpool_proactor *asyncpool_region_proactor(const struct asyncpool_region *r);
void    *asyncpool_region_base(const struct asyncpool_region *r);
size_t   asyncpool_region_buffer_size(const struct asyncpool_region *r);
uint32_t asyncpool_region_buffer_count(const struct asyncpool_region *r);
uint32_t asyncpool_region_access(const struct asyncpool_region *r);

int asyncpool_region_fixed_index(const struct asyncpool_region *r,
				 uint32_t buffer_index);
int asyncpool_region_buffer_group(const struct asyncpool_region *r);
int asyncpool_region_recv_lease(struct asyncpool_region *r,
				const struct io_uring_cqe *cqe,
				struct asyncpool_lease *out);
int asyncpool_region_recv_leases(struct asyncpool_region *r,
				 const struct io_uring_cqe *cqe,
				 struct asyncpool_lease *leases, unsigned int max,
				 unsigned int *n);
/* Waiting for a dry recv ring to hold buffers again (LIBASYNCPOOL_1.1). */
int asyncpool_region_wait(struct asyncpool_region *r, int64_t timeout_ns);
int asyncpool_region_prep_wait(struct asyncpool_region *r, struct io_uring_sqe *sqe);
int asyncpool_region_stats(const struct asyncpool_region *r,
			   struct asyncpool_region_stats *out);

/*
 * A recv ring over a pool's buffers (LIBASYNCPOOL_1.10): a provided-
 * buffer ring on the proactor's io_uring lent up to entries leases of
 * pool (a shared pool's: held by this attachment, reclaimed after the
 * quarantine if it dies); a completion gives the pool lease of the bytes
 * received, which asyncpool_channel_send() takes.
 */
int asyncpool_recv_ring_create(struct asyncpool *pool, struct asyncpool_proactor *p,
			       uint32_t entries, struct asyncpool_recv_ring **out);
int asyncpool_recv_ring_group(const struct asyncpool_recv_ring *rr);
int asyncpool_recv_ring_lease(struct asyncpool_recv_ring *rr, const struct io_uring_cqe *cqe,
			      struct asyncpool_lease *out);
int asyncpool_recv_ring_refill(struct asyncpool_recv_ring *rr);
int asyncpool_recv_ring_destroy(struct asyncpool_recv_ring *rr);

#ifdef __cplusplus
}
#endif

#endif /* ASYNCPOOL_REGION_H */
