/* SPDX-License-Identifier: MIT */
/*
 * The bulk fast paths of a pool whose caches lend (lib/pool_bulk.c,
 * issue 22 item 4): a bulk acquire that the calling thread's cache can
 * serve is a copy out of its arrays, and a bulk release into it is one
 * loop per chunk that checks each buffer's owner and word.  What each
 * keeps of the single operations' promises:
 *
 *  - the tokens are checked before anything moves: an index out of
 *    range or a generation 0, at any place of an array of any length
 *    (the check goes two tokens at a time, then the odd one), is
 *    -EINVAL and changes nothing;
 *  - lent buffers are counted: asyncpool_check() is exact while a bulk
 *    from the cache is out and after it comes back, round after round;
 *  - a stale token, a token twice in one array, a copy of a lease in one
 *    bulk, are refused in the loop and counted once (-ESTALE), the rest
 *    of the bulk taken;
 *  - a token whose buffer another thread's cache lent goes to that
 *    owner, and a stale copy of it is refused at once;
 *  - a cache smaller than the bulk is flushed in the middle of the loop;
 *  - a run of leases ends at another pool's lease, and both go back; a
 *    lease with an index out of range in a run is cleared, not released;
 *  - a shared pool's caches (which do not lend) count their refusals too.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include <asyncpool.h>
#include "tap.h"
#include "testutil.h"
#include "hooks.h"

#define CAP   256
#define CACHE 64
#define BS    64
#define BULK  32

static struct asyncpool_proactor *proactor;

static uint64_t tok(uint32_t gen, uint32_t idx)
{
	return (uint64_t)gen << 32 | idx;
}

/* The calling thread's cache of p holds how many (0: none yet). */
static uint32_t cached_here(struct asyncpool *p)
{
	struct ap_cache *c = ap_tc_last;

	return c->pool == p ? c->n : 0;
}

/* The whole pool is back and the audit agrees. */
static void whole(struct asyncpool *p, const char *what)
{
	is_int(asyncpool_cache_flush_all(p), 0, "%s: flush_all", what);
	is_int(asyncpool_check(p), 0, "%s: the audit is clean", what);
	is_int(asyncpool_available(p), CAP, "%s: every buffer free once", what);
}

/*
 * Fill the calling thread's cache so that the next bulk of n comes from
 * it: n acquired (a refill) and given back (into the cache).
 */
static void prime(struct asyncpool *p, unsigned int n)
{
	uint64_t t[CACHE];

	if (asyncpool_acquire_tokens(p, t, n) || asyncpool_release_tokens(p, t, n))
		bail_out("prime %u", n);
}

/* ---- the check of the tokens, before anything moves ---- */

static void bad_tokens(struct asyncpool *p)
{
	static const unsigned int sizes[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 33 };
	uint64_t t[40], u[40], bad = bad_releases(p);

	is_int(asyncpool_acquire_tokens(p, t, 33), 0, "check: 33 tokens");
	for (unsigned int s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		unsigned int n = sizes[s], refused = 0;

		for (unsigned int at = 0; at < n; at++) {
			for (int kind = 0; kind < 4; kind++) {
				memcpy(u, t, n * sizeof(*u));
				if (kind == 0)
					u[at] = tok((uint32_t)(t[at] >> 32), CAP);
				else if (kind == 1)
					u[at] = tok((uint32_t)(t[at] >> 32), UINT32_MAX);
				else if (kind == 2)
					u[at] = tok(0, (uint32_t)t[at]);
				else
					u[at] = tok(0, CAP);
				refused += asyncpool_release_tokens(p, u, n) == -EINVAL;
			}
		}
		is_int(refused, 4 * n, "check: %u tokens, each place bad 4 ways: -EINVAL", n);
		is_int(asyncpool_available(p), CAP - 33, "check: %u: nothing released", n);
	}
	is_int(bad_releases(p), bad, "check: nothing counted");
	/* The highest index and generation are tokens: stale, not bad input. */
	u[0] = tok(UINT32_MAX, CAP - 1);
	u[1] = t[0];
	is_int(asyncpool_release_tokens(p, u, 2), -ESTALE,
	       "check: index CAP - 1, generation 0xffffffff: valid, stale (-ESTALE)");
	is_int(bad_releases(p), bad + 1, "check: the stale one counted, once");
	is_int(asyncpool_release_tokens(p, &t[1], 32), 0, "check: the rest released");
	whole(p, "check");
}

