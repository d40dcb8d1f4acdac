/* SPDX-License-Identifier: MIT */
/*
 * The inline fast paths of the public header and the version of their
 * layout (<asyncpool/inline.h>, issue 34).  Built three times from this
 * source, each linked to the library's test-hook build, which counts
 * the calls of the exported functions that the inline code falls back
 * to (ap_test_exported_calls):
 *
 *   test-inline-abi           as a program is built: the pairs of a
 *                             thread's cache go inline, none exported;
 *                             then the library publishes another version
 *                             (ap_test_hook_inline_abi, as a later
 *                             library whose layout changed would), and
 *                             every call is an exported one;
 *   test-inline-abi-forced    ASYNCPOOL_INLINE_ABI_EXPECTED is another
 *                             version, as in a program built against a
 *                             header the library does not implement:
 *                             every call exported;
 *   test-inline-abi-noinline  ASYNCPOOL_NO_INLINE: every call exported.
 *
 * Each way the results are the same and exact: tokens and leases of
 * the pool, a stale token and a stale copy of a lease refused and
 * counted, the pool full and sound.  A shared pool's cache (since 1.7)
 * publishes a version of its own, ASYNCPOOL_INLINE_ABI_SHARED: its
 * single pairs go inline, the release a CAS; its bulks are the
 * library's.  The caches the inline code must leave to the library
 * publish no version: a pool's without caches (it lends through caches
 * of no entries), a destroyed pool's.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <asyncpool.h>
#include "tap.h"
#include "testutil.h"

/* The test-hook build's (pool_cache.c). */
extern uint32_t ap_test_hook_inline_abi;
extern _Atomic uint64_t ap_test_exported_calls;

#define N      64
#define CACHE  16
#define ROUNDS 100

/*
 * What the build asks for, not what the header did: the test must not
 * follow a header that ignores ASYNCPOOL_NO_INLINE or has no inline
 * paths on GCC and Linux (tests/mutants/inline-no-inline-ignored).
 */
#if defined(ASYNCPOOL_NO_INLINE) || ASYNCPOOL_INLINE_ABI_EXPECTED != ASYNCPOOL_INLINE_ABI
#define BUILT_INLINE 0
#else
#define BUILT_INLINE 1
#endif

/* The calls of one round: 2 + 2 single, 2 bulk. */
#define CALLS_PER_ROUND 6
/* The calls of the stale cases: a token pair, two stale releases, a lease and two releases. */
#define STALE_CALLS 7

/*
 * inline_expected: the single pairs go inline (and, for a local pool's
 * cache, the bulks; a shared pool's bulks are the library's: bulk_exported).
 */
