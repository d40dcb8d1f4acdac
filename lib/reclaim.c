/* SPDX-License-Identifier: MIT */
/*
 * Reclaim: give back to the freelist every buffer held by an attachment
 * whose process died (attach.c), and finish the steps it died in.
 *
 * A dead attachment's buffers are found by their words (buffer_state.h):
 * - CACHED by it: off the list, never given to the kernel: at once;
 * - LEASED by it: after the quarantine (the kernel may still read or
 *   write them for a ring the dead process had, asyncpool_reclaim(3));
 * - FREE, pushed by it, and not on the list: it died between claiming
 *   them and its CAS on the head;
 * - FREE and not on the list, with exactly the word a step of it
 *   recorded: it died between its CAS on the head and its mark.
 * "Not on the list" needs a list that held still: the head is read, the
 * list walked, the head read again, and the walk counts only if the
 * head (index and tag) did not move.  Buffers off the list do not come
 * back onto it but by their owner's push, and a dead owner pushes
 * nothing, so what the walk did not reach stays unreachable until it is
 * claimed.  Each claim is a CAS from the word that was read: a live
 * popper marking the same buffer (a pop after the last pusher died)
 * and the claim exclude each other, and the popper pops again.
 *
 * Reclaims serialise on the reclaimer word of the counters line, taken
 * without waiting: a second reclaimer returns 0 at once.  Nobody ever
 * waits for one.  The word names a write lock its taker holds: its
 * attachment's (slot + 1 and the attachment's epoch), or, for the
 * reclaim of an open that has no slot yet (attach.c), the write lock on
 * byte AP_LOCK_RECLAIM.  A word whose lock is not held (its reclaimer
 * died) is taken over.  Not an OFD lock alone: any process with the fd,
 * a read-only one included, can take a read lock on any byte, and a
 * read lock on the reclaim byte would stop every reclaim for good; it
 * cannot write the word, nor take a write lock.  The threads of one
 * handle share its open file description, which never conflicts with
 * its own lock: a flag of the handle serialises them.
 *
 * Channels (layout version 5, channel.c), only by a reclaimer with an
 * attachment of its own (one without would claim for a holder that may
 * not stay dead; a later reclaim does it):
 * - an end whose attachment is dead (or gone: its record no longer LIVE
 *   at the end's epoch) is finished, then freed by CAS;
 * - a dead sender's step: each position of it that is not published
 *   names in its slot the token its word was queued with; such a word
 *   still QUEUED in this channel at that generation, and not published
 *   in the ring at that generation, goes back to the freelist (a QUEUED
 *   word never exists outside the ring).  The generation matters: an
 *   entry a dead receiver took but did not move head past names the
 *   same buffer at its older generation (tests/model/channel.pml,
 *   -DBY_INDEX);
 * - a dead receiver's ring stays as it is, for the next receiver (since
 *   1.10).  With AP_POOL_F_CHAN_DROP (1.4's rule): every published
 *   entry whose word is QUEUED in this channel at the token's
 *   generation goes back to the freelist at once (its receiver never
 *   touched it), and head moves past them;
 * - a buffer a dead process held that it received from channel c (its
 *   word LEASED by it at g, from[i] naming c at g) goes, after the
 *   quarantine, into c's redelivery ring instead of the freelist (not
 *   with AP_POOL_F_CHAN_DROP).  The reclaim is that ring's one producer
 *   (reclaims serialise on the reclaimer word), the receiver its
 *   consumer, as the sender and the receiver of the ring: the item's
 *   tag, span and token into the slot at the first unpublished
 *   position, CAS the word LEASED(dead, g) -> QUEUED(c, g), publish.  A
 *   reclaimer that dies between the CAS and the publish left a QUEUED
 *   word that its slot names at that position: the next reclaim
 *   publishes it before anything else (redo_begin).  A full ring leaves
 *   the buffer LEASED by the dead, and its attachment DEAD, for a later
 *   reclaim (tests/model/channel.pml, -DREDO).
 *
 * Everything read from the layout is bounded: a buffer is claimed at
 * most once per scan (a bitmap), so claimed[] never holds more than
 * buffer_count, whatever the dead's steps name; steps and their words
 * are read up to AP_STEPS and AP_STEP_WORDS; a dead_since in the future
 * (a handle closed after our clock read, or a peer's forgery) counts as
 * "just died", so it can delay the quarantine, by one quarantine at
 * most, never skip it.
 *
 * The automatic reclaim of an acquire that finds the pool empty is rate
 * limited per handle (ap_reclaim_auto): a scan takes the lock byte and
 * asks the lock of every live attachment, one fcntl(2) each, about 3 us
 * alone and 24 us with 16 live attachments (measured), which a caller
 * that polls an empty pool would otherwise pay on every call.
 */
