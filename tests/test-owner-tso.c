/* SPDX-License-Identifier: MIT */
/*
 * The owner's send and the owner's leave are a Dekker pair (issue 54,
 * kind 8; pool_owner.c, tests/test-store-buffer):
 *
 *   sender (owner_send)                 leaving owner (ap_owner_leave_thread)
 *   slot = token                        orphan = 1
 *   fence seq_cst                       fence seq_cst
 *   orphan? drain the inbox             drain the inbox
 *
 * One of them must see the other's store, or the token stays in the
 * inbox of an owner that is gone.  Here the reordering that each fence
 * forbids happens on every run: the test-hook build emulates x86-TSO's
 * store buffer for this pair (lib/test_stall.h, AP_TSO_*): a thread
 * that sets ap_test_tso_armed holds its store of the token (or of
 * orphan) until its fence, or, if the fence is gone, until the end of
 * the function, past a stall point after its load, where this test
 * holds it while the other side runs to its end.
 *
 *  1. The send held after its look at orphan (AP_TS_SEND_LOOKED), the
 *     owner leaves meanwhile: with the send's fence, the leave finds the
 *     token and takes it (tests/mutants/owner-send-no-fence).
 *  2. The leave held after its drain (AP_TS_LEAVE_DRAINED), a send
 *     meanwhile: with the leave's fence, the send sees the orphan and
 *     drains the inbox itself, once the leave lets the lock go
 *     (tests/mutants/owner-leave-no-fence).
 *
 * Each case, a few rounds: no token left in the inbox of the owner that
 * left, the buffer back, the side that saw the other the one expected.
 * No timing: the stall points order the two threads.
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
#include "../lib/pool_bypass.h"

enum role { NONE, SENDER, LEAVER };

static struct asyncpool *pool;
static _Thread_local enum role role;
static _Atomic uint64_t lent_token;
static _Atomic int go, hold_sender, hold_leaver, release_sender, release_leaver;
static _Atomic int sender_at, leaver_at;        /* first stall point + 1, 0: none yet */
static int arm_leaver;

static void wait_for(_Atomic int *v)
{
	while (!atomic_load(v))
		sched_yield();
}

static void hook(enum ap_test_stall p)
{
	int none = 0;

	if (!ap_test_tso_armed)
		return;
	if (role == SENDER && (p == AP_TS_SEND_LOOKED || p == AP_TS_ORPHAN_SEEN)) {
		atomic_compare_exchange_strong(&sender_at, &none, (int)p + 1);
		if (atomic_load(&hold_sender))
			wait_for(&release_sender);
	} else if (role == LEAVER && p == AP_TS_LEAVE_DRAINED) {
		atomic_compare_exchange_strong(&leaver_at, &none, (int)p + 1);
		if (atomic_load(&hold_leaver))
			wait_for(&release_leaver);
	}
}

/*
 * Lends one buffer, then, when told, leaves as an exiting thread's cache
 * leaves (under the cache lock, as cache_free() calls it), its stores
 * held by the emulated store buffer in case 2.
 */
static void *owner(void *arg)
{
	struct asyncpool_lease l;
	struct ap_cache *c;

	(void)arg;
	role = LEAVER;
	if (asyncpool_acquire(pool, &l) || asyncpool_cache_flush(pool))
		return (void *)1;
	c = ap_cache_of(pool);
	if (!c || !c->box)
		return (void *)2;
	atomic_store(&lent_token, asyncpool_lease_token(&l));
	wait_for(&go);
	ap_test_tso_armed = arm_leaver;
	pthread_mutex_lock(&ap_cache_lock);
	ap_owner_leave_thread(c);
	pthread_mutex_unlock(&ap_cache_lock);
	ap_test_tso_armed = 0;
	return NULL;
}

static _Atomic uint64_t send_tok;
static int send_ret;

