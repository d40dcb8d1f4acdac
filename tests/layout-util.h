/* SPDX-License-Identifier: MIT */
/*
 * Reading a shared pool's layout (lib/pool_layout.h) from a test, to see
 * what the public calls do not show.
 */
#ifndef ASYNCPOOL_LAYOUT_UTIL_H
#define ASYNCPOOL_LAYOUT_UTIL_H

#include <stdatomic.h>
#include <stdint.h>

#include <asyncpool.h>
#include "../lib/pool_layout.h"

/* How many of the first count buffers' state words are not FREE. */
static inline int layout_not_free(struct asyncpool_shared *sp, uint32_t count)
{
	const _Atomic uint64_t *w = (const void *)((const char *)asyncpool_shared_shm(sp)->base +
						   AP_OFF_NEXT);
	int n = 0;

	for (uint32_t i = 0; i < count; i++)
		n += AP_W_KIND(atomic_load(&w[i])) != AP_K_FREE;
	return n;
}

/*
 * The parts of a layout of count buffers at base, from the library's
 * own geometry (pool_layout.h), and the same for a bundle sp.
 */
static inline _Atomic uint64_t *layout_state_at(void *base, uint32_t count, uint32_t i)
{
	struct ap_layout_geometry g;

	(void)ap_layout_geometry(count, true, &g);
	return (_Atomic uint64_t *)((char *)base + g.next_offset) + i;
}

/* The link of buffer i (layout version 3: links apart from the words). */
static inline _Atomic uint32_t *layout_link_at(void *base, uint32_t count, uint32_t i)
{
	struct ap_layout_geometry g;

	(void)ap_layout_geometry(count, true, &g);
	return (_Atomic uint32_t *)((char *)base + g.link_offset) + i;
}

static inline _Atomic uint32_t *layout_depth_at(void *base, uint32_t count, uint32_t i)
{
	struct ap_layout_geometry g;

	(void)ap_layout_geometry(count, true, &g);
	return (_Atomic uint32_t *)((char *)base + g.depth_offset) + i;
}

static inline struct ap_attach *layout_attach_at(void *base, uint32_t count, uint32_t slot)
{
	struct ap_layout_geometry g;

	(void)ap_layout_geometry(count, true, &g);
	return (struct ap_attach *)((char *)base + g.attach_offset) + slot;
}

static inline char *layout_base(struct asyncpool_shared *sp)
{
	return asyncpool_shared_shm(sp)->base;
}

static inline uint32_t layout_count(struct asyncpool_shared *sp)
{
	return (uint32_t)asyncpool_capacity(asyncpool_shared_pool(sp));
}

/* The state word of buffer i. */
static inline _Atomic uint64_t *layout_state(struct asyncpool_shared *sp, uint32_t i)
{
	return layout_state_at(layout_base(sp), layout_count(sp), i);
}

/* Attachment record slot. */
static inline struct ap_attach *layout_attach(struct asyncpool_shared *sp, uint32_t slot)
{
	return layout_attach_at(layout_base(sp), layout_count(sp), slot);
}

static inline struct ap_pool_counters *layout_counters(struct asyncpool_shared *sp)
{
	return (struct ap_pool_counters *)(layout_base(sp) + AP_OFF_COUNTERS);
}

static inline struct ap_pool_head *layout_head(struct asyncpool_shared *sp)
{
	return (struct ap_pool_head *)(layout_base(sp) + AP_OFF_HEAD);
}

/* A state word: kind, holder, generation (the one place that builds
 * one, so that a change of the word's layout changes only this). */
static inline uint64_t layout_word(uint32_t kind, uint32_t holder, uint32_t gen)
{
	return AP_W_MAKE(kind, holder, gen);
}

/* The slot of the attachment whose record is LIVE and not skip's, or -1. */
static inline int layout_live_slot(struct asyncpool_shared *sp, int skip)
{
	for (uint32_t s = 0; s < AP_ATTACH_SLOTS; s++)
		if ((int)s != skip &&
		    AP_ATT_STATE(atomic_load(&layout_attach(sp, s)->life)) == AP_ATT_LIVE)
			return (int)s;
	return -1;
}

#endif
