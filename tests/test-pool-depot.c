/* SPDX-License-Identifier: MIT */
/*
 * The depot of a local pool with caches (lib/pool_depot.c): batches a
 * full cache hands on are counted as available and by the audit, taken
 * by other threads' single and bulk acquires, given back by destroy and
 * seen by a forked child.
 *
 * 64 buffers, caches of 16 (batches of 8): one thread acquiring all 64
 * and releasing them leaves 16 in its cache and 48 in the depot (6 of
 * its 8 slots), none on the freelist.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <asyncpool.h>
#include "tap.h"
#include "testutil.h"
#include "hooks.h"

#define BUFFERS 64
#define CACHE   16

static struct asyncpool_proactor *proactor;

/* Acquire every buffer one by one, then release them all: how many it got
 * and whether they were all different. */
static int cycle_all(struct asyncpool *pool, bool *distinct)
{
	struct asyncpool_lease l[BUFFERS + 1];
	unsigned char seen[BUFFERS] = { 0 };
	int n = 0;

	*distinct = true;
	while (n < BUFFERS + 1 && asyncpool_acquire(pool, &l[n]) == 0) {
		if (l[n].buffer_index >= BUFFERS || seen[l[n].buffer_index]++)
			*distinct = false;
		n++;
	}
	for (int i = 0; i < n; i++)
		asyncpool_lease_release(&l[i]);
	return n;
}

struct cycle {
	struct asyncpool *pool;
	int got;
	bool distinct;
	int bulk_rc;
	bool bulk;
};

/* In a thread of its own (its own, empty, cache): a cycle, or a bulk
 * acquire of every buffer. */
static void *cycle_thread(void *arg)
{
	struct cycle *c = arg;

	if (c->bulk) {
		struct asyncpool_lease l[BUFFERS];

		c->bulk_rc = asyncpool_acquire_bulk(c->pool, l, BUFFERS);
		if (c->bulk_rc == 0)
			asyncpool_release_bulk(l, BUFFERS);
	} else {
		c->got = cycle_all(c->pool, &c->distinct);
	}
	return NULL;
}

static void in_thread(struct cycle *c)
{
	pthread_t t;

	if (pthread_create(&t, NULL, cycle_thread, c) || pthread_join(t, NULL))
		bail_out("pthread");
}

static void test_depot(void)
{
	struct asyncpool *pool = make_pool(proactor, 64, BUFFERS, CACHE);
	struct cycle c = { .pool = pool };
	bool distinct;
	int status;
	pid_t pid;

	is_int(cycle_all(pool, &distinct), BUFFERS, "one thread acquires every buffer");
	ok(distinct, "each once");
	/* 16 in this thread's cache, 48 in the depot, the freelist empty. */
	is_int((int)asyncpool_available(pool), BUFFERS, "available counts what the depot holds");
	is_int(asyncpool_check(pool), 0, "the audit counts the depot's buffers as cached");

	in_thread(&c);
	is_int(c.got, BUFFERS, "another thread acquires every buffer: the depot's first");
	ok(c.distinct, "each once");
	is_int(asyncpool_check(pool), 0, "consistent after the other thread's cycle");

	/* The other thread left 48 in the depot and its cache's 16 on the
	 * freelist: a bulk acquire of all 64 needs the depot's. */
	c.bulk = true;
	in_thread(&c);
	is_int(c.bulk_rc, 0, "a bulk acquire of every buffer takes the depot's too");
	is_int((int)asyncpool_available(pool), BUFFERS, "all available after the bulk");
	is_int(asyncpool_check(pool), 0, "consistent after the bulk");

	/* A child has a copy of the depot. */
	fflush(stdout);
	pid = fork_or_bail();
	if (pid == 0) {
		int got = cycle_all(pool, &distinct);

		_exit(got == BUFFERS && distinct && asyncpool_check(pool) == 0 ? 0 : 1);
	}
	is_int(waitpid(pid, &status, 0), pid, "fork: child reaped");
	ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	   "fork: the child acquires every buffer once, the depot's included");

	is_int(asyncpool_cache_flush_all(pool), 0, "flush_all");
	is_int((int)asyncpool_available(pool), BUFFERS, "all available after flush_all");
	is_int(asyncpool_check(pool), 0, "consistent after flush_all");

	/* Fill the depot again, then destroy: nothing is out. */
	is_int(cycle_all(pool, &distinct), BUFFERS, "a last cycle");
	is_int(asyncpool_destroy(pool), 0, "destroy with buffers in the depot: all are back");
}

