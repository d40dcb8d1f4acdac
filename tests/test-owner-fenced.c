/* SPDX-License-Identifier: MIT */
/*
 * The fenced-versus-bad split of a release made by another thread than
 * the one whose cache lent the buffer (issue 54, kind 6): a copy of a
 * lease that an adoption fenced is counted in fenced_releases, not in
 * bad_releases; a copy released twice is a bad release.  Each release is
 * followed by a flush of the releasing thread's cache and of the
 * owner's.  (The adoption of a lent buffer claims it out of its owner,
 * so these copies do not reach the owner's inbox: the split inside an
 * owner's drain, pool_owner.c's count_refused(), needs a fenced token
 * in an inbox, which no test makes yet; see issue 54's report.)
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include <asyncpool.h>
#include "tap.h"
#include "testutil.h"

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

int main(void)
{
	plan(2 * 9 + 1);
	tap_watchdog(60);
	if (asyncpool_proactor_create_memory(&proactor))
		bail_out("proactor");
	round_of(0, "default caches");
	round_of(16, "caches of 16");
	is_int(asyncpool_proactor_destroy(proactor), 0, "proactor destroy");
	return done_testing();
}
