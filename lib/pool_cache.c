/* SPDX-License-Identifier: MIT */
/*
 * Per-thread caches (see pool_cache.h).  They move buffers between
 * their arrays and the freelist (freelist.c), changing states only
 * through buffer_state.h.
 *
 * Bookkeeping, all under one process-wide mutex (ap_cache_lock), taken
 * only off the fast path: creating a cache, thread exit, destroy,
 * asyncpool_available(), fork.
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
#include "pool_inbox.h"
#include "pool_wait.h"

#include <linux/membarrier.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

/*
 * No thread's cache: matches no pool (its pool is NULL) and is empty, so
 * the fast paths need no NULL test.  Every cache whose pool is NULL is
 * empty too (destroy and fork drain before they detach).
 */
struct ap_cache ap_cache_none;
__thread struct ap_cache *ap_tc_last __attribute__((tls_model("initial-exec"))) = &ap_cache_none;

struct ap_tcache {
	uint32_t n, cap;
	struct ap_cache **v;
};

static __thread struct ap_tcache *ap_tc_table __attribute__((tls_model("initial-exec")));

static pthread_mutex_t ap_cache_lock = PTHREAD_MUTEX_INITIALIZER;
static struct asyncpool *ap_cached_pools;       /* under ap_cache_lock */
static pthread_once_t ap_tc_once = PTHREAD_ONCE_INIT;
static pthread_key_t ap_tc_key;
static bool ap_tc_key_ok;

static bool bypass_all(struct asyncpool *pool);
static void bypass_end(struct asyncpool *pool);
static void owners_settle(struct asyncpool *pool);
static void owner_leave_thread(struct ap_cache *c);
static int owner_send(struct asyncpool *pool, uint32_t o, const uint64_t *tok, uint32_t k,
		      bool locked);
static bool owner_drain(struct asyncpool *pool, struct ap_cache *c, uint32_t max);
static bool lend_drain(struct asyncpool *pool, struct ap_cache *c, uint32_t max);
static inline bool lend_free(ap_word *state, _Atomic uint32_t *owner_of, uint64_t word,
			     uint32_t idx, uint32_t gen);
static int lend_back(struct asyncpool *pool, struct ap_cache *c, uint32_t idx, uint32_t gen);
static uint32_t owner_id_take(struct asyncpool *pool, struct ap_cache *c);
static int owner_table_init(struct asyncpool *pool);
static void owner_table_free(struct asyncpool *pool);
static void owner_send_all(struct asyncpool *pool, struct ap_cache *c);
static bool owners_moving(const struct asyncpool *pool);
static void owner_lent_back(struct asyncpool *pool, uint32_t o);
static void owners_after_fork(struct asyncpool *pool);


/* Give the top k buffers of a cache back to the freelist as one chain. */
static int cache_flush_top(struct ap_cache *c, uint32_t k)
{
	struct asyncpool *pool = c->pool;
	uint32_t from = ap_cache_n(c) - k;
	uint32_t kept = ap_cache_uncache(pool, &c->idx[from], &c->gen[from], k);

	ap_cache_set_n(c, from);
	return ap_fl_push_chain(&pool->fl, &c->idx[from], kept);
}

/* Give all of a cache back to its pool's freelist. */
static void cache_drain(struct ap_cache *c)
{
	if (c->pool && ap_cache_n(c))
		(void)cache_flush_top(c, ap_cache_n(c));
	ap_cache_set_n(c, 0);
}

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
	c->pool = NULL;
}

/*
 * Free a cache of a thread that is gone; the lock is held.  What it
 * lent and was not given back to it stays counted, in the pool's.
 */
static void cache_free(struct ap_cache *c)
{
	cache_drain(c);
	if (c->pool && c->box)
		owner_leave_thread(c);  /* its outboxes, its inbox, and its lent count */
	else if (c->pool && c->lent)
		atomic_fetch_add_explicit(&c->pool->fl.lent, c->lent, memory_order_relaxed);
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
	ap_tc_last = &ap_cache_none;
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
			owners_after_fork(p);
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
				ap_tc_last = &ap_cache_none;
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
				  2 * (size_t)pool->cache_size * sizeof(uint32_t), AP_CACHE_LINE);
	struct ap_cache *c = aligned_alloc(AP_CACHE_LINE, size);

	if (!c)
		return NULL;
	memset(c, 0, size);
	c->size = pool->cache_size;
	c->gen = &c->idx[c->size];
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
	c->lent = old->lent;
	c->bypass = old->bypass;
	memcpy(c->outbox, old->outbox, sizeof(c->outbox));
	c->reg_next = old->reg_next;
	c->reg_pprev = old->reg_pprev;
	*c->reg_pprev = c;
	if (c->reg_next)
		c->reg_next->reg_pprev = &c->reg_next;
	c->pool = pool;
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
				return ap_tc_last = c;
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
	if (pool->fl.lazy && !owner_id_take(pool, c)) {
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
	pthread_mutex_unlock(&ap_cache_lock);
	return ap_tc_last = c;
}

struct ap_cache *ap_cache_get(struct asyncpool *pool)
{
	return cache_get(pool, true);
}

/* Make room in a full cache: batch buffers to the freelist, one CAS. */
__attribute__((noinline)) void ap_cache_flush_batch(struct ap_cache *c)
{
	uint32_t n = ap_cache_n(c);

	/* A local pool's depot first: the next refill takes it as it is. */
	if (c->pool->depot && ap_depot_put(c->pool, c))
		return;
	(void)cache_flush_top(c, c->batch < n ? c->batch : n);
}

/*
 * Buffer idx, whose word says owner id at generation gen, is id's in
 * the hints of the pool (its released[] and owner_of[]) too.  Every
 * lease of it so far is older than gen: the released[] hint says so,
 * so that it never lags a lease by 2^31 generations or more (it is
 * compared in serial arithmetic), however many leases went by the
 * freelist alone.  The arrays are arguments, so that a loop keeps them
 * in registers (ap_lend_pop()).
 */
static inline void own_hints(_Atomic uint32_t *released, _Atomic uint32_t *owner_of, uint32_t id,
			     uint32_t idx, uint32_t gen)
{
	atomic_store_explicit(&released[idx], ap_gen_prev(gen), memory_order_relaxed);
	atomic_store_explicit(&owner_of[idx], id, memory_order_relaxed);
}

/*
 * Buffer idx, cached at gen, is owner id's now: its word, then the
 * hints (a refill, a depot batch, a single lend).
 */
static inline void own_buffer(struct asyncpool *pool, uint32_t id, uint32_t idx, uint32_t gen)
{
	ap_state_own(&pool->fl.state[idx], id);
	own_hints(pool->released, pool->owner_of, id, idx, gen);
}

