/* SPDX-License-Identifier: MIT */
/*
 * Bulk acquire and release: the single operations' transitions
 * (buffer_state.h), with one CAS on the freelist head per chain.
 */
#include "pool_internal.h"
#include "pool_cache.h"
#include "pool_depot.h"
#include "pool_lend.h"
#include "pool_takeover.h"
#include "pool_pop.h"

/* Buffers pushed per CAS by a bulk release. */
#define AP_BULK_CHUNK 64u

/*
 * Four 32-bit lanes (GCC's and clang's vector extensions: SSE2 on
 * x86-64, plain code where there is no SIMD), for the check of tokens
 * two at a time.
 */
typedef uint32_t ap_v4u __attribute__((vector_size(16)));
typedef int32_t ap_v4i __attribute__((vector_size(16)));

/* Build leases whose buffer_index and generation a chain pop filled. */
static void leases_build(struct asyncpool *pool, struct asyncpool_lease *l, unsigned int n,
			 ap_release_token_fn *fn)
{
	struct asyncpool_region *region = pool->region;
	size_t bs = pool->buffer_size;

	for (unsigned int j = 0; j < n; j++)
		ap_lease_init_token(&l[j], region, bs, fn, pool, ap_lease_token(&l[j]));
}

/*
 * n buffers straight from the freelist into n records of stride bytes,
 * index at idx and generation at gen (a lease's fields, a token's
 * halves): one CAS per chain (a shared pool: one per AP_STEP_WORDS
 * buffers, what a step records).  An empty pool is reclaimed
 * (ap_pool_pop_chain).  How many records were filled: n, or fewer with
 * *rc set, and the caller gives those back.
 */
static unsigned int pop_records(struct asyncpool *pool, char *idx, char *gen, size_t stride,
				unsigned int n, int *rc)
{
	/* A pool that lends without a cache lends these too (pool_lend.c). */
	struct ap_cache *c = pool->fl.lazy ? ap_lend_enter(pool) : NULL;
	unsigned int j = 0;
	uint32_t got;

	if (c) {
		j = ap_lend_pop(pool, c, idx, gen, stride, n, rc);
		ap_cache_leave(c);
		return j;
	}
	*rc = 0;
	while (j < n) {
		uint32_t chunk = n - j;

		if (pool->fl.shared && chunk > AP_STEP_WORDS)
			chunk = AP_STEP_WORDS;
		*rc = ap_pool_pop_chain(pool, idx + j * stride, gen + j * stride, stride, chunk,
					chunk, AP_K_LEASED, &got);
		if (*rc)
			break;
		j += chunk;
	}
	return j;
}

/* n leases straight from the freelist, all or nothing (pop_records). */
static int pop_leases(struct asyncpool *pool, struct asyncpool_lease *l, unsigned int n,
		      ap_release_token_fn *fn)
{
	int rc;
	unsigned int got = pop_records(pool, (char *)&l->buffer_index, (char *)&l->generation,
				       sizeof(*l), n, &rc);

	leases_build(pool, l, got, fn);
	if (rc) {
		asyncpool_release_bulk(l, got);
		memset(l, 0, (size_t)n * sizeof(*l));
	}
	return rc;
}

/*
 * What both bulk acquires check before they write anything (n may not
 * be the length of anything), and the calling thread's cache, entered,
 * if it has one a flusher does not hold (else *c is NULL): 1 to go on,
 * 0 for nothing to do (n == 0), or -EINVAL.
 */
static int bulk_begin(struct asyncpool *pool, const void *out, unsigned int n,
		      struct ap_cache **c)
{
	*c = NULL;
	if (!out)
		return n ? -EINVAL : 0;
	if (!pool || n > pool->fl.count)
		return -EINVAL;
	if (!n)
		return 0;
	if (pool->cache_size) {
		*c = ap_cache_of(pool);
		/* A cache of no entries from before asyncpool_set_cache()
		 * grows at this thread's next acquire, as asyncpool_acquire()'s. */
		if (*c && !(*c)->size)
			*c = ap_cache_get(pool);
		if (*c && !ap_cache_enter(*c))
			*c = NULL;              /* a flusher has it (pool_cache.h) */
		if (*c && !(*c)->size) {
			/* It only lends (pool_lend.c): pop_records() lends. */
			ap_cache_leave(*c);
			*c = NULL;
		}
	}
	return 1;
}