static void rounds(struct asyncpool *pool, const char *what, int inline_expected, int bulk_exported)
{
	const struct asyncpool_inline_cache *c;
	struct asyncpool_lease l, copy;
	uint64_t t, tb[4], stale, before;
	int wrong = 0, inside = 0, moved = 0;
	uint32_t n;

	/* The thread's cache of pool, made and filled by the library. */
	if (asyncpool_acquire_tokens(pool, &t, 1) || asyncpool_release_token(pool, t))
		bail_out("%s: warm-up", what);
	c = asyncpool_inline_cache();
	n = c->n;
	before = ap_test_exported_calls;
	/* Every call leaves the cache (busy 0: n and busy are one word
	 * since layout 2, and the leave stores both), and every round gives
	 * back to it as many entries as it took. */
#define LEFT(call) ((call), inside += c->busy != 0)
	for (int r = 0; r < ROUNDS; r++) {
		LEFT(wrong += asyncpool_acquire_tokens(pool, &t, 1) != 0);
		wrong += t >> 32 == 0 || (uint32_t)t >= N;
		LEFT(wrong += asyncpool_release_token(pool, t) != 0);
		LEFT(wrong += asyncpool_acquire(pool, &l) != 0);
		wrong += l.generation == 0 || l.buffer_index >= N || l.span.length != 64 ||
			 l.span.offset != (size_t)l.buffer_index * 64 || !asyncpool_lease_held(&l);
		LEFT(asyncpool_lease_release(&l));
		wrong += asyncpool_lease_held(&l);
		LEFT(wrong += asyncpool_acquire_tokens(pool, tb, 4) != 0);
		LEFT(wrong += asyncpool_release_tokens(pool, tb, 4) != 0);
		moved += c->n != n;
	}
#undef LEFT
	is_int(wrong, 0, "%s: every acquire and release right", what);
	is_int(inside, 0, "%s: the owner left its cache after every call", what);
	is_int(moved, 0, "%s: every round gave back to the cache what it took (%u entries)", what, n);
	if (inline_expected && bulk_exported)
		is_int(ap_test_exported_calls - before, ROUNDS * 2, "%s: no exported call but the bulks",
		       what);
	else if (inline_expected)
		is_int(ap_test_exported_calls - before, 0, "%s: no exported call", what);
	else
		is_int(ap_test_exported_calls - before, ROUNDS * CALLS_PER_ROUND,
		       "%s: every call exported", what);
	is_int(bad_releases(pool), 0, "%s: no release refused", what);

	/* A stale token: refused with -ESTALE, counted once, whichever path;
	 * a copy of a lease released after it: refused and counted.  The
	 * refusals are the library's: exported calls, whatever the build. */
	before = ap_test_exported_calls;
	if (asyncpool_acquire_tokens(pool, &stale, 1) || asyncpool_release_token(pool, stale))
		bail_out("%s: a token", what);
	is_int(asyncpool_release_token(pool, stale), -ESTALE, "%s: a stale token is refused", what);
	is_int(asyncpool_release_tokens(pool, &stale, 1), -ESTALE,
	       "%s: and in a bulk", what);
	if (asyncpool_acquire(pool, &l))
		bail_out("%s: a lease", what);
	copy = l;
	asyncpool_lease_release(&l);
	asyncpool_lease_release(&copy);
	is_int(bad_releases(pool), 3, "%s: the three counted", what);
	is_int(ap_test_exported_calls - before, inline_expected ? 3 : STALE_CALLS,
	       "%s: %s", what, inline_expected ? "each refusal an exported call, nothing else"
					       : "every call exported");
	/* Bad input: -EINVAL, nothing counted. */
	is_int(asyncpool_release_token(pool, (uint64_t)1 << 32 | N), -EINVAL,
	       "%s: an index out of range is refused", what);
	is_int(asyncpool_release_token(pool, (uint64_t)1 << 32 | 0xffffffffu), -EINVAL,
	       "%s: the last index of all is refused, and not read", what);
	is_int(asyncpool_release_token(pool, 3), -EINVAL, "%s: generation 0 is refused", what);
	is_int(bad_releases(pool), 3, "%s: neither counted", what);
	is_int(asyncpool_available(pool), N, "%s: the pool is full", what);
	is_int(asyncpool_check(pool), 0, "%s: check", what);
}

/*
 * The calling thread's cache of pool while another thread has it, as a
 * flusher or a waiter takes it (pool_bypass.c): bypass set, which the
 * library's paths and the inline code before 1.9 read, and the gate
 * closed (NULL), which this header's inline code reads.  The inline code
 * stays out, every call is the library's (which uses the freelist), the
 * cache's entries are not touched.  Then the gate closed alone: this
 * header's inline code reads nothing else (the library, which reads
 * bypass, may use the cache).  Then the library's own flush, which
 * closes every cache and opens it again: the gate is the pool again,
 * and the pairs are inline again.
 */
static int window_pairs(struct asyncpool *pool, int pairs)
{
	struct asyncpool_lease l;
	uint64_t t, tb[2];
	int wrong = 0;

	for (int i = 0; i < pairs; i++) {
		wrong += asyncpool_acquire_tokens(pool, &t, 1) != 0;
		wrong += asyncpool_release_token(pool, t) != 0;
		wrong += asyncpool_acquire(pool, &l) != 0;
		asyncpool_lease_release(&l);
		wrong += asyncpool_lease_held(&l);
		wrong += asyncpool_acquire_tokens(pool, tb, 2) != 0;
		wrong += asyncpool_release_tokens(pool, tb, 2) != 0;
	}
	return wrong;
}

