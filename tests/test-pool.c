/* SPDX-License-Identifier: MIT */
/* The local pool, single-threaded: errors, exhaustion, double release. */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <asyncpool.h>
#include "tap.h"
#include "testutil.h"

#define N 64
#define BS 128

static void release_null(void *arg)
{
	(void)arg;
	asyncpool_lease_release(NULL);
}

static void test_errors(struct asyncpool_proactor *p)
{
	struct asyncpool_region *w = make_region(p, BS, 4, ASYNCPOOL_ACCESS_WRITE);
	struct asyncpool *pool = (void *)1;
	struct asyncpool_lease l;
	struct asyncpool_stats st;

	is_int(asyncpool_create(NULL, &pool), -EINVAL, "create: NULL region");
	ok(pool == NULL, "create: out is NULL after a failure");
	is_int(asyncpool_create(w, &pool), -EINVAL, "create: WRITE-only region");
	is_int(asyncpool_create(w, NULL), -EINVAL, "create: NULL out");
	asyncpool_region_unref(w);
	is_int(asyncpool_destroy(NULL), -EINVAL, "destroy(NULL)");
	memset(&l, 0x77, sizeof(l));
	is_int(asyncpool_acquire(NULL, &l), -EINVAL, "acquire: NULL pool");
	ok(l.release.fn == NULL && l.span.region == NULL, "acquire: lease zeroed on failure");
	is_int(asyncpool_acquire((void *)1, NULL), -EINVAL, "acquire: NULL lease");
	is_int(asyncpool_available(NULL), 0, "available(NULL)");
	is_int(asyncpool_capacity(NULL), 0, "capacity(NULL)");
	is_int(asyncpool_buffer_size(NULL), 0, "buffer_size(NULL)");
	ok(asyncpool_region(NULL) == NULL, "region(NULL)");
	st.size = sizeof(st);
	is_int(asyncpool_stats(NULL, &st), -EINVAL, "stats: NULL pool");
	ok(tap_survives(release_null, NULL), "lease_release(NULL) is harmless");
}

static void test_cycle(struct asyncpool_proactor *p)
{
	struct asyncpool_region *r = make_region(p, BS, N, ASYNCPOOL_ACCESS_READ);
	char *base = asyncpool_region_base(r);
	struct asyncpool *pool = NULL;
	struct asyncpool_lease l[N], extra, copy;
	struct asyncpool_stats st;
	unsigned char seen[N] = { 0 };
	int all_ok = 1, rc;

	is_int(asyncpool_create(r, &pool), 0, "create over a READ region");
	asyncpool_region_unref(r);     /* the pool holds its own reference */
	is_int(asyncpool_capacity(pool), N, "capacity");
	is_int(asyncpool_available(pool), N, "available: all");
	is_int(asyncpool_buffer_size(pool), BS, "buffer_size");
	ok(asyncpool_region(pool) == r, "region");

	for (int i = 0; i < N; i++) {
		rc = asyncpool_acquire(pool, &l[i]);
		char *ptr = asyncpool_span_ptr(l[i].span);

		if (rc || l[i].buffer_index >= N || seen[l[i].buffer_index] ||
		    ptr != base + (size_t)l[i].buffer_index * BS || l[i].span.length != BS ||
		    l[i].span.region != r || !asyncpool_lease_held(&l[i]))
			all_ok = 0;
		else
			seen[l[i].buffer_index] = 1;
		memset(ptr, i, BS);
	}
	ok(all_ok, "%d acquires: distinct buffers inside the slab, right spans", N);
	all_ok = 1;
	for (int i = 0; i < N; i++) {
		unsigned char *ptr = asyncpool_span_ptr(l[i].span);

		for (int j = 0; j < BS; j++)
			if (ptr[j] != (unsigned char)i)
				all_ok = 0;
	}
	ok(all_ok, "buffers are disjoint: each kept its own pattern");
	is_int(asyncpool_available(pool), 0, "available: none");
	memset(&extra, 0x33, sizeof(extra));
	is_int(asyncpool_acquire(pool, &extra), -ENOBUFS, "acquire on an empty pool: -ENOBUFS");
	ok(extra.release.fn == NULL && extra.span.region == NULL, "empty: lease zeroed");
	is_int(asyncpool_destroy(pool), -EBUSY, "destroy with leases out: -EBUSY");
	is_int(asyncpool_available(pool), 0, "failed destroy changed nothing");

	copy = l[5];
	asyncpool_lease_release(&l[5]);
	ok(!asyncpool_lease_held(&l[5]), "release clears the lease");
	is_int(asyncpool_available(pool), 1, "one back after release");
	asyncpool_lease_release(&l[5]);
	is_int(asyncpool_available(pool), 1, "second release of the same object: no effect");
	asyncpool_lease_release(&copy);
	is_int(asyncpool_available(pool), 1, "release of a copy: ignored");
	st.size = sizeof(st);
	is_int(asyncpool_stats(pool, &st), 0, "stats");
	is_int(st.bad_releases, 1, "stats: the copy's release is counted");
	is_int(st.empty, 1, "stats: one empty acquire");
	is_int(st.capacity, N, "stats: capacity");
	is_int(st.available, 1, "stats: available");
	is_int(st.corruptions, 0, "stats: no corruption");
	is_int(st.size, sizeof(st), "stats: size kept");
	st.size = 8;
	is_int(asyncpool_stats(pool, &st), -EINVAL, "stats: size too small");

	is_int(asyncpool_acquire(pool, &extra), 0, "acquire after a release");
	is_int(extra.buffer_index, copy.buffer_index, "LIFO: the same buffer comes back");
	is_int(asyncpool_acquire(pool, &l[5]), -ENOBUFS, "empty again");
	asyncpool_lease_release(&copy);
	is_int(asyncpool_available(pool), 0, "a released copy stays released");
	asyncpool_lease_release(&extra);
	for (int i = 0; i < N; i++)
		if (i != 5)
			asyncpool_lease_release(&l[i]);
	is_int(asyncpool_available(pool), N, "all back");
	st.size = sizeof(st);
	asyncpool_stats(pool, &st);
	is_int(st.bad_releases, 1, "still one bad release counted");
	is_int(asyncpool_destroy(pool), 0, "destroy when full");
}

