/* SPDX-License-Identifier: MIT */
/*
 * Ownership (issue 22, lib/pool_owner.c): in a local pool
 * with caches, the cache that lent a buffer decides every release of
 * it; a release on another thread is sent to it.  Each case states one
 * promise of asyncpool_release_token(3) and asyncpool_lease_release(3):
 *
 *  - local against remote: the owner releases one copy of a lease while
 *    another thread has checked a second copy and is about to send it
 *    (a stall point holds it there); then the other order.  Exactly one
 *    is taken, the other is counted once the owner looks at its inbox.
 *  - a stale copy is refused at once (-ESTALE), on any thread.
 *  - in transit: a release gathered in a thread's outbox, not yet sent,
 *    is counted by asyncpool_available(); a release by index of it is
 *    refused (it was released); a flush of every cache delivers it.
 *  - the owner exits with lent buffers, and with a batch for it still in
 *    another thread's outbox: everything comes back, and a bulk acquire
 *    of the whole pool gets it without -ENOBUFS.
 *  - a releasing thread exits with its outbox full of another owner's
 *    releases: its exit sends them.
 *  - a waiter sleeps while every buffer is lent by another thread's
 *    cache; a release on a third thread goes to the owner's inbox and
 *    wakes it.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <asyncpool.h>
#include "tap.h"
#include "testutil.h"
#include "hooks.h"
#include "../lib/pool_inbox.h"

#define CAP 64
/* Each case runs twice: caches of 16, then none (a local pool without
 * caches lends too: pool_lend.c, "Lending without a cache"). */
static uint32_t cache_size;
#define CACHE cache_size

static struct asyncpool_proactor *proactor;

static uint64_t empties(struct asyncpool *p)
{
	struct asyncpool_stats st = { .size = sizeof(st) };

	asyncpool_stats(p, &st);
	return st.empty;
}

static void whole(struct asyncpool *p, const char *what)
{
	is_int(asyncpool_cache_flush_all(p), 0, "%s: flush_all", what);
	is_int(asyncpool_check(p), 0, "%s: the audit is clean", what);
	is_int(asyncpool_available(p), CAP, "%s: every buffer free once", what);
}

/* ---- local against remote ---- */

static struct {
	struct asyncpool *pool;
	uint64_t token;
	int rc;
	_Atomic int stalled, go, done;
} lr;

static __thread bool stall_me;

static void lr_stall(enum ap_test_stall p)
{
	if (p != AP_TS_CACHE_CLAIM || !stall_me)
		return;
	stall_me = false;
	atomic_store(&lr.stalled, 1);
	while (!atomic_load(&lr.go))
		sched_yield();
}

static void *remote_release(void *arg)
{
	stall_me = arg != NULL;
	lr.rc = asyncpool_release_token(lr.pool, lr.token);
	asyncpool_cache_flush(lr.pool);         /* sends what it gathered */
	atomic_store(&lr.done, 1);
	return NULL;
}

static void local_against_remote(bool remote_first)
{
	const char *what = remote_first ? "remote sent first" : "remote stalled after its check";
	struct asyncpool *p = make_pool(proactor, 64, CAP, CACHE);
	struct asyncpool_lease l;
	pthread_t t;
	int rc;

	lr.pool = p;
	atomic_store(&lr.stalled, 0);
	atomic_store(&lr.go, 0);
	atomic_store(&lr.done, 0);
	is_int(asyncpool_acquire(p, &l), 0, "%s: the owner acquires", what);
	lr.token = asyncpool_lease_token(&l);
	if (remote_first) {
		/* The remote copy is in the owner's inbox before it releases. */
		pthread_create(&t, NULL, remote_release, NULL);
		pthread_join(t, NULL);
		rc = asyncpool_release_token(p, lr.token);
	} else {
		ap_test_hook_stall = lr_stall;
		pthread_create(&t, NULL, remote_release, (void *)1);
		while (!atomic_load(&lr.stalled) && !atomic_load(&lr.done))
			sched_yield();
		/* (tests/mutants/token-rest-freelist: a release that went to
		 * the freelist never stops there) */
		if (!atomic_load(&lr.stalled))
			bail_out("%s: the remote release did not stop at the cache's claim (AP_TS_CACHE_CLAIM)",
				 what);
		rc = asyncpool_release_token(p, lr.token);
		atomic_store(&lr.go, 1);
		pthread_join(t, NULL);
		ap_test_hook_stall = NULL;
	}
	is_int(rc, 0, "%s: the owner's release is taken", what);
	is_int(lr.rc, 0, "%s: the remote copy was checked and sent", what);
	is_int(bad_releases(p), 0, "%s: nothing refused before the owner looks", what);
	/* The owner looks at its inbox when it next refills or flushes. */
	is_int(asyncpool_cache_flush(p), 0, "%s: the owner flushes", what);
	is_int(bad_releases(p), 1, "%s: the owner refused the other copy, counted once", what);
	whole(p, what);
	is_int(asyncpool_destroy(p), 0, "%s: destroy", what);
}

/* ---- a copy settled after the owner lent the buffer again ---- */

static _Atomic int held_phase;

/* Releases lr.token (a copy): it waits in this thread's outbox until phase 2. */
static void *hold_copy(void *arg)
{
	(void)arg;
	lr.rc = asyncpool_release_token(lr.pool, lr.token);
	atomic_store(&held_phase, 1);
	while (atomic_load(&held_phase) != 2)
		sched_yield();
	return NULL;
}

