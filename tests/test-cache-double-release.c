/* SPDX-License-Identifier: MIT */
/*
 * A racing double release into caches must not corrupt the freelist
 * silently (issue 14, finding 8).  Two threads, each with a cache of the
 * pool, release copies of one lease at the same instant, then flush
 * their caches.  Each round must end in one of two ways:
 *   refused:  the second release was counted in bad_releases, the
 *             freelist is consistent and all the buffers can be had;
 *   detected: asyncpool_check() says -EUCLEAN.
 * In both, draining the pool never hands one buffer out twice.  Before
 * the fix, both releases passed the plain check of the cached path, the
 * buffer went into both caches and onto the list twice: a cycle, the
 * same buffer acquired twice, and no error anywhere.
 *
 * The pools are shared layouts in anonymous memory (a shared handle
 * closes even when the drain could not get every buffer back).
 * Rounds: ASYNCPOOL_STRESS_ITERATIONS / 25 (default 4000, at least 1000);
 * on the old code 50 to 270 of 5000 rounds handed a buffer out twice.
 *
 * The rounds above accept "detected" and depend on the two loads lining
 * up.  So first, the same race made certain: the test-hook build stalls
 * one releaser between its check of the word and its CAS
 * (AP_TS_CACHE_CLAIM, AP_TS_RELEASE_CLAIM: lib/test_stall.h) until the
 * other's release is complete, into its own cache or to the freelist of
 * a shared pool without caches (a local one lends without them), the
 * stalled one by a single release or by asyncpool_release_tokens() (a
 * shared pool's cache takes each by its own CAS).  Exactly one of the
 * two must win, the other be refused (-ESTALE) and counted, and the pool
 * stay whole; a claim made of a check and a plain store lets both win
 * (tests/mutants/shared-put-plain-store, cache-release-plain-store,
 * release-claim-plain-store).  The rounds above release through the
 * header, whose inline release of a shared pool's lease makes the CAS
 * itself since 1.7; the stalled release here calls the library.  The
 * header's CAS has a certain race of its own: this file defines the
 * header's hook between its load of the word and its CAS, which stops
 * one releaser there until the other's inline release has put the word
 * into its own cache (tests/mutants/inline-shared-put-plain-store: the
 * rounds alone did not catch it on a machine whose two cores see each
 * other's stores later than the rounds' jitter spans).
 */
#include "config.h"

/* The header's shared release stops here between its load and its CAS
 * in the certain race of its own (inline_race(), below). */
void inline_loaded(void);
#define __ASYNCPOOL_TEST_PUT_SHARED_LOADED() inline_loaded()
/* The header's gather stops here after its checks (gather_race(), below). */
void inline_gathered(void);
#define __ASYNCPOOL_TEST_GATHER_CHECKED() inline_gathered()

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <asyncpool.h>
#include "tap.h"
#include "testutil.h"
#include "shared-common.h"
#include "hooks.h"

#define CAP 64
#define CACHE 8

static struct asyncpool_region *region;
static void *mem;
static size_t mem_size;

/* One round's hand-over between main and the two workers. */
static struct asyncpool *_Atomic round_pool;
static struct asyncpool_lease copies[2];
static _Atomic unsigned int warm_gen, warmed, done;
static _Atomic int quit;

static void wait_for(_Atomic unsigned int *v, unsigned int want, bool spin)
{
	while (atomic_load(v) != want)
		if (!spin)
			sched_yield();
}

static void *worker(void *arg)
{
	int me = (int)(intptr_t)arg;
	unsigned int gen = 0;
	uint64_t rng = 0x9e3779b97f4a7c15ull * (uint64_t)(me + 1);

	for (;;) {
		struct asyncpool_lease l;
		struct asyncpool *pool;

		gen++;
		wait_for(&warm_gen, gen, false);
		if (atomic_load(&quit))
			return NULL;
		/* this thread's cache of the new pool, last used */
		pool = atomic_load(&round_pool);
		if (asyncpool_acquire(pool, &l) == 0)
			asyncpool_lease_release(&l);
		/* Both releases must start at the same instant: meet here
		 * spinning, then wait a random few cycles, so that over the
		 * rounds the two loads of the buffer's state line up. */
		atomic_fetch_add(&warmed, 1);
		wait_for(&warmed, 2, true);
		rng ^= rng << 13;
		rng ^= rng >> 7;
		rng ^= rng << 17;
		for (volatile unsigned int d = (unsigned int)(rng % 48); d; d--)
			;
		asyncpool_lease_release(&copies[me]);
		asyncpool_cache_flush(pool);
		atomic_fetch_add(&done, 1);
	}
}

