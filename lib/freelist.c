/* SPDX-License-Identifier: MIT */
/*
 * The lock-free LIFO freelist of buffer indices.
 *
 * The head is one 64-bit word, {index, tag}, changed only by CAS; every
 * successful CAS bumps the 32-bit tag, so a thread that read the head,
 * stalled, and saw the same index come back cannot pop with a stale next
 * (ABA).  next[i] holds the index after i while i is on the list; while
 * it is off the list, its state (buffer_state.h).
 *
 * A walk (a pop reads one link, a chain pop up to max) may run over
 * buffers that another thread pops, claims or pushes under it: every
 * value it reads is range-checked, and a value that is not a link makes
 * it re-read the head.  If the head has not moved since the walk began,
 * nothing was popped or pushed, so the links walked were the list: an
 * index out of range then is corruption, and an early end means the
 * list really is that short.  A head that moved means retry.
 *
 * Everything read from the layout may come from another process, so
 * every retry loop is bounded.
 */
#include "freelist.h"

#include <errno.h>

#include "buffer_state.h"
#include "internal.h"
#include "pool_wait.h"

#ifdef ASYNCPOOL_TEST_HOOKS
void (*ap_test_hook_before_cas)(void);
#endif

/* A peer that rewrites the head without end must not keep us spinning. */
#define AP_MAX_RETRIES (1u << 22)

void ap_fl_count_corruption(const struct ap_freelist *fl, uint64_t n)
{
	atomic_fetch_add_explicit(&fl->ctr->corruptions, n, memory_order_relaxed);
}

void ap_fl_count_bad_release(const struct ap_freelist *fl, uint64_t n)
{
	atomic_fetch_add_explicit(&fl->ctr->bad_releases, n, memory_order_relaxed);
}

static void count_empty(const struct ap_freelist *fl)
{
	atomic_fetch_add_explicit(&fl->ctr->empty, 1, memory_order_relaxed);
}

/*
 * A walk from head *h met something it cannot use.  If the head moved,
 * take the new one and retry (true); if not, the list itself is what was
 * read (false).
 */
static inline bool head_moved(const struct ap_freelist *fl, uint64_t *h)
{
	uint64_t again = atomic_load_explicit(&fl->line->head, memory_order_acquire);

	if (again == *h)
		return false;
	*h = again;
	return true;
}

int ap_fl_pop(struct ap_freelist *fl, uint32_t mark, uint32_t *idx)
{
	struct ap_pool_head *line = fl->line;
	uint64_t h = atomic_load_explicit(&line->head, memory_order_acquire);

	for (uint32_t tries = 0; tries < AP_MAX_RETRIES; tries++) {
		uint32_t i = AP_HEAD_INDEX(h), n;

		if (i == AP_FL_END) {
			count_empty(fl);
			return -ENOBUFS;
		}
		if (AP_UNLIKELY(i >= fl->count)) {
			ap_fl_count_corruption(fl, 1);
			return -EUCLEAN;
		}
		n = atomic_load_explicit(&fl->next[i], memory_order_relaxed);
		AP_TEST_POINT();
		if (AP_UNLIKELY(n >= fl->count && n != AP_FL_END)) {
			if (!head_moved(fl, &h)) {
				ap_fl_count_corruption(fl, 1);
				return -EUCLEAN;
			}
			continue;
		}
		if (atomic_compare_exchange_weak_explicit(&line->head, &h,
							  AP_HEAD_MAKE(n, AP_HEAD_TAG(h) + 1),
							  memory_order_acquire,
							  memory_order_acquire)) {
			ap_state_take(&fl->next[i], mark);
			*idx = i;
			return 0;
		}
	}
	ap_fl_count_corruption(fl, 1);
	return -EUCLEAN;
}

#define AP_OUT(j) (*(uint32_t *)((char *)out + (size_t)(j) * stride))

int ap_fl_pop_chain(struct ap_freelist *fl, void *out, size_t stride, uint32_t min,
		    uint32_t max, uint32_t mark, uint32_t *got)
{
	struct ap_pool_head *line = fl->line;
	uint64_t h = atomic_load_explicit(&line->head, memory_order_acquire);

	*got = 0;
	for (uint32_t tries = 0; tries < AP_MAX_RETRIES; tries++) {
		uint32_t i = AP_HEAD_INDEX(h), k = 0;

		while (k < max && i < fl->count) {
			AP_OUT(k) = i;
			k++;
			i = atomic_load_explicit(&fl->next[i], memory_order_relaxed);
		}
		if (AP_UNLIKELY(i >= fl->count && i != AP_FL_END)) {
			if (!head_moved(fl, &h)) {
				ap_fl_count_corruption(fl, 1);
				return -EUCLEAN;
			}
			continue;
		}
		if (k < min) {
			/* A claimed buffer (AP_FL_END) under a stale walk looks
			 * like the end: only a head that held still means empty. */
			if (head_moved(fl, &h))
				continue;
			count_empty(fl);
			return -ENOBUFS;
		}
		AP_TEST_POINT();
		if (atomic_compare_exchange_weak_explicit(&line->head, &h,
							  AP_HEAD_MAKE(i, AP_HEAD_TAG(h) + 1),
							  memory_order_acquire,
							  memory_order_acquire)) {
			for (uint32_t j = 0; j < k; j++)
				ap_state_take(&fl->next[AP_OUT(j)], mark);
			*got = k;
			return 0;
		}
	}
	ap_fl_count_corruption(fl, 1);
	return -EUCLEAN;
}

