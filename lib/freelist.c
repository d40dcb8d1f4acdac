/* SPDX-License-Identifier: MIT */
/*
 * The lock-free LIFO freelist of buffer indices.
 *
 * The head is one 64-bit word, {index, tag}, changed only by CAS; every
 * successful CAS bumps the 32-bit tag, so a thread that read the head,
 * stalled, and saw the same index come back cannot pop with a stale next
 * (ABA).  link[i] holds the index after i while i is on the list, and
 * its state word the kind FREE; off the list, another kind
 * (buffer_state.h).  A pop reads link[head] between its load of the head
 * and its CAS: the tag proves at the CAS that the head, and so its link,
 * did not change.
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
#include <sched.h>
#include <stdlib.h>

#include "buffer_state.h"
#include "internal.h"
#include "wait_word.h"

#ifdef ASYNCPOOL_TEST_HOOKS
void (*ap_test_hook_before_cas)(void);
void (*ap_test_hook_point)(enum ap_test_point);
void (*ap_test_hook_stall)(enum ap_test_stall);

/* The emulated store buffer (test_stall.h): first in, first out. */
_Thread_local int ap_test_tso_armed;
static _Thread_local struct {
	void *p;
	uint64_t v;
	unsigned size;
} tso_buf[256];
static _Thread_local unsigned tso_n;
#define TSO_OR4 (0x100u | 4u)   /* a held fetch_or of a 32-bit word */

void ap_test_tso_flush(void)
{
	for (unsigned i = 0; i < tso_n; i++) {
		if (tso_buf[i].size == 8)
			__atomic_store_n((uint64_t *)tso_buf[i].p, tso_buf[i].v, __ATOMIC_RELEASE);
		else if (tso_buf[i].size == 4)
			__atomic_store_n((uint32_t *)tso_buf[i].p, (uint32_t)tso_buf[i].v,
					 __ATOMIC_RELEASE);
		else if (tso_buf[i].size == 1)  /* an atomic_bool (uring_recv.c) */
			__atomic_store_n((uint8_t *)tso_buf[i].p, (uint8_t)tso_buf[i].v,
					 __ATOMIC_RELEASE);
		else if (tso_buf[i].size == TSO_OR4)
			__atomic_fetch_or((uint32_t *)tso_buf[i].p, (uint32_t)tso_buf[i].v,
					  __ATOMIC_SEQ_CST);
		else
			abort();
	}
	tso_n = 0;
}

void ap_test_tso_hold(void *p, uint64_t v, unsigned size)
{
	if (tso_n == sizeof(tso_buf) / sizeof(tso_buf[0]))
		ap_test_tso_flush();    /* a full buffer drains: TSO allows it */
	tso_buf[tso_n].p = p;
	tso_buf[tso_n].v = v;
	tso_buf[tso_n].size = size;
	tso_n++;
}

uint32_t ap_test_tso_announce(_Atomic uint32_t *word)
{
	ap_test_tso_hold((void *)word, AP_WAIT_WAITERS, TSO_OR4);
	return atomic_load_explicit(word, memory_order_relaxed) | AP_WAIT_WAITERS;
}
#endif

/* A chain pop whose takes keep failing holds a buffer twice: give up. */
#define AP_MAX_LOST_TAKES 16u

void ap_fl_count_bad_release(const struct ap_freelist *fl, uint64_t n)
{
	atomic_fetch_add_explicit(&fl->ctr->bad_releases, n, memory_order_relaxed);
}

void ap_fl_fence(struct ap_freelist *fl, uint32_t idx, uint32_t gen)
{
	/* Ours alone while LEASED: no one else writes them until our push. */
	atomic_store_explicit(&fl->depth[idx], gen, memory_order_relaxed);
	atomic_store_explicit(&fl->link[idx], AP_FL_FENCED, memory_order_release);
}

bool ap_fl_fenced(const struct ap_freelist *fl, uint32_t idx, uint32_t gen)
{
	uint64_t w;

	if (idx >= fl->count || !gen)
		return false;
	/*
	 * Still LEASED at the generation the adoption gave, and its record
	 * names gen: the adopter holds it, and it fenced gen.  A record
	 * left from an older adoption names an older generation than the
	 * word's (a generation moves only forward), and a push rewrote
	 * both once the buffer went back.
	 */
	w = atomic_load_explicit(&fl->state[idx], memory_order_acquire);
	return AP_W_KIND(w) == AP_K_LEASED && AP_W_GEN(w) == ap_gen_next(gen) &&
	       atomic_load_explicit(&fl->link[idx], memory_order_acquire) == AP_FL_FENCED &&
	       atomic_load_explicit(&fl->depth[idx], memory_order_relaxed) == gen;
}

