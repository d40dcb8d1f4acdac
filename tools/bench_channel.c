/* SPDX-License-Identifier: MIT */
/*
 * asyncpool bench: the channel cases (issue 33) and their floors, two
 * processes each, side 0 (the parent) on CPU 0 and side 1 (a forked
 * child) on CPU 1 where the machine lets them be pinned.
 *
 *   chan-latency       one buffer's token back and forth over two
 *                      channels, both sides busy-polling: one way is
 *                      half a round trip
 *   chan-2proc-1, -32  the parent acquires tokens (its cache, 32 at a
 *                      time) and sends them, one or 32 per call; the
 *                      child receives as many per call and releases them
 *                      into its cache, as a program does
 *   chan-back-2proc-1, -32  the same hand-off, but the child sends the
 *                      buffers back over channel 1 instead of releasing
 *                      them, and the parent sends what comes back
 *                      instead of acquiring (a working set of 256
 *                      acquired once a round): the pool's freelist is
 *                      left out of the way back (issue 53)
 *   chan-wake-2proc    the latency ping-pong with both sides asleep in
 *                      asyncpool_channel_recv_wait()
 * and what a channel cannot beat, measured the same way:
 *   chan-floor-line    one cache line in ping-pong
 *   chan-floor-futex   a bare futex wake-up ping-pong (shared futexes)
 *   chan-floor-ring-*  a bare ring of 8-byte tokens in shared memory,
 *                      rte_ring's SP/SC algorithm (a tail and a head
 *                      index, each read by the other side every call)
 *   chan-floor-slots-* the channel's own ring ({seq, token} slots, the
 *                      receiver's head read by the sender only when it
 *                      looks full) without the buffer's word, the
 *                      checks, the step or the counters
 *   chan-floor-words-* the same, and a word per token changed by CAS on
 *                      each side (a word of 4096, 8 a cache line, as a
 *                      pool's state[]): what the channel's ownership
 *                      costs, without its checks, counters or pool
 *   chan-floor-back-*  chan-floor-words one way, the tokens back on a
 *                      bare ring (rte_ring's SP/SC) from a working set
 *                      of 256 words a line each: the floor of a return
 *                      ring per channel instead of the pool's freelist
 * Each pair of ns per token, or per one way.  The latency cases give the
 * median, the minimum and the maximum over the repetitions of each one's
 * median, and the median of their 99.9th percentiles (p999_ns).
 */
#include "config.h"

#include <errno.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <asyncpool.h>
#include "tool.h"

#define CH_BUFFERS 4096u
#define CH_CAP     1024u        /* entries per channel, and of the bare rings */
#define CH_CACHE   256u
#define CH_BULK    32u
#define LAT_MAX    (1ul << 22)  /* round trips per repetition, at most */
/* The channel cases' pool flags: a build knob (-DCH_POOL_FLAGS=2u: ASYNCPOOL_SHARED_CHANNEL_DROP). */
#ifndef CH_POOL_FLAGS
#define CH_POOL_FLAGS 0u
#endif

#if defined(__x86_64__) || defined(__i386__)
#define cpu_relax() __builtin_ia32_pause()
#else
#define cpu_relax() ((void)0)
#endif

/* A ring of rte_ring's SP/SC algorithm: a producer and a consumer index. */
struct bare_ring {
	_Alignas(64) _Atomic uint64_t tail;     /* the producer's: positions written */
	_Alignas(64) _Atomic uint64_t head;     /* the consumer's: positions read */
	_Alignas(64) uint64_t slot[CH_CAP];
};

/* The channel's ring without the word: published by each slot's seq. */
struct seq_ring {
	_Alignas(64) _Atomic uint64_t head;     /* the receiver's, stored once per call */
	_Alignas(64) struct { _Atomic uint64_t seq; uint64_t token; } slot[CH_CAP];
};

#define FLOOR_WORDS CH_BUFFERS

/* In MAP_SHARED memory: what both sides see. */
struct chan_ctl {
	atomic_int ready;       /* rounds the child is ready for */
	atomic_int go;          /* the round that may start */
	atomic_int done;        /* rounds the child finished */
	atomic_int failed;
	_Alignas(64) _Atomic uint64_t sum;      /* what the receiver got, to check */
	_Alignas(64) _Atomic uint64_t line;     /* chan-floor-line */
	_Alignas(64) _Atomic uint32_t word;     /* chan-floor-futex */
	struct bare_ring ring;
	struct seq_ring seqr;
	_Alignas(64) _Atomic uint64_t words[FLOOR_WORDS];  /* chan-floor-words: 1 sent, 0 not */
};