/*
 * The next buffer of the calling thread's cache c for a bulk acquire
 * that still lacks need buffers, leased to the caller: 1 with *idx and
 * *gen set.  An empty cache is refilled with one CAS for what is missing
 * and a refill's worth more; 0 when need is more than a refill may hold
 * (the caller pops the rest straight from the freelist), or -errno.
 */
/*
 * Fill the empty cache c for a bulk acquire that lacks need: a local
 * pool's depot batch first, as it is; else what is missing and a
 * refill's worth more from the freelist, one CAS.  Out of line: once a
 * refill, and inlined it kept cache_next() from inlining.
 */
static __attribute__((noinline)) int cache_next_refill(struct asyncpool *pool, struct ap_cache *c,
							uint32_t need, uint32_t *got)
{
	int rc = ap_cache_fill(pool, c, need,
			       need + c->batch < c->size ? need + c->batch : c->size);

	*got = ap_cache_n(c);
	return rc ? rc : *got ? 0 : -ENOBUFS;
}

static inline __attribute__((always_inline)) int cache_next(struct asyncpool *pool,
							     struct ap_cache *c, uint32_t need,
							     uint32_t *idx, uint32_t *gen,
							     uint32_t *lent)
{
	for (;;) {
		uint32_t cn = ap_cache_n(c), got;
		int rc;

		if (!cn) {
			if (need > c->size || (pool->fl.shared && need > AP_STEP_WORDS))
				return 0;
			rc = cache_next_refill(pool, c, need, &got);
			if (rc)
				return rc;
			cn = got;
		}
		while (cn) {
			uint32_t g = ap_cache_lend(pool, c, --cn, lent);

			if (AP_LIKELY(g)) {
				ap_cache_set_n(c, cn);
				*idx = ap_cache_idx(c, cn);
				*gen = g;
				return 1;
			}
			/* Not cached any more: a copy of it is elsewhere. */
			ap_fl_count_corruption(&pool->fl, 1);
		}
		ap_cache_set_n(c, 0);
	}
}

/*
 * The bulk acquires' fast path: n buffers lent from the calling thread's
 * cache c (entered, holding n or more) of a pool that lends: its top n,
 * in the order they are stacked (the top last; since 1.6, one copy).
 * A lent buffer's word is not written
 * (buffer_state.h, "Lent, not leased"), and an entry of such a cache
 * always has a generation (the refill or the release that cached it
 * gave one), so each buffer is a copy of its entry, which is its token
 * (layout version 3): no branch per buffer, lent counted and c->n set
 * once.  Leaves c.
 */
static void tokens_lend(struct ap_cache *c, uint64_t *tokens, unsigned int n)
{
	uint32_t cn = ap_cache_n(c);

	memcpy(tokens, &c->tok[cn - n], (size_t)n * sizeof(*tokens));
	ap_cache_leave_n(c, cn - n);            /* n lent: held unchanged */
}

/* The same for leases: only what a lease holds is written. */
static void leases_lend(struct asyncpool *pool, struct ap_cache *c, struct asyncpool_lease *l,
			unsigned int n)
{
	uint32_t cn = ap_cache_n(c);
	const uint64_t *from = &c->tok[cn - n];
	struct asyncpool_region *region = pool->region;
	size_t bs = pool->buffer_size;

	for (unsigned int j = 0; j < n; j++)
		ap_lease_init_token(&l[j], region, bs, ap_cache_recycle, pool, from[j]);
	ap_cache_leave_n(c, cn - n);            /* n lent: held unchanged */
}

/*
 * n leases, all or nothing: from the calling thread's cache c if the
 * caller entered one (cache_next), and what a cache cannot hold straight
 * from the freelist.  Leaves c on every return, so that a flush of every
 * cache never waits for this thread.
 */
static int acquire_leases(struct asyncpool *pool, struct ap_cache *c,
			  struct asyncpool_lease *leases, unsigned int n)
{
	size_t bs = pool->buffer_size;
	unsigned int j = 0;
	uint32_t idx = 0, gen = 0, lent = 0;
	int rc = 0;

