/* SPDX-License-Identifier: MIT */
/*
 * Per-thread caches (see pool_cache.h).  They move buffers between
 * their arrays and the freelist (freelist.c), changing states only
 * through buffer_state.h: a full cache's batch through pool_depot.c,
 * what other threads release to a cache's owner through pool_owner.c;
 * what other threads take from it is pool_takeover.c's.
 *
 * Bookkeeping, all under one process-wide mutex (ap_cache_lock,
 * pool_bypass.c), taken only off the fast path: creating a cache,
 * thread exit, destroy, asyncpool_available(), fork.
 * - Each cached pool keeps a registry of its caches, so that destroy can
 *   flush them and available() can count them.
 * - Each thread keeps a table of its caches (one per pool it used); a
 *   pthread key destructor flushes them when the thread exits.
 * - A cache is freed only by its thread (at exit, or when it next creates
 *   a cache), never by destroy: destroy flushes it and sets its pool to
 *   NULL, so that the stale entry is never matched again, even by a new
 *   pool at the same address.
 */
#include "pool_cache.h"
#include "pool_bypass.h"
#include "pool_depot.h"
#include "pool_lend.h"
#include "pool_owner.h"
#include "pool_takeover.h"
#include "pool_pop.h"

#include <stdlib.h>

/*
 * No thread's cache: matches no pool (its pool is NULL) and is empty, so
 * the fast paths need no NULL test.  Every cache whose pool is NULL is
 * empty too (destroy and fork drain before they detach).
 */
struct ap_cache ap_cache_none;
/* Of the public type, so that the ABI's dump shows struct asyncpool_inline_cache. */
AP_EXPORT __thread struct asyncpool_inline_cache *asyncpool_inline_tc
	__attribute__((tls_model("initial-exec"))) = (struct asyncpool_inline_cache *)&ap_cache_none;

