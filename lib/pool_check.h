/* SPDX-License-Identifier: MIT */
/*
 * Checks of a pool layout that may come from another process: the
 * header validation of asyncpool_open_shared() and the freelist audit of
 * asyncpool_check().  Only reads, and needs nothing but the layout, so
 * that `asyncpool inspect` uses the same code on a read-only mapping.
 */
#ifndef ASYNCPOOL_POOL_CHECK_H
#define ASYNCPOOL_POOL_CHECK_H

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "pool_layout.h"

/* An offset of a part of len bytes: aligned, inside the storage, where the geometry puts it. */
static inline bool ap_offset_ok(uint64_t off, uint64_t len, uint64_t storage, uint64_t want)
{
	return off % 64 == 0 && off <= storage && len <= storage - off && off == want;
}

/*
 * Validate the header at mem, of which size bytes are mapped, and copy
 * it to *copy (later reads must use the copy: a peer may change the
 * original).  The magic is read first, with acquire, and nothing else
 * is read unless it is there.  0, -EPROTO (magic), -EPROTONOSUPPORT
 * (version) or -EBADMSG (any other field).
 */
static inline int ap_header_check(const void *mem, size_t size, bool shared,
				  struct ap_pool_header *copy)
{
	const struct ap_pool_header *h = mem;
	struct ap_layout_geometry g;
	uint32_t magic;

	memset(copy, 0, sizeof(*copy));
	if (size < sizeof(*h) || (uintptr_t)mem % 64)
		return -EBADMSG;
	magic = atomic_load_explicit(&h->magic, memory_order_acquire);
	if (magic != AP_POOL_MAGIC)
		return -EPROTO;
	memcpy((char *)copy + sizeof(copy->magic), (const char *)mem + sizeof(h->magic),
	       sizeof(*copy) - sizeof(copy->magic));
	atomic_init(&copy->magic, magic);
	if (copy->version != AP_POOL_VERSION && copy->version != AP_POOL_VERSION_CHANNELS)
		return -EPROTONOSUPPORT;
	if (copy->header_size != sizeof(*copy))
		return -EBADMSG;
	if ((copy->flags & ~AP_POOL_F_CHAN_DROP) != (shared ? AP_POOL_F_SHARED : 0u) ||
	    ((copy->flags & AP_POOL_F_CHAN_DROP) && copy->version != AP_POOL_VERSION_CHANNELS))
		return -EBADMSG;
	if (copy->buffer_count == 0 || copy->buffer_count > AP_MAX_COUNT)
		return -EBADMSG;
	if (copy->buffer_size == 0 || copy->buffer_size % 64)
		return -EBADMSG;
	/* An item's span is 32-bit (version 5). */
	if (copy->channel_count && copy->buffer_size > UINT32_MAX)
		return -EBADMSG;
	if (copy->attach_slots != (shared ? AP_ATTACH_SLOTS : 0u))
		return -EBADMSG;
	/* Version 3 has no channels; 5 has, in a shared pool only. */
	if ((copy->version == AP_POOL_VERSION) != (copy->channel_count == 0) ||
	    !ap_layout_geometry_ch(copy->buffer_count, shared, copy->channel_count,
				   copy->channel_capacity, &g))
		return -EBADMSG;
	if (copy->storage_size != g.storage_size || copy->storage_size > size)
		return -EBADMSG;
	if (!ap_offset_ok(copy->head_offset, 64, g.storage_size, AP_OFF_HEAD) ||
	    !ap_offset_ok(copy->counters_offset, 64, g.storage_size, AP_OFF_COUNTERS) ||
	    !ap_offset_ok(copy->next_offset, g.per, g.storage_size, AP_OFF_NEXT) ||
	    !ap_offset_ok(copy->link_offset, g.link_per, g.storage_size, g.link_offset) ||
	    !ap_offset_ok(copy->depth_offset, g.depth_per, g.storage_size, g.depth_offset))
		return -EBADMSG;
	if (shared &&
	    !ap_offset_ok(copy->attach_offset, (uint64_t)AP_ATTACH_SLOTS * AP_ATTACH_SIZE,
			  g.storage_size, g.attach_offset))
		return -EBADMSG;
	if (!shared && copy->attach_offset)
		return -EBADMSG;
	if (copy->channel_count &&
	    !ap_offset_ok(copy->channel_offset, (uint64_t)copy->channel_count * g.chan_stride,
			  g.storage_size, g.chan_offset))
		return -EBADMSG;
	if (copy->channel_count &&
	    !ap_offset_ok(copy->from_offset, (uint64_t)copy->buffer_count * sizeof(struct ap_chan_from),
			  g.storage_size, g.from_offset))
		return -EBADMSG;
	if (!copy->channel_count && (copy->channel_offset || copy->from_offset))
		return -EBADMSG;
	for (size_t i = 0; i < sizeof(copy->reserved) / sizeof(copy->reserved[0]); i++)
		if (copy->reserved[i])
			return -EBADMSG;
	return 0;
}

