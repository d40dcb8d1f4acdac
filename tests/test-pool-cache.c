/* SPDX-License-Identifier: MIT */
/*
 * Per-thread caches and bulk operations: options, hand-off of leases
 * between 8 threads with ownership checks, thread exit, flush, destroy
 * with populated caches, double releases, fork, and bulk all-or-nothing.
 */
#include "config.h"

/* The header's gather stops here, inside the inline window
 * (test_flusher_waits_inline(), below). */
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
#include <sys/wait.h>
#include <unistd.h>

#include <asyncpool.h>
#include "tap.h"
#include "testutil.h"
#include "hooks.h"

#define THREADS 8
#define BUFFERS 512
#define CACHE   32

static struct asyncpool_proactor *proactor;

/* ---- options ---- */
static void test_options(void)
{
	struct asyncpool_region *r = make_region(proactor, 64, 16, ASYNCPOOL_ACCESS_READ);
	struct {
		struct asyncpool_options o;
		uint64_t tail[2];
	} big;
	struct asyncpool_options o;
	struct asyncpool *pool = (void *)1, *plain;
	struct asyncpool_lease l, lp;

	memset(&o, 0, sizeof(o));
	o.size = sizeof(o);
	is_int(asyncpool_create_opts(r, &o, NULL), -EINVAL, "opts: NULL out");
	is_int(asyncpool_create_opts(NULL, &o, &pool), -EINVAL, "opts: NULL region");
	ok(pool == NULL, "opts: out is NULL on failure");
	o.size = offsetof(struct asyncpool_options, flags);
	is_int(asyncpool_create_opts(r, &o, &pool), -EINVAL, "opts: size too small");
	o.size = sizeof(o);
	o.flags = 1;
	is_int(asyncpool_create_opts(r, &o, &pool), -EINVAL, "opts: unknown flag");
	o.flags = 0;
	o.reserved[3] = 1;
	is_int(asyncpool_create_opts(r, &o, &pool), -EINVAL, "opts: reserved not zero");
	o.reserved[3] = 0;
	o.cache_size = ASYNCPOOL_CACHE_MAX + 1;
	is_int(asyncpool_create_opts(r, &o, &pool), -EINVAL, "opts: cache too large");
	o.cache_size = 17;
	is_int(asyncpool_create_opts(r, &o, &pool), -EINVAL, "opts: cache larger than the pool");
	memset(&big, 0, sizeof(big));
	big.o.size = sizeof(big);
	big.o.cache_size = 4;
	big.tail[1] = 1;
	is_int(asyncpool_create_opts(r, &big.o, &pool), -EINVAL, "opts: unknown tail not zero");
	big.tail[1] = 0;
	is_int(asyncpool_create_opts(r, &big.o, &pool), 0, "opts: larger struct, zero tail");
	is_int(asyncpool_set_cache(pool, 8), -EEXIST, "set_cache: caches already on");
	is_int(asyncpool_destroy(pool), 0, "destroy");

	/* cache_size 0: a pool like asyncpool_create's */
	o.cache_size = 0;
	is_int(asyncpool_create_opts(r, &o, &pool), 0, "opts: cache_size 0");
	is_int(asyncpool_create(r, &plain), 0, "plain pool");
	is_int(asyncpool_acquire(pool, &l), 0, "cache_size 0: acquire");
	is_int(asyncpool_acquire(plain, &lp), 0, "plain pool: acquire");
	/* the callbacks, compared while the leases still hold them */
	ok(l.release.fn != NULL && l.release.fn == lp.release.fn,
	   "cache_size 0: a lease releases as a plain pool's does");
	asyncpool_lease_release(&l);
	asyncpool_lease_release(&lp);
	is_int(ap_fl_count(&pool->fl), 16, "cache_size 0: the release went to the freelist");
	is_int(asyncpool_set_cache(pool, 17), -EINVAL, "set_cache: too large");
	is_int(asyncpool_set_cache(NULL, 4), -EINVAL, "set_cache: NULL pool");
	is_int(asyncpool_set_cache(pool, 0), 0, "set_cache: 0 is no cache");
	asyncpool_acquire(pool, &l);
	asyncpool_lease_release(&l);
	is_int(ap_fl_count(&pool->fl), 16, "set_cache 0: the release still went to the freelist");
	is_int(asyncpool_acquire(pool, &lp), 0, "set_cache 0: a lease lent without a cache");
	is_int(asyncpool_set_cache(pool, 4), 0, "set_cache: turn caches on");
	is_int(asyncpool_acquire(pool, &l), 0, "set_cache: acquire");
	/* This thread used the pool without caches: its cache of no
	 * entries grew to the new size, and refilled a batch of 2. */
	is_int(ap_fl_count(&pool->fl), 13, "set_cache: the acquire refilled this thread's cache");
	is_int(asyncpool_check(pool), 0,
	       "set_cache: the audit is exact, with a lease lent before the cache grew");
	asyncpool_lease_release(&l);
	asyncpool_lease_release(&lp);
	/* a refill took a batch (2 of a cache of 4) off the freelist, and
	 * both releases put their buffer back into this thread's cache */
	is_int(ap_fl_count(&pool->fl), 13, "set_cache: the batch is in this thread's cache");
	is_int(asyncpool_check(pool), 0, "set_cache: the audit is exact with every lease back");
	is_int(asyncpool_available(pool), 16, "available counts cached buffers");
	is_int(asyncpool_destroy(pool), 0, "destroy");
	/* The same with tokens: the single lend of a pool without caches
	 * gives way to the cache once the pool has caches. */
	{
		uint64_t t1, t2;

		o.cache_size = 0;
		is_int(asyncpool_create_opts(r, &o, &pool), 0, "tokens: cache_size 0");
		is_int(asyncpool_acquire_tokens(pool, &t1, 1), 0, "tokens: lent without a cache");
		is_int(ap_fl_count(&pool->fl), 15, "tokens: one off the freelist");
		is_int(asyncpool_set_cache(pool, 4), 0, "tokens: set_cache: turn caches on");
		is_int(asyncpool_acquire_tokens(pool, &t2, 1), 0, "tokens: set_cache: acquire");
		/* The bulk path's refill: the one missing and a batch (2) more. */
		is_int(ap_fl_count(&pool->fl), 12, "tokens: set_cache: the acquire refilled this thread's cache");
		is_int(asyncpool_check(pool), 0, "tokens: set_cache: the audit is exact");
		is_int(asyncpool_release_token(pool, t2), 0, "tokens: set_cache: release the cached one");
		is_int(asyncpool_release_token(pool, t1), 0, "tokens: set_cache: release the lent one");
		is_int(ap_fl_count(&pool->fl), 12, "tokens: set_cache: both in this thread's cache");
		is_int(asyncpool_check(pool), 0, "tokens: set_cache: the audit is exact with every token back");
		is_int(asyncpool_available(pool), 16, "tokens: set_cache: all 16 available");
		is_int(asyncpool_destroy(pool), 0, "tokens: destroy");
	}
	is_int(asyncpool_create_opts(r, NULL, &pool), 0, "opts: NULL is the defaults");
	is_int(asyncpool_destroy(pool), 0, "destroy");
	is_int(asyncpool_destroy(plain), 0, "destroy");
	is_int(asyncpool_cache_flush(NULL), -EINVAL, "cache_flush: NULL");
	asyncpool_region_unref(r);
}

