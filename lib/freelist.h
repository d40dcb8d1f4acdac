/* SPDX-License-Identifier: MIT */
/*
 * The lock-free index freelist: the bottom layer of a pool.  It knows
 * the layout (pool_layout.h) and the buffer states (buffer_state.h),
 * nothing of caches, leases or regions.
 */
#ifndef ASYNCPOOL_FREELIST_H
#define ASYNCPOOL_FREELIST_H

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buffer_state.h"
#include "internal.h"
#include "pool_layout.h"
#include "wait_word.h"

struct ap_freelist {
	struct ap_pool_head     *line;  /* the head word */
	_Atomic uint64_t        *state; /* state of each buffer */
	_Atomic uint32_t        *link;  /* next free buffer after each */
	_Atomic uint32_t        *depth; /* free buffers from each to the end */
	struct ap_pool_counters *ctr;
	uint32_t                 count;
	uint32_t                 me;    /* holder: attachment slot + 1, or 0 */
	struct ap_attach        *att;   /* our attachment (steps), or NULL */
	bool                     shared;        /* others map it: shared futex, reclaim */
	bool                     lazy;          /* caches lend without a store (buffer_state.h) */
	uint32_t                 lent_tag;      /* AP_LENT if lazy, else AP_NO_LENT */
	/* Lent buffers given back other than into a cache (negative), and
	 * the balance of the caches freed since (pool_cache.c): the audit's. */
	_Atomic int64_t          lent;
	/* steps[k].busy 1: a thread of ours is in att->step[k] (freelist.c,
	 * step_begin).  64 bytes apart, and after the fields every pop
	 * reads, so that threads popping at once do not share a line. */
	struct {
		uint32_t         pad[15];
		_Atomic uint32_t busy;
	} steps[AP_STEPS];
};

/*
 * Test builds can stall a thread between reading the head and its CAS,
 * and stop at the named points of each step (tests kill a process there).
 */
enum ap_test_point {
	AP_TP_POP_RECORDED,     /* a pop wrote its step, before the head CAS */
	AP_TP_POP_CASED,        /* after the head CAS, before the mark */
	AP_TP_POP_MARKED,       /* marked one buffer of a chain */
	AP_TP_RELEASE_CLAIMED,  /* a release claimed, before the push */
	AP_TP_PUSH_LINKED,      /* a chain is linked, before its head CAS */
	AP_TP_FLUSH_UNCACHED,   /* a flush uncached a buffer */
	AP_TP_CHAN_SEND_RECORDED, /* a send wrote its step, before its first CAS */
	AP_TP_CHAN_SEND_QUEUED, /* a send queued one word, before its publish */
	AP_TP_CHAN_SEND_PUBLISHED, /* a send published, before it clears its step */
	AP_TP_CHAN_RECV_TAKEN,  /* a receive took one word, before it moves head */
	AP_TP_CHAN_DRAIN_CLAIMED, /* a reclaim claimed a channel's buffer, before its push */
	AP_TP_CHAN_SEND_TOKEN,  /* a send stored a slot's token, before its CAS of the word */
	AP_TP_CHAN_RECV_FROM,   /* a receive wrote from[], before its CAS of the word */
	AP_TP_CHAN_REDO_TOKEN,  /* a redelivery wrote its slot, before its CAS of the word */
	AP_TP_CHAN_REDO_QUEUED, /* a redelivery queued the word, before its publish */
	AP_TP_RECLAIM_CLAIMED,  /* a reclaim claimed a dead holder's buffer, before its push */
	AP_TP_RECLAIM_PUSHED,   /* a reclaim pushed what it claimed, before it frees the dead slots */
	AP_TP_COUNT
};
#ifdef ASYNCPOOL_TEST_HOOKS
extern void (*ap_test_hook_before_cas)(void);
extern void (*ap_test_hook_point)(enum ap_test_point);
#define AP_TEST_POINT() do { if (ap_test_hook_before_cas) ap_test_hook_before_cas(); } while (0)
#define AP_TEST_AT(p) do { if (ap_test_hook_point) ap_test_hook_point(p); } while (0)
#else
#define AP_TEST_POINT() do { } while (0)
#define AP_TEST_AT(p) do { } while (0)
#endif

