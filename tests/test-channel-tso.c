/* SPDX-License-Identifier: MIT */
/*
 * A channel's send and its waiting receiver are a Dekker pair (issue 54,
 * kinds 1 and 8; channel.c send_run, wait_loop and prep_wait,
 * wait_word.h):
 *
 *   sender (send_run)                   receiver (wait_loop, prep_wait)
 *   slot.seq = pos (seq_cst store)      fetch_or(wait, 1)   announce
 *   look at the wake word               fence seq_cst
 *     a waiter? wake it                 look at the slot: an entry? take it
 *                                       futex_wait(wait)
 *
 * One of them must see the other's store, or the receiver sleeps with an
 * entry queued and no wake coming: a lost wake, which the wait's slice
 * (50 ms) hides.  Here each reordering that a barrier forbids happens on
 * every run, in the test-hook build (lib/test_stall.h, AP_TSO_*):
 *
 *  1. The sender's: the last publish is a seq_cst store (on x86 an xchg,
 *     or mov + mfence); made a release store (a plain mov), the send's
 *     look at the wake word passes it, as x86-TSO's store buffer lets
 *     it.  The armed sender holds its publish in the emulated buffer
 *     until the barrier the seq_cst store is, or, without it, past a
 *     stall point after its look (AP_TS_CHAN_WAKE_LOOKED), where this
 *     test holds it while a receiver starts its wait: with the seq_cst
 *     publish the wait's first look finds the entry and it never
 *     announces; with a release (tests/mutants/chan-publish-release) it
 *     announces (bit 0 of the wake word, read here) and sleeps, and the
 *     sender, once let go, does not wake it.
 *  2. The receiver's fence between its announcement (a seq_cst fetch_or)
 *     and its look: x86 needs none (the fetch_or is a locked
 *     instruction), C11 does (the look is no seq_cst access), and so do
 *     weaker machines.  The armed receiver's announcement is held as a
 *     store (AP_TSO_ANNOUNCE) until its fence, or, without it, past a
 *     stall point after its look (AP_TS_CHAN_WAITER_LOOKED), where this
 *     test holds it and sends: the send must see the announcement and
 *     wake, which moves the word (tests/mutants/chan-wait-no-fence);
 *     The same for asyncpool_channel_recv_any() (one end), whose fence
 *     follows the announcements on every end's word
 *     (tests/mutants/chan-recv-any-no-fence), and for the wait fd's
 *     thread, which the test arms at its start (AP_TS_CHAN_WAKER_START)
 *     (tests/mutants/chan-waker-no-fence);
 *  3. the same for asyncpool_channel_prep_wait(): the value its SQE
 *     sleeps on must no longer be the word's after the send (its futex
 *     wait completes at once) (tests/mutants/chan-prep-wait-no-fence).
 *
 * No timing: stall points order the threads, and the wake word says
 * whether the receiver announced or was woken.  A receiver not woken is
 * woken by the test once it has failed.  The wait's slice is made 10 s
 * (ap_test_hook_slice_ms), its timeout 10 s: only a bound for a broken
 * build.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#ifdef HAVE_LIBURING
#include <liburing.h>
#endif

#include <asyncpool.h>
#include "hooks.h"
#include "../lib/channel_ring.h"
#include "../lib/pool_wait.h"

#define N       4
#define BS      64
#define CAP     4
#define ROUNDS  3
#define WAIT_NS (10 * 1000000000ll)

enum role { NONE, SENDER, RECEIVER };

static _Thread_local enum role role;
static _Atomic int hold_at = -1, held_at, release_held;
static struct asyncpool *pool;
static struct asyncpool_channel *tx, *rx;
static _Atomic uint32_t *word;
static _Atomic int arm_waker;

/* The armed thread of the case, at the case's stall point: held once. */
static void hook(enum ap_test_stall p)
{
	if (p == AP_TS_CHAN_WAKER_START && atomic_load(&arm_waker)) {
		/* the library's wait fd thread: armed for its life */
		role = RECEIVER;
		ap_test_tso_armed = 1;
		return;
	}
	if (!ap_test_tso_armed || role == NONE || (int)p != atomic_load(&hold_at))
		return;
	atomic_store(&hold_at, -1);
	atomic_store(&held_at, 1);
	while (!atomic_load(&release_held))
		sched_yield();
}

static void hold_next(enum ap_test_stall at)
{
	atomic_store(&held_at, 0);
	atomic_store(&release_held, 0);
	atomic_store(&hold_at, (int)at);
}

static void wait_held(void)
{
	while (!atomic_load(&held_at))
		sched_yield();
}

/* A receiver that did not return (not woken): wake it, the test failed. */
static void rescue(_Atomic int *done, const char *what, int r)
{
	if (atomic_load(done))
		return;
	diag("%s %d: the receiver may sleep with an entry queued: a lost wake", what, r);
	atomic_fetch_add(word, 2);      /* a value it does not sleep on */
	ap_futex_wake_all(word, true);
}

/* A wait that announced and then found an entry leaves bit 0 (the next
 * send clears it); nobody waits between the cases: clear it, so that
 * bit 0 is this case's receiver. */
