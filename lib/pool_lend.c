/* SPDX-License-Identifier: MIT */
/*
 * Lending without a cache (since 1.3.3, issue 22; pool_lend.h): a local
 * pool with cache_size 0 gives each thread that uses it an owner id and
 * a cache of no entries, which only lends.  An acquire pops one buffer
 * and owns it (CACHED id g, as a refill's buffers are); the owner's
 * release decides it with a load and a store (ap_state_owner_free) and
 * pushes it straight back (ap_owner_release_uncached(), pool_owner.c); a
 * release on another thread goes to the owner's inbox in a batch, as in
 * a pool with caches, and the owner pushes what it takes from there as
 * one chain at its next acquire.  So no free buffer
 * waits in a thread, no release needs a CAS on the buffer's word, and in
 * a hand-off only the acquiring thread touches the freelist's head.
 * Everything else (flushers, waiters, thread exit, fork, the audit) is
 * the ownership of a pool with caches, with caches that hold nothing.
 */
#include "pool_lend.h"
#include "pool_cache.h"
#include "pool_depot.h"
#include "pool_owner.h"
#include "pool_takeover.h"
#include "pool_pop.h"

struct ap_cache *ap_lend_enter(struct asyncpool *pool)
{
	struct ap_cache *c = ap_cache_of(pool);
	struct ap_inbox *b;

	if (!c || c->size || !(b = c->box) || !ap_cache_enter(c))
		return NULL;
	if (b->head != atomic_load_explicit(&b->tail, memory_order_relaxed))
		(void)ap_owner_drain(pool, c, b->mask + 1);
	return c;
}

/*
 * Full depot batches first (pool_depot.c): arrays, no walk of the
 * freelist.  A batch this owner put there is lent as it is: its words
 * are ours at the generation of the next lease, and its hints are
 * what our own lend would write.  Another's is stamped ours, as a
 * refill stamps a depot batch (ap_own_buffer).  Counted lent before
 * the slot is let go (a fork, pool_depot.c).  How many records it
 * filled.
 */
static uint32_t lend_from_depot(struct asyncpool *pool, struct ap_cache *c, char *idx, char *gen,
				size_t stride, uint32_t n)
{
	/* Where idx would be if the records' index and generation were a
	 * token (lease.h): they are, for tokens and for leases. */
	const char *tok = gen - AP_TOKEN_GEN_AT + AP_TOKEN_IDX_AT;
	struct ap_depot_slot sl;
	uint32_t done = 0;

	while (done < n && ap_depot_grab(pool, true, &sl)) {
		uint32_t k = n - done < sl.n ? n - done : sl.n, from = sl.n - k;
		const uint64_t *t = sl.tok;

		if (sl.owner != c->id)
			for (uint32_t j = from; j < sl.n; j++)
				ap_own_buffer(pool, c->id, AP_TOKEN_INDEX(t[j]), AP_TOKEN_GEN(t[j]));
		if (tok == idx && stride == sizeof(*t)) {
			/* Records that are tokens: the slot's, as they are. */
			memcpy(idx - AP_TOKEN_IDX_AT, t + from, (size_t)k * sizeof(*t));
			idx += (size_t)k * stride;
			gen += (size_t)k * stride;
		} else if (tok == idx) {
			/* A lease's index and generation are its token: one store. */
			for (uint32_t j = from; j < sl.n; j++, idx += stride, gen += stride)
				memcpy(idx - AP_TOKEN_IDX_AT, &t[j], sizeof(*t));
		} else {
			for (uint32_t j = from; j < sl.n; j++, idx += stride, gen += stride) {
				uint32_t i = AP_TOKEN_INDEX(t[j]), g = AP_TOKEN_GEN(t[j]);

				memcpy(idx, &i, sizeof(i));
				memcpy(gen, &g, sizeof(g));
			}
		}
		ap_cache_add_lent(c, k);
		ap_depot_let_go(pool, &sl, from);       /* the rest as they were */
		done += k;
	}
	return done;
}