static void settled_late(void)
{
	struct asyncpool *p = make_pool(proactor, 64, CAP, CACHE);
	struct asyncpool_lease l, again;
	pthread_t t;

	lr.pool = p;
	atomic_store(&held_phase, 0);
	asyncpool_acquire(p, &l);
	lr.token = asyncpool_lease_token(&l);
	pthread_create(&t, NULL, hold_copy, NULL);
	while (!atomic_load(&held_phase))
		sched_yield();
	is_int(lr.rc, 0, "settled late: a copy gathered in another thread's outbox");
	/* The owner releases its copy and lends the buffer again (its cache is LIFO). */
	is_int(asyncpool_release_token(p, lr.token), 0, "settled late: the owner's copy is taken");
	is_int(asyncpool_acquire(p, &again), 0, "settled late: acquired again");
	is_int(again.buffer_index, l.buffer_index, "settled late: the same buffer, lent again");
	/* A flush of every cache decides the gathered copy, by CAS, now. */
	is_int(asyncpool_cache_flush_all(p), 0, "settled late: flush_all");
	is_int(bad_releases(p), 1, "settled late: the old copy was refused");
	is_int(asyncpool_release_token(p, asyncpool_lease_token(&again)), 0,
	       "settled late: the new lease is still the holder's");
	again.release.fn = NULL;
	l.release.fn = NULL;
	atomic_store(&held_phase, 2);
	pthread_join(t, NULL);
	whole(p, "settled late");
	is_int(asyncpool_destroy(p), 0, "settled late: destroy");
}

/*
 * The same race decided by the owner itself: the other thread's exit
 * sends the gathered copy to the live owner's inbox, and the owner's
 * next refill drains it, refuses it and counts it, exactly once, before
 * any flush.  tests/mutants/owner-drain-uncounted, lend-drain-uncounted
 */
static void settled_by_owner(void)
{
	struct asyncpool *p = make_pool(proactor, 64, CAP, CACHE);
	struct asyncpool_lease l, again, more[20];
	pthread_t t;

	lr.pool = p;
	atomic_store(&held_phase, 0);
	asyncpool_acquire(p, &l);
	lr.token = asyncpool_lease_token(&l);
	pthread_create(&t, NULL, hold_copy, NULL);
	while (!atomic_load(&held_phase))
		sched_yield();
	is_int(asyncpool_release_token(p, lr.token), 0, "settled by the owner: its copy is taken");
	is_int(asyncpool_acquire(p, &again), 0, "settled by the owner: acquired again");
	atomic_store(&held_phase, 2);
	pthread_join(t, NULL);          /* its exit sends the copy to our inbox */
	for (int i = 0; i < 20; i++)    /* more than a cache: a refill drains the inbox */
		if (asyncpool_acquire(p, &more[i]))
			bail_out("settled by the owner: acquire");
	is_int(bad_releases(p), 1, "settled by the owner: its drain refused the old copy, counted");
	asyncpool_release_bulk(more, 20);
	asyncpool_lease_release(&again);
	l.release.fn = NULL;
	whole(p, "settled by the owner");
	is_int(asyncpool_destroy(p), 0, "settled by the owner: destroy");
}

/* ---- a stale copy is refused at once ---- */

static void *stale_release(void *arg)
{
	lr.rc = asyncpool_release_token(lr.pool, (uint64_t)(uintptr_t)arg);
	return NULL;
}

static void stale_at_once(void)
{
	struct asyncpool *p = make_pool(proactor, 64, CAP, CACHE);
	struct asyncpool_lease l;
	uint64_t tok;
	pthread_t t;

	lr.pool = p;
	asyncpool_acquire(p, &l);
	tok = asyncpool_lease_token(&l);
	asyncpool_lease_release(&l);
	is_int(asyncpool_release_token(p, tok), -ESTALE, "stale: the owner's thread: ESTALE");
	pthread_create(&t, NULL, stale_release, (void *)(uintptr_t)tok);
	pthread_join(t, NULL);
	is_int(lr.rc, -ESTALE, "stale: another thread: ESTALE at once, not sent");
	is_int(bad_releases(p), 2, "stale: both counted");
	whole(p, "stale");
	is_int(asyncpool_destroy(p), 0, "stale: destroy");
}

/* ---- in transit ---- */

static struct {
	struct asyncpool *pool;
	uint64_t tok[CAP];
	unsigned n;
	_Atomic int phase;
} tr;

/* Releases tr.n tokens and keeps its thread alive (its outbox with them) until phase 2. */
static void *transit_releaser(void *arg)
{
	(void)arg;
	for (unsigned i = 0; i < tr.n; i++)
		if (asyncpool_release_token(tr.pool, tr.tok[i]))
			return (void *)1;
	atomic_store(&tr.phase, 1);
	while (atomic_load(&tr.phase) != 2)
		sched_yield();
	return NULL;
}

static void in_transit(void)
{
	struct asyncpool *p = make_pool(proactor, 64, CAP, CACHE);
	struct asyncpool_lease l[4];
	pthread_t t;
	void *res;

	tr.pool = p;
	tr.n = 4;
	atomic_store(&tr.phase, 0);
	is_int(asyncpool_acquire_bulk(p, l, 4), 0, "transit: the owner acquires 4");
	for (unsigned i = 0; i < 4; i++)
		tr.tok[i] = asyncpool_lease_token(&l[i]);
	pthread_create(&t, NULL, transit_releaser, NULL);
	while (atomic_load(&tr.phase) != 1)
		sched_yield();
	/* 4 releases wait in the releaser's outbox (a batch is 32). */
	is_int(asyncpool_available(p), CAP, "transit: available counts releases on their way");
	is_int(asyncpool_release_index(p, l[0].buffer_index), -EALREADY,
	       "transit: a release by index of one released already: EALREADY");
	is_int(bad_releases(p), 1, "transit: counted");
	is_int(asyncpool_check(p), 0, "transit: the audit is clean");
	atomic_store(&tr.phase, 2);
	pthread_join(t, &res);
	is_int((intptr_t)res, 0, "transit: the releases were taken");
	whole(p, "transit");
	for (unsigned i = 0; i < 4; i++)
		l[i].release.fn = NULL;         /* released by token above */
	is_int(asyncpool_destroy(p), 0, "transit: destroy");
}

/* ---- the owner exits ---- */

/* Lends tr.n buffers from its own cache, then waits for phase 2 (or exits at once). */
static void *lender(void *arg)
{
	for (unsigned i = 0; i < tr.n; i++) {
		struct asyncpool_lease l;

		if (asyncpool_acquire(tr.pool, &l))
			return (void *)1;
		tr.tok[i] = asyncpool_lease_token(&l);
	}
	atomic_store(&tr.phase, 1);
	while (arg && atomic_load(&tr.phase) != 2)
		sched_yield();
	return NULL;
}

