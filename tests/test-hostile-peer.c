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
 * defeats.  An unbounded retry loop is caught by the peer itself, which
 * gives up at twice the library's bound (PEER_MAX_BUMPS).
 *
 * The same for the owned chain pop of a pool that lends without a
 * cache (ap_fl_pop_owned, a bulk acquire of such a pool): bounded, a
 * walk into a buffer that is not free or out of range is -EUCLEAN with
 * nothing popped, a list too short is -ENOBUFS with nothing marked, and
 * what it pops is owned by the caller's cache at the next generation.
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

/* The peer stops at twice the library's bound: a pop still retrying
 * then has no bound, and the test says so at once instead of spinning
 * until the watchdog (tests/mutants/freelist-pop-unbounded and the two
 * chain pops'). */
#define PEER_MAX_BUMPS (1ul << 23)

static void rewrite_head(void)
{
	if (bumps >= PEER_MAX_BUMPS)
		bail_out("a pop still retries after %lu rewrites of the head: its loop is unbounded",
			 bumps);
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

/* The owned chain pop, on a local pool without caches that lends (19 checks). */
static void owned_chain(struct asyncpool_proactor *p)
{
	struct asyncpool_region *r = make_region(p, 64, 4, ASYNCPOOL_ACCESS_READ);
	struct asyncpool_options po = { .size = sizeof(po), .cache_size = 0 };
	struct asyncpool_lease held, b[4];
	uint64_t tok[4], before[4], c0;
	uint32_t top, was;

	if (asyncpool_create_opts(r, &po, &pool))
		bail_out("a pool without caches");
	asyncpool_region_unref(r);
	if (!pool->fl.lazy) {
		skip(19, "no membarrier(2): a pool without caches does not lend");
		(void)asyncpool_destroy(pool);
		return;
	}
	for (int j = 0; j < 4; j++)
		before[j] = atomic_load(&pool->fl.state[j]);
	is_int(asyncpool_acquire_tokens(pool, tok, 4), 0, "owned: 4 tokens of 4, one chain");
	{
		uint32_t id = pool->owner_of[AP_TOKEN_INDEX(tok[0])], bad = 0;

		for (int j = 0; j < 4; j++) {
			uint32_t i = AP_TOKEN_INDEX(tok[j]);
			uint64_t w = atomic_load(&pool->fl.state[i]);

			bad += w != ap_owned_word(id, AP_W_GEN(before[i]) + 1) ||
			       AP_TOKEN_GEN(tok[j]) != AP_W_GEN(before[i]) + 1 ||
			       pool->owner_of[i] != id ||
			       pool->released[i] != ap_gen_prev(AP_W_GEN(before[i]) + 1);
		}
		ok(id != 0 && bad == 0,
		   "each word owned by the thread's cache (%u) at the next generation, hints set", id);
	}
	is_int(asyncpool_release_tokens(pool, tok, 4), 0, "owned: released");
	is_int(asyncpool_release_token(pool, tok[1]), -ESTALE, "a token of the last lend: -ESTALE");
	/* lent again (the same 4): the last lend's tokens stay stale */
	{
		uint64_t again[4];
		int newer = 1;

		is_int(asyncpool_acquire_tokens(pool, again, 4), 0, "owned: the same 4 lent again");
		for (int j = 0; j < 4; j++)
			for (int k = 0; k < 4; k++)
				if (AP_TOKEN_INDEX(again[j]) == AP_TOKEN_INDEX(tok[k]))
					newer &= AP_TOKEN_GEN(again[j]) == AP_TOKEN_GEN(tok[k]) + 1;
		ok(newer, "each at the generation after its last lend");
		is_int(asyncpool_release_token(pool, tok[2]), -ESTALE,
		       "a token of the lend before, while lent again: -ESTALE");
		is_int(asyncpool_release_tokens(pool, again, 4), 0, "owned: released again");
	}

	/* too short: nothing marked */
	is_int(asyncpool_acquire(pool, &held), 0, "owned: one lent");
	for (int j = 0; j < 4; j++)
		before[j] = atomic_load(&pool->fl.state[j]);
	is_int(asyncpool_acquire_bulk(pool, b, 4), -ENOBUFS, "4 of 3 free: -ENOBUFS");
	{
		int same = 1;

		for (int j = 0; j < 4; j++)
			same &= atomic_load(&pool->fl.state[j]) == before[j];
		ok(same && asyncpool_available(pool) == 3, "nothing marked, 3 still free");
	}

	/* a walk into the lent buffer, then out of range */
	c0 = corruptions();
	top = AP_HEAD_INDEX(atomic_load(&pool->fl.line->head));
	was = atomic_load(&pool->fl.link[top]);
	atomic_store(&pool->fl.link[top], held.buffer_index);
	is_int(asyncpool_acquire_bulk(pool, b, 3), -EUCLEAN,
	       "owned: a walk that reaches a lent buffer gives -EUCLEAN");
	is_int(corruptions(), c0 + 1, "and counts a corruption");
	atomic_store(&pool->fl.link[top], 1000u);
	is_int(asyncpool_acquire_bulk(pool, b, 3), -EUCLEAN,
	       "owned: a walk that reads a link out of range gives -EUCLEAN");
	is_int(AP_HEAD_INDEX(atomic_load(&pool->fl.line->head)), top, "the head did not move");
	atomic_store(&pool->fl.link[top], was);

	/* under a peer that rewrites the head without end */
	bumps = 0;
	ap_test_hook_before_cas = rewrite_head;
	is_int(asyncpool_acquire_bulk(pool, b, 2), -EUCLEAN,
	       "owned: a chain pop gives up on a head that never holds still");
	ap_test_hook_before_cas = NULL;
	ok(bumps > 1000 && bumps <= PEER_MAX_BUMPS, "bounded: %lu attempts", bumps);
	asyncpool_lease_release(&held);
	ok(asyncpool_available(pool) == 4 && asyncpool_check(pool) == 0,
	   "repaired: all 4 free, the audit clean");
	is_int(asyncpool_destroy(pool), 0, "destroy the pool without caches");
}

int main(void)
{
	struct asyncpool_proactor *p;
	struct asyncpool_lease l;
	uint64_t h;

	if (asyncpool_proactor_create_memory(&p))
		bail_out("proactor");
	pool = make_freelist_pool(p, 64, 4);
	plan(29 + 20);

	/* acquire under a head that never holds still */
	ap_test_hook_before_cas = rewrite_head;
	memset(&l, 0xa5, sizeof(l));
	is_int(asyncpool_acquire(pool, &l), -EUCLEAN, "acquire gives up on a head that never holds still");
	ap_test_hook_before_cas = NULL;
	diag("the peer rewrote the head %lu times", bumps);
	ok(bumps > 1000 && bumps <= PEER_MAX_BUMPS, "bounded: %lu attempts", bumps);
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
	ok(bumps > 1000 && bumps <= PEER_MAX_BUMPS, "bounded: %lu attempts", bumps);
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
		ok(bumps > 1000 && bumps <= PEER_MAX_BUMPS, "bounded: %lu attempts", bumps);
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

	is_int(asyncpool_destroy(pool), 0, "destroy");
	owned_chain(p);
	is_int(asyncpool_proactor_destroy(p), 0, "destroy the proactor");
	return done_testing();
}
