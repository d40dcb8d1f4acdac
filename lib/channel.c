/* SPDX-License-Identifier: MIT */
/*
 * Channels (issue 33): a buffer handed to another process through the
 * shared pool itself.  The layout is pool_layout.h's struct ap_chan, the
 * word's transitions buffer_state.h's ap_state_send/_receive, what a
 * dead end leaves reclaim.c's, and tests/model/channel.pml proves the
 * protocol with a crash at every step.
 *
 * Send (one sender at a time, positions p .. p+n-1):
 *   1. room: p - head < capacity, head as last read (read again only
 *      when the ring looks full): else -EAGAIN, nothing changed
 *   2. n > 1: the call's slot lines asked for writing (prefetchw), so
 *      that their misses overlap; step: step_pos = p, step_n = n
 *                                                    (the sender's line)
 *   3. per buffer: its tag, span and token into the slot, then CAS its
 *      word LEASED(me, g) -> QUEUED(c, g)            (the word's line)
 *   4. publish: each slot's seq = position + 1, in order (the slot's line)
 *   5. step_n = 0; if the receiver said it waits, wake it
 * Receive (one receiver at a time, from position p; the redelivery ring
 * first, then the ring, each the same way):
 *   1. the slot's seq is p + 1, or the ring is empty: -EAGAIN
 *   2. from[i] = {c, g+1, the slot's tag and span}   (the receiver's line)
 *   3. CAS the word named by the slot's token QUEUED(c, g) -> LEASED(me,
 *      g+1): a word that is not that refuses the entry (counted as a
 *      corruption of the channel, never handed out; not counted when
 *      the word is at a later generation: a receiver that died took it)
 *   4. a span outside the buffer: the buffer goes to the freelist,
 *      counted in bad_spans, never handed out
 *   5. head = p + 1 (once per call); if the sender waits for room, wake it
 * So a hand-off moves two cache lines between the processes, the slot's
 * and the buffer word's; the head line moves once per capacity entries
 * at most, and the wake line only when the receiver sleeps.
 *
 * A dead sender (reclaim.c): what it published stays deliverable; a
 * word of its step that it queued but did not publish goes back to the
 * freelist, so that a QUEUED word never exists outside the ring.  A dead
 * receiver (since 1.10): what is published in its ring stays there for
 * the next receiver; what it took from the channel (LEASED by it, from[]
 * naming the channel at that generation) goes into the redelivery ring
 * after the quarantine, whose producer is the reclaim.  With
 * AP_POOL_F_CHAN_DROP both go back to the freelist (1.4's rule).  Then
 * its end is free.  An end held by a dead attachment is taken only after
 * the reclaim freed it.
 */
#include "pool_internal.h"
#include "pool_pop.h"
#include "pool_wait.h"
#include "attach_rec.h"
#include "channel_ring.h"
#include "test_stall.h"

#include <asyncpool/channel.h>

#include <linux/membarrier.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <time.h>

struct asyncpool_channel {
	/* The hot fields, read on every call. */
	struct ap_chan      *ch;
	struct ap_chan_slot *slot;
	ap_word             *state;
	uint64_t             pos;       /* sender: the next position; receiver: the next to read */
	uint64_t             peer;      /* sender: the receiver's head as last read */
	uint64_t             done;      /* buffers this end sent or received (its counter) */
	uint32_t             mask;      /* capacity - 1 */
	uint32_t             cap;
	uint32_t             count;     /* buffers of the pool */
	uint32_t             c;
	uint32_t             me;        /* holder: attachment slot + 1 */
	bool                 send;
	uint64_t             end;       /* the end word we hold */
	uint64_t             bad_at;    /* a position counted corrupt already, + 1 */
	uint64_t             rpos;      /* receiver: the next redelivered position */
	uint64_t             bsize;     /* bytes per buffer */
	struct ap_chan_slot *redo;      /* the redelivery ring */
	struct ap_chan_from *from;      /* from[] of the pool */
	bool                 drop;      /* AP_POOL_F_CHAN_DROP: no from[] to write */
	bool                 head_fence; /* receiver: no membarrier(2): head by seq_cst */
	struct asyncpool    *pool;
	/* peer_gone(): the peer's end word last found alive, and when (ns). */
	uint64_t             live_v;
	uint64_t             live_ns;
	/* asyncpool_channel_wait_fd(): a thread waits on the wake word. */
	pthread_mutex_t      lock;
	int                  wait_fd;
	pid_t                wait_pid;
	_Atomic bool         wait_stop;
	pthread_t            waker;
};

/* Ring slots a cache line (the rings start on a line). */
#define SLOTS_PER_LINE (64u / sizeof(struct ap_chan_slot))

/*
 * A line asked for writing (exclusive), not only for reading: on x86
 * __builtin_prefetch(p, 1) is prefetcht0 unless the build targets
 * PREFETCHW, which every x86-64 since 2014 has and older ones run as a
 * no-op (its opcode was a reserved NOP).
 */
static inline void prefetch_w(const void *p)
{
#if defined(__x86_64__)
	__asm__ volatile("prefetchw %0" : : "m"(*(const char *)p));
#else
	__builtin_prefetch(p, 1);
#endif
}

/* Opening an end held by a dead attachment: the reclaim frees it; so often. */
#define OPEN_TRIES 64

/*
 * Whether end word v names an attachment that is alive: its record LIVE
 * at that epoch and its lock held (attach_rec.h).  Cannot tell: alive.
 */
static bool end_alive(const struct asyncpool *pool, uint64_t v)
{
	uint32_t who = AP_END_WHO(v);
	uint64_t life;

	if (who == 0 || who > AP_ATTACH_SLOTS)
		return false;
	life = atomic_load_explicit(&ap_attach_rec(pool, who - 1)->life, memory_order_acquire);
	if (AP_ATT_STATE(life) != AP_ATT_LIVE || AP_ATT_EPOCH(life) != AP_END_EPOCH(v))
		return false;
	return ap_attach_alive(pool, who - 1) != 0;
}

/* An end word's state: ASYNCPOOL_CHANNEL_END_*. */
static int end_state(const struct asyncpool *pool, uint64_t v)
{
	if (!v)
		return ASYNCPOOL_CHANNEL_END_FREE;
	return end_alive(pool, v) ? ASYNCPOOL_CHANNEL_END_LIVE : ASYNCPOOL_CHANNEL_END_DEAD;
}