/* Start a thread whose cache lends n buffers of p (tokens in tr.tok), and wait for it. */
static pthread_t lender_start(struct asyncpool *p, unsigned n)
{
	pthread_t o;

	tr.pool = p;
	tr.n = n;
	atomic_store(&tr.phase, 0);
	pthread_create(&o, NULL, lender, (void *)1);
	while (atomic_load(&tr.phase) != 1)
		sched_yield();
	return o;
}

/* Let the lender exit; it must have lent them all. */
static void lender_stop(pthread_t o, const char *what)
{
	void *res;

	atomic_store(&tr.phase, 2);
	pthread_join(o, &res);
	is_int((intptr_t)res, 0, "%s: the owner lent them", what);
}

/* Releases tokens [from, from + 8): they wait in its outbox; flushes at phase 3. */
static _Atomic int gathered;

static void *gather_then_flush(void *arg)
{
	unsigned from = (unsigned)(uintptr_t)arg;

	for (unsigned i = from; i < from + 8; i++)
		if (asyncpool_release_token(tr.pool, tr.tok[i]))
			return (void *)1;
	atomic_store(&gathered, 1);
	while (atomic_load(&tr.phase) != 3)
		sched_yield();
	/* Its batch goes to an owner that has exited (orphan). */
	asyncpool_cache_flush(tr.pool);
	return NULL;
}

/* Releases tokens [from, from + 8) and exits: its exit sends them. */
static void *gather_then_exit(void *arg)
{
	unsigned from = (unsigned)(uintptr_t)arg;

	for (unsigned i = from; i < from + 8; i++)
		if (asyncpool_release_token(tr.pool, tr.tok[i]))
			return (void *)1;
	return NULL;
}

static void owner_exits(void)
{
	struct asyncpool *p = make_pool(proactor, 64, CAP, CACHE);
	struct asyncpool_lease all[CAP];
	pthread_t o, g, x;
	void *res, *gres, *xres;

	tr.pool = p;
	tr.n = 40;
	atomic_store(&tr.phase, 0);
	atomic_store(&gathered, 0);
	pthread_create(&o, NULL, lender, (void *)1);
	while (atomic_load(&tr.phase) != 1)
		sched_yield();
	/* 8 releases for the owner wait in g's outbox while it lives... */
	pthread_create(&g, NULL, gather_then_flush, (void *)0);
	while (!atomic_load(&gathered))
		sched_yield();
	/* ...8 more are sent by x's exit, to the live owner's inbox... */
	pthread_create(&x, NULL, gather_then_exit, (void *)8);
	pthread_join(x, &xres);
	is_int((intptr_t)xres, 0, "owner exits: 8 released on a thread that exited");
	/* ...then the owner exits, with 24 still lent, 8 in its inbox, 8 for it in g's outbox. */
	atomic_store(&tr.phase, 2);
	pthread_join(o, &res);
	is_int((intptr_t)res, 0, "owner exits: it lent 40");
	{
		/* What x sent to its inbox the exiting owner decided itself,
		 * after it set orphan (ap_owner_leave_thread): before any
		 * flush, those 8 are free.  tests/mutants/owner-leave-no-drain */
		unsigned nfree = 0;

		for (unsigned i = 8; i < 16; i++)
			nfree += AP_W_KIND(ap_state_load(&p->fl.state[AP_TOKEN_INDEX(tr.tok[i])])) ==
				 AP_K_FREE;
		is_int(nfree, 8, "owner exits: what its inbox held is decided by its exit");
	}
	atomic_store(&tr.phase, 3);
	pthread_join(g, &gres);
	is_int((intptr_t)gres, 0, "owner exits: 8 gathered before it exited, sent after");
	/* The 24 still lent, released here after the owner is gone. */
	for (unsigned i = 16; i < 40; i++)
		if (asyncpool_release_token(p, tr.tok[i]))
			ok(0, "owner exits: release %u after the owner exited", i);
	is_int(bad_releases(p), 0, "owner exits: nothing refused");
	/* Nothing left anywhere but the freelist and this thread's cache. */
	is_int(asyncpool_acquire_bulk(p, all, CAP), 0,
	       "owner exits: a bulk acquire of the whole pool, no ENOBUFS");
	asyncpool_release_bulk(all, CAP);
	whole(p, "owner exits");
	is_int(asyncpool_destroy(p), 0, "owner exits: destroy");
}

/* ---- batches grow with the pool ---- */

#define BIG 4096u
#define BIG_LENT 255u

static struct {
	struct asyncpool *pool;
	uint64_t tok[BIG_LENT];
	_Atomic int phase;
} bg;

/* Lends BIG_LENT buffers from its own cache, then waits for phase 9. */
static void *big_lender(void *arg)
{
	(void)arg;
	for (unsigned i = 0; i < BIG_LENT; i++)
		if (asyncpool_acquire_tokens(bg.pool, &bg.tok[i], 1))
			return (void *)1;
	atomic_store(&bg.phase, 1);
	while (atomic_load(&bg.phase) != 9)
		sched_yield();
	return NULL;
}

/* Releases tokens [from, to), sets phase done, then waits for phase go_on (0: returns). */
static int big_release(unsigned from, unsigned to, int done, int go_on)
{
	for (unsigned i = from; i < to; i++)
		if (asyncpool_release_token(bg.pool, bg.tok[i]))
			return 1;
	atomic_store(&bg.phase, done);
	while (go_on && atomic_load(&bg.phase) != go_on)
		sched_yield();
	return 0;
}

/* 127 releases, then at phase 3 the 128th, then at phase 5 it exits. */
static void *big_gatherer(void *arg)
{
	(void)arg;
	if (big_release(0, 127, 2, 3) || big_release(127, 128, 4, 5))
		return (void *)1;
	return NULL;
}

/* The remaining 127, then it exits at once. */
static void *big_exiter(void *arg)
{
	(void)arg;
	return (void *)(intptr_t)big_release(128, BIG_LENT, 6, 0);
}