/* One side, in its own process. */
struct side {
	struct chan_ctl *ctl;
	struct asyncpool *pool;
	struct asyncpool_channel *tx, *rx;      /* channel 0 one way, channel 1 the other */
	uint64_t *lat;          /* the parent's round trips of this round, or NULL */
	uint64_t pos, peer;     /* a floor ring: this side's position, the other's as last read */
	uint64_t bpos;          /* chan-floor-back: this side's position in the bare ring */
	pid_t child;            /* the parent: the child; the child: 0 */
	unsigned long spins;
};

/* Spinning: false once the other side failed or its process is gone. */
static bool still(struct side *s)
{
	cpu_relax();
	if (++s->spins % (1u << 16))
		return true;
	if (atomic_load_explicit(&s->ctl->failed, memory_order_relaxed))
		return false;
	if (s->child && waitpid(s->child, NULL, WNOHANG) != 0)
		return false;
	if (!s->child && getppid() == 1)
		return false;
	return true;
}

/* ---- the channel ---- */

/* n tokens, per per call: acquired from the cache, sent. */
static bool chan_send_n(struct side *s, unsigned long n, uint32_t per)
{
	uint64_t t[CH_BULK];
	uint32_t have = 0, at = 0;

	for (unsigned long k = 0; k < n;) {
		uint32_t want;
		int r;

		if (at == have) {
			while (asyncpool_acquire_tokens(s->pool, t, CH_BULK))
				if (!still(s))
					return false;
			have = CH_BULK;
			at = 0;
		}
		want = per < have - at ? per : have - at;
		if (want > n - k)
			want = (uint32_t)(n - k);
		for (;;) {
			r = want == 1 ? (asyncpool_channel_send_token(s->tx, t[at]) ? -EAGAIN : 1) :
			    asyncpool_channel_send_tokens(s->tx, t + at, want);
			if (r > 0)
				break;
			if (r != -EAGAIN || !still(s))
				return false;
		}
		at += (uint32_t)r;
		k += (unsigned long)r;
	}
	if (at < have)
		(void)asyncpool_release_tokens(s->pool, t + at, have - at);
	return true;
}

/* n tokens, up to per per call: received, released into the cache. */
static bool chan_recv_n(struct side *s, unsigned long n, uint32_t per)
{
	uint64_t t[CH_BULK];

	for (unsigned long got = 0; got < n;) {
		uint32_t want = per < n - got ? per : (uint32_t)(n - got);
		int r = asyncpool_channel_recv_tokens(s->rx, t, want);

		if (r == -EAGAIN) {
			if (!still(s))
				return false;
			continue;
		}
		if (r <= 0 || asyncpool_release_tokens(s->pool, t, (uint32_t)r))
			return false;
		got += (unsigned long)r;
	}
	atomic_store(&s->ctl->sum, n);
	return true;
}

static bool chan_send1(struct side *s, unsigned long n) { return chan_send_n(s, n, 1); }
static bool chan_recv1(struct side *s, unsigned long n) { return chan_recv_n(s, n, 1); }
static bool chan_send32(struct side *s, unsigned long n) { return chan_send_n(s, n, CH_BULK); }
static bool chan_recv32(struct side *s, unsigned long n) { return chan_recv_n(s, n, CH_BULK); }

/*
 * chan-back: the parent sends from a working set of CH_BACK tokens,
 * refilled from what the child sends back on channel 1; at the end it
 * takes every token back and releases the set.  out: sent, not back.
 */
#define CH_BACK 256u
/* chan-floor-back's tokens: FBACK_STRIDE apart (8: a word a line; 1: 8 a line). */
#ifndef FBACK_STRIDE
#define FBACK_STRIDE 8u
#endif

