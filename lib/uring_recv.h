/* SPDX-License-Identifier: MIT */
/*
 * uring_recv.c: the provided-buffer ring of a WRITE region, registered
 * on the io_uring proactor's ring; its completions turned into leases,
 * its releases put back from any thread, its waits for a buffer.
 */
#ifndef ASYNCPOOL_URING_RECV_H
#define ASYNCPOOL_URING_RECV_H

#include <stdbool.h>
#include <stdint.h>

struct asyncpool_lease;
struct asyncpool_region;
struct asyncpool_region_stats;
struct io_uring_cqe;
struct io_uring_sqe;
struct ur_proactor;
struct ur_recv;
struct ur_region;

/* A buffer ring at br under a free group id of u's ring: 0 and *bgid. */
int ap_ur_group_register(struct ur_proactor *u, void *br, uint32_t entries, uint16_t flags,
			 uint16_t *bgid);
/* Unregister it and free the id: 0, or the kernel's error (id kept). */
int ap_ur_group_unregister(struct ur_proactor *u, uint16_t bgid);

/* Register r's buffers on u's ring as a buffer ring, every buffer in it: ur->recv. */
int ap_ur_recv_register(struct ur_proactor *u, struct asyncpool_region *r, struct ur_region *ur);
/* Unregister the ring and free it; 0, or the kernel's error (nothing freed). */
int ap_ur_recv_unregister(struct ur_proactor *u, struct ur_recv *rv);
/* Free our memory of the ring (in a child, the copy of the parent's). */
void ap_ur_recv_free(struct ur_recv *rv);
/* From here on, a copy of one of the ring's leases finds no region. */
void ap_ur_recv_retire(struct ur_recv *rv);
/* The ring's buffer group id. */
int ap_ur_recv_group(const struct ur_recv *rv);

/* The proactor's ops (internal.h, struct proactor_ops) of a WRITE region. */
int ap_ur_recv(struct asyncpool_region *r, const struct io_uring_cqe *cqe,
	       struct asyncpool_lease *out, unsigned int max, unsigned int *n, bool bundle);
int ap_ur_region_wait(struct asyncpool_region *r, int64_t timeout_ns);
int ap_ur_region_prep_wait(struct asyncpool_region *r, struct io_uring_sqe *sqe);
/* The ring's part of asyncpool_region_stats(). */
void ap_ur_recv_stats(struct ur_proactor *u, struct ur_recv *rv, struct asyncpool_region_stats *st);

/* Releases of a lease whose region was gone, process-wide. */
uint64_t ap_ur_stale_releases(void);

#endif /* ASYNCPOOL_URING_RECV_H */
