/* SPDX-License-Identifier: MIT */
/*
 * A peer with the fd can write every byte of a channel (issue 33, item
 * 5): one case per forging.  A ring entry is only a hint, the buffer's
 * word decides: an entry naming a FREE, LEASED, CACHED buffer, one
 * queued in another channel, one of the wrong generation, out of range
 * or of generation 0 is refused, counted as a corruption of the channel
 * and never handed out; a lap that jumps ahead stops the ring there
 * (counted once), never reads past it; a head, a step or an end word a
 * peer rewrote is bounded, and never makes a reclaim take a live
 * holder's buffer.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <asyncpool.h>
#include "tap.h"
#include "testutil.h"
#include "layout-util.h"
#include "../lib/channel_ring.h"

#define N   16
#define BS  64
#define CAP 4

static struct asyncpool_shared *sp;
static struct asyncpool *pool;
static struct asyncpool_channel *s0, *r0, *s1, *r1;

static struct ap_chan *chan(uint32_t c)
{
	return ap_chan_in(asyncpool_shared_shm(sp)->base, N, 2, CAP, c);
}

static uint64_t corruptions(uint32_t c)
{
	struct asyncpool_channel_stats st;

	memset(&st, 0, sizeof(st));
	st.size = sizeof(st);
	if (asyncpool_channel_stats(pool, c, &st))
		bail_out("stats");
	return st.corruptions;
}

/* Publish token t at channel 0's next position, as a peer would. */
static void forge(uint64_t t)
{
	struct ap_chan *ch = chan(0);
	uint64_t p = atomic_load(&ch->head);

	/* Where the sender would write: past what is published. */
	p += ap_chan_depth(ch, CAP, p);
	atomic_store(&ap_chan_slots(ch)[p & (CAP - 1)].token, t);
	atomic_store(&ap_chan_slots(ch)[p & (CAP - 1)].seq, p + 1);
}

/* The forged entry is refused, counted, the channel goes on. */
static void refused(uint64_t t, const char *what)
{
	struct asyncpool_lease l;
	uint64_t before = corruptions(0);
	size_t avail = asyncpool_available(pool);

	forge(t);
	is_int(asyncpool_channel_recv(r0, &l), -EAGAIN, "%s: the receive refuses it (-EAGAIN)", what);
	is_int((long)(corruptions(0) - before), 1, "%s: counted as a corruption of the channel", what);
	is_int(asyncpool_available(pool), (long)avail, "%s: nothing taken from the pool", what);
}

static void sender_sends_one(void)
{
	struct asyncpool_lease l, got;

	/* The sender's next position is past the forged one: reopen it. */
	asyncpool_channel_close(s0);
	if (asyncpool_channel_open(pool, 0, ASYNCPOOL_CHANNEL_SEND, &s0))
		bail_out("reopen");
	if (asyncpool_acquire(pool, &l) || asyncpool_channel_send(s0, &l))
		bail_out("send");
	is_int(asyncpool_channel_recv(r0, &got), 0, "  a real send after it is received");
	asyncpool_lease_release(&got);
}