/* ---- 8 threads handing leases to each other ---- */
static struct handoff handoff;
static struct asyncpool *hpool;
static struct asyncpool_lease parked[BUFFERS];   /* by buffer index */

/* A local pool adopts no index: the lease waits in parked[]. */
static void park(const struct asyncpool_lease *l)
{
	parked[l->buffer_index] = *l;
}

static int unpark(struct asyncpool *pool, uint32_t idx, struct asyncpool_lease *l)
{
	*l = parked[idx];
	return 0;
}

static const struct handoff_ops parking = { .send = park, .take = unpark };

static void *handoff_worker(void *arg)
{
	handoff_thread(&handoff, (unsigned)(uintptr_t)arg, hpool, &parking);
	return NULL;
}

static void test_handoff(void)
{
	pthread_t t[THREADS];
	struct asyncpool_lease *all;

	handoff_init(&handoff, THREADS, BUFFERS, stress_iterations(50000), false);
	hpool = make_pool(proactor, 64, BUFFERS, CACHE);
	for (uintptr_t i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, handoff_worker, (void *)i);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	diag("%d threads x %ld leases handed to random threads; %ld empty retries",
	     THREADS, handoff.rounds, atomic_load(&handoff.enobufs));
	is_int(atomic_load(&handoff.violations), 0, "handoff: no buffer held twice, contents intact");
	is_int(atomic_load(&handoff.errors), 0, "handoff: no error but -ENOBUFS");
	is_int(atomic_load(&handoff.released), (long)THREADS * handoff.rounds,
	       "handoff: every lease released");
	is_int(bad_releases(hpool), 0, "handoff: no bad release");
	is_int(asyncpool_available(hpool), BUFFERS, "handoff: available == capacity after exit");
	/* The exited threads' caches are really back on the freelist. */
	all = calloc(BUFFERS, sizeof(*all));
	is_int(asyncpool_acquire_bulk(hpool, all, BUFFERS), 0, "handoff: all buffers on the freelist");
	asyncpool_release_bulk(all, BUFFERS);
	free(all);
	is_int(asyncpool_destroy(hpool), 0, "handoff: destroy");
	for (int i = 0; i < THREADS; i++)
		pthread_mutex_destroy(&handoff.q[i].lock);
}