/*
 * Pop one buffer and mark it with the kind its taker gives (LEASED or
 * CACHED, buffer_state.h), a new generation in *gen.
 */
int ap_fl_pop(struct ap_freelist *fl, uint32_t kind, uint32_t *idx, uint32_t *gen);
/*
 * Pop at least min and at most max buffers as one chain with one CAS,
 * mark each, and store their indices at out and (if gens) generations
 * at gens, stride bytes apart.  A shared pool takes at most
 * AP_STEP_WORDS per CAS: min must not be more.
 */
int ap_fl_pop_chain(struct ap_freelist *fl, void *out, void *gens, size_t stride, uint32_t min,
		    uint32_t max, uint32_t kind, uint32_t *got);
/*
 * The same, of a local pool: exactly n into idx[] and gen[], each word
 * marked mark | its new generation (mark: a kind and an owner,
 * buffer_state.h).  0, -ENOBUFS, -EUCLEAN, or -EINVAL for a pool with
 * attachment or shared.
 */
int ap_fl_pop_owned(struct ap_freelist *fl, uint32_t *idx, uint32_t *gen, uint32_t n,
		    uint64_t mark);
/*
 * leased -> free: claim buffer idx leased with generation gen (0: any),
 * then link it in.  0, -EINVAL (out of range), -EALREADY (not leased,
 * or not in that generation: counted) or -EUCLEAN (the head never held
 * still: the claim is given back).
 */
int ap_fl_release(struct ap_freelist *fl, uint32_t idx, uint32_t gen);
/* Link in a buffer the caller has claimed (ap_state_claim_leased()). */
int ap_fl_push(struct ap_freelist *fl, uint32_t idx);
/*
 * Link in n claimed buffers as one chain with one CAS.  Both pushes wake
 * the waiters if any (wait_word.h, one load when there are none): every
 * path that links buffers in comes through one of them.
 */
int ap_fl_push_chain(struct ap_freelist *fl, const uint32_t *idx, uint32_t n);
/* ap_fl_push_chain() of the buffers of tokens tok[0..n) (generation << 32 | index). */
int ap_fl_push_tokens(struct ap_freelist *fl, const uint64_t *tok, uint32_t n);
/* The buffers on the list, bounded and honest about a cycle: a walk. */
uint32_t ap_fl_count(const struct ap_freelist *fl);
/*
 * The buffers on the list in O(1): the depth of the head (pool_layout.h).
 * Exact while no one changes the list, a recent value otherwise; at
 * most the capacity, whatever a peer wrote.
 */
uint32_t ap_fl_free(const struct ap_freelist *fl);
void ap_fl_count_bad_release(const struct ap_freelist *fl, uint64_t n);
void ap_fl_count_fenced(const struct ap_freelist *fl, uint64_t n);
/*
 * An adoption made buffer idx LEASED at the generation after gen: the
 * lease of gen is fenced, recorded in link[] and depth[] while the
 * adopter holds it (pool_layout.h, AP_FL_FENCED).
 */
void ap_fl_fence(struct ap_freelist *fl, uint32_t idx, uint32_t gen);
/* Whether a refused release of buffer idx at gen is one that an adoption fenced. */
bool ap_fl_fenced(const struct ap_freelist *fl, uint32_t idx, uint32_t gen);
/*
 * A release of buffer idx at generation gen was refused: counted in
 * fenced_releases if ap_fl_fenced(), else in bad_releases.
 */
void ap_fl_count_refused(const struct ap_freelist *fl, uint32_t idx, uint32_t gen);

/* n lent buffers came back other than into a cache (fl->lent). */
static inline void ap_fl_lent_back(struct ap_freelist *fl, uint32_t n)
{
	atomic_fetch_sub_explicit(&fl->lent, n, memory_order_relaxed);
}