	if (c && pool->fl.lazy && ap_cache_n(c) >= n) {
		leases_lend(pool, c, leases, n);
		return 0;
	}
	if (c) {
		while (j < n && (rc = cache_next(pool, c, n - j, &idx, &gen, &lent)) > 0)
			ap_lease_init_token(&leases[j++], pool->region, bs, ap_cache_recycle, pool,
					    AP_TOKEN_MAKE(gen, idx));
		ap_cache_add_lent(c, lent);
		ap_cache_leave(c);
	}
	if (!rc && j < n)
		rc = pop_leases(pool, &leases[j], n - j, c ? ap_cache_recycle : pool->release_fn);
	if (rc < 0) {
		/* What was taken goes back (to the cache). */
		asyncpool_release_bulk(leases, j);
		memset(leases, 0, (size_t)n * sizeof(*leases));
		return rc;
	}
	return 0;
}

/*
 * A bulk acquire that found the pool short: the other threads' caches,
 * and releases on their way to an owner, come back (as for a single
 * acquire, pool.c), then one more try.  1 to try again.
 */
static int bulk_short(struct asyncpool *pool, int rc)
{
	return rc == -ENOBUFS && ap_pool_cached(pool) && ap_cache_flush_others(pool, false) > 0;
}

AP_EXPORT int asyncpool_acquire_bulk(struct asyncpool *pool, struct asyncpool_lease *leases,
				     unsigned int n)
{
	struct ap_cache *c;
	int rc;

	/* One call site each, so that both stay inline. */
	for (bool again = false;; again = true) {
		rc = bulk_begin(pool, leases, n, &c);
		if (rc <= 0)
			return rc;
		rc = acquire_leases(pool, c, leases, n);
		if (again || !bulk_short(pool, rc))
			return rc;
	}
}

/* Whether lease l continues a run of leases of pool with callback fn. */
static inline bool same_run(const struct asyncpool_lease *l, ap_release_token_fn *fn,
			    const struct asyncpool *pool)
{
	return ap_release_is(l, fn) && l->release.ctx == pool;
}

/*
 * Where a bulk release puts the buffers it takes back: the calling
 * thread's cache (entered), or the freelist, in chains of AP_BULK_CHUNK.
 * Each buffer moves by the same CAS as a single release (into the cache,
 * or claimed for the freelist), so that a stale copy, or a copy released
 * at the same instant, is refused and counted.
 */
struct put_back {
	struct asyncpool *pool;
	struct ap_freelist *fl;
	struct ap_cache *c;             /* entered, or NULL: the freelist */
	uint32_t n;                     /* in c->tok[], or in idx[] */
	uint32_t size;                  /* of c: read once, not after every CAS */
	uint32_t bad;                   /* refused */
	uint32_t lent_back;             /* lent ones, back into c or the freelist */
	uint32_t *idx;                  /* AP_BULK_CHUNK, for the freelist */
};

/*
 * idx is the caller's array, not a member: pb's address never leaves
 * these inline functions, so the compiler keeps it in registers across
 * the CASes.
 */
static inline void put_begin(struct put_back *pb, struct asyncpool *pool, bool cached,
			     uint32_t *idx)
{
	pb->pool = pool;
	pb->fl = &pool->fl;
	pb->idx = idx;
	pb->c = cached ? ap_cache_of(pool) : NULL;
	if (pb->c && !ap_cache_enter(pb->c))
		pb->c = NULL;           /* a flusher has it (pool_cache.h) */
	pb->n = pb->c ? ap_cache_n(pb->c) : 0;
	pb->size = pb->c ? pb->c->size : 0;
	pb->bad = 0;
	pb->lent_back = 0;
}

/*
 * Inlined: a call per buffer costs more than the rest of it.  The ways
 * are constants in each loop that calls it, one loop per way, so that
 * each keeps what it needs in registers: to_cache (pb->c != NULL), or
 * to the freelist of a pool that lends (lends: lent buffers may come
 * back, counted) or does not.
 */
enum put_way { PUT_CACHE, PUT_FREELIST, PUT_FREELIST_LENT };