/* ---- flush, destroy with populated caches, stale entries ---- */
static struct asyncpool *fpool;
static pthread_barrier_t bar;
static int other_rc[4];

/* Holds a populated cache while main tests, then uses a new pool. */
static void *cache_holder(void *arg)
{
	struct asyncpool_lease l[8];
	struct asyncpool *np;

	(void)arg;
	for (int i = 0; i < 8; i++)
		asyncpool_acquire(fpool, &l[i]);
	for (int i = 0; i < 8; i++)
		asyncpool_lease_release(&l[i]);
	pthread_barrier_wait(&bar);     /* 1: cache populated */
	pthread_barrier_wait(&bar);     /* 2: main destroyed fpool */
	/* The stale cache entry must not be used for a new pool. */
	np = make_pool(proactor, 64, 16, 4);
	other_rc[0] = asyncpool_acquire(np, &l[0]);
	asyncpool_lease_release(&l[0]);
	other_rc[1] = (int)asyncpool_available(np);
	asyncpool_cache_flush(np);
	other_rc[2] = asyncpool_destroy(np);
	return NULL;
}

static void *bulk_all(void *arg)
{
	struct asyncpool_lease *l = calloc(64, sizeof(*l));
	intptr_t rc = asyncpool_acquire_bulk(arg, l, 64);

	asyncpool_release_bulk(l, 64);
	asyncpool_cache_flush(arg);
	free(l);
	return (void *)rc;
}

