/* SPDX-License-Identifier: MIT */
/*
 * One pool sent on several rings in few calls (issue 23):
 * asyncpool_proactor_register_slab_many() registers one slab on N rings,
 * all or nothing; a pool created with the other rings' regions as
 * siblings holds them, so the caller unrefs every region right after
 * the create and the slots stay valid on every ring until the pool is
 * destroyed.  And the -EBUSY of asyncpool_proactor_destroy() is traced by
 * live_regions in asyncpool_proactor_stats(), old callers' size intact.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <asyncpool.h>
#include "uring-util.h"

#define NBUF 8
#define BS 4096

static uint32_t live(struct asyncpool_proactor *p)
{
	struct asyncpool_proactor_stats st = { .size = sizeof(st) };

	if (asyncpool_proactor_stats(p, &st))
		bail_out("proactor_stats");
	return st.live_regions;
}

static bool all_null(struct asyncpool_region **r, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (r[i])
			return false;
	return true;
}

static struct asyncpool_slab *new_slab(void)
{
	struct asyncpool_slab_options so;
	struct asyncpool_slab *s;

	slab_options(&so, BS, NBUF);
	if (asyncpool_slab_create(&so, &s))
		bail_out("slab_create");
	memset(asyncpool_slab_base(s), 0, (size_t)BS * NBUF);
	return s;
}

static void test_stats_size(struct asyncpool_proactor *p)
{
	struct asyncpool_proactor_stats st;

	/* A caller built against 1.1: its size ends before live_regions. */
	memset(&st, 0xa5, sizeof(st));
	st.size = offsetof(struct asyncpool_proactor_stats, live_regions);
	is_int(asyncpool_proactor_stats(p, &st), 0, "stats with the 1.1 size: 0");
	is_int(st.live_regions, 0xa5a5a5a5u, "  live_regions beyond that size is not written");
}

static void test_many(struct asyncpool_proactor *const *ps, struct asyncpool_slab *slab)
{
	struct asyncpool_proactor *bad[3] = { ps[0], NULL, ps[1] };
	struct asyncpool_proactor *dup[3] = { ps[0], ps[1], ps[0] };
	struct asyncpool_region *r[3], *one;
	bool same = true;

	is_int(asyncpool_proactor_register_slab_many(ps, 2, slab, ASYNCPOOL_ACCESS_READ, NULL),
	       -EINVAL, "many: NULL regions: -EINVAL");
	r[0] = (struct asyncpool_region *)slab;
	is_int(asyncpool_proactor_register_slab_many(ps, 0, slab, ASYNCPOOL_ACCESS_READ, r),
	       -EINVAL, "many: count 0: -EINVAL");
	r[0] = r[1] = (struct asyncpool_region *)slab;
	is_int(asyncpool_proactor_register_slab_many(NULL, 2, slab, ASYNCPOOL_ACCESS_READ, r),
	       -EINVAL, "many: NULL proactors: -EINVAL");
	ok(all_null(r, 2), "  regions[] zeroed");
	is_int(asyncpool_proactor_register_slab_many(ps, 2, NULL, ASYNCPOOL_ACCESS_READ, r),
	       -EINVAL, "many: NULL slab: -EINVAL");
	is_int(asyncpool_proactor_register_slab_many(bad, 3, slab, ASYNCPOOL_ACCESS_READ, r),
	       -EINVAL, "many: a NULL proactor: -EINVAL");
	is_int(asyncpool_proactor_register_slab_many(dup, 3, slab, ASYNCPOOL_ACCESS_READ, r),
	       -EINVAL, "many: one proactor twice: -EINVAL");
	is_int(asyncpool_proactor_register_slab_many(ps, 2, slab, 0, r), -EINVAL,
	       "many: no access: -EINVAL");
	ok(live(ps[0]) == 0 && live(ps[1]) == 0 && live(ps[2]) == 0,
	   "  nothing registered by the bad calls");

	/* All or nothing: the third ring has the slab already (-EEXIST),
	 * so the first two registrations are undone. */
	if (asyncpool_proactor_register_slab(ps[2], slab, ASYNCPOOL_ACCESS_READ, &one))
		bail_out("register on ring C");
	is_int(asyncpool_proactor_register_slab_many(ps, 3, slab, ASYNCPOOL_ACCESS_READ, r),
	       -EEXIST, "many: the third ring refuses: -EEXIST");
	ok(all_null(r, 3), "  regions[] zeroed");
	is_int(live(ps[0]) + live(ps[1]), 0, "  rings A and B hold no region after the undo");
	asyncpool_region_unref(one);

	is_int(asyncpool_proactor_register_slab_many(ps, 3, slab, ASYNCPOOL_ACCESS_READ, r), 0,
	       "many: the slab on three rings in one call");
	for (uint32_t i = 0; i < NBUF; i++)
		same &= asyncpool_region_fixed_index(r[0], i) == asyncpool_region_fixed_index(r[1], i) &&
			asyncpool_region_fixed_index(r[0], i) == asyncpool_region_fixed_index(r[2], i);
	ok(same && asyncpool_region_proactor(r[1]) == ps[1] && asyncpool_region_proactor(r[2]) == ps[2],
	   "  regions[i] on proactors[i], the same fixed slots");
	for (int i = 0; i < 3; i++)
		asyncpool_region_unref(r[i]);
}