/* ---- the race made certain ---- */

struct pair {
	struct asyncpool *pool;
	uint64_t token;
	bool bulk;                      /* the stalled copy goes by asyncpool_release_tokens() */
	int rc[2];
	_Atomic int stalled, released, warm;
	pthread_barrier_t go;
};

static __thread bool stall_me;
static struct pair *the_pair;

static void stall(enum ap_test_stall p)
{
	if ((p != AP_TS_CACHE_CLAIM && p != AP_TS_RELEASE_CLAIM) || !stall_me)
		return;
	stall_me = false;
	atomic_store(&the_pair->stalled, 1);
	/* the other release goes all the way while this one holds */
	while (!atomic_load(&the_pair->released))
		sched_yield();
}

static void *pair_worker(void *arg)
{
	struct pair *pr = the_pair;
	int me = (int)(intptr_t)arg;
	struct asyncpool_lease l;

	/* this thread's cache of the pool, used last, with room */
	if (asyncpool_acquire(pr->pool, &l) == 0)
		asyncpool_lease_release(&l);
	atomic_fetch_add(&pr->warm, 1);
	pthread_barrier_wait(&pr->go);
	if (me == 0) {
		/* The library's release, where the stall is: the header's
		 * inline release of a shared pool's token (since 1.7) would
		 * make its CAS without it.  A GNU inline function's address
		 * is the exported one. */
		int (*volatile release_one)(struct asyncpool *, uint64_t) = asyncpool_release_token;

		stall_me = true;
		pr->rc[0] = pr->bulk ? asyncpool_release_tokens(pr->pool, &pr->token, 1)
				     : release_one(pr->pool, pr->token);
	} else {
		while (!atomic_load(&pr->stalled))
			sched_yield();
		pr->rc[1] = asyncpool_release_token(pr->pool, pr->token);
		atomic_store(&pr->released, 1);
	}
	asyncpool_cache_flush(pr->pool);
	return NULL;
}

/*
 * owned: a local pool with caches, where the buffer's owner (the main
 * thread's cache, which lent it) decides both copies, sent to it by the
 * two workers: both sends succeed, and the owner refuses the second
 * when it looks at its inbox (the flush below), counting it
 * (pool_owner.c; tests/mutants/owner-drain-unchecked).
 */
static void race_pair(struct asyncpool *pool, const char *what, bool owned, bool bulk)
{
	struct pair pr = { .pool = pool, .bulk = bulk };
	struct asyncpool_lease l;
	struct asyncpool_stats st;
	pthread_t t[2];

	the_pair = &pr;
	pthread_barrier_init(&pr.go, NULL, 3);
	for (int i = 0; i < 2; i++)
		if (pthread_create(&t[i], NULL, pair_worker, (void *)(intptr_t)i))
			bail_out("pthread_create");
	while (atomic_load(&pr.warm) != 2)
		sched_yield();
	if (asyncpool_acquire(pool, &l))
		bail_out("acquire");
	pr.token = asyncpool_lease_token(&l);
	ap_test_hook_stall = stall;
	pthread_barrier_wait(&pr.go);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	ap_test_hook_stall = NULL;
	pthread_barrier_destroy(&pr.go);
	asyncpool_cache_flush(pool);
	is_int(pr.rc[1], 0, "%s: the release that went first won", what);
	if (owned)
		is_int(pr.rc[0], 0, "%s: the copy stalled after its check was sent to the owner",
		       what);
	else
		is_int(pr.rc[0], -ESTALE, "%s: the copy stalled before its CAS was refused", what);
	st.size = sizeof(st);
	asyncpool_stats(pool, &st);
	is_int(st.bad_releases, 1, "%s: one bad release counted", what);
	is_int(asyncpool_check(pool), 0, "%s: the freelist audit is clean", what);
	is_int(asyncpool_available(pool), CAP, "%s: every buffer free once", what);
}

/* ---- the header's CAS, the race made certain ---- */

extern _Atomic uint64_t ap_test_exported_calls;
static __thread bool stop_loaded;
static struct {
	struct asyncpool *pool;
	uint64_t token;
	int rc[2];
	uint64_t exported;              /* the second release's exported calls */
	_Atomic int warm, loaded, released;
} ir;

