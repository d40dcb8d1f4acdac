/* SPDX-License-Identifier: MIT */
/*
 * `asyncpool bench 'inline-*'`: what each guarantee of the inline token
 * pair costs (issue 34).  Each case is the pair of inline.h's
 * __asyncpool_take() and __asyncpool_put() on the calling thread's cache,
 * rebuilt here with one part left out, so that its time beside the full
 * rebuild (inline-pair) and token-cached in one run is that part's
 * price.  Variants for measuring, not for use: one thread, nothing else
 * touching the pool, and the cache's n written back as the library keeps
 * it when the loop ends.  Any refusal aborts: a variant never falls back.
 * The -two-arrays variants keep the cache's entries as layout version 2
 * did, an index array and a generation array (of their own), where
 * version 3 keeps tokens: what that change saved; inline-bulk32* rebuild
 * the bulk pair of 32 (__asyncpool_take_n(), __asyncpool_put_n()).
 * inline-shared-pair rebuilds a shared pool's cached token pair (the
 * library's ap_cache_take_shared() and ap_cache_put_shared()), every
 * check and the release's CAS kept: built to measure what inline shared
 * paths would give (issue 34, item 6) before the header had them; it
 * reads the word's format and the cache's owned word as the header does.
 * inline-lease-bulk32 is inline-bulk32 with leases, as bulk32-cached
 * (asyncpool_acquire_bulk(), asyncpool_release_bulk()) moves them: each
 * lease built as the header's __asyncpool_lease() builds one, and read
 * back as a run of the pool's (callback and pool compared, the token in
 * one load, the callback cleared): what inline lease bulks would give.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <asyncpool.h>

#include "tool.h"

#ifdef ASYNCPOOL_INLINE_PATHS

/* The parts a variant keeps. */
#define INL_WINDOW      1u      /* busy, the gate; the leave: n and busy = 0 in one store */
#define INL_OWNER_HINT  2u      /* owner_of[] read before the word */
#define INL_RELEASED    4u      /* the released[] hint stored */
#define INL_RECHECK     8u      /* the release looks up the thread's cache again */
#define INL_WORD        16u     /* the word compared and stored with the next generation */
#define INL_SPLIT_LEAVE 32u     /* layout 1's leave: n, then busy = 0 (one store more) */
#define INL_TWO_ARRAYS  64u     /* layout 2's entries: idx[], gen[], arrays of the variant's */
#define INL_ALL (INL_WINDOW | INL_OWNER_HINT | INL_RELEASED | INL_RECHECK | INL_WORD)

static const unsigned inl_parts[] = {
	[BENCH_INLINE_PAIR] = INL_ALL,
	[BENCH_INLINE_NO_WINDOW] = INL_ALL & ~INL_WINDOW,
	[BENCH_INLINE_SPLIT_LEAVE] = INL_ALL | INL_SPLIT_LEAVE,
	[BENCH_INLINE_NO_OWNER_HINT] = INL_ALL & ~INL_OWNER_HINT,
	[BENCH_INLINE_NO_RELEASED] = INL_ALL & ~INL_RELEASED,
	[BENCH_INLINE_NO_RECHECK] = INL_ALL & ~INL_RECHECK,
	[BENCH_INLINE_BARE] = 0,
	[BENCH_INLINE_TWO_ARRAYS] = INL_ALL | INL_TWO_ARRAYS,
	[BENCH_INLINE_BULK32] = INL_ALL,
	[BENCH_INLINE_BULK32_TWO_ARRAYS] = INL_ALL | INL_TWO_ARRAYS,
};

/* The cache's entries as layout 2 kept them, for an INL_TWO_ARRAYS loop: idx[], then gen[]. */
static uint32_t *inl_two_arrays_of(const struct asyncpool_inline_cache *c)
{
	uint32_t *idx = malloc(2 * (size_t)c->size * sizeof(*idx));

	if (!idx)
		abort();
	for (uint32_t j = 0; j < c->n; j++) {
		idx[j] = (uint32_t)c->tok[j];
		idx[c->size + j] = (uint32_t)(c->tok[j] >> 32);
	}
	return idx;
}

/* Back into the cache's tokens, as the library keeps them. */
static void inl_two_arrays_back(struct asyncpool_inline_cache *c, uint32_t *idx)
{
	for (uint32_t j = 0; j < c->n; j++)
		c->tok[j] = (uint64_t)idx[c->size + j] << 32 | idx[j];
	free(idx);
}