#include "attach_rec.h"
#include "channel_ring.h"

#include <fcntl.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define SNAPSHOT_TRIES 64

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#ifdef ASYNCPOOL_TEST_HOOKS
/* Called once a reclaim has read its clock (tests/test-shared-forged.c). */
void (*ap_test_hook_reclaim_now)(void);
#endif

#define RC_WHO(v)   ((uint32_t)(v) & 0xffu)     /* slot + 1, or AP_ATTACH_SLOTS + 1 */
#define RC_EPOCH(v) ((v) >> 8)
#define RC_NOSLOT   (AP_ATTACH_SLOTS + 1)

/* Is the reclaimer that word v names still there: does it hold its write lock? */
static bool reclaimer_alive(const struct asyncpool *pool, uint64_t v)
{
	uint32_t who = RC_WHO(v);
	struct flock fl = { .l_type = F_UNLCK };
	uint64_t at;

	if (who == 0 || who > RC_NOSLOT)
		return false;           /* nobody, or a forged value */
	if (who == RC_NOSLOT) {
		at = AP_LOCK_RECLAIM;
	} else {
		uint64_t life = atomic_load_explicit(&ap_attach_rec(pool, who - 1)->life,
						     memory_order_acquire);

		/* Our own slot: this handle's threads have the flag, so it
		 * was left here by nobody alive. */
		if (who - 1 == pool->slot || AP_ATT_STATE(life) != AP_ATT_LIVE ||
		    AP_ATT_EPOCH(life) != RC_EPOCH(v))
			return false;
		at = AP_LOCK_BASE + who - 1;
	}
	/* A borrowed description (attach.c) sees its own locks as free:
	 * cannot tell, do not take it over. */
	if (pool->lock_borrowed)
		return true;
	if (ap_lock_byte(pool->lock_fd, F_OFD_GETLK, F_WRLCK, at, &fl))
		return true;            /* cannot tell: do not take it over */
	return fl.l_type == F_WRLCK;
}

/* Become the reclaimer: *mine is our word; -EBUSY if another is. */
static int reclaimer_take(struct asyncpool *pool, uint64_t *mine)
{
	_Atomic uint64_t *word = &pool->fl.ctr->reclaimer;
	bool noslot = pool->slot >= AP_ATTACH_SLOTS;

	if (noslot) {
		if (ap_lock_byte(pool->lock_fd, F_OFD_SETLK, F_WRLCK, AP_LOCK_RECLAIM, NULL))
			return -EBUSY;
		*mine = RC_NOSLOT;
	} else {
		*mine = (AP_ATT_EPOCH(atomic_load_explicit(&pool->fl.att->life,
							   memory_order_relaxed)) << 8) |
			(pool->slot + 1);
	}
	/* Bounded: a peer that rewrites the word without end only keeps us
	 * from reclaiming, as a live reclaimer would. */
	for (int t = 0; t < 4; t++) {
		uint64_t v = atomic_load_explicit(word, memory_order_acquire);

		if (v && reclaimer_alive(pool, v))
			break;
		if (atomic_compare_exchange_strong_explicit(word, &v, *mine, memory_order_acq_rel,
							    memory_order_relaxed))
			return 0;
	}
	/* A borrowed description shares the lock with the reclaimer that
	 * may hold it: not ours to drop. */
	if (noslot && !pool->lock_borrowed)
		(void)ap_lock_byte(pool->lock_fd, F_OFD_SETLK, F_UNLCK, AP_LOCK_RECLAIM, NULL);
	return -EBUSY;
}

