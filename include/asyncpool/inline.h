/* SPDX-License-Identifier: MIT */
/*
 * What the inline fast paths of pool.h and span.h read (since 1.4):
 * the calling thread's cache, as the library publishes it.  Part of
 * the ABI, with its own version: the library writes the version of
 * this layout that it implements into every cache it lets the inline
 * code use (abi), and the inline code compares it with the version it
 * was compiled for and takes the exported call when they differ.  A
 * program built against this header therefore keeps working, through
 * the exported calls, with a later library whose layout differs
 * (asyncpool-inline(7)).
 *
 * Nothing here is for a program to call or read directly: use the
 * functions of pool.h and span.h.  Define ASYNCPOOL_NO_INLINE before
 * including <asyncpool.h> to call the exported functions only.
 */
#ifndef ASYNCPOOL_INLINE_H
#define ASYNCPOOL_INLINE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct asyncpool;
struct asyncpool_region;

/*
 * ThreadSanitizer keys a release and an acquire by address, so it does
 * not see the 32-bit load of busy synchronise with the 64-bit store of
 * n and busy: under it, the leave stores them one at a time (as version
 * 1 did; the layout is the same).
 */
#if defined(__SANITIZE_THREAD__)
#define __ASYNCPOOL_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define __ASYNCPOOL_TSAN 1
#endif
#endif

/* The version of struct asyncpool_inline_cache this header describes. */
#define ASYNCPOOL_INLINE_ABI 3u

/*
 * The version the inline code requires (tests build it with another to
 * take the exported path); never 0, the version of no cache.
 */
#ifndef ASYNCPOOL_INLINE_ABI_EXPECTED
#define ASYNCPOOL_INLINE_ABI_EXPECTED ASYNCPOOL_INLINE_ABI
#endif

/*
 * The version a cache of a pool whose releases compare-and-swap the
 * buffer's word publishes (a shared pool's, since 1.7): this layout,
 * with state[] the words of asyncpool-shared(7) and owned the word of a
 * buffer this process cached, at generation 0; owner_of[], released[]
 * and id unused.  Bit 31 tells it from a local cache's version.
 */
#define ASYNCPOOL_INLINE_ABI_SHARED (ASYNCPOOL_INLINE_ABI | 0x80000000u)
#define __ASYNCPOOL_SHARED_EXPECTED (ASYNCPOOL_INLINE_ABI_EXPECTED | 0x80000000u)

/*
 * A shared pool's word (asyncpool-shared(7), "state"): kind in bits
 * 62-63 (1 LEASED, 2 CACHED), holder in bits 55-61, generation in 0-31.
 */
#define __ASYNCPOOL_W_LEASED ((uint64_t)1 << 62)
#define __ASYNCPOOL_W_HOLDER ((uint64_t)0x7f << 55)

/*
 * A cache's outboxes (layout version 3 since 1.8: in what version 3 had
 * reserved): the releases of buffers that other threads' caches lent,
 * gathered per owner, ASYNCPOOL_INLINE_OUTBOXES of them, the owner's
 * id modulo their number choosing one; the library sends a full batch
 * to its owner.  Written by the cache's owner inside its window, as the
 * cache; an outbox is given an owner by the library alone.
 */
#define ASYNCPOOL_INLINE_OUTBOXES 4u
#define ASYNCPOOL_INLINE_OUTBOX_MAX 128u
#define __ASYNCPOOL_OUTBOX_HINTED 0x80000000u  /* a token's index bit: the released[] hint written */

struct asyncpool_inline_outbox {
	uint32_t owner;                /* the owner id whose buffers it gathers, 0: none */
	uint32_t n;                    /* tokens in tok[] (read by other threads) */
	uint64_t tok[ASYNCPOOL_INLINE_OUTBOX_MAX]; /* a release's token, its index | HINTED */
};