/*
 * The buffers in per-thread caches, of every process: those whose state
 * says cached.  asyncpool_available() and `asyncpool inspect` both
 * count them so, and count them as available (man asyncpool_available).
 */
static inline uint32_t ap_count_cached(const _Atomic uint64_t *state, uint32_t count)
{
	uint32_t n = 0;

	for (uint32_t j = 0; j < count; j++)
		n += AP_W_KIND(atomic_load_explicit((_Atomic uint64_t *)&state[j],
						    memory_order_relaxed)) == AP_K_CACHED;
	return n;
}

/* What a walk of the freelist found. */
struct ap_audit {
	uint32_t head_index;
	uint32_t head_tag;
	uint32_t free;          /* buffers on the list */
	uint32_t leased;        /* buffers marked LEASED */
	uint32_t cached;        /* buffers marked CACHED: in a thread cache */
	uint32_t queued;        /* buffers marked QUEUED: in a channel (version 4) */
	uint32_t lost;          /* buffers neither on the list, leased nor cached */
	const char *problem;    /* the first inconsistency, or NULL */
	uint32_t problem_index; /* the buffer it was seen at, or AP_FL_END */
	/* per holder (0: none; 1 + attachment slot) */
	uint32_t held_leased[AP_HOLDER_MASK + 1];
	uint32_t held_cached[AP_HOLDER_MASK + 1];
};

static inline void ap_audit_fail(struct ap_audit *a, const char *what, uint32_t at)
{
	if (!a->problem) {
		a->problem = what;
		a->problem_index = at;
	}
}

/*
 * Walk the freelist from head through link[] and state[] (count
 * entries each), with
 * seen a zeroed bitmap of count bits.  The walk stops at the first index
 * that is out of range or seen twice, or a word that is not FREE, so it
 * takes at most count steps.  The list is consistent when every buffer
 * is on it once, leased, in a thread cache, or queued in one of the
 * channels (0 for a layout of version 3, where a QUEUED word is
 * corruption).  Exact only while no one changes the pool.  0 or -EUCLEAN.
 */
static inline int ap_freelist_audit(uint64_t head, const _Atomic uint64_t *state,
				    const _Atomic uint32_t *link, uint32_t count, uint32_t channels,
				    unsigned char *seen, struct ap_audit *a)
{
	uint32_t i = AP_HEAD_INDEX(head), from = AP_FL_END;

	memset(a, 0, sizeof(*a));
	a->head_index = i;
	a->head_tag = AP_HEAD_TAG(head);
	a->problem_index = AP_FL_END;
	while (i != AP_FL_END) {
		uint64_t w;

		if (i >= count) {
			ap_audit_fail(a, from == AP_FL_END ? "head index out of range" :
				      "next index out of range", from);
			break;
		}
		if (seen[i / 8] & (1u << (i % 8))) {
			ap_audit_fail(a, "the list has a cycle", i);
			break;
		}
		w = atomic_load_explicit((_Atomic uint64_t *)&state[i], memory_order_relaxed);
		if (AP_W_KIND(w) != AP_K_FREE) {
			ap_audit_fail(a, AP_W_KIND(w) == AP_K_LEASED ? "the list reaches a leased buffer" :
				      AP_W_KIND(w) == AP_K_CACHED ? "the list reaches a cached buffer" :
				      "the list reaches a queued buffer", i);
			break;
		}
		seen[i / 8] |= (unsigned char)(1u << (i % 8));
		a->free++;
		from = i;
		i = atomic_load_explicit((_Atomic uint32_t *)&link[i], memory_order_relaxed);
	}
	for (uint32_t j = 0; j < count; j++) {
		uint64_t v = atomic_load_explicit((_Atomic uint64_t *)&state[j],
						  memory_order_relaxed);

		if (seen[j / 8] & (1u << (j % 8)))
			continue;
		if (AP_W_KIND(v) == AP_K_LEASED) {
			a->leased++;
			a->held_leased[AP_W_HOLDER(v)]++;
		} else if (AP_W_KIND(v) == AP_K_CACHED) {
			a->cached++;
			a->held_cached[AP_W_HOLDER(v)]++;
		} else if (AP_W_KIND(v) == AP_K_QUEUED && channels &&
			   AP_W_CHAN(v) < channels && !AP_W_HOLDER(v) &&
			   !((v >> 48) & 0x7f)) {
			a->queued++;
		} else {
			a->lost++;
			ap_audit_fail(a, "a buffer is neither free, leased, cached nor queued", j);
		}
	}
	if ((uint64_t)a->free + a->leased + a->cached + a->queued != count)
		ap_audit_fail(a, "free + leased + cached + queued is not the capacity", AP_FL_END);
	return a->problem ? -EUCLEAN : 0;
}

#endif /* ASYNCPOOL_POOL_CHECK_H */
