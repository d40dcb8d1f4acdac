/* SPDX-License-Identifier: MIT */
/* Definitions shared by the files of the library; not installed. */
#ifndef ASYNCPOOL_INTERNAL_H
#define ASYNCPOOL_INTERNAL_H

#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The library calls its own functions, never the header's inline paths. */
#define ASYNCPOOL_NO_INLINE 1
#include <asyncpool.h>

#define AP_EXPORT __attribute__((visibility("default")))

/* An exported accessor: the field of an object, or dflt for NULL. */
#define AP_ACCESSOR(type, name, object, field, dflt) \
	AP_EXPORT type name(const object *o) { return o ? o->field : dflt; }
#define AP_LIKELY(x)   __builtin_expect(!!(x), 1)
#define AP_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define AP_CACHE_LINE 64
/* Every buffer starts on a cache line: buffer_size is a multiple of this. */
#define AP_BUFFER_ALIGN 64

static inline size_t ap_align_up(size_t v, size_t a)
{
	return (v + a - 1) & ~(a - 1);
}

/*
 * The largest size an extensible struct may claim, as the kernel's
 * copy_struct_from_user() callers bound theirs: a page.
 */
#define AP_STRUCT_SIZE_MAX 4096u

/* Zero-check the tail of an extensible struct that this build does not know. */
static inline bool ap_tail_is_zero(const void *opts, size_t known, size_t given)
{
	const unsigned char *p = opts;

	for (size_t i = known; i < given; i++)
		if (p[i])
			return false;
	return true;
}

/*
 * Copy in an extensible options struct whose first field is its size:
 * -EINVAL for NULL or below min (the first version's size), -E2BIG beyond a page
 * (nothing is read past it), -EINVAL for a non-zero tail this build does
 * not know.  dst (known bytes) is zeroed, then filled.
 */
static inline int ap_opts_copy(void *dst, size_t known, const void *src, size_t min)
{
	size_t given;

	if (!src)
		return -EINVAL;
	memcpy(&given, src, sizeof(given));
	if (given < min)
		return -EINVAL;
	if (given > AP_STRUCT_SIZE_MAX)
		return -E2BIG;
	if (given > known && !ap_tail_is_zero(src, known, given))
		return -EINVAL;
	memset(dst, 0, known);
	memcpy(dst, src, given < known ? given : known);
	return 0;
}

/* ---- slab ---- */
struct asyncpool_slab {
	_Atomic uint32_t refs;
	void    *base;
	size_t   buffer_size;
	uint32_t buffer_count;
	size_t   length;        /* buffer_size * buffer_count */
	size_t   map_length;    /* length rounded up to page_size; 0 if wrapped */
	size_t   page_size;
	void   (*destroy)(void *ctx);
	void    *destroy_ctx;
	/* uring_slots.c: the fixed-table slots this slab takes on every
	 * ring it is registered with for READ; under ap_ur_lock. */
	void    *uring_run;
};

/* ---- proactor backends ---- */
struct proactor_ops {
	/* Register r (its slab, access and geometry are set); fill r->backend. */
	int  (*register_region)(struct asyncpool_proactor *p, struct asyncpool_region *r);
	/* Undo register_region; called once, on the region's last unref. */
	void (*unregister_region)(struct asyncpool_proactor *p, struct asyncpool_region *r);
	/* Optional (NULL: -EOPNOTSUPP, a backend without fixed buffers or
	 * buffer rings).  buffer_index is in range. */
	int  (*fixed_index)(const struct asyncpool_region *r, uint32_t buffer_index);
	int  (*buffer_group)(const struct asyncpool_region *r);
	/* Optional (NULL: -EOPNOTSUPP): the leases of a receive completion,
	 * one (bundle false, max 1) or those of a bundle (up to max > 0).
	 * out is zeroed. */
	int  (*recv)(struct asyncpool_region *r, const struct io_uring_cqe *cqe,
		     struct asyncpool_lease *out, unsigned int max, unsigned int *n, bool bundle);
	/* Optional (NULL: -EINVAL): wait for a recv ring to hold buffers. */
	int  (*region_wait)(struct asyncpool_region *r, int64_t timeout_ns);
	int  (*region_prep_wait)(struct asyncpool_region *r, struct io_uring_sqe *sqe);
	/* Optional: fill the backend's part of the stats (zeroed, size set). */
	void (*region_stats)(const struct asyncpool_region *r, struct asyncpool_region_stats *st);
	void (*proactor_stats)(struct asyncpool_proactor *p, struct asyncpool_proactor_stats *st);
	/* Optional: work deferred to the ring's owner thread; >= 0 done, or -errno. */
	int  (*run_deferred)(struct asyncpool_proactor *p);
	/* Free the backend state; the proactor has no regions left.  Optional;
	 * an error leaves the proactor as it was. */
	int  (*destroy)(struct asyncpool_proactor *p);
};

struct asyncpool_proactor {
	const struct proactor_ops *ops;
	_Atomic uint32_t regions;       /* live regions */
	void *backend;
};

struct asyncpool_region {
	_Atomic uint32_t refs;
	struct asyncpool_proactor *proactor;
	struct asyncpool_slab *slab;
	char    *base;
	size_t   buffer_size;
	uint32_t buffer_count;
	uint32_t access;
	void    *backend;
};

/* proactor.c: allocate a proactor with the given backend. */
int ap_proactor_new(const struct proactor_ops *ops, void *backend,
		    struct asyncpool_proactor **out);

#endif /* ASYNCPOOL_INTERNAL_H */
