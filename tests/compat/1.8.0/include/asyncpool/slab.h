/* SPDX-License-Identifier: MIT */
/*
 * A slab: one block of buffer_count x buffer_size bytes of memory,
 * ref-counted.  It knows nothing of io_uring.
 */
#ifndef ASYNCPOOL_SLAB_H
#define ASYNCPOOL_SLAB_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct asyncpool_slab;

/* Flags of struct asyncpool_slab_options. */
#define ASYNCPOOL_SLAB_HUGE_PREFER  (1u << 0) /* huge pages, else normal + THP hint */
#define ASYNCPOOL_SLAB_HUGE_REQUIRE (1u << 1) /* huge pages or -ENOMEM */
#define ASYNCPOOL_SLAB_MLOCK        (1u << 2) /* lock the memory (mlock) */
#define ASYNCPOOL_SLAB_POPULATE     (1u << 3) /* prefault every page */

/*
 * Options for asyncpool_slab_create().  Extensible: zero the whole
 * struct, set size to sizeof(struct asyncpool_slab_options), then the
 * fields you need.  Fields beyond size that this build does not know
 * must be zero.
 */
struct asyncpool_slab_options {
	size_t   size;          /* sizeof(struct asyncpool_slab_options) */
	size_t   buffer_size;   /* bytes per buffer, > 0 */
	uint32_t buffer_count;  /* buffers, > 0 */
	int      numa_node;     /* -1: any node */
	uint32_t flags;         /* ASYNCPOOL_SLAB_* */
	uint32_t reserved;      /* must be zero */
};

int asyncpool_slab_create(const struct asyncpool_slab_options *opts,
			  struct asyncpool_slab **out);
int asyncpool_slab_wrap(void *base, size_t buffer_size, uint32_t buffer_count,
			void (*destroy)(void *ctx), void *ctx,
			struct asyncpool_slab **out);
struct asyncpool_slab *asyncpool_slab_ref(struct asyncpool_slab *slab);
void asyncpool_slab_unref(struct asyncpool_slab *slab);

void    *asyncpool_slab_base(const struct asyncpool_slab *slab);
size_t   asyncpool_slab_buffer_size(const struct asyncpool_slab *slab);
uint32_t asyncpool_slab_buffer_count(const struct asyncpool_slab *slab);
size_t   asyncpool_slab_length(const struct asyncpool_slab *slab);
size_t   asyncpool_slab_page_size(const struct asyncpool_slab *slab);

#ifdef __cplusplus
}
#endif

#endif /* ASYNCPOOL_SLAB_H */