static struct asyncpool_inline_cache *inl_cache(struct asyncpool *pool)
{
	struct asyncpool_inline_cache *c = asyncpool_inline_tc;

	(void)pool;     /* compared with the gate on entering, as the header does */
	if (__builtin_expect(c->abi != ASYNCPOOL_INLINE_ABI, 0))
		abort();
	return c;
}

/* Enter the cache of pool the way parts says (busy, then the gate) and return its count. */
static inline __attribute__((always_inline)) uint32_t
inl_enter(struct asyncpool_inline_cache *c, const struct asyncpool *pool, const unsigned parts)
{
	if (parts & INL_WINDOW) {
		__atomic_store_n(&c->busy, 1, __ATOMIC_RELAXED);
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		if (__builtin_expect(__atomic_load_n(&c->gate, __ATOMIC_ACQUIRE) != pool, 0))
			abort();
	} else if (__builtin_expect(c->pool != pool, 0)) {
		abort();
	}
	return __atomic_load_n(&c->n, __ATOMIC_RELAXED);
}

/* Store the new count n and leave the way parts says. */
static inline __attribute__((always_inline)) void
inl_leave(struct asyncpool_inline_cache *c, uint32_t n, const unsigned parts)
{
	if ((parts & INL_WINDOW) && !(parts & INL_SPLIT_LEAVE)) {
		__asyncpool_leave_n(c, n);
		return;
	}
	__atomic_store_n(&c->n, n, __ATOMIC_RELAXED);
	if (parts & INL_WINDOW)
		__atomic_store_n(&c->busy, 0, __ATOMIC_RELEASE);
}

/* The loop, specialised by the compiler for each constant parts. */
static inline __attribute__((always_inline)) uint64_t inl_loop(struct asyncpool *pool,
							      unsigned long ops,
							      const unsigned parts)
{
	struct asyncpool_inline_cache *c = inl_cache(pool);
	uint32_t *const cidx = (parts & INL_TWO_ARRAYS) ? inl_two_arrays_of(c) : NULL;
	uint32_t *const cgen = cidx ? cidx + c->size : NULL;
	uint64_t acc = 0;

	for (unsigned long i = 0; i < ops; i++) {
		uint32_t n, idx, gen;
		uint64_t t, w;

		/* take */
		if (parts & INL_RECHECK)
			c = inl_cache(pool);
		n = inl_enter(c, pool, parts);
		if (__builtin_expect(n == 0, 0))
			abort();
		if (parts & INL_TWO_ARRAYS)
			t = (uint64_t)cgen[n - 1] << 32 | cidx[n - 1];
		else
			t = c->tok[n - 1];
		inl_leave(c, n - 1, parts);
		__asm__ volatile("" : "+r"(t));         /* the caller's use of the token */
		acc += (uint32_t)t;

		/* put */
		if (parts & INL_RECHECK)
			c = inl_cache(pool);
		idx = (uint32_t)t;
		gen = (uint32_t)(t >> 32);
		if (__builtin_expect(idx >= c->count || gen - 1u >= 0xfffffffeu, 0))
			abort();
		n = inl_enter(c, pool, parts);
		w = c->owned | gen;
		if (__builtin_expect(n == c->size, 0))
			abort();
		if ((parts & INL_OWNER_HINT) &&
		    __builtin_expect(__atomic_load_n(&c->owner_of[idx], __ATOMIC_RELAXED) != c->id, 0))
			abort();
		if (parts & INL_WORD) {
			if (__builtin_expect(__atomic_load_n(&c->state[idx], __ATOMIC_RELAXED) != w, 0))
				abort();
			__atomic_store_n(&c->state[idx], w + 1, __ATOMIC_RELAXED);
		}
		if (parts & INL_RELEASED)
			__atomic_store_n(&c->released[idx], gen, __ATOMIC_RELAXED);
		if (parts & INL_TWO_ARRAYS) {
			cidx[n] = idx;
			cgen[n] = gen + 1;
		} else {
			c->tok[n] = t + ((uint64_t)1 << 32);
		}
		inl_leave(c, n + 1, parts);
	}
	if (parts & INL_TWO_ARRAYS)
		inl_two_arrays_back(c, cidx);
	if (!(parts & INL_WORD) && ops) {
		/* The generation moved in the entry only: put the word where
		 * the cache's entry says, as the library would have. */
		uint64_t t = c->tok[c->n - 1];

		__atomic_store_n(&c->state[(uint32_t)t], c->owned | (t >> 32), __ATOMIC_RELAXED);
	}
	return acc;
}