/* Take end word *w for us (mine): 0, or -EBUSY while a live attachment holds it. */
static int end_take(struct asyncpool *pool, _Atomic uint64_t *w, uint64_t mine)
{
	for (int t = 0; t < OPEN_TRIES; t++) {
		uint64_t v = atomic_load_explicit(w, memory_order_acquire);

		if (!v) {
			if (atomic_compare_exchange_strong_explicit(w, &v, mine, memory_order_acq_rel,
								    memory_order_relaxed))
				return 0;
			continue;
		}
		if (v == mine || end_alive(pool, v))
			return -EBUSY;
		/* Dead: the reclaim drains or finishes what it left, then
		 * frees the end.  Another process's reclaim may be at it. */
		if (ap_reclaim(pool) <= 0 && atomic_load_explicit(w, memory_order_acquire) == v) {
			struct timespec ts = { 0, 1000000 };

			nanosleep(&ts, NULL);
		}
	}
	return -EBUSY;
}

AP_EXPORT int asyncpool_channel_open(struct asyncpool *pool, uint32_t channel, uint32_t end,
				     struct asyncpool_channel **out)
{
	struct asyncpool_channel *e;
	uint64_t mine;
	int rc;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!pool || (end != ASYNCPOOL_CHANNEL_SEND && end != ASYNCPOOL_CHANNEL_RECV))
		return -EINVAL;
	/* An end names an attachment: raw memory and local pools have none. */
	if (!pool->shared || pool->lock_fd < 0 || !pool->fl.att)
		return -EOPNOTSUPP;
	/* A forked child with its parent's handle: its ends would name the
	 * parent's attachment, which outlives the child (fork recipe:
	 * asyncpool_channel_open(3)). */
	if (atomic_load_explicit(&pool->fl.att->pid, memory_order_relaxed) != (uint32_t)getpid())
		return -ECHILD;
	if (channel >= pool->chan_count)
		return -EINVAL;
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->pool = pool;
	e->ch = ap_chan_in(pool->storage, pool->fl.count, pool->chan_count, pool->chan_cap, channel);
	e->slot = ap_chan_slots(e->ch);
	e->state = pool->fl.state;
	e->cap = pool->chan_cap;
	e->mask = pool->chan_cap - 1;
	e->count = pool->fl.count;
	e->c = channel;
	e->me = pool->fl.me;
	e->send = end == ASYNCPOOL_CHANNEL_SEND;
	e->bsize = pool->buffer_size;
	e->redo = ap_chan_redo(e->ch, e->cap);
	e->from = ap_chan_from_in(pool->storage, pool->fl.count, pool->chan_count, pool->chan_cap);
	e->drop = pool->chan_drop;
	e->wait_fd = -1;
	pthread_mutex_init(&e->lock, NULL);
	mine = ap_end_word(pool->slot, AP_ATT_EPOCH(atomic_load_explicit(&pool->fl.att->life,
									  memory_order_relaxed)));
	rc = end_take(pool, e->send ? &e->ch->send_end : &e->ch->recv_end, mine);
	if (rc) {
		pthread_mutex_destroy(&e->lock);
		free(e);
		return rc;
	}
	e->end = mine;
	if (e->send) {
		/* The next position: the first one not published from head
		 * on.  A step a peer left there is none of ours. */
		e->peer = atomic_load_explicit(&e->ch->head, memory_order_acquire);
		e->pos = e->peer + ap_chan_depth(e->ch, e->cap, e->peer);
		atomic_store_explicit(&e->ch->step_n, 0, memory_order_relaxed);
		e->done = atomic_load_explicit(&e->ch->sent, memory_order_relaxed);
	} else {
		/* A sender that waits for room runs membarrier(2) between its
		 * announcement and its look at head, so that our store of head
		 * needs no barrier before our look at its word (see
		 * room_barrier()); this process registers for it (per open:
		 * a child of fork() opens its end itself). */
		e->head_fence = syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED,
					0, 0) != 0;
		e->pos = atomic_load_explicit(&e->ch->head, memory_order_acquire);
		e->rpos = atomic_load_explicit(&e->ch->rhead, memory_order_acquire);
		e->done = atomic_load_explicit(&e->ch->received, memory_order_relaxed);
	}
	*out = e;
	return 0;
}

static void wait_fd_stop(struct asyncpool_channel *e);

AP_EXPORT int asyncpool_channel_close(struct asyncpool_channel *e)
{
	uint64_t mine;

	if (!e)
		return -EINVAL;
	wait_fd_stop(e);
	mine = e->end;
	/* By CAS: an end a peer rewrote is left as it is. */
	(void)atomic_compare_exchange_strong_explicit(e->send ? &e->ch->send_end : &e->ch->recv_end,
						      &mine, 0, memory_order_release,
						      memory_order_relaxed);
	pthread_mutex_destroy(&e->lock);
	free(e);
	return 0;
}

/* ---- send ---- */

/* Wake the receiver if it said it waits (pool_wait.h): one load when it does not. */
static inline void wake_receiver(struct asyncpool_channel *e)
{
	ap_word_wake(&e->ch->wait, true);
}

/*
 * Room for up to n entries: how many fit (the receiver's head read again
 * only when our copy says full), 0 if none.  A head a peer wrote beyond
 * ours, or more than a capacity behind, leaves no room.
 */
static inline uint32_t room(struct asyncpool_channel *e, uint32_t n)
{
	uint64_t used = e->pos - e->peer;

	if (used + n > e->cap) {
		uint64_t h = atomic_load_explicit(&e->ch->head, memory_order_acquire);

		used = e->pos - h;
		if (used > e->cap)
			return 0;
		e->peer = h;
	}
	return e->cap - (uint32_t)used < n ? e->cap - (uint32_t)used : n;
}

/*
 * Queue tokens[0 .. n-1] (or entries[0 .. n-1]: token, tag, span), all
 * of which name a buffer of the pool, with spans checked: how many were
 * queued (a prefix: the first the word refuses stops it), or -EAGAIN
 * (full) or -ESTALE (the first is not our lease).  Tokens alone carry
 * tag and span (one each for all).
 */