static void reclaimer_drop(struct asyncpool *pool, uint64_t mine)
{
	(void)atomic_compare_exchange_strong_explicit(&pool->fl.ctr->reclaimer, &mine, 0,
						      memory_order_release, memory_order_relaxed);
	if (RC_WHO(mine) == RC_NOSLOT)
		(void)ap_lock_byte(pool->lock_fd, F_OFD_SETLK, F_UNLCK, AP_LOCK_RECLAIM, NULL);
}

/* Mark in reach[] the list as it was at one instant; false if it never held still. */
static bool snapshot(const struct ap_freelist *fl, unsigned char *reach)
{
	size_t bytes = (size_t)fl->count / 8 + 1;

	for (int t = 0; t < SNAPSHOT_TRIES; t++) {
		uint64_t h = atomic_load_explicit(&fl->line->head, memory_order_acquire);
		uint32_t i = AP_HEAD_INDEX(h), n = 0;
		bool ok = true;

		memset(reach, 0, bytes);
		while (i != AP_FL_END) {
			uint64_t w;

			if (i >= fl->count || n++ >= fl->count || (reach[i / 8] & (1u << (i % 8)))) {
				ok = false;
				break;
			}
			w = atomic_load_explicit(&fl->state[i], memory_order_acquire);
			if (AP_W_KIND(w) != AP_K_FREE) {
				ok = false;
				break;
			}
			reach[i / 8] |= (unsigned char)(1u << (i % 8));
			i = atomic_load_explicit(&fl->link[i], memory_order_relaxed);
		}
		if (ok && atomic_load_explicit(&fl->line->head, memory_order_acquire) == h)
			return true;
		sched_yield();
	}
	return false;
}

struct reclaim {
	struct asyncpool *pool;
	uint32_t *claimed;
	uint32_t n;
	unsigned char *reach;
	unsigned char *done;    /* claimed in this scan: at most once each */
	uint32_t *pub;          /* a channel's published generation of each buffer (chan_sender) */
	uint64_t *rpos;         /* per channel: the next redelivery position; NULL: none */
	bool have_snapshot;
};

static bool bit(const unsigned char *map, uint32_t i)
{
	return map[i / 8] & (1u << (i % 8));
}

/*
 * Claim buffer i from word w (now FREE, unlinked), for a dead holder h,
 * at most once per scan (done[]), whatever a peer wrote in its records.
 * A cached word holds the generation of the next lease: it steps back
 * (ap_gen_prev), so that a generation advances once per lease.
 * A reclaimer with an attachment claims it as its own (holder me): if it
 * dies before its push, its own death gives the buffer back.  The
 * reclaim of an open that has no attachment yet (attach.c) has no holder
 * of its own: it claims for the dead holder h, and h stays DEAD until
 * the push, so a later reclaim finds the buffer FREE, of a dead holder
 * and off the list, if this one dies; where that would leave the word as
 * it was, it takes the next generation, so that the word changes (a
 * popper's take from w fails).
 * A claimed buffer also counts as reached, so that no step claims it
 * again: two steps of the dead may name one buffer (tests/model/crash.pml
 * with 3 processes: a buffer pushed twice).
 */
static void claim(struct reclaim *r, uint32_t i, uint64_t w, uint32_t h)
{
	struct ap_freelist *fl = &r->pool->fl;
	uint32_t g = AP_W_KIND(w) == AP_K_CACHED ? ap_gen_prev(AP_W_GEN(w)) : AP_W_GEN(w);
	uint64_t to = AP_W_MAKE(AP_K_FREE, fl->me ? fl->me : h, g);

	if (i >= fl->count || bit(r->done, i) || r->n >= fl->count)
		return;
	if (!fl->me && to == w)
		to = AP_W_MAKE(AP_K_FREE, h, ap_gen_next(g));
	if (ap_state_cas(&fl->state[i], &w, to)) {
		r->done[i / 8] |= (unsigned char)(1u << (i % 8));
		r->claimed[r->n++] = i;
		r->reach[i / 8] |= (unsigned char)(1u << (i % 8));
	}
}

