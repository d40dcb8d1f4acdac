/* SPDX-License-Identifier: MIT */
/*
 * Ownership (issue 22): one writer per lent buffer's word (pool_owner.h).
 *
 * In a local pool whose caches lend (fl.lazy), a buffer in a cache, or
 * lent from one, is owned by that cache: its word names the owner's id
 * (buffer_state.h), and only the owner writes it, with a load and a
 * store inside its window (ap_cache_enter ... leave).  A release on the
 * owner's thread is decided there and then (ap_cache_push); a release
 * on another thread reads the word (a stale or double copy is refused
 * at once), then sends the token to the owner: gathered per owner in
 * the releaser's outboxes, a batch of pool->outbox_batch into the
 * owner's inbox (pool_inbox.h) with one CAS.  The owner decides them in turn
 * when it next refills (ap_cache_fill), so two racing copies are
 * decided one after the other, with no atomic on the owner's side.
 *
 * The others that write an owned word come after the owner or exclude
 * it, and use a CAS: a flusher that stopped every owner (ap_bypass_all,
 * under ap_cache_lock) decides what is on its way (ap_owners_settle); once
 * the owner's thread has exited (its id an orphan), anyone.  A sender
 * looks at orphan after it published (a seq_cst fence between), and the
 * exiting owner drains its inbox after it set orphan: one of them sees
 * the other.  It wakes the pool's waiters the same way (wait_word.h),
 * and a waiter, a flush or an acquire that finds the pool empty settles
 * every inbox and outbox: nothing released is stranded.
 * tests/model/owner.pml proves the protocol.
 *
 * Without a cache (pool_lend.c), an owner decides the same way and
 * frees what it takes back: ap_owner_give_back() for its own release,
 * owner_drain_free() for its inbox.
 */
#include "pool_owner.h"
#include "pool_bypass.h"
#include "pool_depot.h"
#include "wait_word.h"

#include <sched.h>
#include <stdlib.h>

#define AP_OWNERS_MAX 1024u      /* ids per pool; a freed id is used again */

int ap_owner_table_init(struct asyncpool *pool)
{
	uint32_t cap = 64, batch;

	while (cap < pool->fl.count && cap < 4096)
		cap *= 2;
	pool->boxes = calloc(AP_OWNERS_MAX, sizeof(*pool->boxes));
	pool->owner_of = calloc(pool->fl.count, sizeof(*pool->owner_of));
	pool->released = calloc(pool->fl.count, sizeof(*pool->released));
	if (!pool->boxes || !pool->owner_of || !pool->released) {
		ap_owner_table_free(pool);
		return -ENOMEM;
	}
	pool->box_cap = cap;
	/*
	 * A send costs a CAS, a fence and two or three lines crossing to
	 * the owner, whatever its size: in a hand-off on two cores, 32
	 * tokens a send spent a quarter of the releasing side there.
	 * Larger batches as the pool grows, so that at most a 32nd of its
	 * buffers waits in one outbox, as 32 in 1,024 did; never more than
	 * an inbox holds (cap >= 64, and >= count up to 4,096).
	 */
	batch = AP_OUTBOX_BATCH_MIN;
	while (batch < AP_OUTBOX_BATCH_MAX && (uint64_t)batch * 64 <= pool->fl.count)
		batch *= 2;
	pool->outbox_batch = batch;
	atomic_store_explicit(&pool->box_count, 1, memory_order_relaxed);
	return 0;
}

void ap_owner_table_free(struct asyncpool *pool)
{
	for (uint32_t o = 1; pool->boxes && o < pool->box_count; o++)
		free(pool->boxes[o]);
	free(pool->boxes);
	free((void *)pool->owner_of);
	free((void *)pool->released);
	pool->boxes = NULL;
	pool->owner_of = pool->released = NULL;
}

static struct ap_inbox *box_of(struct asyncpool *pool, uint32_t o)
{
	return o && o < atomic_load_explicit(&pool->box_count, memory_order_acquire) ?
	       pool->boxes[o] : NULL;
}

