/* SPDX-License-Identifier: MIT */
/*
 * Bitmaps of the io_uring proactor's files: the fixed-table slots taken
 * process-wide (uring_slots.c) and on one ring, the buffer group ids
 * taken on one ring (struct ur_proactor, uring_internal.h).
 */
#ifndef ASYNCPOOL_URING_BITMAP_H
#define ASYNCPOOL_URING_BITMAP_H

#include <stdbool.h>
#include <stdint.h>

static inline bool bit_get(const uint64_t *map, uint32_t i)
{
	return map[i / 64] & (1ull << (i % 64));
}

static inline void bits_set(uint64_t *map, uint32_t first, uint32_t n, bool on)
{
	for (uint32_t i = first; i < first + n; i++) {
		if (on)
			map[i / 64] |= 1ull << (i % 64);
		else
			map[i / 64] &= ~(1ull << (i % 64));
	}
}

static inline bool bits_any(const uint64_t *map, uint32_t first, uint32_t n)
{
	for (uint32_t i = first; i < first + n; i++)
		if (bit_get(map, i))
			return true;
	return false;
}

#endif /* ASYNCPOOL_URING_BITMAP_H */
