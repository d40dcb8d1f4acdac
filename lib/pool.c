/* SPDX-License-Identifier: MIT */
/*
 * The pool: a lock-free LIFO freelist of buffer indices.
 *
 * The head is one 64-bit word, {index, tag}, changed only by CAS; every
 * successful CAS bumps the 32-bit tag, so a thread that read the head,
 * stalled, and saw the same index come back cannot pop with a stale next
 * (ABA).  next[i] holds the index after i while i is free, and
 * AP_FL_LEASED while it is leased: a release claims the buffer by a CAS
 * from AP_FL_LEASED, so a second release of the same buffer (a copied
 * lease released twice, even by two threads at once) is refused and
 * counted instead of linking the buffer in twice.
 *
 * There is no counter of free buffers: it would cost two more atomic
 * read-modify-writes per acquire+release, so asyncpool_available() walks.
 *
 * Everything read from the layout may come from another process, so each
 * index is range-checked before use and every retry loop is bounded.
 */
#include "pool_cache.h"

#include <stdlib.h>
#include <sys/mman.h>

#ifdef ASYNCPOOL_TEST_HOOKS
void (*ap_test_hook_before_cas)(void);
#endif

/* A peer that rewrites the head without end must not keep us spinning. */
#define AP_MAX_RETRIES (1u << 22)

int ap_layout_size(uint32_t count, bool shared, size_t *out)
{
	size_t per = ap_align_up((size_t)count * sizeof(uint32_t), AP_CACHE_LINE);
	size_t size = AP_OFF_NEXT + per;

	if (count == 0 || count > ASYNCPOOL_MAX_BUFFERS)
		return -EINVAL;
	if (shared)
		size += per + (size_t)AP_ATTACH_SLOTS * AP_ATTACH_SIZE;
	*out = size;
	return 0;
}

/* Write everything but the magic; ap_layout_publish() sets it last. */
void ap_layout_init(void *mem, uint32_t count, size_t buffer_size, bool shared)
{
	struct ap_pool_header *hdr = mem;
	struct ap_pool_head *line = (void *)((char *)mem + AP_OFF_HEAD);
	struct ap_pool_counters *ctr = (void *)((char *)mem + AP_OFF_COUNTERS);
	_Atomic uint32_t *next = (void *)((char *)mem + AP_OFF_NEXT);
	size_t per = ap_align_up((size_t)count * sizeof(uint32_t), AP_CACHE_LINE);
	size_t size = 0;

	(void)ap_layout_size(count, shared, &size);
	memset(mem, 0, AP_OFF_NEXT);
	hdr->version = AP_POOL_VERSION;
	hdr->header_size = sizeof(*hdr);
	hdr->flags = shared ? AP_POOL_F_SHARED : 0;
	hdr->storage_size = size;
	hdr->buffer_size = buffer_size;
	hdr->buffer_count = count;
	hdr->head_offset = AP_OFF_HEAD;
	hdr->counters_offset = AP_OFF_COUNTERS;
	hdr->next_offset = AP_OFF_NEXT;
	if (shared) {
		hdr->attach_slots = AP_ATTACH_SLOTS;
		hdr->owners_offset = AP_OFF_NEXT + per;
		hdr->attach_offset = AP_OFF_NEXT + 2 * per;
		memset((char *)mem + hdr->owners_offset, 0,
		       per + (size_t)AP_ATTACH_SLOTS * AP_ATTACH_SIZE);
	}
	for (uint32_t i = 0; i < count; i++)
		atomic_init(&next[i], i + 1 < count ? i + 1 : AP_FL_END);
	atomic_init(&line->head, AP_HEAD_MAKE(0, 0));
	atomic_init(&ctr->bad_releases, 0);
	atomic_init(&ctr->corruptions, 0);
	atomic_init(&ctr->empty, 0);
}

void ap_layout_publish(void *mem)
{
	struct ap_pool_header *hdr = mem;

	atomic_store_explicit(&hdr->magic, AP_POOL_MAGIC, memory_order_release);
}

