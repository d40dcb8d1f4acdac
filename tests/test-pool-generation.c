/* SPDX-License-Identifier: MIT */
/*
 * Every lease has an identity (issue 11): a copy of a lease released
 * after its buffer was acquired again is refused on every path (single,
 * cached, bulk, adopted by index, token), counted in bad_releases (an
 * adoption's fenced ones in fenced_releases), and
 * leaves the new holder's lease alone.  Tokens: asyncpool_lease_token,
 * asyncpool_release_token, asyncpool_lease_adopt_token, with their
 * errors.  Local pools, pools with caches, and shared bundles.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <asyncpool.h>
#include "tap.h"
#include "testutil.h"

#define N  8
#define BS 64

/* In use: neither free nor in one of this thread's caches. */
static size_t out(struct asyncpool *pool)
{
	asyncpool_cache_flush(pool);
	return N - asyncpool_available(pool);
}

static void stale_paths(struct asyncpool *pool, const char *what)
{
	struct asyncpool_lease l, copy, m, b[4], bcopy[4], a, all[N];
	uint64_t bad = bad_releases(pool), fen = fenced_releases(pool), t;

	/* single (and, with a cache, into the cache) */
	is_int(asyncpool_acquire(pool, &l), 0, "%s: acquire", what);
	ok(l.generation != 0, "%s: a lease has a generation", what);
	copy = l;
	asyncpool_lease_release(&l);
	is_int(asyncpool_acquire(pool, &m), 0, "%s: acquire again", what);
	is_int(m.buffer_index, copy.buffer_index, "%s: the same buffer (LIFO)", what);
	ok(m.generation != copy.generation, "%s: in a new generation", what);
	asyncpool_lease_release(&copy);
	is_int(bad_releases(pool), bad + 1, "%s: the stale copy's release is counted", what);
	is_int(out(pool), 1, "%s: and did not free the new holder's buffer", what);
	asyncpool_lease_release(&m);
	is_int(out(pool), 0, "%s: the new holder releases it", what);

	/* bulk */
	is_int(asyncpool_acquire_bulk(pool, b, 4), 0, "%s: acquire_bulk", what);
	memcpy(bcopy, b, sizeof(b));
	asyncpool_release_bulk(b, 4);
	is_int(asyncpool_acquire_bulk(pool, b, 4), 0, "%s: acquire_bulk again", what);
	asyncpool_release_bulk(bcopy, 4);
	is_int(bad_releases(pool), bad + 5, "%s: 4 stale bulk releases counted", what);
	is_int(out(pool), 4, "%s: the new leases keep their buffers", what);
	asyncpool_release_bulk(b, 4);
	is_int(out(pool), 0, "%s: released", what);

	/* an adoption by index starts a new generation: the giver's lease is stale */
	is_int(asyncpool_acquire(pool, &l), 0, "%s: acquire for adopt", what);
	is_int(asyncpool_lease_adopt(pool, l.buffer_index, &a), 0, "%s: adopt by index", what);
	ok(a.generation != l.generation && a.generation != 0,
	   "%s: the adopted lease has a new generation", what);
	asyncpool_lease_release(&l);
	is_int(fenced_releases(pool), fen + 1, "%s: the giver's lease is refused, counted fenced", what);
	is_int(out(pool), 1, "%s: the adopter keeps the buffer", what);
	asyncpool_lease_release(&a);
	is_int(out(pool), 0, "%s: the adopter releases it", what);
	is_int(asyncpool_acquire(pool, &m), 0, "%s: acquire the buffer again", what);

	/* tokens: adoption fences the giver's token and lease */
	t = asyncpool_lease_token(&m);
	is_int(t, ((uint64_t)m.generation << 32) | m.buffer_index, "%s: token = gen:index", what);
	is_int(asyncpool_lease_adopt_token(pool, t, &a), 0, "%s: adopt_token", what);
	is_int(a.buffer_index, m.buffer_index, "%s: adopt_token: its buffer", what);
	is_int(asyncpool_release_token(pool, t), -ESTALE, "%s: the giver's token: stale", what);
	asyncpool_lease_release(&m);
	is_int(fenced_releases(pool), fen + 3, "%s: the giver's token and lease: counted fenced", what);
	is_int(out(pool), 1, "%s: the adopter keeps the buffer", what);
	t = asyncpool_lease_token(&a);
	a.release.fn = NULL;
	is_int(asyncpool_release_token(pool, t), 0, "%s: release_token of the adopter's", what);
	is_int(asyncpool_release_token(pool, t), -ESTALE, "%s: release_token twice", what);
	memset(&a, 0x55, sizeof(a));
	is_int(asyncpool_lease_adopt_token(pool, t, &a), -ESTALE, "%s: adopt_token of a gone lease", what);
	ok(a.release.fn == NULL && a.generation == 0, "%s: adopt_token zeroed the lease", what);
	/* every buffer leased again, so the token's buffer too */
	is_int(asyncpool_acquire_bulk(pool, all, N), 0, "%s: acquire all the buffers", what);
	is_int(asyncpool_release_token(pool, t), -ESTALE, "%s: the old token after a new acquire", what);
	is_int(out(pool), N, "%s: refused, the new lease holds", what);
	is_int(bad_releases(pool), bad + 7, "%s: stale tokens counted, the fenced ones apart", what);
	is_int(asyncpool_release_token(pool, asyncpool_lease_token(&all[0])), 0, "%s: a live token", what);
	all[0].release.fn = NULL;
	asyncpool_release_bulk(all, N);
	is_int(out(pool), 0, "%s: all back", what);
	is_int(asyncpool_check(pool), 0, "%s: check", what);
}