void inline_loaded(void)
{
	if (!stop_loaded)
		return;
	stop_loaded = false;
	atomic_store(&ir.loaded, 1);
	while (!atomic_load(&ir.released))
		sched_yield();
}

static void *inline_worker(void *arg)
{
	int me = (int)(intptr_t)arg;
	struct asyncpool_lease l;

	/* this thread's cache of the pool, used last, with room: inline */
	if (asyncpool_acquire(ir.pool, &l) == 0)
		asyncpool_lease_release(&l);
	atomic_fetch_add(&ir.warm, 1);
	while (atomic_load(&ir.warm) != 3)
		sched_yield();
	if (me == 0) {
		stop_loaded = true;
		ir.rc[0] = asyncpool_release_token(ir.pool, ir.token);
	} else {
		uint64_t before;

		while (!atomic_load(&ir.loaded))
			sched_yield();
		before = ap_test_exported_calls;
		ir.rc[1] = asyncpool_release_token(ir.pool, ir.token);
		ir.exported = ap_test_exported_calls - before;
		atomic_store(&ir.released, 1);
	}
	asyncpool_cache_flush(ir.pool);
	return NULL;
}

/*
 * Two copies of a shared pool's lease released through the header at
 * once: one stops between its load of the word (LEASED) and its CAS
 * while the other's inline CAS puts the word into its thread's cache.
 * The stopped CAS must fail, the library refuse that copy (-ESTALE,
 * counted), and the buffer be in one cache only.
 */
static void inline_race(void)
{
	struct asyncpool_lease l;
	struct asyncpool_stats st = { .size = sizeof(st) };
	pthread_t t[2];

	memset(mem, 0, mem_size);
	memset(&ir, 0, sizeof(ir));
	if (asyncpool_create_shared(mem, mem_size, region, &ir.pool) ||
	    asyncpool_set_cache(ir.pool, CACHE))
		bail_out("create_shared");
	for (int i = 0; i < 2; i++)
		if (pthread_create(&t[i], NULL, inline_worker, (void *)(intptr_t)i))
			bail_out("pthread_create");
	if (asyncpool_acquire(ir.pool, &l))
		bail_out("acquire");
	ir.token = asyncpool_lease_token(&l);
	atomic_fetch_add(&ir.warm, 1);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	is_int(ir.rc[1], 0, "inline race: the release that went first won");
	is_int((int)ir.exported, 0, "inline race: and went by the header's CAS alone");
	is_int(ir.rc[0], -ESTALE, "inline race: the copy stopped before its CAS was refused");
	asyncpool_cache_flush(ir.pool);
	asyncpool_stats(ir.pool, &st);
	is_int(st.bad_releases, 1, "inline race: one bad release counted");
	is_int(asyncpool_check(ir.pool), 0, "inline race: the audit is clean");
	is_int(asyncpool_available(ir.pool), CAP, "inline race: every buffer free once");
	is_int(asyncpool_destroy(ir.pool), 0, "inline race: destroy");
}

/*
 * Two copies of a local pool's lent buffer released through the header
 * at once on two other threads (since 1.8, each gathered into its
 * thread's outbox for the owner): one stops after its checks, before it
 * writes the released[] hint, until the other's gather is complete, so
 * both pass the hint and both go to the owner.  The owner's drain
 * decides them by the word: one taken, one refused and counted, the
 * pool whole (tests/mutants/owner-drain-fast-unchecked: both cached).
 */
static __thread bool stop_gathered;
static struct {
	struct asyncpool *pool;
	uint64_t token, first[2];
	int rc[2], first_rc[2];
	uint64_t exported[2];
	_Atomic int warm, gathered, released;
} gr;

void inline_gathered(void)
{
	if (!stop_gathered)
		return;
	stop_gathered = false;
	atomic_store(&gr.gathered, 1);
	while (!atomic_load(&gr.released))
		sched_yield();
}