/* ---- lent buffers counted, round after round ---- */

static void lent_counted(struct asyncpool *p)
{
	struct asyncpool_lease l[BULK];
	uint64_t t[BULK];
	int wrong = 0, fast = 0;

	prime(p, CACHE);
	for (int round = 0; round < 50; round++) {
		uint32_t before = cached_here(p);
		int rc = round & 1 ? asyncpool_acquire_bulk(p, l, BULK) :
				     asyncpool_acquire_tokens(p, t, BULK);

		fast += rc == 0 && before >= BULK && cached_here(p) == before - BULK;
		wrong += rc != 0;
		wrong += asyncpool_check(p) != 0;
		wrong += asyncpool_available(p) != CAP - BULK;
		if (round & 1)
			asyncpool_release_bulk(l, BULK);
		else
			wrong += asyncpool_release_tokens(p, t, BULK) != 0;
		wrong += asyncpool_check(p) != 0;
		wrong += asyncpool_available(p) != CAP;
	}
	is_int(fast, 50, "lent: every bulk came from the cache");
	is_int(wrong, 0, "lent: the audit exact with a bulk out and after it, 50 rounds");
	/* Each token is the cache's entry: its top n, in the order they are stacked. */
	wrong = 0;
	for (unsigned int n = 1; n <= BULK; n += n < 9 ? 1 : 23) {
		struct ap_cache *c = ap_tc_last;
		uint32_t cn = c->n;

		wrong += c->pool != p || cn < n;
		wrong += asyncpool_acquire_tokens(p, t, n) != 0;
		for (unsigned int j = 0; j < n; j++)
			wrong += t[j] != c->tok[cn - n + j];
		wrong += asyncpool_release_tokens(p, t, n) != 0;
	}
	is_int(wrong, 0, "lent: 1 to 9 and 32 tokens, each the cache's entry, in stack order");
	whole(p, "lent");
}

/* ---- stale, double, copies within one bulk ---- */

static void stale_in_bulk(struct asyncpool *p)
{
	struct asyncpool_lease l[9];
	uint64_t old[8], t[9], u[10], bad = bad_releases(p);

	prime(p, CACHE);
	is_int(asyncpool_acquire_tokens(p, old, 8), 0, "stale: 8 tokens");
	is_int(asyncpool_release_tokens(p, old, 8), 0, "stale: released");
	is_int(asyncpool_acquire_tokens(p, t, 8), 0, "stale: 8 again (the same buffers)");
	ok((uint32_t)t[0] == (uint32_t)old[0] && t[0] != old[0],
	   "stale: the same buffer, a new generation");
	t[8] = old[3];
	is_int(asyncpool_release_tokens(p, t, 9), -ESTALE, "stale: 8 and a stale one: -ESTALE");
	is_int(bad_releases(p), bad + 1, "stale: counted once");
	is_int(asyncpool_check(p), 0, "stale: the audit is clean");
	is_int(asyncpool_available(p), CAP, "stale: the 8 back, once");
	bad++;

	/* The same token twice in the middle of the array, and at its end. */
	is_int(asyncpool_acquire_tokens(p, t, 8), 0, "double: 8 tokens");
	memcpy(u, t, 4 * sizeof(*u));
	u[4] = t[3];
	memcpy(&u[5], &t[4], 4 * sizeof(*u));
	u[9] = t[7];
	is_int(asyncpool_release_tokens(p, u, 10), -ESTALE,
	       "double: [a b c d d e f g h h]: -ESTALE");
	is_int(bad_releases(p), bad + 2, "double: both second copies counted");
	is_int(asyncpool_available(p), CAP, "double: the 8 back, once");
	is_int(asyncpool_check(p), 0, "double: the audit is clean");
	bad += 2;

	/* A copy of a lease in a bulk of leases. */
	is_int(asyncpool_acquire_bulk(p, l, 8), 0, "lease copy: 8 leases");
	l[8] = l[2];
	asyncpool_release_bulk(l, 9);
	is_int(bad_releases(p), bad + 1, "lease copy: counted once");
	ok(!l[2].release.fn && !l[8].release.fn, "lease copy: both cleared");
	is_int(asyncpool_check(p), 0, "lease copy: the audit is clean");
	whole(p, "stale");
}