uint32_t ap_lend_pop(struct asyncpool *pool, struct ap_cache *c, char *idx, char *gen,
		     size_t stride, uint32_t n, int *rc)
{
	/* In locals: the records' stores may alias anything. */
	_Atomic uint32_t *const released = pool->released, *const owner_of = pool->owner_of;
	const uint32_t id = c->id;
	uint32_t v[AP_LEND_CHUNK], g[AP_LEND_CHUNK], done = 0, popped = 0;
	int err = 0;

	if (pool->depot) {
		done = lend_from_depot(pool, c, idx, gen, stride, n);
		idx += (size_t)done * stride;
		gen += (size_t)done * stride;
	}
	while (done < n) {
		uint32_t k = n - done < AP_LEND_CHUNK ? n - done : AP_LEND_CHUNK;

		err = ap_pool_pop_owned(pool, v, g, k, id);
		if (AP_UNLIKELY(err))
			break;
		for (uint32_t j = 0; j < k; j++, idx += stride, gen += stride) {
			uint32_t i = v[j], gj = g[j];

			ap_own_hints(released, owner_of, id, i, gj); /* the pop wrote the word */
			memcpy(idx, &i, sizeof(i));
			memcpy(gen, &gj, sizeof(gj));
		}
		done += k;
		popped += k;
	}
	ap_cache_add_lent(c, popped);
	*rc = err;
	return done;
}

/*
 * After ap_lend_once() of c (entered) failed with rc: once more after a
 * refund of a pool with a depot, as ap_pool_pop() does.  0 with the
 * token in *token, or -errno with 0 there.
 */
static int lend_refunded(struct asyncpool *pool, struct ap_cache *c, uint64_t *token, int rc)
{
	if (ap_pool_refunded(pool, rc))
		rc = ap_lend_once(pool, c, token);
	if (AP_UNLIKELY(rc))
		*token = 0;
	return rc;
}

/* One buffer lent as c's (c entered, of no entries). */
static int lend_own(struct asyncpool *pool, struct ap_cache *c, uint64_t *token)
{
	int rc = ap_lend_once(pool, c, token);

	return AP_LIKELY(!rc) ? 0 : lend_refunded(pool, c, token, rc);
}

/* One buffer, lent by the calling thread's cache if it can (else leased): 0 or -errno. */
static int lend_pop(struct asyncpool *pool, uint64_t *token)
{
	struct ap_cache *c = ap_lend_enter(pool);
	uint32_t idx, gen;
	int rc;

	if (!c) {
		rc = ap_pool_pop(pool, AP_K_LEASED, &idx, &gen);
		*token = rc ? 0 : AP_TOKEN_MAKE(gen, idx);
		return rc;
	}
	rc = lend_own(pool, c, token);
	ap_cache_leave(c);
	return rc;
}

/* Releases on their way to an owner come back, as for a pool with
 * caches (ap_cache_acquire_slow), then one more try. */
static int lend_after_empty(struct asyncpool *pool, uint64_t *token, int rc)
{
	if (rc == -ENOBUFS && ap_cache_flush_others(pool, false) > 0)
		rc = lend_pop(pool, token);
	return rc;
}

int ap_lend_token_rest(struct asyncpool *pool, uint64_t *token)
{
	return lend_after_empty(pool, token, lend_pop(pool, token));
}

int ap_lend_token_failed(struct asyncpool *pool, struct ap_cache *c, uint64_t *token, int rc)
{
	/* lend_own() after its first pop */
	rc = lend_refunded(pool, c, token, rc);
	ap_cache_leave(c);
	return AP_LIKELY(!rc) ? 0 : lend_after_empty(pool, token, rc);
}

/*
 * The single acquire (issue 34): the thread's cache looked up once; the
 * common path is ap_lend_token_own(), which asyncpool_acquire_tokens()
 * inlines.  0 with the buffer's token in *token, or -errno with 0 there.
 */
int ap_lend_token(struct asyncpool *pool, uint64_t *token)
{
	struct ap_cache *c = ap_tc_last;

	if (AP_LIKELY(c->pool == pool && !c->size))
		return ap_lend_token_own(pool, c, token);
	return ap_lend_token_rest(pool, token);
}