static int send_run(struct asyncpool_channel *e, const uint64_t *tokens,
		    const struct asyncpool_channel_entry *entries, uint64_t tag, uint64_t span,
		    uint32_t n)
{
	uint64_t p = e->pos;
	uint32_t k;

	n = room(e, n);
	if (!n) {
		atomic_fetch_add_explicit(&e->ch->full, 1, memory_order_relaxed);
		return -EAGAIN;
	}
	/* The slot lines the receiver read last, asked for writing all at
	 * once: the CAS of each word below waits until the slot stores
	 * before it are done, so a line fetched by its store would be a
	 * miss that no other overlaps (measured: a batch of 32 a fifth
	 * faster, doc/performance.md 2026-12-07 (1.11)).  One entry: no
	 * other to overlap, and the receiver polls that line. */
	if (n > 1)
		for (uint64_t q = p; q < p + n; q = (q | (SLOTS_PER_LINE - 1)) + 1)
			prefetch_w(&e->slot[q & e->mask]);
	atomic_store_explicit(&e->ch->step_pos, p, memory_order_relaxed);
	atomic_store_explicit(&e->ch->step_n, n, memory_order_relaxed);
	AP_TEST_AT(AP_TP_CHAN_SEND_RECORDED);
	for (k = 0; k < n; k++) {
		struct ap_chan_slot *s = &e->slot[(p + k) & e->mask];
		uint64_t t;

		if (entries) {
			t = entries[k].token;
			tag = entries[k].tag;
			span = entries[k].length || entries[k].offset ?
				       AP_SPAN_MAKE(entries[k].offset, entries[k].length) :
				       AP_SPAN_MAKE(0, e->bsize);
		} else {
			t = tokens[k];
		}
		/* The item in its slot's line, the token first of the word:
		 * a reclaim after our death finds in the slot what this step
		 * may have queued (reclaim.c).  A tag or span the slot holds
		 * already is not stored again: the receiver polls this line,
		 * and each store would take it back (measured: the two stores
		 * of the same values cost a streaming send a quarter more). */
		if (atomic_load_explicit(&s->tag, memory_order_relaxed) != tag)
			atomic_store_explicit(&s->tag, tag, memory_order_relaxed);
		if (atomic_load_explicit(&s->span, memory_order_relaxed) != span)
			atomic_store_explicit(&s->span, span, memory_order_relaxed);
		atomic_store_explicit(&s->token, t, memory_order_relaxed);
		AP_TEST_AT(AP_TP_CHAN_SEND_TOKEN);
		if (!ap_state_send(&e->state[AP_TOKEN_INDEX(t)], e->me, AP_TOKEN_GEN(t), e->c))
			break;
		AP_TEST_AT(AP_TP_CHAN_SEND_QUEUED);
	}
	if (k < n)
		ap_fl_count_bad_release(&e->pool->fl, 1);
	if (!k) {
		atomic_store_explicit(&e->ch->step_n, 0, memory_order_relaxed);
		return -ESTALE;
	}
	/* Publish in order; the last with a full barrier, so that the look
	 * at the wake word comes after it (pool_wait.h's protocol; a Dekker
	 * pair with the wait's announcement, tests/test-channel-tso). */
	for (uint32_t i = 0; i + 1 < k; i++)
		atomic_store_explicit(&e->slot[(p + i) & e->mask].seq, p + i + 1,
				      memory_order_release);
	AP_TSO_STORE_SC(&e->slot[(p + k - 1) & e->mask].seq, p + k, memory_order_seq_cst);
	AP_TEST_AT(AP_TP_CHAN_SEND_PUBLISHED);
	atomic_store_explicit(&e->ch->step_n, 0, memory_order_relaxed);
	e->pos = p + k;
	e->done += k;
	atomic_store_explicit(&e->ch->sent, e->done, memory_order_relaxed);
	wake_receiver(e);
	AP_TEST_STALL(AP_TS_CHAN_WAKE_LOOKED);
	AP_TSO_FLUSH();         /* the end of the test's store buffer */
	return (int)k;
}

static bool token_in(const struct asyncpool_channel *e, uint64_t t)
{
	return AP_TOKEN_GEN(t) && AP_TOKEN_INDEX(t) < e->count;
}

AP_EXPORT int asyncpool_channel_send_token(struct asyncpool_channel *e, uint64_t token)
{
	int rc;

	if (!e || !e->send || !token_in(e, token))
		return -EINVAL;
	rc = send_run(e, &token, NULL, 0, AP_SPAN_MAKE(0, e->bsize), 1);
	return rc < 0 ? rc : 0;
}

AP_EXPORT int asyncpool_channel_send_tokens(struct asyncpool_channel *e, const uint64_t *tokens,
					    uint32_t n)
{
	if (!e || !e->send || !tokens || !n)
		return -EINVAL;
	/* Bad input changes nothing: every token checked first. */
	for (uint32_t i = 0; i < n; i++)
		if (!token_in(e, tokens[i]))
			return -EINVAL;
	return send_run(e, tokens, NULL, 0, AP_SPAN_MAKE(0, e->bsize), n);
}

/* Whether an entry's span lies in a buffer of bsize bytes (0, 0: the whole). */
static bool entry_span_ok(const struct asyncpool_channel_entry *en, uint64_t bsize)
{
	return (uint64_t)en->offset + en->length <= bsize;
}

AP_EXPORT int asyncpool_channel_send_entries(struct asyncpool_channel *e,
					     const struct asyncpool_channel_entry *entries,
					     uint32_t n)
{
	if (!e || !e->send || !entries || !n)
		return -EINVAL;
	for (uint32_t i = 0; i < n; i++)
		if (!token_in(e, entries[i].token) || !entry_span_ok(&entries[i], e->bsize) ||
		    entries[i].flags || entries[i].reserved)
			return -EINVAL;
	return send_run(e, NULL, entries, 0, 0, n);
}

/*
 * A lease of the pool, its token and its span inside its buffer (the
 * span word), or -EINVAL.
 */
static int lease_in(struct asyncpool_channel *e, const struct asyncpool_lease *lease,
		    uint64_t *t, uint64_t *span)
{
	uint64_t base, off;

	if (!e || !e->send || !lease || lease->release.ctx != e->pool ||
	    !(ap_release_is(lease, ap_pool_recycle) || ap_release_is(lease, ap_cache_recycle)))
		return -EINVAL;
	*t = AP_TOKEN_MAKE(lease->generation, lease->buffer_index);
	if (!token_in(e, *t))
		return -EINVAL;
	base = (uint64_t)lease->buffer_index * e->bsize;
	if (lease->span.offset < base)
		return -EINVAL;
	off = lease->span.offset - base;
	if (off > e->bsize || lease->span.length > e->bsize - off)
		return -EINVAL;
	*span = AP_SPAN_MAKE(off, lease->span.length);
	return 0;
}

AP_EXPORT int asyncpool_channel_send_item(struct asyncpool_channel *e,
					  struct asyncpool_lease *lease, uint64_t tag)
{
	uint64_t t, span;
	int rc = lease_in(e, lease, &t, &span);

