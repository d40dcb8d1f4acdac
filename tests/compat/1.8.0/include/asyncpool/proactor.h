/* SPDX-License-Identifier: MIT */
/*
 * A proactor registers slabs for I/O: with an io_uring the caller owns,
 * or with nothing at all (the memory proactor).
 */
#ifndef ASYNCPOOL_PROACTOR_H
#define ASYNCPOOL_PROACTOR_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct io_uring;                /* from <liburing.h>; not included here */
struct asyncpool_proactor;
struct asyncpool_slab;
struct asyncpool_region;

#define ASYNCPOOL_ACCESS_READ  1u /* the kernel reads the buffers: send */
#define ASYNCPOOL_ACCESS_WRITE 2u /* the kernel writes them: recv */
/* With WRITE: a buffer ring with incremental consumption (IOU_PBUF_RING_INC). */
#define ASYNCPOOL_ACCESS_INCREMENTAL 4u

/* Features of an io_uring proactor, in asyncpool_proactor_stats().features. */
#define ASYNCPOOL_URING_CLONE_BUFFERS (1u << 0) /* READ slabs pinned once for all rings */
#define ASYNCPOOL_URING_PBUF_STATUS   (1u << 1) /* recv completions checked against the ring head */
#define ASYNCPOOL_URING_BUNDLE        (1u << 2) /* the kernel takes IORING_RECVSEND_BUNDLE */
#define ASYNCPOOL_URING_INCREMENTAL   (1u << 3) /* ASYNCPOOL_ACCESS_INCREMENTAL works */
#define ASYNCPOOL_URING_SINGLE_ISSUER (1u << 4) /* the ring has IORING_SETUP_SINGLE_ISSUER */

/*
 * Counters of a proactor, for asyncpool_proactor_stats().  Extensible:
 * set size to sizeof(struct asyncpool_proactor_stats) before the call.
 */
struct asyncpool_proactor_stats {
	size_t   size;                  /* sizeof(struct asyncpool_proactor_stats) */
	uint32_t features;              /* ASYNCPOOL_URING_* */
	uint32_t deferred;              /* unregistrations waiting for the owner thread */
	uint64_t deferred_done;         /* done by asyncpool_proactor_run_deferred() */
	uint64_t unregister_failures;   /* unregistrations the kernel refused */
	uint64_t stale_releases;        /* recv leases released after their region
					   was gone (process-wide) */
	/* Since 1.2 (an older caller's size ends before it): */
	uint32_t live_regions;          /* regions not yet unreferenced: while not 0,
					   asyncpool_proactor_destroy() is -EBUSY */
};

int asyncpool_proactor_create_memory(struct asyncpool_proactor **out);
int asyncpool_proactor_create_uring(struct io_uring *ring, uint32_t flags,
				    struct asyncpool_proactor **out);
int asyncpool_proactor_destroy(struct asyncpool_proactor *p);
int asyncpool_proactor_register_slab(struct asyncpool_proactor *p,
				     struct asyncpool_slab *slab,
				     uint32_t access,
				     struct asyncpool_region **out);
/*
 * Since 1.2: register slab with access on each of count distinct
 * proactors, regions[i] on proactors[i]; all or nothing (on failure no
 * region stays and regions[] is all NULL).  For a pool sent on several
 * rings: the pool on regions[0], the others as its siblings
 * (struct asyncpool_options).
 */
int asyncpool_proactor_register_slab_many(struct asyncpool_proactor *const *proactors,
					  uint32_t count, struct asyncpool_slab *slab,
					  uint32_t access, struct asyncpool_region **regions);
int asyncpool_proactor_run_deferred(struct asyncpool_proactor *p);
int asyncpool_proactor_stats(const struct asyncpool_proactor *p,
			     struct asyncpool_proactor_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* ASYNCPOOL_PROACTOR_H */
