/* SPDX-License-Identifier: MIT */
/*
 * The generation's wrap (issue 21, item 4), without 2^32 acquires: the
 * test-hook build lets the test move a free buffer's generation to just
 * before the wrap, as 2^32 - 5 - G re-leases would have, and then
 * counts.  A stale token of generation G must be refused (-ESTALE,
 * counted in bad_releases) on every lease of its buffer until exactly
 * 2^32 - 1 leases after its own, no lease may have generation 0, and
 * every lease advances the generation by exactly one: local and shared
 * pools, with and without caches (a flush and a refill included).
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "hooks.h"
#include "tap.h"
#include "testutil.h"

#define BS 64
#define N  8
#define PERIOD 4294967295ull            /* 2^32 - 1 */
#define NEAR   0xfffffffcu              /* the generation set: 4 leases before the wrap */

static void wrap(struct asyncpool *pool, const char *what)
{
	struct asyncpool_lease l;
	uint64_t bad, token, leases;
	uint32_t g0, want, holder, i;
	uint64_t w;
	int refused = 0, zero = 0, wrong = 0, rc;

	is_int(asyncpool_acquire(pool, &l), 0, "%s: acquire", what);
	g0 = l.generation;
	i = l.buffer_index;
	token = asyncpool_lease_token(&l);
	asyncpool_lease_release(&l);
	/* the buffer onto the freelist, where a word holds the last lease's generation */
	is_int(asyncpool_cache_flush(pool), 0, "%s: flush", what);
	w = atomic_load(&pool->fl.state[i]);
	is_int(AP_W_KIND(w), AP_K_FREE, "%s: the buffer is on the freelist", what);
	is_int(AP_W_GEN(w), g0, "%s: at the generation of its last lease", what);
	holder = AP_W_HOLDER(w);
	/* As if it had been leased NEAR - g0 times more. */
	atomic_store(&pool->fl.state[i], AP_W_MAKE(AP_K_FREE, holder, NEAR));
	leases = NEAR - g0;
	bad = bad_releases(pool);
	want = NEAR;
	for (int k = 0; k < 16; k++) {
		want = want == 0xffffffffu ? 1 : want + 1;
		if ((rc = asyncpool_acquire(pool, &l)) != 0) {
			ok(0, "%s: acquire %d: %d", what, k, rc);
			return;
		}
		leases++;
		zero += l.generation == 0;
		wrong += l.generation != want || l.buffer_index != i;
		if (l.generation == g0)
			break;
		refused += asyncpool_release_token(pool, token) == -ESTALE;
		if (k == 8) {
			/* a flush and a refill on the way spend no generation */
			asyncpool_lease_release(&l);
			is_int(asyncpool_cache_flush(pool), 0, "%s: flush on the way", what);
			continue;
		}
		asyncpool_lease_release(&l);
	}
	is_int(zero, 0, "%s: no lease of generation 0", what);
	is_int(wrong, 0, "%s: each lease of the buffer one generation after the last (skipping 0)",
	       what);
	is_int(l.generation, g0, "%s: the generation came round", what);
	is_int(leases, PERIOD, "%s: exactly 2^32 - 1 leases after the token's", what);
	is_int(refused, (int)(leases - (NEAR - g0) - 1), "%s: the token refused on each before", what);
	is_int(bad_releases(pool), bad + refused, "%s: and counted", what);
	/* The documented limit: at the wrap, the stale token names the new lease. */
	is_int(asyncpool_release_token(pool, token), 0, "%s: at the wrap the old token is accepted",
	       what);
	asyncpool_lease_release(&l);
	is_int(bad_releases(pool), bad + refused + 1, "%s: and the new lease's release refused", what);
	is_int(asyncpool_cache_flush(pool), 0, "%s: flush", what);
	is_int((int)asyncpool_available(pool), N, "%s: every buffer is free", what);
	is_int(asyncpool_check(pool), 0, "%s: check", what);
}

static void adopt_wrap(struct asyncpool *pool, const char *what)
{
	struct asyncpool_lease l, a;
	uint32_t i;
	uint64_t w;

	/* An adoption is a lease: it too goes from 0xffffffff to 1. */
	is_int(asyncpool_acquire(pool, &l), 0, "%s: acquire", what);
	i = l.buffer_index;
	asyncpool_lease_release(&l);
	is_int(asyncpool_cache_flush(pool), 0, "%s: flush", what);
	w = atomic_load(&pool->fl.state[i]);
	atomic_store(&pool->fl.state[i], AP_W_MAKE(AP_K_FREE, AP_W_HOLDER(w), 0xfffffffeu));
	is_int(asyncpool_acquire(pool, &l), 0, "%s: acquire at 0xffffffff", what);
	ok(l.generation == 0xffffffffu && l.buffer_index == i, "%s: the buffer, generation 0xffffffff",
	   what);
	is_int(asyncpool_lease_adopt_token(pool, asyncpool_lease_token(&l), &a), 0, "%s: adopt", what);
	is_int(a.generation, 1, "%s: the adopter's generation is 1, not 0", what);
	is_int(asyncpool_release_token(pool, asyncpool_lease_token(&l)), -ESTALE,
	       "%s: the giver's token refused", what);
	asyncpool_lease_release(&a);
	is_int(asyncpool_cache_flush(pool), 0, "%s: flush", what);
	is_int((int)asyncpool_available(pool), N, "%s: back", what);
}