	if (rc)
		return rc;
	rc = send_run(e, &t, NULL, tag, span, 1);
	if (rc < 0)
		return rc;
	/* The channel has it: the lease is spent (releasing it does nothing). */
	memset(lease, 0, sizeof(*lease));
	return 0;
}

AP_EXPORT int asyncpool_channel_send(struct asyncpool_channel *e, struct asyncpool_lease *lease)
{
	return asyncpool_channel_send_item(e, lease, 0);
}

/* ---- receive ---- */

/* Where recv_run puts what it takes: one of these, by kind. */
enum out_kind { OUT_TOKENS, OUT_LEASES, OUT_ITEMS, OUT_ENTRIES };

struct recv_out {
	enum out_kind kind;
	void         *to;
	uint32_t      max;
	uint32_t      got;
	uint32_t      bad;
	uint32_t      spans;
};

static void put_out(struct asyncpool_channel *e, struct recv_out *o, uint32_t i, uint32_t g,
		    uint64_t tag, uint64_t span, uint32_t flags)
{
	uint64_t t = AP_TOKEN_MAKE(g, i);

	switch (o->kind) {
	case OUT_TOKENS:
		((uint64_t *)o->to)[o->got] = t;
		break;
	case OUT_LEASES: {
		struct asyncpool_lease *l = &((struct asyncpool_lease *)o->to)[o->got];

		ap_pool_lease(e->pool, i, g, e->pool->release_fn, l);
		l->span.offset += AP_SPAN_OFF(span);
		l->span.length = AP_SPAN_LEN(span);
		break;
	}
	case OUT_ITEMS: {
		struct asyncpool_channel_item *it = &((struct asyncpool_channel_item *)o->to)[o->got];

		ap_pool_lease(e->pool, i, g, e->pool->release_fn, &it->lease);
		it->lease.span.offset += AP_SPAN_OFF(span);
		it->lease.span.length = AP_SPAN_LEN(span);
		it->tag = tag;
		it->flags = flags;
		it->reserved = 0;
		break;
	}
	case OUT_ENTRIES: {
		struct asyncpool_channel_entry *en =
			&((struct asyncpool_channel_entry *)o->to)[o->got];

		en->token = t;
		en->tag = tag;
		en->offset = AP_SPAN_OFF(span);
		en->length = AP_SPAN_LEN(span);
		en->flags = flags;
		en->reserved = 0;
		break;
	}
	}
	o->got++;
}

/*
 * Take published entries of ring s from *posp on into o, up to o->max in
 * all, at most capacity slots looked at: whether any position was
 * passed (then *posp moved).  flags: the items' (redelivered or 0).
 */
static bool take_ring(struct asyncpool_channel *e, struct ap_chan_slot *ring, uint64_t *posp,
		      struct recv_out *o, uint32_t flags)
{
	uint64_t p = *posp;

	for (uint32_t k = 0; o->got < o->max && k < e->cap; k++) {
		struct ap_chan_slot *s = &ring[p & e->mask];
		uint64_t seq = atomic_load_explicit(&s->seq, memory_order_acquire), t, tag, span;
		uint64_t was = 0;
		uint32_t i, g = 0, gt;

		if (seq != p + 1) {
			/* A slot ahead of the sender's lap is a peer's
			 * writing: counted once, and the ring waits there. */
			if (seq > p + 1 && !flags && e->bad_at != p + 1) {
				e->bad_at = p + 1;
				o->bad++;
			}
			break;
		}
		t = atomic_load_explicit(&s->token, memory_order_relaxed);
		tag = atomic_load_explicit(&s->tag, memory_order_relaxed);
		span = atomic_load_explicit(&s->span, memory_order_relaxed);
		i = AP_TOKEN_INDEX(t);
		gt = AP_TOKEN_GEN(t);
		p++;
		/* Only a hint: the word decides. */
		if (!gt || i >= e->count) {
			o->bad++;
			continue;
		}
		/* What a reclaim puts back here if we die holding it: written
		 * before the CAS, the channel and generation last. */
		if (!e->drop) {
			struct ap_chan_from *f = &e->from[i];

			/* Stored only where they change (the line is ours
			 * but for a reclaim; a store costs its miss). */
			if (atomic_load_explicit(&f->tag, memory_order_relaxed) != tag)
				atomic_store_explicit(&f->tag, tag, memory_order_relaxed);
			if (atomic_load_explicit(&f->span, memory_order_relaxed) != span)
				atomic_store_explicit(&f->span, span, memory_order_relaxed);
			atomic_store_explicit(&f->chan_gen, AP_FROM_MAKE(e->c, ap_gen_next(gt)),
					      memory_order_release);
			AP_TEST_AT(AP_TP_CHAN_RECV_FROM);
		}
		g = ap_state_receive_was(&e->state[i], e->c, gt, e->me, &was);
		AP_TEST_AT(AP_TP_CHAN_RECV_TAKEN);
		if (!g) {
			/* At a later generation: a receiver before us took
			 * it (and died before it moved head), not a forgery. */
			uint32_t ahead = AP_W_GEN(was) - gt;

			if (!ahead || ahead >= 0x80000000u)
				o->bad++;
			continue;
		}
		if ((uint64_t)AP_SPAN_OFF(span) + AP_SPAN_LEN(span) > e->bsize) {
			/* A peer's span: never handed out, the buffer back. */
			e->pool->release_fn(e->pool, AP_TOKEN_MAKE(g, i));
			o->spans++;
			continue;
		}
		put_out(e, o, i, g, tag, span, flags);
	}
	if (p == *posp)
		return false;
	*posp = p;
	return true;
}

/*
 * Take up to o->max items, the redelivered first: how many, or -EAGAIN.
 */
static int recv_run(struct asyncpool_channel *e, struct recv_out *o)
{
	bool moved = false;

	/* The redelivery ring: its line is ours but when a reclaim writes. */
	if (__builtin_expect(ap_ring_published(e->redo, e->mask, e->rpos), 0) &&
	    take_ring(e, e->redo, &e->rpos, o, ASYNCPOOL_CHANNEL_REDELIVERED)) {
		atomic_store_explicit(&e->ch->rhead, e->rpos, memory_order_release);
	}
	if (o->got < o->max) {
		uint64_t p = e->pos;

		moved = take_ring(e, e->slot, &p, o, 0);
		if (moved)
			e->pos = p;
	}
	if (o->bad)
		atomic_fetch_add_explicit(&e->ch->corruptions, o->bad, memory_order_relaxed);
	if (o->spans)
		atomic_fetch_add_explicit(&e->ch->bad_spans, o->spans, memory_order_relaxed);
	if (moved) {
		/* The look at the sender's wake word after the store of head:
		 * a waiting sender's membarrier(2) orders them (room_barrier);
		 * without it, a full barrier here (measured: the seq_cst store
		 * stalls a streaming receive on the line the sender reads). */
		if (__builtin_expect(e->head_fence, 0))
			atomic_store_explicit(&e->ch->head, e->pos, memory_order_seq_cst);
		else
			atomic_store_explicit(&e->ch->head, e->pos, memory_order_release);
		ap_word_wake(&e->ch->room, true);
	}
	if (o->got) {
		e->done += o->got;
		atomic_store_explicit(&e->ch->received, e->done, memory_order_relaxed);
	}
	return o->got ? (int)o->got : -EAGAIN;
}