static inline __attribute__((always_inline)) void put_one(struct put_back *pb, uint32_t i,
							 uint32_t gen, enum put_way way)
{
	struct ap_freelist *fl = pb->fl;
	uint32_t kind;

	if (way == PUT_CACHE) {
		if (AP_UNLIKELY(pb->n == pb->size)) {
			ap_cache_set_n(pb->c, pb->n);
			ap_cache_flush_batch(pb->c);
			pb->n = ap_cache_n(pb->c);
		}
		if (AP_UNLIKELY(!ap_cache_push(pb->pool, pb->c, pb->n, i, gen, &pb->lent_back))) {
			pb->bad++;
			ap_fl_count_refused(fl, i, gen);
			return;
		}
		pb->n++;
		return;
	}
	kind = ap_state_claim_leased(&fl->state[i], gen, fl->me,
				     way == PUT_FREELIST_LENT ? AP_LENT : AP_NO_LENT);
	if (AP_UNLIKELY(!kind)) {
		pb->bad++;
		ap_fl_count_refused(fl, i, gen);
		return;
	}
	if (way == PUT_FREELIST_LENT)
		pb->lent_back += kind == AP_K_CACHED;
	AP_TEST_AT(AP_TP_RELEASE_CLAIMED);
	pb->idx[pb->n++] = i;
	if (pb->n == AP_BULK_CHUNK) {
		(void)ap_fl_push_chain(fl, pb->idx, pb->n);
		pb->n = 0;
	}
}

/* Finish a put_back: how many were refused (each counted as it was). */
static inline uint32_t put_end(struct put_back *pb)
{
	if (pb->c) {
		ap_cache_add_lent(pb->c, -(int64_t)pb->lent_back);
		ap_cache_set_n(pb->c, pb->n);
		ap_cache_leave(pb->c);
	} else {
		(void)ap_fl_push_chain(pb->fl, pb->idx, pb->n);
		if (pb->lent_back)
			ap_fl_lent_back(pb->fl, pb->lent_back);
	}
	return pb->bad;
}

/*
 * Release the run of leases of pool with callback fn that starts at l
 * (at most n), each lease cleared: into this thread's cache for a pool
 * with caches, else to the freelist.  Returns the length of the run.
 */
static inline __attribute__((always_inline)) unsigned int
put_leases(struct put_back *pb, struct asyncpool *pool, struct asyncpool_lease *l, unsigned int n,
	   ap_release_token_fn *fn, enum put_way way)
{
	unsigned int j;

	for (j = 0; j < n && same_run(&l[j], fn, pool); j++) {
		l[j].release.fn = NULL;
		if (AP_LIKELY(l[j].buffer_index < pool->fl.count))
			put_one(pb, l[j].buffer_index, l[j].generation, way);
	}
	return j;
}

/* Write back what the loop changed: only that stays live in it. */
static inline void put_back_done(struct put_back *to, const struct put_back *from)
{
	to->n = from->n;
	to->bad = from->bad;
	to->lent_back = from->lent_back;
}

/*
 * Each way in a function of its own, on a copy of the put_back whose
 * address does not leave it: the compiler gives each loop all the
 * registers, and keeps the put_back in them.
 */
static __attribute__((noinline)) unsigned int
put_leases_cache(struct put_back *pbp, struct asyncpool *pool, struct asyncpool_lease *l,
		 unsigned int n, ap_release_token_fn *fn)
{
	struct put_back pb = *pbp;
	unsigned int j = put_leases(&pb, pool, l, n, fn, PUT_CACHE);

	put_back_done(pbp, &pb);
	return j;
}

static __attribute__((noinline)) unsigned int
put_leases_freelist(struct put_back *pbp, struct asyncpool *pool, struct asyncpool_lease *l,
		    unsigned int n, ap_release_token_fn *fn)
{
	struct put_back pb = *pbp;
	unsigned int j = put_leases(&pb, pool, l, n, fn, PUT_FREELIST);

	put_back_done(pbp, &pb);
	return j;
}

static __attribute__((noinline)) unsigned int
put_leases_lent(struct put_back *pbp, struct asyncpool *pool, struct asyncpool_lease *l,
		unsigned int n, ap_release_token_fn *fn)
{
	struct put_back pb = *pbp;
	unsigned int j = put_leases(&pb, pool, l, n, fn, PUT_FREELIST_LENT);

	put_back_done(pbp, &pb);
	return j;
}

/*
 * A pool whose caches lend: each buffer is decided by its owner
 * (pool_owner.c).  What the calling thread's cache owns
 * goes into it, with the check of ap_cache_push(), in one loop per
 * chunk of AP_BULK_CHUNK with what it needs in registers; the rest
 * (another owner's, a lease lent by no one, a stale or double copy) is
 * gathered as tokens and, once the caller left its cache, goes one by
 * one to ap_owner_release(), which decides and counts it.
 */