static void *gather_worker(void *arg)
{
	int me = (int)(intptr_t)arg;
	uint64_t t, before;

	/* this thread's cache of the pool, used last; its outbox given to
	 * the owner by a first release, the library's */
	if (asyncpool_acquire_tokens(gr.pool, &t, 1) == 0)
		(void)asyncpool_release_token(gr.pool, t);
	gr.first_rc[me] = asyncpool_release_token(gr.pool, gr.first[me]);
	atomic_fetch_add(&gr.warm, 1);
	while (atomic_load(&gr.warm) != 2)
		sched_yield();
	before = ap_test_exported_calls;
	if (me == 0) {
		stop_gathered = true;
		gr.rc[0] = asyncpool_release_token(gr.pool, gr.token);
		gr.exported[0] = ap_test_exported_calls - before;
	} else {
		while (!atomic_load(&gr.gathered))
			sched_yield();
		gr.rc[1] = asyncpool_release_token(gr.pool, gr.token);
		gr.exported[1] = ap_test_exported_calls - before;
		atomic_store(&gr.released, 1);
	}
	return NULL;    /* its exit sends what it gathered */
}

static void gather_race(void)
{
	struct asyncpool_stats st = { .size = sizeof(st) };
	pthread_t t[2];

	memset(&gr, 0, sizeof(gr));
	if (asyncpool_create(region, &gr.pool) || asyncpool_set_cache(gr.pool, CACHE))
		bail_out("create");
	if (asyncpool_acquire_tokens(gr.pool, &gr.token, 1) ||
	    asyncpool_acquire_tokens(gr.pool, &gr.first[0], 1) ||
	    asyncpool_acquire_tokens(gr.pool, &gr.first[1], 1))
		bail_out("acquire");
	for (int i = 0; i < 2; i++)
		if (pthread_create(&t[i], NULL, gather_worker, (void *)(intptr_t)i))
			bail_out("pthread_create");
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	is_int(gr.first_rc[0] | gr.first_rc[1], 0, "gather race: the outboxes' first releases");
	is_int(gr.rc[0], 0, "gather race: the copy stopped after its checks was gathered");
	is_int(gr.rc[1], 0, "gather race: so was the other");
	is_int((int)(gr.exported[0] + gr.exported[1]), 0, "gather race: both by the header alone");
	is_int(asyncpool_cache_flush(gr.pool), 0, "gather race: the owner drains");
	asyncpool_stats(gr.pool, &st);
	is_int(st.bad_releases, 1, "gather race: one copy refused by the owner, counted");
	is_int(asyncpool_check(gr.pool), 0, "gather race: the audit is clean");
	is_int(asyncpool_available(gr.pool), CAP, "gather race: every buffer free once");
	is_int(asyncpool_destroy(gr.pool), 0, "gather race: destroy");
}

enum outcome { REFUSED, DETECTED, SILENT, DUPLICATE };

/* Note got[from..n) in seen[]; true if one was already there. */
static bool note(struct asyncpool_lease *got, unsigned int from, unsigned int n, bool *seen)
{
	bool dup = false;

	for (unsigned int j = from; j < n; j++) {
		uint32_t i = got[j].buffer_index;

		if (i >= CAP || seen[i]) {
			dup = true;
			got[j].release.fn = NULL;       /* do not release it twice */
		} else {
			seen[i] = true;
		}
	}
	return dup;
}

static enum outcome one_round(unsigned int gen, struct asyncpool_stats *st)
{
	struct asyncpool_lease l, got[CAP + CACHE];
	struct asyncpool *pool;
	bool seen[CAP] = { false }, dup = false;
	unsigned int n = 0;
	size_t avail;
	int check;

	memset(mem, 0, mem_size);
	if (asyncpool_create_shared(mem, mem_size, region, &pool) ||
	    asyncpool_set_cache(pool, CACHE))
		bail_out("create_shared");
	if (asyncpool_acquire(pool, &l))
		bail_out("acquire");
	copies[0] = l;
	copies[1] = l;
	atomic_store(&round_pool, pool);
	atomic_store(&warmed, 0);
	atomic_store(&done, 0);
	atomic_store(&warm_gen, gen);
	wait_for(&done, 2, false);
	asyncpool_cache_flush(pool);

	st->size = sizeof(*st);
	asyncpool_stats(pool, st);
	check = asyncpool_check(pool);
	avail = asyncpool_available(pool);
	/* drain: every buffer at most once; a chain walk of the capacity
	 * first (it walks a cycle to the end), then one by one */
	if (asyncpool_acquire_bulk(pool, got, CAP) == 0) {
		n = CAP;
		dup = note(got, 0, n, seen);
	}
	while (n < CAP + CACHE && asyncpool_acquire(pool, &got[n]) == 0) {
		dup |= note(got, n, n + 1, seen);
		n++;
	}
	for (unsigned int j = 0; j < n; j++)
		asyncpool_lease_release(&got[j]);
	asyncpool_destroy(pool);
	if (dup)
		return DUPLICATE;
	if (check == -EUCLEAN && avail < CAP)
		return DETECTED;
	if (st->bad_releases == 1 && check == 0 && avail == CAP && n == CAP)
		return REFUSED;
	diag("round %u: bad_releases %llu, check %d, available %zu, %u of %d acquired", gen,
	     (unsigned long long)st->bad_releases, check, avail, n, CAP);
	return SILENT;
}