/*
 * A thread's cache of one pool, layout version 3: 128 bytes, its first
 * cache line read by every fast path, its second by the releases, the
 * lease and (since 1.9) the gate.  Written by the owning thread, except
 * busy, bypass and gate (the window: a thread that takes the cache's
 * buffers sets bypass, closes the gate and waits while busy), and
 * everything but busy, n and the entries by the
 * library alone.  Version 1 (1.4) had n at offset 4 and busy apart
 * from it; version 2 (1.5) made n and busy one 8-byte word, so that the
 * owner leaves with the store of its new count (the entry still stores
 * busy alone: a store to n there could overwrite the count a thread
 * that took the cache wrote after the owner had read it); version 3
 * (1.6) keeps each entry as the token it lends, where 1 and 2 kept two
 * arrays, idx[] and gen[]: a take is one load, a put one store.  Since
 * 1.8 two of its reserved fields name the outboxes (above), which
 * readers before 1.8 ignore: a library that does not gather into them
 * in this format publishes outbox_limit 0 (as libraries before 1.8
 * do, whose reserved fields are 0), and the inline code then leaves
 * such a release to the exported call.  Since 1.9 a third, gate, is
 * the pool while the cache is open to its owner (it is the pool's, and
 * bypass is 0), NULL otherwise: the inline code compares it with the
 * pool once inside (__asyncpool_enter_pool()), one compare for the
 * pool and the window.  A library before 1.9 publishes 0 there, and
 * the inline code then calls it.
 */
struct asyncpool_inline_cache {
	uint32_t          abi;         /* ASYNCPOOL_INLINE_ABI, or another: the exported calls */
	uint32_t          bypass;      /* another thread has the cache: stay out */
	struct asyncpool *pool;        /* the pool this cache is of, or NULL */
	uint32_t          size;        /* entries it can hold */
	uint32_t          count;       /* the pool's buffers: indices below it */
	uint32_t          n __attribute__((aligned(8))); /* entries in tok[] */
	uint32_t          busy;        /* 1 while the owner is inside; n and busy: one word */
	uint64_t         *tok;         /* tok[j]: generation of its next lease << 32 | buffer index */
	struct asyncpool_inline_outbox *outboxes; /* since 1.8 (above) */
#if UINTPTR_MAX < UINT64_MAX
	uint32_t          __outboxes_pad; /* 8 bytes on every target, as reserved1 was */
#endif
	uint64_t          owned;       /* the state word of a buffer it owns (shared: caches), at generation 0 */
	uint32_t          id;          /* its owner id, as owner_of[] names it */
	uint32_t          outbox_limit; /* since 1.8: an outbox holds fewer than this; 0: no outboxes */
	uint64_t         *state;       /* the pool's state words: generation in bits 0-31 */
	uint32_t         *owner_of;    /* the pool's hint: which cache owns a buffer */
	uint32_t         *released;    /* the pool's hint: the last generation released */
	void            (*recycle)(void *ctx, uint32_t buffer_index); /* its leases' callback */
	struct asyncpool_region *region;
	size_t            buffer_size;
	struct asyncpool *gate;        /* since 1.9: pool while its owner may enter, else NULL (below) */
#if UINTPTR_MAX < UINT64_MAX
	uint32_t          __gate_pad;  /* 8 bytes on every target, as reserved[0] was */
#endif
	uint64_t          reserved1;
};

/*
 * The calling thread's cache of the pool it used last (in the library,
 * a cache that matches no pool if none).  Its address, for the tests
 * and for the ABI check: the inline code reads the thread variable.
 */
const struct asyncpool_inline_cache *asyncpool_inline_cache(void);

#if defined(__GNUC__) && defined(__linux__) && !defined(ASYNCPOOL_NO_INLINE)
#define ASYNCPOOL_INLINE_PATHS 1

#if ASYNCPOOL_INLINE_ABI_EXPECTED == 0
#error "ASYNCPOOL_INLINE_ABI_EXPECTED must not be 0"
#endif

/* The thread variable behind asyncpool_inline_cache(); never NULL. */
extern __thread struct asyncpool_inline_cache *asyncpool_inline_tc
	__attribute__((tls_model("initial-exec")));

/*
 * The public functions that pool.h and span.h define inline: GNU inline
 * (as glibc's), so that a call the compiler does not inline, or whose
 * address is taken, is the exported function.
 */