struct own_put {
	ap_word          *state;
	_Atomic uint32_t *owner_of;
	_Atomic uint32_t *released;
	struct ap_cache  *c;            /* entered */
	uint64_t         *top;          /* &c->tok[c->n] */
	uint64_t          word;         /* ap_owned_word(c's id, 0) */
	uint32_t          id, size;
	uint64_t         *rest, *back; /* rest[] up to back: for ap_owner_release() */
};

static inline void own_begin(struct own_put *op, struct asyncpool *pool, struct ap_cache *c,
			     uint64_t *rest)
{
	op->state = pool->fl.state;
	op->owner_of = pool->owner_of;
	op->released = pool->released;
	op->c = c;
	op->top = &c->tok[ap_cache_n(c)];
	op->id = c->id;
	op->word = ap_owned_word(c->id, 0);
	op->size = c->size;
	op->rest = op->back = rest;
}

/* How many the cache holds now. */
static inline uint32_t own_n(const struct own_put *op)
{
	return (uint32_t)(op->top - op->c->tok);
}

/*
 * Room in the cache for m more: a batch flushed if it is full, so that
 * the loops check the room once per stretch, not per buffer, and call
 * nothing inside (a call there cost their registers).
 */
static inline uint32_t own_room(struct own_put *op, uint32_t m)
{
	uint32_t n = own_n(op);

	if (AP_UNLIKELY(n == op->size)) {
		ap_cache_set_n(op->c, n);
		ap_cache_flush_batch(op->c);
		n = ap_cache_n(op->c);
		op->top = &op->c->tok[n];
	}
	return op->size - n < m ? op->size - n : m;
}

/* Token t released into the cache (room for it), if ap_owner_back(): the next generation's entry. */
static inline __attribute__((always_inline)) void own_one(struct own_put *op, uint64_t t)
{
	uint32_t idx = AP_TOKEN_INDEX(t);
	uint32_t o = atomic_load_explicit(&op->owner_of[idx], memory_order_relaxed);

	if (AP_LIKELY(ap_owner_back(op->state, o, op->released, op->id, op->word, idx,
				    AP_TOKEN_GEN(t))))
		*op->top++ = AP_TOKEN_NEXT(t);
	else
		*op->back++ = t;
}

/* Write back what the loop changed, the taken ones (lent) counted back. */
static inline void own_end(struct own_put *op, uint32_t taken)
{
	ap_cache_add_lent(op->c, -(int64_t)taken);
	ap_cache_set_n(op->c, own_n(op));
}

/* The ones refused by the loop, or not tried: decided one by one (counted). */
static uint32_t own_rest(struct asyncpool *pool, const uint64_t *rest, uint32_t r)
{
	uint32_t bad = 0;

	for (uint32_t j = 0; j < r; j++)
		bad += ap_cache_owner_release(pool, AP_TOKEN_INDEX(rest[j]),
					      AP_TOKEN_GEN(rest[j])) != 0;
	return bad;
}

/* Tokens tok[0..k) (k <= AP_BULK_CHUNK) into c (entered): how many left in rest[]. */
static __attribute__((noinline)) uint32_t own_tokens(struct asyncpool *pool, struct ap_cache *c,
						     const uint64_t *tok, uint32_t k,
						     uint64_t *rest)
{
	struct own_put op;

	own_begin(&op, pool, c, rest);
	for (uint32_t j = 0; j < k;) {
		const uint64_t *t = &tok[j], *end = t + own_room(&op, k - j);

		j += end - t;
		for (; t < end; t++)
			own_one(&op, *t);
	}
	uint32_t r = (uint32_t)(op.back - op.rest);

	own_end(&op, k - r);
	return r;
}

/*
 * Tokens tok[0..k) (k <= AP_BULK_CHUNK) of a pool that lends, into the
 * calling thread's cache c if it owns them, the rest each to its owner.
 * How many were refused (counted already).
 */
static uint32_t own_chunk(struct asyncpool *pool, struct ap_cache *c, const uint64_t *tok,
			  uint32_t k)
{
	uint64_t rest[AP_BULK_CHUNK];
	uint32_t r;

	if (AP_LIKELY(c && ap_cache_enter(c))) {
		/* A cache of no entries only lends (pool_lend.c). */
		r = AP_LIKELY(c->size) ? own_tokens(pool, c, tok, k, rest) :
					 ap_lend_put(pool, c, tok, k, rest);
		ap_cache_leave(c);
		return AP_UNLIKELY(r) ? own_rest(pool, rest, r) : 0;
	}
	/* No cache, or a flusher has it: each to its owner. */
	return own_rest(pool, tok, k);
}