/*
 * An owner id for cache c; the lock is held.  An orphan's id is used
 * again once nothing it lent is out and its inbox is empty: a sender
 * with a valid lease of it holds it out.  0 if every id is in use.
 */
uint32_t ap_owner_id_take(struct asyncpool *pool, struct ap_cache *c)
{
	uint32_t n = atomic_load_explicit(&pool->box_count, memory_order_relaxed);
	struct ap_inbox *b;

	for (uint32_t o = 1; o < n; o++) {
		b = pool->boxes[o];
		if (atomic_load_explicit(&b->orphan, memory_order_acquire) &&
		    !atomic_load_explicit(&b->out, memory_order_acquire) && !ap_inbox_count(b) &&
		    b->head == atomic_load_explicit(&b->tail, memory_order_relaxed)) {
			atomic_store_explicit(&b->orphan, 0, memory_order_relaxed);
			c->id = o;
			c->box = b;
			return o;
		}
	}
	if (n >= AP_OWNERS_MAX)
		return 0;
	b = aligned_alloc(AP_CACHE_LINE, sizeof(*b) + (size_t)pool->box_cap * sizeof(uint64_t));
	if (!b)
		return 0;
	memset(b, 0, sizeof(*b) + (size_t)pool->box_cap * sizeof(uint64_t));
	b->mask = pool->box_cap - 1;
	pool->boxes[n] = b;
	atomic_store_explicit(&pool->box_count, n + 1, memory_order_release);
	c->id = n;
	c->box = b;
	return n;
}

void ap_owner_lent_back(struct asyncpool *pool, uint32_t o)
{
	struct ap_inbox *b = box_of(pool, o);

	if (b)
		atomic_fetch_sub_explicit(&b->out, 1, memory_order_relaxed);
	else
		ap_fl_lent_back(&pool->fl, 1);
}

/*
 * Decide a token for someone other than the owner (a flusher that
 * excluded it, or anyone once it is an orphan): by CAS, to the freelist.
 * true if it was taken.
 */
static bool other_apply(struct asyncpool *pool, uint64_t tok)
{
	uint32_t idx = AP_INBOX_INDEX(tok), gen = AP_TOKEN_GEN(tok), kind;
	uint64_t was;

	if (idx >= pool->fl.count || !gen)
		goto bad;
	kind = ap_state_claim_leased_was(&pool->fl.state[idx], gen, pool->fl.me, AP_LENT, &was);
	if (!kind)
		goto bad;
	atomic_store_explicit(&pool->owner_of[idx], 0, memory_order_relaxed);
	if (ap_fl_push(&pool->fl, idx)) {
		ap_state_unclaim(&pool->fl.state[idx], was);
		goto bad;
	}
	atomic_store_explicit(&pool->released[idx], AP_W_GEN(was), memory_order_relaxed);
	if (kind == AP_K_CACHED)
		ap_owner_lent_back(pool, AP_W_OWNER(was));
	return true;
bad:
	ap_fl_count_refused(&pool->fl, idx, gen);
	return false;
}

/* Empty inbox b by other_apply(): the lock is held, its owner excluded or gone. */
static void box_drain_other(struct asyncpool *pool, struct ap_inbox *b)
{
	uint64_t tok;

	while ((tok = ap_inbox_next(b)) != 0)
		(void)other_apply(pool, tok);
	ap_inbox_done(b);
}

/*
 * An owner's drain refused n tokens, fenced of them copies that an
 * adoption fenced (freelist.c, ap_fl_fenced): counted apart.
 */
static void count_refused(struct asyncpool *pool, uint32_t n, uint32_t fenced)
{
	if (fenced)
		ap_fl_count_fenced(&pool->fl, fenced);
	if (n - fenced)
		ap_fl_count_bad_release(&pool->fl, n - fenced);
}

/*
 * ap_owner_drain()'s cache is full at n: write back n and the lent ones
 * given back since the last write (taken), flush a batch, return the
 * new n.  Out of line, so that the loop keeps its registers.
 */
static __attribute__((noinline)) uint32_t drain_flush(struct ap_cache *c, uint32_t n,
						      uint32_t taken)
{
	ap_cache_set_n(c, n);
	ap_cache_add_lent(c, -(int64_t)taken);
	ap_cache_flush_batch(c);
	return ap_cache_n(c);
}