static void window(struct asyncpool *pool, const char *what, int inline_expected, int bulk_exported)
{
	struct asyncpool_inline_cache *c = (struct asyncpool_inline_cache *)asyncpool_inline_cache();
	uint64_t before, bad = bad_releases(pool);
	uint32_t n;
	int wrong = 0;

	if (c->pool != pool)
		bail_out("%s: not the thread's cache of the pool", what);
	ok(c->gate == pool, "%s: the cache's gate is its pool", what);
	n = c->n;
	__atomic_store_n(&c->bypass, 1, __ATOMIC_SEQ_CST);
	__atomic_store_n(&c->gate, NULL, __ATOMIC_SEQ_CST);
	before = ap_test_exported_calls;
	wrong += window_pairs(pool, 1);
	is_int(c->n, n, "%s, the cache taken: its entries untouched", what);
	is_int(ap_test_exported_calls - before, 6, "%s, the cache taken: every call exported", what);
	__atomic_store_n(&c->bypass, 0, __ATOMIC_SEQ_CST);
	before = ap_test_exported_calls;
	wrong += window_pairs(pool, 1);
	is_int(ap_test_exported_calls - before, 6, "%s, the gate closed alone: every call exported", what);
	__atomic_store_n(&c->gate, pool, __ATOMIC_SEQ_CST);
	is_int(wrong, 0, "%s, the cache taken: every acquire and release right", what);
	is_int(c->busy, 0, "%s: the owner is not inside its cache", what);
	is_int(bad_releases(pool) - bad, 0, "%s, the cache taken: no release refused", what);
	is_int(asyncpool_check(pool), 0, "%s, the cache taken: check", what);

	/* The library's flush: every cache closed, then opened again. */
	if (asyncpool_cache_flush(pool) < 0 || window_pairs(pool, 1))
		bail_out("%s: flush", what);
	before = ap_test_exported_calls;
	wrong = window_pairs(pool, 10);
	ok(c->gate == pool && c->bypass == 0, "%s, flushed: the gate is the pool again, bypass 0", what);
	is_int(ap_test_exported_calls - before, !inline_expected ? 60 : bulk_exported ? 20 : 0,
	       "%s, flushed: %s", what, !inline_expected ? "every call exported" :
				   bulk_exported ? "no exported call but the bulks" : "no exported call");
	is_int(wrong, 0, "%s, flushed: every acquire and release right", what);
}

/*
 * A shared pool's words, in memory the test shares with it (mem), as
 * another process or the generation's wrap leaves them, under the
 * inline shared paths (asyncpool-shared(7): state[] at offset 256).
 */