static bool back_send_n(struct side *s, unsigned long n, uint32_t per)
{
	uint64_t t[CH_BACK];
	uint32_t have = 0;
	unsigned long out = 0;
	bool ok = true;

	while (have < CH_BACK) {
		if (asyncpool_acquire_tokens(s->pool, t + have, CH_BULK)) {
			if (!still(s)) {
				ok = false;
				goto give_back;
			}
			continue;
		}
		have += CH_BULK;
	}
	for (unsigned long k = 0; k < n;) {
		uint32_t want;
		int r;

		if (have < per && out) {
			r = asyncpool_channel_recv_tokens(s->rx, t + have, CH_BACK - have);
			if (r > 0) {
				have += (uint32_t)r;
				out -= (unsigned long)r;
			} else if (r != -EAGAIN || (!have && !still(s))) {
				ok = false;
				goto give_back;
			}
			if (!have)
				continue;
		}
		want = per < have ? per : have;
		if (want > n - k)
			want = (uint32_t)(n - k);
		r = want == 1 ? (asyncpool_channel_send_token(s->tx, t[have - 1]) ? -EAGAIN : 1) :
		    asyncpool_channel_send_tokens(s->tx, t + have - want, want);
		if (r > 0) {
			/* send_tokens sends the first r of t + have - want */
			if ((uint32_t)r < want)
				memmove(t + have - want, t + have - want + r,
					(want - (uint32_t)r) * sizeof(*t));
			have -= (uint32_t)r;
			out += (unsigned long)r;
			k += (unsigned long)r;
		} else if (r != -EAGAIN || !still(s)) {
			ok = false;
			goto give_back;
		}
	}
	while (out) {
		int r = asyncpool_channel_recv_tokens(s->rx, t + have, CH_BACK - have);

		if (r > 0) {
			have += (uint32_t)r;
			out -= (unsigned long)r;
		} else if (r != -EAGAIN || !still(s)) {
			ok = false;
			break;
		}
	}
give_back:
	if (have)
		(void)asyncpool_release_tokens(s->pool, t, have);
	return ok;
}

/* n tokens, up to per per call: received, sent back on channel 1. */
static bool back_recv_n(struct side *s, unsigned long n, uint32_t per)
{
	uint64_t t[CH_BULK];

	for (unsigned long got = 0; got < n;) {
		uint32_t want = per < n - got ? per : (uint32_t)(n - got), at = 0;
		int r = asyncpool_channel_recv_tokens(s->rx, t, want);

		if (r == -EAGAIN) {
			if (!still(s))
				return false;
			continue;
		}
		if (r <= 0)
			return false;
		while (at < (uint32_t)r) {
			int w = asyncpool_channel_send_tokens(s->tx, t + at, (uint32_t)r - at);

			if (w > 0)
				at += (uint32_t)w;
			else if (w != -EAGAIN || !still(s))
				return false;
		}
		got += (unsigned long)r;
	}
	atomic_store(&s->ctl->sum, n);
	return true;
}

static bool back_send1(struct side *s, unsigned long n) { return back_send_n(s, n, 1); }
static bool back_recv1(struct side *s, unsigned long n) { return back_recv_n(s, n, 1); }
static bool back_send32(struct side *s, unsigned long n) { return back_send_n(s, n, CH_BULK); }
static bool back_recv32(struct side *s, unsigned long n) { return back_recv_n(s, n, CH_BULK); }

/* Busy-polled: a token out on channel 0, back on channel 1. */
static bool chan_ping(struct side *s, unsigned long n)
{
	uint64_t t;

	while (asyncpool_acquire_tokens(s->pool, &t, 1))
		if (!still(s))
			return false;
	for (unsigned long k = 0; k < n; k++) {
		uint64_t t0 = tool_now_ns();

		while (asyncpool_channel_send_token(s->tx, t))
			if (!still(s))
				return false;
		while (asyncpool_channel_recv_tokens(s->rx, &t, 1) != 1)
			if (!still(s))
				return false;
		s->lat[k] = tool_now_ns() - t0;
	}
	return asyncpool_release_token(s->pool, t) == 0;
}

static bool chan_pong(struct side *s, unsigned long n)
{
	uint64_t t;

	for (unsigned long k = 0; k < n; k++) {
		while (asyncpool_channel_recv_tokens(s->rx, &t, 1) != 1)
			if (!still(s))
				return false;
		while (asyncpool_channel_send_token(s->tx, t))
			if (!still(s))
				return false;
	}
	return true;
}

/* Asleep in asyncpool_channel_recv_wait(), a second at a time: the other may die. */
static bool recv_wait(struct side *s, struct asyncpool_lease *l)
{
	int rc;

	while ((rc = asyncpool_channel_recv_wait(s->rx, l, 1000000000)) == -ETIMEDOUT) {
		s->spins = (1u << 16) - 1;      /* still() looks at the other side now */
		if (!still(s))
			return false;
	}
	return rc == 0;
}

/* The same, asleep in asyncpool_channel_recv_wait() (a lease: no token wait). */
static bool chanw_ping(struct side *s, unsigned long n)
{
	struct asyncpool_lease l;

	if (asyncpool_acquire(s->pool, &l))
		return false;
	for (unsigned long k = 0; k < n; k++) {
		uint64_t t0 = tool_now_ns();

		if (asyncpool_channel_send(s->tx, &l) || !recv_wait(s, &l))
			return false;
		s->lat[k] = tool_now_ns() - t0;
	}
	asyncpool_lease_release(&l);
	return true;
}