#ifdef __cplusplus
#define ASYNCPOOL_GNU_INLINE inline __attribute__((gnu_inline, always_inline))
#else
#define ASYNCPOOL_GNU_INLINE extern __inline__ __attribute__((gnu_inline, always_inline))
#endif
#define __asyncpool_likely(x)   __builtin_expect(!!(x), 1)
#define __asyncpool_unlikely(x) __builtin_expect(!!(x), 0)

/*
 * The calling thread's cache, if it is of the layout this header reads
 * (whose pool it is, __asyncpool_enter_pool() tells).  The version
 * first: nothing else of the layout is read or written unless it is
 * this header's.  A cache of no pool, or of a destroyed one, publishes
 * no version.
 */
ASYNCPOOL_GNU_INLINE struct asyncpool_inline_cache *
__asyncpool_local_cache(void)
{
	struct asyncpool_inline_cache *c = asyncpool_inline_tc;

	if (__asyncpool_likely(c->abi == ASYNCPOOL_INLINE_ABI_EXPECTED))
		return c;
	return NULL;
}

/* The same for a shared pool's cache (ASYNCPOOL_INLINE_ABI_SHARED). */
ASYNCPOOL_GNU_INLINE struct asyncpool_inline_cache *
__asyncpool_shared_cache(void)
{
	struct asyncpool_inline_cache *c = asyncpool_inline_tc;

	/* The version loaded again (an atomic load is not merged with the
	 * local check's): the local fast path then compares it in memory. */
	if (__asyncpool_likely(__atomic_load_n(&c->abi, __ATOMIC_RELAXED) == __ASYNCPOOL_SHARED_EXPECTED))
		return c;
	return NULL;
}

/*
 * The owner's window into its cache of pool (a local pool's, this
 * layout): busy, a compiler barrier, then gate, which the library
 * keeps at the pool while the cache is the pool's and no other thread
 * has it, and sets to NULL, with bypass, before a thread takes it.  One
 * load and compare say the cache is pool's and open.  0 otherwise.
 */
ASYNCPOOL_GNU_INLINE int
__asyncpool_enter_pool(struct asyncpool_inline_cache *c, const struct asyncpool *pool)
{
	__atomic_store_n(&c->busy, 1, __ATOMIC_RELAXED);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (__asyncpool_unlikely(__atomic_load_n(&c->gate, __ATOMIC_ACQUIRE) != pool)) {
		__atomic_store_n(&c->busy, 0, __ATOMIC_RELEASE);
		return 0;
	}
	return 1;
}

ASYNCPOOL_GNU_INLINE void
__asyncpool_leave(struct asyncpool_inline_cache *c)
{
	__atomic_store_n(&c->busy, 0, __ATOMIC_RELEASE);
}

/*
 * Leave with n entries: n and busy = 0 in one release store, where they
 * are one word (64-bit little-endian targets; two stores elsewhere, and
 * under ThreadSanitizer).  n
 * is ours to write only while busy: a thread that takes the cache waits
 * for busy = 0 before it writes n, and sees this n with it.
 */
ASYNCPOOL_GNU_INLINE void
__asyncpool_leave_n(struct asyncpool_inline_cache *c, uint32_t n)
{
#if __SIZEOF_POINTER__ == 8 && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ && \
	!defined(__ASYNCPOOL_TSAN)
	typedef uint64_t __attribute__((may_alias)) __asyncpool_word;

	__atomic_store_n((__asyncpool_word *)&c->n, (uint64_t)n, __ATOMIC_RELEASE);
#else
	__atomic_store_n(&c->n, n, __ATOMIC_RELAXED);
	__asyncpool_leave(c);
#endif
}

/*
 * A single release's first steps, either cache's: an index in range and
 * a generation (not 0, nor the last before the wrap, whose next is the
 * library's to skip), then inside the window, with the count in *n.
 * 0: the exported call's case.
 */