#undef AP_OUT

/*
 * Link the chain first..last (linked among themselves) in front of the
 * head with one CAS.  seq_cst: release for the buffers' contents and
 * links before the head, and for the load of the wait word after it
 * (pool_wait.h); on x86 both are the same locked instruction.
 */
static inline int push_linked(struct ap_freelist *fl, uint32_t first, uint32_t last)
{
	struct ap_pool_head *line = fl->line;
	uint64_t h = atomic_load_explicit(&line->head, memory_order_relaxed);

	for (uint32_t tries = 0; tries < AP_MAX_RETRIES; tries++) {
		atomic_store_explicit(&fl->next[last], AP_HEAD_INDEX(h), memory_order_relaxed);
		AP_TEST_POINT();
		if (atomic_compare_exchange_weak_explicit(&line->head, &h,
							  AP_HEAD_MAKE(first, AP_HEAD_TAG(h) + 1),
							  memory_order_seq_cst,
							  memory_order_relaxed)) {
			ap_wait_wake(line, fl->shared);
			return 0;
		}
	}
	ap_fl_count_corruption(fl, 1);
	return -EUCLEAN;
}

int ap_fl_push(struct ap_freelist *fl, uint32_t idx)
{
	return push_linked(fl, idx, idx);
}

int ap_fl_push_chain(struct ap_freelist *fl, const uint32_t *idx, uint32_t n)
{
	if (!n)
		return 0;
	for (uint32_t j = 0; j + 1 < n; j++)
		atomic_store_explicit(&fl->next[idx[j]], idx[j + 1], memory_order_relaxed);
	return push_linked(fl, idx[0], idx[n - 1]);
}

int ap_fl_release(struct ap_freelist *fl, uint32_t idx)
{
	int rc;

	if (AP_UNLIKELY(idx >= fl->count))
		return -EINVAL;
	if (AP_UNLIKELY(!ap_state_claim_leased(&fl->next[idx]))) {
		ap_fl_count_bad_release(fl, 1);
		return -EALREADY;
	}
	rc = ap_fl_push(fl, idx);
	if (AP_UNLIKELY(rc))
		ap_state_unclaim(&fl->next[idx]);
	return rc;
}

static inline uint32_t link_of(const struct ap_freelist *fl, uint32_t i)
{
	return atomic_load_explicit(&fl->next[i], memory_order_relaxed);
}

/*
 * The distinct buffers on a list from start that does not end within
 * count steps, so has a cycle (Brent's algorithm: no memory, at most
 * about 3 x count steps).  A link out of range (the list changing under
 * us) stops it with what it has.
 */
static uint32_t count_cyclic(const struct ap_freelist *fl, uint32_t start)
{
	uint32_t power = 1, lambda = 1, mu = 0, tortoise = start, hare = link_of(fl, start);
	uint64_t steps = 0, limit = 2 * (uint64_t)fl->count + 2;

	while (tortoise != hare) {
		if (hare >= fl->count || ++steps > limit)
			return lambda < fl->count ? lambda : fl->count;
		if (power == lambda) {
			tortoise = hare;
			power *= 2;
			lambda = 0;
		}
		hare = link_of(fl, hare);
		lambda++;
	}
	tortoise = hare = start;
	for (uint32_t j = 0; j < lambda && hare < fl->count; j++)
		hare = link_of(fl, hare);
	while (tortoise != hare && tortoise < fl->count && hare < fl->count && mu < fl->count) {
		tortoise = link_of(fl, tortoise);
		hare = link_of(fl, hare);
		mu++;
	}
	return (uint64_t)mu + lambda < fl->count ? mu + lambda : fl->count;
}

/*
 * Count the free buffers by walking the list, bounded by the capacity.
 * Exact while no other thread changes the pool; a walk that meets a
 * buffer taken under it stops there.  A list that does not end within
 * the capacity has a cycle: its distinct buffers are counted, and so is
 * a corruption.
 */
uint32_t ap_fl_count(const struct ap_freelist *fl)
{
	uint64_t h = atomic_load_explicit(&fl->line->head, memory_order_acquire);
	uint32_t start = AP_HEAD_INDEX(h), i = start, n = 0;

	while (i < fl->count && n < fl->count) {
		n++;
		i = link_of(fl, i);
	}
	if (n == fl->count && i < fl->count) {
		ap_fl_count_corruption(fl, 1);
		return count_cyclic(fl, start);
	}
	return n;
}