static bool chanw_pong(struct side *s, unsigned long n)
{
	struct asyncpool_lease l;

	for (unsigned long k = 0; k < n; k++)
		if (!recv_wait(s, &l) || asyncpool_channel_send(s->tx, &l))
			return false;
	return true;
}

/* ---- the floors ---- */

static bool line_ping(struct side *s, unsigned long n)
{
	for (unsigned long k = 0; k < n; k++) {
		uint64_t t0 = tool_now_ns();

		atomic_store_explicit(&s->ctl->line, 2 * k + 1, memory_order_release);
		while (atomic_load_explicit(&s->ctl->line, memory_order_acquire) != 2 * k + 2)
			if (!still(s))
				return false;
		s->lat[k] = tool_now_ns() - t0;
	}
	return true;
}

static bool line_pong(struct side *s, unsigned long n)
{
	for (unsigned long k = 0; k < n; k++) {
		while (atomic_load_explicit(&s->ctl->line, memory_order_acquire) != 2 * k + 1)
			if (!still(s))
				return false;
		atomic_store_explicit(&s->ctl->line, 2 * k + 2, memory_order_release);
	}
	return true;
}

/* Wait until the word is want (a bounded sleep: the other side may die). */
static bool futex_until(struct side *s, uint32_t want)
{
	struct timespec slice = { 0, 50000000 };
	uint32_t v;

	while ((v = atomic_load_explicit(&s->ctl->word, memory_order_acquire)) != want) {
		if (atomic_load(&s->ctl->failed))
			return false;
		/* Only a wait that timed out looks at the other process. */
		if (syscall(SYS_futex, &s->ctl->word, FUTEX_WAIT, v, &slice, NULL, 0) < 0 &&
		    errno == ETIMEDOUT && s->child && waitpid(s->child, NULL, WNOHANG) != 0)
			return false;
	}
	return true;
}

static void futex_set(struct side *s, uint32_t v)
{
	atomic_store_explicit(&s->ctl->word, v, memory_order_release);
	(void)syscall(SYS_futex, &s->ctl->word, FUTEX_WAKE, 1, NULL, NULL, 0);
}

static bool futex_ping(struct side *s, unsigned long n)
{
	for (unsigned long k = 0; k < n; k++) {
		uint64_t t0 = tool_now_ns();

		futex_set(s, (uint32_t)(2 * k + 1));
		if (!futex_until(s, (uint32_t)(2 * k + 2)))
			return false;
		s->lat[k] = tool_now_ns() - t0;
	}
	return true;
}

static bool futex_pong(struct side *s, unsigned long n)
{
	for (unsigned long k = 0; k < n; k++) {
		if (!futex_until(s, (uint32_t)(2 * k + 1)))
			return false;
		futex_set(s, (uint32_t)(2 * k + 2));
	}
	return true;
}

/* rte_ring's SP/SC enqueue and dequeue of up to n tokens: how many. */
static uint32_t ring_put(struct side *s, const uint64_t *v, uint32_t n)
{
	struct bare_ring *r = &s->ctl->ring;
	uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire);
	uint32_t room = CH_CAP - (uint32_t)(s->pos - head);

	if (n > room)
		n = room;
	for (uint32_t i = 0; i < n; i++)
		r->slot[(s->pos + i) & (CH_CAP - 1)] = v[i];
	s->pos += n;
	atomic_store_explicit(&r->tail, s->pos, memory_order_release);
	return n;
}

static uint32_t ring_get(struct side *s, uint64_t *v, uint32_t n)
{
	struct bare_ring *r = &s->ctl->ring;
	uint64_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);

	if (n > tail - s->pos)
		n = (uint32_t)(tail - s->pos);
	for (uint32_t i = 0; i < n; i++)
		v[i] = r->slot[(s->pos + i) & (CH_CAP - 1)];
	s->pos += n;
	atomic_store_explicit(&r->head, s->pos, memory_order_release);
	return n;
}

/* How many of n fit in the channel's ring: head read again only when it looks full. */
static uint32_t seq_room(struct side *s, uint32_t n)
{
	if (s->pos - s->peer + n > CH_CAP)
		s->peer = atomic_load_explicit(&s->ctl->seqr.head, memory_order_acquire);
	return n > CH_CAP - (s->pos - s->peer) ? (uint32_t)(CH_CAP - (s->pos - s->peer)) : n;
}