static int recv_into(struct asyncpool_channel *e, enum out_kind kind, void *to, uint32_t max)
{
	struct recv_out o = { .kind = kind, .to = to, .max = max };

	return recv_run(e, &o);
}

AP_EXPORT int asyncpool_channel_recv(struct asyncpool_channel *e, struct asyncpool_lease *out)
{
	int rc;

	if (!out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	if (!e || e->send)
		return -EINVAL;
	rc = recv_into(e, OUT_LEASES, out, 1);
	return rc < 0 ? rc : 0;
}

AP_EXPORT int asyncpool_channel_recv_tokens(struct asyncpool_channel *e, uint64_t *tokens,
					    uint32_t max)
{
	if (!e || e->send || !tokens || !max)
		return -EINVAL;
	return recv_into(e, OUT_TOKENS, tokens, max);
}

/* The array calls: out[0 .. max-1] of each bytes zeroed first, even on -EINVAL. */
static int recv_array(struct asyncpool_channel *e, enum out_kind kind, void *out, size_t each,
		      uint32_t max)
{
	if (!out || !max)
		return -EINVAL;
	memset(out, 0, (size_t)max * each);
	if (!e || e->send)
		return -EINVAL;
	return recv_into(e, kind, out, max);
}

AP_EXPORT int asyncpool_channel_recv_leases(struct asyncpool_channel *e,
					    struct asyncpool_lease *out, uint32_t max)
{
	return recv_array(e, OUT_LEASES, out, sizeof(*out), max);
}

AP_EXPORT int asyncpool_channel_recv_items(struct asyncpool_channel *e,
					   struct asyncpool_channel_item *items, uint32_t max)
{
	return recv_array(e, OUT_ITEMS, items, sizeof(*items), max);
}

AP_EXPORT int asyncpool_channel_recv_entries(struct asyncpool_channel *e,
					     struct asyncpool_channel_entry *entries, uint32_t max)
{
	return recv_array(e, OUT_ENTRIES, entries, sizeof(*entries), max);
}

/* ---- waits ---- */

/* Something to receive at the receiver's heads (any thread may ask). */
static bool receivable(struct asyncpool_channel *e)
{
	return ap_chan_published(e->ch, e->mask,
				 atomic_load_explicit(&e->ch->head, memory_order_acquire)) ||
	       ap_ring_published(e->redo, e->mask,
				 atomic_load_explicit(&e->ch->rhead, memory_order_acquire));
}

/* Room for one more send (the sending thread asks: it reads our pos). */
static bool sendable(struct asyncpool_channel *e)
{
	uint64_t h = atomic_load_explicit(&e->ch->head, memory_order_acquire);

	return e->pos - h < e->cap;
}

/*
 * The same from the shared ring alone, for the wait fd's thread, which
 * must not read the sender's pos while the sender writes it: positions
 * are published in order from head, so the ring is full exactly when
 * head + capacity - 1 is.  A send in flight may make it say room a
 * moment early: the fd's readiness is a hint, and the send says -EAGAIN.
 */
static bool sendable_shared(struct asyncpool_channel *e)
{
	uint64_t h = atomic_load_explicit(&e->ch->head, memory_order_acquire);

	return !ap_chan_published(e->ch, e->mask, h + e->cap - 1);
}

#ifdef ASYNCPOOL_TEST_HOOKS
_Atomic uint32_t ap_test_hook_peer_live_ms;
_Atomic uint32_t ap_test_hook_peer_checks;
#define AP_PEER_LIVE_NS() ((uint64_t)(atomic_load_explicit(&ap_test_hook_peer_live_ms, \
		memory_order_relaxed) ?: AP_PEER_LIVE_MS) * 1000000u)
#else
#define AP_PEER_LIVE_NS() ((uint64_t)AP_PEER_LIVE_MS * 1000000u)
#endif

/*
 * Whether the attachment holding end word v is alive: an fcntl(2) on
 * its lock (attach_live.h) when it is another process's, which a wait
 * asks as it begins and after every look that found nothing, in a
 * pipeline once a message.  So a live answer is kept AP_PEER_LIVE_MS
 * per end, for the same word only (the word is read every time: a peer
 * that closes its end, or another that takes it, changes it).  force:
 * ask all the same, as a wait does before it returns anything but an
 * item (wait_loop(), recv_any): a dead peer gives -EPIPE, never a timeout.
 */
static bool peer_alive(struct asyncpool_channel *e, uint64_t v, bool force)
{
	uint64_t now = ap_coarse_ns();

	if (!force && v == e->live_v && now - e->live_ns < AP_PEER_LIVE_NS())
		return true;
#ifdef ASYNCPOOL_TEST_HOOKS
	atomic_fetch_add_explicit(&ap_test_hook_peer_checks, 1, memory_order_relaxed);
#endif
	if (!end_alive(e->pool, v)) {
		e->live_v = 0;
		return false;
	}
	e->live_v = v;
	e->live_ns = now;
	return true;
}

/*
 * The other end's word, as a wait sees it: -EPIPE when the end that was
 * held at the wait's start (*first, 0 if none) is held no more by it, or
 * is held by an attachment that died (asked at most once a period while
 * it lives, unless force).  0: wait on.
 */
static int peer_gone(struct asyncpool_channel *e, uint64_t *first, bool start, bool force)
{
	uint64_t v = atomic_load_explicit(e->send ? &e->ch->recv_end : &e->ch->send_end,
					  memory_order_acquire);

	if (start)
		*first = v;
	if (*first && v != *first)
		return -EPIPE;
	if (v && !peer_alive(e, v, force))
		return -EPIPE;
	return 0;
}

/*
 * A sender about to sleep for room, announced on the room word: a full
 * barrier on every CPU that runs a registered receiver, so that the
 * receiver's store of head is visible to our look after this, or its
 * look at the room word after its store sees our announcement (the
 * asymmetric Dekker pair of pool_bypass.c, across processes).  false if
 * membarrier(2) is refused (a seccomp filter): then the caller sleeps
 * in short slices.
 */
