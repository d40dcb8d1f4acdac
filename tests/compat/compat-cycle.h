/* SPDX-License-Identifier: MIT */
/*
 * The round of a program built against the headers of an older inline
 * layout (compat-inline.c): leases and tokens, one and bulk, from this
 * thread and handed to another, every release accepted, a stale token
 * and a stale copy of a lease refused and counted exactly, the pool full
 * and sound at the end; on local pools with and without caches and a
 * shared pool over raw memory.  Include after compat.h,
 * with N and ROUNDS defined.
 */
#ifndef COMPAT_CYCLE_H
#define COMPAT_CYCLE_H

#include <pthread.h>
#include <sys/mman.h>

/* Releases on another thread: tokens[0..n) and leases l[0..n). */
struct away {
	struct asyncpool *pool;
	uint64_t *t;
	struct asyncpool_lease *l;
	unsigned int n;
	int wrong;
};

static void *release_away(void *arg)
{
	struct away *a = arg;

	for (unsigned int j = 0; j < a->n; j++)
		a->wrong += asyncpool_release_token(a->pool, a->t[j]) != 0;
	asyncpool_release_bulk(a->l, a->n);
	return NULL;
}

static void cycle(struct asyncpool *pool, const char *what)
{
	struct asyncpool_lease l[N], copy;
	uint64_t t[N], stale;
	int wrong = 0;

	for (int r = 0; r < ROUNDS; r++) {
		unsigned int n = 1 + (unsigned int)r % (N / 2);

		switch (r % 5) {
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
		case 3:
			wrong += asyncpool_acquire_tokens(pool, t, n) != 0;
			wrong += asyncpool_release_tokens(pool, t, n) != 0;
			break;
		default: {
			/* Handed to another thread, which releases them. */
			struct away a = { pool, t, l, n / 2 + 1, 0 };
			pthread_t th;

			wrong += asyncpool_acquire_tokens(pool, t, a.n) != 0;
			wrong += asyncpool_acquire_bulk(pool, l, a.n) != 0;
			if (pthread_create(&th, NULL, release_away, &a) || pthread_join(th, NULL))
				bail_out("%s: thread", what);
			wrong += a.wrong;
			break;
		}
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

/*
 * The program: built says whether the headers are the release's (its
 * version and inline layout, with the inline paths compiled), layout is
 * that layout's version; same, whether the library still publishes it
 * (grown into what it had reserved: 1.7.2's version 3), or a later one.
 */
static int compat_main(int built, unsigned int layout, int same, const char *release)
{
	struct asyncpool_proactor *p;
	struct asyncpool_region *r;
	struct asyncpool *pool;
	struct asyncpool_options o;
	uint64_t t;
	size_t size;
	void *mem;

	plan(4 + 4 * 6);
	ok(built, "built against the %s headers, inline paths of layout %u", release, layout);
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
	ok(asyncpool_inline_cache()->pool == pool &&
		   (same ? asyncpool_inline_cache()->abi == layout : asyncpool_inline_cache()->abi > layout),
	   "the library publishes layout version %u, %s this header's %u (%s)",
	   asyncpool_inline_cache()->abi, same ? "as" : "not", layout, asyncpool_version());
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

#endif /* COMPAT_CYCLE_H */
