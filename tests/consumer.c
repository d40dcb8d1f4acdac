/* SPDX-License-Identifier: MIT */
/*
 * A program outside the tree: it includes only <asyncpool.h>, is built
 * with `pkg-config --cflags --libs libasyncpool` against an installed
 * library (make installcheck, the Debian autopkgtest), and checks that
 * the installed library works and returns the documented errno values.
 */
#include <asyncpool.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

static int failures, n;

static void check(int cond, const char *what)
{
	n++;
	printf("%s %d - %s\n", cond ? "ok" : "not ok", n, what);
	if (!cond)
		failures++;
}

int main(void)
{
	struct asyncpool_slab_options o;
	struct asyncpool_proactor *p = NULL;
	struct asyncpool_slab *slab = NULL;
	struct asyncpool_region *r = NULL;
	struct asyncpool *pool = NULL;
	struct asyncpool_lease a, b;
	struct asyncpool_stats st;

	check(strcmp(asyncpool_version(), "") != 0, "asyncpool_version");
	check(asyncpool_proactor_create_memory(NULL) == -EINVAL, "create_memory(NULL): -EINVAL");
	check(asyncpool_proactor_create_memory(&p) == 0 && p, "memory proactor");

	memset(&o, 0, sizeof(o));
	o.size = sizeof(o);
	o.buffer_size = 100;
	o.buffer_count = 2;
	o.numa_node = -1;
	check(asyncpool_slab_create(&o, &slab) == -EINVAL && !slab, "slab of 100-byte buffers: -EINVAL");
	o.buffer_count = 0xffffffffu;
	o.buffer_size = (size_t)-1 & ~(size_t)63;
	check(asyncpool_slab_create(&o, &slab) == -EOVERFLOW, "slab size overflows: -EOVERFLOW");
	o.buffer_size = 1024;
	o.buffer_count = 2;
	check(asyncpool_slab_create(&o, &slab) == 0 && slab, "slab of 2 x 1024");
	check(asyncpool_proactor_register_slab(p, slab, 0, &r) == -EINVAL && !r, "register, no access: -EINVAL");
	check(asyncpool_proactor_register_slab(p, slab, ASYNCPOOL_ACCESS_READ, &r) == 0 && r, "region");
	asyncpool_slab_unref(slab);
	check(asyncpool_region_fixed_index(r, 0) == -EOPNOTSUPP, "memory region: no fixed index");
	check(asyncpool_create(r, &pool) == 0 && pool, "pool");
	asyncpool_region_unref(r);
	check(asyncpool_capacity(pool) == 2 && asyncpool_available(pool) == 2, "capacity and available");

	check(asyncpool_acquire(pool, &a) == 0 && asyncpool_lease_held(&a), "acquire");
	check(asyncpool_acquire(pool, &b) == 0, "acquire the second");
	memset(asyncpool_span_ptr(a.span), 0xa5, asyncpool_span_length(a.span));
	{
		struct asyncpool_lease c;

		check(asyncpool_acquire(pool, &c) == -ENOBUFS && !asyncpool_lease_held(&c),
		      "empty pool: -ENOBUFS, lease zeroed");
	}
	check(asyncpool_destroy(pool) == -EBUSY, "destroy with leases out: -EBUSY");
	check(asyncpool_proactor_destroy(p) == -EBUSY, "proactor with a region: -EBUSY");
	asyncpool_lease_release(&a);
	asyncpool_lease_release(&a);
	check(!asyncpool_lease_held(&a) && asyncpool_available(pool) == 1, "release is idempotent");
	asyncpool_lease_release(&b);
	memset(&st, 0, sizeof(st));
	st.size = sizeof(st);
	check(asyncpool_stats(pool, &st) == 0 && st.capacity == 2 && st.available == 2 &&
	      st.empty == 1 && st.bad_releases == 0, "stats");
	check(asyncpool_destroy(pool) == 0, "destroy");
	check(asyncpool_proactor_destroy(p) == 0, "proactor destroy");
	printf("1..%d\n", n);
	return failures ? 1 : 0;
}