/* The channel's ring: a slot is published by its seq. */
static uint32_t seq_put(struct side *s, const uint64_t *v, uint32_t n)
{
	struct seq_ring *r = &s->ctl->seqr;

	n = seq_room(s, n);
	for (uint32_t i = 0; i < n; i++) {
		uint64_t p = s->pos + i;

		r->slot[p & (CH_CAP - 1)].token = v[i];
		atomic_store_explicit(&r->slot[p & (CH_CAP - 1)].seq, p + 1, memory_order_release);
	}
	s->pos += n;
	return n;
}

static uint32_t seq_get(struct side *s, uint64_t *v, uint32_t n)
{
	struct seq_ring *r = &s->ctl->seqr;
	uint32_t got = 0;

	while (got < n) {
		uint64_t p = s->pos + got;

		if (atomic_load_explicit(&r->slot[p & (CH_CAP - 1)].seq, memory_order_acquire) != p + 1)
			break;
		v[got++] = r->slot[p & (CH_CAP - 1)].token;
	}
	if (got) {
		s->pos += got;
		atomic_store_explicit(&r->head, s->pos, memory_order_release);
	}
	return got;
}

/* seq_put and seq_get with a CAS on each token's word, as the channel's send and receive. */
static uint32_t words_put(struct side *s, const uint64_t *v, uint32_t n)
{
	uint32_t k;

	n = seq_room(s, n);
	for (k = 0; k < n; k++) {
		uint64_t w = 0;

		if (!atomic_compare_exchange_strong_explicit(&s->ctl->words[v[k] % FLOOR_WORDS], &w,
							     1, memory_order_relaxed,
							     memory_order_relaxed))
			break;
	}
	return k ? seq_put(s, v, k) : 0;
}

static uint32_t words_get(struct side *s, uint64_t *v, uint32_t n)
{
	uint32_t got = seq_get(s, v, n);

	for (uint32_t k = 0; k < got; k++) {
		uint64_t w = 1;

		(void)atomic_compare_exchange_strong_explicit(&s->ctl->words[v[k] % FLOOR_WORDS], &w,
							      0, memory_order_relaxed,
							      memory_order_relaxed);
	}
	return got;
}

/*
 * chan-floor-back: the words floor one way, and the tokens back on the
 * bare ring (rte_ring's SP/SC), as a return ring per channel would take
 * them; the sender sends only what came back, from a working set of
 * CH_BACK tokens 8, 16, ... (a word each, each on a line of its own, as
 * a pool's random order spreads them; built with -DFBACK_STRIDE=1u,
 * 1, 2, ...: 8 words a line, as chan-floor-words's).  What a pool with a return ring
 * instead of the freelist could cost at best: a CAS on the word on
 * each side, two rings, no checks, no counters, no step.
 */
static uint32_t back_put(struct side *s, const uint64_t *v, uint32_t n)
{
	struct bare_ring *r = &s->ctl->ring;
	uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire);
	uint32_t room = CH_CAP - (uint32_t)(s->bpos - head);

	if (n > room)
		n = room;
	for (uint32_t i = 0; i < n; i++)
		r->slot[(s->bpos + i) & (CH_CAP - 1)] = v[i];
	s->bpos += n;
	atomic_store_explicit(&r->tail, s->bpos, memory_order_release);
	return n;
}

static uint32_t back_get(struct side *s, uint64_t *v, uint32_t n)
{
	struct bare_ring *r = &s->ctl->ring;
	uint64_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);
	uint32_t have = (uint32_t)(tail - s->bpos);

	if (n > have)
		n = have;
	for (uint32_t i = 0; i < n; i++)
		v[i] = r->slot[(s->bpos + i) & (CH_CAP - 1)];
	s->bpos += n;
	atomic_store_explicit(&r->head, s->bpos, memory_order_release);
	return n;
}

static bool fback_send(struct side *s, unsigned long n, uint32_t per)
{
	uint64_t t[CH_BACK];
	uint32_t have = CH_BACK;
	unsigned long out = 0;

	for (uint32_t j = 0; j < CH_BACK; j++)
		t[j] = (uint64_t)(j + 1) * FBACK_STRIDE;
	for (unsigned long k = 0; k < n;) {
		uint32_t want, got;

		if (have < per && out) {
			got = back_get(s, t + have, CH_BACK - have);
			have += got;
			out -= got;
			if (!have) {
				if (!still(s))
					return false;
				continue;
			}
		}
		want = per < have ? per : have;
		if (want > n - k)
			want = (uint32_t)(n - k);
		got = words_put(s, t + have - want, want);
		if (!got) {
			if (!still(s))
				return false;
			continue;
		}
		if (got < want)
			memmove(t + have - want, t + have - want + got, (want - got) * sizeof(*t));
		have -= got;
		out += got;
		k += got;
	}
	while (out) {
		uint32_t got = back_get(s, t, CH_BACK);

		out -= got;
		if (!got && !still(s))
			return false;
	}
	return true;
}