static bool room_barrier(void)
{
	return syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0) == 0;
}

/* Without room_barrier(), a sender looks again this often (ns). */
#define ROOM_SLICE_NS 1000000

/*
 * The clock of a wait, shared by wait_loop() and recv_any(): a deadline
 * (timeout_ns > 0), the slices between looks, and the SA_RESTART rule
 * of asyncpool_acquire_wait(3) (a signal whose handler does not restart
 * gives one more look, then -EINTR).
 */
struct wait_clock {
	int64_t         timeout_ns;
	struct timespec deadline, slice;
	bool            restart, interrupted;
};

/* After a first look found nothing: -ETIMEDOUT for a poll, else 0, started. */
static int wait_start(struct wait_clock *w, int64_t timeout_ns)
{
	w->timeout_ns = timeout_ns;
	w->interrupted = false;
	if (timeout_ns == 0)
		return -ETIMEDOUT;
	if (timeout_ns > 0)
		ap_deadline_after(timeout_ns, &w->deadline);
	w->restart = ap_handlers_restart();
	return 0;
}

/* After a look that found nothing: -EINTR, -ETIMEDOUT, or 0 (sleep on). */
static int wait_over(const struct wait_clock *w)
{
	if (w->interrupted)
		return -EINTR;
	if (w->timeout_ns > 0 && ap_deadline_passed(&w->deadline))
		return -ETIMEDOUT;
	return 0;
}

/* Until when to sleep: the deadline or the end of a slice, the earlier. */
static const struct timespec *wait_until(struct wait_clock *w)
{
	return ap_sleep_until(true, w->timeout_ns > 0 ? &w->deadline : NULL, &w->slice);
}

/* A sleep returned rc: an interruption that does not restart is remembered. */
static void wait_slept(struct wait_clock *w, int rc)
{
	if (rc == -EINTR && !(w->restart && ap_handlers_restart()))
		w->interrupted = true;
}

/*
 * The wait of both ends: try() until it does not say -EAGAIN, sleeping
 * on word between looks, in slices (a peer that dies wakes nobody).
 */
static int wait_loop(struct asyncpool_channel *e, _Atomic uint32_t *word, int64_t timeout_ns,
		     int (*try)(struct asyncpool_channel *, void *), void *arg)
{
	struct wait_clock w;
	uint64_t first = 0;
	int rc;

	rc = try(e, arg);
	if (rc != -EAGAIN)
		return rc;
	rc = wait_start(&w, timeout_ns);
	if (rc)
		return rc;
	rc = peer_gone(e, &first, true, false);
	if (rc)
		return rc;
	for (;;) {
		uint32_t v = AP_TSO_ANNOUNCE(word);
		bool short_slice = false;
		const struct timespec *until;

		/* The announcement before the look (pool_wait.h; a Dekker
		 * pair with the send's publish, tests/test-channel-tso). */
		AP_TSO_FENCE();
		if (e->send)
			short_slice = !room_barrier();
		rc = try(e, arg);
		AP_TEST_STALL(AP_TS_CHAN_WAITER_LOOKED);
		AP_TSO_FLUSH();         /* the end of the test's store buffer */
		if (rc != -EAGAIN)
			return rc;
		rc = peer_gone(e, &first, false, false);
		if (rc)
			return rc;
		rc = wait_over(&w);
		/* Timed out or interrupted: a peer that died meanwhile says so. */
		if (rc)
			return peer_gone(e, &first, false, true) ?: rc;
		/* A receiver that finds nothing runs the reclaim now and then
		 * (every 10 ms at most): what a dead receiver held comes back
		 * into the channel once its quarantine is over. */
		if (!e->send)
			(void)ap_reclaim_auto(e->pool);
		/* Sliced: a peer that dies wakes nobody, and a peer may
		 * rewrite the word; the look after each slice is bounded. */
		until = wait_until(&w);
		if (short_slice && until == &w.slice)
			ap_deadline_after(ROOM_SLICE_NS, &w.slice);
		wait_slept(&w, ap_futex_wait(word, v, until, true));
	}
}

static int try_recv(struct asyncpool_channel *e, void *arg)
{
	return asyncpool_channel_recv(e, arg);
}

AP_EXPORT int asyncpool_channel_recv_wait(struct asyncpool_channel *e,
					  struct asyncpool_lease *out, int64_t timeout_ns)
{
	if (!out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	if (!e || e->send)
		return -EINVAL;
	return wait_loop(e, &e->ch->wait, timeout_ns, try_recv, out);
}

static int try_recv_item(struct asyncpool_channel *e, void *arg)
{
	int rc = recv_into(e, OUT_ITEMS, arg, 1);

	return rc < 0 ? rc : 0;
}

AP_EXPORT int asyncpool_channel_recv_item_wait(struct asyncpool_channel *e,
					       struct asyncpool_channel_item *item,
					       int64_t timeout_ns)
{
	if (!item)
		return -EINVAL;
	memset(item, 0, sizeof(*item));
	if (!e || e->send)
		return -EINVAL;
	return wait_loop(e, &e->ch->wait, timeout_ns, try_recv_item, item);
}

struct send_arg {
	uint64_t t, tag, span;
};

static int try_send(struct asyncpool_channel *e, void *arg)
{
	struct send_arg *a = arg;
	int rc = send_run(e, &a->t, NULL, a->tag, a->span, 1);

	return rc < 0 ? rc : 0;
}

AP_EXPORT int asyncpool_channel_send_wait(struct asyncpool_channel *e,
					  struct asyncpool_lease *lease, uint64_t tag,
					  int64_t timeout_ns)
{
	struct send_arg a = { .tag = tag };
	int rc = lease_in(e, lease, &a.t, &a.span);

	if (rc)
		return rc;
	rc = wait_loop(e, &e->ch->room, timeout_ns, try_send, &a);
	if (rc)
		return rc;
	memset(lease, 0, sizeof(*lease));
	return 0;
}

AP_EXPORT int asyncpool_channel_prep_wait(struct asyncpool_channel *e, struct io_uring_sqe *sqe)
{
	uint32_t v;

	if (!e || e->send || !sqe)
		return -EINVAL;
	v = AP_TSO_ANNOUNCE(&e->ch->wait);
	AP_TSO_FENCE();
	/* Something there already: a value the word cannot hold, so that
	 * the wait completes at once with -EAGAIN (asyncpool_prep_wait). */
	if (receivable(e))
		v &= ~AP_WAIT_WAITERS;
	AP_TEST_STALL(AP_TS_CHAN_WAITER_LOOKED);
	AP_TSO_FLUSH();
	return ap_prep_futex_wait(sqe, &e->ch->wait, v, true);
}

AP_EXPORT int asyncpool_channel_prep_send_wait(struct asyncpool_channel *e,
					       struct io_uring_sqe *sqe)
{
	uint32_t v;