ASYNCPOOL_GNU_INLINE int
__asyncpool_put_enter(struct asyncpool_inline_cache *c, const struct asyncpool *pool, uint32_t idx,
		      uint32_t gen, uint32_t *n)
{
	if (__asyncpool_unlikely(idx >= c->count || gen - 1u >= 0xfffffffeu))
		return 0;
	if (__asyncpool_unlikely(!__asyncpool_enter_pool(c, pool)))
		return 0;
	*n = __atomic_load_n(&c->n, __ATOMIC_RELAXED);
	return 1;
}

/*
 * Lend the cache's top buffer: 1 with its token (generation << 32 |
 * index) in *t, or 0 if the cache is taken or empty.  The buffer's word
 * is not written (it stays the cache's, at the lease's generation), and
 * the lent count is derived (entries plus lent is one field of the
 * library's that a lend leaves alone): one store, n.
 */
ASYNCPOOL_GNU_INLINE int
__asyncpool_take(struct asyncpool_inline_cache *c, const struct asyncpool *pool, uint64_t *t)
{
	uint32_t n;

	if (__asyncpool_likely(__asyncpool_enter_pool(c, pool))) {
		/* n only once inside: a thread that took the cache may have emptied it. */
		n = __atomic_load_n(&c->n, __ATOMIC_RELAXED);
		if (__asyncpool_likely(n != 0)) {
			*t = c->tok[n - 1];
			__asyncpool_leave_n(c, n - 1);
			return 1;
		}
		__asyncpool_leave(c);
	}
	return 0;
}

/*
 * A test's hook in the gather below, after its checks and before its
 * stores, where another thread's release must find the outbox as it
 * was: empty unless a test defines it before including <asyncpool.h>.
 */
#ifndef __ASYNCPOOL_TEST_GATHER_CHECKED
#define __ASYNCPOOL_TEST_GATHER_CHECKED() do { } while (0)
#endif

/*
 * The release of a buffer that another cache lent, owner o (from
 * owner_of[], not c's id), gathered into c's outbox for o (c entered):
 * 1, or 0 for the exported call (no outboxes, no owner, an outbox that
 * holds another owner's or is full but for one, whose release sends it;
 * a generation other than the one after the released[] hint: an older
 * copy, refused there with -ESTALE).
 * The owner decides the token when the batch reaches it; the hint is
 * written here, and the token says so, so that the hint's line stays
 * with the releasing thread as the word's stays with the owner.
 */
ASYNCPOOL_GNU_INLINE int
__asyncpool_gather(struct asyncpool_inline_cache *c, uint32_t o, uint32_t idx, uint32_t gen,
		   uint64_t token)
{
	const uint32_t limit = c->outbox_limit;
	struct asyncpool_inline_outbox *ob;
	uint32_t m, r;

	if (__asyncpool_unlikely(limit == 0 || o == 0))
		return 0;
	/* gen right after r, which skips 0 (gen is not 0 here) */
	r = __atomic_load_n(&c->released[idx], __ATOMIC_RELAXED);
	if (__asyncpool_unlikely(gen - 1u != r) && (gen != 1u || r != 0xffffffffu))
		return 0;
	ob = &c->outboxes[o % ASYNCPOOL_INLINE_OUTBOXES];
	m = ob->n;
	if (__asyncpool_unlikely(ob->owner != o || m + 1u >= limit))
		return 0;
	__ASYNCPOOL_TEST_GATHER_CHECKED();
	__atomic_store_n(&c->released[idx], gen, __ATOMIC_RELAXED);
	ob->tok[m] = token | __ASYNCPOOL_OUTBOX_HINTED;
	__atomic_store_n(&ob->n, m + 1u, __ATOMIC_RELAXED);
	return 1;
}

/*
 * A release of a token (generation gen << 32 | buffer idx) into cache
 * c: 1, or 0 for anything else (an index out of range, generation 0 or
 * the last before the wrap, a full or taken cache, a stale or double
 * copy: the word is not the one this cache lent; another cache's buffer
 * that __asyncpool_gather() leaves), which the exported call decides
 * and counts.  The owner_of[] hint first, so that another owner's word
 * is not read (its buffer is gathered for it); then the word, compared
 * and stored with the next generation (one writer: no
 * read-modify-write); then the released[] hint, which lets another
 * thread refuse a copy of this lease at once.
 */
