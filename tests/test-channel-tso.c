/* SPDX-License-Identifier: MIT */
/*
 * A channel's send and its waiting receiver are a Dekker pair (issue 54,
 * kinds 1 and 8; channel.c send_run and wait_loop, wait_word.h):
 *
 *   sender (send_run)                   receiver (wait_loop)
 *   slot.seq = pos (seq_cst store)      fetch_or(wait, 1)   announce
 *   look at the wake word               fence seq_cst
 *     a waiter? wake it                 look at the slot: an entry? take it
 *                                       futex_wait(wait)
 *
 * One of them must see the other's store, or the receiver sleeps with an
 * entry queued and no wake coming: a lost wake, which the wait's slice
 * (50 ms) hides.  The last publish is a seq_cst store (on x86 an xchg,
 * or mov + mfence): made a release store (a plain mov), the sender's
 * look at the wake word passes its store.  Here that reordering happens
 * on every run: the test-hook build emulates x86-TSO's store buffer
 * (lib/test_stall.h, AP_TSO_STORE_SC): the armed sender holds its
 * publish until the barrier the seq_cst store is, or, without it, past
 * a stall point after its look at the wake word (AP_TS_CHAN_WAKE_LOOKED),
 * where this test holds it while the receiver starts its wait.
 *
 * Each round: the sender held after its look (it saw no waiter: the
 * receiver has not started); then the receiver waits.  With the seq_cst
 * publish its first look finds the entry and it never announces; with a
 * release (tests/mutants/chan-publish-release) it finds nothing,
 * announces (bit 0 of the wake word, read here: no clock) and sleeps,
 * and the sender, once let go, does not wake it: the test says so, then
 * wakes it itself so that the run ends.  No timing: the stall point
 * orders the threads, and the wake word says whether the receiver
 * waited.  The wait's slice is made 10 s (ap_test_hook_slice_ms), its
 * timeout 1 s: only a bound for a broken build.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include <asyncpool.h>
#include "hooks.h"
#include "../lib/channel_ring.h"
#include "../lib/pool_wait.h"

#define N       4
#define BS      64
#define CAP     4
#define ROUNDS  3

enum role { NONE, SENDER };

static _Thread_local enum role role;
static _Atomic int hold_sender, release_sender, sender_at;
static struct asyncpool_channel *tx, *rx;

static void hook(enum ap_test_stall p)
{
	if (!ap_test_tso_armed || role != SENDER || p != AP_TS_CHAN_WAKE_LOOKED)
		return;
	atomic_store(&sender_at, 1);
	if (atomic_load(&hold_sender))
		while (!atomic_load(&release_sender))
			sched_yield();
}

static struct asyncpool_lease to_send;
static int send_rc;

static void *sender(void *arg)
{
	(void)arg;
	role = SENDER;
	ap_test_tso_armed = 1;
	send_rc = asyncpool_channel_send(tx, &to_send);
	ap_test_tso_armed = 0;
	return NULL;
}

static struct asyncpool_lease got;
static int recv_rc;
static _Atomic int recv_done;

static void *receiver(void *arg)
{
	(void)arg;
	recv_rc = asyncpool_channel_recv_wait(rx, &got, 1000 * 1000000ll);
	atomic_store(&recv_done, 1);
	return NULL;
}

static void round_(struct asyncpool *pool, struct ap_chan *ch, int r)
{
	_Atomic uint32_t *word = &ch->wait;
	pthread_t ts, tr;
	uint32_t idx;
	int at_once;

	atomic_store(&hold_sender, 1);
	atomic_store(&release_sender, 0);
	atomic_store(&sender_at, 0);
	atomic_store(&recv_done, 0);
	memset(&got, 0, sizeof(got));
	send_rc = recv_rc = -1;
	if (asyncpool_acquire(pool, &to_send))
		bail_out("acquire");
	idx = to_send.buffer_index;
	/* A wait that announced, then found an entry, leaves bit 0 (the
	 * next send clears it): only after a lost wake here.  Nobody waits
	 * now: clear it, so that bit 0 below is this round's receiver. */
	atomic_fetch_and(word, ~(uint32_t)AP_WAIT_WAITERS);

	/* The send, held after its look at the wake word. */
	if (pthread_create(&ts, NULL, sender, NULL))
		bail_out("pthread_create");
	while (!atomic_load(&sender_at))
		sched_yield();

	/* The wait: it takes the entry at once, or announces and sleeps. */
	if (pthread_create(&tr, NULL, receiver, NULL))
		bail_out("pthread_create");
	while (!atomic_load(&recv_done) && !(atomic_load(word) & AP_WAIT_WAITERS))
		sched_yield();
	at_once = atomic_load(&recv_done) && !(atomic_load(word) & AP_WAIT_WAITERS);
	ok(at_once, "round %d: a wait begun after the send's look at the wake word took the "
	   "entry at once: the publish came before the look", r);

	atomic_store(&release_sender, 1);
	pthread_join(ts, NULL);
	is_int(send_rc, 0, "round %d: sent", r);
	is_int(atomic_load(&ch->sent), r + 1, "round %d: the channel's sent count (its wake word "
	       "is the one read here)", r);
	if (!atomic_load(&recv_done) && (atomic_load(word) & AP_WAIT_WAITERS)) {
		/* Asleep, and the send did not wake it: end the wait. */
		diag("round %d: the receiver sleeps and the send did not wake it: a lost wake", r);
		atomic_fetch_add(word, 1);
		ap_futex_wake_all(word, true);
	}
	pthread_join(tr, NULL);
	is_int(recv_rc, 0, "round %d: received", r);
	is_int(got.buffer_index, idx, "round %d: the buffer sent", r);
	asyncpool_lease_release(&got);
}

int main(void)
{
	struct asyncpool_shared_options o;
	struct asyncpool_shared *sp;
	struct asyncpool *pool;
	struct ap_chan *ch;

	plan(ROUNDS * 5 + 1);
	tap_watchdog(60);
	atomic_store(&ap_test_hook_slice_ms, 10000);
	shared_options(&o, BS, N);
	o.channels = 1;
	o.channel_capacity = CAP;
	if (asyncpool_shared_create(&o, &sp))
		bail_out("shared_create");
	pool = asyncpool_shared_pool(sp);
	if (asyncpool_channel_open(pool, 0, ASYNCPOOL_CHANNEL_SEND, &tx) ||
	    asyncpool_channel_open(pool, 0, ASYNCPOOL_CHANNEL_RECV, &rx))
		bail_out("channel_open");
	ch = ap_chan_in(asyncpool_shared_shm(sp)->base, N, 1, CAP, 0);
	ap_test_hook_stall = hook;
	for (int r = 0; r < ROUNDS; r++)
		round_(pool, ch, r);
	ap_test_hook_stall = NULL;
	is_int(asyncpool_check(pool), 0, "check");
	asyncpool_channel_close(tx);
	asyncpool_channel_close(rx);
	asyncpool_shared_close(sp);
	return done_testing();
}