static uint32_t big_inbox(struct asyncpool *p, uint32_t o)
{
	return ap_inbox_count(p->boxes[o]);
}

/*
 * A batch to an owner is 32 tokens in a pool of up to 2,047 buffers,
 * 64 up to 4,095, 128 from 4,096: one send, its CAS and its fence, per
 * 128 releases in a large pool's hand-off.  127 releases wait in the
 * releaser's outbox and count as free; the 128th sends them all; an
 * outbox of 127 is sent whole by its thread's exit, and a stale copy is
 * refused at once whatever the batch.
 * tests/mutants/outbox-exit-sends-32, outbox-batch-over-max
 */
static void big_batches(void)
{
	struct asyncpool *small = make_pool(proactor, 64, CAP, CACHE);
	struct asyncpool *mid = make_pool(proactor, 64, 2048, CACHE);
	struct asyncpool *huge = make_pool(proactor, 64, 65536, CACHE);
	struct asyncpool *p = make_pool(proactor, 64, BIG, CACHE);
	pthread_t o, g, x;
	void *res, *gres, *xres;
	uint32_t id;

	is_int(small->outbox_batch, 32, "batches: 32 in a pool of 64");
	is_int(mid->outbox_batch, 64, "batches: 64 in a pool of 2,048");
	is_int(p->outbox_batch, 128, "batches: 128 in a pool of 4,096");
	is_int(huge->outbox_batch, 128, "batches: 128 in a pool of 65,536: no more than an outbox holds");
	is_int(asyncpool_destroy(huge), 0, "batches: destroy the pool of 65,536");
	is_int(asyncpool_destroy(small), 0, "batches: destroy the pool of 64");
	is_int(asyncpool_destroy(mid), 0, "batches: destroy the pool of 2,048");
	bg.pool = p;
	atomic_store(&bg.phase, 0);
	pthread_create(&o, NULL, big_lender, NULL);
	while (atomic_load(&bg.phase) != 1)
		sched_yield();
	id = atomic_load_explicit(&p->owner_of[AP_TOKEN_INDEX(bg.tok[0])], memory_order_relaxed);
	ok(id != 0, "batches: the lender owns what it lent");
	/* 127 releases on g: all in its outbox, none sent. */
	pthread_create(&g, NULL, big_gatherer, NULL);
	while (atomic_load(&bg.phase) != 2)
		sched_yield();
	is_int(big_inbox(p, id), 0, "batches: 127 releases wait in the releaser's outbox");
	is_int(asyncpool_available(p), BIG - BIG_LENT + 127,
	       "batches: available counts the 127 on their way");
	is_int(asyncpool_release_token(p, bg.tok[5]), -ESTALE,
	       "batches: a copy of one of them is refused at once");
	is_int(bad_releases(p), 1, "batches: and counted");
	/* The 128th on the same thread sends the batch of 128. */
	atomic_store(&bg.phase, 3);
	while (atomic_load(&bg.phase) != 4)
		sched_yield();
	is_int(big_inbox(p, id), 128, "batches: the 128th release sent all 128 in one batch");
	atomic_store(&bg.phase, 5);
	pthread_join(g, &gres);
	is_int((intptr_t)gres, 0, "batches: 128 released on one thread");
	is_int(big_inbox(p, id), 128, "batches: its exit had nothing more to send");
	/* 127 on x, which exits at once: its exit sends them whole. */
	pthread_create(&x, NULL, big_exiter, NULL);
	pthread_join(x, &xres);
	is_int((intptr_t)xres, 0, "batches: 127 more released on a thread that exited");
	is_int(big_inbox(p, id), 128 + 127, "batches: its exit sent all 127 to the owner's inbox");
	is_int(asyncpool_available(p), BIG, "batches: every release counts as free");
	atomic_store(&bg.phase, 9);
	pthread_join(o, &res);
	is_int((intptr_t)res, 0, "batches: the lender lent 255");
	is_int(bad_releases(p), 1, "batches: nothing else refused");
	is_int(asyncpool_cache_flush_all(p), 0, "batches: flush_all");
	is_int(asyncpool_check(p), 0, "batches: the audit is clean");
	is_int(asyncpool_available(p), BIG, "batches: every buffer free once");
	is_int(asyncpool_destroy(p), 0, "batches: destroy");
}

/* ---- the audit ---- */

/*
 * asyncpool_check() of a local pool with caches: cache entries + lent ==
 * CACHED words, exactly, in both directions.  A lent count one short
 * (a CACHED word that no cache holds or lent: a lost buffer) and one
 * over (more entries than words: a buffer in two places) are both
 * -EUCLEAN.  tests/mutants/audit-local-too-few, audit-local-too-many
 */
static void audit_both_ways(void)
{
	struct asyncpool *p = make_pool(proactor, 64, CAP, CACHE);
	struct asyncpool_lease l[4];
	struct ap_cache *c;

	for (int i = 0; i < 4; i++)
		if (asyncpool_acquire(p, &l[i]))
			bail_out("audit: acquire");
	asyncpool_lease_release(&l[3]);
	is_int(asyncpool_check(p), 0, "audit: 3 lent, the rest cached or free: clean");
	c = ap_cache_of(p);
	if (!c)
		bail_out("audit: no cache");
	ap_cache_add_lent(c, -1);
	is_int(asyncpool_check(p), -EUCLEAN, "audit: one lent buffer unaccounted for: EUCLEAN");
	ap_cache_add_lent(c, 2);
	is_int(asyncpool_check(p), -EUCLEAN, "audit: one lent buffer too many: EUCLEAN");
	ap_cache_add_lent(c, -1);
	is_int(asyncpool_check(p), 0, "audit: as it was: clean");
	for (int i = 0; i < 3; i++)
		asyncpool_lease_release(&l[i]);
	whole(p, "audit");
	is_int(asyncpool_destroy(p), 0, "audit: destroy");
}

/* ---- the wait fd ---- */

/*
 * Every buffer is lent by this thread's cache when the wait fd is made;
 * while it exists every cache is bypassed, so the release of a lent one
 * goes to its owner's inbox, not to the freelist.  The fd must still
 * become readable (asyncpool_wait_fd(3): "when a release ... may have
 * made a buffer available"), and the acquire it prompts gets the buffer.
 */