/* Point a handle at a layout whose header has been validated. */
void ap_pool_bind(struct asyncpool *pool, void *mem, struct asyncpool_region *r)
{
	pool->hdr = mem;
	pool->line = (void *)((char *)mem + AP_OFF_HEAD);
	pool->ctr = (void *)((char *)mem + AP_OFF_COUNTERS);
	pool->next = (void *)((char *)mem + AP_OFF_NEXT);
	pool->count = r->buffer_count;
	pool->buffer_size = r->buffer_size;
	pool->region = asyncpool_region_ref(r);
	pool->storage = mem;
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

static void count_corruption(struct asyncpool *pool)
{
	atomic_fetch_add_explicit(&pool->ctr->corruptions, 1, memory_order_relaxed);
}

/*
 * A walk from head *h met a link that is not an index: either a buffer
 * was popped under us (the head moved: take the new one and retry), or
 * the list is corrupt (it did not: count it).
 */
static inline bool head_moved(struct asyncpool *pool, uint64_t *h)
{
	uint64_t again = atomic_load_explicit(&pool->line->head, memory_order_acquire);

	if (again == *h) {
		count_corruption(pool);
		return false;
	}
	*h = again;
	return true;
}

int ap_fl_pop(struct asyncpool *pool, uint32_t *idx)
{
	struct ap_pool_head *line = pool->line;
	uint64_t h = atomic_load_explicit(&line->head, memory_order_acquire);

	for (uint32_t tries = 0; tries < AP_MAX_RETRIES; tries++) {
		uint32_t i = AP_HEAD_INDEX(h), n;

		if (i == AP_FL_END) {
			atomic_fetch_add_explicit(&pool->ctr->empty, 1, memory_order_relaxed);
			return -ENOBUFS;
		}
		if (AP_UNLIKELY(i >= pool->count)) {
			count_corruption(pool);
			return -EUCLEAN;
		}
		n = atomic_load_explicit(&pool->next[i], memory_order_relaxed);
		AP_TEST_POINT();
		if (AP_UNLIKELY(n >= pool->count && n != AP_FL_END)) {
			if (!head_moved(pool, &h))
				return -EUCLEAN;
			continue;
		}
		if (atomic_compare_exchange_weak_explicit(&line->head, &h,
							  AP_HEAD_MAKE(n, AP_HEAD_TAG(h) + 1),
							  memory_order_acquire,
							  memory_order_acquire)) {
			atomic_store_explicit(&pool->next[i], AP_FL_LEASED, memory_order_relaxed);
			*idx = i;
			return 0;
		}
	}
	count_corruption(pool);
	return -EUCLEAN;
}

int ap_fl_push(struct asyncpool *pool, uint32_t idx)
{
	struct ap_pool_head *line = pool->line;
	uint64_t h;
	uint32_t expected = AP_FL_LEASED;

	if (AP_UNLIKELY(idx >= pool->count))
		return -EINVAL;
	h = atomic_load_explicit(&line->head, memory_order_relaxed);
	/* Claim the buffer: only one release of a lease can win. */
	if (AP_UNLIKELY(!atomic_compare_exchange_strong_explicit(&pool->next[idx], &expected,
								 AP_HEAD_INDEX(h),
								 memory_order_relaxed,
								 memory_order_relaxed))) {
		atomic_fetch_add_explicit(&pool->ctr->bad_releases, 1, memory_order_relaxed);
		return -EALREADY;
	}
	for (uint32_t tries = 0; tries < AP_MAX_RETRIES; tries++) {
		AP_TEST_POINT();
		/* release: the buffer's contents and next[idx] before the head */
		if (atomic_compare_exchange_weak_explicit(&line->head, &h,
							  AP_HEAD_MAKE(idx, AP_HEAD_TAG(h) + 1),
							  memory_order_release,
							  memory_order_relaxed))
			return 0;
		atomic_store_explicit(&pool->next[idx], AP_HEAD_INDEX(h), memory_order_relaxed);
	}
	/* Give the claim back so that a later release can succeed. */
	atomic_store_explicit(&pool->next[idx], AP_FL_LEASED, memory_order_relaxed);
	count_corruption(pool);
	return -EUCLEAN;
}

/*
 * Pop a chain of at least min and at most max buffers with one CAS: walk
 * from the head (bounded by max, every index range-checked), then swing
 * the head to the node after the chain.  The tag makes the walk safe: if
 * the CAS succeeds, nothing was popped or pushed since the head was read,
 * so the links walked were the list.  The popped buffers get mark
 * (AP_FL_LEASED, or AP_FL_CACHED for a thread cache) in next[].  The
 * indices go to out, stride bytes apart (an array, or the buffer_index
 * fields of an array of leases).
 */
#define AP_OUT(j) (*(uint32_t *)((char *)out + (size_t)(j) * stride))

int ap_fl_pop_chain(struct asyncpool *pool, void *out, size_t stride, uint32_t min,
		    uint32_t max, uint32_t mark, uint32_t *got)
{
	struct ap_pool_head *line = pool->line;
	uint64_t h = atomic_load_explicit(&line->head, memory_order_acquire);

	*got = 0;
	for (uint32_t tries = 0; tries < AP_MAX_RETRIES; tries++) {
		uint32_t i = AP_HEAD_INDEX(h), k = 0;

		while (k < max && i < pool->count) {
			AP_OUT(k) = i;
			k++;
			i = atomic_load_explicit(&pool->next[i], memory_order_relaxed);
		}
		if (AP_UNLIKELY(i >= pool->count && i != AP_FL_END)) {
			if (!head_moved(pool, &h))
				return -EUCLEAN;
			continue;
		}
		if (k < min) {
			atomic_fetch_add_explicit(&pool->ctr->empty, 1, memory_order_relaxed);
			return -ENOBUFS;
		}
		AP_TEST_POINT();
		if (atomic_compare_exchange_weak_explicit(&line->head, &h,
							  AP_HEAD_MAKE(i, AP_HEAD_TAG(h) + 1),
							  memory_order_acquire,
							  memory_order_acquire)) {
			for (uint32_t j = 0; j < k; j++)
				atomic_store_explicit(&pool->next[AP_OUT(j)], mark, memory_order_relaxed);
			*got = k;
			return 0;
		}
	}
	count_corruption(pool);
	return -EUCLEAN;
}

#undef AP_OUT

/*
 * Push n buffers the caller owns (in range, claimed: no one else may
 * release them) as one pre-linked chain with one CAS.
 */
int ap_fl_push_chain(struct asyncpool *pool, const uint32_t *idx, uint32_t n)
{
	struct ap_pool_head *line = pool->line;
	uint64_t h;

	if (!n)
		return 0;
	for (uint32_t j = 0; j + 1 < n; j++)
		atomic_store_explicit(&pool->next[idx[j]], idx[j + 1], memory_order_relaxed);
	h = atomic_load_explicit(&line->head, memory_order_relaxed);
	for (uint32_t tries = 0; tries < AP_MAX_RETRIES; tries++) {
		atomic_store_explicit(&pool->next[idx[n - 1]], AP_HEAD_INDEX(h),
				      memory_order_relaxed);
		AP_TEST_POINT();
		if (atomic_compare_exchange_weak_explicit(&line->head, &h,
							  AP_HEAD_MAKE(idx[0], AP_HEAD_TAG(h) + 1),
							  memory_order_release,
							  memory_order_relaxed))
			return 0;
	}
	count_corruption(pool);
	return -EUCLEAN;
}

/*
 * Count the free buffers by walking the list, bounded by the capacity.
 * Exact while no other thread changes the pool; a walk that meets a
 * buffer leased under it stops there.  Keeping a counter instead would
 * put two more atomic read-modify-writes on every acquire+release.
 */
uint32_t ap_fl_count(const struct asyncpool *pool)
{
	uint64_t h = atomic_load_explicit(&pool->line->head, memory_order_acquire);
	uint32_t i = AP_HEAD_INDEX(h), n = 0;

	while (i < pool->count && n < pool->count) {
		n++;
		i = atomic_load_explicit(&pool->next[i], memory_order_relaxed);
	}
	return n;
}

void ap_pool_recycle(void *ctx, uint32_t idx)
{
	(void)ap_fl_push(ctx, idx);
}

void ap_lease_make(struct asyncpool *pool, uint32_t idx, struct asyncpool_lease *out)
{
	out->span.region = pool->region;
	out->span.offset = (size_t)idx * pool->buffer_size;
	out->span.length = pool->buffer_size;
	/* Adopted and fallback leases of a cached pool go to a cache too. */
	out->release.fn = pool->cache_size ? ap_cache_recycle : ap_pool_recycle;
	out->release.ctx = pool;
	out->buffer_index = idx;
}

AP_EXPORT int asyncpool_create(struct asyncpool_region *r, struct asyncpool **out)
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
	rc = ap_layout_size(r->buffer_count, false, &size);
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
	ap_layout_init(mem, r->buffer_count, r->buffer_size, false);
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
	if (pool->cache_size) {
		rc = ap_cache_destroy(pool);       /* flushes the caches */
		if (rc)
			return rc;
	} else if (!pool->shared && ap_fl_count(pool) != pool->count) {
		return -EBUSY;
	}
	if (pool->owns_storage)
		munmap(pool->storage, pool->storage_size);
	asyncpool_region_unref(pool->region);
	free(pool);
	return 0;
}