/*
 * A depot batch taken into a cache is stamped with the taker's owner id,
 * in the word and in the hints (pool_cache.c, cache_own): only the owner
 * decides a lent buffer's release, and a release on another thread is
 * sent to the owner the hints name.  One thread leaves 48 in the depot;
 * another, whose cache is empty, acquires one: its cache takes a batch
 * of 8 from the depot, lends one and keeps 7, and each of the 8 must
 * name it (word: CACHED, its id, the entry's generation; owner_of: its
 * id; released: the generation before).  tests/mutants/depot-stamp-*
 */
struct stamp {
	struct asyncpool *pool;
	int n, words, hints;
};

static void stamp_check(struct stamp *s, const struct ap_cache *c, uint32_t idx, uint32_t g)
{
	uint64_t w = ap_state_load(&s->pool->fl.state[idx]);

	s->n++;
	s->words += AP_W_KIND(w) == AP_K_CACHED && AP_W_OWNER(w) == c->id && AP_W_GEN(w) == g;
	s->hints += atomic_load(&s->pool->owner_of[idx]) == c->id &&
		    atomic_load(&s->pool->released[idx]) == ap_gen_prev(g);
}

static void *stamp_thread(void *arg)
{
	struct stamp *s = arg;
	struct asyncpool_lease l;
	struct ap_cache *c;

	if (asyncpool_acquire(s->pool, &l))
		return NULL;
	c = ap_cache_of(s->pool);
	stamp_check(s, c, l.buffer_index, l.generation);
	for (uint32_t j = 0; j < ap_cache_n(c); j++)
		stamp_check(s, c, ap_cache_idx(c, j), ap_cache_gen(c, j));
	asyncpool_lease_release(&l);
	return NULL;
}

static void test_depot_stamp(void)
{
	struct asyncpool *pool = make_pool(proactor, 64, BUFFERS, CACHE);
	struct stamp s = { .pool = pool };
	bool distinct;
	pthread_t t;

	is_int(cycle_all(pool, &distinct), BUFFERS, "stamp: one thread fills the depot");
	if (pthread_create(&t, NULL, stamp_thread, &s) || pthread_join(t, NULL))
		bail_out("pthread");
	is_int(s.n, (int)pool->cache_batch, "stamp: another thread's cache took one depot batch");
	is_int(s.words, s.n, "stamp: each word names the taker, at its entry's generation");
	is_int(s.hints, s.n, "stamp: each hint names the taker, released the generation before");
	is_int(asyncpool_check(pool), 0, "stamp: consistent");
	is_int(asyncpool_destroy(pool), 0, "stamp: destroy");
}

/*
 * A waiter gets what the depot holds: with the freelist emptied first
 * (its 16 buffers popped through the test hooks), the depot's batches
 * are the only buffers left, and acquire_wait must find them.
 */
static void test_wait(void)
{
	struct asyncpool *pool = make_pool(proactor, 64, BUFFERS, CACHE);
	struct asyncpool_lease l;
	struct cycle c = { .pool = pool };
	uint32_t idx[BUFFERS], gen, n = 0;
	bool distinct, mine = false;
	int rc;

	/* In another thread, so that this one's cache stays empty: 48 in
	 * the depot, 16 on the freelist (the thread's cache, at its exit). */
	in_thread(&c);
	is_int(c.got, BUFFERS, "a thread cycles every buffer");
	is_int(ap_depot_count(pool), BUFFERS - CACHE, "the depot holds 48");
	while (n < BUFFERS && ap_fl_pop(&pool->fl, AP_K_LEASED, &idx[n], &gen) == 0)
		n++;
	is_int(n, CACHE, "the freelist's 16 taken: it is empty");
	is_int(asyncpool_acquire_wait(pool, &l, 1000000000), 0, "acquire_wait gets one");
	for (uint32_t j = 0; j < n; j++)
		mine |= idx[j] == l.buffer_index;
	ok(!mine && l.buffer_index < BUFFERS, "from the depot (buffer %u)", l.buffer_index);
	asyncpool_lease_release(&l);
	rc = 0;
	for (uint32_t j = 0; j < n; j++)
		rc |= asyncpool_release_index(pool, idx[j]);
	is_int(rc, 0, "the freelist's 16 back by index");
	is_int(cycle_all(pool, &distinct), BUFFERS, "and every buffer is still there");
	is_int(asyncpool_destroy(pool), 0, "destroy");
}

int main(void)
{
	if (asyncpool_proactor_create_memory(&proactor))
		bail_out("proactor");
	test_depot();
	test_depot_stamp();
	test_wait();
	is_int(asyncpool_proactor_destroy(proactor), 0, "proactor destroy");
	return done_testing();
}