static bool fback_recv(struct side *s, unsigned long n, uint32_t per)
{
	uint64_t v[CH_BULK];
	bool odd = false;

	for (unsigned long k = 0; k < n;) {
		uint32_t want = per < n - k ? per : (uint32_t)(n - k), got, at = 0;

		while (!(got = words_get(s, v, want)))
			if (!still(s))
				return false;
		for (uint32_t i = 0; i < got; i++)
			odd |= v[i] % FBACK_STRIDE || !v[i] || v[i] > FBACK_STRIDE * CH_BACK;
		while ((at += back_put(s, v + at, got - at)) < got)
			if (!still(s))
				return false;
		k += got;
	}
	/* What the parent checks: n tokens, all of the working set. */
	atomic_store(&s->ctl->sum, odd ? 0 : n * (n + 1) / 2);
	return true;
}

static bool fback_send1(struct side *s, unsigned long n) { return fback_send(s, n, 1); }
static bool fback_recv1(struct side *s, unsigned long n) { return fback_recv(s, n, 1); }
static bool fback_send32(struct side *s, unsigned long n) { return fback_send(s, n, CH_BULK); }
static bool fback_recv32(struct side *s, unsigned long n) { return fback_recv(s, n, CH_BULK); }

typedef uint32_t (*put_fn)(struct side *s, const uint64_t *v, uint32_t n);
typedef uint32_t (*get_fn)(struct side *s, uint64_t *v, uint32_t n);

/* Tokens 1..n, per per call; the receiver's sum checks that none was lost. */
static bool bare_send(struct side *s, unsigned long n, uint32_t per, put_fn put)
{
	uint64_t v[CH_BULK];

	for (unsigned long k = 0; k < n;) {
		uint32_t want = per < n - k ? per : (uint32_t)(n - k), got;

		for (uint32_t i = 0; i < want; i++)
			v[i] = k + i + 1;
		while (!(got = put(s, v, want)))
			if (!still(s))
				return false;
		k += got;
	}
	return true;
}

static bool bare_recv(struct side *s, unsigned long n, uint32_t per, get_fn get)
{
	uint64_t v[CH_BULK], sum = 0;

	for (unsigned long k = 0; k < n;) {
		uint32_t want = per < n - k ? per : (uint32_t)(n - k), got;

		while (!(got = get(s, v, want)))
			if (!still(s))
				return false;
		for (uint32_t i = 0; i < got; i++)
			sum += v[i];
		k += got;
	}
	atomic_store(&s->ctl->sum, sum);
	return true;
}

static bool ring_send1(struct side *s, unsigned long n) { return bare_send(s, n, 1, ring_put); }
static bool ring_recv1(struct side *s, unsigned long n) { return bare_recv(s, n, 1, ring_get); }
static bool ring_send32(struct side *s, unsigned long n) { return bare_send(s, n, CH_BULK, ring_put); }
static bool ring_recv32(struct side *s, unsigned long n) { return bare_recv(s, n, CH_BULK, ring_get); }
static bool words_send1(struct side *s, unsigned long n) { return bare_send(s, n, 1, words_put); }
static bool words_recv1(struct side *s, unsigned long n) { return bare_recv(s, n, 1, words_get); }
static bool words_send32(struct side *s, unsigned long n) { return bare_send(s, n, CH_BULK, words_put); }
static bool words_recv32(struct side *s, unsigned long n) { return bare_recv(s, n, CH_BULK, words_get); }
static bool seq_send1(struct side *s, unsigned long n) { return bare_send(s, n, 1, seq_put); }
static bool seq_recv1(struct side *s, unsigned long n) { return bare_recv(s, n, 1, seq_get); }
static bool seq_send32(struct side *s, unsigned long n) { return bare_send(s, n, CH_BULK, seq_put); }
static bool seq_recv32(struct side *s, unsigned long n) { return bare_recv(s, n, CH_BULK, seq_get); }

/* ---- the two processes ---- */

typedef bool (*side_fn)(struct side *s, unsigned long n);