int main(void)
{
	struct asyncpool_slab_options so = {
		.size = sizeof(so), .buffer_size = 64, .buffer_count = CAP, .numa_node = -1,
	};
	struct asyncpool_proactor *p;
	struct asyncpool_slab *slab;
	struct asyncpool_stats st;
	pthread_t t[2];
	unsigned long rounds = (unsigned long)stress_iterations(100000) / 25;
	unsigned long count[4] = { 0 };

	if (rounds < 1000)
		rounds = 1000;
	if (asyncpool_proactor_create_memory(&p) || asyncpool_slab_create(&so, &slab) ||
	    asyncpool_proactor_register_slab(p, slab, ASYNCPOOL_ACCESS_READ, &region) ||
	    asyncpool_shared_storage_size(CAP, &mem_size))
		bail_out("setup");
	asyncpool_slab_unref(slab);
	mem = mmap(NULL, mem_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		bail_out("mmap");
	/* the race made certain: a local pool whose caches lend, and a
	 * shared layout (raw memory: a cache marks what it hands out) */
	{
		struct asyncpool *pool;

		if (asyncpool_create(region, &pool) || asyncpool_set_cache(pool, CACHE))
			bail_out("create");
		race_pair(pool, "local pool", true, false);
		is_int(asyncpool_destroy(pool), 0, "local pool: destroy");
		memset(mem, 0, mem_size);
		if (asyncpool_create_shared(mem, mem_size, region, &pool) ||
		    asyncpool_set_cache(pool, CACHE))
			bail_out("create_shared");
		race_pair(pool, "shared layout", false, false);
		is_int(asyncpool_destroy(pool), 0, "shared layout: destroy");
		/* the bulk release's claim into a shared pool's cache is
		 * another CAS (ap_cache_push) than the single one's
		 * (ap_cache_put_shared) */
		memset(mem, 0, mem_size);
		if (asyncpool_create_shared(mem, mem_size, region, &pool) ||
		    asyncpool_set_cache(pool, CACHE))
			bail_out("create_shared");
		race_pair(pool, "shared layout, bulk", false, true);
		is_int(asyncpool_destroy(pool), 0, "shared layout, bulk: destroy");
		/* no caches: a local pool still lends (pool_lend.c, "Lending
		 * without a cache"), so the owner decides as above; a shared
		 * layout's releases both go to the freelist, by CAS.
		 * asyncpool_create() has caches by default: set_cache 0 takes
		 * them back. */
		if (asyncpool_create(region, &pool) || asyncpool_set_cache(pool, 0))
			bail_out("create");
		race_pair(pool, "local pool, no cache", true, false);
		is_int(asyncpool_destroy(pool), 0, "local pool, no cache: destroy");
		memset(mem, 0, mem_size);
		if (asyncpool_create_shared(mem, mem_size, region, &pool))
			bail_out("create_shared");
		race_pair(pool, "shared layout, no cache", false, false);
		is_int(asyncpool_destroy(pool), 0, "shared layout, no cache: destroy");
	}
	inline_race();
	gather_race();

	for (int i = 0; i < 2; i++)
		if (pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i))
			bail_out("pthread_create");

	for (unsigned int r = 1; r <= rounds; r++)
		count[one_round(r, &st)]++;

	atomic_store(&quit, 1);
	atomic_store(&warm_gen, (unsigned int)rounds + 1);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	diag("%lu rounds: %lu refused, %lu detected, %lu silent, %lu with a buffer handed out twice",
	     rounds, count[REFUSED], count[DETECTED], count[SILENT], count[DUPLICATE]);
	is_int(count[DUPLICATE], 0, "no round handed one buffer out twice");
	is_int(count[SILENT], 0, "no round left the double release unseen "
	       "(refused, or -EUCLEAN and fewer available than the capacity)");
	is_int(count[REFUSED] + count[DETECTED], rounds, "every round refused or detected it");
	munmap(mem, mem_size);
	asyncpool_region_unref(region);
	asyncpool_proactor_destroy(p);
	return done_testing();
}