/*
 * The bulk pair of 32, __asyncpool_take_n() and __asyncpool_put_n()
 * rebuilt (INL_TWO_ARRAYS: layout 2's entries); ops buffers in all.
 */
/*
 * The bulk put of the k tokens t[] into c, as __asyncpool_put_n() makes
 * it: every token checked first, then each decided (entries in cidx[]
 * and cgen[] with INL_TWO_ARRAYS).
 */
static inline __attribute__((always_inline)) void
inl_bulk_put(struct asyncpool_inline_cache *c, const struct asyncpool *pool, const uint64_t *t,
	     const uint32_t k, const unsigned parts, uint32_t *cidx, uint32_t *cgen)
{
	uint32_t m, j, ok = 1, count = c->count;

	for (j = 0; j < k; j++)
		ok &= ((uint32_t)t[j] < count) & ((uint32_t)(t[j] >> 32) - 1u < 0xfffffffeu);
	if (__builtin_expect(!ok, 0))
		abort();
	m = inl_enter(c, pool, parts);
	if (__builtin_expect(k > c->size - m, 0))
		abort();
	{
		uint64_t *const state = c->state;
		uint32_t *const owner_of = c->owner_of, *const released = c->released;
		uint32_t *const ci = cidx ? cidx + m : NULL, *const cg = cgen ? cgen + m : NULL;
		uint64_t *const ct = c->tok + m;
		const uint64_t owned = c->owned;
		const uint32_t id = c->id;

		for (j = 0; j < k; j++) {
			uint32_t idx = (uint32_t)t[j], gen = (uint32_t)(t[j] >> 32);
			uint64_t w = owned | gen;

			if (__builtin_expect(__atomic_load_n(&owner_of[idx], __ATOMIC_RELAXED) != id ||
					     __atomic_load_n(&state[idx], __ATOMIC_RELAXED) != w, 0))
				abort();
			__atomic_store_n(&state[idx], w + 1, __ATOMIC_RELAXED);
			__atomic_store_n(&released[idx], gen, __ATOMIC_RELAXED);
			if (parts & INL_TWO_ARRAYS) {
				ci[j] = idx;
				cg[j] = gen + 1;
			} else {
				ct[j] = t[j] + ((uint64_t)1 << 32);
			}
		}
	}
	inl_leave(c, m + k, parts);
}

static inline __attribute__((always_inline)) uint64_t
inl_bulk_loop(struct asyncpool *pool, unsigned long ops, const unsigned parts)
{
	enum { K = 32 };
	struct asyncpool_inline_cache *c = inl_cache(pool);
	uint32_t *const cidx = (parts & INL_TWO_ARRAYS) ? inl_two_arrays_of(c) : NULL;
	uint32_t *const cgen = cidx ? cidx + c->size : NULL;
	uint64_t t[K], acc = 0;

	for (unsigned long i = 0; i < ops; i += K) {
		uint32_t m, j;

		/* take the top K, in stack order */
		c = inl_cache(pool);
		m = inl_enter(c, pool, parts);
		if (__builtin_expect(m < K, 0))
			abort();
		if (parts & INL_TWO_ARRAYS) {
			const uint32_t *const ci = cidx + m - K, *const cg = cgen + m - K;

			for (j = 0; j < K; j++)
				t[j] = (uint64_t)cg[j] << 32 | ci[j];
		} else {
			memcpy(t, c->tok + m - K, sizeof(t));
		}
		inl_leave(c, m - K, parts);
		__asm__ volatile("" : : "r"(t) : "memory");     /* the caller's use of the tokens */
		acc += (uint32_t)t[0];

		/* put K back: every token checked first, then each decided */
		inl_bulk_put(inl_cache(pool), pool, t, K, parts, cidx, cgen);
	}
	if (parts & INL_TWO_ARRAYS)
		inl_two_arrays_back(c, cidx);
	return acc;
}

/*
 * The bulk pair of K leases, inline: see the file's head.  floor: the
 * leases' constant fields kept in registers and read back unchecked
 * (the token alone, the callback cleared), the least a lease can cost
 * beside inline-bulk32's pair of tokens.
 */