static bool unreachable(const struct reclaim *r, uint32_t i)
{
	return r->have_snapshot && !bit(r->reach, i);
}

/*
 * Whether the attachment an end word v names is dead, by this scan
 * (dead: the slots found dead) or gone (its record not LIVE at v's
 * epoch).  A word that names no slot is a peer's: dead too.
 */
static bool end_dead(const struct asyncpool *pool, uint64_t v, uint64_t dead)
{
	uint32_t who = AP_END_WHO(v);
	uint64_t life;

	if (who == 0 || who > AP_ATTACH_SLOTS)
		return true;
	if (dead & ((uint64_t)1 << (who - 1)))
		return true;
	life = atomic_load_explicit(&ap_attach_rec(pool, who - 1)->life, memory_order_acquire);
	return AP_ATT_STATE(life) != AP_ATT_LIVE || AP_ATT_EPOCH(life) != AP_END_EPOCH(v);
}

/* A claim of a channel's buffer i, QUEUED in c at gen: counted on the channel. */
static void chan_claim(struct reclaim *r, struct ap_chan *ch, uint32_t c, uint64_t t)
{
	struct ap_freelist *fl = &r->pool->fl;
	uint32_t i = AP_TOKEN_INDEX(t), n = r->n;
	uint64_t w = ap_queued_word(c, AP_TOKEN_GEN(t));

	if (!AP_TOKEN_GEN(t) || i >= fl->count || ap_state_load(&fl->state[i]) != w)
		return;
	claim(r, i, w, 0);
	if (r->n != n) {
		atomic_fetch_add_explicit(&ch->reclaimed, 1, memory_order_relaxed);
		AP_TEST_AT(AP_TP_CHAN_DRAIN_CLAIMED);
	}
}

/* A dead sender's step: what it queued and did not publish comes back. */
static void chan_sender(struct reclaim *r, struct ap_chan *ch, uint32_t c)
{
	struct asyncpool *pool = r->pool;
	struct ap_chan_slot *slot = ap_chan_slots(ch);
	uint32_t cap = pool->chan_cap, mask = cap - 1;
	uint32_t n = atomic_load_explicit(&ch->step_n, memory_order_acquire);
	uint64_t pos = atomic_load_explicit(&ch->step_pos, memory_order_relaxed);
	uint64_t head = atomic_load_explicit(&ch->head, memory_order_acquire);
	uint32_t depth = ap_chan_depth(ch, cap, head);

	if (!n)
		return;
	/* What the ring holds published, the latest generation of each
	 * buffer (positions are in the order they were sent): those words
	 * stay queued. */
	memset(r->pub, 0, (size_t)pool->fl.count * sizeof(*r->pub));
	for (uint32_t k = 0; k < depth; k++) {
		uint64_t t = atomic_load_explicit(&slot[(head + k) & mask].token,
						  memory_order_relaxed);

		if (AP_TOKEN_INDEX(t) < pool->fl.count)
			r->pub[AP_TOKEN_INDEX(t)] = AP_TOKEN_GEN(t);
	}
	for (uint32_t k = 0; k < n && k < cap; k++) {
		uint64_t t;

		if (ap_chan_published(ch, mask, pos + k))
			continue;
		t = atomic_load_explicit(&slot[(pos + k) & mask].token, memory_order_relaxed);
		if (AP_TOKEN_INDEX(t) < pool->fl.count &&
		    r->pub[AP_TOKEN_INDEX(t)] != AP_TOKEN_GEN(t))
			chan_claim(r, ch, c, t);
	}
	atomic_store_explicit(&ch->step_n, 0, memory_order_relaxed);
}