ASYNCPOOL_GNU_INLINE int
__asyncpool_put(struct asyncpool_inline_cache *c, const struct asyncpool *pool, uint64_t token)
{
	const uint32_t idx = (uint32_t)token, gen = (uint32_t)(token >> 32);
	uint64_t w;
	uint32_t n, o;

	if (__asyncpool_unlikely(!__asyncpool_put_enter(c, pool, idx, gen, &n)))
		return 0;
	w = c->owned | gen;
	o = __atomic_load_n(&c->owner_of[idx], __ATOMIC_RELAXED);
	if (__asyncpool_likely(o == c->id)) {
		if (__asyncpool_likely(n != c->size &&
				       __atomic_load_n(&c->state[idx], __ATOMIC_RELAXED) == w)) {
			__atomic_store_n(&c->state[idx], w + 1, __ATOMIC_RELAXED);
			__atomic_store_n(&c->released[idx], gen, __ATOMIC_RELAXED);
			c->tok[n] = token + ((uint64_t)1 << 32);        /* the next lease's entry */
			__asyncpool_leave_n(c, n + 1);
			return 1;
		}
	} else if (__asyncpool_gather(c, o, idx, gen, token)) {
		__asyncpool_leave(c);
		return 1;
	}
	__asyncpool_leave(c);
	return 0;
}

/*
 * A shared pool's cache: lease its top buffer, 1 with its token in *t,
 * or 0 (the cache taken or empty, or the buffer's word not the one this
 * process cached: the exported call drops it and counts a corruption).
 * This process alone writes a word it cached: a load, a compare and a
 * store make it LEASED, by the same holder, at the same generation.
 */
ASYNCPOOL_GNU_INLINE int
__asyncpool_take_shared(struct asyncpool_inline_cache *c, const struct asyncpool *pool, uint64_t *t)
{
	uint32_t n;

	if (__asyncpool_likely(__asyncpool_enter_pool(c, pool))) {
		n = __atomic_load_n(&c->n, __ATOMIC_RELAXED);
		if (__asyncpool_likely(n != 0)) {
			const uint64_t token = c->tok[n - 1];
			const uint32_t idx = (uint32_t)token;
			const uint64_t w = c->owned | (token >> 32);    /* CACHED by us, at the entry's generation */

			if (__asyncpool_likely(__atomic_load_n(&c->state[idx], __ATOMIC_RELAXED) == w)) {
				/* CACHED (2) -> LEASED (1): the kind alone changes. */
				__atomic_store_n(&c->state[idx], w - __ASYNCPOOL_W_LEASED, __ATOMIC_RELAXED);
				*t = token;
				__asyncpool_leave_n(c, n - 1);
				return 1;
			}
		}
		__asyncpool_leave(c);
	}
	return 0;
}

/*
 * A test's hook between the shared release's load of the word and its
 * CAS, where a racing copy's release must make the CAS fail: empty
 * unless a test defines it before including <asyncpool.h>.
 */
#ifndef __ASYNCPOOL_TEST_PUT_SHARED_LOADED
#define __ASYNCPOOL_TEST_PUT_SHARED_LOADED() do { } while (0)
#endif

/*
 * A shared pool's cache: the release of a token (generation gen << 32 |
 * buffer idx) into it, 1, or 0 for anything else (an index out of
 * range, generation 0 or the last before the wrap, a full or taken
 * cache, a word that is not LEASED at gen, a CAS lost to another
 * copy's release), which the exported call decides and counts.  Any
 * process may release a lease, so the word moves by compare-and-swap,
 * LEASED (any holder) at gen -> CACHED by us at gen + 1: of two copies
 * released at once, in one process or two, one loses
 * (asyncpool-shared(7)).
 */