static void test_flush_destroy(void)
{
	struct asyncpool_lease l[8], copy;
	pthread_t t;
	void *rc;

	fpool = make_pool(proactor, 64, 64, 16);
	for (int i = 0; i < 8; i++)
		asyncpool_acquire(fpool, &l[i]);
	for (int i = 0; i < 8; i++)
		asyncpool_lease_release(&l[i]);
	pthread_create(&t, NULL, bulk_all, fpool);
	pthread_join(t, &rc);
	/* Since 1.3 a bulk acquire takes back the other caches before it
	 * says ENOBUFS, as a single acquire always did (bulk-short-no-settle). */
	is_int((intptr_t)rc, 0, "flush: a bulk acquire on another thread takes back what this cache holds");
	is_int(asyncpool_cache_flush(fpool), 0, "cache_flush");
	pthread_create(&t, NULL, bulk_all, fpool);
	pthread_join(t, &rc);
	is_int((intptr_t)rc, 0, "flush: after it, another thread gets all 64");

	/* double release of a cached lease copy */
	asyncpool_acquire(fpool, &l[0]);
	copy = l[0];
	asyncpool_lease_release(&l[0]);
	asyncpool_lease_release(&copy);
	is_int(bad_releases(fpool), 1, "double release of a cached lease refused and counted");
	asyncpool_lease_release(&copy);
	is_int(bad_releases(fpool), 1, "the lease object itself is idempotent");
	asyncpool_cache_flush(fpool);
	{
		struct asyncpool_lease c2;

		asyncpool_acquire(fpool, &c2);
		copy = c2;
		asyncpool_lease_release(&c2);
		asyncpool_cache_flush(fpool);
		asyncpool_lease_release(&copy);
		is_int(bad_releases(fpool), 2, "release of a copy after the flush refused");
	}
	is_int(asyncpool_available(fpool), 64, "available after double releases");

	/* destroy with populated caches, in this thread and in a live one */
	pthread_barrier_init(&bar, NULL, 2);
	pthread_create(&t, NULL, cache_holder, NULL);
	pthread_barrier_wait(&bar);
	asyncpool_acquire(fpool, &l[0]);
	asyncpool_acquire(fpool, &l[1]);
	asyncpool_lease_release(&l[1]);
	is_int(asyncpool_destroy(fpool), -EBUSY, "destroy with a lease out: -EBUSY");
	asyncpool_lease_release(&l[0]);
	is_int(asyncpool_available(fpool), 64, "available after -EBUSY");
	is_int(asyncpool_destroy(fpool), 0, "destroy with two populated caches");
	pthread_barrier_wait(&bar);
	pthread_join(t, NULL);
	is_int(other_rc[0], 0, "a thread with a stale cache entry uses a new pool");
	is_int(other_rc[1], 16, "its new cache is counted");
	is_int(other_rc[2], 0, "and destroys it");
	pthread_barrier_destroy(&bar);
}

/* ---- fork: the child gets the orphaned caches of a local pool back ---- */
static void *fork_holder(void *arg)
{
	struct asyncpool_lease l[8];

	for (int i = 0; i < 8; i++)
		asyncpool_acquire(arg, &l[i]);
	for (int i = 0; i < 8; i++)
		asyncpool_lease_release(&l[i]);
	pthread_barrier_wait(&bar);
	pthread_barrier_wait(&bar);
	asyncpool_cache_flush(arg);
	return NULL;
}

static void test_fork(void)
{
	struct asyncpool *pool = make_pool(proactor, 64, 32, 8);
	struct asyncpool_lease l[32];
	pthread_t t;
	pid_t pid;
	int status = -1;

	pthread_barrier_init(&bar, NULL, 2);
	pthread_create(&t, NULL, fork_holder, pool);
	pthread_barrier_wait(&bar);
	for (int i = 0; i < 4; i++)
		asyncpool_acquire(pool, &l[i]);
	for (int i = 0; i < 4; i++)
		asyncpool_lease_release(&l[i]);
	pid = fork();
	if (pid == 0) {
		int rc = asyncpool_acquire_bulk(pool, l, 32);

		asyncpool_release_bulk(l, 32);
		_exit(rc == 0 && asyncpool_available(pool) == 32 &&
		      asyncpool_destroy(pool) == 0 ? 0 : 1);
	}
	pthread_barrier_wait(&bar);
	pthread_join(t, NULL);
	pthread_barrier_destroy(&bar);
	waitpid(pid, &status, 0);
	ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	   "fork: the child has every buffer of a local pool, orphaned caches included");
	is_int(asyncpool_available(pool), 32, "fork: the parent still has all");
	is_int(asyncpool_destroy(pool), 0, "fork: destroy");
}

/* ---- bulk ---- */
static atomic_int foreign_calls;

static void foreign_release(void *ctx, uint32_t idx)
{
	(void)ctx;
	(void)idx;
	atomic_fetch_add(&foreign_calls, 1);
}