/*
 * Release n tokens of a pool that lends (ap_token_ok() accepted them),
 * a chunk at a time, straight from the caller's array.  How many were
 * refused (counted already).
 */
static uint32_t put_tokens_owned(struct asyncpool *pool, const uint64_t *tokens, unsigned int n)
{
	struct ap_cache *c = ap_cache_of(pool);
	uint32_t bad = 0;

	for (unsigned int j = 0; j < n; j += AP_BULK_CHUNK)
		bad += own_chunk(pool, c, &tokens[j], n - j < AP_BULK_CHUNK ? n - j : AP_BULK_CHUNK);
	return bad;
}

/*
 * release_run() of a pool that lends: the run's tokens, AP_BULK_CHUNK
 * leases at a time, as tokens go back.  Gathered first, each lease
 * cleared: a loop that also walked the leases kept too much live, and
 * spilled (cachegrind: 7 instructions per buffer more).
 */
static unsigned int release_run_owned(struct asyncpool *pool, struct asyncpool_lease *l,
				      unsigned int n, ap_release_token_fn *fn)
{
	struct ap_cache *c = ap_cache_of(pool);
	uint32_t count = pool->fl.count;
	uint64_t tok[AP_BULK_CHUNK];
	unsigned int j = 0;

	while (j < n) {
		unsigned int end = n - j < AP_BULK_CHUNK ? n : j + AP_BULK_CHUNK;
		uint32_t k = 0;

		for (; j < end && same_run(&l[j], fn, pool); j++) {
			uint64_t t = ap_lease_token(&l[j]);

			l[j].release.fn = NULL;
			tok[k] = t;                     /* kept if in range */
			k += AP_TOKEN_INDEX(t) < count;
		}
		if (k)
			(void)own_chunk(pool, c, tok, k);
		if (j < end)
			break;          /* the run ended */
	}
	return j;
}

static unsigned int release_run(struct asyncpool *pool, struct asyncpool_lease *l,
				unsigned int n, ap_release_token_fn *fn)
{
	uint32_t idx[AP_BULK_CHUNK];
	struct put_back pb;
	unsigned int j;

	if (pool->fl.lazy)
		return release_run_owned(pool, l, n, fn);

	put_begin(&pb, pool, fn == ap_cache_recycle, idx);
	if (pb.c)
		j = put_leases_cache(&pb, pool, l, n, fn);
	else if (pool->fl.lazy)
		j = put_leases_lent(&pb, pool, l, n, fn);
	else
		j = put_leases_freelist(&pb, pool, l, n, fn);
	(void)put_end(&pb);
	return j;
}

AP_EXPORT void asyncpool_release_bulk(struct asyncpool_lease *leases, unsigned int n)
{
	unsigned int i = 0;

	if (!leases)
		return;
	while (i < n) {
		struct asyncpool_lease *l = &leases[i];

		if (!l->release.fn) {
			i++;
		} else if (ap_release_is(l, ap_cache_recycle)) {
			/* A run of leases of the same pool goes back in one step. */
			i += release_run(l->release.ctx, l, n - i, ap_cache_recycle);
		} else if (ap_release_is(l, ap_pool_recycle)) {
			i += release_run(l->release.ctx, l, n - i, ap_pool_recycle);
		} else {
			/* A recv ring or another owner: its own callback. */
			asyncpool_lease_release(l);
			i++;
		}
	}
}

/* ---- bulk by token: 8 bytes a buffer, no lease built ---- */

/* As put_leases_cache() and put_leases_freelist(), for tokens. */
static __attribute__((noinline)) void put_tokens_cache(struct put_back *pbp,
						       const uint64_t *tokens, unsigned int n)
{
	struct put_back pb = *pbp;

	for (unsigned int j = 0; j < n; j++)
		put_one(&pb, AP_TOKEN_INDEX(tokens[j]), AP_TOKEN_GEN(tokens[j]), PUT_CACHE);
	put_back_done(pbp, &pb);
}