/*
 * ap_owner_drain() of a cache of no entries (entered): each token
 * decided as ap_owner_give_back() decides, and what it took pushed
 * back, one chain per AP_OUTBOX_BATCH_MIN.  At most max tokens; true if any.
 */
static __attribute__((noinline)) bool owner_drain_free(struct asyncpool *pool, struct ap_cache *c,
						       uint32_t max)
{
	struct ap_inbox *b = c->box;
	const uint64_t word = ap_owned_word(c->id, 0);
	const uint32_t count = pool->fl.count, head0 = b->head;
	uint32_t chain[AP_OUTBOX_BATCH_MIN], n = 0, taken = 0, fenced = 0;
	uint64_t tok;

	while (b->head - head0 < max && (tok = ap_inbox_next(b)) != 0) {
		uint32_t idx = AP_INBOX_INDEX(tok);

		if (idx >= count || !ap_owner_free(pool->fl.state, pool->owner_of, word, idx,
						   AP_TOKEN_GEN(tok))) {
			fenced += ap_fl_fenced(&pool->fl, idx, AP_TOKEN_GEN(tok));
			continue;       /* refused: counted below */
		}
		chain[n++] = idx;
		if (n == AP_OUTBOX_BATCH_MIN) {
			(void)ap_fl_push_chain(&pool->fl, chain, n);
			taken += n;
			n = 0;
		}
	}
	if (n)
		(void)ap_fl_push_chain(&pool->fl, chain, n);
	taken += n;
	ap_cache_add_lent(c, -(int64_t)taken);
	ap_inbox_done(b);
	if (b->head - head0 != taken)
		count_refused(pool, b->head - head0 - taken, fenced);
	return b->head != head0;
}

/*
 * ap_owner_drain() from head on, top the next entry (top0 where this
 * look began): every case, a token refused (counted), a full cache
 * (a batch flushed), the generation's wrap.  The cache's n and lent
 * and the inbox's head stay in registers and are written once at the
 * end (and before a flush, which reads them): the owner is inside, so
 * no one else looks at them; what was taken and refused follows from
 * how far head and n moved.  Out of line, so that the common loop of
 * ap_owner_drain() keeps its registers.
 */
static __attribute__((noinline)) bool drain_rest(struct asyncpool *pool, struct ap_cache *c,
						 uint32_t head, uint32_t end, uint64_t *top,
						 uint64_t *top0)
{
	struct ap_inbox *b = c->box;
	ap_word *state = pool->fl.state;
	_Atomic uint32_t *released = pool->released;
	const uint64_t word = ap_owned_word(c->id, 0);
	const uint32_t count = pool->fl.count, size = c->size, mask = b->mask;
	const uint32_t head0 = b->head;
	uint32_t taken = 0, fenced = 0;
	uint64_t *full = &c->tok[size];

	while (head != end) {
		_Atomic uint64_t *slot = &b->slot[head & mask];
		uint64_t tok = atomic_load_explicit(slot, memory_order_acquire);
		uint32_t idx, g;

		if (!tok)
			break;
		atomic_store_explicit(slot, 0, memory_order_relaxed);
		head++;
		idx = AP_INBOX_INDEX(tok);
		g = AP_TOKEN_GEN(tok);
		if (idx >= count || !ap_state_owner_back_word(&state[idx], word, g)) {
			fenced += ap_fl_fenced(&pool->fl, idx, g);
			continue;       /* refused: counted below */
		}
		/* The sender wrote it if it could: then the line stays its own. */
		if (!(AP_TOKEN_INDEX(tok) & AP_INBOX_HINTED))
			atomic_store_explicit(&released[idx], g, memory_order_relaxed);
		if (AP_UNLIKELY(top == full)) {
			uint32_t n = drain_flush(c, size, (uint32_t)(top - top0));

			taken += (uint32_t)(top - top0);
			top = top0 = &c->tok[n];
		}
		*top++ = AP_TOKEN_MAKE(ap_gen_next(g), idx);
	}
	taken += (uint32_t)(top - top0);
	b->head = head;
	ap_cache_set_n(c, (uint32_t)(top - c->tok));
	ap_cache_add_lent(c, -(int64_t)(top - top0));
	ap_inbox_done(b);
	if (head - head0 != taken)
		count_refused(pool, head - head0 - taken, fenced);
	return head != head0;
}