static void shared_words(struct asyncpool *pool, void *mem, const char *what)
{
	_Atomic uint64_t *state = (_Atomic uint64_t *)((char *)mem + 256);
	const struct asyncpool_inline_cache *c;
	struct asyncpool_stats st;
	uint64_t t, u, w, corrupt, tb[4], holder;
	uint32_t idx;

	/* The thread's cache of pool, made and filled by the library. */
	if (asyncpool_acquire_tokens(pool, &t, 1) || asyncpool_release_token(pool, t) ||
	    (c = asyncpool_inline_cache())->pool != pool || c->n == 0)
		bail_out("%s: the thread's cache", what);
	/* This process's holder, as the library writes it (a bulk is the
	 * library's), and the word an inline release leaves: CACHED by it. */
	if (asyncpool_acquire_tokens(pool, tb, 4))
		bail_out("%s: a bulk", what);
	holder = atomic_load(&state[(uint32_t)tb[0]]) & ((uint64_t)0x7f << 55);
	if (asyncpool_release_tokens(pool, tb, 4) || asyncpool_acquire_tokens(pool, &t, 1) ||
	    asyncpool_release_token(pool, t))
		bail_out("%s: a pair", what);
	ok(atomic_load(&state[(uint32_t)t]) ==
			     (((uint64_t)2 << 62) | holder | ((t >> 32) + 1)),
	   "%s: a released buffer's word is CACHED by this process at the next generation "
	   "(%#llx; holder %#llx, token %#llx)", what, (unsigned long long)atomic_load(&state[(uint32_t)t]),
	   (unsigned long long)holder, (unsigned long long)t);
	/* The top entry's word made LEASED by a holder no one is, as a peer
	 * that wrote it would: the take leaves the buffer to the library,
	 * which drops it from the cache and counts a corruption. */
	idx = (uint32_t)c->tok[c->n - 1];
	w = atomic_load(&state[idx]);
	atomic_store(&state[idx], ((uint64_t)1 << 62) | ((uint64_t)0x7f << 55) | (uint32_t)w);
	memset(&st, 0, sizeof(st));
	st.size = sizeof(st);
	asyncpool_stats(pool, &st);
	corrupt = st.corruptions;
	is_int(asyncpool_acquire_tokens(pool, &u, 1), 0, "%s, a cached word rewritten: a token", what);
	ok((uint32_t)u != idx, "%s, a cached word rewritten: not that buffer", what);
	asyncpool_stats(pool, &st);
	is_int(st.corruptions - corrupt, 1, "%s, a cached word rewritten: counted", what);
	/* Back: LEASED at its generation, released by its token. */
	atomic_store(&state[idx], ((uint64_t)1 << 62) | (uint32_t)w);
	is_int(asyncpool_release_token(pool, (uint64_t)(uint32_t)w << 32 | idx), 0,
	       "%s, a cached word rewritten: the buffer released again", what);
	is_int(asyncpool_release_token(pool, u), 0, "%s, a cached word rewritten: the other released",
	       what);

	/* A lease of the last generation before the wrap: its release is
	 * the library's (the inline code's gen + 1 would be 0), and the
	 * buffer's next lease, from the cache's top, is of generation 1. */
	if (asyncpool_acquire_tokens(pool, &t, 1))
		bail_out("%s: a token", what);
	idx = (uint32_t)t;
	w = atomic_load(&state[idx]);
	atomic_store(&state[idx], (w & ~(uint64_t)0xffffffffu) | 0xffffffffu);
	is_int(asyncpool_release_token(pool, (uint64_t)0xffffffffu << 32 | idx), 0,
	       "%s: a token of generation 0xffffffff released", what);
	is_int(asyncpool_acquire_tokens(pool, &t, 1), 0, "%s, after the wrap: a token", what);
	ok((uint32_t)t == idx && t >> 32 == 1,
	   "%s, after the wrap: the same buffer at generation 1 (%#llx)", what, (unsigned long long)t);
	is_int(asyncpool_release_token(pool, t), 0, "%s, after the wrap: released", what);
	is_int(asyncpool_available(pool), N, "%s: the pool is full", what);
	is_int(asyncpool_check(pool), 0, "%s: check", what);
}

/*
 * The outboxes (since 1.8): tokens the calling thread's cache lent,
 * released on another thread whose cache of the pool is published.
 * The first is the library's, which gives an outbox to this owner;
 * then, inline, each is gathered into that outbox with no exported
 * call; the library's path gathers it the same way.
 * A stale copy is refused at once with -ESTALE; a cache whose
 * outbox_limit is 0 (a library before 1.8) leaves each release to the
 * library; the release that would fill the batch is the library's,
 * which sends the batch to the owner.  Every buffer comes back.
 */
#define LENT 40
static struct {
	struct asyncpool *pool;
	uint64_t t[LENT];
	uint32_t owner;
	int wrong_owner, rc[LENT + 1], ok;
	uint64_t calls[5];
	uint32_t n[5], limit, hinted, released_ok;
} ob;

