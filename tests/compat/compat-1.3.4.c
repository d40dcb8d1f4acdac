/* SPDX-License-Identifier: MIT */
/*
 * A program built against the 1.3.4 public headers (tests/compat/1.3.4,
 * see its README) and run against this tree's library (issue 34): its
 * inline asyncpool_lease_release() calls asyncpool_lease_release_gen(),
 * and it reads nothing of the inline layout of 1.4
 * (<asyncpool/inline.h>), so every call is an exported one.  Leases and
 * tokens, one and bulk, on local pools with and without caches and on
 * a shared pool over raw memory: every release accepted, a stale token
 * and a stale copy of a lease refused and counted exactly, the pool
 * full and sound at the end.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <asyncpool.h>
#include <asyncpool/version.h>
#include "tap.h"

#define N      32
#define BS     64
#define ROUNDS 200

#include "compat.h"

static void cycle(struct asyncpool *pool, const char *what)
{
	struct asyncpool_lease l[N], copy;
	uint64_t t[N], stale;
	int wrong = 0;

	for (int r = 0; r < ROUNDS; r++) {
		unsigned int n = 1 + (unsigned int)r % N;

		switch (r % 4) {
		case 0:
			for (unsigned int j = 0; j < n; j++)
				wrong += asyncpool_acquire(pool, &l[j]) != 0;
			for (unsigned int j = n; j-- > 0;)
				asyncpool_lease_release(&l[j]);
			break;
		case 1:
			wrong += asyncpool_acquire_bulk(pool, l, n) != 0;
			asyncpool_release_bulk(l, n);
			break;
		case 2:
			for (unsigned int j = 0; j < n; j++)
				wrong += asyncpool_acquire_tokens(pool, &t[j], 1) != 0;
			for (unsigned int j = 0; j < n; j++)
				wrong += asyncpool_release_token(pool, t[j]) != 0;
			break;
		default:
			wrong += asyncpool_acquire_tokens(pool, t, n) != 0;
			wrong += asyncpool_release_tokens(pool, t, n) != 0;
			break;
		}
	}
	is_int(wrong, 0, "%s: every acquire and release succeeded", what);
	is_int(bad(pool), 0, "%s: no release refused", what);

	/* A stale token, and a stale copy of a lease: refused, counted once each. */
	if (asyncpool_acquire_tokens(pool, &stale, 1) || asyncpool_release_token(pool, stale))
		bail_out("%s: a token", what);
	is_int(asyncpool_release_token(pool, stale), -ESTALE, "%s: a stale token is refused", what);
	if (asyncpool_acquire(pool, &l[0]))
		bail_out("%s: a lease", what);
	copy = l[0];
	asyncpool_lease_release(&l[0]);
	asyncpool_lease_release(&copy);
	is_int(bad(pool), 2, "%s: both counted", what);

	asyncpool_cache_flush(pool);
	is_int(asyncpool_available(pool), N, "%s: the pool ends full", what);
	is_int(asyncpool_check(pool), 0, "%s: check", what);
}

int main(void)
{
	struct asyncpool_proactor *p;
	struct asyncpool_region *r;
	struct asyncpool *pool;
	struct asyncpool_options o;
	size_t size;
	void *mem;

	plan(3 + 3 * 6);
	ok(ASYNCPOOL_VERSION_MAJOR == 1 && ASYNCPOOL_VERSION_MINOR == 3 &&
	   ASYNCPOOL_VERSION_PATCH == 4, "built against the 1.3.4 headers");
	/* The library of this tree, which 1.3.4 did not have: the inline layout's. */
	ok(dlsym(RTLD_DEFAULT, "asyncpool_inline_cache") != NULL,
	   "run against a library with the inline fast paths (%s)", asyncpool_version());
	if (asyncpool_proactor_create_memory(&p))
		bail_out("proactor");

	r = region(p);
	if (asyncpool_create(r, &pool))
		bail_out("create");
	cycle(pool, "local");
	asyncpool_destroy(pool);

	memset(&o, 0, sizeof(o));
	o.size = sizeof(o);
	o.cache_size = 8;
	if (asyncpool_create_opts(r, &o, &pool))
		bail_out("create_opts");
	cycle(pool, "local, cached");
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