static void test_siblings(struct io_uring *rings, struct asyncpool_proactor *const *ps,
			  struct asyncpool_slab *slab)
{
	struct asyncpool_options o;
	struct asyncpool_region *r[3], *w, *own, *foreign, *sib[2];
	struct asyncpool_slab *other = new_slab();
	struct asyncpool_lease l;
	struct asyncpool *pool;
	char path[] = "/tmp/asyncpool-siblings-XXXXXX";
	int fd, idx;

	if (asyncpool_proactor_register_slab_many(ps, 3, slab, ASYNCPOOL_ACCESS_READ, r))
		bail_out("register_slab_many");
	if (asyncpool_proactor_register_slab(ps[1], other, ASYNCPOOL_ACCESS_READ, &foreign))
		bail_out("register other");
	memset(&o, 0, sizeof(o));
	o.size = sizeof(o);

	o.sibling_count = 1;
	is_int(asyncpool_create_opts(r[0], &o, &pool), -EINVAL, "siblings: a count without an array");
	/* r + 1 with a count of nrings - 1 is the idiom: one ring, none. */
	o.siblings = r + 1;
	o.sibling_count = 0;
	is_int(asyncpool_create_opts(r[0], &o, &pool), 0, "siblings: a count of 0 ignores the array");
	ok(live(ps[1]) == 2 && live(ps[2]) == 1, "  and holds no sibling");
	asyncpool_destroy(pool);
	o.siblings = sib;
	o.sibling_count = 1;
	sib[0] = NULL;
	is_int(asyncpool_create_opts(r[0], &o, &pool), -EINVAL, "siblings: a NULL region");
	sib[0] = foreign;
	is_int(asyncpool_create_opts(r[0], &o, &pool), -EINVAL, "siblings: another slab's region");
	if (new_region(ps[1], BS, NBUF, ASYNCPOOL_ACCESS_WRITE, &w))
		bail_out("WRITE region");
	sib[0] = w;
	is_int(asyncpool_create_opts(r[0], &o, &pool), -EINVAL, "siblings: a WRITE region");
	asyncpool_region_unref(w);
	if (asyncpool_proactor_register_slab_many(ps, 1, slab, ASYNCPOOL_ACCESS_READ, &own) != -EEXIST)
		bail_out("the slab twice on ring A");
	sib[0] = r[0];
	is_int(asyncpool_create_opts(r[0], &o, &pool), -EINVAL,
	       "siblings: the pool's own region (its own proactor)");
	sib[0] = r[1];
	sib[1] = r[1];
	o.sibling_count = 2;
	is_int(asyncpool_create_opts(r[0], &o, &pool), -EINVAL, "siblings: one proactor twice");
	ok(pool == NULL && live(ps[1]) == 2 && live(ps[2]) == 1,
	   "  no pool, no reference taken by the refusals");
	asyncpool_region_unref(foreign);
	asyncpool_slab_unref(other);