static void wait_fd_inbox(void)
{
	struct asyncpool *p = make_pool(proactor, 64, CAP, CACHE);
	struct asyncpool_lease l;
	struct pollfd pfd;
	uint64_t tok[CAP], v;
	int fd;

	for (unsigned i = 0; i < CAP; i++) {
		if (asyncpool_acquire(p, &l))
			ok(0, "wait fd: acquire %u", i);
		tok[i] = asyncpool_lease_token(&l);
	}
	fd = asyncpool_wait_fd(p);
	ok(fd >= 0, "wait fd: made while all %d are lent", CAP);
	(void)eventfd_read(fd, &v);     /* nothing free: normally not readable */
	is_int(asyncpool_release_token(p, tok[0]), 0, "wait fd: a lent buffer released");
	pfd.fd = fd;
	pfd.events = POLLIN;
	/* Generous: readable at once when right; a bound, not a timing. */
	is_int(poll(&pfd, 1, (int)tap_watchdog_bound(10) * 1000 / 3), 1,
	       "wait fd: readable for a release that went to an inbox");
	is_int(asyncpool_acquire(p, &l), 0, "wait fd: the acquire it prompts gets the buffer");
	is_int(l.buffer_index, (uint32_t)tok[0], "wait fd: the buffer released");
	asyncpool_lease_release(&l);
	for (unsigned i = 1; i < CAP; i++)
		if (asyncpool_release_token(p, tok[i]))
			ok(0, "wait fd: release %u", i);
	whole(p, "wait fd");
	is_int(bad_releases(p), 0, "wait fd: nothing refused");
	is_int(asyncpool_destroy(p), 0, "wait fd: destroy");
}

/* ---- fork while a release is half sent ---- */

static struct {
	struct asyncpool *pool;
	uint64_t x, y;
	_Atomic int stalled, go, phase;
} fk;

static void fork_stall(enum ap_test_stall p)
{
	if (p != AP_TS_INBOX_SEND || !stall_me)
		return;
	stall_me = false;
	atomic_store(&fk.stalled, 1);
	while (!atomic_load(&fk.go))
		sched_yield();
}

/* Lends x and y, then stays until phase 2. */
static void *lend_x_y(void *arg)
{
	struct asyncpool_lease l;

	(void)arg;
	if (asyncpool_acquire(fk.pool, &l))
		return (void *)1;
	fk.x = asyncpool_lease_token(&l);
	if (asyncpool_acquire(fk.pool, &l))
		return (void *)1;
	fk.y = asyncpool_lease_token(&l);
	atomic_store(&fk.phase, 1);
	while (atomic_load(&fk.phase) != 2)
		sched_yield();
	return NULL;
}

/* Releases x (another owner's) and sends it: held after it reserved the slot. */
static void *half_send(void *arg)
{
	(void)arg;
	stall_me = true;
	if (asyncpool_release_token(fk.pool, fk.x))
		return (void *)1;
	asyncpool_cache_flush(fk.pool);
	return NULL;
}

/*
 * The child of a fork has a copy of an inbox in which a slot was
 * reserved by a thread that did not come along: it is never written.
 * Releases sent to that owner in the child must still come back (x,
 * whose release was in flight in the parent, stays lent in the child).
 * No thread is started in the child (TSan does not allow it).
 */
static void fork_half_sent(void)
{
	struct asyncpool *p = make_pool(proactor, 64, CAP, CACHE);
	struct asyncpool_lease all[CAP];
	pthread_t t, o;
	int status;
	void *res;
	pid_t pid;

	fk.pool = p;
	atomic_store(&fk.stalled, 0);
	atomic_store(&fk.go, 0);
	atomic_store(&fk.phase, 0);
	pthread_create(&o, NULL, lend_x_y, NULL);
	while (atomic_load(&fk.phase) != 1)
		sched_yield();
	ap_test_hook_stall = fork_stall;
	pthread_create(&t, NULL, half_send, NULL);
	while (!atomic_load(&fk.stalled))
		sched_yield();
	pid = fork_or_bail();
	if (pid == 0) {
		int bad = 0;

		/* y goes to the same owner's inbox, behind the unwritten slot. */
		bad |= asyncpool_release_token(p, fk.y) != 0;
		bad |= (asyncpool_cache_flush(p) != 0) << 1;
		bad |= (asyncpool_cache_flush_all(p) != 0) << 2;
		/* Every buffer but x: y came back through the inbox. */
		bad |= (asyncpool_available(p) != CAP - 1) << 3;
		bad |= (asyncpool_check(p) != 0) << 4;
		bad |= (asyncpool_acquire_bulk(p, all, CAP - 1) != 0) << 5;
		_exit(bad);
	}
	is_int(waitpid(pid, &status, 0), pid, "fork: child reaped");
	ok(WIFEXITED(status), "fork: the child exited");
	is_int(WEXITSTATUS(status), 0,
	       "fork: in the child, a release sent behind a slot never written comes back");
	atomic_store(&fk.go, 1);
	pthread_join(t, &res);
	ap_test_hook_stall = NULL;
	is_int((intptr_t)res, 0, "fork: the parent's half-sent release completes");
	is_int(asyncpool_release_token(p, fk.y), 0, "fork: y released in the parent");
	atomic_store(&fk.phase, 2);
	pthread_join(o, &res);
	is_int((intptr_t)res, 0, "fork: the owner lent x and y");
	whole(p, "fork");
	is_int(bad_releases(p), 0, "fork: nothing refused");
	is_int(asyncpool_destroy(p), 0, "fork: destroy");
}

/* ---- an orphan's id used again while a sender is about to drain it ---- */

static struct {
	struct asyncpool *pool;
	uint64_t x, z;
	_Atomic int phase;              /* the main thread's orders to e_thread */
	_Atomic int c_stalled, c_go, e_stalled, e_go;
} ru;

static __thread int stall_at = -1;     /* the one stall point this thread stops at */