/*
 * The owner's look at its inbox (c entered): each token decided with a
 * load and a store, into the cache (a batch flushed when it is full).
 * At most max tokens.  true if any.  Here the common token alone, the
 * next lease of a buffer this cache lent, with room for it and no wrap
 * to skip: everything else from the first other token on is
 * drain_rest()'s.
 */
bool ap_owner_drain(struct asyncpool *pool, struct ap_cache *c, uint32_t max)
{
	struct ap_inbox *b = c->box;
	ap_word *state = pool->fl.state;
	_Atomic uint32_t *released = pool->released;
	const uint64_t word = ap_owned_word(c->id, 0);
	const uint32_t count = pool->fl.count, mask = b->mask;
	const uint32_t head0 = b->head, end = head0 + max;
	uint32_t head = head0;
	uint64_t *top = &c->tok[ap_cache_n(c)], *const top0 = top, *const full = &c->tok[c->size];
	uint64_t tok;

	if (head == atomic_load_explicit(&b->tail, memory_order_relaxed))
		return false;
	if (!c->size)
		return owner_drain_free(pool, c, max);
	for (; head != end && top != full; head++) {
		_Atomic uint64_t *slot = &b->slot[head & mask];
		const uint32_t idx = AP_INBOX_INDEX(tok = atomic_load_explicit(slot, memory_order_acquire));
		const uint32_t g = AP_TOKEN_GEN(tok);
		const uint64_t w = word | g;

		if (!tok)
			goto done;
		if (AP_UNLIKELY(idx >= count || g + 1 == 0 || ap_state_load(&state[idx]) != w))
			break;
		atomic_store_explicit(slot, 0, memory_order_relaxed);
		AP_TEST_STALL(AP_TS_CACHE_CLAIM);
		atomic_store_explicit(&state[idx], w + 1, memory_order_relaxed);
		/* The sender wrote it if it could: then the line stays its own. */
		if (!(AP_TOKEN_INDEX(tok) & AP_INBOX_HINTED))
			atomic_store_explicit(&released[idx], g, memory_order_relaxed);
		*top++ = AP_TOKEN_MAKE(g + 1, idx);
	}
	if (head != end)
		return drain_rest(pool, c, head, end, top, top0);
done:
	b->head = head;
	ap_cache_set_n(c, (uint32_t)(top - c->tok));
	ap_cache_add_lent(c, -(int64_t)(top - top0));
	ap_inbox_done(b);
	return head != head0;
}

/*
 * Send k tokens to owner o (the caller outside its window).  A full
 * inbox is emptied by the sender itself, as a flusher: its owner is
 * stopped first.  locked: the caller holds ap_cache_lock.
 */
static int owner_send(struct asyncpool *pool, uint32_t o, const uint64_t *tok, uint32_t k,
		      bool locked)
{
	struct ap_inbox *b = box_of(pool, o);

	if (!b) {
		ap_fl_count_bad_release(&pool->fl, k);
		return -EALREADY;
	}
	while (!ap_inbox_send(b, tok, k)) {
		if (!locked)
			pthread_mutex_lock(&ap_cache_lock);
		if (atomic_load_explicit(&b->orphan, memory_order_acquire)) {
			box_drain_other(pool, b);
		} else if (ap_bypass_all(pool)) {
			box_drain_other(pool, b);
			ap_bypass_end(pool);
		}
		if (!locked)
			pthread_mutex_unlock(&ap_cache_lock);
		sched_yield();
	}
	/* Published before the looks at orphan and at the waiters: one of
	 * them, or the exiting owner / the waiter, sees the other. */
	AP_TSO_FENCE();
	if (AP_UNLIKELY(atomic_load_explicit(&b->orphan, memory_order_relaxed))) {
		AP_TEST_STALL(AP_TS_ORPHAN_SEEN);
		AP_TSO_FLUSH();         /* as the lock's atomic RMW drains it */
		if (!locked)
			pthread_mutex_lock(&ap_cache_lock);
		/*
		 * Again under the lock: before we had it, someone else may
		 * have drained the box, and a new thread taken the id
		 * (owner_id_take); its owner, alive, is then the only one
		 * that may read the ring and write its words.
		 */
		if (atomic_load_explicit(&b->orphan, memory_order_relaxed))
			box_drain_other(pool, b);
		if (!locked)
			pthread_mutex_unlock(&ap_cache_lock);
	}
	AP_TEST_STALL(AP_TS_SEND_LOOKED);
	AP_TSO_FLUSH();         /* the end of the test's store buffer */
	ap_wait_wake(pool->fl.line, false);
	return 0;
}