	if (!e || !e->send || !sqe)
		return -EINVAL;
	v = ap_word_announce(&e->ch->room);
	atomic_thread_fence(memory_order_seq_cst);
	/* Refused (seccomp), a receive may not wake it: completes at once. */
	if (!room_barrier() || sendable(e))
		v &= ~AP_WAIT_WAITERS;
	return ap_prep_futex_wait(sqe, &e->ch->room, v, true);
}

/*
 * The wait fd's thread: announced on the end's wake word, it makes the
 * eventfd readable whenever the receiver's head has something (a
 * receiving end) or the ring has room (a sending end), and looks again
 * at least every slice (a dead peer wakes nobody).
 */
static void *waker_main(void *arg)
{
	struct asyncpool_channel *e = arg;
	_Atomic uint32_t *word = e->send ? &e->ch->room : &e->ch->wait;
	struct timespec slice;

	AP_TEST_STALL(AP_TS_CHAN_WAKER_START);
	for (;;) {
		uint32_t v = AP_TSO_ANNOUNCE(word);

		bool short_slice = false;

		AP_TSO_FENCE();
		if (e->send)
			short_slice = !room_barrier();
		if (atomic_load_explicit(&e->wait_stop, memory_order_acquire))
			break;
		if (e->send ? sendable_shared(e) : receivable(e))
			(void)eventfd_write(e->wait_fd, 1);
		AP_TEST_STALL(AP_TS_CHAN_WAITER_LOOKED);
		AP_TSO_FLUSH();
		(void)ap_sleep_until(true, NULL, &slice);
		if (short_slice)
			ap_deadline_after(ROOM_SLICE_NS, &slice);
		(void)ap_futex_wait(word, v, &slice, true);
	}
	return NULL;
}

AP_EXPORT int asyncpool_channel_wait_fd(struct asyncpool_channel *e)
{
	sigset_t all, old;
	int rc, fd;

	if (!e)
		return -EINVAL;
	pthread_mutex_lock(&e->lock);
	if (e->wait_fd >= 0 && e->wait_pid == getpid()) {
		rc = e->wait_fd;
		goto out;
	}
	fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (fd < 0) {
		rc = errno == EMFILE || errno == ENFILE ? -errno : -ENOMEM;
		goto out;
	}
	if (e->wait_fd >= 0)            /* a parent's, before a fork */
		close(e->wait_fd);
	e->wait_fd = fd;
	e->wait_pid = getpid();
	atomic_store_explicit(&e->wait_stop, false, memory_order_relaxed);
	/* The thread takes no signals of the application's. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = -pthread_create(&e->waker, NULL, waker_main, e);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		close(fd);
		e->wait_fd = -1;
		rc = rc == -EAGAIN ? -EAGAIN : -ENOMEM;
		goto out;
	}
	rc = fd;
out:
	pthread_mutex_unlock(&e->lock);
	return rc;
}

static void wait_fd_stop(struct asyncpool_channel *e)
{
	_Atomic uint32_t *word = e->send ? &e->ch->room : &e->ch->wait;

	if (e->wait_fd < 0)
		return;
	if (e->wait_pid == getpid()) {
		atomic_store_explicit(&e->wait_stop, true, memory_order_release);
		/* Change the word so that the thread cannot sleep on it, then wake it. */
		atomic_fetch_add_explicit(word, 2, memory_order_seq_cst);
		ap_futex_wake_all(word, true);
		pthread_join(e->waker, NULL);
	}
	close(e->wait_fd);
	e->wait_fd = -1;
}

/* ---- the ends' life ---- */

AP_EXPORT int asyncpool_channel_end(const struct asyncpool *pool, uint32_t channel, uint32_t end)
{
	struct ap_chan *ch;

	if (!pool || (end != ASYNCPOOL_CHANNEL_SEND && end != ASYNCPOOL_CHANNEL_RECV))
		return -EINVAL;
	if (!pool->shared || pool->lock_fd < 0)
		return -EOPNOTSUPP;
	if (channel >= pool->chan_count)
		return -EINVAL;
	ch = ap_chan_in(pool->storage, pool->fl.count, pool->chan_count, pool->chan_cap, channel);
	return end_state(pool, atomic_load_explicit(end == ASYNCPOOL_CHANNEL_SEND ? &ch->send_end :
										   &ch->recv_end,
						    memory_order_acquire));
}

AP_EXPORT int asyncpool_channel_peer(const struct asyncpool_channel *e)
{
	if (!e)
		return -EINVAL;
	return end_state(e->pool, atomic_load_explicit(e->send ? &e->ch->recv_end :
								 &e->ch->send_end,
						       memory_order_acquire));
}

/* ---- counters ---- */

#define CHAN_STATS_V1 (offsetof(struct asyncpool_channel_stats, reclaimed) + sizeof(uint64_t))

AP_EXPORT int asyncpool_channel_stats(const struct asyncpool *pool, uint32_t channel,
				      struct asyncpool_channel_stats *out)
{
	struct asyncpool_channel_stats s;
	struct ap_chan *ch;
	size_t given;