static void test_bulk(uint32_t cache)
{
	struct asyncpool *pool = make_pool(proactor, 64, 16, cache);
	struct asyncpool *other = make_pool(proactor, 64, 16, cache);
	struct asyncpool_lease l[20], one[10], mix[6];
	const char *what = cache ? "cached" : "uncached";
	int zero = 1;

	is_int(asyncpool_acquire_bulk(NULL, l, 1), -EINVAL, "bulk %s: NULL pool", what);
	is_int(asyncpool_acquire_bulk(pool, NULL, 1), -EINVAL, "bulk %s: NULL leases", what);
	is_int(asyncpool_acquire_bulk(pool, l, 17), -EINVAL, "bulk %s: more than the capacity", what);
	is_int(asyncpool_acquire_bulk(pool, l, 0), 0, "bulk %s: n == 0", what);
	for (int i = 0; i < 10; i++)
		asyncpool_acquire(pool, &one[i]);
	asyncpool_lease_release(&one[9]);       /* one in the cache, if any */
	is_int(asyncpool_acquire_bulk(pool, l, 8), -ENOBUFS, "bulk %s: all or nothing", what);
	for (int i = 0; i < 8; i++)
		zero &= !asyncpool_lease_held(&l[i]) && l[i].span.region == NULL;
	ok(zero, "bulk %s: leases zeroed on failure", what);
	is_int(asyncpool_available(pool), 7, "bulk %s: nothing taken on failure", what);
	is_int(asyncpool_acquire_bulk(pool, l, 7), 0, "bulk %s: exactly what is left", what);
	is_int(asyncpool_available(pool), 0, "bulk %s: empty", what);
	for (int i = 0; i < 7; i++)
		for (int j = 0; j < 9; j++)
			if (l[i].buffer_index == one[j].buffer_index)
				zero = 0;
	ok(zero, "bulk %s: no buffer given twice", what);
	l[7] = l[0];                            /* a copy in the same array */
	asyncpool_release_bulk(l, 8);
	is_int(bad_releases(pool), 1, "bulk %s: duplicate in one array refused and counted", what);
	asyncpool_release_bulk(l, 8);
	is_int(bad_releases(pool), 1, "bulk %s: release_bulk idempotent per lease object", what);
	asyncpool_release_bulk(one, 9);
	is_int(asyncpool_available(pool), 16, "bulk %s: all back", what);
	is_int(asyncpool_acquire_bulk(pool, l, 16), 0, "bulk %s: the whole pool", what);
	asyncpool_release_bulk(l, 16);
	is_int(asyncpool_available(pool), 16, "bulk %s: all back again", what);

	/* leases of two pools and a foreign owner in one array */
	asyncpool_acquire(pool, &mix[0]);
	asyncpool_acquire(other, &mix[1]);
	asyncpool_acquire(other, &mix[2]);
	mix[3] = mix[0];
	mix[3].release.fn = foreign_release;
	asyncpool_acquire(pool, &mix[4]);
	memset(&mix[5], 0, sizeof(mix[5]));
	asyncpool_lease_release(&mix[0]);
	asyncpool_acquire(pool, &mix[0]);
	asyncpool_release_bulk(mix, 6);
	is_int(atomic_load(&foreign_calls), 1, "bulk %s: a foreign lease by its callback", what);
	atomic_store(&foreign_calls, 0);
	is_int(asyncpool_available(pool), 16, "bulk %s: mixed array, first pool whole", what);
	is_int(asyncpool_available(other), 16, "bulk %s: mixed array, second pool whole", what);
	is_int(bad_releases(pool) + bad_releases(other), 1, "bulk %s: no other bad release", what);
	asyncpool_release_bulk(NULL, 3);
	asyncpool_cache_flush(pool);
	asyncpool_cache_flush(other);
	is_int(asyncpool_destroy(pool), 0, "bulk %s: destroy", what);
	is_int(asyncpool_destroy(other), 0, "bulk %s: destroy other", what);
}

/*
 * A bulk acquire larger than the cache, from an empty cache, pops
 * straight from the freelist: it must still leave its cache, or a
 * flush of every cache (which waits for each owner to be out of its
 * cache) spins until that thread next uses its cache.  A thread makes
 * the bulk acquire and then waits, its cache untouched, while this one
 * flushes; the alarm turns the spin into a failure.
 */
struct beyond {
	struct asyncpool *pool;
	bool tokens;
	int rc;
	struct asyncpool_lease l[12];
	uint64_t t[12];
	pthread_barrier_t acquired, flushed;
};