/* The buffers at entries [from, to) of cache c are its own now. */
static void cache_own(struct asyncpool *pool, struct ap_cache *c, uint32_t from, uint32_t to)
{
	for (uint32_t j = from; j < to; j++)
		own_buffer(pool, c->id, c->idx[j], c->gen[j]);
}

int ap_cache_fill(struct asyncpool *pool, struct ap_cache *c, uint32_t min, uint32_t max)
{
	uint32_t n, got = 0;
	int rc;

	/* A cache of no entries only lends (below): its callers pop instead. */
	if (AP_UNLIKELY(!c->size))
		return -ENOBUFS;
	/* What others sent back first: it is ours already, and no atomic. */
	if (c->box && owner_drain(pool, c, max) && ap_cache_n(c) >= min)
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
	rc = ap_pool_pop_chain(pool, &c->idx[n], &c->gen[n], sizeof(uint32_t),
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
		ap_fl_count_bad_release(&pool->fl, 1);
		return -EALREADY;
	}
	ap_cache_add_lent(c, -(int64_t)back);
	ap_cache_set_n(c, n + 1);
	return 0;
}

/*
 * What ap_cache_put_lent() leaves that still needs no more than the
 * calling thread's cache: a shared pool's release, by CAS, into the
 * cache.  (A pool that lends: ap_cache_put_lent() took what an outbox
 * could; the rest is ap_owner_release()'s.)
 */
static inline __attribute__((always_inline)) bool cache_put_other(struct asyncpool *pool,
								   uint32_t idx, uint32_t gen)
{
	struct ap_cache *c = ap_tc_last;
	bool done = false;

	if (AP_LIKELY(c->pool == pool && !pool->fl.lazy && idx < pool->fl.count &&
		      ap_cache_enter(c))) {
		uint32_t n = c->n, back = 0;

		if (AP_LIKELY(n != c->size && ap_cache_push(pool, c, n, idx, gen, &back))) {
			ap_cache_add_lent(c, -(int64_t)back);
			ap_cache_set_n(c, n + 1);
			done = true;
		}
		ap_cache_leave(c);
	}
	return done;
}

/* The rest of ap_cache_release(): a full cache, another pool's, a stale release. */
static __attribute__((noinline)) int cache_release_slow(struct asyncpool *pool, uint32_t idx,
							 uint32_t gen)
{
	struct ap_cache *c;
	int rc;

	if (pool->fl.lazy)
		return ap_owner_release(pool, idx, gen);
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

/*
 * A release of a pool with caches that ap_cache_put_lent() did not
 * take: asyncpool_release_token(), and the leases' callback below.  0,
 * or as cache_put() and ap_fl_release().
 */
int ap_cache_release(struct asyncpool *pool, uint32_t idx, uint32_t gen)
{
	struct ap_cache *c = ap_tc_last;

	/* Lending without a cache: the owner's own release (below). */
	if (c->pool == pool && !c->size && idx < pool->fl.count && ap_cache_enter(c)) {
		if (atomic_load_explicit(&pool->owner_of[idx], memory_order_relaxed) == c->id)
			return lend_back(pool, c, idx, gen);    /* ours */
		ap_cache_leave(c);
		return ap_owner_release(pool, idx, gen);
	}
	if (AP_LIKELY(cache_put_other(pool, idx, gen)))
		return 0;
	return cache_release_slow(pool, idx, gen);
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
	if (AP_LIKELY(ap_cache_put_lent(pool, idx, gen)))
		return;
	(void)ap_cache_release(pool, idx, gen);
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
		if (AP_LIKELY(ap_cache_put_lent(ctx, idx, gen)))
			return;
		(void)ap_cache_release(ctx, idx, gen);
		return;
	}
	if (AP_LIKELY(fn == (ap_release_fn *)(void (*)(void))ap_pool_recycle)) {
		(void)ap_fl_release(&((struct asyncpool *)ctx)->fl, idx, gen);
		return;
	}
	((ap_release_token_fn *)(void (*)(void))fn)(ctx, AP_TOKEN_MAKE(gen, idx));
}

/*
 * ap_cache_take_gen() of a pool that does not lend (a shared pool's
 * cache, pool->cache_size != 0): the buffer is marked leased, a CAS.
 * Its token, or 0.
 */
uint64_t ap_cache_take_shared(struct asyncpool *pool)
{
	struct ap_cache *c = ap_tc_last;
	uint32_t n, gen, lent = 0;
	uint64_t t = 0;

	if (c->pool == pool && !pool->fl.lazy && ap_cache_enter(c)) {
		/* n only once inside: a flusher may have emptied it. */
		if (AP_LIKELY((n = c->n) != 0) &&
		    AP_LIKELY((gen = ap_cache_lend(pool, c, n - 1, &lent)))) {
			t = AP_TOKEN_MAKE(gen, c->idx[n - 1]);
			ap_cache_set_n(c, n - 1);
		}
		ap_cache_leave(c);
	}
	return t;
}

/* One try: the calling thread's cache, refilled from the freelist. */
static int cache_acquire_once(struct asyncpool *pool, struct asyncpool_lease *out)
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
		 * (asyncpool_set_cache): it lends only (below). */
		ap_cache_leave(c);
		rc = ap_lend_acquire(pool, &idx, &gen);
		if (!rc)
			ap_pool_lease(pool, idx, gen, ap_cache_recycle, out);
		return rc;
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

		idx = c->idx[n - 1];
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
 * The calling thread's cache is empty.  If the freelist is empty too,
 * the buffers cached by the other threads of this process come back
 * (and, for a shared pool, the other processes are asked for theirs),
 * then one more try.
 */
int ap_cache_acquire_slow(struct asyncpool *pool, struct asyncpool_lease *out)
{
	int rc;

	ap_cache_honour_flush(pool);
	if (pool->boxes && ap_tc_last->pool == pool && ap_tc_last->size)
		/* Its cache ran dry: what it released for others goes now. */
		owner_send_all(pool, ap_tc_last);
	rc = cache_acquire_once(pool, out);
	if (rc == -ENOBUFS) {
		if (pool->shared)
			ap_flush_request(pool);
		if (ap_cache_flush_others(pool, false) > 0)
			rc = cache_acquire_once(pool, out);
	}
	if (rc)
		memset(out, 0, sizeof(*out));
	return rc;
}

/*
 * What ap_pool_cache_init() set up, undone (the lock is held, no cache
 * left): the depot, the owners' table, the pool's place in the list of
 * pools with caches.
 */
static void caches_free(struct asyncpool *pool)
{
	ap_depot_free(pool);
	owner_table_free(pool);
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
	if (pool->boxes && bypass_all(pool)) {
		/* Releases on their way to an owner are releases: decide them. */
		owners_settle(pool);
		bypass_end(pool);
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
		cache_drain(c);
		cache_detach(c);
	}
	caches_free(pool);
	pthread_mutex_unlock(&ap_cache_lock);
	return 0;
}