/* 2^24 buffers: the pool never touches the buffer memory, so reserve it. */
static void test_large(struct asyncpool_proactor *p)
{
	const uint32_t n = 1u << 24;
	const size_t bs = 64;
	void *mem = mmap(NULL, (size_t)n * bs, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	struct asyncpool_slab *s;
	struct asyncpool_region *r;
	struct asyncpool *pool;
	struct asyncpool_lease l;
	struct asyncpool_lease tmpl;
	uint32_t got = 0, bad = 0;
	uint32_t *idx;

	if (mem == MAP_FAILED)
		bail_out("mmap");
	idx = malloc(sizeof(*idx) * n);
	asyncpool_slab_wrap(mem, bs, n, NULL, NULL, &s);
	asyncpool_proactor_register_slab(p, s, ASYNCPOOL_ACCESS_READ, &r);
	asyncpool_slab_unref(s);
	is_int(asyncpool_create(r, &pool), 0, "create a pool of 2^24 buffers");
	asyncpool_region_unref(r);
	while (asyncpool_acquire(pool, &l) == 0) {
		if (l.buffer_index >= n)
			bad++;
		if (got == 0)
			tmpl = l;
		idx[got++] = l.buffer_index;
	}
	is_int(got, n, "2^24 acquires before -ENOBUFS");
	is_int(bad, 0, "every index in range");
	for (uint32_t i = 0; i < got; i++) {
		l = tmpl;     /* a lease is a value: rebuild each from its index */
		l.buffer_index = idx[i];
		asyncpool_lease_release(&l);
	}
	is_int(asyncpool_available(pool), n, "all 2^24 back");
	is_int(asyncpool_destroy(pool), 0, "destroy");
	free(idx);
	munmap(mem, (size_t)n * bs);
}

int main(void)
{
	struct asyncpool_proactor *p;

	if (asyncpool_proactor_create_memory(&p))
		bail_out("proactor");
	test_errors(p);
	test_cycle(p);
	test_large(p);
	is_int(asyncpool_proactor_destroy(p), 0, "proactor destroyed: nothing leaked a region");
	return done_testing();
}