void ap_fl_count_fenced(const struct ap_freelist *fl, uint64_t n)
{
	atomic_fetch_add_explicit(&fl->ctr->fenced_releases, n, memory_order_relaxed);
}

void ap_fl_count_refused(const struct ap_freelist *fl, uint32_t idx, uint32_t gen)
{
	if (ap_fl_fenced(fl, idx, gen))
		ap_fl_count_fenced(fl, 1);
	else
		ap_fl_count_bad_release(fl, 1);
}

/*
 * A chain pop's CAS: the head from *h to next, its tag bumped (acquire:
 * what the walk read of the buffers it takes).  false with *h the head
 * now.
 */
static inline bool head_pop(struct ap_pool_head *line, uint64_t *h, uint32_t next)
{
	return atomic_compare_exchange_weak_explicit(&line->head, h,
						     AP_HEAD_MAKE(next, AP_HEAD_TAG(*h) + 1),
						     memory_order_acquire, memory_order_acquire);
}

/*
 * A step of our attachment for one pop, or NULL (no attachment: a local
 * pool, or raw shared memory).  Each thread of a process takes a free
 * one; more than AP_STEPS threads popping at the same instant take turns.
 *
 * Which steps are in use is kept in this handle's own memory
 * (fl->steps[]), not in the step's busy word: a peer can write the
 * layout, and with busy = 1 in every step it would keep every pop
 * spinning here for ever.  Only our own threads hold our steps, each
 * for one pop, whose retries are bounded (AP_MAX_RETRIES): so the wait
 * here is bounded by our own threads' progress, whatever a peer writes,
 * and every pop still records its step (the crash guarantees hold).
 * The layout's busy words are never read; only a reclaim writes them,
 * 0, into a dead slot's steps (asyncpool-shared(7): "written 0"), and
 * an attach leaves them as they are (issue 54: its loop that cleared
 * them was read by nothing).
 */
static struct ap_step *step_begin(struct ap_freelist *fl)
{
	/* initial-exec: no __tls_get_addr call on every pop of a shared pool */
	static __thread uint32_t hint __attribute__((tls_model("initial-exec")));
	struct ap_attach *a = fl->att;

	if (!a)
		return NULL;
	for (uint32_t k = hint, round = 0;; k++) {
		uint32_t s = k % AP_STEPS, idle = 0;

		if (atomic_load_explicit(&fl->steps[s].busy, memory_order_relaxed) == 0 &&
		    atomic_compare_exchange_strong_explicit(&fl->steps[s].busy, &idle, 1,
							    memory_order_acquire,
							    memory_order_relaxed)) {
			hint = s;
			return &a->step[s];
		}
		if (++round % AP_STEPS == 0)
			sched_yield();  /* all our steps are in our other threads' pops */
	}
}

static inline void step_end(struct ap_freelist *fl, struct ap_step *st)
{
	if (st) {
		atomic_store_explicit(&st->count, 0, memory_order_relaxed);
		atomic_store_explicit(&fl->steps[st - fl->att->step].busy, 0, memory_order_release);
	}
}

#define AP_OUT(p, j) (*(uint32_t *)((char *)(p) + (size_t)(j) * stride))

/* A pop with a step: out of line, so that a pool without attachment pops with no spill. */
static __attribute__((noinline)) int pop_attached(struct ap_freelist *fl, uint32_t kind,
						  uint32_t *idx, uint32_t *gen)
{
	struct ap_step *st = step_begin(fl);
	int rc = ap_fl_pop_loop(fl, kind, 0, idx, gen, st);

	step_end(fl, st);
	return rc;
}

int ap_fl_pop(struct ap_freelist *fl, uint32_t kind, uint32_t *idx, uint32_t *gen)
{
	if (fl->att)
		return pop_attached(fl, kind, idx, gen);
	return ap_fl_pop_loop(fl, kind, 0, idx, gen, NULL);
}