void ap_owner_send_all(struct asyncpool *pool, struct ap_cache *c)
{
	uint64_t tok[AP_OUTBOX_BATCH_MAX];

	for (uint32_t k = 0; k < AP_OUTBOXES; k++) {
		struct ap_outbox *ob = &c->outbox[k];
		uint32_t n, o;

		if (!__atomic_load_n(&ob->n, __ATOMIC_RELAXED) || !ap_cache_enter(c))
			continue;       /* empty, or a flusher took it */
		n = ob->n;
		o = ob->owner;
		memcpy(tok, ob->tok, n * sizeof(*tok));
		__atomic_store_n(&ob->n, 0, __ATOMIC_RELAXED);
		ap_cache_leave(c);
		if (n)
			(void)owner_send(pool, o, tok, n, false);
	}
}

/* Whether any release is on its way to an owner; the lock is held. */
bool ap_owners_moving(const struct asyncpool *pool)
{
	for (const struct ap_cache *c = pool->caches; c; c = c->reg_next)
		for (uint32_t k = 0; k < AP_OUTBOXES; k++)
			if (__atomic_load_n(&c->outbox[k].n, __ATOMIC_RELAXED))
				return true;
	for (uint32_t o = 1; o < pool->box_count; o++)
		if (ap_inbox_count(pool->boxes[o]))
			return true;
	return false;
}

/*
 * Decide every release on its way to an owner, to the freelist: the
 * lock is held and every owner stopped (ap_bypass_all), or gone.
 */
void ap_owners_settle(struct asyncpool *pool)
{
	for (struct ap_cache *c = pool->caches; c; c = c->reg_next)
		for (uint32_t k = 0; k < AP_OUTBOXES; k++) {
			struct ap_outbox *ob = &c->outbox[k];

			for (uint32_t j = 0; j < ob->n; j++)
				(void)other_apply(pool, ob->tok[j]);
			__atomic_store_n(&ob->n, 0, __ATOMIC_RELAXED);
		}
	for (uint32_t o = 1; o < atomic_load_explicit(&pool->box_count, memory_order_relaxed); o++)
		box_drain_other(pool, pool->boxes[o]);
}

/*
 * In a forked child (the lock held, the only thread, outside its
 * window): an inbox may hold slots that a sender which did not come
 * along reserved and never wrote, and tokens an owner which did not
 * come along took out and did not decide.  A receiver stops at the
 * first empty slot, so every token behind such a gap would strand,
 * and the ring would fill and make every later send spin.  Decide what
 * was written, by CAS, and start every ring empty; the releases in
 * flight in the threads that did not come along are lost with them
 * (their buffers stay lent, as a lease those threads held does).
 */
void ap_owners_after_fork(struct asyncpool *pool)
{
	for (uint32_t o = 1; o < atomic_load_explicit(&pool->box_count, memory_order_relaxed); o++) {
		struct ap_inbox *b = pool->boxes[o];
		uint32_t t = atomic_load_explicit(&b->tail, memory_order_relaxed);

		for (; b->head != t; b->head++) {
			uint64_t tok = atomic_exchange_explicit(&b->slot[b->head & b->mask], 0,
								memory_order_relaxed);

			if (tok)
				(void)other_apply(pool, tok);
		}
		ap_inbox_done(b);
	}
}