static void reuse_stall(enum ap_test_stall p)
{
	if ((int)p != stall_at)
		return;
	stall_at = -1;
	if (p == AP_TS_ORPHAN_SEEN) {
		atomic_store(&ru.c_stalled, 1);
		while (!atomic_load(&ru.c_go))
			sched_yield();
	} else {
		atomic_store(&ru.e_stalled, 1);
		while (!atomic_load(&ru.e_go))
			sched_yield();
	}
}

/* Lends x and exits: its id is an orphan with x out. */
static void *lend_x_and_exit(void *arg)
{
	struct asyncpool_lease l;

	(void)arg;
	if (asyncpool_acquire(ru.pool, &l))
		return (void *)1;
	ru.x = asyncpool_lease_token(&l);
	return NULL;
}

/* Releases x and sends it to the orphan: held once it saw the orphan. */
static void *send_to_orphan(void *arg)
{
	(void)arg;
	if (asyncpool_release_token(ru.pool, ru.x))
		return (void *)1;
	stall_at = AP_TS_ORPHAN_SEEN;
	asyncpool_cache_flush(ru.pool);
	return NULL;
}

/*
 * The exported asyncpool_release_token(), not the header's inline path
 * (<asyncpool/inline.h>), which has no stall point: the owner's release
 * below must stop inside the library's window.  The address of a GNU
 * inline function is the exported one; volatile, so that the compiler
 * does not turn the call back into the inline path.
 */
static int (*volatile exported_release_token)(struct asyncpool *, uint64_t) =
	asyncpool_release_token;

/* The new owner: lends z (phase 1), releases its own copy of z (phase 2), flushes (phase 3). */
static void *e_thread(void *arg)
{
	struct asyncpool_lease l;
	intptr_t bad = 0;

	(void)arg;
	if (asyncpool_acquire(ru.pool, &l))
		return (void *)1;
	ru.z = asyncpool_lease_token(&l);
	atomic_store(&ru.phase, 1);
	while (atomic_load(&ru.phase) != 2)
		sched_yield();
	stall_at = AP_TS_CACHE_CLAIM;   /* inside its window, in the word's load-compare-store */
	bad |= exported_release_token(ru.pool, ru.z) != 0;
	atomic_store(&ru.phase, 3);
	while (atomic_load(&ru.phase) != 4)
		sched_yield();
	bad |= asyncpool_cache_flush(ru.pool) != 0;     /* it looks at its inbox */
	return (void *)bad;
}

static void id_reused(void)
{
	struct asyncpool *p = make_pool(proactor, 64, CAP, CACHE);
	pthread_t a, c, e;
	uint32_t ids;
	void *res;

	ru.pool = p;
	atomic_store(&ru.phase, 0);
	atomic_store(&ru.c_stalled, 0);
	atomic_store(&ru.c_go, 0);
	atomic_store(&ru.e_stalled, 0);
	atomic_store(&ru.e_go, 0);
	ap_test_hook_stall = reuse_stall;
	pthread_create(&a, NULL, lend_x_and_exit, NULL);
	pthread_join(a, &res);
	is_int((intptr_t)res, 0, "id reused: x lent by a thread that exited");
	pthread_create(&c, NULL, send_to_orphan, NULL);
	while (!atomic_load(&ru.c_stalled))
		sched_yield();
	/* x came back: the orphan's id has nothing out, and is used again. */
	is_int(asyncpool_cache_flush_all(p), 0, "id reused: flush_all settles x");
	ids = atomic_load(&p->box_count);
	pthread_create(&e, NULL, e_thread, NULL);
	while (atomic_load(&ru.phase) != 1)
		sched_yield();
	is_int(atomic_load(&p->box_count), ids, "id reused: the new thread took the orphan's id");
	/* A copy of z, sent from here, waits in the new owner's inbox. */
	is_int(asyncpool_release_token(p, ru.z), 0, "id reused: a copy of z sent to its owner");
	is_int(asyncpool_cache_flush(p), 0, "id reused: sent");
	/* The owner releases its own copy, held inside its window... */
	atomic_store(&ru.phase, 2);
	while (!atomic_load(&ru.e_stalled))
		sched_yield();
	/* ...while the old sender goes on: the box is no orphan's any more. */
	atomic_store(&ru.c_go, 1);
	pthread_join(c, &res);
	is_int((intptr_t)res, 0, "id reused: the old sender finished");
	atomic_store(&ru.e_go, 1);
	while (atomic_load(&ru.phase) != 3)
		sched_yield();
	ap_test_hook_stall = NULL;
	atomic_store(&ru.phase, 4);
	pthread_join(e, &res);
	is_int((intptr_t)res, 0, "id reused: the owner's copy taken, its inbox looked at");
	is_int(bad_releases(p), 1, "id reused: the other copy of z refused by its owner, once");
	is_int(asyncpool_check(p), 0, "id reused: the audit is clean (z in one place)");
	whole(p, "id reused");
	is_int(asyncpool_destroy(p), 0, "id reused: destroy");
}

/* ---- a bad token does not turn the holder's release away ---- */

/*
 * A token that names a lent buffer with a generation it never had (one
 * of another pool, say) is sent to the owner, which refuses it.  The
 * holder's own release of the buffer, on another thread than the
 * owner's, must still be taken, not refused at once as stale.
 */
static void bad_token_then_holder(void)
{
	struct asyncpool *p = make_pool(proactor, 64, CAP, CACHE);
	uint64_t bad;
	pthread_t o;

	o = lender_start(p, 1);
	/* The same index, a generation ahead of the lease's. */
	bad = tr.tok[0] + ((uint64_t)5 << 32);
	(void)asyncpool_release_token(p, bad);
	is_int(asyncpool_release_token(p, tr.tok[0]), 0,
	       "bad token: the holder's release after it is taken");
	lender_stop(o, "bad token");
	is_int(asyncpool_cache_flush_all(p), 0, "bad token: flush_all");
	is_int(bad_releases(p), 1, "bad token: the bad one refused, once");
	whole(p, "bad token");
	is_int(asyncpool_destroy(p), 0, "bad token: destroy");
}

