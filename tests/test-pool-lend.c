/* SPDX-License-Identifier: MIT */
/*
 * A local pool's caches lend buffers: a buffer handed out of a cache
 * keeps its CACHED state word, one generation behind its lease
 * (lib/buffer_state.h).  What must still hold:
 * - a release or adoption of a lent lease works by token and by index;
 * - a release by index of a buffer in a cache or in the depot is
 *   refused (the caches are asked), and so is a stale token;
 * - the audit counts lent buffers as out, across threads that lend and
 *   release, after those threads exit, and in a forked child;
 * - destroy refuses while one is lent.
 *
 * 64 buffers, caches of 16 (batches of 8).
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

#define BUFFERS 64
#define CACHE   16

static struct asyncpool_proactor *proactor;

static uint64_t bad_count(struct asyncpool *pool)
{
	struct asyncpool_stats st = { .size = sizeof(st) };

	if (asyncpool_stats(pool, &st))
		bail_out("stats");
	return st.bad_releases;
}

/* Acquire every buffer, then release them all, in this thread. */
static int cycle_all(struct asyncpool *pool)
{
	struct asyncpool_lease l[BUFFERS];
	int n = 0;

	while (n < BUFFERS && asyncpool_acquire(pool, &l[n]) == 0)
		n++;
	for (int i = 0; i < n; i++)
		asyncpool_lease_release(&l[i]);
	return n;
}

static void test_single(void)
{
	struct asyncpool *pool = make_pool(proactor, 64, BUFFERS, CACHE);
	struct asyncpool_lease l, copy, a;
	uint64_t bad = bad_count(pool), fen, token;
	uint32_t idx, gen;
	int refused = 0;

	is_int(asyncpool_acquire(pool, &l), 0, "acquire: lent from the cache");
	idx = l.buffer_index;
	gen = l.generation;
	token = asyncpool_lease_token(&l);
	is_int(asyncpool_check(pool), 0, "the audit counts a lent buffer as out");
	is_int((int)asyncpool_available(pool), BUFFERS - 1, "a lent buffer is not available");
	is_int(asyncpool_destroy(pool), -EBUSY, "destroy refuses while a buffer is lent");

	copy = l;
	asyncpool_lease_release(&l);
	is_int((int)asyncpool_available(pool), BUFFERS, "released into the cache");
	is_int(asyncpool_release_token(pool, token), -ESTALE, "its token again: stale");
	asyncpool_lease_release(&copy);
	is_int((int)(bad_count(pool) - bad), 2, "a stale token and a stale copy: counted");
	is_int(asyncpool_release_index(pool, idx), -EALREADY,
	       "by index, a buffer in the cache: refused");
	is_int(asyncpool_lease_adopt(pool, idx, &a), -EALREADY,
	       "adopt by index, a buffer in the cache: refused");
	is_int((int)asyncpool_available(pool), BUFFERS, "nothing changed");
	is_int(asyncpool_check(pool), 0, "consistent");

	is_int(asyncpool_acquire(pool, &l), 0, "acquire again");
	is_int((int)l.buffer_index, (int)idx, "the top of the cache");
	ok(l.generation != gen && l.generation != 0, "a new generation");
	is_int(asyncpool_release_index(pool, idx), 0, "by index, a lent buffer: released");
	is_int((int)asyncpool_available(pool), BUFFERS, "back");
	is_int(asyncpool_check(pool), 0, "the audit after a lent buffer went to the freelist");
	asyncpool_lease_release(&l);
	is_int(asyncpool_release_index(pool, idx), -EALREADY, "by index once more: refused");

	is_int(asyncpool_acquire(pool, &l), 0, "acquire a third time");
	is_int(asyncpool_lease_adopt(pool, l.buffer_index, &a), 0, "adopt a lent buffer by index");
	ok(a.generation != l.generation && a.generation != 0, "in a new generation");
	is_int(asyncpool_lease_adopt_token(pool, asyncpool_lease_token(&l), &copy), -ESTALE,
	       "the giver's token: stale once adopted");
	is_int(asyncpool_lease_adopt_token(pool, asyncpool_lease_token(&a), &copy), 0,
	       "adopt the adopter's token");
	ok(copy.generation != a.generation && copy.generation != 0, "a new generation again");
	bad = bad_count(pool);
	fen = fenced_releases(pool);
	asyncpool_lease_release(&a);
	asyncpool_lease_release(&l);
	/* The last adoption fenced a's; l's, two adoptions on, is a stale copy. */
	is_int((int)(bad_count(pool) - bad), 1, "the two older leases: the oldest a bad release");
	is_int((int)(fenced_releases(pool) - fen), 1, "the two older leases: a's fenced");
	is_int((int)asyncpool_available(pool), BUFFERS - 1, "the adopter keeps the buffer");
	asyncpool_lease_release(&copy);
	is_int((int)asyncpool_available(pool), BUFFERS, "the adopter releases it");
	is_int(asyncpool_check(pool), 0, "the audit after a lent buffer was adopted");
	is_int(asyncpool_release_token(pool, asyncpool_lease_token(&l)), -ESTALE,
	       "a second release of it: stale");

	/* 16 in this thread's cache, 48 in the depot: none by index. */
	is_int(cycle_all(pool), BUFFERS, "every buffer once");
	bad = bad_count(pool);
	for (uint32_t i = 0; i < BUFFERS; i++)
		refused += asyncpool_release_index(pool, i) == -EALREADY;
	is_int(refused, BUFFERS, "by index, each buffer in the cache or the depot: refused");
	is_int((int)(bad_count(pool) - bad), BUFFERS, "and counted");
	is_int((int)asyncpool_available(pool), BUFFERS, "nothing moved");
	is_int(asyncpool_check(pool), 0, "consistent");
	is_int(asyncpool_destroy(pool), 0, "destroy");
}