static bool mb_available(void);

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
		out += __atomic_load_n(&c->lent, __ATOMIC_RELAXED);
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
	/* A shared pool without caches has none; a local one lends (below). */
	if (!cache_size && pool->shared)
		return 0;
	pthread_once(&ap_tc_once, tc_init_once);
	if (!ap_tc_key_ok)
		return cache_size ? -ENOMEM : 0;
	/* A local pool's caches lend: a release or adoption by index then
	 * asks the caches, which needs membarrier(2) (ap_cache_lease_gen).
	 * Without it, a local pool without caches is the plain freelist. */
	lending = pool->fl.lazy;        /* already, without a cache */
	if (!cache_size && (lending || !mb_available()))
		return 0;
	pool->cache_batch = (cache_size + 1) / 2;      /* the depot's slots hold one */
	if (cache_size && !pool->shared && ap_depot_init(pool))
		return -ENOMEM;
	if (!lending && !pool->shared && mb_available() && owner_table_init(pool)) {
		ap_depot_free(pool);
		return cache_size ? -ENOMEM : 0;
	}
	pthread_mutex_lock(&ap_cache_lock);
	pool->fl.lazy = !pool->shared && mb_available();
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
		owner_send_all(pool, c);        /* what it released for others */
	if (!ap_cache_enter(c))
		return 0;       /* a flusher is emptying it */
	if (c->box)
		(void)owner_drain(pool, c, UINT32_MAX);
	n = ap_cache_n(c);
	rc = n ? cache_flush_top(c, n) : 0;
	ap_cache_leave(c);
	return rc;
}

/* ---- taking other threads' caches (pool_cache.h) ---- */

static pthread_once_t ap_mb_once = PTHREAD_ONCE_INIT;
static bool ap_mb_ok;

static void mb_register(void)
{
	ap_mb_ok = syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
}

static bool mb_available(void)
{
	pthread_once(&ap_mb_once, mb_register);
	return ap_mb_ok;
}

/*
 * Raise bypass on the caches of pool that do not have it, then wait
 * for each owner to be outside.  The lock is held.  false: membarrier(2)
 * is not available, nothing was changed.
 */
static bool bypass_all(struct asyncpool *pool)
{
	bool raised = false;

	if (!mb_available())
		return false;
	for (struct ap_cache *c = pool->caches; c; c = c->reg_next)
		if (!__atomic_load_n(&c->bypass, __ATOMIC_RELAXED)) {
			__atomic_store_n(&c->bypass, 1, __ATOMIC_RELAXED);
			raised = true;
		}
	if (raised && syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) != 0) {
		/* Registered, so it cannot fail; if it did, undo. */
		for (struct ap_cache *c = pool->caches; c; c = c->reg_next)
			__atomic_store_n(&c->bypass, pool->local_waiters ? 1 : 0, __ATOMIC_RELEASE);
		return false;
	}
	for (struct ap_cache *c = pool->caches; c; c = c->reg_next)
		while (__atomic_load_n(&c->busy, __ATOMIC_ACQUIRE)) {
			AP_TEST_STALL(AP_TS_FLUSH_WAITS);
			sched_yield();
		}
	return true;
}

/* Lower bypass again, unless a thread of this process waits.  The lock is held. */
static void bypass_end(struct asyncpool *pool)
{
	if (pool->local_waiters)
		return;
	for (struct ap_cache *c = pool->caches; c; c = c->reg_next)
		__atomic_store_n(&c->bypass, 0, __ATOMIC_RELEASE);
}

/*
 * Give every cache of pool in this process back to the freelist, the
 * calling thread's too (it is not inside its own).  Only when some
 * cache has buffers, unless force: a membarrier(2) costs every running
 * thread of the process an interrupt.  The buffers moved, or -EOPNOTSUPP
 * without membarrier(2).
 */
int ap_cache_flush_others(struct asyncpool *pool, bool force)
{
	uint64_t moved = 0;
	bool any = force;
	int rc = 0;

	if (!ap_pool_cached(pool))
		return 0;
	pthread_mutex_lock(&ap_cache_lock);
	for (struct ap_cache *c = pool->caches; c && !any; c = c->reg_next)
		any = ap_cache_n(c) != 0;
	if (!any && pool->boxes)
		any = owners_moving(pool);
	if (!any) {
		/* Empty caches put nothing into the depot. */
		moved = (uint64_t)ap_depot_drain(pool);
	} else {
		if (bypass_all(pool)) {
			uint32_t before = ap_fl_free(&pool->fl);

			for (struct ap_cache *c = pool->caches; c; c = c->reg_next) {
				moved += ap_cache_n(c);
				cache_drain(c);
			}
			if (pool->boxes) {
				owners_settle(pool);
				/* What it gave back is now on the list. */
				if (ap_fl_free(&pool->fl) > before + moved)
					moved = ap_fl_free(&pool->fl) - before;
			}
			/* No cache puts into the depot while bypassed. */
			moved += (uint64_t)ap_depot_drain(pool);
			bypass_end(pool);
		} else {
			rc = -EOPNOTSUPP;
		}
	}
	pthread_mutex_unlock(&ap_cache_lock);
	if (rc)
		return rc;
	return moved > INT32_MAX ? INT32_MAX : (int)moved;
}

/* A thread of this process starts or stops waiting for a buffer of pool. */
void ap_cache_wait_begin(struct asyncpool *pool)
{
	if (!ap_pool_cached(pool))
		return;
	pthread_mutex_lock(&ap_cache_lock);
	if (pool->local_waiters++ == 0 && bypass_all(pool)) {
		for (struct ap_cache *c = pool->caches; c; c = c->reg_next)
			cache_drain(c);
		if (pool->boxes)
			owners_settle(pool);
	}
	pthread_mutex_unlock(&ap_cache_lock);
	/* After the bypass no cache puts into the depot until the last
	 * waiter leaves: what it holds goes where the waiter looks. */
	(void)ap_depot_drain(pool);
}

void ap_cache_wait_end(struct asyncpool *pool)
{
	if (!ap_pool_cached(pool))
		return;
	pthread_mutex_lock(&ap_cache_lock);
	pool->local_waiters--;
	bypass_end(pool);
	pthread_mutex_unlock(&ap_cache_lock);
}

/* Ask the other processes of a shared pool for their cached buffers. */
void ap_flush_request(struct asyncpool *pool)
{
	uint32_t f = atomic_fetch_add_explicit(&pool->fl.line->flush, 1, memory_order_relaxed);

	/* Our own request needs no answer from us: the caller flushes. */
	atomic_store_explicit(&pool->flush_seen, f + 1, memory_order_relaxed);
}