	/* The common case: create, then unref every region at once. */
	sib[1] = r[2];
	o.cache_size = 4;
	is_int(asyncpool_create_opts(r[0], &o, &pool), 0, "siblings: a pool over A with B and C");
	for (int i = 0; i < 3; i++)
		asyncpool_region_unref(r[i]);
	ok(live(ps[0]) == 1 && live(ps[1]) == 1 && live(ps[2]) == 1,
	   "  each ring still has a live region, held by the pool");
	is_int(asyncpool_proactor_destroy(ps[2]), -EBUSY, "  so ring C's proactor is -EBUSY");

	/* Ring C's slots still point at the buffers. */
	fd = mkstemp(path);
	if (fd < 0)
		bail_out("mkstemp");
	unlink(path);
	if (asyncpool_acquire(pool, &l))
		bail_out("acquire");
	memset(asyncpool_span_ptr(l.span), 'c', BS);
	idx = asyncpool_region_fixed_index(l.span.region, l.buffer_index);
	is_int(ut_write_fixed(&rings[2], fd, asyncpool_span_ptr(l.span), BS, 0, idx), BS,
	       "  WRITE_FIXED through ring C after the caller's unref");
	asyncpool_lease_release(&l);
	close(fd);

	is_int(asyncpool_destroy(pool), 0, "siblings: pool destroyed");
	ok(live(ps[0]) == 0 && live(ps[1]) == 0 && live(ps[2]) == 0,
	   "  and with it every region on every ring");

	/* A caller built against 1.1 (its size ends at reserved). */
	o.size = offsetof(struct asyncpool_options, siblings);
	if (asyncpool_proactor_register_slab(ps[0], slab, ASYNCPOOL_ACCESS_READ, &own))
		bail_out("register");
	is_int(asyncpool_create_opts(own, &o, &pool), 0, "options of the 1.1 size: a pool");
	asyncpool_region_unref(own);
	is_int(live(ps[1]), 0, "  with no siblings");
	asyncpool_destroy(pool);
}

/* The usual cause of -EBUSY, as asyncpool_proactor_destroy(3) names it. */
static void test_busy(struct asyncpool_proactor *p)
{
	struct asyncpool_region *r = make_region(p, BS, NBUF, ASYNCPOOL_ACCESS_READ);
	struct asyncpool *pool;

	if (asyncpool_create(r, &pool))
		bail_out("create");
	is_int(live(p), 1, "busy: a pool's region is one live region");
	asyncpool_destroy(pool);
	is_int(asyncpool_proactor_destroy(p), -EBUSY,
	       "busy: the caller's own reference kept after asyncpool_create: -EBUSY");
	is_int(live(p), 1, "  and live_regions says 1");
	asyncpool_region_unref(r);
	is_int(live(p), 0, "  0 after the caller's unref");
}

int main(void)
{
	struct io_uring rings[3];
	struct asyncpool_proactor *ps[3];
	struct asyncpool_slab *slab;

	for (int i = 0; i < 3; i++) {
		ut_ring_init(&rings[i], 8);
		if (asyncpool_proactor_create_uring(&rings[i], 0, &ps[i]))
			bail_out("create_uring");
	}
	slab = new_slab();
	test_stats_size(ps[0]);
	test_many(ps, slab);
	test_siblings(rings, ps, slab);
	test_busy(ps[0]);
	asyncpool_slab_unref(slab);
	for (int i = 0; i < 3; i++) {
		is_int(asyncpool_proactor_destroy(ps[i]), 0, "proactor %d destroyed", i);
		io_uring_queue_exit(&rings[i]);
	}
	return done_testing();
}
