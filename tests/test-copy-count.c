/* SPDX-License-Identifier: MIT */
/*
 * bad_releases counts every refused copy, exactly, under threads (issue
 * 36 item 1).  A local pool, 2 and 8 threads, no cache (the threads lend:
 * pool_lend.c) and a cache of 16: each thread acquires a buffer, copies
 * the lease, releases one of the two and hands the other to a random
 * thread's mailbox (its own included), whose thread releases it later
 * (by lease, by token or in a bulk).  Half the rounds hand over the copy
 * before the original's release, so that the two race.  Of each pair
 * exactly one is taken, whatever the path (the owner's own, an outbox to
 * another owner's inbox, an orphan's once its thread exited: main
 * releases what the threads left), so at the end bad_releases moved by
 * exactly the number of pairs, fenced_releases not at all, every buffer
 * is back and the audit finds the pool whole.  The reviewer saw 45% of
 * the copies uncounted with two threads (not reproduced here, on 1.3.4
 * or since); a refusal dropped on the owner's drain
 * (tests/mutants/owner-drain-uncounted) or on the sender's early
 * refusal (tests/mutants/owner-release-stale-uncounted) shows here.
 * Pairs per thread: stress_iterations(100000).
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <asyncpool.h>
#include "tap.h"
#include "testutil.h"

#define N 256
#define THREADS_MAX 8
#define BOX 64          /* copies a mailbox holds before its sender releases one */

struct mailbox {
	pthread_mutex_t lock;
	struct asyncpool_lease l[BOX];
	unsigned n;
};

static struct asyncpool *pool;
static struct mailbox box[THREADS_MAX];
static unsigned threads;
static long pairs;
static atomic_long handed;

/* Release copy c the way k says: lease, token, or a bulk of one. */
static void release_copy(struct asyncpool_lease *c, unsigned k)
{
	switch (k % 3) {
	case 0:
		asyncpool_lease_release(c);
		break;
	case 1:
		(void)asyncpool_release_token(pool, asyncpool_lease_token(c));
		c->release.fn = NULL;
		break;
	default:
		(void)asyncpool_release_bulk(c, 1);
		break;
	}
}

/* Release every copy in mailbox i: how many. */
static unsigned empty_box(unsigned i)
{
	struct asyncpool_lease l[BOX];
	unsigned n;

	pthread_mutex_lock(&box[i].lock);
	n = box[i].n;
	memcpy(l, box[i].l, n * sizeof(l[0]));
	box[i].n = 0;
	pthread_mutex_unlock(&box[i].lock);
	for (unsigned j = 0; j < n; j++)
		release_copy(&l[j], j);
	return n;
}

/* Copy c into mailbox i; a full one gives back its oldest first, here. */
static void hand(unsigned i, const struct asyncpool_lease *c, unsigned k)
{
	struct asyncpool_lease old;
	bool full;

	pthread_mutex_lock(&box[i].lock);
	full = box[i].n == BOX;
	if (full)
		old = box[i].l[0], memmove(&box[i].l[0], &box[i].l[1], (BOX - 1) * sizeof(old)),
		box[i].n--;
	box[i].l[box[i].n++] = *c;
	pthread_mutex_unlock(&box[i].lock);
	atomic_fetch_add_explicit(&handed, 1, memory_order_relaxed);
	if (full)
		release_copy(&old, k);
}

static void *worker(void *arg)
{
	unsigned me = (unsigned)(uintptr_t)arg, seed = me * 7919u + 1;

	for (long it = 0; it < pairs; it++) {
		struct asyncpool_lease l, c;
		unsigned to = (unsigned)rand_r(&seed) % threads, k = (unsigned)rand_r(&seed);

		if (asyncpool_acquire(pool, &l)) {
			empty_box(me);
			it--;
			continue;
		}
		c = l;
		if (k & 1) {
			hand(to, &c, k >> 1);   /* before: the copy races the original */
			asyncpool_lease_release(&l);
		} else {
			asyncpool_lease_release(&l);
			hand(to, &c, k >> 1);
		}
		if ((it & 7) == 0)
			empty_box(me);
	}
	return NULL;
}

static void run(unsigned nt, uint32_t cache)
{
	struct asyncpool_options o = { .size = sizeof(o), .cache_size = cache };
	struct asyncpool_region *r;
	struct asyncpool_stats st;
	pthread_t t[THREADS_MAX];
	struct asyncpool_proactor *p;

	if (asyncpool_proactor_create_memory(&p))
		bail_out("proactor");
	r = make_region(p, 64, N, ASYNCPOOL_ACCESS_READ);
	if (asyncpool_create_opts(r, &o, &pool))
		bail_out("create_opts");
	asyncpool_region_unref(r);
	threads = nt;
	atomic_store(&handed, 0);
	for (unsigned i = 0; i < nt; i++)
		box[i].n = 0;
	for (unsigned i = 0; i < nt; i++)
		if (pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i))
			bail_out("pthread_create");
	for (unsigned i = 0; i < nt; i++)
		pthread_join(t[i], NULL);
	/* What the exited threads left: their owners are orphans now. */
	for (unsigned i = 0; i < nt; i++)
		empty_box(i);
	is_int(asyncpool_cache_flush_all(pool) >= 0, 1, "%u threads, cache %u: flush_all", nt,
	       cache);
	memset(&st, 0, sizeof(st));
	st.size = sizeof(st);
	is_int(asyncpool_stats(pool, &st), 0, "%u threads, cache %u: stats", nt, cache);
	is_int(atomic_load(&handed), nt * pairs, "%u threads, cache %u: %ld pairs", nt, cache,
	       nt * pairs);
	is_int(st.bad_releases, nt * pairs,
	       "%u threads, cache %u: bad_releases counts every refused copy, exactly", nt, cache);
	is_int(st.fenced_releases, 0, "%u threads, cache %u: no fenced release", nt, cache);
	is_int(asyncpool_available(pool), N, "%u threads, cache %u: every buffer back", nt, cache);
	is_int(asyncpool_check(pool), 0, "%u threads, cache %u: the audit finds the pool whole", nt,
	       cache);
	asyncpool_destroy(pool);
	asyncpool_proactor_destroy(p);
}

int main(void)
{
	static const unsigned nts[] = { 2, 8 };
	static const uint32_t caches[] = { 0, 16 };

	pairs = stress_iterations(100000);
	plan(4 * 7);
	tap_watchdog(0);
	for (unsigned i = 0; i < THREADS_MAX; i++)
		pthread_mutex_init(&box[i].lock, NULL);
	for (unsigned a = 0; a < 2; a++)
		for (unsigned b = 0; b < 2; b++)
			run(nts[a], caches[b]);
	return done_testing();
}