/*
 * The single pop and the push as inline loops: freelist.c's functions
 * are these, out of line, and the uncached lend (pool_lend.c) and its
 * owner's release (pool_owner.c) compile them in, so that the uncached
 * pair is one function per direction (issue 34).
 */
/* A peer that rewrites the head without end must not keep us spinning. */
#define AP_MAX_RETRIES (1u << 22)


static inline void ap_fl_count_empty(const struct ap_freelist *fl)
{
	atomic_fetch_add_explicit(&fl->ctr->empty, 1, memory_order_relaxed);
}

/* Inline, as the count of an empty pop: a call on the pop's and the
 * push's way out would cost their callers a stack frame. */
static inline void ap_fl_count_corruption(const struct ap_freelist *fl, uint64_t n)
{
	atomic_fetch_add_explicit(&fl->ctr->corruptions, n, memory_order_relaxed);
}

/*
 * A walk from head *h met something it cannot use.  If the head moved,
 * take the new one and retry (true); if not, the list itself is what was
 * read (false).
 */
static inline bool ap_fl_head_moved(const struct ap_freelist *fl, uint64_t *h)
{
	uint64_t again = atomic_load_explicit(&fl->line->head, memory_order_acquire);

	if (again == *h)
		return false;
	*h = again;
	return true;
}

/*
 * Write what a pop is about to take, before its CAS on the head: the
 * buffers (at out, stride bytes apart) and the word seen of each.
 */
static inline void ap_fl_step_record(struct ap_step *st, const void *out, size_t stride,
				     const uint64_t *w, uint32_t k)
{
	if (!st)
		return;
	atomic_store_explicit(&st->count, 0, memory_order_relaxed);
	for (uint32_t j = 0; j < k; j++) {
		const uint32_t *i = (const uint32_t *)((const char *)out + (size_t)j * stride);

		atomic_store_explicit(&st->idx[j], *i, memory_order_relaxed);
		atomic_store_explicit(&st->word[j], w[j], memory_order_relaxed);
	}
	atomic_store_explicit(&st->count, k, memory_order_relaxed);
	AP_TEST_AT(AP_TP_POP_RECORDED);
}

/*
 * Mark a buffer our head CAS took.  In a shared pool, by CAS from the
 * word seen before the head CAS: a reclaim may have claimed it (false).
 * A local pool has no reclaim: a store.
 */
static inline bool ap_fl_take(struct ap_freelist *fl, uint32_t i, uint64_t seen, uint32_t kind,
			      uint32_t *gen)
{
	if (fl->shared)
		return ap_state_take(&fl->state[i], seen, kind, fl->me, gen);
	*gen = ap_gen_next(AP_W_GEN(seen));
	atomic_store_explicit(&fl->state[i], AP_W_MAKE(kind, 0, *gen), memory_order_relaxed);
	return true;
}

/* A local pool's take, the word marked mark | its next generation (the single lend). */
static inline bool ap_fl_take_marked(struct ap_freelist *fl, uint32_t i, uint64_t seen,
				     uint64_t mark, uint32_t *gen)
{
	*gen = ap_gen_next(AP_W_GEN(seen));
	atomic_store_explicit(&fl->state[i], mark | *gen, memory_order_relaxed);
	return true;
}

/*
 * The pop, with the step st of our attachment or NULL; inlined into the
 * two callers below, so that a pool without attachment (a local pool,
 * raw shared memory) runs a copy with no step code at all.
 */
static inline __attribute__((always_inline)) int
ap_fl_pop_loop(struct ap_freelist *fl, uint32_t kind, uint64_t mark, uint32_t *idx, uint32_t *gen,
	       struct ap_step *st)
{
	struct ap_pool_head *line = fl->line;
	uint64_t h = atomic_load_explicit(&line->head, memory_order_acquire);

