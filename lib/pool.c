/* SPDX-License-Identifier: MIT */
/*
 * The pool: create, acquire, release, destroy.  Each call chooses the
 * calling thread's cache (pool_cache.c), a lend without a cache
 * (pool_lend.c) or the freelist (freelist.c);
 * both change a buffer's state only through buffer_state.h, and every
 * lease is built by ap_pool_lease().
 *
 * A local pool keeps its layout (pool_layout.h) in private anonymous
 * memory; a shared pool (pool_shared.c) in memory other processes map.
 */
#include "pool_internal.h"
#include "pool_cache.h"
#include "pool_lend.h"
#include "pool_owner.h"
#include "pool_takeover.h"
#include "pool_pop.h"

#include <stdlib.h>
#include <sys/mman.h>

int ap_layout_size(uint32_t count, bool shared, uint32_t channels, uint32_t capacity,
		   size_t *out)
{
	struct ap_layout_geometry g;

	if (!ap_layout_geometry_ch(count, shared, channels, capacity, &g) || count > ASYNCPOOL_MAX_BUFFERS ||
	    g.storage_size > SIZE_MAX)
		return -EINVAL;
	*out = (size_t)g.storage_size;
	return 0;
}

/* Write everything but the magic; ap_layout_publish() sets it last. */
void ap_layout_init(void *mem, uint32_t count, size_t buffer_size, bool shared,
		    uint32_t channels, uint32_t capacity)
{
	struct ap_pool_header *hdr = mem;
	struct ap_pool_head *line = (void *)((char *)mem + AP_OFF_HEAD);
	struct ap_pool_counters *ctr = (void *)((char *)mem + AP_OFF_COUNTERS);
	struct ap_layout_geometry g;
	_Atomic uint64_t *state;
	_Atomic uint32_t *link, *depth;

	(void)ap_layout_geometry_ch(count, shared, channels, capacity, &g);
	state = (void *)((char *)mem + g.next_offset);
	link = (void *)((char *)mem + g.link_offset);
	depth = (void *)((char *)mem + g.depth_offset);
	memset(mem, 0, AP_OFF_NEXT);
	hdr->version = channels ? AP_POOL_VERSION_CHANNELS : AP_POOL_VERSION;
	hdr->header_size = sizeof(*hdr);
	hdr->flags = shared ? AP_POOL_F_SHARED : 0;
	hdr->storage_size = g.storage_size;
	hdr->buffer_size = buffer_size;
	hdr->buffer_count = count;
	hdr->head_offset = AP_OFF_HEAD;
	hdr->counters_offset = AP_OFF_COUNTERS;
	hdr->next_offset = g.next_offset;
	hdr->depth_offset = g.depth_offset;
	hdr->link_offset = g.link_offset;
	if (shared) {
		hdr->attach_slots = AP_ATTACH_SLOTS;
		hdr->attach_offset = g.attach_offset;
		/* The attachments, and the channel area after them (all zero:
		 * free ends, empty rings, every slot's seq 0). */
		memset((char *)mem + g.attach_offset, 0, g.storage_size - g.attach_offset);
	}
	if (channels) {
		hdr->channel_count = channels;
		hdr->channel_capacity = capacity;
		hdr->channel_offset = g.chan_offset;
		hdr->from_offset = g.from_offset;
	}
	for (uint32_t i = 0; i < count; i++) {
		atomic_init(&state[i], AP_W_MAKE(AP_K_FREE, 0, 0));
		atomic_init(&link[i], i + 1 < count ? i + 1 : AP_FL_END);
		atomic_init(&depth[i], count - i);
	}
	atomic_init(&line->head, AP_HEAD_MAKE(0, 0));
	atomic_init(&ctr->bad_releases, 0);
	atomic_init(&ctr->corruptions, 0);
	atomic_init(&ctr->empty, 0);
	atomic_init(&ctr->fenced_releases, 0);
}

void ap_layout_publish(void *mem)
{
	struct ap_pool_header *hdr = mem;

	atomic_store_explicit(&hdr->magic, AP_POOL_MAGIC, memory_order_release);
}

/* Point a handle at a layout whose header has been validated. */
void ap_pool_bind(struct asyncpool *pool, void *mem, struct asyncpool_region *r)
{
	struct ap_layout_geometry g;

	(void)ap_layout_geometry(r->buffer_count, false, &g);
	pool->hdr = mem;
	pool->fl.line = (void *)((char *)mem + AP_OFF_HEAD);
	pool->fl.ctr = (void *)((char *)mem + AP_OFF_COUNTERS);
	pool->fl.state = (void *)((char *)mem + g.next_offset);
	pool->fl.link = (void *)((char *)mem + g.link_offset);
	pool->fl.depth = (void *)((char *)mem + g.depth_offset);
	pool->fl.count = r->buffer_count;
	pool->fl.lent_tag = AP_NO_LENT;         /* until caches lend (pool_cache.c) */
	pool->buffer_size = r->buffer_size;
	pool->region = asyncpool_region_ref(r);
	pool->release_fn = ap_pool_recycle;
	pool->storage = mem;
	pool->lock_fd = -1;
	atomic_init(&pool->quarantine_ms, ASYNCPOOL_QUARANTINE_MS);
}