static void *beyond_worker(void *arg)
{
	struct beyond *b = arg;

	asyncpool_cache_flush(b->pool);         /* its cache exists and is empty */
	b->rc = b->tokens ? asyncpool_acquire_tokens(b->pool, b->t, 12) :
			    asyncpool_acquire_bulk(b->pool, b->l, 12);
	pthread_barrier_wait(&b->acquired);
	pthread_barrier_wait(&b->flushed);
	if (b->tokens)
		b->rc |= asyncpool_release_tokens(b->pool, b->t, 12);
	else
		asyncpool_release_bulk(b->l, 12);
	return NULL;
}

static void test_bulk_beyond_cache(bool tokens)
{
	struct beyond b = { .pool = make_pool(proactor, 64, 16, 4), .tokens = tokens };
	const char *what = tokens ? "tokens" : "leases";
	struct asyncpool_lease mine;
	pthread_t t;

	pthread_barrier_init(&b.acquired, NULL, 2);
	pthread_barrier_init(&b.flushed, NULL, 2);
	if (pthread_create(&t, NULL, beyond_worker, &b))
		bail_out("pthread_create");
	pthread_barrier_wait(&b.acquired);
	is_int(b.rc, 0, "bulk of %s beyond the cache: 12 acquired", what);
	is_int(asyncpool_acquire(b.pool, &mine), 0, "bulk of %s beyond the cache: one more", what);
	asyncpool_lease_release(&mine);         /* into this thread's cache */
	tap_watchdog(30);
	is_int(asyncpool_cache_flush_all(b.pool), 0,
	       "bulk of %s beyond the cache: flush_all returns", what);
	tap_watchdog(0);
	pthread_barrier_wait(&b.flushed);
	pthread_join(t, NULL);
	is_int(b.rc, 0, "bulk of %s beyond the cache: released", what);
	asyncpool_cache_flush(b.pool);
	is_int(asyncpool_available(b.pool), 16, "bulk of %s beyond the cache: all 16 back", what);
	is_int(bad_releases(b.pool), 0, "bulk of %s beyond the cache: no bad release", what);
	is_int(asyncpool_destroy(b.pool), 0, "bulk of %s beyond the cache: destroy", what);
	pthread_barrier_destroy(&b.acquired);
	pthread_barrier_destroy(&b.flushed);
}

/*
 * A flusher waits for an owner inside its cache (pool_cache.h): the
 * flusher raises bypass, then waits while the owner's busy flag is set.
 * Made certain with the stall points of the test-hook build: the owner
 * stops inside its cache (AP_TS_OWNER_INSIDE, a release on the slow
 * path) until the flusher has been seen waiting for it
 * (AP_TS_FLUSH_WAITS) or has returned.  It must never have returned: a
 * flusher that takes a cache whose owner is inside races with the
 * owner's plain loads and stores (tests/mutants/flusher-no-wait).
 */
static struct {
	struct asyncpool *pool;
	uint64_t token;
	_Atomic int inside, waited, flushed, returned_inside;
	pthread_t owner;
} fw;

static void fw_stall(enum ap_test_stall p)
{
	if (p == AP_TS_FLUSH_WAITS) {
		atomic_store(&fw.waited, 1);
		return;
	}
	if (p != AP_TS_OWNER_INSIDE || !pthread_equal(pthread_self(), fw.owner))
		return;
	atomic_store(&fw.inside, 1);
	while (!atomic_load(&fw.waited) && !atomic_load(&fw.flushed))
		sched_yield();
	atomic_store(&fw.returned_inside, atomic_load(&fw.flushed));
}

static void *fw_owner(void *arg)
{
	struct asyncpool_lease l;
	int rc;

	(void)arg;
	/* its cache, last used; then a release that takes the slow path
	 * (a stale token: refused inside the cache) */
	if (asyncpool_acquire(fw.pool, &l))
		return (void *)1;
	fw.token = asyncpool_lease_token(&l);
	asyncpool_lease_release(&l);
	rc = asyncpool_release_token(fw.pool, fw.token);
	return (void *)(intptr_t)(rc == -ESTALE ? 0 : 2);
}

