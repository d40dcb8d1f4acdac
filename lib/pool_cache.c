/* SPDX-License-Identifier: MIT */
/*
 * Per-thread caches and bulk operations (see pool_cache.h for the cache
 * and the buffer states).
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

#include <stdlib.h>

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

/* The smallest options struct this library accepts: up to flags. */
#define POOL_OPTS_V1 (offsetof(struct asyncpool_options, flags) + sizeof(uint32_t))

static void count_bad(struct asyncpool *pool, uint64_t n)
{
	atomic_fetch_add_explicit(&pool->ctr->bad_releases, n, memory_order_relaxed);
}

/* Give all of a cache back to its pool's freelist, as one chain. */
static void cache_drain(struct ap_cache *c)
{
	uint32_t n = ap_cache_n(c);

	if (c->pool && n)
		(void)ap_fl_push_chain(c->pool, c->idx, n);
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

/* Thread exit: flush and free the thread's caches. */
static void tc_destroy(void *arg)
{
	struct ap_tcache *t = arg;

	pthread_mutex_lock(&ap_cache_lock);
	for (uint32_t i = 0; i < t->n; i++) {
		struct ap_cache *c = t->v[i];

		cache_drain(c);
		cache_detach(c);
		free(c);
	}
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

		for (; c; c = nx) {
			nx = c->reg_next;
			if (p->shared)
				ap_cache_set_n(c, 0);
			if (c->owner == ap_tc_table)
				continue;
			cache_drain(c);
			cache_detach(c);
			free(c);
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

/* This thread's cache of pool, created on first use; NULL if none. */
static struct ap_cache *cache_get(struct asyncpool *pool, bool create)
{
	struct ap_tcache *t = ap_tc_table;
	struct ap_cache *c;
	size_t size;

	if (t)
		for (uint32_t i = 0; i < t->n; i++)
			if (t->v[i]->pool == pool)
				return ap_tc_last = t->v[i];
	if (!create || !pool->cache_size || !ap_tc_key_ok)
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
	/* Whole cache lines of its own: no false sharing with a neighbour. */
	size = ap_align_up(sizeof(*c) + (size_t)pool->cache_size * sizeof(uint32_t), AP_CACHE_LINE);
	c = aligned_alloc(AP_CACHE_LINE, size);
	if (!c)
		return NULL;
	memset(c, 0, size);
	c->size = pool->cache_size;
	c->batch = pool->cache_batch;
	c->owner = t;
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
	t->v[t->n++] = c;
	c->pool = pool;
	c->reg_next = pool->caches;
	if (pool->caches)
		pool->caches->reg_pprev = &c->reg_next;
	c->reg_pprev = &pool->caches;
	pool->caches = c;
	pthread_mutex_unlock(&ap_cache_lock);
	return ap_tc_last = c;
}

static inline struct ap_cache *cache_of(struct asyncpool *pool)
{
	struct ap_cache *c = ap_tc_last;

	if (AP_LIKELY(c->pool == pool))
		return c;
	return cache_get(pool, true);
}

/* Make room in a full cache: batch buffers to the freelist, one CAS. */
static __attribute__((noinline)) void cache_flush_batch(struct ap_cache *c)
{
	uint32_t n = ap_cache_n(c), k = c->batch < n ? c->batch : n;

	(void)ap_fl_push_chain(c->pool, &c->idx[n - k], k);
	ap_cache_set_n(c, n - k);
}

/* Fill an empty cache with up to batch buffers, one CAS. */
static int cache_refill(struct ap_cache *c)
{
	uint32_t got = 0;
	int rc = ap_fl_pop_chain(c->pool, c->idx, sizeof(uint32_t), 1, c->batch,
				 AP_FL_CACHED, &got);

	ap_cache_set_n(c, rc ? 0 : got);
	return rc;
}

/* Release into the calling thread's cache; c belongs to pool. */
static inline void cache_put(struct asyncpool *pool, struct ap_cache *c, uint32_t idx)
{
	uint32_t n;

	if (AP_UNLIKELY(idx >= pool->count))
		return;
	if (AP_UNLIKELY(atomic_load_explicit(&pool->next[idx], memory_order_relaxed) !=
			AP_FL_LEASED)) {
		count_bad(pool, 1);
		return;
	}
	atomic_store_explicit(&pool->next[idx], AP_FL_CACHED, memory_order_relaxed);
	n = c->n;
	if (AP_UNLIKELY(n == c->size)) {
		cache_flush_batch(c);
		n = c->n;
	}
	c->idx[n] = idx;
	ap_cache_set_n(c, n + 1);
}

static __attribute__((noinline)) void cache_recycle_slow(struct asyncpool *pool, uint32_t idx)
{
	struct ap_cache *c = cache_of(pool);

	if (!c) {
		/* No cache for this thread (out of memory): the freelist. */
		(void)ap_fl_push(pool, idx);
		return;
	}
	cache_put(pool, c, idx);
}

/*
 * The release callback of the leases of a pool with caches.  The common
 * case (this thread's cache, a leased buffer, room) needs no stack frame.
 */
void ap_cache_recycle(void *ctx, uint32_t idx)
{
	struct asyncpool *pool = ctx;
	struct ap_cache *c = ap_tc_last;

	if (AP_LIKELY(c->pool == pool && idx < pool->count)) {
		_Atomic uint32_t *state = &pool->next[idx];
		uint32_t n = c->n;

		if (AP_LIKELY(atomic_load_explicit(state, memory_order_relaxed) == AP_FL_LEASED &&
			      n != c->size)) {
			atomic_store_explicit(state, AP_FL_CACHED, memory_order_relaxed);
			c->idx[n] = idx;
			ap_cache_set_n(c, n + 1);
			return;
		}
	}
	cache_recycle_slow(pool, idx);
}

int ap_cache_acquire_slow(struct asyncpool *pool, struct asyncpool_lease *out)
{
	struct ap_cache *c = cache_get(pool, true);
	uint32_t idx;
	int rc;

	if (AP_UNLIKELY(!c)) {
		/* No cache for this thread (out of memory): the freelist. */
		rc = ap_fl_pop(pool, &idx);
		if (rc) {
			memset(out, 0, sizeof(*out));
			return rc;
		}
		ap_lease_make(pool, idx, out);
		return 0;
	}
	if (!c->n) {
		rc = cache_refill(c);
		if (rc) {
			memset(out, 0, sizeof(*out));
			return rc;
		}
	}
	return ap_cache_acquire(pool, out);
}

/* asyncpool_destroy() of a pool with caches; 0 or -EBUSY. */
int ap_cache_destroy(struct asyncpool *pool)
{
	struct ap_cache *c;
	uint64_t cached = 0;

	pthread_mutex_lock(&ap_cache_lock);
	for (c = pool->caches; c; c = c->reg_next)
		cached += ap_cache_n(c);
	/* A shared pool's leases may be out in other processes: the handle
	 * closes regardless.  A local pool must have them all back. */
	if (!pool->shared && ap_fl_count(pool) + cached != pool->count) {
		pthread_mutex_unlock(&ap_cache_lock);
		return -EBUSY;
	}
	while ((c = pool->caches)) {
		cache_drain(c);
		cache_detach(c);
	}
	if (pool->cached_pprev) {
		*pool->cached_pprev = pool->cached_next;
		if (pool->cached_next)
			pool->cached_next->cached_pprev = pool->cached_pprev;
	}
	pthread_mutex_unlock(&ap_cache_lock);
	return 0;
}

/* Buffers in this process's caches of pool. */
uint32_t ap_cache_count(const struct asyncpool *pool)
{
	uint64_t n = 0;

	pthread_mutex_lock(&ap_cache_lock);
	for (const struct ap_cache *c = pool->caches; c; c = c->reg_next)
		n += ap_cache_n(c);
	pthread_mutex_unlock(&ap_cache_lock);
	return n > pool->count ? pool->count : (uint32_t)n;
}

/*
 * Give a pool handle per-thread caches of cache_size buffers.  The
 * shared-pool code calls it on a handle it just created or opened.
 */
int ap_pool_cache_init(struct asyncpool *pool, uint32_t cache_size)
{
	if (!pool || cache_size > ASYNCPOOL_CACHE_MAX || cache_size > pool->count)
		return -EINVAL;
	if (pool->cache_size)
		return -EEXIST;
	if (!cache_size)
		return 0;
	pthread_once(&ap_tc_once, tc_init_once);
	if (!ap_tc_key_ok)
		return -ENOMEM;
	pthread_mutex_lock(&ap_cache_lock);
	pool->cache_batch = (cache_size + 1) / 2;
	pool->cache_size = cache_size;
	pool->cached_next = ap_cached_pools;
	if (ap_cached_pools)
		ap_cached_pools->cached_pprev = &pool->cached_next;
	pool->cached_pprev = &ap_cached_pools;
	ap_cached_pools = pool;
	pthread_mutex_unlock(&ap_cache_lock);
	return 0;
}

AP_EXPORT int asyncpool_set_cache(struct asyncpool *pool, uint32_t cache_size)
{
	return ap_pool_cache_init(pool, cache_size);
}

AP_EXPORT int asyncpool_create_opts(struct asyncpool_region *r,
				    const struct asyncpool_options *opts,
				    struct asyncpool **out)
{
	struct asyncpool_options o;
	struct asyncpool *pool;
	int rc;

	if (!out)
		return -EINVAL;
	*out = NULL;
	memset(&o, 0, sizeof(o));
	if (opts) {
		if (opts->size < POOL_OPTS_V1)
			return -EINVAL;
		if (opts->size > sizeof(o) && !ap_tail_is_zero(opts, sizeof(o), opts->size))
			return -EINVAL;
		memcpy(&o, opts, opts->size < sizeof(o) ? opts->size : sizeof(o));
	}
	if (o.flags)
		return -EINVAL;
	for (size_t i = 0; i < sizeof(o.reserved) / sizeof(o.reserved[0]); i++)
		if (o.reserved[i])
			return -EINVAL;
	if (o.cache_size > ASYNCPOOL_CACHE_MAX ||
	    (r && o.cache_size > r->buffer_count))
		return -EINVAL;
	rc = asyncpool_create(r, &pool);
	if (rc)
		return rc;
	rc = ap_pool_cache_init(pool, o.cache_size);
	if (rc) {
		asyncpool_destroy(pool);
		return rc;
	}
	*out = pool;
	return 0;
}

AP_EXPORT int asyncpool_cache_flush(struct asyncpool *pool)
{
	struct ap_cache *c;
	uint32_t n;
	int rc;

	if (!pool)
		return -EINVAL;
	if (!pool->cache_size)
		return 0;
	c = cache_get(pool, false);
	if (!c || !(n = ap_cache_n(c)))
		return 0;
	rc = ap_fl_push_chain(pool, c->idx, n);
	ap_cache_set_n(c, 0);
	return rc;
}

/* ---- bulk ---- */

static void leases_fill(struct asyncpool *pool, struct asyncpool_lease *l, unsigned int n,
			void (*fn)(void *, uint32_t))
{
	for (unsigned int j = 0; j < n; j++)
		ap_lease_fill(pool, l[j].buffer_index, fn, &l[j]);
}

AP_EXPORT int asyncpool_acquire_bulk(struct asyncpool *pool, struct asyncpool_lease *leases,
				     unsigned int n)
{
	struct ap_cache *c = NULL;
	uint32_t got, have = 0;
	int rc;

	if (!leases)
		return n ? -EINVAL : 0;
	if (!pool || n > pool->count) {
		memset(leases, 0, (size_t)n * sizeof(*leases));
		return -EINVAL;
	}
	if (!n)
		return 0;
	if (pool->cache_size)
		c = cache_of(pool);
	if (!c) {
		/* One CAS for the whole chain. */
		rc = ap_fl_pop_chain(pool, &leases[0].buffer_index, sizeof(*leases), n, n,
				     AP_FL_LEASED, &got);
		if (rc) {
			memset(leases, 0, (size_t)n * sizeof(*leases));
			return rc;
		}
		leases_fill(pool, leases, n, pool->cache_size ? ap_cache_recycle : ap_pool_recycle);
		return 0;
	}
	have = ap_cache_n(c);
	if (have < n) {
		uint32_t need = n - have;

		if (n <= c->size) {
			/* Into the cache, with a refill's worth more if there is. */
			uint32_t max = c->size - have;

			if (max > need + c->batch)
				max = need + c->batch;
			rc = ap_fl_pop_chain(pool, &c->idx[have], sizeof(uint32_t), need, max,
					     AP_FL_CACHED, &got);
			if (rc) {
				memset(leases, 0, (size_t)n * sizeof(*leases));
				return rc;
			}
			have += got;
			ap_cache_set_n(c, have);
		} else {
			/* More than a cache holds: the rest straight to the leases. */
			rc = ap_fl_pop_chain(pool, &leases[have].buffer_index, sizeof(*leases),
					     need, need, AP_FL_LEASED, &got);
			if (rc) {
				memset(leases, 0, (size_t)n * sizeof(*leases));
				return rc;
			}
			leases_fill(pool, &leases[have], need, ap_cache_recycle);
			n = have;
		}
	}
	{
		/* Locals: the stores below may alias nothing the loop reads. */
		struct asyncpool_region *region = pool->region;
		size_t bs = pool->buffer_size;
		_Atomic uint32_t *next = pool->next;
		const uint32_t *ci = c->idx;

		ap_cache_set_n(c, have - n);
		for (unsigned int j = 0; j < n; j++) {
			uint32_t idx = ci[--have];
			struct asyncpool_lease *l = &leases[j];

			atomic_store_explicit(&next[idx], AP_FL_LEASED, memory_order_relaxed);
			l->span.region = region;
			l->span.offset = (size_t)idx * bs;
			l->span.length = bs;
			l->release.fn = ap_cache_recycle;
			l->release.ctx = pool;
			l->buffer_index = idx;
		}
	}
	return 0;
}

#define AP_BULK_CHUNK 64u

/* Whether lease j continues a run of leases of pool with callback fn. */
static inline bool same_run(const struct asyncpool_lease *l, void (*fn)(void *, uint32_t),
			    const struct asyncpool *pool)
{
	return l->release.fn == fn && l->release.ctx == pool;
}

/*
 * Release the run of leases of an uncached pool that starts at l (at most
 * n): check and mark each, then push them as one chain per AP_BULK_CHUNK
 * with one CAS.  Marking a buffer (AP_FL_END) as soon as it is accepted
 * refuses a duplicate further on.  Returns the length of the run.
 */
static unsigned int release_run_fl(struct asyncpool *pool, struct asyncpool_lease *l,
				   unsigned int n)
{
	void (*fn)(void *, uint32_t) = l->release.fn;
	_Atomic uint32_t *next = pool->next;
	uint32_t idx[AP_BULK_CHUNK];
	uint32_t k = 0, bad = 0, count = pool->count;
	unsigned int j;

	for (j = 0; j < n && same_run(&l[j], fn, pool); j++) {
		uint32_t i = l[j].buffer_index;

		l[j].release.fn = NULL;
		if (AP_UNLIKELY(i >= count))
			continue;
		/* Claim it as ap_fl_push() does, so that a release racing
		 * with this one (another thread, or a peer's
		 * asyncpool_release_index()) cannot link it in twice. */
		uint32_t expected = AP_FL_LEASED;

		if (AP_UNLIKELY(!atomic_compare_exchange_strong_explicit(&next[i], &expected,
									 AP_FL_END,
									 memory_order_relaxed,
									 memory_order_relaxed))) {
			bad++;
			continue;
		}
		idx[k++] = i;
		if (k == AP_BULK_CHUNK) {
			(void)ap_fl_push_chain(pool, idx, k);
			k = 0;
		}
	}
	if (k)
		(void)ap_fl_push_chain(pool, idx, k);
	if (bad)
		count_bad(pool, bad);
	return j;
}

/* The same for a pool with caches: into this thread's cache. */
static unsigned int release_run_cache(struct asyncpool *pool, struct asyncpool_lease *l,
				      unsigned int n)
{
	struct ap_cache *c = cache_of(pool);
	_Atomic uint32_t *next = pool->next;
	uint32_t cn, size, bad = 0, count = pool->count;
	unsigned int j;

	if (!c)
		return release_run_fl(pool, l, n);
	cn = c->n;
	size = c->size;
	for (j = 0; j < n && same_run(&l[j], ap_cache_recycle, pool); j++) {
		uint32_t i = l[j].buffer_index;

		l[j].release.fn = NULL;
		if (AP_UNLIKELY(i >= count))
			continue;
		if (AP_UNLIKELY(atomic_load_explicit(&next[i], memory_order_relaxed) !=
				AP_FL_LEASED)) {
			bad++;
			continue;
		}
		atomic_store_explicit(&next[i], AP_FL_CACHED, memory_order_relaxed);
		if (AP_UNLIKELY(cn == size)) {
			ap_cache_set_n(c, cn);
			cache_flush_batch(c);
			cn = c->n;
		}
		c->idx[cn++] = i;
	}
	ap_cache_set_n(c, cn);
	if (bad)
		count_bad(pool, bad);
	return j;
}

AP_EXPORT void asyncpool_release_bulk(struct asyncpool_lease *leases, unsigned int n)
{
	unsigned int i = 0;

	if (!leases)
		return;
	while (i < n) {
		struct asyncpool_lease *l = &leases[i];
		void (*fn)(void *, uint32_t) = l->release.fn;

		if (!fn) {
			i++;
		} else if (fn == ap_cache_recycle) {
			/* A run of leases of the same pool goes back in one step. */
			i += release_run_cache(l->release.ctx, l, n - i);
		} else if (fn == ap_pool_recycle) {
			i += release_run_fl(l->release.ctx, l, n - i);
		} else {
			/* A recv ring or another owner: its own callback. */
			l->release.fn = NULL;
			fn(l->release.ctx, l->buffer_index);
			i++;
		}
	}
}
