/* SPDX-License-Identifier: MIT */
/*
 * The ring of a channel (pool_layout.h, struct ap_chan), as the library,
 * its reclaim and `asyncpool inspect` read it.  Header-only and below
 * reclaim.c, which finishes what a dead end left (channel.c has the
 * protocol); it only reads the layout and names no handle.
 *
 * Positions are 64-bit and never wrap: position p lives in slot
 * p & (capacity - 1), and is published when that slot's seq is p + 1.
 * Everything here is read from memory every holder of the fd can write,
 * so every walk stops after capacity slots and every index is checked
 * by its caller before it is used.
 */
#ifndef ASYNCPOOL_CHANNEL_RING_H
#define ASYNCPOOL_CHANNEL_RING_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "pool_layout.h"

/* Channel c of a layout at mem (its geometry from the validated header). */
static inline struct ap_chan *ap_chan_in(void *mem, uint32_t count, uint32_t channels,
					 uint32_t capacity, uint32_t c)
{
	struct ap_layout_geometry g;

	(void)ap_layout_geometry_ch(count, true, channels, capacity, &g);
	return (struct ap_chan *)((char *)mem + g.chan_offset + (uint64_t)c * g.chan_stride);
}

static inline struct ap_chan_slot *ap_chan_slots(struct ap_chan *ch)
{
	return (struct ap_chan_slot *)(ch + 1);
}

/* The redelivery ring of a channel of capacity entries (version 5). */
static inline struct ap_chan_slot *ap_chan_redo(struct ap_chan *ch, uint32_t capacity)
{
	uint64_t ring = ((uint64_t)capacity * sizeof(struct ap_chan_slot) + 63) & ~(uint64_t)63;

	return (struct ap_chan_slot *)((char *)(ch + 1) + ring);
}

/* from[] of a layout at mem (version 5): one record per buffer. */
static inline struct ap_chan_from *ap_chan_from_in(void *mem, uint32_t count, uint32_t channels,
						   uint32_t capacity)
{
	struct ap_layout_geometry g;

	(void)ap_layout_geometry_ch(count, true, channels, capacity, &g);
	return (struct ap_chan_from *)((char *)mem + g.from_offset);
}

/* Whether position p is published in ring slots s (mask: capacity - 1). */
static inline bool ap_ring_published(struct ap_chan_slot *s, uint32_t mask, uint64_t p)
{
	return atomic_load_explicit(&s[p & mask].seq, memory_order_acquire) == p + 1;
}

/* The published positions of ring s from head on, at most capacity. */
static inline uint32_t ap_ring_depth(struct ap_chan_slot *s, uint32_t capacity, uint64_t head)
{
	uint32_t n = 0;

	while (n < capacity && ap_ring_published(s, capacity - 1, head + n))
		n++;
	return n;
}

/* An end word: the attachment (slot + 1) and its epoch; 0 is a free end. */
#define AP_END_WHO(v)   ((uint32_t)(v) & 0xffu)
#define AP_END_EPOCH(v) ((v) >> 8)
static inline uint64_t ap_end_word(uint32_t slot, uint64_t epoch)
{
	return (epoch << 8) | (slot + 1);
}

/* Whether position p is published in its slot. */
static inline bool ap_chan_published(struct ap_chan *ch, uint32_t mask, uint64_t p)
{
	return atomic_load_explicit(&ap_chan_slots(ch)[p & mask].seq, memory_order_acquire) ==
	       p + 1;
}

/*
 * The published positions from head on: how many, at most capacity
 * (the sender writes them in order, so they are contiguous).
 */
static inline uint32_t ap_chan_depth(struct ap_chan *ch, uint32_t capacity, uint64_t head)
{
	uint32_t n = 0;

	while (n < capacity && ap_chan_published(ch, capacity - 1, head + n))
		n++;
	return n;
}

#endif /* ASYNCPOOL_CHANNEL_RING_H */