/*
 * Honour a flush request of another process: called on the slow paths
 * (a refill, a full cache, a wait), never inside a cache.
 */
void ap_cache_honour_flush(struct asyncpool *pool)
{
	uint32_t f;

	if (!pool->shared)
		return;
	f = atomic_load_explicit(&pool->fl.line->flush, memory_order_relaxed);
	if (AP_LIKELY(f == atomic_load_explicit(&pool->flush_seen, memory_order_relaxed)))
		return;
	atomic_store_explicit(&pool->flush_seen, f, memory_order_relaxed);
	(void)ap_cache_flush_others(pool, false);
}

AP_EXPORT int asyncpool_cache_flush_all(struct asyncpool *pool)
{
	int rc;

	if (!pool)
		return -EINVAL;
	rc = ap_cache_flush_others(pool, false);
	return rc < 0 ? rc : 0;
}

/*
 * A release or adoption of a lent buffer by someone other than its
 * owner's fast path, with every owner of the process stopped as a flush
 * stops them (bypass_all), and every release on its way to an owner
 * decided first (owners_settle): then a CACHED word is a buffer in a
 * cache or the depot, or lent; a release by index, which knows no
 * generation, takes only one that no cache holds.  Slow (a membarrier),
 * and only for a release by index and an adoption of a lent buffer: not
 * for the acquire and release of every lease.
 */
int ap_cache_claim_lent(struct asyncpool *pool, uint32_t idx, uint32_t gen, bool adopt,
			uint32_t *newgen)
{
	ap_word *s = &pool->fl.state[idx];
	uint64_t w;
	uint32_t g;
	bool held = false;
	int kind = 0;

	pthread_mutex_lock(&ap_cache_lock);
	if (!bypass_all(pool)) {
		pthread_mutex_unlock(&ap_cache_lock);
		return 0;
	}
	owners_settle(pool);
	w = ap_state_load(s);
	if (AP_W_KIND(w) == AP_K_LEASED) {
		kind = -1;
		goto out;
	}
	g = AP_W_GEN(w);
	if (AP_W_KIND(w) != AP_K_CACHED || (gen && g != gen))
		goto out;
	for (struct ap_cache *c = pool->caches; c && !held; c = c->reg_next)
		for (uint32_t j = 0; j < ap_cache_n(c) && !held; j++)
			held = c->idx[j] == idx;
	if (held || ap_depot_holds(pool, idx))
		goto out;
	if (adopt) {
		uint64_t to = AP_W_MAKE(AP_K_LEASED, pool->fl.me, ap_gen_next(g));

		if (!ap_state_cas(s, &w, to))
			goto out;
		*newgen = ap_gen_next(g);
	} else {
		if (!ap_state_cas(s, &w, AP_W_MAKE(AP_K_FREE, pool->fl.me, g)))
			goto out;
		if (ap_fl_push(&pool->fl, idx)) {
			ap_state_unclaim(s, w);
			goto out;
		}
	}
	atomic_store_explicit(&pool->owner_of[idx], 0, memory_order_relaxed);
	owner_lent_back(pool, AP_W_OWNER(w));
	kind = AP_K_CACHED;
out:
	bypass_end(pool);
	pthread_mutex_unlock(&ap_cache_lock);
	return kind;
}

/* ---- Ownership (issue 22): one writer per lent buffer's word ----
 *
 * In a local pool whose caches lend (fl.lazy), a buffer in a cache, or
 * lent from one, is owned by that cache: its word names the owner's id
 * (buffer_state.h), and only the owner writes it, with a load and a
 * store inside its window (ap_cache_enter ... leave).  A release on the
 * owner's thread is decided there and then (ap_cache_push); a release
 * on another thread reads the word (a stale or double copy is refused
 * at once), then sends the token to the owner: gathered per owner in
 * the releaser's outboxes, a batch of AP_OUTBOX_BATCH into the owner's
 * inbox (pool_inbox.h) with one CAS.  The owner decides them in turn
 * when it next refills (ap_cache_fill), so two racing copies are
 * decided one after the other, with no atomic on the owner's side.
 *
 * The others that write an owned word come after the owner or exclude
 * it, and use a CAS: a flusher that stopped every owner (bypass_all,
 * under ap_cache_lock) decides what is on its way (owners_settle); once
 * the owner's thread has exited (its id an orphan), anyone.  A sender
 * looks at orphan after it published (a seq_cst fence between), and the
 * exiting owner drains its inbox after it set orphan: one of them sees
 * the other.  It wakes the pool's waiters the same way (pool_wait.h),
 * and a waiter, a flush or an acquire that finds the pool empty settles
 * every inbox and outbox: nothing released is stranded.
 * tests/model/owner.pml proves the protocol.
 */

#define AP_OWNERS_MAX 1024u      /* ids per pool; a freed id is used again */

static int owner_table_init(struct asyncpool *pool)
{
	uint32_t cap = 64;

	while (cap < pool->fl.count && cap < 4096)
		cap *= 2;
	pool->boxes = calloc(AP_OWNERS_MAX, sizeof(*pool->boxes));
	pool->owner_of = calloc(pool->fl.count, sizeof(*pool->owner_of));
	pool->released = calloc(pool->fl.count, sizeof(*pool->released));
	if (!pool->boxes || !pool->owner_of || !pool->released) {
		owner_table_free(pool);
		return -ENOMEM;
	}
	pool->box_cap = cap;
	atomic_store_explicit(&pool->box_count, 1, memory_order_relaxed);
	return 0;
}

static void owner_table_free(struct asyncpool *pool)
{
	for (uint32_t o = 1; pool->boxes && o < pool->box_count; o++)
		free(pool->boxes[o]);
	free(pool->boxes);
	free((void *)pool->owner_of);
	free((void *)pool->released);
	pool->boxes = NULL;
	pool->owner_of = pool->released = NULL;
}

static struct ap_inbox *box_of(struct asyncpool *pool, uint32_t o)
{
	return o && o < atomic_load_explicit(&pool->box_count, memory_order_acquire) ?
	       pool->boxes[o] : NULL;
}

/*
 * An owner id for cache c; the lock is held.  An orphan's id is used
 * again once nothing it lent is out and its inbox is empty: a sender
 * with a valid lease of it holds it out.  0 if every id is in use.
 */