/*
 * The thread of cache c exits (or, in a forked child, was not copied);
 * the lock is held, its cache array already given back.  What it
 * gathered for others goes to them; its id becomes an orphan, so that
 * what it lent is released by CAS from now on, and what was sent to it
 * is decided here, after orphan is set (owner_send looks after it).
 */
void ap_owner_leave_thread(struct ap_cache *c)
{
	struct asyncpool *pool = c->pool;
	struct ap_inbox *b = c->box;

	for (uint32_t k = 0; k < AP_OUTBOXES; k++) {
		struct ap_outbox *ob = &c->outbox[k];
		uint32_t n = ob->n;

		__atomic_store_n(&ob->n, 0, __ATOMIC_RELAXED);
		if (n)
			(void)owner_send(pool, ob->owner, ob->tok, n, true);
	}
	atomic_fetch_add_explicit(&b->out, ap_cache_lent(c), memory_order_relaxed);
	ap_cache_add_lent(c, -ap_cache_lent(c));
	AP_TSO_STORE(&b->orphan, 1, memory_order_seq_cst);
	AP_TSO_FENCE();
	box_drain_other(pool, b);
	AP_TEST_STALL(AP_TS_LEAVE_DRAINED);
	AP_TSO_FLUSH();
	c->box = NULL;
}

/*
 * A release of a pool that lends, which the fast path left (the caller
 * is outside its cache): a lease popped straight from the freelist
 * (LEASED, by CAS, as in a pool that does not lend), the owner's own
 * when its cache was full, another owner's (to its outbox), an
 * orphan's (by CAS), or a stale copy (refused).
 */