static void clear_announced(void)
{
	atomic_fetch_and(word, ~(uint32_t)AP_WAIT_WAITERS);
}

/* ---- 1: the send's publish before its look at the wake word ---- */

static struct asyncpool_lease to_send;
static int send_rc;

static void *sender(void *arg)
{
	(void)arg;
	role = SENDER;
	ap_test_tso_armed = 1;
	send_rc = asyncpool_channel_send(tx, &to_send);
	ap_test_tso_flush();
	ap_test_tso_armed = 0;
	return NULL;
}

static struct asyncpool_lease got;
static int recv_rc;
static _Atomic int recv_done;
static int arm_receiver, use_any;

static void *receiver(void *arg)
{
	(void)arg;
	role = RECEIVER;
	ap_test_tso_armed = arm_receiver;
	if (use_any) {
		struct asyncpool_channel_item it;

		recv_rc = asyncpool_channel_recv_any(&rx, 1, &it, WAIT_NS);
		got = it.lease;
	} else {
		recv_rc = asyncpool_channel_recv_wait(rx, &got, WAIT_NS);
	}
	ap_test_tso_flush();
	ap_test_tso_armed = 0;
	atomic_store(&recv_done, 1);
	return NULL;
}

static void receiver_start(pthread_t *t, int armed)
{
	atomic_store(&recv_done, 0);
	memset(&got, 0, sizeof(got));
	recv_rc = -1;
	arm_receiver = armed;
	if (pthread_create(t, NULL, receiver, NULL))
		bail_out("pthread_create");
}

static void received(pthread_t t, uint32_t idx, const char *what, int r)
{
	pthread_join(t, NULL);
	is_int(recv_rc, 0, "%s %d: received", what, r);
	is_int(got.buffer_index, idx, "%s %d: the buffer sent", what, r);
	asyncpool_lease_release(&got);
}

static void case_send(struct ap_chan *ch, int r)
{
	pthread_t ts, tr;
	uint32_t idx;

	clear_announced();
	if (asyncpool_acquire(pool, &to_send))
		bail_out("acquire");
	idx = to_send.buffer_index;
	send_rc = -1;

	/* The send, held after its look at the wake word. */
	hold_next(AP_TS_CHAN_WAKE_LOOKED);
	if (pthread_create(&ts, NULL, sender, NULL))
		bail_out("pthread_create");
	wait_held();

	/* The wait: it takes the entry at once, or announces and sleeps. */
	receiver_start(&tr, 0);
	while (!atomic_load(&recv_done) && !(atomic_load(word) & AP_WAIT_WAITERS))
		sched_yield();
	ok(atomic_load(&recv_done) && !(atomic_load(word) & AP_WAIT_WAITERS),
	   "send %d: a wait begun after the send's look at the wake word took the entry at "
	   "once: the publish came before the look", r);

	atomic_store(&release_held, 1);
	pthread_join(ts, NULL);
	is_int(send_rc, 0, "send %d: sent", r);
	is_int(atomic_load(&ch->sent), r + 1, "send %d: the channel's sent count (its wake word "
	       "is the one read here)", r);
	rescue(&recv_done, "send", r);
	received(tr, idx, "send", r);
}

/* ---- 2: the wait's announcement before its look ---- */

static void case_wait(int r, int any)
{
	const char *what = any ? "any" : "wait";
	struct asyncpool_lease l;
	uint32_t before, after;
	pthread_t tr;

	clear_announced();
	if (asyncpool_acquire(pool, &l))
		bail_out("acquire");
	/* The wait, armed, held after its announcement and its look. */
	hold_next(AP_TS_CHAN_WAITER_LOOKED);
	use_any = any;
	receiver_start(&tr, 1);
	wait_held();
	before = atomic_load(word);
	{
		uint32_t idx = l.buffer_index;

		is_int(asyncpool_channel_send(tx, &l), 0, "%s %d: sent", what, r);
		after = atomic_load(word);
		ok((before & AP_WAIT_WAITERS) && after != before,
		   "%s %d: the send after the wait's look saw its announcement and woke it "
		   "(the word %#x, then %#x)", what, r, before, after);
		atomic_store(&release_held, 1);
		if (after == before) {
			/* it sleeps once it let its announcement go */
			while (!atomic_load(&recv_done) && !(atomic_load(word) & AP_WAIT_WAITERS))
				sched_yield();
			rescue(&recv_done, what, r);
		}
		received(tr, idx, what, r);
	}
	use_any = 0;
}

/* ---- 2, the wait fd's thread: armed from its start ---- */