static uint32_t owner_id_take(struct asyncpool *pool, struct ap_cache *c)
{
	uint32_t n = atomic_load_explicit(&pool->box_count, memory_order_relaxed);
	struct ap_inbox *b;

	for (uint32_t o = 1; o < n; o++) {
		b = pool->boxes[o];
		if (atomic_load_explicit(&b->orphan, memory_order_acquire) &&
		    !atomic_load_explicit(&b->out, memory_order_acquire) && !ap_inbox_count(b) &&
		    b->head == atomic_load_explicit(&b->tail, memory_order_relaxed)) {
			atomic_store_explicit(&b->orphan, 0, memory_order_relaxed);
			c->id = o;
			c->box = b;
			return o;
		}
	}
	if (n >= AP_OWNERS_MAX)
		return 0;
	b = aligned_alloc(AP_CACHE_LINE, sizeof(*b) + (size_t)pool->box_cap * sizeof(uint64_t));
	if (!b)
		return 0;
	memset(b, 0, sizeof(*b) + (size_t)pool->box_cap * sizeof(uint64_t));
	b->mask = pool->box_cap - 1;
	pool->boxes[n] = b;
	atomic_store_explicit(&pool->box_count, n + 1, memory_order_release);
	c->id = n;
	c->box = b;
	return n;
}

/* A lent buffer of owner o came back other than through o: counted. */
static void owner_lent_back(struct asyncpool *pool, uint32_t o)
{
	struct ap_inbox *b = box_of(pool, o);

	if (b)
		atomic_fetch_sub_explicit(&b->out, 1, memory_order_relaxed);
	else
		ap_fl_lent_back(&pool->fl, 1);
}

/*
 * Decide a token for someone other than the owner (a flusher that
 * excluded it, or anyone once it is an orphan): by CAS, to the freelist.
 * true if it was taken.
 */
static bool other_apply(struct asyncpool *pool, uint64_t tok)
{
	uint32_t idx = AP_INBOX_INDEX(tok), gen = AP_TOKEN_GEN(tok), kind;
	uint64_t was;

	if (idx >= pool->fl.count || !gen)
		goto bad;
	kind = ap_state_claim_leased_was(&pool->fl.state[idx], gen, pool->fl.me, AP_LENT, &was);
	if (!kind)
		goto bad;
	atomic_store_explicit(&pool->owner_of[idx], 0, memory_order_relaxed);
	if (ap_fl_push(&pool->fl, idx)) {
		ap_state_unclaim(&pool->fl.state[idx], was);
		goto bad;
	}
	atomic_store_explicit(&pool->released[idx], AP_W_GEN(was), memory_order_relaxed);
	if (kind == AP_K_CACHED)
		owner_lent_back(pool, AP_W_OWNER(was));
	return true;
bad:
	ap_fl_count_bad_release(&pool->fl, 1);
	return false;
}

/* Empty inbox b by other_apply(): the lock is held, its owner excluded or gone. */
static void box_drain_other(struct asyncpool *pool, struct ap_inbox *b)
{
	uint64_t tok;

	while ((tok = ap_inbox_next(b)) != 0)
		(void)other_apply(pool, tok);
	ap_inbox_done(b);
}

/*
 * owner_drain()'s cache is full at n: write back n and the lent ones
 * given back since the last write (taken), flush a batch, return the
 * new n.  Out of line, so that the loop keeps its registers.
 */
static __attribute__((noinline)) uint32_t drain_flush(struct ap_cache *c, uint32_t n,
						      uint32_t taken)
{
	ap_cache_set_n(c, n);
	ap_cache_add_lent(c, -(int64_t)taken);
	ap_cache_flush_batch(c);
	return ap_cache_n(c);
}

/*
 * The owner's look at its inbox (c entered): each token decided with a
 * load and a store, into the cache (a batch flushed when it is full).
 * At most max tokens.  true if any.  The cache's n and lent and the
 * inbox's head stay in registers and are written once at the end (and
 * before a flush, which reads them): the owner is inside, so no one
 * else looks at them; what was taken and refused follows from how far
 * head and n moved.
 */
static bool owner_drain(struct asyncpool *pool, struct ap_cache *c, uint32_t max)
{
	struct ap_inbox *b = c->box;
	ap_word *state = pool->fl.state;
	_Atomic uint32_t *released = pool->released;
	const uint64_t word = ap_owned_word(c->id, 0);
	const uint32_t count = pool->fl.count, size = c->size, mask = b->mask;
	const uint32_t head0 = b->head, end = head0 + max;
	uint32_t head = head0, taken = 0;
	/* top: where the next one goes; its generation goes size entries on. */
	uint32_t *top = &c->idx[ap_cache_n(c)], *top0 = top, *full = &c->idx[size];

	if (head == atomic_load_explicit(&b->tail, memory_order_relaxed))
		return false;
	if (!size)
		return lend_drain(pool, c, max);
	while (head != end) {
		_Atomic uint64_t *slot = &b->slot[head & mask];
		uint64_t tok = atomic_load_explicit(slot, memory_order_acquire);
		uint32_t idx, g;

		if (!tok)
			break;
		atomic_store_explicit(slot, 0, memory_order_relaxed);
		head++;
		idx = AP_INBOX_INDEX(tok);
		g = AP_TOKEN_GEN(tok);
		if (idx >= count || !ap_state_owner_back_word(&state[idx], word, g))
			continue;       /* refused: counted below */
		/* The sender wrote it if it could: then the line stays its own. */
		if (!(AP_TOKEN_INDEX(tok) & AP_INBOX_HINTED))
			atomic_store_explicit(&released[idx], g, memory_order_relaxed);
		if (AP_UNLIKELY(top == full)) {
			uint32_t n = drain_flush(c, size, (uint32_t)(top - top0));

			taken += (uint32_t)(top - top0);
			top = top0 = &c->idx[n];
		}
		top[size] = ap_gen_next(g);
		*top++ = idx;
	}
	taken += (uint32_t)(top - top0);
	b->head = head;
	ap_cache_set_n(c, (uint32_t)(top - c->idx));
	ap_cache_add_lent(c, -(int64_t)(top - top0));
	ap_inbox_done(b);
	if (head - head0 != taken)
		ap_fl_count_bad_release(&pool->fl, head - head0 - taken);
	return head != head0;
}

/*
 * Send k tokens to owner o (the caller outside its window).  A full
 * inbox is emptied by the sender itself, as a flusher: its owner is
 * stopped first.  locked: the caller holds ap_cache_lock.
 */