/* The kernel owns the buffers of a recv-only region: no pool over them. */
int ap_pool_check_region(const struct asyncpool_region *r)
{
	if (!r || !(r->access & ASYNCPOOL_ACCESS_READ))
		return -EINVAL;
	if (r->buffer_count > ASYNCPOOL_MAX_BUFFERS)
		return -EINVAL;
	return 0;
}


/*
 * The caches asyncpool_create() gives (issue 22): with 2 threads an
 * uncached pool costs 480-570 ns per acquire+release on the 2-core CI
 * machine, a cached one 19-22 (asyncpool bench default-*); a pool too
 * small to give each of a few threads a batch stays uncached.
 */
static uint32_t default_cache_size(uint32_t count)
{
	uint32_t n = count / 8;

	return count < 64 ? 0 : n < 256 ? n : 256;
}

AP_EXPORT int asyncpool_create(struct asyncpool_region *r, struct asyncpool **out)
{
	int rc = ap_pool_create_bare(r, out);

	if (rc)
		return rc;
	rc = ap_pool_cache_init(*out, default_cache_size((*out)->fl.count));
	if (rc) {
		(void)asyncpool_destroy(*out);
		*out = NULL;
		return rc;
	}
	/* Only caches with entries give way; a small pool's lend only,
	 * as asyncpool_create_opts()'s without caches. */
	(*out)->cache_default = (*out)->cache_size != 0;
	return 0;
}

/* A local pool with no caches: asyncpool_create_opts() sets its own. */
int ap_pool_create_bare(struct asyncpool_region *r, struct asyncpool **out)
{
	struct asyncpool *pool;
	size_t size;
	void *mem;
	int rc;

	if (!out)
		return -EINVAL;
	*out = NULL;
	rc = ap_pool_check_region(r);
	if (rc)
		return rc;
	rc = ap_layout_size(r->buffer_count, false, 0, 0, &size);
	if (rc)
		return rc;
	pool = calloc(1, sizeof(*pool));
	if (!pool)
		return -ENOMEM;
	mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED) {
		free(pool);
		return -ENOMEM;
	}
	ap_layout_init(mem, r->buffer_count, r->buffer_size, false, 0, 0);
	ap_layout_publish(mem);
	ap_pool_bind(pool, mem, r);
	pool->storage_size = size;
	pool->owns_storage = true;
	*out = pool;
	return 0;
}

AP_EXPORT int asyncpool_destroy(struct asyncpool *pool)
{
	int rc;

	if (!pool)
		return -EINVAL;
	if (ap_pool_cached(pool)) {
		rc = ap_cache_destroy(pool);       /* flushes the caches */
		if (rc)
			return rc;
	} else if (!pool->shared && ap_fl_count(&pool->fl) != pool->fl.count) {
		return -EBUSY;
	}
	if (pool->wait_fd_close)        /* pool_wait.c's hook */
		pool->wait_fd_close(pool);
	ap_detach(pool);
	if (pool->owns_storage)
		munmap(pool->storage, pool->storage_size);
	for (uint32_t i = 0; i < pool->sibling_count; i++)
		asyncpool_region_unref(pool->siblings[i]);
	free(pool->siblings);
	asyncpool_region_unref(pool->region);
	free(pool);
	return 0;
}


/*
 * One try: the calling thread's cache, refilled from the freelist; a
 * cache of no entries lends.
 */
static int cache_acquire_once(struct asyncpool *pool, struct asyncpool_lease *out)
{
	int rc = ap_cache_acquire_once(pool, out);

	if (AP_UNLIKELY(rc == AP_CACHE_LENDS))
		rc = ap_lend_lease(pool, out);
	return rc;
}

/*
 * The calling thread's cache is empty.  If the freelist is empty too,
 * the buffers cached by the other threads of this process come back
 * (and, for a shared pool, the other processes are asked for theirs),
 * then one more try.
 */
static __attribute__((noinline)) int cache_acquire_slow(struct asyncpool *pool,
							 struct asyncpool_lease *out)
{
	int rc;

	ap_cache_honour_flush(pool);
	if (pool->boxes && ap_tc_last->pool == pool && ap_tc_last->size)
		/* Its cache ran dry: what it released for others goes now. */
		ap_owner_send_all(pool, ap_tc_last);
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


static __attribute__((noinline)) int acquire_slow(struct asyncpool *pool,
						   struct asyncpool_lease *out)
{
	uint32_t idx, gen;
	int rc;

