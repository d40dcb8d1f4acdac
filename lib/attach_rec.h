/* SPDX-License-Identifier: MIT */
/*
 * A handle's view of the attachment records (attach.c): the record of a
 * slot, and whether the process of a slot is alive as this handle can
 * tell.  Header-only, below both attach.c and reclaim.c: attach.c calls
 * the reclaim when every slot is taken, so the reclaim must not call
 * attach.c back (HACKING.md, "Who calls whom").
 */
#ifndef ASYNCPOOL_ATTACH_REC_H
#define ASYNCPOOL_ATTACH_REC_H

#include "pool_internal.h"
#include "attach_live.h"

/* From our own geometry: the header is shared, so untrusted. */
static inline struct ap_attach *ap_attach_rec(const struct asyncpool *pool, uint32_t slot)
{
	struct ap_layout_geometry g;

	(void)ap_layout_geometry(pool->fl.count, true, &g);
	return (struct ap_attach *)((char *)pool->storage + g.attach_offset) + slot;
}

/* 1 alive, 0 dead or free, negative errno. */
static inline int ap_attach_alive(const struct asyncpool *pool, uint32_t slot)
{
	struct ap_attach *a = ap_attach_rec(pool, slot);

	if (pool->lock_fd >= 0 && slot == pool->slot)
		return AP_ATT_STATE(atomic_load_explicit(&a->life, memory_order_acquire)) ==
		       AP_ATT_LIVE;
	/* Through a borrowed description a lock of that description looks
	 * free: cannot tell, so a LIVE record is taken as alive (reclaim
	 * leaves it to a handle with a description of its own). */
	if (pool->lock_borrowed &&
	    AP_ATT_STATE(atomic_load_explicit(&a->life, memory_order_acquire)) == AP_ATT_LIVE)
		return -EOPNOTSUPP;
	return ap_attach_live(a, pool->lock_fd, slot);
}

#endif /* ASYNCPOOL_ATTACH_REC_H */
