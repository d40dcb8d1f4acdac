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

#endif