struct releaser {
	struct asyncpool_lease *l;
	int n;
};

static void *release_all(void *arg)
{
	struct releaser *r = arg;

	for (int i = 0; i < r->n; i++)
		asyncpool_lease_release(&r->l[i]);
	return NULL;
}

/* Lent by this thread, released by another, which then exits. */
static void test_threads(void)
{
	struct asyncpool *pool = make_pool(proactor, 64, BUFFERS, CACHE);
	struct asyncpool_lease l[48];
	struct releaser r = { l, 48 };
	pthread_t t;
	int status, got = 0;
	pid_t pid;

	for (int i = 0; i < 48; i++)
		got += asyncpool_acquire(pool, &l[i]) == 0;
	is_int(got, 48, "48 lent");
	if (pthread_create(&t, NULL, release_all, &r) || pthread_join(t, NULL))
		bail_out("pthread");
	is_int((int)asyncpool_available(pool), BUFFERS, "released by a thread that has exited");
	is_int(asyncpool_check(pool), 0, "the audit after the releaser's cache is gone");

	for (int i = 0; i < 8; i++)
		got += asyncpool_acquire(pool, &l[i]) == 0;
	is_int(got, 56, "8 more lent");
	fflush(stdout);
	pid = fork_or_bail();
	if (pid == 0) {
		bool fine = asyncpool_check(pool) == 0;

		for (int i = 0; i < 8; i++)
			asyncpool_lease_release(&l[i]);
		_exit(fine && asyncpool_check(pool) == 0 &&
		      asyncpool_available(pool) == BUFFERS ? 0 : 1);
	}
	is_int(waitpid(pid, &status, 0), pid, "fork: child reaped");
	ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	   "fork: the child's audit counts the lent buffers, and after it releases them");
	for (int i = 0; i < 8; i++)
		asyncpool_lease_release(&l[i]);
	is_int(asyncpool_check(pool), 0, "consistent");
	is_int(asyncpool_destroy(pool), 0, "destroy");
}

int main(void)
{
	if (asyncpool_proactor_create_memory(&proactor))
		bail_out("proactor");
	test_single();
	test_threads();
	is_int(asyncpool_proactor_destroy(proactor), 0, "proactor destroy");
	return done_testing();
}