static inline __attribute__((always_inline)) uint64_t
inl_lease_bulk(struct asyncpool *pool, unsigned long ops, const int floor)
{
	enum { K = 32 };
	struct asyncpool_inline_cache *c;
	struct asyncpool_lease l[K];
	uint64_t t[K], acc = 0;

	for (unsigned long i = 0; i < ops; i += K) {
		uint32_t m, j, ok = 1;

		c = inl_cache(pool);
		m = inl_enter(c, pool, INL_ALL);
		if (__builtin_expect(m < K, 0))
			abort();
		if (floor) {
			struct asyncpool_region *const region = c->region;
			const size_t bs = c->buffer_size;
			void (*const fn)(void *, uint32_t) = c->recycle;
			const uint64_t *const top = c->tok + m - K;

			for (j = 0; j < K; j++) {
				const uint64_t tk = top[j];

				l[j].span.region = region;
				l[j].span.offset = (size_t)(uint32_t)tk * bs;
				l[j].span.length = bs;
				l[j].release.fn = fn;
				l[j].release.ctx = pool;
				__builtin_memcpy(&l[j].buffer_index, &tk, sizeof(tk));
			}
		} else {
			for (j = 0; j < K; j++)
				__asyncpool_lease(c, pool, c->tok[m - K + j], &l[j]);
		}
		inl_leave(c, m - K, INL_ALL);
		__asm__ volatile("" : : "r"(l) : "memory");     /* the caller's use of the leases */
		acc += l[0].buffer_index;

		/* The run of the pool's leases, gathered as tokens, then put back. */
		c = inl_cache(pool);
		for (j = 0; j < K; j++) {
			uint64_t tk;

			if (!floor)
				ok &= (l[j].release.fn == c->recycle) & (l[j].release.ctx == (void *)pool);
			__builtin_memcpy(&tk, &l[j].buffer_index, sizeof(tk));
			l[j].release.fn = NULL;
			t[j] = tk;
		}
		if (__builtin_expect(!ok, 0))
			abort();
		inl_bulk_put(c, pool, t, K, INL_ALL, NULL, NULL);
	}
	return acc;
}

static __attribute__((noinline)) uint64_t inl_lease_bulk_loop(struct asyncpool *pool,
							       unsigned long ops)
{
	return inl_lease_bulk(pool, ops, 0);
}

static __attribute__((noinline)) uint64_t inl_lease_bulk_floor(struct asyncpool *pool,
								unsigned long ops)
{
	return inl_lease_bulk(pool, ops, 1);
}

/*
 * The shared cache's token pair, inline.  Take: the top entry's word
 * must be CACHED by this process at the entry's generation; it becomes
 * LEASED by a store (this process alone writes a word it cached).
 * Release: the word must be LEASED, any holder, at the token's
 * generation; a CAS makes it CACHED by this process at the next one (a
 * copy released elsewhere at once must lose), and the entry is the
 * next lease's.  The header's __asyncpool_take_shared() and
 * __asyncpool_put_shared() (since 1.7) are this pair; the rebuild keeps
 * the token in a register, as inline-pair does.
 */
static __attribute__((noinline)) uint64_t inl_shared_loop(struct asyncpool *pool, unsigned long ops)
{
	struct asyncpool_inline_cache *c = asyncpool_inline_tc;
	uint64_t acc = 0;

	if (c->abi != ASYNCPOOL_INLINE_ABI_SHARED || c->pool != pool || c->n == 0)
		abort();
	for (unsigned long i = 0; i < ops; i++) {
		uint32_t n, idx, gen;
		uint64_t t, w;

		/* take */
		c = asyncpool_inline_tc;
		if (__builtin_expect(c->abi != ASYNCPOOL_INLINE_ABI_SHARED, 0))
			abort();
		n = inl_enter(c, pool, INL_WINDOW);
		if (__builtin_expect(n == 0, 0))
			abort();
		t = c->tok[n - 1];
		idx = (uint32_t)t;
		gen = (uint32_t)(t >> 32);
		w = c->owned | gen;                     /* CACHED by this process */
		if (__builtin_expect(__atomic_load_n(&c->state[idx], __ATOMIC_RELAXED) != w, 0))
			abort();
		__atomic_store_n(&c->state[idx], w - __ASYNCPOOL_W_LEASED, __ATOMIC_RELAXED);
		inl_leave(c, n - 1, INL_WINDOW);
		__asm__ volatile("" : "+r"(t));         /* the caller's use of the token */
		acc += (uint32_t)t;

		/* put */
		c = asyncpool_inline_tc;
		if (__builtin_expect(c->abi != ASYNCPOOL_INLINE_ABI_SHARED, 0))
			abort();
		idx = (uint32_t)t;
		gen = (uint32_t)(t >> 32);
		if (__builtin_expect(idx >= c->count || gen - 1u >= 0xfffffffeu, 0))
			abort();
		n = inl_enter(c, pool, INL_WINDOW);
		if (__builtin_expect(n == c->size, 0))
			abort();
		w = __atomic_load_n(&c->state[idx], __ATOMIC_RELAXED);
		if (__builtin_expect((w & ~__ASYNCPOOL_W_HOLDER) != (__ASYNCPOOL_W_LEASED | gen), 0) ||
		    __builtin_expect(!__atomic_compare_exchange_n(&c->state[idx], &w,
								  c->owned | (gen + 1), false,
								  __ATOMIC_RELAXED, __ATOMIC_RELAXED), 0))
			abort();
		c->tok[n] = t + ((uint64_t)1 << 32);
		inl_leave(c, n + 1, INL_WINDOW);
	}
	return acc;
}