static int owner_send(struct asyncpool *pool, uint32_t o, const uint64_t *tok, uint32_t k,
		      bool locked)
{
	struct ap_inbox *b = box_of(pool, o);

	if (!b) {
		ap_fl_count_bad_release(&pool->fl, k);
		return -EALREADY;
	}
	while (!ap_inbox_send(b, tok, k)) {
		if (!locked)
			pthread_mutex_lock(&ap_cache_lock);
		if (atomic_load_explicit(&b->orphan, memory_order_acquire)) {
			box_drain_other(pool, b);
		} else if (bypass_all(pool)) {
			box_drain_other(pool, b);
			bypass_end(pool);
		}
		if (!locked)
			pthread_mutex_unlock(&ap_cache_lock);
		sched_yield();
	}
	/* Published before the looks at orphan and at the waiters: one of
	 * them, or the exiting owner / the waiter, sees the other. */
	atomic_thread_fence(memory_order_seq_cst);
	if (AP_UNLIKELY(atomic_load_explicit(&b->orphan, memory_order_relaxed))) {
		AP_TEST_STALL(AP_TS_ORPHAN_SEEN);
		if (!locked)
			pthread_mutex_lock(&ap_cache_lock);
		/*
		 * Again under the lock: before we had it, someone else may
		 * have drained the box, and a new thread taken the id
		 * (owner_id_take); its owner, alive, is then the only one
		 * that may read the ring and write its words.
		 */
		if (atomic_load_explicit(&b->orphan, memory_order_relaxed))
			box_drain_other(pool, b);
		if (!locked)
			pthread_mutex_unlock(&ap_cache_lock);
	}
	ap_wait_wake(pool->fl.line, false);
	return 0;
}

/* Send what cache c gathered for other owners (its thread, outside). */
static void owner_send_all(struct asyncpool *pool, struct ap_cache *c)
{
	uint64_t tok[AP_OUTBOX_BATCH];

	for (uint32_t k = 0; k < AP_OUTBOXES; k++) {
		struct ap_outbox *ob = &c->outbox[k];
		uint32_t n, o;

		if (!__atomic_load_n(&ob->n, __ATOMIC_RELAXED) || !ap_cache_enter(c))
			continue;       /* empty, or a flusher took it */
		n = ob->n;
		o = ob->owner;
		memcpy(tok, ob->tok, n * sizeof(*tok));
		__atomic_store_n(&ob->n, 0, __ATOMIC_RELAXED);
		ap_cache_leave(c);
		if (n)
			(void)owner_send(pool, o, tok, n, false);
	}
}

/* Whether any release is on its way to an owner; the lock is held. */
static bool owners_moving(const struct asyncpool *pool)
{
	for (const struct ap_cache *c = pool->caches; c; c = c->reg_next)
		for (uint32_t k = 0; k < AP_OUTBOXES; k++)
			if (__atomic_load_n(&c->outbox[k].n, __ATOMIC_RELAXED))
				return true;
	for (uint32_t o = 1; o < pool->box_count; o++)
		if (ap_inbox_count(pool->boxes[o]))
			return true;
	return false;
}

/*
 * Decide every release on its way to an owner, to the freelist: the
 * lock is held and every owner stopped (bypass_all), or gone.
 */
static void owners_settle(struct asyncpool *pool)
{
	for (struct ap_cache *c = pool->caches; c; c = c->reg_next)
		for (uint32_t k = 0; k < AP_OUTBOXES; k++) {
			struct ap_outbox *ob = &c->outbox[k];

			for (uint32_t j = 0; j < ob->n; j++)
				(void)other_apply(pool, ob->tok[j]);
			__atomic_store_n(&ob->n, 0, __ATOMIC_RELAXED);
		}
	for (uint32_t o = 1; o < atomic_load_explicit(&pool->box_count, memory_order_relaxed); o++)
		box_drain_other(pool, pool->boxes[o]);
}

/*
 * In a forked child (the lock held, the only thread, outside its
 * window): an inbox may hold slots that a sender which did not come
 * along reserved and never wrote, and tokens an owner which did not
 * come along took out and did not decide.  A receiver stops at the
 * first empty slot, so every token behind such a gap would strand,
 * and the ring would fill and make every later send spin.  Decide what
 * was written, by CAS, and start every ring empty; the releases in
 * flight in the threads that did not come along are lost with them
 * (their buffers stay lent, as a lease those threads held does).
 */
static void owners_after_fork(struct asyncpool *pool)
{
	for (uint32_t o = 1; o < atomic_load_explicit(&pool->box_count, memory_order_relaxed); o++) {
		struct ap_inbox *b = pool->boxes[o];
		uint32_t t = atomic_load_explicit(&b->tail, memory_order_relaxed);

		for (; b->head != t; b->head++) {
			uint64_t tok = atomic_exchange_explicit(&b->slot[b->head & b->mask], 0,
								memory_order_relaxed);

			if (tok)
				(void)other_apply(pool, tok);
		}
		ap_inbox_done(b);
	}
}

/*
 * The thread of cache c exits (or, in a forked child, was not copied);
 * the lock is held, its cache array already given back.  What it
 * gathered for others goes to them; its id becomes an orphan, so that
 * what it lent is released by CAS from now on, and what was sent to it
 * is decided here, after orphan is set (owner_send looks after it).
 */
static void owner_leave_thread(struct ap_cache *c)
{
	struct asyncpool *pool = c->pool;
	struct ap_inbox *b = c->box;

	for (uint32_t k = 0; k < AP_OUTBOXES; k++) {
		struct ap_outbox *ob = &c->outbox[k];
		uint32_t n = ob->n;

		__atomic_store_n(&ob->n, 0, __ATOMIC_RELAXED);
		if (n)
			(void)owner_send(pool, ob->owner, ob->tok, n, true);
	}
	atomic_fetch_add_explicit(&b->out, c->lent, memory_order_relaxed);
	c->lent = 0;
	atomic_store_explicit(&b->orphan, 1, memory_order_seq_cst);
	atomic_thread_fence(memory_order_seq_cst);
	box_drain_other(pool, b);
	c->box = NULL;
}

/*
 * A release of a pool that lends, which the fast path left (the caller
 * is outside its cache): a lease popped straight from the freelist
 * (LEASED, by CAS, as in a pool that does not lend), the owner's own
 * when its cache was full, another owner's (to its outbox), an
 * orphan's (by CAS), or a stale copy (refused).
 */
