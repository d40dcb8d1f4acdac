/* SPDX-License-Identifier: MIT */
/*
 * An owner's inbox (issue 22, pool_owner.c): the releases other threads
 * send to the owner of a lent buffer, as tokens (generation << 32 |
 * index, never 0), in a bounded ring of cap slots.  Many senders, one
 * receiver at a time (the owner inside its cache window, or, under
 * ap_cache_lock, a flusher that excluded it or anyone once it is an
 * orphan).
 *
 *   sender (k tokens)                      receiver
 *   t = tail                               h = head
 *   t + k - head_pub > cap? full           while (tok = slot[h]) != 0:
 *   CAS tail t -> t + k                        slot[h] = 0, h++, decide tok
 *   slot[t .. t+k) = tokens (release)      head_pub = h (release)
 *
 * A slot is empty while 0: the receiver stops at the first one, so a
 * token is read only once its sender wrote it, and a sender that
 * reserved but has not written yet holds back the ones behind it until
 * the next look (a batch is published in order).  A sender reserves
 * only below head_pub + cap, whose slots the receiver zeroed before it
 * published head_pub: no token overwrites one not yet read.  One CAS
 * per batch; the receiver's side has no atomic read-modify-write.
 */
#ifndef ASYNCPOOL_POOL_INBOX_H
#define ASYNCPOOL_POOL_INBOX_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "internal.h"
#include "lease.h"
#include "test_stall.h"

/*
 * Bit 31 of a token's index half, free (an index is below 2^31 - 1): the
 * sender wrote the buffer's released[] hint itself (pool_owner.h), so
 * the owner need not.
 */
#define AP_INBOX_HINTED 0x80000000u
#define AP_INBOX_INDEX(tok) (AP_TOKEN_INDEX(tok) & ~AP_INBOX_HINTED)

struct ap_inbox {
	_Alignas(AP_CACHE_LINE) _Atomic uint32_t tail;  /* reserved by senders */
	/* Read by senders, written by the receiver once per look. */
	_Alignas(AP_CACHE_LINE) _Atomic uint32_t head_pub;
	_Atomic uint32_t orphan;        /* the owner's thread exited */
	uint32_t         mask;          /* cap - 1, cap a power of two */
	/* The receiver's. */
	_Alignas(AP_CACHE_LINE) uint32_t head;
	_Atomic int64_t  out;           /* lent by this owner, not back yet */
	_Alignas(AP_CACHE_LINE) _Atomic uint64_t slot[];
};

/* Tokens in flight: sent (or being sent) and not yet read.  An estimate. */
static inline uint32_t ap_inbox_count(const struct ap_inbox *b)
{
	return atomic_load_explicit(&((struct ap_inbox *)b)->tail, memory_order_relaxed) -
	       atomic_load_explicit(&((struct ap_inbox *)b)->head_pub, memory_order_relaxed);
}

/*
 * Send k tokens (k <= cap): false if the ring has no room for them.
 * After a true, the caller fences (seq_cst, AP_TSO_FENCE()) before it
 * looks at orphan and at the pool's waiters (pool_owner.c).
 */
static inline bool ap_inbox_send(struct ap_inbox *b, const uint64_t *tok, uint32_t k)
{
	uint32_t t = atomic_load_explicit(&b->tail, memory_order_relaxed);

	do {
		if (t + k - atomic_load_explicit(&b->head_pub, memory_order_acquire) > b->mask + 1)
			return false;
	} while (!atomic_compare_exchange_weak_explicit(&b->tail, &t, t + k, memory_order_relaxed,
						       memory_order_relaxed));
	AP_TEST_STALL(AP_TS_INBOX_SEND);
	for (uint32_t j = 0; j < k; j++)
		AP_TSO_STORE(&b->slot[(t + j) & b->mask], tok[j], memory_order_release);
	return true;
}

/*
 * The next token for the receiver, 0 if none is published yet.  The
 * receiver calls ap_inbox_done() after the last one it took.
 */
static inline uint64_t ap_inbox_next(struct ap_inbox *b)
{
	_Atomic uint64_t *s = &b->slot[b->head & b->mask];
	uint64_t tok = atomic_load_explicit(s, memory_order_acquire);

	if (tok) {
		atomic_store_explicit(s, 0, memory_order_relaxed);
		b->head++;
	}
	return tok;
}

static inline void ap_inbox_done(struct ap_inbox *b)
{
	atomic_store_explicit(&b->head_pub, b->head, memory_order_release);
}

#endif /* ASYNCPOOL_POOL_INBOX_H */