static void case_waker(int r)
{
	struct asyncpool_lease l, g;
	uint32_t before, after, idx;
	struct pollfd pf;
	uint64_t cnt;
	int fd;

	clear_announced();
	if (asyncpool_acquire(pool, &l))
		bail_out("acquire");
	idx = l.buffer_index;
	hold_next(AP_TS_CHAN_WAITER_LOOKED);
	atomic_store(&arm_waker, 1);
	fd = asyncpool_channel_wait_fd(rx);
	if (fd < 0)
		bail_out("wait_fd: %d", fd);
	wait_held();
	atomic_store(&arm_waker, 0);
	before = atomic_load(word);
	is_int(asyncpool_channel_send(tx, &l), 0, "fd %d: sent", r);
	after = atomic_load(word);
	ok((before & AP_WAIT_WAITERS) && after != before,
	   "fd %d: the send after the wait fd thread's look saw its announcement and woke it "
	   "(the word %#x, then %#x)", r, before, after);
	atomic_store(&release_held, 1);
	if (after == before) {
		diag("fd %d: the wait fd's thread may sleep with an entry queued: a lost wake", r);
		while (!(atomic_load(word) & AP_WAIT_WAITERS))
			sched_yield();
		atomic_fetch_add(word, 2);
		ap_futex_wake_all(word, true);
	}
	/* woken, it looks again and makes the fd readable (no timeout: a
	 * hang here is the watchdog's) */
	pf.fd = fd;
	pf.events = POLLIN;
	is_int(poll(&pf, 1, -1) == 1 && read(fd, &cnt, sizeof(cnt)) == sizeof(cnt), 1,
	       "fd %d: the wait fd became readable", r);
	is_int(asyncpool_channel_recv(rx, &g), 0, "fd %d: received", r);
	is_int(g.buffer_index, idx, "fd %d: the buffer sent", r);
	asyncpool_lease_release(&g);
	/* a new end, a new thread, for the next round */
	if (asyncpool_channel_close(rx) ||
	    asyncpool_channel_open(pool, 0, ASYNCPOOL_CHANNEL_RECV, &rx))
		bail_out("reopen the receiving end");
}

/* ---- 3: the same for asyncpool_channel_prep_wait ---- */

#ifdef HAVE_LIBURING
static struct io_uring_sqe prep_sqe;
static int prep_rc;

static void *preparer(void *arg)
{
	(void)arg;
	role = RECEIVER;
	ap_test_tso_armed = 1;
	prep_rc = asyncpool_channel_prep_wait(rx, &prep_sqe);
	ap_test_tso_flush();
	ap_test_tso_armed = 0;
	return NULL;
}
#endif

/* Whether prep_wait is there (IORING_OP_FUTEX_WAIT, Linux 6.7). */
static bool prep_works(void)
{
#ifdef HAVE_LIBURING
	struct io_uring_sqe sqe;

	return asyncpool_channel_prep_wait(rx, &sqe) == 0;
#else
	return false;
#endif
}

static void case_prep(int r)
{
#ifdef HAVE_LIBURING
	struct asyncpool_lease l;
	pthread_t tp;
	uint32_t idx;

	clear_announced();
	if (asyncpool_acquire(pool, &l))
		bail_out("acquire");
	idx = l.buffer_index;
	memset(&prep_sqe, 0, sizeof(prep_sqe));
	prep_rc = -1;
	hold_next(AP_TS_CHAN_WAITER_LOOKED);
	if (pthread_create(&tp, NULL, preparer, NULL))
		bail_out("pthread_create");
	wait_held();
	is_int(asyncpool_channel_send(tx, &l), 0, "prep %d: sent", r);
	atomic_store(&release_held, 1);
	pthread_join(tp, NULL);
	is_int(prep_rc, 0, "prep %d: prep_wait", r);
	ok((uint32_t)prep_sqe.off != atomic_load(word),
	   "prep %d: a send after the prep's look saw its announcement and moved the word: the "
	   "SQE's value %#x is not the word's %#x, its wait completes at once", r,
	   (uint32_t)prep_sqe.off, atomic_load(word));
	{
		struct asyncpool_lease g;

		is_int(asyncpool_channel_recv(rx, &g), 0, "prep %d: received", r);
		is_int(g.buffer_index, idx, "prep %d: the buffer sent", r);
		asyncpool_lease_release(&g);
	}
#else
	(void)r;
#endif
}

int main(void)
{
	struct asyncpool_shared_options o;
	struct asyncpool_shared *sp;
	struct ap_chan *ch;

	plan(ROUNDS * (5 + 4 + 4 + 5 + 5) + 1);
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
	word = &ch->wait;
	ap_test_hook_stall = hook;
	for (int r = 0; r < ROUNDS; r++)
		case_send(ch, r);
	for (int r = 0; r < ROUNDS; r++)
		case_wait(r, 0);
	for (int r = 0; r < ROUNDS; r++)
		case_wait(r, 1);
	for (int r = 0; r < ROUNDS; r++)
		case_waker(r);
	for (int r = 0; r < ROUNDS; r++)
		if (prep_works())
			case_prep(r);
		else
			skip(5, "prep %d: no IORING_OP_FUTEX_WAIT here (Linux 6.7)", r);
	ap_test_hook_stall = NULL;
	is_int(asyncpool_check(pool), 0, "check");
	asyncpool_channel_close(tx);
	asyncpool_channel_close(rx);
	asyncpool_shared_close(sp);
	return done_testing();
}