/* A copy of the lease sent back by another thread: owner_send() at once. */
static void *sender(void *arg)
{
	uint64_t tok = atomic_load(&send_tok);

	(void)arg;
	role = SENDER;
	ap_test_tso_armed = 1;
	send_ret = ap_owner_release(pool, NULL, AP_TOKEN_INDEX(tok), AP_TOKEN_GEN(tok));
	ap_test_tso_armed = 0;
	return NULL;
}

static void reset(void)
{
	atomic_store(&lent_token, 0);
	atomic_store(&go, 0);
	atomic_store(&hold_sender, 0);
	atomic_store(&hold_leaver, 0);
	atomic_store(&release_sender, 0);
	atomic_store(&release_leaver, 0);
	atomic_store(&sender_at, 0);
	atomic_store(&leaver_at, 0);
	send_ret = -1;
}

/* The owner's inbox after the round: 0 if no token is left in it. */
static int stranded(uint32_t o)
{
	struct ap_inbox *b = o && o < pool->box_count ? pool->boxes[o] : NULL;
	int n;

	if (!b || !atomic_load(&b->orphan))
		return -1;
	n = (int)ap_inbox_count(b);
	if (n)
		(void)asyncpool_cache_flush_all(pool);  /* settles it */
	return n;
}

static void round_(int leave_held, int r)
{
	pthread_t to, ts;
	uint64_t tok;
	void *res;
	uint32_t o;

	reset();
	arm_leaver = leave_held;
	if (pthread_create(&to, NULL, owner, NULL))
		bail_out("pthread_create");
	while (!(tok = atomic_load(&lent_token)))
		sched_yield();
	atomic_store(&send_tok, tok);
	o = atomic_load(&pool->owner_of[AP_TOKEN_INDEX(tok)]);
	if (!leave_held) {
		/* 1: the send's token held in its buffer past its look */
		atomic_store(&hold_sender, 1);
		if (pthread_create(&ts, NULL, sender, NULL))
			bail_out("pthread_create");
		wait_for(&sender_at);
		atomic_store(&go, 1);
		pthread_join(to, &res);
		atomic_store(&release_sender, 1);
		pthread_join(ts, NULL);
		is_int(atomic_load(&sender_at), AP_TS_SEND_LOOKED + 1,
		       "send %d: looked before the owner left, saw no orphan", r);
	} else {
		/* 2: the leave's orphan held in its buffer past its drain */
		atomic_store(&hold_leaver, 1);
		atomic_store(&go, 1);
		wait_for(&leaver_at);
		if (pthread_create(&ts, NULL, sender, NULL))
			bail_out("pthread_create");
		wait_for(&sender_at);   /* then it waits for the lock, or is done */
		atomic_store(&release_leaver, 1);
		pthread_join(to, &res);
		pthread_join(ts, NULL);
		is_int(atomic_load(&sender_at), AP_TS_ORPHAN_SEEN + 1,
		       "leave %d: the send after the leave's drain saw the orphan", r);
	}
	if (res)
		bail_out("round %d: the owner could not acquire (%p)", r, res);
	is_int(send_ret, 0, "%s %d: the copy went to its owner", leave_held ? "leave" : "send", r);
	is_int(stranded(o), 0, "%s %d: no token left in the inbox of the owner that left",
	       leave_held ? "leave" : "send", r);
	is_int(asyncpool_check(pool), 0, "%s %d: check", leave_held ? "leave" : "send", r);
}

int main(void)
{
	struct asyncpool_proactor *p;
	const int rounds = 3;

	plan(rounds * 2 * 4 + 1);
	tap_watchdog(60);
	if (asyncpool_proactor_create_memory(&p))
		bail_out("proactor");
	pool = make_pool(p, 64, 64, 8);
	ap_test_hook_stall = hook;
	for (int r = 0; r < rounds; r++)
		round_(0, r);
	for (int r = 0; r < rounds; r++)
		round_(1, r);
	ap_test_hook_stall = NULL;
	is_int(asyncpool_destroy(pool), 0, "destroy");
	asyncpool_proactor_destroy(p);
	return done_testing();
}