static void *outbox_releaser(void *arg)
{
	struct asyncpool_inline_cache *c;
	const struct asyncpool_inline_outbox *box;
	uint64_t t, before;
	uint32_t idx;
	int k = 0;

	(void)arg;
	/* This thread's cache of the pool, made and published by the library. */
	if (asyncpool_acquire_tokens(ob.pool, &t, 1) || asyncpool_release_token(ob.pool, t))
		return NULL;
	c = (struct asyncpool_inline_cache *)asyncpool_inline_cache();
	ob.limit = c->outbox_limit;
	if (c->pool != ob.pool || !c->outboxes || !c->outbox_limit || ob.owner == c->id)
		return NULL;
	box = &c->outboxes[ob.owner % ASYNCPOOL_INLINE_OUTBOXES];
	for (int j = 0; j < LENT; j++)
		ob.wrong_owner += c->owner_of[(uint32_t)ob.t[j]] != ob.owner;
	/* One release, then a stale copy of it. */
	before = ap_test_exported_calls;
	ob.rc[k] = asyncpool_release_token(ob.pool, ob.t[k]);
	ob.calls[0] = ap_test_exported_calls - before;
	ob.n[0] = box->n;
	before = ap_test_exported_calls;
	ob.rc[LENT] = asyncpool_release_token(ob.pool, ob.t[k++]);
	ob.calls[1] = ap_test_exported_calls - before;
	ob.n[1] = box->n;
	/* As a library before 1.8 publishes it: no outboxes (what version 3 had reserved, 0). */
	c->outbox_limit = 0;
	c->outboxes = NULL;
	before = ap_test_exported_calls;
	ob.rc[k] = asyncpool_release_token(ob.pool, ob.t[k]);
	k++;
	ob.calls[2] = ap_test_exported_calls - before;
	c->outbox_limit = ob.limit;
	c->outboxes = (struct asyncpool_inline_outbox *)box - ob.owner % ASYNCPOOL_INLINE_OUTBOXES;
	ob.n[2] = box->n;
	/* Up to the batch but for one, then the one that fills it. */
	before = ap_test_exported_calls;
	while (k < LENT && box->n + 1 < ob.limit) {
		ob.rc[k] = asyncpool_release_token(ob.pool, ob.t[k]);
		k++;
	}
	ob.calls[3] = ap_test_exported_calls - before;
	ob.n[3] = box->n;
	/* The last one gathered: its token, the hint's bit set; the hint. */
	idx = (uint32_t)ob.t[k - 1];
	ob.hinted = box->owner == ob.owner &&
		    box->tok[box->n - 1] == (ob.t[k - 1] | __ASYNCPOOL_OUTBOX_HINTED);
	ob.released_ok = c->released[idx] == (uint32_t)(ob.t[k - 1] >> 32);
	before = ap_test_exported_calls;
	ob.rc[k] = asyncpool_release_token(ob.pool, ob.t[k]);
	k++;
	ob.calls[4] = ap_test_exported_calls - before;
	ob.n[4] = box->n;
	while (k < LENT) {
		ob.rc[k] = asyncpool_release_token(ob.pool, ob.t[k]);
		k++;
	}
	ob.ok = 1;
	return NULL;    /* its exit sends what it gathered */
}

static void outboxes(struct asyncpool *pool, const char *what)
{
	const struct asyncpool_inline_cache *c;
	uint64_t bad = bad_releases(pool);
	uint32_t full;
	pthread_t th;
	int wrong = 0;

	memset(&ob, 0, sizeof(ob));
	ob.pool = pool;
	for (int j = 0; j < LENT; j++)
		if (asyncpool_acquire_tokens(pool, &ob.t[j], 1))
			bail_out("%s: lend", what);
	c = asyncpool_inline_cache();
	ob.owner = c->id;
	if (pthread_create(&th, NULL, outbox_releaser, NULL) || pthread_join(th, NULL) || !ob.ok)
		bail_out("%s: the releasing thread (limit %u, owner %u)", what, ob.limit, ob.owner);
	full = ob.limit - 1;    /* what an outbox holds before the library sends it */
	is_int(ob.limit, 32, "%s: the outbox limit is the pool's batch", what);
	is_int(ob.wrong_owner, 0, "%s: every token lent by this thread's cache", what);
	is_int(ob.rc[0], 0, "%s: another thread's release is taken", what);
	is_int(ob.calls[0], 1, "%s: the first by the exported call, which gives the outbox its owner",
	       what);
	is_int(ob.n[0], 1, "%s: gathered into the outbox for this owner", what);
	is_int(ob.rc[LENT], -ESTALE, "%s: a copy of it is refused with -ESTALE", what);
	is_int(ob.calls[1], 1, "%s: by the exported call", what);
	is_int(ob.n[1], 1, "%s: and not gathered", what);
	is_int(ob.rc[2], 0, "%s, no outboxes published: taken", what);
	is_int(ob.calls[2], 1, "%s, no outboxes published: by the exported call", what);
	is_int(ob.n[2], 2, "%s, no outboxes published: which gathered it", what);
	is_int(ob.calls[3], BUILT_INLINE ? 0 : full - 2, "%s: up to %u gathered %s", what, full,
	       BUILT_INLINE ? "inline" : "by exported calls");
	is_int(ob.n[3], full, "%s: the outbox holds %u", what, full);
	is_int(ob.hinted, 1, "%s: the last as its token, the hint's bit set", what);
	is_int(ob.released_ok, 1, "%s: its released[] hint written", what);
	is_int(ob.calls[4], 1, "%s: the one that fills the batch is the library's", what);
	is_int(ob.n[4], 0, "%s: which sent the batch", what);
	for (int j = 0; j < LENT; j++)
		wrong += ob.rc[j] != 0;
	is_int(wrong, 0, "%s: all %d taken", what, LENT);
	is_int(asyncpool_cache_flush(pool), 0, "%s: the owner flushes", what);
	is_int(bad_releases(pool) - bad, 1, "%s: the copy counted once", what);
	is_int(asyncpool_available(pool), N, "%s: every buffer back", what);
	is_int(asyncpool_check(pool), 0, "%s: check", what);
}