/*
 * The same two refusals where the releasing thread's outbox already
 * gathers for that owner (the inline path, ap_outbox_gather): a second
 * copy of a lease it released is refused at once, and a token of a
 * generation the buffer never had goes to the owner without writing
 * the hint, so that the holder's own release is still taken.
 */
static void gathered_then_bad(void)
{
	struct asyncpool *p = make_pool(proactor, 64, CAP, CACHE);
	uint64_t bad;
	pthread_t o;

	o = lender_start(p, 3);
	is_int(asyncpool_release_token(p, tr.tok[0]), 0, "gathering: a lent buffer released");
	is_int(asyncpool_release_token(p, tr.tok[0]), -ESTALE,
	       "gathering: its second copy refused at once");
	is_int(bad_releases(p), 1, "gathering: counted at once");
	bad = tr.tok[1] + ((uint64_t)5 << 32);
	is_int(asyncpool_release_token(p, bad), 0, "gathering: a token 5 generations ahead is sent");
	is_int(asyncpool_release_token(p, tr.tok[1]), 0,
	       "gathering: the holder's release after it is taken");
	is_int(asyncpool_release_token(p, tr.tok[2]), 0, "gathering: the third taken");
	lender_stop(o, "gathering");
	is_int(asyncpool_cache_flush_all(p), 0, "gathering: flush_all");
	is_int(bad_releases(p), 2, "gathering: the bad token refused by the owner, once");
	whole(p, "gathering");
	is_int(asyncpool_destroy(p), 0, "gathering: destroy");
}

/* ---- generations past 2^31 ---- */

/*
 * The released[] hint is compared with a lease's generation in 32-bit
 * serial arithmetic.  A buffer that reached generation 2^31 + k before
 * it was ever lent from a cache (leases popped straight from the
 * freelist while caches were bypassed, say) must still have a release
 * on another thread taken.  The generations are set through the test
 * hooks: 2^31 real leases would take too long.
 */
static void high_generation(void)
{
	struct asyncpool *p = make_pool(proactor, 64, CAP, CACHE);
	pthread_t o;

	for (uint32_t i = 0; i < CAP; i++)
		atomic_store(&p->fl.state[i], AP_W_MAKE(AP_K_FREE, 0, 0x80000010u));
	o = lender_start(p, 1);
	is_int((uint32_t)(tr.tok[0] >> 32) == 0x80000011u, 1, "high generation: lent at 2^31 + 17");
	is_int(asyncpool_release_token(p, tr.tok[0]), 0,
	       "high generation: released on another thread, taken");
	lender_stop(o, "high generation");
	is_int(bad_releases(p), 0, "high generation: nothing refused");
	whole(p, "high generation");
	is_int(asyncpool_destroy(p), 0, "high generation: destroy");
}

/*
 * What the owner's drain decides besides the common token (its loop
 * leaves the rest to drain_rest()): a token its sender did not mark
 * (the released[] hint was behind: a generation farther than the next
 * one goes to the owner unmarked), taken, and then the owner writes the
 * hint; and a token whose index is far out of range, which nothing but
 * corruption puts in an inbox, refused and counted without a read of
 * its word.  Caches with entries only (a cache of none drains into the
 * freelist).
 */
static uint64_t remote_tok;
static int remote_rc;

static void *release_remote(void *arg)
{
	remote_rc = asyncpool_release_token(arg, remote_tok);
	return NULL;    /* its exit sends what it gathered */
}

static void drain_unmarked_and_forged(void)
{
	struct asyncpool *p;
	struct ap_cache *c;
	uint64_t t, forged = (uint64_t)5 << 32 | 0x7fffffffu, bad;
	uint32_t i, g;
	pthread_t th;

	if (!cache_size)
		return;
	p = make_pool(proactor, 64, CAP, CACHE);
	if (asyncpool_acquire_tokens(p, &t, 1))
		bail_out("drain: acquire");
	i = (uint32_t)t;
	g = (uint32_t)(t >> 32);
	c = (struct ap_cache *)asyncpool_inline_cache();
	bad = bad_releases(p);
	/* The hint three generations behind: the release goes unmarked. */
	atomic_store(&p->released[i], g - 3);
	remote_tok = t;
	if (pthread_create(&th, NULL, release_remote, p) || pthread_join(th, NULL))
		bail_out("drain: thread");
	is_int(remote_rc, 0, "drain: an unmarked release on another thread is sent");
	is_int(atomic_load(&p->released[i]), g - 3, "drain: its sender left the hint");
	is_int(ap_inbox_send(c->box, &forged, 1), 1, "drain: a token of index 2^31 - 1 in the inbox");
	is_int(asyncpool_cache_flush(p), 0, "drain: the owner drains and flushes");
	is_int(atomic_load(&p->released[i]), g, "drain: the owner took the unmarked one and wrote the hint");
	is_int(bad_releases(p) - bad, 1, "drain: the forged one refused and counted");
	remote_tok = t;
	if (pthread_create(&th, NULL, release_remote, p) || pthread_join(th, NULL))
		bail_out("drain: thread");
	is_int(remote_rc, -ESTALE, "drain: a copy of the unmarked one refused at once");
	whole(p, "drain");
	is_int(asyncpool_destroy(p), 0, "drain: destroy");
}

/* ---- waiter ---- */

static struct {
	struct asyncpool *pool;
	_Atomic pid_t tid;
	int rc;
	uint64_t tok[CAP];
} wt;

static void *waiter(void *arg)
{
	struct asyncpool_lease l;

	(void)arg;
	atomic_store(&wt.tid, (pid_t)syscall(SYS_gettid));
	wt.rc = asyncpool_acquire_wait(wt.pool, &l, tap_watchdog_bound(30) * 1000000000ll);
	if (!wt.rc)
		asyncpool_lease_release(&l);
	return NULL;
}

static void *lend_all(void *arg)
{
	(void)arg;
	for (unsigned i = 0; i < CAP; i++) {
		struct asyncpool_lease l;

		if (asyncpool_acquire(wt.pool, &l))
			return (void *)1;
		wt.tok[i] = asyncpool_lease_token(&l);
	}
	atomic_store(&tr.phase, 1);
	while (atomic_load(&tr.phase) != 2)
		sched_yield();
	return NULL;
}