/* A dead receiver's ring: what is published goes back to the freelist. */
static void chan_receiver(struct reclaim *r, struct ap_chan *ch, uint32_t c)
{
	struct ap_chan_slot *slot = ap_chan_slots(ch);
	uint32_t cap = r->pool->chan_cap, mask = cap - 1;
	uint64_t p = atomic_load_explicit(&ch->head, memory_order_acquire);

	/* At most a capacity: a live sender may go on publishing. */
	for (uint32_t k = 0; k < cap && ap_chan_published(ch, mask, p); k++, p++)
		chan_claim(r, ch, c, atomic_load_explicit(&slot[p & mask].token,
							  memory_order_relaxed));
	atomic_store_explicit(&ch->head, p, memory_order_release);
}

static struct ap_chan *chan_of(struct asyncpool *pool, uint32_t c)
{
	return ap_chan_in(pool->storage, pool->fl.count, pool->chan_count, pool->chan_cap, c);
}

/*
 * The next redelivery position of channel c, once per scan; a
 * redelivery a dead reclaimer queued and did not publish is published
 * first: the slot at the first unpublished position names a word QUEUED
 * in c at the slot's generation (a slot of an earlier lap names a word
 * that its receiver moved on since).
 */
static void redo_begin(struct reclaim *r, uint32_t c)
{
	struct asyncpool *pool = r->pool;
	struct ap_chan *ch = chan_of(pool, c);
	struct ap_chan_slot *redo = ap_chan_redo(ch, pool->chan_cap);
	uint32_t cap = pool->chan_cap, mask = cap - 1;
	uint64_t h = atomic_load_explicit(&ch->rhead, memory_order_acquire);
	uint32_t d = ap_ring_depth(redo, cap, h);
	uint64_t p = h + d, t;

	if (d < cap) {
		t = atomic_load_explicit(&redo[p & mask].token, memory_order_relaxed);
		if (AP_TOKEN_GEN(t) && AP_TOKEN_INDEX(t) < pool->fl.count &&
		    ap_state_load(&pool->fl.state[AP_TOKEN_INDEX(t)]) ==
			    ap_queued_word(c, AP_TOKEN_GEN(t))) {
			atomic_store_explicit(&redo[p & mask].seq, p + 1, memory_order_seq_cst);
			atomic_fetch_add_explicit(&ch->redelivered, 1, memory_order_relaxed);
			ap_word_wake(&ch->wait, true);
			p++;
		}
	}
	r->rpos[c] = p;
}

/*
 * Buffer i, word w LEASED by a dead receiver of channel c at g, from[i]
 * saying so (tag, span): into c's redelivery ring.  false if the ring is
 * full (the buffer stays as it is, for a later reclaim).
 */
static bool redeliver(struct reclaim *r, uint32_t c, uint32_t i, uint64_t w, uint64_t tag,
		      uint64_t span)
{
	struct asyncpool *pool = r->pool;
	struct ap_chan *ch = chan_of(pool, c);
	struct ap_chan_slot *slot = &ap_chan_redo(ch, pool->chan_cap)[r->rpos[c] &
									(pool->chan_cap - 1)];
	uint64_t p = r->rpos[c];

	/* A head a peer wrote beyond ours wraps to full. */
	if (p - atomic_load_explicit(&ch->rhead, memory_order_acquire) >= pool->chan_cap)
		return false;
	atomic_store_explicit(&slot->tag, tag, memory_order_relaxed);
	atomic_store_explicit(&slot->span, span, memory_order_relaxed);
	atomic_store_explicit(&slot->token, AP_TOKEN_MAKE(AP_W_GEN(w), i), memory_order_relaxed);
	AP_TEST_AT(AP_TP_CHAN_REDO_TOKEN);
	if (!ap_state_redeliver(&pool->fl.state[i], w, c))
		return true;            /* the word moved: not the dead's any more */
	AP_TEST_AT(AP_TP_CHAN_REDO_QUEUED);
	atomic_store_explicit(&slot->seq, p + 1, memory_order_seq_cst);
	r->rpos[c] = p + 1;
	atomic_fetch_add_explicit(&ch->redelivered, 1, memory_order_relaxed);
	ap_word_wake(&ch->wait, true);
	return true;
}

