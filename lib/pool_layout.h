/* SPDX-License-Identifier: MIT */
/*
 * The memory layout of a pool's freelist, version 1.  A local pool keeps
 * it on the heap, a shared pool in memory that several processes map, so
 * it holds no pointers: only indices and offsets from its start.
 * man/man7/asyncpool-shared.7 documents it for other implementations.
 *
 *   0    header            (2 cache lines; magic published last)
 *   128  head line         head word, alone on its cache line
 *   192  counters line     statistics
 *   256  next[]            uint32 per buffer
 *   ...  owners[]          uint32 per buffer, reserved (zero)   shared only
 *   ...  attach[]          AP_ATTACH_SLOTS x 64 bytes, reserved shared only
 */
#ifndef ASYNCPOOL_POOL_LAYOUT_H
#define ASYNCPOOL_POOL_LAYOUT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define AP_POOL_MAGIC   0x4c4f5041u     /* "APOL" in little-endian memory */
#define AP_POOL_VERSION 1u
#define AP_ATTACH_SLOTS 64u
#define AP_ATTACH_SIZE  64u

/* next[] values beyond any index */
#define AP_FL_END    0xffffffffu        /* end of the list; empty head */
#define AP_FL_LEASED 0xfffffffeu        /* the buffer is leased */
/*
 * The buffer is free, in a per-thread cache of one process: off the list
 * (the freelist counts it as leased), but not leased to a user, so that a
 * release of it is refused like a release of a free buffer.
 */
#define AP_FL_CACHED 0xfffffffdu

/* The head word: index in the low 32 bits, ABA tag in the high 32. */
#define AP_HEAD_INDEX(h)      ((uint32_t)(h))
#define AP_HEAD_TAG(h)        ((uint32_t)((h) >> 32))
#define AP_HEAD_MAKE(idx, tag) (((uint64_t)(uint32_t)(tag) << 32) | (uint32_t)(idx))

struct ap_pool_header {
	_Atomic uint32_t magic;         /* AP_POOL_MAGIC once initialised */
	uint32_t version;               /* AP_POOL_VERSION */
	uint32_t header_size;           /* sizeof(struct ap_pool_header) */
	uint32_t flags;                 /* AP_POOL_F_* */
	uint64_t storage_size;          /* bytes of the layout */
	uint64_t buffer_size;
	uint32_t buffer_count;
	uint32_t attach_slots;          /* 0 for local pools */
	uint64_t head_offset;
	uint64_t counters_offset;
	uint64_t next_offset;
	uint64_t owners_offset;         /* 0 for local pools */
	uint64_t attach_offset;         /* 0 for local pools */
	uint64_t reserved[6];           /* zero */
};

#define AP_POOL_F_SHARED 1u

struct ap_pool_head {
	_Atomic uint64_t head;
	uint64_t pad[7];
};

struct ap_pool_counters {
	_Atomic uint64_t bad_releases;
	_Atomic uint64_t corruptions;
	_Atomic uint64_t empty;
	uint64_t pad[5];
};

_Static_assert(sizeof(struct ap_pool_header) == 128, "header is two cache lines");
_Static_assert(sizeof(struct ap_pool_head) == 64, "head line is one cache line");
_Static_assert(sizeof(struct ap_pool_counters) == 64, "counters are one cache line");

#define AP_OFF_HEAD     128u
#define AP_OFF_COUNTERS 192u
#define AP_OFF_NEXT     256u

/* The largest buffer_count of a layout (ASYNCPOOL_MAX_BUFFERS). */
#define AP_MAX_COUNT 0x7ffffffeu

/*
 * The bundle of asyncpool_shared_create() puts the buffers at the first
 * multiple of this after the layout: fixed, not this machine's page size.
 */
#define AP_SHARED_BUFFER_ALIGN 4096u

/*
 * Where each part of a layout of count buffers lives.  The one place
 * that computes it: the library, its checks and `asyncpool inspect`
 * all call this.
 */
struct ap_layout_geometry {
	uint64_t per;                   /* bytes of next[] and of owners[] */
	uint64_t next_offset;
	uint64_t owners_offset;         /* 0 for local pools */
	uint64_t attach_offset;         /* 0 for local pools */
	uint64_t storage_size;          /* bytes of the whole layout */
};

/* false for a count of 0 or beyond AP_MAX_COUNT. */
static inline bool ap_layout_geometry(uint32_t count, bool shared, struct ap_layout_geometry *g)
{
	g->per = ((uint64_t)count * sizeof(uint32_t) + 63) & ~(uint64_t)63;
	g->next_offset = AP_OFF_NEXT;
	g->owners_offset = shared ? AP_OFF_NEXT + g->per : 0;
	g->attach_offset = shared ? AP_OFF_NEXT + 2 * g->per : 0;
	g->storage_size = AP_OFF_NEXT + g->per +
			  (shared ? g->per + (uint64_t)AP_ATTACH_SLOTS * AP_ATTACH_SIZE : 0);
	return count != 0 && count <= AP_MAX_COUNT;
}

/*
 * The shared bundle: the layout, then count x buffer_size bytes of
 * buffers at *buffers_offset; *total bytes in all.  false when the
 * count is out of range or the sizes overflow 64 bits.
 */
static inline bool ap_bundle_geometry(uint32_t count, uint64_t buffer_size,
				      uint64_t *buffers_offset, uint64_t *total)
{
	struct ap_layout_geometry g;
	uint64_t bytes;

	if (!ap_layout_geometry(count, true, &g))
		return false;
	*buffers_offset = (g.storage_size + AP_SHARED_BUFFER_ALIGN - 1) &
			  ~(uint64_t)(AP_SHARED_BUFFER_ALIGN - 1);
	return !__builtin_mul_overflow(buffer_size, (uint64_t)count, &bytes) &&
	       !__builtin_add_overflow(*buffers_offset, bytes, total);
}

#endif /* ASYNCPOOL_POOL_LAYOUT_H */
