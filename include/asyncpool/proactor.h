/* SPDX-License-Identifier: MIT */
/*
 * A proactor registers slabs for I/O: with an io_uring the caller owns,
 * or with nothing at all (the memory proactor).
 */
#ifndef ASYNCPOOL_PROACTOR_H
#define ASYNCPOOL_PROACTOR_H

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

int asyncpool_proactor_create_memory(struct asyncpool_proactor **out);
int asyncpool_proactor_create_uring(struct io_uring *ring, uint32_t flags,
				    struct asyncpool_proactor **out);
int asyncpool_proactor_destroy(struct asyncpool_proactor *p);
int asyncpool_proactor_register_slab(struct asyncpool_proactor *p,
				     struct asyncpool_slab *slab,
				     uint32_t access,
				     struct asyncpool_region **out);

#ifdef __cplusplus
}
#endif

#endif /* ASYNCPOOL_PROACTOR_H */