int ap_owner_release(struct asyncpool *pool, uint32_t idx, uint32_t gen)
{
	uint64_t w, tok = AP_TOKEN_MAKE(gen, idx);
	uint64_t batch[AP_OUTBOX_BATCH];
	uint32_t o, n, r, sent = 0, to = 0;
	struct ap_outbox *ob;
	struct ap_cache *c;
	bool inside;
	ap_word *s;

	if (AP_UNLIKELY(idx >= pool->fl.count))
		return -EINVAL;
	s = &pool->fl.state[idx];
	c = ap_cache_of(pool);
	inside = c && c->box && ap_cache_enter(c);
	if (inside)
		AP_TEST_STALL(AP_TS_OWNER_INSIDE);
	o = atomic_load_explicit(&pool->owner_of[idx], memory_order_relaxed);
	if (!o || (inside && c->id == o)) {
		/*
		 * No owner (a lease popped straight from the freelist), or
		 * ours: the word says what it is.  Another owner's is known
		 * by the hints alone, so that its line stays with its owner.
		 */
		w = ap_state_load(s);
		o = AP_W_OWNER(w);
		if (AP_W_KIND(w) == AP_K_LEASED) {
			/* Lent by no one: into our cache by CAS, or to the freelist. */
			if (inside && !c->size) {
				ap_cache_leave(c);      /* it only lends */
			} else if (inside) {
				n = ap_cache_n(c);
				if (n == c->size) {
					ap_cache_flush_batch(c);
					n = ap_cache_n(c);
				}
				if (ap_state_leased_to_owned(s, gen, c->id)) {
					/* As cache_own(): the hint is not behind. */
					atomic_store_explicit(&pool->released[idx], gen,
							      memory_order_relaxed);
					atomic_store_explicit(&pool->owner_of[idx], c->id,
							      memory_order_relaxed);
					c->idx[n] = idx;
					c->gen[n] = ap_gen_next(gen);
					ap_cache_set_n(c, n + 1);
					ap_cache_leave(c);
					return 0;
				}
				ap_cache_leave(c);
			}
			return ap_fl_release(&pool->fl, idx, gen);
		}
		if (w != ap_owned_word(o, gen) || !gen || !box_of(pool, o))
			goto stale;
	}
	if (inside && c->id == o && !c->size)
		return lend_back(pool, c, idx, gen);    /* ours, lent without a cache */
	if (inside && c->id == o) {
		/* Ours, and the fast path found the cache full. */
		n = ap_cache_n(c);
		if (n == c->size) {
			ap_cache_flush_batch(c);
			n = ap_cache_n(c);
		}
		if (!ap_state_owner_back(s, o, gen))
			goto stale;
		atomic_store_explicit(&pool->released[idx], gen, memory_order_relaxed);
		c->idx[n] = idx;
		c->gen[n] = ap_gen_next(gen);
		ap_cache_set_n(c, n + 1);
		ap_cache_add_lent(c, -1);
		ap_cache_leave(c);
		return 0;
	}
	/*
	 * Another owner's.  Released already (this generation or a later
	 * one): refused at once.  Else the token goes to the owner, which
	 * decides by the word (a racing copy is counted then).  The hint
	 * is written only where a release was decided (the owner, or
	 * other_apply): a token whose generation the buffer never had must
	 * not make the holder's own release look stale.  An owner that
	 * exited is seen when the batch is sent (owner_send).
	 */
	r = atomic_load_explicit(&pool->released[idx], memory_order_relaxed);
	if ((int32_t)(gen - r) <= 0 || !gen || !box_of(pool, o))
		goto stale;
	AP_TEST_STALL(AP_TS_CACHE_CLAIM);
	/*
	 * The lease right after the last one decided: a copy of the lease
	 * the buffer is lent in (or a token forged with exactly the next
	 * generation, the class of a forged pointer).  Its sender writes the
	 * hint, and tells the owner so: in a hand-off the hint's line then
	 * stays with the releasing thread, as the word's stays with the
	 * owner.  Any other generation only goes to the owner, which writes
	 * the hint if it takes it.
	 */
	if (gen == ap_gen_next(r)) {
		atomic_store_explicit(&pool->released[idx], gen, memory_order_relaxed);
		tok |= AP_INBOX_HINTED;
	}
	if (!inside)
		return owner_send(pool, o, &tok, 1, false);
	ob = &c->outbox[o % AP_OUTBOXES];
	if (ob->n && ob->owner != o) {
		/* Another owner's batch in this outbox: it goes first. */
		sent = ob->n;
		to = ob->owner;
		memcpy(batch, ob->tok, sent * sizeof(*batch));
		__atomic_store_n(&ob->n, 0, __ATOMIC_RELAXED);
	}
	ob->owner = o;
	ob->tok[ob->n] = tok;
	__atomic_store_n(&ob->n, ob->n + 1, __ATOMIC_RELAXED);
	if (!sent && ob->n == AP_OUTBOX_BATCH) {
		sent = ob->n;
		to = o;
		memcpy(batch, ob->tok, sent * sizeof(*batch));
		__atomic_store_n(&ob->n, 0, __ATOMIC_RELAXED);
	}
	ap_cache_leave(c);
	if (sent)
		(void)owner_send(pool, to, batch, sent, false);
	return 0;
stale:
	if (inside)
		ap_cache_leave(c);
	ap_fl_count_bad_release(&pool->fl, 1);
	return -EALREADY;
}

/* ---- lending without a cache ---- */

/*
 * Lending without a cache (since 1.3.3, issue 22): a local pool with
 * cache_size 0 gives each thread that uses it an owner id and a cache
 * of no entries, which only lends.  An acquire pops one buffer and owns
 * it (CACHED id g, as a refill's buffers are); the owner's release
 * decides it with a load and a store (ap_state_owner_free) and pushes it
 * straight back; a release on another thread goes to the owner's inbox
 * in a batch, as in a pool with caches, and the owner pushes what it
 * takes from there as one chain at its next acquire.  So no free buffer
 * waits in a thread, no release needs a CAS on the buffer's word, and in
 * a hand-off only the acquiring thread touches the freelist's head.
 * Everything else (flushers, waiters, thread exit, fork, the audit) is
 * the ownership of a pool with caches, with caches that hold nothing.
 */

/*
 * Buffer idx, lent by cache c (entered) at gen, made free by c, not yet
 * linked.  No owner from now on: a copy released later reads the word,
 * which is free, or another owner's at a later generation.  The
 * released[] hint is left: it matters only while an owner holds the
 * buffer, and the pop that lends it next writes it (ap_lend_pop).
 */
static inline bool lend_free(ap_word *state, _Atomic uint32_t *owner_of, uint64_t word,
			     uint32_t idx, uint32_t gen)
{
	if (AP_UNLIKELY(!gen || !ap_state_owner_free(&state[idx], word, gen)))
		return false;
	atomic_store_explicit(&owner_of[idx], 0, memory_order_relaxed);
	return true;
}

/*
 * The owner's release of a buffer it lent (c entered, of no entries;
 * left here): 0, -EALREADY if the word says otherwise (counted), or the
 * push's error.  Only we write its word and owner_of[]; free and not
 * linked once we leave, so the push comes after (a flusher leaves a
 * free word alone; a corrupt list loses it, counted, as a flush's push
 * does).
 */