static __attribute__((noinline)) int acquire_fl(struct asyncpool *pool,
						 struct asyncpool_lease *out)
{
	uint32_t idx;
	int rc = ap_fl_pop(pool, &idx);

	if (AP_UNLIKELY(rc)) {
		memset(out, 0, sizeof(*out));
		return rc;
	}
	ap_lease_make(pool, idx, out);
	return 0;
}

static __attribute__((noinline)) int acquire_slow(struct asyncpool *pool,
						   struct asyncpool_lease *out)
{
	if (AP_UNLIKELY(!pool)) {
		memset(out, 0, sizeof(*out));
		return -EINVAL;
	}
	if (pool->cache_size)
		return ap_cache_acquire_slow(pool, out);
	return acquire_fl(pool, out);
}

AP_EXPORT int asyncpool_acquire(struct asyncpool *pool, struct asyncpool_lease *out)
{
	if (AP_UNLIKELY(!out))
		return -EINVAL;
	/* The calling thread's cache of pool first: no stack frame. */
	if (AP_LIKELY(ap_cache_take(pool, out)))
		return 0;
	return acquire_slow(pool, out);
}

AP_EXPORT size_t asyncpool_available(const struct asyncpool *pool)
{
	if (!pool)
		return 0;
	/* The freelist, and this process's caches of the pool. */
	return ap_fl_count(pool) + (pool->cache_size ? ap_cache_count(pool) : 0);
}