static __attribute__((noinline)) void put_tokens_freelist(struct put_back *pbp,
							  const uint64_t *tokens, unsigned int n)
{
	struct put_back pb = *pbp;

	enum put_way way = pb.fl->lazy ? PUT_FREELIST_LENT : PUT_FREELIST;

	for (unsigned int j = 0; j < n; j++)
		put_one(&pb, AP_TOKEN_INDEX(tokens[j]), AP_TOKEN_GEN(tokens[j]), way);
	put_back_done(pbp, &pb);
}

/*
 * Release n tokens of pool that ap_token_ok() accepted, as a run of
 * leases goes back (put_back).  Returns the stale ones (counted).
 */
static uint32_t release_tokens(struct asyncpool *pool, const uint64_t *tokens, unsigned int n)
{
	uint32_t idx[AP_BULK_CHUNK];
	struct put_back pb;

	if (pool->fl.lazy)
		return put_tokens_owned(pool, tokens, n);

	put_begin(&pb, pool, pool->cache_size != 0, idx);
	if (pb.c)
		put_tokens_cache(&pb, tokens, n);
	else
		put_tokens_freelist(&pb, tokens, n);
	return put_end(&pb);
}

/* n tokens straight from the freelist, all or nothing (pop_records). */
static int pop_tokens(struct asyncpool *pool, uint64_t *tokens, unsigned int n)
{
	int rc;
	unsigned int got = pop_records(pool, (char *)tokens + AP_TOKEN_IDX_AT,
				       (char *)tokens + AP_TOKEN_GEN_AT, sizeof(*tokens), n, &rc);

	if (rc) {
		(void)release_tokens(pool, tokens, got);
		memset(tokens, 0, (size_t)n * sizeof(*tokens));
	}
	return rc;
}

/* n tokens, all or nothing, as acquire_leases; leaves c. */
static int acquire_tokens(struct asyncpool *pool, struct ap_cache *c, uint64_t *tokens,
			  unsigned int n)
{
	unsigned int j = 0;
	uint32_t idx = 0, gen = 0, lent = 0;
	int rc = 0;

	if (c && pool->fl.lazy && ap_cache_n(c) >= n) {
		tokens_lend(c, tokens, n);
		return 0;
	}
	if (c) {
		while (j < n && (rc = cache_next(pool, c, n - j, &idx, &gen, &lent)) > 0)
			tokens[j++] = AP_TOKEN_MAKE(gen, idx);
		ap_cache_add_lent(c, lent);
		ap_cache_leave(c);
	}
	if (!rc && j < n)
		rc = pop_tokens(pool, &tokens[j], n - j);
	if (rc < 0) {
		/* What was taken goes back (to the cache). */
		(void)release_tokens(pool, tokens, j);
		memset(tokens, 0, (size_t)n * sizeof(*tokens));
		return rc;
	}
	return 0;
}

/*
 * One token from a pool without caches that does not lend (a shared
 * one; a local one lends: ap_lend_token()): the single pop, as
 * asyncpool_acquire() does (a chain of one cost twice as much: 432
 * instructions a pair against 238).  What it returns is what the chain
 * would: 0, or -ENOBUFS or -EUCLEAN with the token zeroed.  A function
 * of its own: inside acquire_tokens_rest() it paid the bulk paths'
 * frame, 44 instructions a pair for a call and a shift.
 */
static __attribute__((noinline)) int acquire_one_uncached(struct asyncpool *pool,
							  uint64_t *token)
{
	uint32_t idx, gen;
	int rc = ap_pool_pop(pool, AP_K_LEASED, &idx, &gen);

	*token = rc ? 0 : AP_TOKEN_MAKE(gen, idx);
	return rc;
}

/*
 * One token of a pool without caches that lends, c the calling thread's
 * cache of it: ap_lend_token() with the lookup done.  Out of line, so
 * that the frame its pop needs is not the cached path's.
 */
static __attribute__((noinline)) int acquire_token_lent(struct asyncpool *pool,
							struct ap_cache *c, uint64_t *token)
{
	return AP_LIKELY(!c->size) ? ap_lend_token_own(pool, c, token) : ap_lend_token(pool, token);
}