static const struct {
	side_fn parent, child;
	bool pool;              /* a pool with two channels */
	bool latency;           /* the parent records round trips */
	unsigned div;           /* ops / div rounds per repetition (latency) */
} kinds[] = {
	[BENCH_CHAN_LATENCY] = { chan_ping, chan_pong, true, true, 10 },
	[BENCH_CHAN_1] = { chan_send1, chan_recv1, true, false, 1 },
	[BENCH_CHAN_32] = { chan_send32, chan_recv32, true, false, 1 },
	[BENCH_CHAN_WAKE] = { chanw_ping, chanw_pong, true, true, 200 },
	[BENCH_FLOOR_LINE] = { line_ping, line_pong, false, true, 10 },
	[BENCH_FLOOR_FUTEX] = { futex_ping, futex_pong, false, true, 200 },
	[BENCH_FLOOR_RING_1] = { ring_send1, ring_recv1, false, false, 1 },
	[BENCH_FLOOR_RING_32] = { ring_send32, ring_recv32, false, false, 1 },
	[BENCH_FLOOR_SLOTS_1] = { seq_send1, seq_recv1, false, false, 1 },
	[BENCH_FLOOR_SLOTS_32] = { seq_send32, seq_recv32, false, false, 1 },
	[BENCH_FLOOR_WORDS_1] = { words_send1, words_recv1, false, false, 1 },
	[BENCH_FLOOR_WORDS_32] = { words_send32, words_recv32, false, false, 1 },
	[BENCH_CHAN_BACK_1] = { back_send1, back_recv1, true, false, 1 },
	[BENCH_CHAN_BACK_32] = { back_send32, back_recv32, true, false, 1 },
	[BENCH_FLOOR_BACK_1] = { fback_send1, fback_recv1, false, false, 1 },
	[BENCH_FLOOR_BACK_32] = { fback_send32, fback_recv32, false, false, 1 },
};

static void pin(int cpu)
{
	cpu_set_t set;

	if (sysconf(_SC_NPROCESSORS_ONLN) < 2 || cpu >= CPU_SETSIZE)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	(void)sched_setaffinity(0, sizeof(set), &set);  /* where refused: unpinned */
}

/* Channel 0 from the parent to the child, channel 1 back: this side's ends. */
static int open_ends(struct side *s, bool parent)
{
	int rc = asyncpool_set_cache(s->pool, CH_CACHE);

	if (!rc)
		rc = asyncpool_channel_open(s->pool, parent ? 0 : 1, ASYNCPOOL_CHANNEL_SEND, &s->tx);
	if (!rc)
		rc = asyncpool_channel_open(s->pool, parent ? 1 : 0, ASYNCPOOL_CHANNEL_RECV, &s->rx);
	return rc;
}

static void close_ends(struct side *s)
{
	if (s->tx)
		(void)asyncpool_channel_close(s->tx);
	if (s->rx)
		(void)asyncpool_channel_close(s->rx);
	s->tx = s->rx = NULL;
	if (s->pool)
		(void)asyncpool_cache_flush(s->pool);
}

