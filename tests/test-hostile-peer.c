/* SPDX-License-Identifier: MIT */
/*
 * A peer that rewrites the head without end (a hostile or broken process
 * sharing the pool) must not keep acquire or release spinning: after a
 * bounded number of CAS failures they return -EUCLEAN, count a
 * corruption, and change nothing else.  The test hook plays the peer: it
 * bumps the head's tag between every read of the head and its CAS.
 *
 * The chain pop (a bulk acquire) is bounded too, against a peer that
 * also rewrites the links of the chain into a cycle under it: a walk of
 * the cycle reaches its max and goes for the CAS, which the peer then
 * defeats.  An unbounded retry loop does not return: the watchdog of
 * tests/tap.h fails the test (tests/mutants/freelist-chain-pop-unbounded).
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

/* The peer of the chain: the head moves, and the links of buffers 0..3
 * (FREE words) form a cycle that turns by one on every call. */
static void rewrite_chain(void)
{
	uint32_t k = (uint32_t)(bumps % 4);

	for (uint32_t j = 0; j < 4; j++)
		atomic_store(&pool->fl.link[j], (j + 1 + k) % 4 == j ? (j + 1) % 4 : (j + 1 + k) % 4);
	rewrite_head();
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
	pool = make_freelist_pool(p, 64, 4);
	plan(29);

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

	/* a chain pop under a peer that rewrites the head and the links */
	{
		struct asyncpool_lease b[3];
		uint64_t saved[4];
		uint32_t saved_link[4];
		uint64_t h0 = atomic_load(&pool->fl.line->head);

		for (int j = 0; j < 4; j++) {
			saved[j] = atomic_load(&pool->fl.state[j]);
			saved_link[j] = atomic_load(&pool->fl.link[j]);
		}
		bumps = 0;
		memset(b, 0xa5, sizeof(b));
		ap_test_hook_before_cas = rewrite_chain;
		is_int(asyncpool_acquire_bulk(pool, b, 3), -EUCLEAN,
		       "a chain pop gives up on a chain rewritten in a cycle without end");
		ap_test_hook_before_cas = NULL;
		ok(bumps > 1000 && bumps <= (1ul << 23), "bounded: %lu attempts", bumps);
		ok(b[0].release.fn == NULL && b[2].release.fn == NULL, "the failed bulk acquire zeroed the leases");
		is_int(corruptions(), 3, "a third corruption counted");
		/* the peer is gone: put back what it scrambled */
		for (int j = 0; j < 4; j++) {
			atomic_store(&pool->fl.state[j], saved[j]);
			atomic_store(&pool->fl.link[j], saved_link[j]);
		}
		atomic_store(&pool->fl.line->head, h0);
		is_int(asyncpool_acquire_bulk(pool, b, 3), 0, "with the peer gone a bulk acquire works");
		asyncpool_release_bulk(b, 3);
		is_int(asyncpool_available(pool), 4, "all buffers free again");
	}

	/*
	 * A chain walk that meets, with the head holding still, a buffer
	 * that is not FREE or a link out of range has read a corrupt list:
	 * -EUCLEAN and a corruption counted, nothing popped.
	 */
	{
		struct asyncpool_lease held, b[3];
		uint32_t top, was;
		uint64_t w;

		is_int(asyncpool_acquire(pool, &held), 0, "a corrupt chain: one buffer leased");
		top = AP_HEAD_INDEX(atomic_load(&pool->fl.line->head));
		/* the list now runs from its head into the leased buffer */
		was = atomic_load(&pool->fl.link[top]);
		atomic_store(&pool->fl.link[top], held.buffer_index);
		is_int(asyncpool_acquire_bulk(pool, b, 3), -EUCLEAN,
		       "a chain walk that reaches a leased buffer gives -EUCLEAN");
		is_int(corruptions(), 4, "and counts a corruption");
		w = atomic_load(&pool->fl.state[held.buffer_index]);
		is_int(AP_W_KIND(w), AP_K_LEASED, "the leased buffer is still leased");
		/* a link out of range */
		atomic_store(&pool->fl.link[top], 1000u);
		is_int(asyncpool_acquire_bulk(pool, b, 3), -EUCLEAN,
		       "a chain walk that reads a link out of range gives -EUCLEAN");
		is_int(AP_HEAD_INDEX(atomic_load(&pool->fl.line->head)), top,
		       "the head did not move to it");
		/* the audit walks it too: range-checked before state[] is read */
		atomic_store(&pool->fl.link[top], 0x7ffffff0u);
		is_int(asyncpool_check(pool), -EUCLEAN, "the audit of a link far out of range: -EUCLEAN");
		atomic_store(&pool->fl.link[top], was);
		asyncpool_lease_release(&held);
		is_int(asyncpool_available(pool), 4, "repaired: all buffers free");
		is_int(asyncpool_check(pool), 0, "repaired: the audit is clean");
	}

	is_int(asyncpool_destroy(pool) | asyncpool_proactor_destroy(p), 0, "destroy");
	return done_testing();
}