	if (AP_UNLIKELY(!pool)) {
		memset(out, 0, sizeof(*out));
		return -EINVAL;
	}
	if (pool->fl.lazy && !pool->cache_size)
		return ap_lend_lease(pool, out);       /* lending without a cache */
	if (pool->cache_size)
		/* asyncpool_acquire() tried the thread's cache, a shared pool's too. */
		return cache_acquire_slow(pool, out);
	rc = ap_pool_pop(pool, AP_K_LEASED, &idx, &gen);
	if (AP_UNLIKELY(rc)) {
		/* Other processes may hold buffers in their caches. */
		if (rc == -ENOBUFS && pool->shared)
			ap_flush_request(pool);
		memset(out, 0, sizeof(*out));
		return rc;
	}
	ap_pool_lease(pool, idx, gen, ap_pool_recycle, out);
	return 0;
}

AP_EXPORT int asyncpool_acquire(struct asyncpool *pool, struct asyncpool_lease *out)
{
	AP_TEST_EXPORTED_CALL();
	struct ap_cache *c = ap_tc_last;
	uint64_t t;

	if (AP_UNLIKELY(!out))
		return -EINVAL;
	/* The calling thread's cache of pool first: no stack frame. */
	if (AP_LIKELY(c->pool == pool && pool)) {
		if (AP_LIKELY(pool->fl.lazy)) {
			/* A pool without caches lends: its single lend (caches,
			 * once on, stay on: asyncpool_set_cache(3)). */
			if (!pool->cache_size)
				return ap_lend_lease(pool, out);
			if (AP_LIKELY(ap_cache_take(pool, out)))
				return 0;
		} else if (AP_LIKELY(t = ap_cache_take_shared(pool, c))) {
			/* A shared pool's: a store to the word. */
			ap_pool_lease(pool, AP_TOKEN_INDEX(t), AP_TOKEN_GEN(t), ap_cache_recycle, out);
			return 0;
		}
	}
	return acquire_slow(pool, out);
}

AP_EXPORT size_t asyncpool_available(const struct asyncpool *pool)
{
	uint64_t n;

	if (!pool)
		return 0;
	/*
	 * What an acquire through this handle can get without waiting for
	 * anyone: the freelist (the depth of its head, O(1)), and the
	 * buffers in the caches of this handle's threads (O(threads)),
	 * which an acquire that finds the freelist empty takes back.  Other
	 * processes' caches are not counted: they give their buffers back
	 * only when they next leave their fast path (man asyncpool_available).
	 */
	n = ap_fl_free(&pool->fl);
	if (ap_pool_cached(pool)) {
		uint32_t transit;

		/* And releases on their way to the buffer's owner (pool_owner.c). */
		n += ap_cache_count(pool, NULL, &transit);
		n += transit;
	}
	return n < pool->fl.count ? n : pool->fl.count;
}

AP_EXPORT size_t asyncpool_capacity(const struct asyncpool *pool)
{
	return pool ? pool->fl.count : 0;
}

AP_EXPORT size_t asyncpool_buffer_size(const struct asyncpool *pool)
{
	return pool ? pool->buffer_size : 0;
}

AP_EXPORT struct asyncpool_region *asyncpool_region(const struct asyncpool *pool)
{
	return pool ? pool->region : NULL;
}

/* The smallest stats struct: up to empty (1.0 to 1.3). */
#define STATS_V1 (offsetof(struct asyncpool_stats, empty) + sizeof(uint64_t))
/* Since 1.4: fenced_releases, apart from bad_releases. */
#define STATS_V2 (offsetof(struct asyncpool_stats, fenced_releases) + sizeof(uint64_t))

AP_EXPORT int asyncpool_stats(const struct asyncpool *pool, struct asyncpool_stats *out)
{
	struct asyncpool_stats s;
	size_t given;

	if (!pool || !out)
		return -EINVAL;
	given = out->size;
	if (given < STATS_V1)
		return -EINVAL;
	if (given > AP_STRUCT_SIZE_MAX)
		return -E2BIG;
	memset(&s, 0, sizeof(s));
	s.capacity = pool->fl.count;
	s.available = (uint32_t)asyncpool_available(pool);
	s.bad_releases = atomic_load_explicit(&pool->fl.ctr->bad_releases, memory_order_relaxed);
	s.corruptions = atomic_load_explicit(&pool->fl.ctr->corruptions, memory_order_relaxed);
	s.empty = atomic_load_explicit(&pool->fl.ctr->empty, memory_order_relaxed);
	s.fenced_releases = atomic_load_explicit(&pool->fl.ctr->fenced_releases,
						 memory_order_relaxed);
	/* A caller built before 1.4 gets what 1.3 counted: every refusal. */
	if (given < STATS_V2)
		s.bad_releases += s.fenced_releases;
	s.size = given;
	/* The fields this build knows, then zeros up to what the caller has. */
	memcpy(out, &s, given < sizeof(s) ? given : sizeof(s));
	if (given > sizeof(s))
		memset((char *)out + sizeof(s), 0, given - sizeof(s));
	return 0;
}