static __attribute__((noinline)) int acquire_tokens_rest(struct asyncpool *pool,
							 uint64_t *tokens, unsigned int n)
{
	struct ap_cache *c;
	int rc;

	/* (asyncpool_acquire_tokens() tried the thread's cache, a shared
	 * pool's too, and took one token of a pool without caches.) */
	/* One call site each, so that both stay inline. */
	for (bool again = false;; again = true) {
		rc = bulk_begin(pool, tokens, n, &c);
		if (rc <= 0)
			return rc;
		rc = acquire_tokens(pool, c, tokens, n);
		if (again || !bulk_short(pool, rc))
			return rc;
	}
}

AP_EXPORT int asyncpool_acquire_tokens(struct asyncpool *pool, uint64_t *tokens, unsigned int n)
{
	AP_TEST_EXPORTED_CALL();
	struct ap_cache *c = ap_tc_last;
	uint32_t idx, gen;
	uint64_t t;

	/* One token, from the calling thread's cache: as asyncpool_acquire(),
	 * with no stack frame. */
	if (AP_LIKELY(n == 1 && tokens && c->pool == pool && pool)) {
		if (AP_LIKELY(pool->fl.lazy)) {
			/* A pool without caches lends: its single lend (caches,
			 * once on, stay on: asyncpool_set_cache(3)). */
			if (!pool->cache_size)
				return acquire_token_lent(pool, c, tokens);
			if (AP_LIKELY(ap_cache_take_gen(pool, &idx, &gen))) {
				tokens[0] = AP_TOKEN_MAKE(gen, idx);
				return 0;
			}
		} else if (AP_LIKELY(t = ap_cache_take_shared(pool, c))) {
			/* A shared pool's: a store to the word. */
			tokens[0] = t;
			return 0;
		}
	}
	if (n == 1 && tokens && pool && !pool->cache_size)
		return pool->fl.lazy ? ap_lend_token(pool, tokens) :
				       acquire_one_uncached(pool, tokens);
	return acquire_tokens_rest(pool, tokens, n);
}

/*
 * Whether ap_token_ok() accepts every one of tokens[0..n) (n > 0): a
 * generation, an index in range.  Two tokens in the four 32-bit lanes
 * of a vector, two vectors a step, and the odd one by ap_token_ok(),
 * with no branch per token: a bulk is almost always all good, and the
 * check of each token one by one cost 10 instructions per buffer, this
 * one 4.  A lane is good if lane - sub < lim, unsigned (an index below
 * count; a generation minus 1 below 0xffffffff, that is, not 0),
 * computed as the signed lane + (2^31 - sub) < lim ^ 2^31: one add and
 * one compare.
 */
static inline ap_v4i tokens_ok2(const uint64_t *t, ap_v4u add, ap_v4i lim)
{
	ap_v4u v;

	memcpy(&v, t, sizeof(v));
	return (ap_v4i)(v + add) < lim;
}

static bool tokens_ok(const struct asyncpool *pool, const uint64_t *tokens, unsigned int n)
{
	const int32_t c = (int32_t)(pool->fl.count ^ 0x80000000u), g = 0x7fffffff;
#if AP_TOKEN_IDX_AT == 0
	const ap_v4u add = { 0x80000000u, 0x7fffffffu, 0x80000000u, 0x7fffffffu };
	const ap_v4i lim = { c, g, c, g };
#else
	const ap_v4u add = { 0x7fffffffu, 0x80000000u, 0x7fffffffu, 0x80000000u };
	const ap_v4i lim = { g, c, g, c };
#endif
	const uint64_t *t = tokens, *end = tokens + n;
	ap_v4i ok = { -1, -1, -1, -1 };

	for (; end - t >= 4; t += 4)
		ok &= tokens_ok2(t, add, lim) & tokens_ok2(t + 2, add, lim);
	if (end - t >= 2) {
		ok &= tokens_ok2(t, add, lim);
		t += 2;
	}
	if (t < end && !ap_token_ok(pool, *t))
		return false;
	return (ok[0] & ok[1] & ok[2] & ok[3]) == -1;
}

AP_EXPORT int asyncpool_release_tokens(struct asyncpool *pool, const uint64_t *tokens,
				       unsigned int n)
{
	AP_TEST_EXPORTED_CALL();
	if (!pool || (!tokens && n) || n > pool->fl.count)
		return -EINVAL;
	/* Bad input changes nothing: every token is checked first. */
	if (n && !tokens_ok(pool, tokens, n))
		return -EINVAL;
	return n && release_tokens(pool, tokens, n) ? -ESTALE : 0;
}
