/* SPDX-License-Identifier: MIT */
/*
 * What the programs built against an old release's headers share
 * (tests/compat/compat-*.c): only calls every release since 1.0.0 has.
 * Each program defines N and BS, the buffers of its slab, first.
 */
#ifndef ASYNCPOOL_TESTS_COMPAT_H
#define ASYNCPOOL_TESTS_COMPAT_H

#include <stdint.h>
#include <string.h>

#include <asyncpool.h>
#include "tap.h"

/* A region of N buffers of BS bytes on proactor p. */
static struct asyncpool_region *region(struct asyncpool_proactor *p)
{
	struct asyncpool_slab_options o;
	struct asyncpool_slab *s;
	struct asyncpool_region *r;

	memset(&o, 0, sizeof(o));
	o.size = sizeof(o);
	o.buffer_size = BS;
	o.buffer_count = N;
	o.numa_node = -1;
	if (asyncpool_slab_create(&o, &s))
		bail_out("slab");
	if (asyncpool_proactor_register_slab(p, s, ASYNCPOOL_ACCESS_READ, &r))
		bail_out("register_slab");
	asyncpool_slab_unref(s);
	return r;
}

/* The pool's count of refused releases. */
static uint64_t bad(struct asyncpool *pool)
{
	struct asyncpool_stats st;

	memset(&st, 0, sizeof(st));
	st.size = sizeof(st);
	if (asyncpool_stats(pool, &st))
		return UINT64_MAX;
	return st.bad_releases;
}

#endif
