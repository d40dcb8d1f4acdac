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
struct asyncpool_region;
struct asyncpool_slab;
struct asyncpool_proactor;
struct asyncpool_lease;

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

#ifdef __cplusplus
}
#endif

#endif /* ASYNCPOOL_REGION_H */
