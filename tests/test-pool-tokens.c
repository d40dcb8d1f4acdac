/* SPDX-License-Identifier: MIT */
/*
 * Bulk by token (issue 15, item 4): asyncpool_acquire_tokens() and
 * asyncpool_release_tokens() move 8-byte tokens (generation << 32 |
 * index) rather than 48-byte leases.  Acquire is all or nothing; bad
 * arguments change nothing; a stale, double or duplicated token is
 * refused, counted in bad_releases like every other release path, and
 * leaves the current holder's lease alone.  Local pools, pools with
 * caches, and a shared bundle.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <asyncpool.h>
#include "tap.h"
#include "testutil.h"

#define N  16
#define BS 64

static bool all_zero(const uint64_t *t, unsigned int n)
{
	for (unsigned int j = 0; j < n; j++)
		if (t[j])
			return false;
	return true;
}

static bool distinct_valid(const uint64_t *t, unsigned int n)
{
	unsigned char seen[N] = { 0 };

	for (unsigned int j = 0; j < n; j++) {
		uint32_t i = (uint32_t)t[j], g = (uint32_t)(t[j] >> 32);

		if (i >= N || !g || seen[i]++)
			return false;
	}
	return true;
}

static void tokens(struct asyncpool *pool, const char *what)
{
	uint64_t t[N + 1], u[4], one, bad = bad_releases(pool);
	struct asyncpool_lease l;

	/* arguments */
	is_int(asyncpool_acquire_tokens(NULL, t, 1), -EINVAL, "%s: acquire_tokens: NULL pool", what);
	is_int(asyncpool_acquire_tokens(pool, NULL, 1), -EINVAL, "%s: acquire_tokens: NULL tokens",
	       what);
	is_int(asyncpool_acquire_tokens(pool, NULL, 0), 0, "%s: acquire_tokens: NULL, n 0", what);
	t[0] = 77;
	is_int(asyncpool_acquire_tokens(pool, t, 0), 0, "%s: acquire_tokens: n 0", what);
	is_int(asyncpool_acquire_tokens(pool, t, N + 1), -EINVAL,
	       "%s: acquire_tokens: more than the capacity", what);
	is_int(t[0], 77, "%s: acquire_tokens: the errors wrote nothing", what);
	is_int(asyncpool_available(pool), N, "%s: nothing taken", what);

	/* the whole pool, then empty: all or nothing */
	is_int(asyncpool_acquire_tokens(pool, t, N), 0, "%s: acquire_tokens: all %d", what, N);
	ok(distinct_valid(t, N), "%s: distinct indices in range, generations not 0", what);
	is_int(asyncpool_available(pool), 0, "%s: none left", what);
	u[0] = 5;
	is_int(asyncpool_acquire_tokens(pool, u, 1), -ENOBUFS, "%s: empty: -ENOBUFS", what);
	is_int(u[0], 0, "%s: empty: token zeroed", what);
	is_int(asyncpool_release_tokens(pool, t, 3), 0, "%s: release 3", what);
	is_int(asyncpool_available(pool), 3, "%s: 3 available", what);
	memset(u, 0x55, sizeof(u));
	is_int(asyncpool_acquire_tokens(pool, u, 4), -ENOBUFS, "%s: 4 of 3: -ENOBUFS", what);
	ok(all_zero(u, 4), "%s: 4 of 3: tokens zeroed", what);
	is_int(asyncpool_available(pool), 3, "%s: 4 of 3: nothing taken", what);
	is_int(asyncpool_acquire_tokens(pool, t, 3), 0, "%s: 3 of 3", what);

	/* bad releases change nothing */
	is_int(asyncpool_release_tokens(NULL, t, 1), -EINVAL, "%s: release_tokens: NULL pool", what);
	is_int(asyncpool_release_tokens(pool, NULL, 1), -EINVAL, "%s: release_tokens: NULL tokens",
	       what);
	is_int(asyncpool_release_tokens(pool, NULL, 0), 0, "%s: release_tokens: NULL, n 0", what);
	is_int(asyncpool_release_tokens(pool, t, 0), 0, "%s: release_tokens: n 0", what);
	is_int(asyncpool_release_tokens(pool, t, N + 1), -EINVAL,
	       "%s: release_tokens: more than the capacity", what);
	one = t[1];
	t[1] = ((uint64_t)1 << 32) | N;
	is_int(asyncpool_release_tokens(pool, t, N), -EINVAL,
	       "%s: release_tokens: an index out of range", what);
	t[1] = (uint32_t)one;
	is_int(asyncpool_release_tokens(pool, t, N), -EINVAL,
	       "%s: release_tokens: a token without a generation", what);
	t[1] = one;
	is_int(asyncpool_available(pool), 0, "%s: the refused calls released nothing", what);
	is_int(bad_releases(pool), bad, "%s: and counted nothing", what);

	/* all back, then the same array again: double */
	is_int(asyncpool_release_tokens(pool, t, N), 0, "%s: release all", what);
	is_int(asyncpool_available(pool), N, "%s: all available", what);
	is_int(bad_releases(pool), bad, "%s: no bad release", what);
	is_int(asyncpool_release_tokens(pool, t, N), -ESTALE, "%s: release all again: -ESTALE",
	       what);
	is_int(bad_releases(pool), bad + N, "%s: all %d counted", what, N);
	is_int(asyncpool_available(pool), N, "%s: still all available, once", what);
	bad += N;

	/* a duplicate in one array */
	is_int(asyncpool_acquire_tokens(pool, u, 2), 0, "%s: acquire 2", what);
	u[2] = u[0];
	is_int(asyncpool_release_tokens(pool, u, 3), -ESTALE, "%s: [a, b, a]: -ESTALE", what);
	is_int(bad_releases(pool), bad + 1, "%s: the duplicate counted", what);
	is_int(asyncpool_available(pool), N, "%s: a and b released once", what);
	bad++;

	/* stale: released, acquired again (LIFO: same buffer, new generation) */
	is_int(asyncpool_acquire_tokens(pool, u, 1), 0, "%s: acquire 1", what);
	is_int(asyncpool_release_tokens(pool, u, 1), 0, "%s: release it", what);
	is_int(asyncpool_acquire_tokens(pool, &u[1], 1), 0, "%s: acquire 1 again", what);
	is_int((uint32_t)u[1], (uint32_t)u[0], "%s: the same buffer", what);
	ok(u[1] != u[0], "%s: another generation", what);
	is_int(asyncpool_release_tokens(pool, u, 1), -ESTALE, "%s: the stale token: -ESTALE", what);
	is_int(bad_releases(pool), bad + 1, "%s: counted", what);
	is_int(asyncpool_available(pool), N - 1, "%s: the new holder keeps it", what);
	bad++;
	/* One token alone goes another way (a cache's fast and slow paths). */
	is_int(asyncpool_release_token(pool, u[0]), -ESTALE, "%s: release_token, stale: -ESTALE",
	       what);
	is_int(bad_releases(pool), bad + 1, "%s: counted", what);
	is_int(asyncpool_available(pool), N - 1, "%s: the new holder still keeps it", what);
	bad++;

	/* tokens and leases mix */
	is_int(asyncpool_lease_adopt_token(pool, u[1], &l), 0, "%s: a token becomes a lease", what);
	asyncpool_lease_release(&l);
	is_int(asyncpool_available(pool), N, "%s: released as a lease", what);
	is_int(asyncpool_acquire(pool, &l), 0, "%s: a lease", what);
	one = asyncpool_lease_token(&l);
	is_int(asyncpool_release_tokens(pool, &one, 1), 0, "%s: released by its token", what);
	asyncpool_lease_release(&l);
	is_int(bad_releases(pool), bad + 1, "%s: the lease's own release is then stale", what);
	is_int(asyncpool_available(pool), N, "%s: all back at the end", what);
	is_int(asyncpool_check(pool), 0, "%s: check clean", what);
}

#define PER 55

int main(void)
{
	struct asyncpool_proactor *p;
	struct asyncpool_shared_options o;
	struct asyncpool_shared *sp;
	struct asyncpool *pool;

	plan(4 * PER + 4);
	if (asyncpool_proactor_create_memory(&p))
		bail_out("proactor");
	pool = make_pool(p, BS, N, 0);
	tokens(pool, "local");
	is_int(asyncpool_destroy(pool), 0, "local: destroy");
	pool = make_pool(p, BS, N, 4);
	tokens(pool, "cached");
	is_int(asyncpool_destroy(pool), 0, "cached: destroy");
	shared_options(&o, BS, N);
	if (asyncpool_shared_create(&o, &sp))
		bail_out("shared_create");
	tokens(asyncpool_shared_pool(sp), "shared");
	asyncpool_shared_close(sp);
	if (asyncpool_shared_create(&o, &sp))
		bail_out("shared_create");
	is_int(asyncpool_set_cache(asyncpool_shared_pool(sp), 4), 0, "shared cached: caches");
	tokens(asyncpool_shared_pool(sp), "shared cached");
	asyncpool_shared_close(sp);
	is_int(asyncpool_proactor_destroy(p), 0, "proactor destroy");
	return done_testing();
}