/* The child: opens the pool through the fd it inherited, then reps + 1 rounds. */
static int child_main(enum bench_chan_kind kind, struct chan_ctl *ctl, int fd, unsigned long n,
		      unsigned reps)
{
	struct asyncpool_shared *sp = NULL;
	struct side s;
	int ok = 1;

	memset(&s, 0, sizeof(s));
	s.ctl = ctl;
	pin(1);
	if (kinds[kind].pool) {
		struct asyncpool_shared_open_options o;

		memset(&o, 0, sizeof(o));
		o.size = sizeof(o);
		o.fd = fd;
		if (asyncpool_shared_open(&o, &sp))
			return 1;
		s.pool = asyncpool_shared_pool(sp);
		if (open_ends(&s, false))
			ok = 0;
	}
	for (int round = 1; ok && round <= (int)reps + 1; round++) {
		atomic_store(&ctl->ready, round);
		while (atomic_load_explicit(&ctl->go, memory_order_acquire) != round)
			if (!still(&s)) {
				ok = 0;
				break;
			}
		if (ok && !kinds[kind].child(&s, n))
			ok = 0;
		atomic_store(&ctl->done, round);
	}
	close_ends(&s);
	if (sp)
		asyncpool_shared_close(sp);
	return ok ? 0 : 1;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* Spin until *v == want; false if the child failed or died first. */
static bool wait_child(struct side *s, atomic_int *v, int want)
{
	while (atomic_load_explicit(v, memory_order_acquire) != want)
		if (!still(s))
			return false;
	return true;
}

/* The parent's reps + 1 rounds (the first warms up) into out. */
static bool parent_rounds(enum bench_chan_kind kind, struct side *s, unsigned long n,
			  unsigned reps, struct bench_result *out)
{
	uint64_t el[64];
	double med[64], p999[64], spread[3];

	for (int round = 1; round <= (int)reps + 1; round++) {
		uint64_t t0;

		if (!wait_child(s, &s->ctl->ready, round))
			return false;
		atomic_store(&s->ctl->sum, 0);
		atomic_store(&s->ctl->line, 0);
		atomic_store(&s->ctl->word, 0);
		t0 = tool_now_ns();
		atomic_store_explicit(&s->ctl->go, round, memory_order_release);
		if (!kinds[kind].parent(s, n) || !wait_child(s, &s->ctl->done, round))
			return false;
		if (round == 1)
			continue;
		el[round - 2] = tool_now_ns() - t0;
		/* Tokens 1..n (the floors), or n buffers (the channel). */
		if (!kinds[kind].latency &&
		    atomic_load(&s->ctl->sum) != (kinds[kind].pool ? n : n * (n + 1) / 2))
			return false;
		if (kinds[kind].latency) {
			qsort(s->lat, n, sizeof(uint64_t), cmp_u64);
			med[round - 2] = (double)s->lat[n / 2] / 2;
			p999[round - 2] = (double)s->lat[n - 1 - n / 1000] / 2;
		}
	}
	if (!kinds[kind].latency) {
		bench_summarize(out, el, reps, n, 2, n);
		return true;
	}
	out->threads = 2;
	bench_spread(out->ns, med, reps);
	bench_spread(spread, p999, reps);
	out->mops[0] = out->mops[1] = out->mops[2] = 0;
	out->extra_name = "p999_ns";
	out->extra = spread[0];
	out->extra2_name = "round_trips";
	out->extra2 = (double)n;
	return true;
}

int bench_channel(enum bench_chan_kind kind, unsigned long ops, unsigned reps,
		  struct bench_result *out)
{
	struct asyncpool_shared *sp = NULL;
	struct chan_ctl *ctl;
	struct side s;
	unsigned long n = ops / kinds[kind].div;
	cpu_set_t mask;
	bool had;
	pid_t pid;
	int rc = 0, st = 0;
	bool ok;

	if (!n)
		n = 1;
	if (kinds[kind].latency && n > LAT_MAX)
		n = LAT_MAX;    /* the round trips kept, 8 bytes each */
	if (kinds[kind].pool && !kinds[kind].latency && n > 64)
		n &= ~63ul;     /* whole bulks, one cache's worth at the end */
	memset(&s, 0, sizeof(s));
	ctl = mmap(NULL, sizeof(*ctl), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (ctl == MAP_FAILED)
		return -ENOMEM;
	memset(ctl, 0, sizeof(*ctl));
	s.ctl = ctl;
	if (kinds[kind].latency && !(s.lat = malloc(n * sizeof(uint64_t)))) {
		rc = -ENOMEM;
		goto out;
	}
	if (kinds[kind].pool) {
		struct asyncpool_shared_options o;

		memset(&o, 0, sizeof(o));
		o.size = sizeof(o);
		o.buffer_size = 64;
		o.buffer_count = CH_BUFFERS;
		o.channels = 2;
		o.channel_capacity = CH_CAP;
		o.flags = CH_POOL_FLAGS;
		if ((rc = asyncpool_shared_create(&o, &sp)))
			goto out;
		s.pool = asyncpool_shared_pool(sp);
	}
	pid = fork();
	if (pid < 0) {
		rc = -errno;
		goto out;
	}
	if (pid == 0)
		_exit(child_main(kind, ctl, sp ? asyncpool_shared_fd(sp) : -1, n, reps));
	s.child = pid;
	had = sched_getaffinity(0, sizeof(mask), &mask) == 0;
	pin(0);
	ok = (!s.pool || (rc = open_ends(&s, true)) == 0) && parent_rounds(kind, &s, n, reps, out);
	if (!ok)
		atomic_store(&ctl->failed, 1);
	close_ends(&s);
	waitpid(pid, &st, 0);
	if (had)
		(void)sched_setaffinity(0, sizeof(mask), &mask);
	if (!rc && (!ok || !WIFEXITED(st) || WEXITSTATUS(st)))
		rc = -EPROTO;
	/* Both sides gave back what they took: a buffer missing is a bug. */
	if (!rc && sp && asyncpool_available(s.pool) != CH_BUFFERS)
		rc = -EUCLEAN;
out:
	if (sp)
		asyncpool_shared_close(sp);
	free(s.lat);
	munmap(ctl, sizeof(*ctl));
	return rc;
}
