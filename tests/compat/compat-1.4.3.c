/* SPDX-License-Identifier: MIT */
/*
 * A program built against the 1.4.3 public headers (tests/compat/1.4.3,
 * see its README) and run against this tree's library, whose caches have
 * a later inline layout (libasyncpool(7), "The inline fast paths"): the
 * 1.4.3 inline code compares the version a cache publishes with its own
 * (1), finds another, and calls the library instead of reading fields
 * that moved.  Leases and tokens, one and bulk, on local pools with and
 * without caches, from this thread and handed to another, and on a
 * shared pool over raw memory: every release accepted, a stale token and
 * a stale copy of a lease refused and counted exactly, the pool full
 * and sound at the end.  A library that changed the layout and kept
 * publishing version 1 fails here: the old inline code would write its
 * busy flag over the cache's count.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <asyncpool.h>
#include <asyncpool/version.h>
#include "tap.h"

#ifdef ASYNCPOOL_INLINE_PATHS
static const int inline_paths = 1;
#else
static const int inline_paths = 0;
#endif

#define N      64
#define BS     64
#define ROUNDS 400

#include "compat.h"
#include "compat-cycle.h"

int main(void)
{
	struct asyncpool_proactor *p;
	struct asyncpool_region *r;
	struct asyncpool *pool;
	struct asyncpool_options o;
	uint64_t t;
	size_t size;
	void *mem;

	plan(4 + 4 * 6);
	ok(ASYNCPOOL_VERSION_MAJOR == 1 && ASYNCPOOL_VERSION_MINOR == 4 &&
	   ASYNCPOOL_VERSION_PATCH == 3 && ASYNCPOOL_INLINE_ABI == 1 &&
	   inline_paths, "built against the 1.4.3 headers, inline paths of layout 1");
	if (asyncpool_proactor_create_memory(&p))
		bail_out("proactor");

	r = region(p);
	memset(&o, 0, sizeof(o));
	o.size = sizeof(o);
	o.cache_size = 16;
	if (asyncpool_create_opts(r, &o, &pool))
		bail_out("create_opts");
	/* The calling thread's cache is this pool's now: the version it publishes. */
	if (asyncpool_acquire_tokens(pool, &t, 1) || asyncpool_release_token(pool, t))
		bail_out("a token");
	ok(asyncpool_inline_cache()->pool == pool && asyncpool_inline_cache()->abi > 1,
	   "the library publishes layout version %u, not this header's 1 (%s)",
	   asyncpool_inline_cache()->abi, asyncpool_version());
	cycle(pool, "local, cached");
	asyncpool_destroy(pool);
	ok(asyncpool_inline_cache()->abi == 0, "a destroyed pool's cache publishes no version");

	if (asyncpool_create(r, &pool))
		bail_out("create");
	cycle(pool, "local");
	asyncpool_destroy(pool);

	o.cache_size = 0;
	if (asyncpool_create_opts(r, &o, &pool))
		bail_out("create_opts");
	cycle(pool, "local, no cache");
	asyncpool_destroy(pool);

	if (asyncpool_shared_storage_size(N, &size))
		bail_out("storage_size");
	mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED || asyncpool_create_shared(mem, size, r, &pool))
		bail_out("create_shared");
	cycle(pool, "shared over raw memory");
	asyncpool_destroy(pool);
	munmap(mem, size);

	asyncpool_region_unref(r);
	is_int(asyncpool_proactor_destroy(p), 0, "proactor destroy");
	return done_testing();
}
