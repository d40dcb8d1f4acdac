/* SPDX-License-Identifier: MIT */
/*
 * Handles: what a recv lease names, so that a stale copy is refused.
 *
 * A recv lease's ctx is not the region (which is freed on its last
 * unref) but a handle, {generation, id}, into a table whose chunks are
 * never freed.  Retiring the region bumps the generation, so that a
 * copy of a lease released afterwards finds no region and is counted.
 */
#include "internal.h"

#ifdef HAVE_LIBURING
#include "uring_internal.h"
#include "uring_handles.h"
#include "uring_slots.h"

#include <stdlib.h>

#define AP_H_CHUNK	256u
#define AP_H_CHUNKS	256u

struct ur_handle {
	_Atomic uint32_t gen;
	_Atomic(struct asyncpool_region *) r;
	uint32_t next_free;                     /* ap_ur_lock */
};

static _Atomic(struct ur_handle *) g_hchunks[AP_H_CHUNKS];
static uint32_t g_hfree = AP_UR_NONE, g_hcount;

static struct ur_handle *handle_at(uint32_t id)
{
	struct ur_handle *c;

	if (id >= AP_H_CHUNK * AP_H_CHUNKS)
		return NULL;
	c = atomic_load_explicit(&g_hchunks[id / AP_H_CHUNK], memory_order_acquire);
	return c ? &c[id % AP_H_CHUNK] : NULL;
}

int ap_ur_handle_new(struct asyncpool_region *r, void **ctx)
{
	struct ur_handle *h;
	uint32_t id, gen;

	pthread_mutex_lock(&ap_ur_lock);
	if (g_hfree != AP_UR_NONE) {
		id = g_hfree;
		g_hfree = handle_at(id)->next_free;
	} else {
		if (g_hcount == AP_H_CHUNK * AP_H_CHUNKS) {
			pthread_mutex_unlock(&ap_ur_lock);
			return -ENOBUFS;
		}
		id = g_hcount;
		if (id / AP_H_CHUNK < AP_H_CHUNKS && !handle_at(id)) {
			struct ur_handle *c = calloc(AP_H_CHUNK, sizeof(*c));

			if (!c) {
				pthread_mutex_unlock(&ap_ur_lock);
				return -ENOMEM;
			}
			atomic_store_explicit(&g_hchunks[id / AP_H_CHUNK], c, memory_order_release);
		}
		g_hcount++;
	}
	h = handle_at(id);
	gen = atomic_load_explicit(&h->gen, memory_order_relaxed) + 1;
	atomic_store_explicit(&h->gen, gen, memory_order_release);
	atomic_store_explicit(&h->r, r, memory_order_release);
	pthread_mutex_unlock(&ap_ur_lock);
	/* 16 bits of id, the generation above (truncated on 32-bit). */
	*ctx = (void *)(((uintptr_t)gen << 16) | id);
	return 0;
}

void ap_ur_handle_retire(void *ctx)
{
	uint32_t id = (uint32_t)((uintptr_t)ctx & 0xffff);
	struct ur_handle *h = handle_at(id);

	pthread_mutex_lock(&ap_ur_lock);
	atomic_store_explicit(&h->r, NULL, memory_order_release);
	atomic_fetch_add_explicit(&h->gen, 1, memory_order_acq_rel);
	h->next_free = g_hfree;
	g_hfree = id;
	pthread_mutex_unlock(&ap_ur_lock);
}

struct asyncpool_region *ap_ur_handle_region(void *ctx)
{
	uintptr_t v = (uintptr_t)ctx;
	struct ur_handle *h = handle_at((uint32_t)(v & 0xffff));
	struct asyncpool_region *r;
	uint32_t gen = (uint32_t)(v >> 16);

	if (!h)
		return NULL;
	r = atomic_load_explicit(&h->r, memory_order_acquire);
	if (atomic_load_explicit(&h->gen, memory_order_acquire) != gen)
		return NULL;
	return r;
}
#endif