/* ---- another thread's cache lent them ---- */

static struct {
	struct asyncpool *pool;
	uint64_t t[16];
	_Atomic int phase;
} other;

static void *other_lends(void *arg)
{
	(void)arg;
	prime(other.pool, CACHE);
	if (asyncpool_acquire_tokens(other.pool, other.t, 16))
		return (void *)1;
	atomic_store(&other.phase, 1);
	while (atomic_load(&other.phase) != 2)
		sched_yield();
	return (void *)(intptr_t)(asyncpool_cache_flush(other.pool) != 0);
}

static void other_owner(struct asyncpool *p)
{
	uint64_t mine[8], t[25], bad = bad_releases(p);
	pthread_t th;
	void *res;

	other.pool = p;
	atomic_store(&other.phase, 0);
	prime(p, CACHE);
	if (pthread_create(&th, NULL, other_lends, NULL))
		bail_out("pthread_create");
	while (atomic_load(&other.phase) != 1)
		sched_yield();
	is_int(asyncpool_acquire_tokens(p, mine, 8), 0, "other: 8 of our own");
	memcpy(t, mine, sizeof(mine));
	memcpy(&t[8], other.t, sizeof(other.t));
	is_int(asyncpool_release_tokens(p, t, 24), 0, "other: 8 ours and 16 another cache lent: 0");
	is_int(bad_releases(p), bad, "other: nothing refused");
	is_int(asyncpool_available(p), CAP, "other: all counted back (some in transit)");
	t[24] = other.t[5];
	is_int(asyncpool_release_tokens(p, &t[24], 1), -ESTALE,
	       "other: a copy of one of them again: refused at once");
	is_int(bad_releases(p), bad + 1, "other: counted");
	atomic_store(&other.phase, 2);
	pthread_join(th, &res);
	is_int((intptr_t)res, 0, "other: the owner lent 16, then flushed");
	whole(p, "other");
}

/* ---- a cache smaller than the bulk ---- */

/*
 * A cache of 8 lends 32, 8 at a time (a refill each), and takes them
 * back in one bulk: full after 8, a batch flushed, and so on, inside
 * the loop.
 */
static void small_cache(void)
{
	struct asyncpool *p = make_pool(proactor, BS, CAP, 8);
	struct asyncpool_lease l[BULK];
	uint64_t t[BULK], bad = bad_releases(p);
	int wrong = 0;

	for (int round = 0; round < 3; round++) {
		for (int j = 0; j < BULK; j += 8)
			wrong += asyncpool_acquire_tokens(p, &t[j], 8) != 0;
		is_int(asyncpool_release_tokens(p, t, BULK), 0, "small cache: %d: 32 tokens back",
		       round);
		ok(cached_here(p) <= 8, "small cache: %d: the cache stayed within its size", round);
		for (int j = 0; j < BULK; j += 8)
			wrong += asyncpool_acquire_bulk(p, &l[j], 8) != 0;
		asyncpool_release_bulk(l, BULK);
		is_int(asyncpool_check(p), 0, "small cache: %d: the audit is clean", round);
		is_int(asyncpool_available(p), CAP, "small cache: %d: all back", round);
	}
	is_int(wrong, 0, "small cache: every acquire of 8 served");
	/* Stale ones after the flushes. */
	for (int j = 0; j < BULK; j += 8)
		wrong += asyncpool_acquire_tokens(p, &t[j], 8) != 0;
	is_int(asyncpool_release_tokens(p, t, BULK), 0, "small cache: 32 back");
	is_int(asyncpool_release_tokens(p, t, BULK), -ESTALE, "small cache: again: -ESTALE");
	is_int(bad_releases(p), bad + BULK, "small cache: all 32 counted");
	whole(p, "small cache");
	is_int(asyncpool_destroy(p), 0, "small cache: destroy");
}

