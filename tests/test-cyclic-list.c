/* SPDX-License-Identifier: MIT */
/*
 * A freelist that a peer made cyclic (issue 14,
 * finding 9).  A forked peer rewrites link[] of a shared pool (offset
 * 256 + 8 N of the layout, asyncpool-shared(7)) into a cycle; then
 * asyncpool_available() and the available field of asyncpool_stats()
 * stay within the capacity (since issue 15 they read a depth in O(1),
 * which cannot see a cycle), acquires must get the distinct buffers on
 * the list and then -EUCLEAN, counted as a corruption, and
 * asyncpool_check() must say -EUCLEAN.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <asyncpool.h>
#include "tap.h"
#include "testutil.h"
#include "shared-common.h"

#define N 16
#define LINK_OFFSET (256 + 8 * N)   /* 8 * N is a multiple of 64 */

static const struct {
	const char *what;
	uint32_t at, to;        /* next[at] = to */
	uint32_t distinct;      /* buffers on the list */
} cycles[] = {
	{ "the head links to itself", 0, 0, 1 },
	{ "0 -> 1 -> 2 -> 3 -> 1", 3, 1, 4 },
	{ "the last buffer links to the first (a ring of all)", N - 1, 0, N },
};

/* The peer: one store into the shared mapping it inherited. */
static void peer_rewrite(void *base, uint32_t at, uint32_t to)
{
	pid_t pid;

	pid = fork_or_bail();
	if (pid == 0) {
		/* link[] (layout v3): after state[], 8 * N bytes from 256 */
		uint32_t *link = (uint32_t *)((char *)base + LINK_OFFSET);

		__atomic_store_n(&link[at], to, __ATOMIC_RELAXED);
		_exit(0);
	}
	if (wait_peer(pid) != 0)
		bail_out("peer");
}

/* Acquire until the pool fails: how many it gave, or -1 for anything but -EUCLEAN. */
static int acquire_all(struct asyncpool *pool)
{
	struct asyncpool_lease l;
	int n = 0, rc;

	while ((rc = asyncpool_acquire(pool, &l)) == 0 && n <= N)
		n++;
	return rc == -EUCLEAN ? n : -1;
}

int main(void)
{
	for (size_t c = 0; c < sizeof(cycles) / sizeof(cycles[0]); c++) {
		struct asyncpool_shared_options o;
		struct asyncpool_shared *sp;
		struct asyncpool *pool;
		struct asyncpool_stats st = { .size = sizeof(st) };

		memset(&o, 0, sizeof(o));
		o.size = sizeof(o);
		o.buffer_size = 64;
		o.buffer_count = N;
		if (asyncpool_shared_create(&o, &sp))
			bail_out("shared_create");
		pool = asyncpool_shared_pool(sp);
		is_int(asyncpool_available(pool), N, "fresh: %d available", N);
		peer_rewrite(asyncpool_shared_shm(sp)->base, cycles[c].at, cycles[c].to);
		/*
		 * available() reads the depth of the head in O(1) (issue 15):
		 * it cannot see a cycle, only stay within the capacity.
		 */
		ok(asyncpool_available(pool) <= N, "%s: available() stays within the capacity",
		   cycles[c].what);
		is_int(asyncpool_stats(pool, &st), 0, "  stats");
		ok(st.available <= N, "  stats.available too");
		/* the audit walks the cycle itself: it must stop and say so */
		is_int(asyncpool_check(pool), -EUCLEAN, "  check of the cycle: EUCLEAN");
		is_int(acquire_all(pool), cycles[c].distinct,
		       "  acquires get the %u distinct buffers, then -EUCLEAN", cycles[c].distinct);
		is_int(asyncpool_stats(pool, &st), 0, "  stats again");
		ok(st.corruptions > 0, "  the cycle is counted as a corruption (%llu)",
		   (unsigned long long)st.corruptions);
		is_int(asyncpool_check(pool), -EUCLEAN, "  check: EUCLEAN");
		asyncpool_shared_close(sp);
	}
	return done_testing();
}
