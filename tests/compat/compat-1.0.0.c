/* SPDX-License-Identifier: MIT */
/*
 * A program built against the 1.0.0 public headers (tests/compat/1.0.0,
 * from the tree's history: see its README) and run against this tree's
 * library (issue 21, item 9).  Its inline asyncpool_lease_release() calls
 * the lease's callback as fn(ctx, buffer_index), a 32-bit index, while a
 * pool of 1.1 and later stores a callback that takes the 64-bit token:
 * every release must still be accepted (no bad release counted) and the
 * pool must end full, on local pools with and without caches and on a
 * shared pool over raw memory, single and bulk, over enough rounds that
 * every buffer changes generation many times.  A copy released after the
 * buffer was leased again is a 1.0 program's bug; not exercised here.
 */
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
	struct asyncpool_lease l[N];
	int got = 0, wrong = 0;

	for (int r = 0; r < ROUNDS; r++) {
		int n = 1 + r % N;

		if (r % 2) {
			wrong += asyncpool_acquire_bulk(pool, l, (unsigned int)n) != 0;
			for (int j = 0; j < n; j++)
				asyncpool_lease_release(&l[j]);
		} else {
			for (int j = 0; j < n; j++)
				got += asyncpool_acquire(pool, &l[j]) == 0;
			for (int j = n - 1; j >= 0; j--)
				asyncpool_lease_release(&l[j]);
			got -= n;
		}
	}
	is_int(got + wrong, 0, "%s: every acquire succeeded", what);
	is_int(bad(pool), 0, "%s: every release through the 1.0 inline was accepted", what);
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

	plan(3 + 3 * 4);
	ok(ASYNCPOOL_VERSION_MAJOR == 1 && ASYNCPOOL_VERSION_MINOR == 0,
	   "built against the 1.0.0 headers");
	ok(strcmp(asyncpool_version(), "1.0.0") != 0, "run against a later library (%s)",
	   asyncpool_version());
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