/*
 * A dead holder's LEASED word w of buffer i, past the quarantine: the
 * channel it came from, if from[i] says it was received from one at
 * w's generation (and the pool redelivers); else -1.
 */
static int32_t leased_from(struct reclaim *r, uint32_t i, uint64_t w, uint64_t *tag,
			   uint64_t *span)
{
	struct asyncpool *pool = r->pool;
	struct ap_chan_from *f;
	uint64_t cg;
	uint32_t c;

	if (!pool->chan_count || pool->chan_drop)
		return -1;
	f = &ap_chan_from_in(pool->storage, pool->fl.count, pool->chan_count, pool->chan_cap)[i];
	cg = atomic_load_explicit(&f->chan_gen, memory_order_acquire);
	c = (uint32_t)(cg >> 32);
	if (!c || c > pool->chan_count || (uint32_t)cg != AP_W_GEN(w))
		return -1;
	*tag = atomic_load_explicit(&f->tag, memory_order_relaxed);
	*span = atomic_load_explicit(&f->span, memory_order_relaxed);
	return (int32_t)(c - 1);
}

/* Free end word *w if it still is v. */
static void end_free(_Atomic uint64_t *w, uint64_t v)
{
	(void)atomic_compare_exchange_strong_explicit(w, &v, 0, memory_order_acq_rel,
						      memory_order_relaxed);
}

/*
 * The channels' ends of the dead (the rules above).  Without r (NULL):
 * only whether there is any such end.
 */
static bool reclaim_channels(struct asyncpool *pool, struct reclaim *r, uint64_t dead)
{
	bool any = false;

	if (!pool->fl.me)
		return false;
	for (uint32_t c = 0; c < pool->chan_count; c++) {
		struct ap_chan *ch = ap_chan_in(pool->storage, pool->fl.count, pool->chan_count,
						pool->chan_cap, c);
		uint64_t s = atomic_load_explicit(&ch->send_end, memory_order_acquire);
		uint64_t v = atomic_load_explicit(&ch->recv_end, memory_order_acquire);
		bool sd = s && end_dead(pool, s, dead), rd = v && end_dead(pool, v, dead);

		any |= sd || rd;
		if (!r)
			continue;
		if (sd)
			chan_sender(r, ch, c);
		if (rd && pool->chan_drop)
			chan_receiver(r, ch, c);
		if (sd)
			end_free(&ch->send_end, s);
		if (rd)
			end_free(&ch->recv_end, v);
	}
	return any;
}