/*
 * A lent buffer at generation 2^32 - 1, released on another thread
 * (gathered, sent to its owner at the thread's exit) and decided by the
 * owner's drain when its cache next refills: the next lease is of
 * generation 1, and the word stays its owner's (an add alone would carry
 * into the owner's bits and give generation 0).
 */
static uint64_t remote_token;
static int remote_rc;

static void *release_remote(void *arg)
{
	remote_rc = asyncpool_release_token(arg, remote_token);
	return NULL;    /* its exit sends what it gathered */
}

static void drain_wrap(struct asyncpool *pool, const char *what)
{
	uint64_t t[N], w;
	uint32_t i, owner;
	pthread_t th;
	int k, found = -1;

	if (asyncpool_acquire_tokens(pool, &t[0], 1))
		bail_out("%s: acquire", what);
	i = (uint32_t)t[0];
	w = atomic_load(&pool->fl.state[i]);
	owner = AP_W_OWNER(w);
	is_int(AP_W_KIND(w) == AP_K_CACHED && owner != 0, 1, "%s: the buffer is lent by its owner",
	       what);
	/* As if it had been lent 2^32 - 1 - g times more. */
	atomic_store(&pool->fl.state[i], (w & ~(uint64_t)0xffffffffu) | 0xffffffffu);
	atomic_store(&pool->released[i], 0xfffffffeu);
	remote_token = (uint64_t)0xffffffffu << 32 | i;
	if (pthread_create(&th, NULL, release_remote, pool) || pthread_join(th, NULL))
		bail_out("%s: thread", what);
	is_int(remote_rc, 0, "%s: released on another thread", what);
	/* Lend until the buffer comes back: the refill that empties the
	 * cache drains the inbox first. */
	for (k = 0; k < N && found < 0; k++) {
		if (asyncpool_acquire_tokens(pool, &t[k], 1))
			break;
		if ((uint32_t)t[k] == i)
			found = k;
	}
	ok(found >= 0, "%s: lent again", what);
	if (found >= 0) {
		w = atomic_load(&pool->fl.state[i]);
		is_int((int)(t[found] >> 32), 1, "%s: at generation 1", what);
		is_int(AP_W_KIND(w) == AP_K_CACHED && AP_W_OWNER(w) == owner && AP_W_GEN(w) == 1, 1,
		       "%s: its word its owner's at generation 1 (%#llx)", what, (unsigned long long)w);
	} else {
		ok(0, "%s: at generation 1", what);
		ok(0, "%s: its word its owner's at generation 1", what);
	}
	is_int(asyncpool_release_tokens(pool, t, (unsigned int)k), 0, "%s: released", what);
	is_int(bad_releases(pool), 0, "%s: nothing refused", what);
	is_int(asyncpool_cache_flush(pool), 0, "%s: flush", what);
	is_int((int)asyncpool_available(pool), N, "%s: every buffer is free", what);
	is_int(asyncpool_check(pool), 0, "%s: check", what);
}

#define CHECKS 25                       /* per pool */

int main(void)
{
	struct asyncpool_proactor *p;
	struct asyncpool_shared_options o;
	struct asyncpool_shared *sp;
	struct asyncpool *pool;

	plan(4 * CHECKS + 3 + 11);
	is_int((int)ap_gen_next(0xffffffffu), 1, "the generation after 2^32 - 1 is 1");
	is_int((int)ap_gen_prev(1), (int)0xffffffffu, "and the one before 1 is 2^32 - 1");
	if (asyncpool_proactor_create_memory(&p))
		bail_out("proactor");
	for (int cached = 0; cached < 2; cached++) {
		const char *name = cached ? "local cached" : "local";

		pool = make_pool(p, BS, N, cached ? 4 : 0);
		wrap(pool, name);
		adopt_wrap(pool, name);
		is_int(asyncpool_destroy(pool), 0, "%s: destroy", name);
	}
	pool = make_pool(p, BS, N, 4);
	drain_wrap(pool, "an owner's drain");
	is_int(asyncpool_destroy(pool), 0, "an owner's drain: destroy");
	for (int cached = 0; cached < 2; cached++) {
		const char *name = cached ? "shared cached" : "shared";

		shared_options(&o, BS, N);
		if (asyncpool_shared_create(&o, &sp))
			bail_out("shared_create");
		pool = asyncpool_shared_pool(sp);
		if (cached && asyncpool_set_cache(pool, 4))
			bail_out("set_cache");
		wrap(pool, name);
		adopt_wrap(pool, name);
		is_int(asyncpool_check(pool), 0, "%s: consistent after the wraps", name);
		asyncpool_shared_close(sp);
	}
	is_int(asyncpool_proactor_destroy(p), 0, "proactor destroy");
	return done_testing();
}