/* Give back buffers a chain pop marked (its own: a store, at the generations they had), then retry. */
static void untake(struct ap_freelist *fl, void *out, size_t stride, uint32_t k)
{
	uint32_t idx[AP_STEP_WORDS];

	for (uint32_t j = 0; j < k; j++) {
		idx[j] = AP_OUT(out, j);
		atomic_store_explicit(&fl->state[idx[j]],
				      AP_W_MAKE(AP_K_FREE, fl->me,
						ap_gen_prev(AP_W_GEN(ap_state_load(&fl->state[idx[j]])))),
				      memory_order_relaxed);
	}
	(void)ap_fl_push_chain(fl, idx, k);
}

int ap_fl_pop_chain(struct ap_freelist *fl, void *out, void *gens, size_t stride, uint32_t min,
		    uint32_t max, uint32_t kind, uint32_t *got)
{
	struct ap_pool_head *line = fl->line;
	uint64_t h = atomic_load_explicit(&line->head, memory_order_acquire);
	uint64_t seen[AP_STEP_WORDS];
	struct ap_step *st;
	uint32_t lost = 0;
	int rc = -EUCLEAN;

	*got = 0;
	if (fl->shared && max > AP_STEP_WORDS)
		max = AP_STEP_WORDS;
	if (min > max)
		return -EINVAL;
	st = step_begin(fl);
	for (uint32_t tries = 0; tries < AP_MAX_RETRIES; tries++) {
		uint32_t i = AP_HEAD_INDEX(h), k = 0, m = 0;
		bool odd = false;

		while (k < max && i < fl->count) {
			uint64_t w = ap_state_load(&fl->state[i]);

			if (AP_W_KIND(w) != AP_K_FREE) {
				odd = true;
				break;
			}
			if (k < AP_STEP_WORDS)
				seen[k] = w;
			AP_OUT(out, k) = i;
			k++;
			i = atomic_load_explicit(&fl->link[i], memory_order_relaxed);
		}
		if (AP_UNLIKELY(odd || (i >= fl->count && i != AP_FL_END))) {
			if (!ap_fl_head_moved(fl, &h))
				break;
			continue;
		}
		if (k < min) {
			/* A walk under a stale head may end early (a link
			 * rewritten by a push): only a head that held still
			 * means empty. */
			if (ap_fl_head_moved(fl, &h))
				continue;
			ap_fl_count_empty(fl);
			rc = -ENOBUFS;
			goto out;
		}
		if (st && k) {
			/* Words read while the head held still (above). */
			if (ap_fl_head_moved(fl, &h))
				continue;
			ap_fl_step_record(st, out, stride, seen, k);
		}
		AP_TEST_POINT();
		if (!head_pop(line, &h, i))
			continue;
		AP_TEST_AT(AP_TP_POP_CASED);
		for (uint32_t j = 0; j < k; j++) {
			uint32_t b = AP_OUT(out, j), g;
			uint64_t w = fl->shared ? seen[j] : ap_state_load(&fl->state[b]);

			if (AP_UNLIKELY(!ap_fl_take(fl, b, w, kind, &g)))
				continue;       /* a reclaim took it */
			AP_OUT(out, m) = b;
			if (gens)
				AP_OUT(gens, m) = g;
			m++;
			AP_TEST_AT(AP_TP_POP_MARKED);
		}
		if (AP_UNLIKELY(m < min)) {
			untake(fl, out, stride, m);
			/*
			 * A take fails only where a reclaim claimed the
			 * buffer after our head CAS: rare once, and never
			 * again and again, unless the chain holds a buffer
			 * twice (a list a peer made cyclic, pushing one
			 * buffer twice through a forged record).  Give up
			 * then, rather than retry AP_MAX_RETRIES times.
			 */
			if (++lost >= AP_MAX_LOST_TAKES)
				break;
			h = atomic_load_explicit(&line->head, memory_order_acquire);
			continue;
		}
		*got = m;
		rc = 0;
		goto out;
	}
	ap_fl_count_corruption(fl, 1);
out:
	step_end(fl, st);
	return rc;
}

/*
 * ap_fl_pop_chain() of exactly n buffers of a local pool (no steps, no
 * reclaim) into idx[] and gen[], each word marked mark | its next
 * generation: a pool that lends without a cache pops its buffers owned
 * at once (pool_lend.c).  The walk keeps each word's generation in
 * gen[]: a free word of a local pool changes only by the pop that takes
 * it, and the tag proves at the CAS that the chain walked is the one
 * taken.
 */