int ap_reclaim(struct asyncpool *pool)
{
	struct ap_freelist *fl = &pool->fl;
	uint64_t dead = 0, pending = 0, since[AP_ATTACH_SLOTS], now, q, mine;
	uint64_t life_seen[AP_ATTACH_SLOTS];
	struct reclaim r = { .pool = pool };
	size_t bytes = (size_t)fl->count / 8 + 1;
	int rc;

	if (pool->lock_fd < 0)
		return -EOPNOTSUPP;
	if (atomic_exchange_explicit(&pool->reclaiming, true, memory_order_acquire))
		return 0;               /* another thread of this handle is */
	if (reclaimer_take(pool, &mine)) {
		atomic_store_explicit(&pool->reclaiming, false, memory_order_release);
		return 0;               /* another process is reclaiming */
	}
	now = now_ns();
	q = (uint64_t)atomic_load_explicit(&pool->quarantine_ms, memory_order_relaxed) * 1000000u;
#ifdef ASYNCPOOL_TEST_HOOKS
	if (ap_test_hook_reclaim_now)
		ap_test_hook_reclaim_now();
#endif
	for (uint32_t s = 0; s < AP_ATTACH_SLOTS; s++) {
		struct ap_attach *a = ap_attach_rec(pool, s);
		uint64_t life = atomic_load_explicit(&a->life, memory_order_acquire), zero = 0, t;

		if (AP_ATT_STATE(life) == AP_ATT_LIVE) {
			if (ap_attach_alive(pool, s) != 0)
				continue;
			if (!atomic_compare_exchange_strong_explicit(
				    &a->life, &life, AP_ATT_MAKE(AP_ATT_DEAD, AP_ATT_EPOCH(life)),
				    memory_order_acq_rel, memory_order_relaxed))
				continue;
			life = AP_ATT_MAKE(AP_ATT_DEAD, AP_ATT_EPOCH(life));
		} else if (AP_ATT_STATE(life) != AP_ATT_DEAD) {
			continue;
		}
		(void)atomic_compare_exchange_strong(&a->dead_since, &zero, now);
		t = atomic_load(&a->dead_since);
		/*
		 * Later than our clock: a handle closed with a lease out after
		 * we read it, or a peer's forgery.  Unsigned, now - t would
		 * wrap and skip the quarantine: count it as just died.  One
		 * more than a quarantine ahead is no close racing us: make it
		 * now, so that a forged time delays by one quarantine at most.
		 */
		if (t > now) {
			if (t - now > q)
				(void)atomic_compare_exchange_strong(&a->dead_since, &t, now);
			t = now;
		}
		since[s] = t;
		life_seen[s] = life;
		dead |= (uint64_t)1 << s;
	}
	if (!dead && !reclaim_channels(pool, NULL, 0)) {
		rc = 0;
		goto unlock;
	}
	r.claimed = malloc((size_t)fl->count * sizeof(uint32_t));
	r.reach = malloc(bytes);
	r.done = calloc(1, bytes);
	r.pub = malloc((size_t)fl->count * sizeof(*r.pub));
	if (!r.claimed || !r.reach || !r.done || !r.pub) {
		rc = -ENOMEM;
		goto out;
	}
	/* Redelivery: by a reclaimer with an attachment (see above). */
	if (pool->chan_count && !pool->chan_drop && fl->me) {
		r.rpos = malloc((size_t)pool->chan_count * sizeof(*r.rpos));
		if (!r.rpos) {
			rc = -ENOMEM;
			goto out;
		}
		for (uint32_t c = 0; c < pool->chan_count; c++)
			redo_begin(&r, c);
	}
	r.have_snapshot = snapshot(fl, r.reach);
	for (uint32_t i = 0; i < fl->count; i++) {
		uint64_t w = ap_state_load(&fl->state[i]);
		uint32_t h = AP_W_HOLDER(w), s = h - 1, n0 = r.n;

		if (!h || h > AP_ATTACH_SLOTS || !(dead & ((uint64_t)1 << s)))
			continue;
		switch (AP_W_KIND(w)) {
		case AP_K_CACHED:
			claim(&r, i, w, h);
			break;
		case AP_K_LEASED: {
			uint64_t tag, span;
			int32_t c;

			if (now - since[s] < q) {
				pending |= (uint64_t)1 << s;
				break;
			}
			c = leased_from(&r, i, w, &tag, &span);
			if (c < 0)
				claim(&r, i, w, h);
			else if (!r.rpos || !redeliver(&r, (uint32_t)c, i, w, tag, span))
				pending |= (uint64_t)1 << s;
			break;
		}
		case AP_K_FREE:
			if (unreachable(&r, i))
				claim(&r, i, w, h);
			else if (!r.have_snapshot)
				pending |= (uint64_t)1 << s;
			break;
		default:
			break;
		}
		if (r.n != n0)
			AP_TEST_AT(AP_TP_RECLAIM_CLAIMED);
	}
	/* The pops the dead died in. */
	for (uint32_t s = 0; s < AP_ATTACH_SLOTS; s++) {
		struct ap_attach *a = ap_attach_rec(pool, s);

		if (!(dead & ((uint64_t)1 << s)))
			continue;
		for (uint32_t k = 0; k < AP_STEPS; k++) {
			struct ap_step *st = &a->step[k];
			uint32_t n = atomic_load(&st->count);

			if (!n) {
				atomic_store(&st->busy, 0);
				continue;
			}
			if (!r.have_snapshot) {
				pending |= (uint64_t)1 << s;
				continue;
			}
			for (uint32_t j = 0; j < n && j < AP_STEP_WORDS; j++) {
				uint32_t i = atomic_load(&st->idx[j]);
				uint64_t seen = atomic_load(&st->word[j]);

				/* A pop records only FREE words: a step that
				 * names another kind is forged, and would take a
				 * live holder's lease. */
				if (i < fl->count && AP_W_KIND(seen) == AP_K_FREE &&
				    ap_state_load(&fl->state[i]) == seen && unreachable(&r, i))
					claim(&r, i, seen, s + 1);
			}
			atomic_store(&st->count, 0);
			atomic_store(&st->busy, 0);
		}
	}
	/* The channels' dead ends, before the push of what they give back. */
	(void)reclaim_channels(pool, &r, dead);
	rc = ap_fl_push_chain(fl, r.claimed, r.n);
	if (!rc)
		rc = (int)r.n;
	if (r.n)
		AP_TEST_AT(AP_TP_RECLAIM_PUSHED);
	/* Free the slots that hold nothing any more (by CAS: a slot a peer
	 * rewrote meanwhile is left as it is). */
	for (uint32_t s = 0; s < AP_ATTACH_SLOTS; s++) {
		struct ap_attach *a = ap_attach_rec(pool, s);
		uint64_t life = life_seen[s];

		if (!(dead & ((uint64_t)1 << s)) || (pending & ((uint64_t)1 << s)))
			continue;
		atomic_store(&a->pid, 0);
		atomic_store(&a->dead_since, 0);
		(void)atomic_compare_exchange_strong_explicit(
			&a->life, &life, AP_ATT_MAKE(AP_ATT_FREE, AP_ATT_EPOCH(life)),
			memory_order_release, memory_order_relaxed);
	}
out:
	free(r.claimed);
	free(r.reach);
	free(r.done);
	free(r.pub);
	free(r.rpos);
unlock:
	reclaimer_drop(pool, mine);
	atomic_store_explicit(&pool->reclaiming, false, memory_order_release);
	return rc;
}