/* The thread is asleep in the kernel (state S): the waiter is in futex_wait. */
static bool asleep(pid_t tid)
{
	char path[64], buf[256], *p;
	FILE *f;
	bool s = false;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	f = fopen(path, "r");
	if (!f)
		return false;
	if (fgets(buf, sizeof(buf), f) && (p = strrchr(buf, ')')) && p[1] == ' ')
		s = p[2] == 'S';
	fclose(f);
	return s;
}

static void waiter_wakes(void)
{
	struct asyncpool *p = make_pool(proactor, 64, CAP, CACHE);
	pthread_t o, w;
	uint64_t e;
	uint32_t slept;
	void *res;

	wt.pool = p;
	atomic_store(&tr.phase, 0);
	atomic_store(&wt.tid, 0);
	/* Another thread's cache lends all 64, and that thread stays. */
	pthread_create(&o, NULL, lend_all, NULL);
	while (atomic_load(&tr.phase) != 1)
		sched_yield();
	e = empties(p);
	pthread_create(&w, NULL, waiter, NULL);
	while (!atomic_load(&wt.tid) || empties(p) == e || !asleep(atomic_load(&wt.tid)))
		usleep(1000);
	slept = atomic_load(&p->fl.line->wait);
	/* This thread releases one: it goes to the owner's inbox. */
	is_int(asyncpool_release_token(p, wt.tok[0]), 0, "waiter: a release sent to the owner");
	ok(woke_waiters(p, slept), "waiter: the send woke the waiter (the wait word moved)");
	pthread_join(w, NULL);
	is_int(wt.rc, 0, "waiter: woken, it got the buffer that came back through the inbox");
	atomic_store(&tr.phase, 2);
	pthread_join(o, &res);
	is_int((intptr_t)res, 0, "waiter: the owner lent all");
	for (unsigned i = 1; i < CAP; i++)
		if (asyncpool_release_token(p, wt.tok[i]))
			ok(0, "waiter: release %u", i);
	whole(p, "waiter");
	is_int(bad_releases(p), 0, "waiter: nothing refused");
	is_int(asyncpool_destroy(p), 0, "waiter: destroy");
}

/* ---- the caches asyncpool_create() gives ---- */

static void *use_pool(void *arg)
{
	struct asyncpool_lease l;

	if (asyncpool_acquire(arg, &l))
		return (void *)1;
	asyncpool_lease_release(&l);
	return NULL;
}

static void default_caches(void)
{
	struct asyncpool_region *r = make_region(proactor, 64, 1024, ASYNCPOOL_ACCESS_READ);
	struct asyncpool_region *small = make_region(proactor, 64, 63, ASYNCPOOL_ACCESS_READ);
	struct asyncpool *p;
	struct asyncpool_lease l;
	pthread_t t;
	void *res;

	is_int(asyncpool_create(r, &p), 0, "default: create, 1024 buffers");
	/* A release into the calling thread's cache: refused at once if stale. */
	asyncpool_acquire(p, &l);
	asyncpool_lease_release(&l);
	pthread_create(&t, NULL, use_pool, p);
	pthread_join(t, &res);
	is_int((intptr_t)res, 0, "default: another thread acquires and releases");
	is_int(asyncpool_set_cache(p, 16), -EEXIST,
	       "default: set_cache once threads used the caches: EEXIST");
	is_int(asyncpool_available(p), 1024, "default: all back");
	is_int(asyncpool_destroy(p), 0, "default: destroy with buffers in two caches");
	is_int(asyncpool_create(r, &p), 0, "default: create again");
	is_int(asyncpool_set_cache(p, 16), 0, "default: set_cache before any use replaces the default");
	is_int(asyncpool_set_cache(p, 32), -EEXIST, "default: a second set_cache: EEXIST");
	is_int(asyncpool_destroy(p), 0, "default: destroy");
	is_int(asyncpool_create(r, &p), 0, "default: create a third time");
	is_int(asyncpool_set_cache(p, 0), 0, "default: set_cache 0 before any use: no caches");
	is_int(asyncpool_set_cache(p, 8), 0, "default: then caches can be set");
	is_int(asyncpool_destroy(p), 0, "default: destroy");
	is_int(asyncpool_create(small, &p), 0, "default: create, 63 buffers");
	pthread_create(&t, NULL, use_pool, p);
	pthread_join(t, &res);
	is_int(asyncpool_set_cache(p, 8), 0, "default: under 64 buffers no caches, set_cache after use works");
	is_int(asyncpool_destroy(p), 0, "default: destroy the small one");
	/* A small pool lends without caches (pool_lend.c): the thread that
	 * used it keeps its cache of no entries, which grows. */
	is_int(asyncpool_create(small, &p), 0, "default: create, 63 buffers, again");
	is_int(asyncpool_acquire(p, &l), 0, "default: this thread acquires from the small one");
	is_int(asyncpool_set_cache(p, 8), 0,
	       "default: under 64 buffers, set_cache while this thread holds a lease works");
	asyncpool_lease_release(&l);
	is_int(asyncpool_check(p), 0, "default: the audit is exact after the cache grew");
	is_int(asyncpool_available(p), 63, "default: all 63 back");
	is_int(asyncpool_destroy(p), 0, "default: destroy the small one again");
	asyncpool_region_unref(r);
	asyncpool_region_unref(small);
}

int main(void)
{
	if (asyncpool_proactor_create_memory(&proactor))
		bail_out("proactor");
	for (int pass = 0; pass < 2; pass++) {
		cache_size = pass ? 0 : 16;
		diag("pools with cache_size %u", cache_size);
		local_against_remote(false);
		local_against_remote(true);
		stale_at_once();
		settled_late();
		settled_by_owner();
		in_transit();
		owner_exits();
		audit_both_ways();
		wait_fd_inbox();
		fork_half_sent();
		id_reused();
		bad_token_then_holder();
		gathered_then_bad();
		high_generation();
		drain_unmarked_and_forged();
		waiter_wakes();
		big_batches();
	}
	default_caches();
	asyncpool_proactor_destroy(proactor);
	return done_testing();
}
