/* SPDX-License-Identifier: MIT */
/*
 * Built by tests/test-cfi.sh with clang -fsanitize=cfi-icall -flto
 * -fvisibility=hidden: every indirect call must go to a function of the
 * pointer's own type, or the program dies of SIGILL.  It gives back pool
 * leases (with and without caches) and a lease of its own (generation 0,
 * its own callback) through the header's inline asyncpool_lease_release().
 * With -DOLD_1_1_INLINE it uses a copy of the 1.1 header's inline, which
 * called a pool's callback through a cast to void (*)(void *, uint64_t):
 * the test expects that build to die, so that it knows CFI is on.
 * Exit 0: every release accepted, the pools full, our callback called.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <asyncpool.h>

#ifdef OLD_1_1_INLINE
static void release_1_1(struct asyncpool_lease *lease)
{
	void (*fn)(void *, uint32_t);

	if (!lease || !lease->release.fn)
		return;
	fn = lease->release.fn;
	lease->release.fn = NULL;
	if (lease->generation)
		((void (*)(void *, uint64_t))(void (*)(void))fn)(
			lease->release.ctx,
			((uint64_t)lease->generation << 32) | lease->buffer_index);
	else
		fn(lease->release.ctx, lease->buffer_index);
}
#define RELEASE release_1_1
#else
#define RELEASE asyncpool_lease_release
#endif

#define N 16

static unsigned mine_called;

static void mine(void *ctx, uint32_t idx)
{
	(void)ctx;
	mine_called += idx == 7;
}

static int cycle(struct asyncpool_proactor *p, uint32_t cache)
{
	struct asyncpool_slab_options so;
	struct asyncpool_options po;
	struct asyncpool_stats st;
	struct asyncpool_slab *s;
	struct asyncpool_region *r;
	struct asyncpool *pool;
	struct asyncpool_lease l[4];

	memset(&so, 0, sizeof(so));
	so.size = sizeof(so);
	so.buffer_size = 64;
	so.buffer_count = N;
	so.numa_node = -1;
	memset(&po, 0, sizeof(po));
	po.size = sizeof(po);
	po.cache_size = cache;
	if (asyncpool_slab_create(&so, &s) ||
	    asyncpool_proactor_register_slab(p, s, ASYNCPOOL_ACCESS_READ, &r) ||
	    asyncpool_create_opts(r, &po, &pool))
		return 1;
	asyncpool_slab_unref(s);
	for (int i = 0; i < 1000; i++) {
		for (int j = 0; j < 4; j++)
			if (asyncpool_acquire(pool, &l[j]))
				return 2;
		for (int j = 0; j < 4; j++)
			RELEASE(&l[j]);
	}
	memset(&st, 0, sizeof(st));
	st.size = sizeof(st);
	asyncpool_cache_flush(pool);
	if (asyncpool_stats(pool, &st) || st.bad_releases || asyncpool_available(pool) != N)
		return 3;
	asyncpool_destroy(pool);
	asyncpool_region_unref(r);
	return 0;
}

int main(void)
{
	struct asyncpool_proactor *p;
	struct asyncpool_lease own;
	int rc;

	if (asyncpool_proactor_create_memory(&p))
		return 10;
	if ((rc = cycle(p, 0)) || (rc = cycle(p, 8)))
		return rc;
	memset(&own, 0, sizeof(own));
	own.release.fn = mine;
	own.buffer_index = 7;
	RELEASE(&own);
	RELEASE(&own);
	asyncpool_proactor_destroy(p);
	return mine_called == 1 ? 0 : 4;
}