int ap_fl_pop_owned(struct ap_freelist *fl, uint32_t *idx, uint32_t *gen, uint32_t n,
		    uint64_t mark)
{
	struct ap_pool_head *line = fl->line;
	ap_word *const state = fl->state;
	_Atomic uint32_t *const link = fl->link;
	const uint32_t count = fl->count;
	uint64_t h = atomic_load_explicit(&line->head, memory_order_acquire);

	if (AP_UNLIKELY(fl->att || fl->shared))
		return -EINVAL;
	for (uint32_t tries = 0; tries < AP_MAX_RETRIES; tries++) {
		uint32_t i = AP_HEAD_INDEX(h), k = 0;
		bool odd = false;

		for (; k < n && i < count; k++) {
			uint64_t w = ap_state_load(&state[i]);

			if (AP_UNLIKELY(AP_W_KIND(w) != AP_K_FREE)) {
				odd = true;
				break;
			}
			idx[k] = i;
			gen[k] = AP_W_GEN(w);
			i = atomic_load_explicit(&link[i], memory_order_relaxed);
		}
		if (AP_UNLIKELY(odd || k < n || (i >= count && i != AP_FL_END))) {
			if (ap_fl_head_moved(fl, &h))
				continue;
			if (odd || k == n || i != AP_FL_END)
				break;          /* the list itself is corrupt */
			ap_fl_count_empty(fl);
			return -ENOBUFS;
		}
		AP_TEST_POINT();
		if (!head_pop(line, &h, i))
			continue;
		AP_TEST_AT(AP_TP_POP_CASED);
		for (uint32_t j = 0; j < n; j++) {
			gen[j] = ap_gen_next(gen[j]);
			atomic_store_explicit(&state[idx[j]], mark | gen[j], memory_order_relaxed);
		}
		return 0;
	}
	ap_fl_count_corruption(fl, 1);
	return -EUCLEAN;
}

#undef AP_OUT

int ap_fl_push(struct ap_freelist *fl, uint32_t idx)
{
	return ap_fl_push_loop(fl, &idx, NULL, 1);
}

int ap_fl_push_chain(struct ap_freelist *fl, const uint32_t *idx, uint32_t n)
{
	return ap_fl_push_loop(fl, idx, NULL, n);
}

int ap_fl_push_tokens(struct ap_freelist *fl, const uint64_t *tok, uint32_t n)
{
	return ap_fl_push_loop(fl, NULL, tok, n);
}

int ap_fl_release(struct ap_freelist *fl, uint32_t idx, uint32_t gen)
{
	uint64_t was;
	uint32_t kind;
	int rc;

	if (AP_UNLIKELY(idx >= fl->count))
		return -EINVAL;
	kind = ap_state_claim_leased_was(&fl->state[idx], gen, fl->me, fl->lent_tag, &was);
	if (AP_UNLIKELY(!kind)) {
		ap_fl_count_refused(fl, idx, gen);
		return -EALREADY;
	}
	AP_TEST_AT(AP_TP_RELEASE_CLAIMED);
	rc = ap_fl_push_loop(fl, &idx, NULL, 1);
	if (AP_UNLIKELY(rc))
		ap_state_unclaim(&fl->state[idx], was);
	else if (kind == AP_K_CACHED)
		ap_fl_lent_back(fl, 1);
	return rc;
}

/* The link of buffer i, or AP_FL_END... beyond range for a taken one. */
static inline uint32_t link_of(const struct ap_freelist *fl, uint32_t i)
{
	uint64_t w = ap_state_load(&fl->state[i]);

	return AP_W_KIND(w) == AP_K_FREE ?
	       atomic_load_explicit(&fl->link[i], memory_order_relaxed) : AP_FL_END - 1;
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

/*
 * The depth of the head, from a head that held still across the read
 * (the tag: nothing was pushed or popped in between, so the depth is
 * the one its push wrote).  A few tries under contention, then the last
 * value read: monitoring needs no more.
 */
uint32_t ap_fl_free(const struct ap_freelist *fl)
{
	uint64_t h = atomic_load_explicit(&fl->line->head, memory_order_acquire);
	uint32_t d = 0;

	for (int tries = 0; tries < 64; tries++) {
		uint32_t i = AP_HEAD_INDEX(h);
		uint64_t again;

		if (i >= fl->count)
			return 0;       /* empty (or a head a peer broke) */
		d = atomic_load_explicit(&fl->depth[i], memory_order_relaxed);
		atomic_thread_fence(memory_order_acquire);
		again = atomic_load_explicit(&fl->line->head, memory_order_acquire);
		if (again == h)
			break;
		h = again;
	}
	return d < fl->count ? d : fl->count;
}