/*
 * Two pools alike, so that their buffers have the same indices,
 * generations and owner id: a lease of a, released while the thread's
 * cache is b's (its last used), where b's buffer of that index is lent
 * at that generation too.  The inline release enters a cache only for
 * the lease's own pool (its context against the cache's gate): b's
 * cache must not take a's buffer, whose word would match.
 */
static void two_pools(struct asyncpool_proactor *p)
{
	struct asyncpool *a = make_pool(p, 64, N, CACHE), *b = make_pool(p, 64, N, CACHE);
	struct asyncpool_lease la, lb;

	if (asyncpool_acquire(a, &la) || asyncpool_acquire(b, &lb))
		bail_out("two pools: acquire");
	ok(la.buffer_index == lb.buffer_index && la.generation == lb.generation &&
		   asyncpool_inline_cache()->pool == b,
	   "two pools: the same index %u and generation %u lent by each; the thread's cache is the second's",
	   la.buffer_index, la.generation);
	asyncpool_lease_release(&la);
	asyncpool_lease_release(&lb);
	is_int(bad_releases(a) + bad_releases(b), 0, "two pools: each lease released into its own pool");
	asyncpool_cache_flush(a);
	asyncpool_cache_flush(b);
	ok(asyncpool_available(a) == N && asyncpool_available(b) == N &&
		   asyncpool_check(a) == 0 && asyncpool_check(b) == 0,
	   "two pools: both full and sound");
	asyncpool_destroy(a);
	asyncpool_destroy(b);
}

/* Pool has a cache of this thread that publishes no version: every call exported. */
static void left_to_the_library(struct asyncpool *pool, const char *what)
{
	uint64_t t[4], before = ap_test_exported_calls;
	int wrong = 0;

	for (int r = 0; r < ROUNDS; r++) {
		wrong += asyncpool_acquire_tokens(pool, t, 1) != 0;
		wrong += asyncpool_release_token(pool, t[0]) != 0;
		wrong += asyncpool_acquire_tokens(pool, t, 4) != 0;
		wrong += asyncpool_release_tokens(pool, t, 4) != 0;
	}
	is_int(wrong, 0, "%s: every acquire and release right", what);
	is_int(asyncpool_inline_cache()->abi, 0, "%s: its cache publishes no version", what);
	is_int(ap_test_exported_calls - before, ROUNDS * 4, "%s: every call exported", what);
	is_int(bad_releases(pool), 0, "%s: no release refused", what);
}

