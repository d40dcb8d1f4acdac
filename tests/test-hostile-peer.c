/* SPDX-License-Identifier: MIT */
/*
 * A peer that rewrites the head without end (a hostile or broken process
 * sharing the pool) must not keep acquire or release spinning: after a
 * bounded number of CAS failures they return -EUCLEAN, count a
 * corruption, and change nothing else.  The test hook plays the peer: it
 * bumps the head's tag between every read of the head and its CAS.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <asyncpool.h>
#include "hooks.h"
#include "tap.h"
#include "testutil.h"

static struct asyncpool *pool;
static unsigned long bumps;

static void rewrite_head(void)
{
	atomic_fetch_add(&pool->fl.line->head, (uint64_t)1 << 32);
	bumps++;
}

static uint64_t corruptions(void)
{
	struct asyncpool_stats st;

	st.size = sizeof(st);
	asyncpool_stats(pool, &st);
	return st.corruptions;
}

int main(void)
{
	struct asyncpool_proactor *p;
	struct asyncpool_lease l;
	uint64_t h;

	if (asyncpool_proactor_create_memory(&p))
		bail_out("proactor");
	pool = make_pool(p, 64, 4, 0);
	plan(14);

	/* acquire under a head that never holds still */
	ap_test_hook_before_cas = rewrite_head;
	memset(&l, 0xa5, sizeof(l));
	is_int(asyncpool_acquire(pool, &l), -EUCLEAN, "acquire gives up on a head that never holds still");
	ap_test_hook_before_cas = NULL;
	diag("the peer rewrote the head %lu times", bumps);
	ok(bumps > 1000 && bumps <= (1ul << 23), "bounded: %lu attempts", bumps);
	ok(l.buffer_index == 0 && l.span.region == NULL && l.release.fn == NULL,
	   "the failed acquire zeroed the lease");
	is_int(corruptions(), 1, "one corruption counted");
	h = atomic_load(&pool->fl.line->head);
	is_int(AP_HEAD_INDEX(h), 0, "the head index is unchanged");
	is_int(asyncpool_available(pool), 4, "nothing was taken");

	/* release under the same peer */
	is_int(asyncpool_acquire(pool, &l), 0, "acquire with the peer gone");
	bumps = 0;
	ap_test_hook_before_cas = rewrite_head;
	is_int(ap_fl_release(&pool->fl, l.buffer_index, l.generation), -EUCLEAN, "release gives up on a head that never holds still");
	ap_test_hook_before_cas = NULL;
	ok(bumps > 1000 && bumps <= (1ul << 23), "bounded: %lu attempts", bumps);
	is_int(corruptions(), 2, "a second corruption counted");
	is_int(AP_W_KIND(atomic_load(&pool->fl.state[l.buffer_index])), AP_K_LEASED,
	       "the claim was given back: the buffer is still leased");
	is_int(ap_fl_release(&pool->fl, l.buffer_index, l.generation), 0, "so a later release succeeds");
	is_int(asyncpool_available(pool), 4, "all buffers free");

	is_int(asyncpool_destroy(pool) | asyncpool_proactor_destroy(p), 0, "destroy");
	return done_testing();
}