int ap_owner_release(struct asyncpool *pool, struct ap_cache *c, uint32_t idx, uint32_t gen)
{
	uint64_t w, tok = AP_TOKEN_MAKE(gen, idx);
	uint64_t batch[AP_OUTBOX_BATCH_MAX];
	uint32_t o, n, r, sent = 0, to = 0;
	struct ap_outbox *ob;
	bool inside;
	ap_word *s;

	if (AP_UNLIKELY(idx >= pool->fl.count))
		return -EINVAL;
	s = &pool->fl.state[idx];
	inside = c && c->box && ap_cache_enter(c);
	if (inside)
		AP_TEST_STALL(AP_TS_OWNER_INSIDE);
	o = atomic_load_explicit(&pool->owner_of[idx], memory_order_relaxed);
	if (!o || (inside && c->id == o)) {
		/*
		 * No owner (a lease popped straight from the freelist), or
		 * ours: the word says what it is.  Another owner's is known
		 * by the hints alone, so that its line stays with its owner.
		 */
		w = ap_state_load(s);
		o = AP_W_OWNER(w);
		if (AP_W_KIND(w) == AP_K_LEASED) {
			/* Lent by no one: into our cache by CAS, or to the freelist. */
			if (inside && !c->size) {
				ap_cache_leave(c);      /* it only lends */
			} else if (inside) {
				n = ap_cache_n(c);
				if (n == c->size) {
					ap_cache_flush_batch(c);
					n = ap_cache_n(c);
				}
				if (ap_state_leased_to_owned(s, gen, c->id)) {
					/* As cache_own(): the hint is not behind. */
					atomic_store_explicit(&pool->released[idx], gen,
							      memory_order_relaxed);
					atomic_store_explicit(&pool->owner_of[idx], c->id,
							      memory_order_relaxed);
					c->tok[n] = AP_TOKEN_MAKE(ap_gen_next(gen), idx);
					ap_cache_set_n(c, n + 1);
					ap_cache_leave(c);
					return 0;
				}
				ap_cache_leave(c);
			}
			return ap_fl_release(&pool->fl, idx, gen);
		}
		if (w != ap_owned_word(o, gen) || !gen || !box_of(pool, o))
			goto stale;
	}
	if (inside && c->id == o && !c->size)
		/* ours, without a cache */
		return ap_owner_give_back(pool, c, idx, gen) ? ap_fl_push(&pool->fl, idx) : -EALREADY;
	if (inside && c->id == o) {
		/* Ours, and the fast path found the cache full. */
		n = ap_cache_n(c);
		if (n == c->size) {
			ap_cache_flush_batch(c);
			n = ap_cache_n(c);
		}
		if (!ap_state_owner_back(s, o, gen))
			goto stale;
		atomic_store_explicit(&pool->released[idx], gen, memory_order_relaxed);
		c->tok[n] = AP_TOKEN_MAKE(ap_gen_next(gen), idx);
		ap_cache_leave_n(c, n + 1);     /* lent back: held unchanged */
		return 0;
	}
	/*
	 * Another owner's.  Released already (this generation or a later
	 * one): refused at once.  Else the token goes to the owner, which
	 * decides by the word (a racing copy is counted then).  The hint
	 * is written only where a release was decided (the owner, or
	 * other_apply): a token whose generation the buffer never had must
	 * not make the holder's own release look stale.  An owner that
	 * exited is seen when the batch is sent (owner_send).
	 */
	r = atomic_load_explicit(&pool->released[idx], memory_order_relaxed);
	if ((int32_t)(gen - r) <= 0 || !gen || !box_of(pool, o))
		goto stale;
	AP_TEST_STALL(AP_TS_CACHE_CLAIM);
	/*
	 * The lease right after the last one decided: a copy of the lease
	 * the buffer is lent in (or a token forged with exactly the next
	 * generation, the class of a forged pointer).  Its sender writes the
	 * hint, and tells the owner so: in a hand-off the hint's line then
	 * stays with the releasing thread, as the word's stays with the
	 * owner.  Any other generation only goes to the owner, which writes
	 * the hint if it takes it.
	 */
	if (gen == ap_gen_next(r)) {
		atomic_store_explicit(&pool->released[idx], gen, memory_order_relaxed);
		tok |= AP_INBOX_HINTED;
	}
	if (!inside)
		return owner_send(pool, o, &tok, 1, false);
	ob = &c->outbox[o % AP_OUTBOXES];
	if (ob->n && ob->owner != o) {
		/* Another owner's batch in this outbox: it goes first. */
		sent = ob->n;
		to = ob->owner;
		memcpy(batch, ob->tok, sent * sizeof(*batch));
		__atomic_store_n(&ob->n, 0, __ATOMIC_RELAXED);
	}
	ob->owner = o;
	ob->tok[ob->n] = tok;
	__atomic_store_n(&ob->n, ob->n + 1, __ATOMIC_RELAXED);
	if (!sent && ob->n == pool->outbox_batch) {
		sent = ob->n;
		to = o;
		memcpy(batch, ob->tok, sent * sizeof(*batch));
		__atomic_store_n(&ob->n, 0, __ATOMIC_RELAXED);
	}
	ap_cache_leave(c);
	if (sent)
		(void)owner_send(pool, to, batch, sent, false);
	return 0;
stale:
	if (inside)
		ap_cache_leave(c);
	ap_fl_count_refused(&pool->fl, idx, gen);
	return -EALREADY;
}

int ap_owner_release_uncached_rest(struct asyncpool *pool, struct ap_cache *c, uint32_t idx,
				   uint32_t gen, int stale, bool inside)
{
	int rc;

	if (inside) {
		/* Another owner's, the lease after the last it decided: into
		 * this thread's outbox for it (a hand-off). */
		if (ap_outbox_gather(pool, c, ap_owner_hint(pool, idx), idx, gen)) {
			ap_cache_leave(c);
			return 0;
		}
		ap_cache_leave(c);
	}
	rc = ap_owner_release(pool, c, idx, gen);
	return rc == -EALREADY ? stale : rc;
}

int ap_owner_release_refused(struct asyncpool *pool, uint32_t idx, uint32_t gen, int stale)
{
	ap_fl_count_refused(&pool->fl, idx, gen);
	return stale;
}

int ap_owner_release_uncached(struct asyncpool *pool, struct ap_cache *c, uint32_t idx,
			      uint32_t gen, int stale)
{
	if (AP_UNLIKELY(idx >= pool->fl.count))
		return -EINVAL;
	return ap_owner_release_own(pool, c, idx, gen, stale);
}