	for (uint32_t tries = 0; tries < AP_MAX_RETRIES; tries++) {
		uint32_t i = AP_HEAD_INDEX(h), n;
		uint64_t w;

		if (i == AP_FL_END) {
			ap_fl_count_empty(fl);
			return -ENOBUFS;
		}
		if (AP_UNLIKELY(i >= fl->count))
			break;
		w = ap_state_load(&fl->state[i]);
		n = atomic_load_explicit(&fl->link[i], memory_order_relaxed);
		AP_TEST_POINT();
		if (AP_UNLIKELY(AP_W_KIND(w) != AP_K_FREE || (n >= fl->count && n != AP_FL_END))) {
			/* Taken under a stale head, or the list is corrupt. */
			if (!ap_fl_head_moved(fl, &h))
				break;
			continue;
		}
		/*
		 * A step is recorded only from a word read while i was the
		 * head (the head held still across the read): a stale head's
		 * i may be in another thread's push, whose word a reclaim
		 * after our death must not take (tests/model/crash.pml).
		 */
		if (st) {
			if (ap_fl_head_moved(fl, &h))
				continue;
			ap_fl_step_record(st, &i, sizeof(i), &w, 1);
		}
		if (atomic_compare_exchange_weak_explicit(&line->head, &h,
							  AP_HEAD_MAKE(n, AP_HEAD_TAG(h) + 1),
							  memory_order_acquire,
							  memory_order_acquire)) {
			AP_TEST_AT(AP_TP_POP_CASED);
			if (AP_LIKELY(mark ? ap_fl_take_marked(fl, i, w, mark, gen) :
					  ap_fl_take(fl, i, w, kind, gen))) {
				*idx = i;
				return 0;
			}
			/* A reclaim took it: it pushes it back. */
			h = atomic_load_explicit(&line->head, memory_order_acquire);
		}
	}
	ap_fl_count_corruption(fl, 1);
	return -EUCLEAN;
}

/*
 * One push loop, inlined into every push: a single push runs it with n
 * 1; the buffers are idx[0..n), or the indices of tokens tok[0..n).
 */
static inline __attribute__((always_inline)) int
ap_fl_push_loop(struct ap_freelist *fl, const uint32_t *idx, const uint64_t *tok, uint32_t n)
{
#define AP_PUSHED(j) (tok ? (uint32_t)tok[j] : idx[j])
	struct ap_pool_head *line = fl->line;
	uint64_t h;

	if (!n)
		return 0;
	/* acquire: the depth of the head, written before its push's CAS. */
	h = atomic_load_explicit(&line->head, memory_order_acquire);
	for (uint32_t tries = 0; tries < AP_MAX_RETRIES; tries++) {
		uint32_t top = AP_HEAD_INDEX(h);
		uint32_t d = top < fl->count ?
			     atomic_load_explicit(&fl->depth[top], memory_order_relaxed) : 0;

		/*
		 * If the CAS below succeeds, top was the head all along (the
		 * tag), so d was its depth: ours count on from it.  The links
		 * in one pass with the depths (a retry writes them again).
		 */
		for (uint32_t j = 0; j + 1 < n; j++) {
			ap_state_set_link(&fl->link[AP_PUSHED(j)], AP_PUSHED(j + 1));
			atomic_store_explicit(&fl->depth[AP_PUSHED(j)], d + n - j, memory_order_relaxed);
		}
		atomic_store_explicit(&fl->depth[AP_PUSHED(n - 1)], d + 1, memory_order_relaxed);
		ap_state_set_link(&fl->link[AP_PUSHED(n - 1)], top);
		AP_TEST_POINT();
		AP_TEST_AT(AP_TP_PUSH_LINKED);
		/*
		 * release: the buffers' contents and links before the head;
		 * seq_cst, for the load of the wait word after it (wait_word.h).
		 * On x86 both are the same locked instruction.
		 */
		if (atomic_compare_exchange_weak_explicit(&line->head, &h,
							  AP_HEAD_MAKE(AP_PUSHED(0), AP_HEAD_TAG(h) + 1),
							  memory_order_seq_cst,
							  memory_order_acquire)) {
			ap_wait_wake(line, fl->shared);
			return 0;
		}
	}
	ap_fl_count_corruption(fl, 1);
	return -EUCLEAN;
#undef AP_PUSHED
}

#endif /* ASYNCPOOL_FREELIST_H */