int main(void)
{
	struct asyncpool_proactor *p;
	struct asyncpool_region *r;
	struct asyncpool *pool;
	size_t size;
	void *mem;

	plan(4 * 15 + 2 * 11 + 2 * 12 + 5 + 4 + 1 + 22 + 3);
	if (asyncpool_proactor_create_memory(&p))
		bail_out("proactor");

	pool = make_pool(p, 64, N, CACHE);
	rounds(pool, BUILT_INLINE ? "this header's layout" :
		     "a layout the library does not publish", BUILT_INLINE, 0);
	window(pool, BUILT_INLINE ? "this header's layout" : "a layout the library does not publish",
	       BUILT_INLINE, 0);
	outboxes(pool, "another thread's release of this cache's lent buffers");
	is_int(asyncpool_inline_cache()->abi, ASYNCPOOL_INLINE_ABI,
	       "the library publishes layout version %u", ASYNCPOOL_INLINE_ABI);
	asyncpool_destroy(pool);
	is_int(asyncpool_inline_cache()->abi, 0, "a destroyed pool's cache publishes no version");

	/* A library that publishes another version: the exported calls. */
	ap_test_hook_inline_abi = ASYNCPOOL_INLINE_ABI + 1;
	pool = make_pool(p, 64, N, CACHE);
	rounds(pool, "the library publishes another version", 0, 0);
	is_int(asyncpool_inline_cache()->abi, ASYNCPOOL_INLINE_ABI + 1,
	       "the library publishes version %u", ASYNCPOOL_INLINE_ABI + 1);
	asyncpool_destroy(pool);
	ap_test_hook_inline_abi = 0;

	two_pools(p);

	/* The caches the inline code must leave alone. */
	pool = make_pool(p, 64, N, 0);
	left_to_the_library(pool, "a pool without caches");
	asyncpool_destroy(pool);

	/*
	 * A shared pool's cache (since 1.7): its own version, the single
	 * pairs inline with the release's CAS; then a library that
	 * publishes another version of it: the exported calls.
	 */
	r = make_region(p, 64, N, ASYNCPOOL_ACCESS_READ);
	if (asyncpool_shared_storage_size(N, &size))
		bail_out("storage_size");
	mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		bail_out("mmap");
	for (int other = 0; other < 2; other++) {
		ap_test_hook_inline_abi = other ? ASYNCPOOL_INLINE_ABI + 1 : 0;
		memset(mem, 0, size);
		if (asyncpool_create_shared(mem, size, r, &pool) || asyncpool_set_cache(pool, CACHE))
			bail_out("a shared pool with caches");
		if (!other) {
			rounds(pool, BUILT_INLINE ? "a shared pool's cache, this header's layout" :
				     "a shared pool's cache, a layout the library does not publish",
			       BUILT_INLINE, 1);
			window(pool, "a shared pool's cache", BUILT_INLINE, 1);
			shared_words(pool, mem, "a shared pool's cache");
			is_int(asyncpool_inline_cache()->abi, ASYNCPOOL_INLINE_ABI_SHARED,
			       "a shared pool's cache publishes version %#x", ASYNCPOOL_INLINE_ABI_SHARED);
		} else {
			rounds(pool, "a shared pool's cache, the library publishes another version", 0, 0);
			is_int(asyncpool_inline_cache()->abi, (ASYNCPOOL_INLINE_ABI + 1) | 0x80000000u,
			       "a shared pool's cache publishes version %#x",
			       (ASYNCPOOL_INLINE_ABI + 1) | 0x80000000u);
		}
		asyncpool_destroy(pool);
	}
	ap_test_hook_inline_abi = 0;
	munmap(mem, size);
	asyncpool_region_unref(r);

	/* An attached pool (a memfd): its words name this process's holder. */
	{
		struct asyncpool_shared_options so;
		struct asyncpool_shared *sp;
		struct stat sb;

		memset(&so, 0, sizeof(so));
		so.size = sizeof(so);
		so.buffer_size = 64;
		so.buffer_count = N;
		if (asyncpool_shared_create(&so, &sp) || fstat(asyncpool_shared_fd(sp), &sb))
			bail_out("an attached shared pool");
		mem = mmap(NULL, (size_t)sb.st_size, PROT_READ | PROT_WRITE, MAP_SHARED,
			   asyncpool_shared_fd(sp), 0);
		pool = asyncpool_shared_pool(sp);
		if (mem == MAP_FAILED || asyncpool_set_cache(pool, CACHE))
			bail_out("an attached shared pool's cache");
		shared_words(pool, mem, "an attached shared pool's cache");
		munmap(mem, (size_t)sb.st_size);
		asyncpool_shared_close(sp);
	}

	is_int(asyncpool_proactor_destroy(p), 0, "proactor destroy");
	return done_testing();
}