static void test_flusher_waits(void)
{
	struct asyncpool *pool = make_pool(proactor, 64, 16, 4);
	struct asyncpool_lease mine;
	void *res;

	fw.pool = pool;
	/* a cache with a buffer in it, so that the flush has work */
	is_int(asyncpool_acquire(pool, &mine), 0, "flusher waits: acquire");
	asyncpool_lease_release(&mine);
	ap_test_hook_stall = fw_stall;
	if (pthread_create(&fw.owner, NULL, fw_owner, NULL))
		bail_out("pthread_create");
	while (!atomic_load(&fw.inside))
		sched_yield();
	is_int(asyncpool_cache_flush_all(pool), 0, "flusher waits: flush_all returns");
	atomic_store(&fw.flushed, 1);
	pthread_join(fw.owner, &res);
	ap_test_hook_stall = NULL;
	is_int((intptr_t)res, 0, "flusher waits: the owner's stale release was refused inside its cache");
	ok(atomic_load(&fw.waited), "flusher waits: the flusher waited for the owner inside its cache");
	ok(!atomic_load(&fw.returned_inside),
	   "flusher waits: flush_all did not return while the owner was inside its cache");
	is_int(asyncpool_check(pool), 0, "flusher waits: the freelist audit is clean");
	is_int(asyncpool_available(pool), 16, "flusher waits: every buffer back");
	is_int(asyncpool_destroy(pool), 0, "flusher waits: destroy");
}

/*
 * The same for the header's window (inline.h, __asyncpool_enter_pool):
 * its busy store is what a flusher waits on, and the inline code is
 * compiled into this program, not the library.  A thread's inline
 * release of a buffer that another thread's cache lent is held inside
 * the window, after the gather's checks (the header's hook
 * __ASYNCPOOL_TEST_GATHER_CHECKED), until the flusher has been seen
 * waiting for it or has returned.  It must never have returned: a
 * flusher that does not wait settles the outbox that the held release
 * is about to write, and the token lands in it after the settle
 * (tests/mutants/inline-enter-no-busy; issue 54, kind 8: no memory
 * model needed, the window is held).
 */
static struct {
	struct asyncpool *pool;
	uint64_t token, first;
	int rc, first_rc;
	_Atomic int inside, waited, flushed, returned_inside;
} fi;
static __thread bool stop_gathered;

void inline_gathered(void)
{
	if (!stop_gathered)
		return;
	stop_gathered = false;
	atomic_store(&fi.inside, 1);
	while (!atomic_load(&fi.waited) && !atomic_load(&fi.flushed))
		sched_yield();
	atomic_store(&fi.returned_inside, atomic_load(&fi.flushed));
}

static void fi_stall(enum ap_test_stall p)
{
	if (p == AP_TS_FLUSH_WAITS)
		atomic_store(&fi.waited, 1);
}

static void *fi_releaser(void *arg)
{
	uint64_t t;

	(void)arg;
	/* this thread's cache of the pool, used last; its outbox given to
	 * the owner by a first release of the owner's, the library's */
	if (asyncpool_acquire_tokens(fi.pool, &t, 1) == 0)
		(void)asyncpool_release_token(fi.pool, t);
	fi.first_rc = asyncpool_release_token(fi.pool, fi.first);
	stop_gathered = true;
	fi.rc = asyncpool_release_token(fi.pool, fi.token);
	stop_gathered = false;
	return NULL;    /* its exit sends what it gathered */
}