	if (!pool || !out)
		return -EINVAL;
	given = out->size;
	if (given < CHAN_STATS_V1)
		return -EINVAL;
	if (given > AP_STRUCT_SIZE_MAX)
		return -E2BIG;
	if (channel >= pool->chan_count)
		return -EINVAL;
	ch = ap_chan_in(pool->storage, pool->fl.count, pool->chan_count, pool->chan_cap, channel);
	memset(&s, 0, sizeof(s));
	s.size = given;
	s.channels = pool->chan_count;
	s.capacity = pool->chan_cap;
	s.depth = ap_chan_depth(ch, pool->chan_cap,
				atomic_load_explicit(&ch->head, memory_order_acquire));
	s.ends = (atomic_load_explicit(&ch->send_end, memory_order_relaxed) ?
		  ASYNCPOOL_CHANNEL_SEND : 0) |
		 (atomic_load_explicit(&ch->recv_end, memory_order_relaxed) ?
		  ASYNCPOOL_CHANNEL_RECV : 0);
	s.sent = atomic_load_explicit(&ch->sent, memory_order_relaxed);
	s.received = atomic_load_explicit(&ch->received, memory_order_relaxed);
	s.full = atomic_load_explicit(&ch->full, memory_order_relaxed);
	s.corruptions = atomic_load_explicit(&ch->corruptions, memory_order_relaxed);
	s.reclaimed = atomic_load_explicit(&ch->reclaimed, memory_order_relaxed);
	s.redelivered = atomic_load_explicit(&ch->redelivered, memory_order_relaxed);
	s.bad_spans = atomic_load_explicit(&ch->bad_spans, memory_order_relaxed);
	s.queued_redelivered = ap_ring_depth(ap_chan_redo(ch, pool->chan_cap), pool->chan_cap,
					     atomic_load_explicit(&ch->rhead, memory_order_acquire));
	s.depth += s.queued_redelivered;
	s.drop = pool->chan_drop;
	memcpy(out, &s, given < sizeof(s) ? given : sizeof(s));
	if (given > sizeof(s))
		memset((char *)out + sizeof(s), 0, given - sizeof(s));
	return 0;
}

/* ---- many senders to one receiver (issue 52 item 5; helper pipe) ---- */

/*
 * asyncpool_channel_recv_any(): the receiving ends of up to
 * AP_RECV_ANY_MAX channels (of one pool or several) waited on at once.
 * Each look tries every end once, from a rotating start so that a busy
 * channel does not starve the others; then the waiter announces itself
 * on every end's wake word (pool_wait.h's protocol, one word per
 * channel), looks again, and sleeps in futex_waitv(2) (Linux 5.16) on
 * all the words, in slices like every channel wait.  Where the kernel
 * has no futex_waitv, it sleeps on one word a millisecond at a time.
 */
#define AP_RECV_ANY_MAX 64u
#ifndef SYS_futex_waitv
#define SYS_futex_waitv 449
#endif
#define AP_FUTEX2_SIZE_U32 0x02u        /* FUTEX_32: shared (no FUTEX_PRIVATE_FLAG) */

struct ap_futex_waitv {                 /* the kernel's struct futex_waitv */
	uint64_t val;
	uint64_t uaddr;
	uint32_t flags;
	uint32_t reserved;
};

static _Atomic bool no_waitv;

static int any_try(struct asyncpool_channel *const *ends, uint32_t n, uint32_t start,
		   struct asyncpool_channel_item *item)
{
	for (uint32_t k = 0; k < n; k++) {
		uint32_t i = (start + k) % n;
		int rc = try_recv_item(ends[i], item);

		if (rc == 0)
			return (int)i;
		if (rc != -EAGAIN)
			return rc;
	}
	return -EAGAIN;
}

/* Every end's sender gone (as a single wait says -EPIPE): -EPIPE, else 0. */
static int any_gone(struct asyncpool_channel *const *ends, uint32_t n, uint64_t *first,
		    bool start, bool force)
{
	uint32_t gone = 0;

	for (uint32_t i = 0; i < n; i++)
		if (peer_gone(ends[i], &first[i], start, force))
			gone++;
	return gone == n ? -EPIPE : 0;
}

static int any_sleep(struct ap_futex_waitv *w, uint32_t n, uint32_t start,
		     const struct timespec *until)
{
	struct timespec ms;

	if (!atomic_load_explicit(&no_waitv, memory_order_relaxed)) {
		if (syscall(SYS_futex_waitv, w, n, 0, until, CLOCK_MONOTONIC) >= 0)
			return 0;
		if (errno == ETIMEDOUT || errno == EINTR)
			return -errno;
		if (errno != ENOSYS)
			return 0;       /* EAGAIN: a word changed; look again */
		atomic_store_explicit(&no_waitv, true, memory_order_relaxed);
	}
	/* No futex_waitv: one word, a millisecond at a time. */
	ap_deadline_after(1000000, &ms);
	if (until && (until->tv_sec < ms.tv_sec ||
		      (until->tv_sec == ms.tv_sec && until->tv_nsec < ms.tv_nsec)))
		ms = *until;
	return ap_futex_wait((_Atomic uint32_t *)(uintptr_t)w[start].uaddr, (uint32_t)w[start].val,
			     &ms, true);
}

AP_EXPORT int asyncpool_channel_recv_any(struct asyncpool_channel *const *ends, uint32_t n,
					 struct asyncpool_channel_item *item, int64_t timeout_ns)
{
	static _Thread_local uint32_t rotor;
	struct ap_futex_waitv w[AP_RECV_ANY_MAX];
	uint64_t first[AP_RECV_ANY_MAX];
	struct wait_clock clk;
	uint32_t start;
	int rc;

	if (!item)
		return -EINVAL;
	memset(item, 0, sizeof(*item));
	if (!ends || n == 0 || n > AP_RECV_ANY_MAX)
		return -EINVAL;
	for (uint32_t i = 0; i < n; i++)
		if (!ends[i] || ends[i]->send)
			return -EINVAL;
	start = rotor++ % n;
	rc = any_try(ends, n, start, item);
	if (rc != -EAGAIN)
		return rc;
	rc = wait_start(&clk, timeout_ns);
	if (rc)
		return rc;
	rc = any_gone(ends, n, first, true, false);
	if (rc)
		return rc;
	for (;;) {
		for (uint32_t i = 0; i < n; i++) {
			w[i].val = AP_TSO_ANNOUNCE(&ends[i]->ch->wait);
			w[i].uaddr = (uint64_t)(uintptr_t)&ends[i]->ch->wait;
			w[i].flags = AP_FUTEX2_SIZE_U32;
			w[i].reserved = 0;
		}
		/* The announcements before the look (pool_wait.h). */
		AP_TSO_FENCE();
		rc = any_try(ends, n, start, item);
		AP_TEST_STALL(AP_TS_CHAN_WAITER_LOOKED);
		AP_TSO_FLUSH();
		if (rc != -EAGAIN)
			return rc;
		rc = any_gone(ends, n, first, false, false);
		if (rc)
			return rc;
		rc = wait_over(&clk);
		if (rc)
			return any_gone(ends, n, first, false, true) ?: rc;
		/* As a single receive wait does (wait_loop): what a dead
		 * receiver held comes back into its channel.  Rate-limited
		 * per pool; the ends of one pool ask once. */
		for (uint32_t i = 0; i < n; i++)
			if (!i || ends[i]->pool != ends[i - 1]->pool)
				(void)ap_reclaim_auto(ends[i]->pool);
		wait_slept(&clk, any_sleep(w, n, start, wait_until(&clk)));
	}
}