/* The leading fields of struct ap_cache are the inline ABI's, field for field. */
#define AP_SAME_FIELD(f)                                                                    \
	_Static_assert(offsetof(struct ap_cache, f) == offsetof(struct asyncpool_inline_cache, f) && \
		       sizeof(((struct ap_cache *)0)->f) ==                                  \
			       sizeof(((struct asyncpool_inline_cache *)0)->f),              \
		       "struct ap_cache and struct asyncpool_inline_cache differ in " #f)
AP_SAME_FIELD(abi);
AP_SAME_FIELD(n);
AP_SAME_FIELD(pool);
AP_SAME_FIELD(size);
AP_SAME_FIELD(count);
AP_SAME_FIELD(busy);
AP_SAME_FIELD(bypass);
AP_SAME_FIELD(tok);
AP_SAME_FIELD(outboxes);
AP_SAME_FIELD(outbox_limit);
AP_SAME_FIELD(owned);
AP_SAME_FIELD(id);
AP_SAME_FIELD(state);
AP_SAME_FIELD(owner_of);
AP_SAME_FIELD(released);
AP_SAME_FIELD(recycle);
AP_SAME_FIELD(region);
AP_SAME_FIELD(buffer_size);
AP_SAME_FIELD(gate);
AP_SAME_FIELD(reserved1);
/* An outbox is the inline ABI's, field for field, and so are their number and the hint's bit. */
_Static_assert(sizeof(struct ap_outbox) == sizeof(struct asyncpool_inline_outbox) &&
		       offsetof(struct ap_outbox, owner) == offsetof(struct asyncpool_inline_outbox, owner) &&
		       offsetof(struct ap_outbox, n) == offsetof(struct asyncpool_inline_outbox, n) &&
		       offsetof(struct ap_outbox, tok) == offsetof(struct asyncpool_inline_outbox, tok) &&
		       AP_OUTBOXES == ASYNCPOOL_INLINE_OUTBOXES &&
		       AP_OUTBOX_BATCH_MAX == ASYNCPOOL_INLINE_OUTBOX_MAX &&
		       AP_INBOX_HINTED == __ASYNCPOOL_OUTBOX_HINTED,
	       "struct ap_outbox and struct asyncpool_inline_outbox differ");
_Static_assert(offsetof(struct ap_cache, batch) == sizeof(struct asyncpool_inline_cache),
	       "the library's fields of struct ap_cache follow the inline ABI's");
_Static_assert(sizeof(struct asyncpool_inline_cache) == 128 || sizeof(void *) != 8,
	       "layout version 3 is 128 bytes on 64-bit targets");
_Static_assert(offsetof(struct asyncpool_inline_cache, n) % 8 == 0 &&
	       offsetof(struct asyncpool_inline_cache, busy) ==
		       offsetof(struct asyncpool_inline_cache, n) + 4,
	       "layout version 3: n and busy are one aligned 8-byte word, n first");

/*
 * A shared pool's cache: the header's copy of the word's format
 * (inline.h) is pool_layout.h's, and CACHED - LEASED is the kind step
 * its take subtracts.  The version's bit that tells a shared cache.
 */
_Static_assert(__ASYNCPOOL_W_LEASED == AP_W_MAKE(AP_K_LEASED, 0, 0) &&
		       AP_W_MAKE(AP_K_CACHED, 0, 0) - __ASYNCPOOL_W_LEASED == __ASYNCPOOL_W_LEASED &&
		       __ASYNCPOOL_W_HOLDER == AP_W_MAKE(0, AP_HOLDER_MASK, 0),
	       "inline.h's shared word is pool_layout.h's");
#define AP_INLINE_SHARED_BIT (ASYNCPOOL_INLINE_ABI_SHARED ^ ASYNCPOOL_INLINE_ABI)

#ifdef ASYNCPOOL_TEST_HOOKS
/* A layout version to publish instead of ASYNCPOOL_INLINE_ABI (0: that one). */
uint32_t ap_test_hook_inline_abi;
_Atomic uint64_t ap_test_exported_calls;
#endif

/* The version of the inline layout the caches publish (inline.h). */
static uint32_t inline_abi(void)
{
#ifdef ASYNCPOOL_TEST_HOOKS
	if (ap_test_hook_inline_abi)
		return ap_test_hook_inline_abi;
#endif
	return ASYNCPOOL_INLINE_ABI;
}

/*
 * Cache c of pool (the lock held, c->pool set): the pool's fields that
 * the inline paths read, and the version that lets them.  A cache with
 * entries of a pool that lends (a local pool with membarrier(2)), whose
 * owner's release is a load and a store, and which has an owner id,
 * publishes ASYNCPOOL_INLINE_ABI; one of a pool that does not lend (a
 * shared pool's; a local pool's without membarrier(2)), whose release
 * is a CAS, ASYNCPOOL_INLINE_ABI_SHARED (since 1.7).  A cache of no
 * entries (it only lends) publishes 0: the inline code calls the
 * library at once.
 */
static void cache_publish(struct ap_cache *c, struct asyncpool *pool)
{
	c->count = pool->fl.count;
	/* The word of a buffer this cache holds, at generation 0: a pool
	 * that lends owns it by cache id, another caches it by holder. */
	c->owned = pool->fl.lazy ? ap_owned_word(c->id, 0) : AP_W_MAKE(AP_K_CACHED, pool->fl.me, 0);
	c->state = pool->fl.state;
	c->owner_of = pool->owner_of;
	c->released = pool->released;
	c->recycle = (ap_release_fn *)(void (*)(void))ap_cache_recycle;
	c->region = pool->region;
	c->buffer_size = pool->buffer_size;
	/* Where the inline release of another owner's buffer gathers it:
	 * a cache whose owner's release is inline (below) and that lends. */
	c->outboxes = c->outbox;
	c->outbox_limit = c->size && pool->fl.lazy && c->id ? pool->outbox_batch : 0;
	ap_cache_set_bypass(c, c->bypass != 0, __ATOMIC_RELAXED);   /* the gate: pool, or NULL */
	__atomic_store_n(&c->abi,
			 !c->size ? 0 :
			 pool->fl.lazy ? (c->id ? inline_abi() : 0) :
			 inline_abi() | AP_INLINE_SHARED_BIT,
			 __ATOMIC_RELAXED);
}

AP_EXPORT const struct asyncpool_inline_cache *asyncpool_inline_cache(void)
{
	return asyncpool_inline_tc;
}

struct ap_tcache {
	uint32_t n, cap;
	struct ap_cache **v;
};

static __thread struct ap_tcache *ap_tc_table __attribute__((tls_model("initial-exec")));

static struct asyncpool *ap_cached_pools;       /* under ap_cache_lock */
static pthread_once_t ap_tc_once = PTHREAD_ONCE_INIT;
static pthread_key_t ap_tc_key;
static bool ap_tc_key_ok;


/* Take c out of its pool's registry; the lock is held. */
static void cache_detach(struct ap_cache *c)
{
	if (c->reg_pprev) {
		*c->reg_pprev = c->reg_next;
		if (c->reg_next)
			c->reg_next->reg_pprev = c->reg_pprev;
	}
	c->reg_next = NULL;
	c->reg_pprev = NULL;
	__atomic_store_n(&c->abi, 0, __ATOMIC_RELAXED);    /* no pool: the inline paths stay out */
	c->pool = NULL;
}

/*
 * Free a cache of a thread that is gone; the lock is held.  What it
 * lent and was not given back to it stays counted, in the pool's.
 */
static void cache_free(struct ap_cache *c)
{
	ap_cache_drain(c);
	if (c->pool && c->box)
		ap_owner_leave_thread(c);  /* its outboxes, its inbox, and its lent count */
	else if (c->pool && c->pool->fl.lazy && ap_cache_lent(c))
		atomic_fetch_add_explicit(&c->pool->fl.lent, ap_cache_lent(c), memory_order_relaxed);
	cache_detach(c);
	free(c);
}

/* Thread exit: flush and free the thread's caches. */
static void tc_destroy(void *arg)
{
	struct ap_tcache *t = arg;

	pthread_mutex_lock(&ap_cache_lock);
	for (uint32_t i = 0; i < t->n; i++)
		cache_free(t->v[i]);
	pthread_mutex_unlock(&ap_cache_lock);
	free(t->v);
	free(t);
	if (ap_tc_table == t)
		ap_tc_table = NULL;
	ap_tc_set(&ap_cache_none);
}

static void atfork_prepare(void)
{
	pthread_mutex_lock(&ap_cache_lock);
}

static void atfork_parent(void)
{
	pthread_mutex_unlock(&ap_cache_lock);
}

/*
 * The child has one thread.  The caches of the threads that did not come
 * along are orphans: for a local pool (a private copy) their buffers go
 * back to the child's freelist; for a shared pool they are the parent's,
 * still cached there, so the child forgets them, as it forgets the
 * shared-pool caches of its own thread.
 */
static void atfork_child(void)
{
	for (struct asyncpool *p = ap_cached_pools; p; p = p->cached_next) {
		struct ap_cache *c = p->caches, *nx;

		ap_depot_forget_busy(p);
		/* No thread but ours runs here: no one is inside a cache. */
		for (c = p->caches; c; c = c->reg_next)
			__atomic_store_n(&c->busy, 0, __ATOMIC_RELAXED);
		/* Before the exits below send to them: no inbox may keep a
		 * slot that a thread which did not come along reserved. */
		if (p->boxes)
			ap_owners_after_fork(p);
		c = p->caches;

		for (; c; c = nx) {
			nx = c->reg_next;
			if (p->shared)
				ap_cache_set_n(c, 0);
			if (c->owner == ap_tc_table)
				continue;
			cache_free(c);
		}
	}
	pthread_mutex_unlock(&ap_cache_lock);
}

static void tc_init_once(void)
{
	ap_tc_key_ok = pthread_key_create(&ap_tc_key, tc_destroy) == 0;
	if (ap_tc_key_ok)
		(void)pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

/* Free the entries of destroyed pools; the lock is held. */
static void tc_sweep(struct ap_tcache *t)
{
	uint32_t j = 0;

	for (uint32_t i = 0; i < t->n; i++) {
		if (t->v[i]->pool)
			t->v[i - j] = t->v[i];
		else {
			if (ap_tc_last == t->v[i])
				ap_tc_set(&ap_cache_none);
			free(t->v[i]);
			j++;
		}
	}
	t->n -= j;
}

/* A cache of pool's size for thread table t, not yet registered. */
static struct ap_cache *cache_alloc(struct asyncpool *pool, struct ap_tcache *t)
{
	/* Whole cache lines of its own: no false sharing with a neighbour. */
	size_t size = ap_align_up(sizeof(struct ap_cache) +
				  (size_t)pool->cache_size * sizeof(uint64_t), AP_CACHE_LINE);
	struct ap_cache *c = aligned_alloc(AP_CACHE_LINE, size);

	if (!c)
		return NULL;
	memset(c, 0, size);
	c->size = pool->cache_size;
	c->tok = c->slots;
	c->batch = pool->cache_batch;
	c->owner = t;
	return c;
}

/*
 * Entry i of thread table t is a cache of no entries (the thread used
 * pool before asyncpool_set_cache gave it caches): replaced by one of
 * the pool's size, with the same owner id, inbox, lent count and
 * outboxes, in the registry and the table.  The calling thread is its
 * owner, outside it; the lock keeps flushers off.  The old one if out
 * of memory.
 */
static struct ap_cache *cache_grow(struct asyncpool *pool, struct ap_tcache *t, uint32_t i)
{
	struct ap_cache *old = t->v[i], *c;

	pthread_mutex_lock(&ap_cache_lock);
	if (old->pool != pool || !(c = cache_alloc(pool, t))) {
		pthread_mutex_unlock(&ap_cache_lock);
		return old;
	}
	c->id = old->id;
	c->box = old->box;
	c->held = ap_cache_lent(old);   /* c->n is 0 */
	c->bypass = old->bypass;
	memcpy(c->outbox, old->outbox, sizeof(c->outbox));
	c->reg_next = old->reg_next;
	c->reg_pprev = old->reg_pprev;
	*c->reg_pprev = c;
	if (c->reg_next)
		c->reg_next->reg_pprev = &c->reg_next;
	c->pool = pool;
	cache_publish(c, pool);
	t->v[i] = c;
	pthread_mutex_unlock(&ap_cache_lock);
	free(old);
	return c;
}

/* This thread's cache of pool, created on first use; NULL if none. */
static struct ap_cache *cache_get(struct asyncpool *pool, bool create)
{
	struct ap_tcache *t = ap_tc_table;
	struct ap_cache *c;

	if (t)
		for (uint32_t i = 0; i < t->n; i++)
			if (t->v[i]->pool == pool) {
				c = t->v[i];
				if (AP_UNLIKELY(!c->size && pool->cache_size && create))
					c = cache_grow(pool, t, i);
				return ap_tc_set(c);
			}
	if (!create || !ap_pool_cached(pool) || !ap_tc_key_ok)
		return NULL;
	if (!t) {
		t = calloc(1, sizeof(*t));
		if (!t)
			return NULL;
		if (pthread_setspecific(ap_tc_key, t)) {
			free(t);
			return NULL;
		}
		ap_tc_table = t;
	}
	c = cache_alloc(pool, t);
	if (!c)
		return NULL;
	pthread_mutex_lock(&ap_cache_lock);
	tc_sweep(t);
	if (t->n == t->cap) {
		uint32_t cap = t->cap ? 2 * t->cap : 4;
		struct ap_cache **v = realloc(t->v, cap * sizeof(*v));

		if (!v) {
			pthread_mutex_unlock(&ap_cache_lock);
			free(c);
			return NULL;
		}
		t->v = v;
		t->cap = cap;
	}
	if (pool->fl.lazy && !ap_owner_id_take(pool, c)) {
		/* Every owner id is in use: this thread goes to the freelist. */
		pthread_mutex_unlock(&ap_cache_lock);
		free(c);
		return NULL;
	}
	t->v[t->n++] = c;
	c->bypass = pool->local_waiters ? 1 : 0;
	c->pool = pool;
	c->reg_next = pool->caches;
	if (pool->caches)
		pool->caches->reg_pprev = &c->reg_next;
	c->reg_pprev = &pool->caches;
	pool->caches = c;
	cache_publish(c, pool);
	pthread_mutex_unlock(&ap_cache_lock);
	return ap_tc_set(c);
}

struct ap_cache *ap_cache_get(struct asyncpool *pool)
{
	return cache_get(pool, true);
}

/* The buffers at entries [from, to) of cache c are its own now. */
static void cache_own(struct asyncpool *pool, struct ap_cache *c, uint32_t from, uint32_t to)
{
	for (uint32_t j = from; j < to; j++)
		ap_own_buffer(pool, c->id, ap_cache_idx(c, j), ap_cache_gen(c, j));
}

int ap_cache_fill(struct asyncpool *pool, struct ap_cache *c, uint32_t min, uint32_t max)
{
	uint32_t n, got = 0;
	int rc;

	/* A cache of no entries only lends (pool_lend.c): its callers pop instead. */
	if (AP_UNLIKELY(!c->size))
		return -ENOBUFS;
	/* What others sent back first: it is ours already, and no atomic. */
	if (c->box && ap_owner_drain(pool, c, max) && ap_cache_n(c) >= min)
		return 0;
	n = ap_cache_n(c);
	if (!n && pool->depot && (got = ap_depot_take(pool, c)) != 0) {
		if (c->box)
			cache_own(pool, c, 0, got);
		if (got >= min)
			return 0;
		n = got;
	}
	if (n >= max)
		return 0;
	rc = ap_pool_pop_chain(pool, (char *)&c->tok[n] + AP_TOKEN_IDX_AT,
			       (char *)&c->tok[n] + AP_TOKEN_GEN_AT, sizeof(uint64_t),
			       min > n ? min - n : 1, max - n, AP_K_CACHED, &got);
	if (rc)
		return n ? 0 : rc;
	if (c->box)
		cache_own(pool, c, n, n + got);
	ap_cache_set_n(c, n + got);
	return 0;
}

/* Fill an empty cache with up to batch buffers, one CAS. */
static int cache_refill(struct ap_cache *c)
{
	return ap_cache_fill(c->pool, c, 1, c->batch);
}

/*
 * Release into the calling thread's cache; c belongs to pool.  0, or
 * -EALREADY for a buffer no lease of generation gen holds (refused and
 * counted), -EINVAL for an index out of range.
 */
static int cache_put(struct asyncpool *pool, struct ap_cache *c, uint32_t idx, uint32_t gen)
{
	uint32_t n, back = 0;

	if (AP_UNLIKELY(idx >= pool->fl.count))
		return -EINVAL;
	n = c->n;
	if (AP_UNLIKELY(n == c->size)) {
		ap_cache_flush_batch(c);
		n = c->n;
	}
	if (AP_UNLIKELY(!ap_cache_push(pool, c, n, idx, gen, &back))) {
		ap_fl_count_refused(&pool->fl, idx, gen);
		return -EALREADY;
	}
	ap_cache_add_lent(c, -(int64_t)back);
	ap_cache_set_n(c, n + 1);
	return 0;
}

/* The rest of ap_cache_release(): a full cache, another pool's, a stale release. */
static __attribute__((noinline)) int cache_release_slow(struct asyncpool *pool, uint32_t idx,
							 uint32_t gen)
{
	struct ap_cache *c;
	int rc;

	if (pool->fl.lazy)
		return ap_cache_owner_release(pool, idx, gen);
	c = ap_cache_of(pool);

	if (!c || !ap_cache_enter(c)) {
		/* No cache for this thread (out of memory), or a flusher
		 * has it: the freelist. */
		return ap_fl_release(&pool->fl, idx, gen);
	}
	AP_TEST_STALL(AP_TS_OWNER_INSIDE);
	rc = cache_put(pool, c, idx, gen);
	ap_cache_leave(c);
	ap_cache_honour_flush(pool);
	return rc;
}

/* The rest of ap_cache_release(): lending without a cache, and cache_release_slow(). */
static __attribute__((noinline)) int cache_release_rest(struct asyncpool *pool, uint32_t idx,
							 uint32_t gen)
{
	struct ap_cache *c = ap_tc_last;

	/* Lending without a cache: the owner's own release (pool_owner.c). */
	if (c->pool == pool && !c->size)
		return ap_owner_release_uncached(pool, c, idx, gen, -EALREADY);
	return cache_release_slow(pool, idx, gen);
}

/*
 * A release of a pool with caches that ap_cache_put_lent() did not
 * take: asyncpool_release_token(), and the leases' callback below.  0,
 * or as cache_put() and ap_fl_release().  A shared pool's common case
 * (ap_cache_put_shared) needs no stack frame.
 */
int ap_cache_release(struct asyncpool *pool, uint32_t idx, uint32_t gen)
{
	if (!pool->fl.lazy && AP_LIKELY(ap_cache_put_shared(pool, idx, gen)))
		return 0;
	return cache_release_rest(pool, idx, gen);
}

/*
 * A lease's release into pool (its generation not 0), for both ways a
 * lease comes back: a pool without caches' owner in one function, the
 * common case of a pool with caches (this thread's cache, a leased
 * buffer, room) with no stack frame, the rest ap_cache_release().
 */
static inline __attribute__((always_inline)) void cache_recycle(struct asyncpool *pool,
								 uint32_t idx, uint32_t gen)
{
	if (ap_lends_only(pool, ap_tc_last)) {
		(void)ap_owner_release_uncached(pool, ap_tc_last, idx, gen, -EALREADY);
		return;
	}
	if (AP_LIKELY(ap_cache_put_lent(pool, idx, gen)))
		return;
	(void)ap_cache_release(pool, idx, gen);
}

/*
 * The release callback of the leases of a pool with caches.  The common
 * case (this thread's cache, a leased buffer, room) needs no stack frame.
 */
void ap_cache_recycle(void *ctx, uint64_t token)
{
	struct asyncpool *pool = ctx;
	uint32_t idx = AP_TOKEN_INDEX(token), gen = AP_TOKEN_GEN(token);

	/*
	 * Generation 0: a program built against the 1.0 header, whose inline
	 * release passes the index alone.  Released by index, as
	 * asyncpool_release_index() does: a lent buffer's generation is
	 * asked of the caches (slow, but it was a lost buffer before).
	 */
	if (AP_UNLIKELY(!gen) && pool->fl.lazy) {
		int k = idx < pool->fl.count ? ap_cache_claim_lent(pool, idx, 0, false, NULL) : 0;

		if (k < 0)
			(void)ap_fl_release(&pool->fl, idx, 0);
		else if (!k)
			ap_fl_count_bad_release(&pool->fl, 1);
		return;
	}
	cache_recycle(pool, idx, gen);
}

/*
 * asyncpool_lease_release() of a lease with a generation (span.h): the
 * callback is stored in a field of type void (*)(void *, uint32_t), but
 * a pool's takes the token, so it is called here through its own type.
 * Here, beside ap_cache_recycle(), so that the cached release inlines.
 * A callback of another library with a generation is called the way
 * the 1.1 header did, with the token (the only convention there was).
 */
AP_EXPORT void asyncpool_lease_release_gen(struct asyncpool_lease *lease)
{
	AP_TEST_EXPORTED_CALL();
	ap_release_fn *fn = lease ? lease->release.fn : NULL;
	uint32_t idx, gen;
	void *ctx;

	if (!fn)
		return;
	lease->release.fn = NULL;
	ctx = lease->release.ctx;
	idx = lease->buffer_index;
	gen = lease->generation;
	if (!gen) {
		fn(ctx, idx);
		return;
	}
	/* Each a tail call, with no spill here. */
	if (AP_LIKELY(fn == (ap_release_fn *)(void (*)(void))ap_cache_recycle)) {
		cache_recycle(ctx, idx, gen);
		return;
	}
	if (AP_LIKELY(fn == (ap_release_fn *)(void (*)(void))ap_pool_recycle)) {
		(void)ap_fl_release(&((struct asyncpool *)ctx)->fl, idx, gen);
		return;
	}
	((ap_release_token_fn *)(void (*)(void))fn)(ctx, AP_TOKEN_MAKE(gen, idx));
}

int ap_cache_acquire_once(struct asyncpool *pool, struct asyncpool_lease *out)
{
	struct ap_cache *c = cache_get(pool, true);
	uint32_t idx, gen;
	int rc;

	if (AP_UNLIKELY(!c || !ap_cache_enter(c))) {
		/* No cache for this thread (out of memory), or a flusher
		 * or a waiter of this process has it: the freelist. */
		rc = ap_pool_pop(pool, AP_K_LEASED, &idx, &gen);
		if (rc)
			return rc;
		ap_pool_lease(pool, idx, gen, ap_cache_recycle, out);
		return 0;
	}
	if (AP_UNLIKELY(!c->size)) {
		/* A cache of no entries, made before the pool had caches
		 * (asyncpool_set_cache): it lends only (the caller). */
		ap_cache_leave(c);
		return AP_CACHE_LENDS;
	}
	for (;;) {
		uint32_t n = ap_cache_n(c);

		if (!n) {
			rc = cache_refill(c);
			if (rc) {
				ap_cache_leave(c);
				return rc;
			}
			continue;
		}
		uint32_t lent = 0;

		idx = ap_cache_idx(c, n - 1);
		gen = ap_cache_lend(pool, c, n - 1, &lent);
		ap_cache_add_lent(c, lent);
		ap_cache_set_n(c, n - 1);
		if (AP_LIKELY(gen)) {
			ap_cache_leave(c);
			ap_pool_lease(pool, idx, gen, ap_cache_recycle, out);
			return 0;
		}
		/* Not cached any more: a copy of it is somewhere else. */
		ap_fl_count_corruption(&pool->fl, 1);
	}
}

/*
 * What ap_pool_cache_init() set up, undone (the lock is held, no cache
 * left): the depot, the owners' table, the pool's place in the list of
 * pools with caches.
 */
static void caches_free(struct asyncpool *pool)
{
	ap_depot_free(pool);
	ap_owner_table_free(pool);
	if (pool->cached_pprev) {
		*pool->cached_pprev = pool->cached_next;
		if (pool->cached_next)
			pool->cached_next->cached_pprev = pool->cached_pprev;
		pool->cached_pprev = NULL;
		pool->cached_next = NULL;
	}
}

/* asyncpool_destroy() of a pool with caches; 0 or -EBUSY. */
int ap_cache_destroy(struct asyncpool *pool)
{
	struct ap_cache *c;
	uint64_t cached = 0;

	pthread_mutex_lock(&ap_cache_lock);
	if (pool->boxes && ap_bypass_all(pool)) {
		/* Releases on their way to an owner are releases: decide them. */
		ap_owners_settle(pool);
		ap_bypass_end(pool);
	}
	for (c = pool->caches; c; c = c->reg_next)
		cached += ap_cache_n(c);
	cached += ap_depot_count(pool);
	/* A shared pool's leases may be out in other processes: the handle
	 * closes regardless.  A local pool must have them all back. */
	if (!pool->shared && ap_fl_count(&pool->fl) + cached != pool->fl.count) {
		pthread_mutex_unlock(&ap_cache_lock);
		return -EBUSY;
	}
	/*
	 * The wait fd's thread reads the depot and takes the caches back
	 * (pool_wait.c, waker_main): stopped before they go, outside the
	 * lock, which it may be waiting for.  It only moves buffers between
	 * the caches and the freelist, so what was counted above holds.
	 */
	if (pool->wait_fd_close) {
		pthread_mutex_unlock(&ap_cache_lock);
		pool->wait_fd_close(pool);
		pthread_mutex_lock(&ap_cache_lock);
	}
	AP_TEST_STALL(AP_TS_CACHES_FREE);
	while ((c = pool->caches)) {
		ap_cache_drain(c);
		cache_detach(c);
	}
	caches_free(pool);
	pthread_mutex_unlock(&ap_cache_lock);
	return 0;
}

/*
 * Buffers in this process's caches of pool (entries, not states); if
 * lent, also the buffers its caches lent that are not back (their
 * state still says cached: buffer_state.h).
 */
uint32_t ap_cache_count(const struct asyncpool *pool, int64_t *lent, uint32_t *transit)
{
	uint64_t n = 0, moving = 0;
	int64_t out = atomic_load_explicit(&pool->fl.lent, memory_order_relaxed);

	pthread_mutex_lock(&ap_cache_lock);
	for (const struct ap_cache *c = pool->caches; c; c = c->reg_next) {
		n += ap_cache_n(c);
		if (pool->fl.lazy)      /* a shared pool's caches lend nothing */
			out += ap_cache_lent(c);
		for (uint32_t k = 0; k < AP_OUTBOXES; k++)
			moving += __atomic_load_n(&c->outbox[k].n, __ATOMIC_RELAXED);
	}
	/* Lent buffers released to their owner and not yet decided: still
	 * lent (their words say so), and on their way back. */
	for (uint32_t o = 1; pool->boxes && o < pool->box_count; o++) {
		out += atomic_load_explicit(&pool->boxes[o]->out, memory_order_relaxed);
		moving += ap_inbox_count(pool->boxes[o]);
	}
	pthread_mutex_unlock(&ap_cache_lock);
	n += ap_depot_count(pool);
	if (lent)
		*lent = out;
	if (transit)
		*transit = moving > pool->fl.count ? pool->fl.count : (uint32_t)moving;
	return n > pool->fl.count ? pool->fl.count : (uint32_t)n;
}

/*
 * Give a pool handle per-thread caches of cache_size buffers.  The
 * shared-pool code calls it on a handle it just created or opened.
 */
int ap_pool_cache_init(struct asyncpool *pool, uint32_t cache_size)
{
	bool lending;

	if (!pool || cache_size > ASYNCPOOL_CACHE_MAX || cache_size > pool->fl.count)
		return -EINVAL;
	if (pool->cache_size)
		return -EEXIST;
	/* A shared pool without caches has none; a local one lends (pool_lend.c). */
	if (!cache_size && pool->shared)
		return 0;
	pthread_once(&ap_tc_once, tc_init_once);
	if (!ap_tc_key_ok)
		return cache_size ? -ENOMEM : 0;
	/* A local pool's caches lend: a release or adoption by index then
	 * asks the caches, which needs membarrier(2) (ap_cache_claim_lent).
	 * Without it, a local pool without caches is the plain freelist. */
	lending = pool->fl.lazy;        /* already, without a cache */
	if (!cache_size && (lending || !ap_mb_available()))
		return 0;
	/* Caches set on a pool that lent without: its depot's batches, of
	 * another size, go back to the freelist (a call before any use, as
	 * asyncpool_set_cache(3) asks, finds it empty). */
	if (pool->depot) {
		(void)ap_depot_drain(pool);
		ap_depot_free(pool);
	}
	pool->cache_batch = (cache_size + 1) / 2;      /* the depot's slots hold one */
	/* A local pool's depot: a cache's batch, or without caches the
	 * bulk lends' (pool_lend.c). */
	if (!pool->shared && ap_depot_init(pool, cache_size ? pool->cache_batch : AP_LEND_CHUNK))
		return -ENOMEM;
	if (!lending && !pool->shared && ap_mb_available() && ap_owner_table_init(pool)) {
		ap_depot_free(pool);
		return cache_size ? -ENOMEM : 0;
	}
	pthread_mutex_lock(&ap_cache_lock);
	pool->fl.lazy = !pool->shared && ap_mb_available();
	pool->fl.lent_tag = pool->fl.lazy ? AP_LENT : AP_NO_LENT;
	pool->cache_size = cache_size;
	pool->release_fn = ap_cache_recycle;
	if (!pool->cached_pprev) {
		pool->cached_next = ap_cached_pools;
		if (ap_cached_pools)
			ap_cached_pools->cached_pprev = &pool->cached_next;
		pool->cached_pprev = &ap_cached_pools;
		ap_cached_pools = pool;
	}
	pthread_mutex_unlock(&ap_cache_lock);
	return 0;
}

/*
 * Take back the caches asyncpool_create() gave, if no thread has used
 * them yet (no cache exists): 0, or -EEXIST.
 */
static int cache_default_undo(struct asyncpool *pool)
{
	pthread_mutex_lock(&ap_cache_lock);
	if (pool->caches || ap_depot_count(pool)) {
		pthread_mutex_unlock(&ap_cache_lock);
		return -EEXIST;
	}
	caches_free(pool);
	pool->cache_size = 0;
	pool->cache_batch = 0;
	pool->cache_default = false;
	pool->release_fn = ap_pool_recycle;
	pool->fl.lazy = false;
	pool->fl.lent_tag = AP_NO_LENT;
	pthread_mutex_unlock(&ap_cache_lock);
	return 0;
}

AP_EXPORT int asyncpool_set_cache(struct asyncpool *pool, uint32_t cache_size)
{
	int rc;

	if (!pool || cache_size > ASYNCPOOL_CACHE_MAX || cache_size > pool->fl.count)
		return -EINVAL;
	/* The wait fd's thread reads the depot and the caches this would
	 * change or free (pool_wait.c). */
	if (pool->wait_fd)
		return -EBUSY;
	/* The default of asyncpool_create() gives way to the caller's choice. */
	if (pool->cache_default && (rc = cache_default_undo(pool)) != 0)
		return rc;
	return ap_pool_cache_init(pool, cache_size);
}

AP_EXPORT int asyncpool_cache_flush(struct asyncpool *pool)
{
	struct ap_cache *c;
	uint32_t n;
	int rc;

	if (!pool)
		return -EINVAL;
	if (!ap_pool_cached(pool))
		return 0;
	c = cache_get(pool, false);
	if (!c)
		return 0;
	if (c->box)
		ap_owner_send_all(pool, c);     /* what it released for others */
	if (!ap_cache_enter(c))
		return 0;       /* a flusher is emptying it */
	if (c->box)
		(void)ap_owner_drain(pool, c, UINT32_MAX);
	n = ap_cache_n(c);
	rc = n ? ap_cache_flush_top(c, n) : 0;
	ap_cache_leave(c);
	return rc;
}