static void test_flusher_waits_inline(void)
{
	struct asyncpool_region *r = make_region(proactor, 64, 16, ASYNCPOOL_ACCESS_READ);
	pthread_t t;

	memset(&fi, 0, sizeof(fi));
	if (asyncpool_create(r, &fi.pool) || asyncpool_set_cache(fi.pool, 4))
		bail_out("create");
	asyncpool_region_unref(r);
	/* two buffers this thread's cache lends */
	if (asyncpool_acquire_tokens(fi.pool, &fi.token, 1) ||
	    asyncpool_acquire_tokens(fi.pool, &fi.first, 1))
		bail_out("acquire");
	ap_test_hook_stall = fi_stall;
	if (pthread_create(&t, NULL, fi_releaser, NULL))
		bail_out("pthread_create");
	while (!atomic_load(&fi.inside))
		sched_yield();
	is_int(asyncpool_cache_flush_all(fi.pool), 0, "inline window: flush_all returns");
	atomic_store(&fi.flushed, 1);
	pthread_join(t, NULL);
	ap_test_hook_stall = NULL;
	is_int(fi.first_rc, 0, "inline window: the outbox's first release");
	is_int(fi.rc, 0, "inline window: the held release was gathered");
	ok(atomic_load(&fi.waited), "inline window: the flusher waited for the release inside it");
	ok(!atomic_load(&fi.returned_inside),
	   "inline window: flush_all did not return while the release was inside the window");
	is_int(asyncpool_cache_flush_all(fi.pool), 0, "inline window: flush_all again");
	is_int(asyncpool_check(fi.pool), 0, "inline window: the freelist audit is clean");
	is_int(asyncpool_available(fi.pool), 16, "inline window: every buffer back");
	is_int(asyncpool_destroy(fi.pool), 0, "inline window: destroy");
}

/*
 * A shared pool's cache hands out only a buffer whose word still says
 * CACHED by this process at the entry's generation: a word a peer
 * overwrote (memory shared with another process is untrusted) is
 * dropped and counted, never leased (buffer_state.h).
 */
static void test_cache_defence(void)
{
	struct asyncpool_region *r = make_region(proactor, 64, 16, ASYNCPOOL_ACCESS_READ);
	struct asyncpool_stats st;
	struct asyncpool_lease l, l2;
	struct asyncpool *pool;
	size_t size;
	uint32_t idx;
	void *mem;

	if (asyncpool_shared_storage_size(16, &size))
		bail_out("storage size");
	mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED || asyncpool_create_shared(mem, size, r, &pool) ||
	    asyncpool_set_cache(pool, 4))
		bail_out("shared pool");
	is_int(asyncpool_acquire(pool, &l), 0, "cache defence: acquire");
	idx = l.buffer_index;
	asyncpool_lease_release(&l);            /* into this thread's cache */
	/* a peer takes the word: LEASED by attachment 5 (holder 6) */
	atomic_store(&pool->fl.state[idx], AP_W_MAKE(AP_K_LEASED, 6, 77));
	is_int(asyncpool_acquire(pool, &l2), 0, "cache defence: acquire again");
	ok(l2.buffer_index != idx, "cache defence: the buffer a peer took is not handed out");
	st.size = sizeof(st);
	asyncpool_stats(pool, &st);
	is_int(st.corruptions, 1, "cache defence: one corruption counted");
	is_int(AP_W_HOLDER(atomic_load(&pool->fl.state[idx])), 6, "cache defence: the peer's word is untouched");
	/* and a flush links only what is still cached by this process */
	idx = l2.buffer_index;
	asyncpool_lease_release(&l2);           /* into this thread's cache */
	atomic_store(&pool->fl.state[idx], AP_W_MAKE(AP_K_LEASED, 6, 78));
	is_int(asyncpool_cache_flush(pool), 0, "cache defence: flush");
	asyncpool_stats(pool, &st);
	is_int(st.corruptions, 2, "cache defence: the flush dropped the peer's buffer and counted it");
	is_int(atomic_load(&pool->fl.state[idx]), AP_W_MAKE(AP_K_LEASED, 6, 78),
	       "cache defence: the flush left the peer's word alone");
	is_int(asyncpool_destroy(pool), 0, "cache defence: destroy");
	munmap(mem, size);
	asyncpool_region_unref(r);
}

int main(void)
{
	if (asyncpool_proactor_create_memory(&proactor))
		bail_out("proactor");
	test_options();
	test_bulk(0);
	test_bulk(8);
	test_bulk_beyond_cache(false);
	test_bulk_beyond_cache(true);
	test_flusher_waits();
	test_flusher_waits_inline();
	test_cache_defence();
	test_flush_destroy();
	test_fork();
	test_handoff();
	is_int(asyncpool_proactor_destroy(proactor), 0, "proactor destroy");
	return done_testing();
}