/*
 * At most one scan per AP_RECLAIM_AUTO_MS per handle: at 24 us a scan
 * with 16 live attachments (about 90 us with all 64), a thread that
 * polls an empty pool spends at most 0.25% (0.9%) of a CPU on them, and
 * the buffers of a dead process come back at most 10 ms later than
 * without the limit (its leased ones wait out 5 s of quarantine
 * anyway).  CLOCK_MONOTONIC_COARSE is a vDSO read of a few ns, up to a
 * jiffy (1 to 10 ms) old: the interval is 10 ms give or take a jiffy.
 */
int ap_reclaim_auto(struct asyncpool *pool)
{
	uint64_t now = ap_coarse_ns(), after;

	after = atomic_load_explicit(&pool->reclaim_after, memory_order_relaxed);
	if (now < after ||
	    !atomic_compare_exchange_strong_explicit(&pool->reclaim_after, &after,
						     now + AP_RECLAIM_AUTO_MS * 1000000u,
						     memory_order_relaxed, memory_order_relaxed))
		return 0;
	return ap_reclaim(pool);
}

AP_EXPORT int asyncpool_reclaim(struct asyncpool *pool)
{
	if (!pool)
		return -EINVAL;
	return ap_reclaim(pool);
}

AP_EXPORT int asyncpool_set_quarantine(struct asyncpool *pool, uint32_t ms)
{
	if (!pool)
		return -EINVAL;
	if (pool->lock_fd < 0)
		return -EOPNOTSUPP;
	atomic_store_explicit(&pool->quarantine_ms, ms, memory_order_relaxed);
	return 0;
}