/*
 * A program built against the 1.1 header calls the callback a pool
 * stores itself, through a cast, with the token: it must keep working
 * (the 1.2 header goes through asyncpool_lease_release_gen instead).
 */
static void release_1_1(struct asyncpool_lease *l)
{
	void (*fn)(void *, uint32_t) = l->release.fn;

	l->release.fn = NULL;
	((void (*)(void *, uint64_t))(void (*)(void))fn)(
		l->release.ctx, ((uint64_t)l->generation << 32) | l->buffer_index);
}

static void header_1_1(struct asyncpool *pool, const char *what)
{
	struct asyncpool_lease l, copy, m;
	uint64_t bad = bad_releases(pool);

	is_int(asyncpool_acquire(pool, &l), 0, "%s: 1.1 call: acquire", what);
	copy = l;
	release_1_1(&l);
	is_int(out(pool), 0, "%s: 1.1 call: released", what);
	is_int(asyncpool_acquire(pool, &m), 0, "%s: 1.1 call: acquire again", what);
	release_1_1(&copy);
	is_int(bad_releases(pool), bad + 1, "%s: 1.1 call: a stale copy refused, counted", what);
	is_int(out(pool), 1, "%s: 1.1 call: the new holder keeps it", what);
	release_1_1(&m);
	is_int(out(pool), 0, "%s: 1.1 call: released", what);

	/*
	 * asyncpool_lease_release_gen() of a lease without a generation
	 * calls the callback as asyncpool_lease_release() does, with the
	 * index: a pool releases it by index, and a buffer its cache lent
	 * (a pool with caches) is found in the caches, not refused.
	 */
	is_int(asyncpool_acquire(pool, &m), 0, "%s: release_gen, generation 0: acquire", what);
	m.generation = 0;
	asyncpool_lease_release_gen(&m);
	ok(m.release.fn == NULL && out(pool) == 0 && bad_releases(pool) == bad + 1,
	   "%s: release_gen, generation 0: released by index (out %zu)", what, out(pool));
}
#define HEADER_1_1 8

static void token_errors(struct asyncpool *pool)
{
	struct asyncpool_lease l;

	is_int(asyncpool_lease_token(NULL), 0, "lease_token: NULL");
	memset(&l, 0, sizeof(l));
	is_int(asyncpool_lease_token(&l), 0, "lease_token: a lease without a generation");
	is_int(asyncpool_release_token(NULL, (1ull << 32) | 1), -EINVAL, "release_token: NULL pool");
	is_int(asyncpool_release_token(pool, 1), -EINVAL, "release_token: generation 0");
	is_int(asyncpool_release_token(pool, (1ull << 32) | N), -EINVAL, "release_token: index out of range");
	is_int(asyncpool_release_token(pool, (0xffffffffull << 32) | 1), -ESTALE,
	       "release_token: generation 2^32 - 1 is one, of a free buffer");
	is_int(asyncpool_release_token(pool, (1ull << 32) | 1), -ESTALE, "release_token: a free buffer");
	is_int(asyncpool_lease_adopt_token(pool, (1ull << 32) | 1, NULL), -EINVAL, "adopt_token: NULL out");
	memset(&l, 0x55, sizeof(l));
	is_int(asyncpool_lease_adopt_token(NULL, (1ull << 32) | 1, &l), -EINVAL, "adopt_token: NULL pool");
	ok(l.release.fn == NULL, "adopt_token: zeroed on failure");
	is_int(asyncpool_lease_adopt_token(pool, (1ull << 32) | N, &l), -EINVAL, "adopt_token: out of range");
}

int main(void)
{
	struct asyncpool_proactor *p;
	struct asyncpool_shared_options o;
	struct asyncpool_shared *sp;
	struct asyncpool *pool;

	plan(3 * (37 + HEADER_1_1) + 11 + 4);
	ok(sizeof(struct asyncpool_lease) == 48 &&
	   offsetof(struct asyncpool_lease, generation) == 44,
	   "the generation fills the lease's tail padding: 48 bytes as in 1.0");
	if (asyncpool_proactor_create_memory(&p))
		bail_out("proactor");

	pool = make_pool(p, BS, N, 0);
	stale_paths(pool, "local");
	header_1_1(pool, "local");
	token_errors(pool);
	is_int(asyncpool_destroy(pool), 0, "local: destroy");

	pool = make_pool(p, BS, N, 4);
	stale_paths(pool, "cached");
	header_1_1(pool, "cached");
	is_int(asyncpool_destroy(pool), 0, "cached: destroy");

	shared_options(&o, BS, N);
	if (asyncpool_shared_create(&o, &sp))
		bail_out("shared_create");
	stale_paths(asyncpool_shared_pool(sp), "shared");
	header_1_1(asyncpool_shared_pool(sp), "shared");
	asyncpool_shared_close(sp);
	is_int(asyncpool_proactor_destroy(p), 0, "proactor destroy");
	return done_testing();
}