int main(void)
{
	struct asyncpool_shared_options o;
	struct asyncpool_lease held, cached, other, l;
	struct asyncpool *cpool;
	struct asyncpool_shared *csp;
	uint64_t t;

	plan(49);
	shared_options(&o, BS, N);
	o.channels = 2;
	o.channel_capacity = CAP;
	if (asyncpool_shared_create(&o, &sp))
		bail_out("create");
	pool = asyncpool_shared_pool(sp);
	if (asyncpool_set_quarantine(pool, 0) ||
	    asyncpool_channel_open(pool, 0, ASYNCPOOL_CHANNEL_SEND, &s0) ||
	    asyncpool_channel_open(pool, 0, ASYNCPOOL_CHANNEL_RECV, &r0) ||
	    asyncpool_channel_open(pool, 1, ASYNCPOOL_CHANNEL_SEND, &s1) ||
	    asyncpool_channel_open(pool, 1, ASYNCPOOL_CHANNEL_RECV, &r1))
		bail_out("ends");

	/* A FREE buffer: the head of the freelist. */
	if (asyncpool_acquire(pool, &l))
		bail_out("acquire");
	t = asyncpool_lease_token(&l);
	asyncpool_lease_release(&l);
	refused(t, "a FREE buffer's token");
	refused(t + ((uint64_t)1 << 32), "a FREE buffer at the next generation");
	/* A LEASED one: ours. */
	if (asyncpool_acquire(pool, &held))
		bail_out("acquire");
	refused(asyncpool_lease_token(&held), "a LEASED buffer's own token");
	is_int(asyncpool_release_token(pool, asyncpool_lease_token(&held)), 0,
	       "  the lease is still its holder's");
	/* A CACHED one, in another handle's cache. */
	if (asyncpool_shared_open_fd(asyncpool_shared_fd(sp), &csp))
		bail_out("open");
	cpool = asyncpool_shared_pool(csp);
	if (asyncpool_set_cache(cpool, 4) || asyncpool_acquire(cpool, &cached))
		bail_out("cache");
	asyncpool_lease_release(&cached);       /* into the cache */
	refused(asyncpool_lease_token(&cached) + ((uint64_t)1 << 32), "a CACHED buffer");
	asyncpool_shared_close(csp);
	/* One queued in channel 1. */
	if (asyncpool_acquire(pool, &other))
		bail_out("acquire");
	t = asyncpool_lease_token(&other);
	if (asyncpool_channel_send(s1, &other))
		bail_out("send on 1");
	refused(t, "a buffer queued in another channel");
	is_int(asyncpool_channel_recv(r1, &l), 0, "  the other channel still delivers it");
	is_int(l.buffer_index, (uint32_t)t, "  the same buffer");
	asyncpool_lease_release(&l);
	/* Out of range, generation 0. */
	refused((((uint64_t)(1) << 32) | (uint32_t)(N)), "an index = buffer_count");
	refused((((uint64_t)(1) << 32) | (uint32_t)(0xffffffffu)), "an index 0xffffffff");
	refused((((uint64_t)(0) << 32) | (uint32_t)(0)), "generation 0");
	sender_sends_one();
	/* A queued entry rewritten to another generation: held, never handed out. */
	if (asyncpool_acquire(pool, &l))
		bail_out("acquire");
	t = asyncpool_lease_token(&l);
	if (asyncpool_channel_send(s0, &l))
		bail_out("send");
	{
		struct ap_chan *ch = chan(0);
		uint64_t p = atomic_load(&ch->head);

		atomic_store(&ap_chan_slots(ch)[p & (CAP - 1)].token, t + ((uint64_t)1 << 32));
	}
	is_int(asyncpool_channel_recv(r0, &l), -EAGAIN, "a queued entry's generation rewritten: refused");
	is_int(asyncpool_available(pool), N - 1, "  the buffer stays in the channel (held, not lost)");
	is_int(asyncpool_check(pool), 0, "  check: consistent (one queued)");
	/* A lap that jumps: the slot at the receiver's position says a later lap. */
	{
		struct ap_chan *ch = chan(0);
		uint64_t p = atomic_load(&ch->head), before = corruptions(0);

		atomic_store(&ap_chan_slots(ch)[p & (CAP - 1)].seq, p + 1 + CAP);
		is_int(asyncpool_channel_recv(r0, &l), -EAGAIN, "a lap that jumps ahead: -EAGAIN");
		is_int(asyncpool_channel_recv(r0, &l), -EAGAIN, "  again");
		is_int((long)(corruptions(0) - before), 1, "  counted once");
		atomic_store(&ap_chan_slots(ch)[p & (CAP - 1)].seq, 0);
	}
	/* A head a peer rewrote: read when the sender's copy says full. */
	{
		struct ap_chan *ch = chan(0);
		uint64_t h = atomic_load(&ch->head), tk[CAP];
		int n = 0, rc;

		for (;;) {
			if (asyncpool_acquire(pool, &l))
				bail_out("acquire");
			if ((rc = asyncpool_channel_send(s0, &l)) != 0)
				break;
			n++;
		}
		is_int(rc, -EAGAIN, "the channel filled (%d more)", n);
		atomic_store(&ch->head, h + 1000);
		is_int(asyncpool_channel_send(s0, &l), -EAGAIN, "a head beyond the sender's: no room");
		atomic_store(&ch->head, h - 1000);
		is_int(asyncpool_channel_send(s0, &l), -EAGAIN, "a head a thousand behind: no room");
		asyncpool_lease_release(&l);
		atomic_store(&ch->head, h);
		is_int(asyncpool_channel_recv_tokens(r0, tk, CAP), n,
		       "head restored: the real entries received, the rewritten one refused");
		is_int(asyncpool_release_tokens(pool, tk, (uint32_t)n), 0, "  released");
	}
	/* A forged step and ends: a reclaim takes no live holder's buffer. */
	{
		struct ap_chan *ch = chan(1);
		struct asyncpool_channel *x;
		uint64_t mine = atomic_load(&ch->send_end);

		if (asyncpool_acquire(pool, &held))
			bail_out("acquire");
		atomic_store(&ap_chan_slots(ch)[0].token, asyncpool_lease_token(&held));
		atomic_store(&ap_chan_slots(ch)[0].seq, 0);
		atomic_store(&ch->step_pos, 0);
		atomic_store(&ch->step_n, 0xffffffffu);
		atomic_store(&ch->send_end, (uint64_t)200);     /* names no attachment */
		ok(asyncpool_reclaim(pool) >= 0, "a forged step of 2^32 - 1 and a forged send end: reclaim");
		is_int(asyncpool_release_token(pool, asyncpool_lease_token(&held)), 0,
		       "  the live lease the step names is still its holder's");
		is_int((long)atomic_load(&ch->send_end), 0, "  the forged end is freed");
		is_int((long)atomic_load(&ch->step_n), 0, "  the step cleared");
		atomic_store(&ch->send_end, mine);
		is_int(asyncpool_channel_open(pool, 1, ASYNCPOOL_CHANNEL_RECV, &x), -EBUSY,
		       "an end a live attachment holds: -EBUSY");
		atomic_store(&ch->recv_end, (uint64_t)0xffffffffffffff3full);
		is_int(asyncpool_channel_open(pool, 1, ASYNCPOOL_CHANNEL_RECV, &x), 0,
		       "an end word that names no slot is taken (after the reclaim frees it)");
		asyncpool_channel_close(x);
		/* r1's end was overwritten: its close leaves the word alone. */
	}
	/* A forged QUEUED word with no entry, with live ends: not ours to take. */
	{
		_Atomic uint64_t *w = (void *)((char *)asyncpool_shared_shm(sp)->base + AP_OFF_NEXT);

		if (asyncpool_acquire(pool, &l))
			bail_out("acquire");
		atomic_store(&w[l.buffer_index], ap_queued_word(1, l.generation));
		is_int(asyncpool_check(pool), 0, "a QUEUED word of a live channel: consistent");
		atomic_store(&w[l.buffer_index], ap_queued_word(2, l.generation));
		is_int(asyncpool_check(pool), -EUCLEAN, "a QUEUED word of channel 2 of 2: -EUCLEAN");
		atomic_store(&w[l.buffer_index], AP_W_MAKE(AP_K_LEASED, 1, l.generation));
		asyncpool_lease_release(&l);
	}
	asyncpool_channel_close(s0);
	asyncpool_channel_close(r0);
	asyncpool_channel_close(s1);
	asyncpool_channel_close(r1);
	/* The dead ends' reclaim: ours are closed; a new handle's drains nothing live. */
	is_int(asyncpool_available(pool), N - 1, "at the end: all but the one whose entry was forged");
	ok(asyncpool_check(pool) == 0, "check clean");
	asyncpool_shared_close(sp);
	return done_testing();
}