/* Each variant a function of its own: one loop's registers do not crowd another's. */
#define INL_FN(k, loop)                                                              \
	static __attribute__((noinline)) uint64_t inl_##k(struct asyncpool *pool,   \
							  unsigned long ops)          \
	{                                                                            \
		return loop(pool, ops, inl_parts[k]);                                \
	}
INL_FN(BENCH_INLINE_PAIR, inl_loop)
INL_FN(BENCH_INLINE_NO_WINDOW, inl_loop)
INL_FN(BENCH_INLINE_SPLIT_LEAVE, inl_loop)
INL_FN(BENCH_INLINE_NO_OWNER_HINT, inl_loop)
INL_FN(BENCH_INLINE_NO_RELEASED, inl_loop)
INL_FN(BENCH_INLINE_NO_RECHECK, inl_loop)
INL_FN(BENCH_INLINE_BARE, inl_loop)
INL_FN(BENCH_INLINE_TWO_ARRAYS, inl_loop)
INL_FN(BENCH_INLINE_BULK32, inl_bulk_loop)
INL_FN(BENCH_INLINE_BULK32_TWO_ARRAYS, inl_bulk_loop)

#define INL_CASE(k)                                                                  \
	case k:                                                                      \
		return inl_##k(pool, ops);

uint64_t bench_inline(enum bench_inline_kind kind, struct asyncpool *pool, unsigned long ops)
{
	uint64_t t;

	/* One pair through the library first: the thread's cache is pool's. */
	if (asyncpool_acquire_tokens(pool, &t, 1) || asyncpool_release_token(pool, t))
		abort();
	/* The bulk pair takes 32 from the cache: give it 32 released here. */
	if (kind == BENCH_INLINE_BULK32 || kind == BENCH_INLINE_BULK32_TWO_ARRAYS ||
	    kind == BENCH_INLINE_LEASE_BULK32 || kind == BENCH_INLINE_LEASE_BULK32_FLOOR) {
		uint64_t b[32];

		if (asyncpool_acquire_tokens(pool, b, 32) || asyncpool_release_tokens(pool, b, 32))
			abort();
	}
	if (kind == BENCH_INLINE_SHARED)
		return inl_shared_loop(pool, ops);
	if (kind == BENCH_INLINE_LEASE_BULK32)
		return inl_lease_bulk_loop(pool, ops);
	if (kind == BENCH_INLINE_LEASE_BULK32_FLOOR)
		return inl_lease_bulk_floor(pool, ops);
	switch (kind) {
		INL_CASE(BENCH_INLINE_PAIR)
		INL_CASE(BENCH_INLINE_NO_WINDOW)
		INL_CASE(BENCH_INLINE_SPLIT_LEAVE)
		INL_CASE(BENCH_INLINE_NO_OWNER_HINT)
		INL_CASE(BENCH_INLINE_NO_RELEASED)
		INL_CASE(BENCH_INLINE_NO_RECHECK)
		INL_CASE(BENCH_INLINE_BARE)
		INL_CASE(BENCH_INLINE_TWO_ARRAYS)
		INL_CASE(BENCH_INLINE_BULK32)
		INL_CASE(BENCH_INLINE_BULK32_TWO_ARRAYS)
	case BENCH_INLINE_SHARED:
	case BENCH_INLINE_LEASE_BULK32:
	case BENCH_INLINE_LEASE_BULK32_FLOOR:
		break;
	}
	abort();
}

#endif /* ASYNCPOOL_INLINE_PATHS */