int ap_lend_lease(struct asyncpool *pool, struct asyncpool_lease *out)
{
	uint64_t t;
	int rc = ap_lend_token(pool, &t);

	if (AP_UNLIKELY(rc)) {
		memset(out, 0, sizeof(*out));
		return rc;
	}
	ap_pool_lease(pool, AP_TOKEN_INDEX(t), AP_TOKEN_GEN(t), ap_cache_recycle, out);
	return 0;
}

/*
 * The owner's release of its own tokens into a depot slot it holds, as
 * a cache's batch goes there: each word still ours at the next
 * generation, the hint that refuses a copy on another thread at once,
 * the entry.  tok[0..k), k at most the slot's batch; one not ours to
 * decide goes to rest[*r].  The slot's new count.  Out of line: its
 * loop keeps everything in registers.
 */
static __attribute__((noinline)) uint32_t put_into_slot(struct asyncpool *pool, uint32_t id,
							struct ap_depot_slot *sl,
							const uint64_t *tok, uint32_t k,
							uint64_t *rest, uint32_t *r)
{
	ap_word *const state = pool->fl.state;
	_Atomic uint32_t *const owner_of = pool->owner_of, *const released = pool->released;
	uint64_t *const t = sl->tok, *out = t, *back = rest + *r;
	const uint64_t word = ap_owned_word(id, 0);

	/* Pointers, not counts: fewer registers live, no spill in the loop. */
	for (const uint64_t *end = tok + k; tok < end; tok++) {
		uint64_t tk = *tok;
		uint32_t idx = AP_TOKEN_INDEX(tk), gen = AP_TOKEN_GEN(tk);

		/* Generation 0 and the last before the wrap go to rest[],
		 * which decides them (ap_owner_give_back): here g + 1 is
		 * the next one. */
		if (AP_LIKELY(atomic_load_explicit(&owner_of[idx], memory_order_relaxed) == id &&
			      gen - 1u < 0xfffffffeu &&
			      ap_state_owner_decide(&state[idx], word | gen, (word | gen) + 1))) {
			atomic_store_explicit(&released[idx], gen, memory_order_relaxed);
			*out++ = AP_TOKEN_NEXT(tk);
		} else {
			*back++ = tk;
		}
	}
	*r = (uint32_t)(back - rest);
	sl->owner = id;
	return (uint32_t)(out - t);
}

uint32_t ap_lend_put(struct asyncpool *pool, struct ap_cache *c, const uint64_t *tok, uint32_t k,
		     uint64_t *rest)
{
	/* In locals: the atomic stores would have them reloaded. */
	ap_word *const state = pool->fl.state;
	_Atomic uint32_t *const owner_of = pool->owner_of;
	const uint32_t id = c->id;
	const uint64_t word = ap_owned_word(id, 0);
	uint32_t chain[AP_OUTBOX_BATCH_MIN], n = 0, r = 0, taken = 0, j = 0;
	struct ap_depot_slot sl;

	/* Whole batches into the depot while it has room (pool_depot.c). */
	while (k - j >= ap_depot_batch(pool) && ap_depot_grab(pool, false, &sl)) {
		uint32_t m = put_into_slot(pool, id, &sl, &tok[j], sl.batch, rest, &r);

		j += sl.batch;
		ap_cache_add_lent(c, -(int64_t)m);      /* before: a fork */
		ap_depot_let_go(pool, &sl, m);
	}
	/* The rest to the freelist, as one chain. */
	for (; j < k; j++) {
		uint32_t idx = AP_TOKEN_INDEX(tok[j]);

		if (AP_LIKELY(atomic_load_explicit(&owner_of[idx], memory_order_relaxed) == id &&
			      ap_owner_free(state, owner_of, word, idx, AP_TOKEN_GEN(tok[j])))) {
			chain[n++] = idx;
			if (n == AP_OUTBOX_BATCH_MIN) {
				(void)ap_fl_push_chain(&pool->fl, chain, n);
				taken += n;
				n = 0;
			}
		} else {
			rest[r++] = tok[j];
		}
	}
	if (n)
		(void)ap_fl_push_chain(&pool->fl, chain, n);
	ap_cache_add_lent(c, -(int64_t)(taken + n));
	return r;
}