static int lend_back(struct asyncpool *pool, struct ap_cache *c, uint32_t idx, uint32_t gen)
{
	bool ok = lend_free(pool->fl.state, pool->owner_of, ap_owned_word(c->id, 0), idx, gen);

	if (AP_LIKELY(ok))
		ap_cache_add_lent(c, -1);
	ap_cache_leave(c);
	if (AP_LIKELY(ok))
		return ap_fl_push(&pool->fl, idx);
	ap_fl_count_bad_release(&pool->fl, 1);
	return -EALREADY;
}

/*
 * owner_drain() of a cache of no entries (entered): each token decided
 * as lend_back() decides, and what it took pushed back, one chain per
 * AP_OUTBOX_BATCH.  At most max tokens; true if any.
 */
static bool lend_drain(struct asyncpool *pool, struct ap_cache *c, uint32_t max)
{
	struct ap_inbox *b = c->box;
	const uint64_t word = ap_owned_word(c->id, 0);
	const uint32_t count = pool->fl.count, head0 = b->head;
	uint32_t chain[AP_OUTBOX_BATCH], n = 0, taken = 0;
	uint64_t tok;

	while (b->head - head0 < max && (tok = ap_inbox_next(b)) != 0) {
		uint32_t idx = AP_INBOX_INDEX(tok);

		if (idx >= count || !lend_free(pool->fl.state, pool->owner_of, word, idx,
					       AP_TOKEN_GEN(tok)))
			continue;       /* refused: counted below */
		chain[n++] = idx;
		if (n == AP_OUTBOX_BATCH) {
			(void)ap_fl_push_chain(&pool->fl, chain, n);
			taken += n;
			n = 0;
		}
	}
	if (n)
		(void)ap_fl_push_chain(&pool->fl, chain, n);
	taken += n;
	ap_cache_add_lent(c, -(int64_t)taken);
	ap_inbox_done(b);
	if (b->head - head0 != taken)
		ap_fl_count_bad_release(&pool->fl, b->head - head0 - taken);
	return b->head != head0;
}

struct ap_cache *ap_lend_enter(struct asyncpool *pool)
{
	struct ap_cache *c = ap_cache_of(pool);
	struct ap_inbox *b;

	if (!c || c->size || !(b = c->box) || !ap_cache_enter(c))
		return NULL;
	if (b->head != atomic_load_explicit(&b->tail, memory_order_relaxed))
		(void)lend_drain(pool, c, b->mask + 1);
	return c;
}

uint32_t ap_lend_pop(struct asyncpool *pool, struct ap_cache *c, char *idx, char *gen,
		     size_t stride, uint32_t n, int *rc)
{
	/* In locals: the records' stores may alias anything. */
	_Atomic uint32_t *const released = pool->released, *const owner_of = pool->owner_of;
	const uint32_t id = c->id;
	uint32_t v[AP_LEND_CHUNK], g[AP_LEND_CHUNK], done = 0;
	int err = 0;

	while (done < n) {
		uint32_t k = n - done < AP_LEND_CHUNK ? n - done : AP_LEND_CHUNK;

		err = ap_pool_pop_owned(pool, v, g, k, id);
		if (AP_UNLIKELY(err))
			break;
		for (uint32_t j = 0; j < k; j++, idx += stride, gen += stride) {
			uint32_t i = v[j], gj = g[j];

			own_hints(released, owner_of, id, i, gj);   /* the pop wrote the word */
			memcpy(idx, &i, sizeof(i));
			memcpy(gen, &gj, sizeof(gj));
		}
		done += k;
	}
	ap_cache_add_lent(c, done);
	*rc = err;
	return done;
}

/* A single pop marked cached, lent by c (ap_pool_pop(): cheaper for one than ap_lend_pop()). */
static inline void lend_one(struct asyncpool *pool, struct ap_cache *c, uint32_t idx, uint32_t gen)
{
	own_buffer(pool, c->id, idx, gen);
	ap_cache_add_lent(c, 1);
}

/* One buffer, lent by the calling thread's cache if it can (else leased): 0 or -errno. */
static int lend_pop(struct asyncpool *pool, uint32_t *idx, uint32_t *gen)
{
	struct ap_cache *c = ap_lend_enter(pool);
	int rc = ap_pool_pop(pool, c ? AP_K_CACHED : AP_K_LEASED, idx, gen);

	if (c) {
		if (!rc)
			lend_one(pool, c, *idx, *gen);
		ap_cache_leave(c);
	}
	return rc;
}

int ap_lend_acquire(struct asyncpool *pool, uint32_t *idx, uint32_t *gen)
{
	struct ap_cache *c = ap_tc_last;
	int rc;

	/* The thread's cache used last is this pool's: lend_pop(), inline. */
	if (AP_LIKELY(c->pool == pool && !c->size && ap_cache_enter(c))) {
		struct ap_inbox *b = c->box;

		if (AP_UNLIKELY(b->head != atomic_load_explicit(&b->tail, memory_order_relaxed)))
			(void)lend_drain(pool, c, b->mask + 1);
		rc = ap_pool_pop(pool, AP_K_CACHED, idx, gen);
		if (AP_LIKELY(!rc))
			lend_one(pool, c, *idx, *gen);
		ap_cache_leave(c);
	} else {
		rc = lend_pop(pool, idx, gen);
	}

	/* Releases on their way to an owner come back, as for a pool with
	 * caches (ap_cache_acquire_slow), then one more try. */
	if (rc == -ENOBUFS && ap_cache_flush_others(pool, false) > 0)
		rc = lend_pop(pool, idx, gen);
	return rc;
}

int ap_lend_lease(struct asyncpool *pool, struct asyncpool_lease *out)
{
	uint32_t idx, gen;
	int rc = ap_lend_acquire(pool, &idx, &gen);

	if (AP_UNLIKELY(rc)) {
		memset(out, 0, sizeof(*out));
		return rc;
	}
	ap_pool_lease(pool, idx, gen, ap_cache_recycle, out);
	return 0;
}

uint32_t ap_lend_put(struct asyncpool *pool, struct ap_cache *c, const uint64_t *tok, uint32_t k,
		     uint64_t *rest)
{
	/* In locals: the atomic stores would have them reloaded. */
	ap_word *const state = pool->fl.state;
	_Atomic uint32_t *const owner_of = pool->owner_of;
	const uint32_t id = c->id;
	const uint64_t word = ap_owned_word(id, 0);
	uint32_t chain[AP_OUTBOX_BATCH], n = 0, r = 0, taken = 0;

	for (uint32_t j = 0; j < k; j++) {
		uint32_t idx = AP_TOKEN_INDEX(tok[j]);

		if (AP_LIKELY(atomic_load_explicit(&owner_of[idx], memory_order_relaxed) == id &&
			      lend_free(state, owner_of, word, idx, AP_TOKEN_GEN(tok[j])))) {
			chain[n++] = idx;
			if (n == AP_OUTBOX_BATCH) {
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