ASYNCPOOL_GNU_INLINE int
__asyncpool_put_shared(struct asyncpool_inline_cache *c, const struct asyncpool *pool, uint64_t token)
{
	const uint32_t idx = (uint32_t)token, gen = (uint32_t)(token >> 32);
	uint64_t w;
	uint32_t n;

	if (__asyncpool_unlikely(!__asyncpool_put_enter(c, pool, idx, gen, &n)))
		return 0;
	w = __atomic_load_n(&c->state[idx], __ATOMIC_RELAXED);
	__ASYNCPOOL_TEST_PUT_SHARED_LOADED();
	if (__asyncpool_unlikely(n == c->size ||
				 (w & ~__ASYNCPOOL_W_HOLDER) != (__ASYNCPOOL_W_LEASED | gen) ||
				 !__atomic_compare_exchange_n(&c->state[idx], &w, c->owned | (gen + 1u), 0,
							      __ATOMIC_RELAXED, __ATOMIC_RELAXED))) {
		__asyncpool_leave(c);
		return 0;
	}
	c->tok[n] = token + ((uint64_t)1 << 32);        /* the next lease's entry */
	__asyncpool_leave_n(c, n + 1);
	return 1;
}

/*
 * Lend the cache's top n buffers (n > 0) into tokens[]: 1, or 0 if the
 * cache is taken or holds fewer, the exported call's case.
 */
ASYNCPOOL_GNU_INLINE int
__asyncpool_take_n(struct asyncpool_inline_cache *c, const struct asyncpool *pool, uint64_t *tokens,
		   unsigned int n)
{
	uint32_t m;

	if (__asyncpool_unlikely(!__asyncpool_enter_pool(c, pool)))
		return 0;
	m = __atomic_load_n(&c->n, __ATOMIC_RELAXED);
	if (__asyncpool_unlikely(m < n)) {
		__asyncpool_leave(c);
		return 0;
	}
	/* The top n in the order they are stacked (the top last), as the
	 * exported call hands them out: one copy. */
	__builtin_memcpy(tokens, c->tok + (m - n), (size_t)n * sizeof(*tokens));
	__asyncpool_leave_n(c, m - n);
	return 1;
}

/*
 * __asyncpool_put() of tokens[0..n) in order, while each is the owner's
 * to decide: how many were released.  Every token is checked first (an
 * index in range, a generation), as the exported call does, so that it
 * gets all of them when one is bad (bad input changes nothing); it gets
 * the rest from the first one not decided here.
 */
ASYNCPOOL_GNU_INLINE unsigned int
__asyncpool_put_n(struct asyncpool_inline_cache *c, const struct asyncpool *pool, const uint64_t *tokens,
		  unsigned int n)
{
	uint32_t m, j, ok = 1, count = c->count;

	for (j = 0; j < n; j++)
		ok &= ((uint32_t)tokens[j] < count) & ((uint32_t)(tokens[j] >> 32) - 1u < 0xfffffffeu);
	if (__asyncpool_unlikely(!ok || n > count || !__asyncpool_enter_pool(c, pool)))
		return 0;
	m = __atomic_load_n(&c->n, __ATOMIC_RELAXED);
	if (__asyncpool_unlikely(n > c->size - m)) {
		__asyncpool_leave(c);
		return 0;
	}
	{
		/* In locals: the stores below would have the compiler reload
		 * each field per token (no one else writes them while we are
		 * inside). */
		uint64_t *const state = c->state;
		uint32_t *const owner_of = c->owner_of, *const released = c->released;
		uint64_t *const ctok = c->tok + m;
		const uint64_t owned = c->owned;
		const uint32_t id = c->id;

		for (j = 0; j < n; j++) {
			uint32_t idx = (uint32_t)tokens[j], gen = (uint32_t)(tokens[j] >> 32);
			uint64_t w = owned | gen;

			if (__asyncpool_unlikely(
				    __atomic_load_n(&owner_of[idx], __ATOMIC_RELAXED) != id ||
				    __atomic_load_n(&state[idx], __ATOMIC_RELAXED) != w))
				break;
			__atomic_store_n(&state[idx], w + 1, __ATOMIC_RELAXED);
			__atomic_store_n(&released[idx], gen, __ATOMIC_RELAXED);
			ctok[j] = tokens[j] + ((uint64_t)1 << 32);
		}
	}
	__asyncpool_leave_n(c, m + j);
	return j;
}

#endif /* inline paths */

#ifdef __cplusplus
}
#endif

#endif /* ASYNCPOOL_INLINE_H */
