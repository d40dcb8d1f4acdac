/* SPDX-License-Identifier: MIT */
/*
 * The fenced-versus-bad split of a release made by another thread than
 * the one whose cache lent the buffer (issue 54, kind 6): a copy of a
 * lease that an adoption fenced is counted in fenced_releases, not in
 * bad_releases; a copy released twice is a bad release.  Each release is
 * followed by a flush of the releasing thread's cache and of the
 * owner's.  (The adoption of a lent buffer claims it out of its owner,
 * so these copies do not reach the owner's inbox.)
 *
 * The same split inside an owner's drain (pool_owner.c, count_refused(),
 * from owner_drain_free() for caches of no entries and drain_rest() for
 * caches of 16): another thread releases a copy of a lease this thread's
 * cache lent, and its flush sends the token to this thread's inbox; this
 * thread then adopts the lease (the token in the inbox is fenced now) and
 * flushes its own cache, which drains its inbox: the token is counted
 * fenced, not bad (mutant owner-drain-fenced-as-bad).
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <asyncpool.h>
#include "hooks.h"

#define N  64
#define BS 64

static struct asyncpool_proactor *proactor;
static struct asyncpool *pool;
static struct asyncpool_lease copy;

static void *releaser(void *arg)
{
	(void)arg;
	asyncpool_lease_release(&copy);
	(void)asyncpool_cache_flush(pool);
	return NULL;
}

/* Release the copy in another thread, then flush this thread's cache. */
static void release_elsewhere(const struct asyncpool_lease *l)
{
	pthread_t t;

	copy = *l;
	if (pthread_create(&t, NULL, releaser, NULL) || pthread_join(t, NULL))
		bail_out("pthread");
	(void)asyncpool_cache_flush_all(pool);
}

static void round_of(uint32_t cache, const char *what)
{
	struct asyncpool_lease l, a, twice;
	uint64_t b0, f0;

	pool = make_pool(proactor, BS, N, cache);
	/* a lease this thread's cache lent, adopted: the old copy is fenced */
	is_int(asyncpool_acquire(pool, &l), 0, "%s: acquire", what);
	is_int(asyncpool_lease_adopt_token(pool, asyncpool_lease_token(&l), &a), 0, "%s: adopt", what);
	b0 = bad_releases(pool);
	f0 = fenced_releases(pool);
	release_elsewhere(&l);
	is_int(fenced_releases(pool) - f0, 1, "%s: the fenced copy, released by another thread: fenced", what);
	is_int(bad_releases(pool) - b0, 0, "%s: and not counted bad", what);
	asyncpool_lease_release(&a);
	/* a copy released twice: bad, not fenced */
	is_int(asyncpool_acquire(pool, &l), 0, "%s: acquire", what);
	twice = l;
	asyncpool_lease_release(&l);
	(void)asyncpool_cache_flush_all(pool);
	b0 = bad_releases(pool);
	f0 = fenced_releases(pool);
	release_elsewhere(&twice);
	is_int(bad_releases(pool) - b0, 1, "%s: a copy released twice, by another thread: bad", what);
	is_int(fenced_releases(pool) - f0, 0, "%s: and not counted fenced", what);
	is_int(asyncpool_check(pool), 0, "%s: check", what);
	is_int(asyncpool_destroy(pool), 0, "%s: destroy", what);
}

/*
 * A fenced token met in the owner's own drain.  The releasing thread is
 * held after it reserved the inbox slot and before it wrote the token
 * (AP_TS_INBOX_SEND): the token is then in no outbox and in no slot, so
 * the adoption, which first decides every release on its way
 * (ap_owners_settle), does not meet it, and adopts.  Let go, the sender
 * writes its token into the owner's inbox, where the owner's drain finds
 * it fenced.
 */
static _Atomic int stalled, go;
static __thread bool stall_me;

static void stall(enum ap_test_stall p)
{
	if (p != AP_TS_INBOX_SEND || !stall_me)
		return;
	stall_me = false;
	atomic_store(&stalled, 1);
	while (!atomic_load(&go))
		sched_yield();
}

static void *half_sender(void *arg)
{
	(void)arg;
	stall_me = true;
	asyncpool_lease_release(&copy);
	(void)asyncpool_cache_flush(pool);      /* sends its outbox: held there */
	stall_me = false;
	return NULL;
}

static void round_in_inbox(uint32_t cache, const char *what)
{
	struct asyncpool_lease l, a;
	uint64_t b0, f0;
	pthread_t t;

	pool = make_pool(proactor, BS, N, cache);
	is_int(asyncpool_acquire(pool, &l), 0, "%s: acquire", what);
	b0 = bad_releases(pool);
	f0 = fenced_releases(pool);
	copy = l;
	atomic_store(&stalled, 0);
	atomic_store(&go, 0);
	ap_test_hook_stall = stall;
	if (pthread_create(&t, NULL, half_sender, NULL))
		bail_out("pthread");
	while (!atomic_load(&stalled))
		sched_yield();
	/* its slot reserved, not written: adopted meanwhile, the token is fenced */
	is_int(asyncpool_lease_adopt_token(pool, asyncpool_lease_token(&l), &a), 0,
	       "%s: adopt while the release is on its way", what);
	atomic_store(&go, 1);
	if (pthread_join(t, NULL))
		bail_out("pthread_join");
	ap_test_hook_stall = NULL;
	is_int(fenced_releases(pool) - f0 + bad_releases(pool) - b0, 0,
	       "%s: the sent token is in the inbox, not decided yet", what);
	/* this thread's flush drains its own inbox (ap_owner_drain) */
	is_int(asyncpool_cache_flush(pool), 0, "%s: flush the owner's cache", what);
	is_int(fenced_releases(pool) - f0, 1, "%s: the owner's drain counts the fenced token fenced",
	       what);
	is_int(bad_releases(pool) - b0, 0, "%s: and not bad", what);
	asyncpool_lease_release(&a);
	(void)asyncpool_cache_flush_all(pool);
	is_int(fenced_releases(pool) - f0, 1, "%s: fenced once", what);
	is_int(bad_releases(pool) - b0, 0, "%s: bad never", what);
	is_int(asyncpool_check(pool), 0, "%s: check", what);
	is_int(asyncpool_destroy(pool), 0, "%s: destroy", what);
}

int main(void)
{
	plan(2 * 9 + 2 * 10 + 1);
	tap_watchdog(60);
	if (asyncpool_proactor_create_memory(&proactor))
		bail_out("proactor");
	round_of(0, "default caches");
	round_of(16, "caches of 16");
	round_in_inbox(0, "owner's drain, caches of no entries");
	round_in_inbox(16, "owner's drain, caches of 16");
	is_int(asyncpool_proactor_destroy(proactor), 0, "proactor destroy");
	return done_testing();
}