AP_EXPORT size_t asyncpool_capacity(const struct asyncpool *pool)
{
	return pool ? pool->count : 0;
}

AP_EXPORT size_t asyncpool_buffer_size(const struct asyncpool *pool)
{
	return pool ? pool->buffer_size : 0;
}

AP_EXPORT struct asyncpool_region *asyncpool_region(const struct asyncpool *pool)
{
	return pool ? pool->region : NULL;
}

AP_EXPORT int asyncpool_stats(const struct asyncpool *pool, struct asyncpool_stats *out)
{
	size_t given;
	struct asyncpool_stats s;

	if (!pool || !out || out->size < offsetof(struct asyncpool_stats, empty) + sizeof(uint64_t))
		return -EINVAL;
	given = out->size;
	memset(&s, 0, sizeof(s));
	s.size = given < sizeof(s) ? given : sizeof(s);
	s.capacity = pool->count;
	s.available = (uint32_t)asyncpool_available(pool);
	s.bad_releases = atomic_load_explicit(&pool->ctr->bad_releases, memory_order_relaxed);
	s.corruptions = atomic_load_explicit(&pool->ctr->corruptions, memory_order_relaxed);
	s.empty = atomic_load_explicit(&pool->ctr->empty, memory_order_relaxed);
	memcpy(out, &s, s.size);
	if (given > sizeof(s))
		memset((char *)out + sizeof(s), 0, given - sizeof(s));
	out->size = given;
	return 0;
}