/* ---- a run of leases ends at another pool's ---- */

static void two_pools(struct asyncpool *p)
{
	struct asyncpool *q = make_pool(proactor, BS, CAP, CACHE);
	struct asyncpool_lease l[11];
	uint64_t bad = bad_releases(p);
	int cleared = 0;

	prime(p, CACHE);
	prime(q, CACHE);
	is_int(asyncpool_acquire_bulk(p, l, 3), 0, "two pools: 3 of p");
	is_int(asyncpool_acquire_bulk(q, &l[3], 3), 0, "two pools: 3 of q");
	is_int(asyncpool_acquire_bulk(p, &l[6], 4), 0, "two pools: 4 of p");
	asyncpool_lease_release(&l[8]);         /* released already: a hole */
	/* A forged index in the run: cleared, nothing touched. */
	l[10] = l[9];
	l[9] = l[6];
	l[9].buffer_index = 0x7ffffff0u;
	asyncpool_release_bulk(l, 11);
	for (int j = 0; j < 11; j++)
		cleared += !l[j].release.fn;
	is_int(cleared, 11, "two pools: every lease cleared");
	is_int(bad_releases(p), bad, "two pools: nothing of p refused");
	is_int(bad_releases(q), 0, "two pools: nothing of q refused");
	whole(q, "two pools: q");
	whole(p, "two pools: p");
	is_int(asyncpool_destroy(q), 0, "two pools: destroy q");
}

/*
 * A shared pool's caches do not lend (another process cannot be an
 * owner): a bulk release into them claims each buffer by CAS.  Its
 * refusals are counted the same.
 */
static void shared_cached(void)
{
	struct asyncpool_shared_options o;
	struct asyncpool_lease l[9];
	struct asyncpool_shared *sp;
	struct asyncpool *p;
	uint64_t t[9], bad;

	shared_options(&o, BS, CAP);
	if (asyncpool_shared_create(&o, &sp))
		bail_out("shared_create");
	p = asyncpool_shared_pool(sp);
	is_int(asyncpool_set_cache(p, 16), 0, "shared: caches");
	bad = bad_releases(p);
	is_int(asyncpool_acquire_tokens(p, t, 8), 0, "shared: 8 tokens");
	t[8] = t[2];
	is_int(asyncpool_release_tokens(p, t, 9), -ESTALE, "shared: one twice: -ESTALE");
	is_int(bad_releases(p), bad + 1, "shared: counted once");
	is_int(asyncpool_acquire_bulk(p, l, 8), 0, "shared: 8 leases");
	l[8] = l[5];
	asyncpool_release_bulk(l, 9);
	is_int(bad_releases(p), bad + 2, "shared: a copy of a lease counted once");
	is_int(asyncpool_cache_flush_all(p), 0, "shared: flush_all");
	is_int(asyncpool_check(p), 0, "shared: the audit is clean");
	is_int(asyncpool_available(p), CAP, "shared: every buffer free once");
	asyncpool_shared_close(sp);
}

int main(void)
{
	struct asyncpool *p;

	if (asyncpool_proactor_create_memory(&proactor))
		bail_out("proactor");
	p = make_pool(proactor, BS, CAP, CACHE);
	if (!p->fl.lazy) {
		asyncpool_destroy(p);
		asyncpool_proactor_destroy(proactor);
		skip_all("caches here do not lend (no membarrier(2)): no bulk fast path");
	}
	plan(110);
	bad_tokens(p);
	lent_counted(p);
	stale_in_bulk(p);
	other_owner(p);
	small_cache();
	two_pools(p);
	shared_cached();
	is_int(asyncpool_destroy(p), 0, "destroy");
	is_int(asyncpool_proactor_destroy(proactor), 0, "proactor destroy");
	return done_testing();
}
