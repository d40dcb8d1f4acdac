/* SPDX-License-Identifier: MIT */
/*
 * uring_handles.c: what a recv lease names instead of its region, so
 * that a copy of a lease released after its region is gone is refused.
 */
#ifndef ASYNCPOOL_URING_HANDLES_H
#define ASYNCPOOL_URING_HANDLES_H

struct asyncpool_region;

/* A new handle naming r, in *ctx; -ENOBUFS (every handle taken) or -ENOMEM. */
int ap_ur_handle_new(struct asyncpool_region *r, void **ctx);
/* From here on, ctx names no region. */
void ap_ur_handle_retire(void *ctx);
/* The live region a handle names, or NULL. */
struct asyncpool_region *ap_ur_handle_region(void *ctx);

#endif /* ASYNCPOOL_URING_HANDLES_H */
