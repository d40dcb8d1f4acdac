/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: operations on a pool whose freelist state is fuzzed.
 *
 * A shared pool's head word and next[] live in memory that other
 * processes write, so the pool must survive any value there: acquire,
 * release and available must return only documented errnos, hand out
 * only buffers inside the slab, and never hang, crash or read out of
 * bounds.  This target creates a pool, overwrites its head and next[]
 * (the internal layout, lib/pool_layout.h) from the input, then runs the
 * operations the rest of the input encodes.
 *
 * Input:
 *   byte 0        buffer count - 1 (low 4 bits: 1..16 buffers)
 *   byte 1        head index  (see value() below)
 *   byte 2        head tag    (high byte of the 32-bit tag; 0xff wraps)
 *   count bytes   state[i] and link[i] for each buffer (see word())
 *   the rest      operations, one byte each: low 2 bits the kind,
 *                 the high 6 bits its argument
 *
 * Built with clang -fsanitize=fuzzer by `make fuzz`, and with the normal
 * compiler into tests/test-fuzz-pool-state, which replays the committed
 * corpus (tests/fuzz/replay.c).
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <asyncpool.h>
#include "../hooks.h"
#include "../testutil.h"

#define BUFFER_SIZE 64
#define MAX_HELD 16

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_fail(const char *what, long value)
{
	fprintf(stderr, "fuzz_pool_state: %s (%ld)\n", what, value);
	abort();
}

/* A byte to a link: mostly indices, some just out of range, and the
 * end, so that short inputs reach every branch. */
static uint32_t value(uint8_t b, uint32_t count)
{
	switch (b) {
	case 0xff: return AP_FL_END;
	case 0xfe: return AP_FL_END - 1;
	case 0xfd: return 0x80000000u;
	case 0xfc: return count;
	default:   return b % (count + 2);
	}
}

/*
 * A byte to a state word and a link (version 3 keeps them apart): a
 * FREE buffer with a link, or each other kind with the end.
 */
static uint64_t word(uint8_t b, uint32_t count, uint32_t *link)
{
	*link = AP_FL_END;
	switch (b) {
	case 0xfe: return AP_W_MAKE(AP_K_LEASED, 0, 1);
	case 0xfb: return AP_W_MAKE(AP_K_CACHED, 0, 1);
	case 0xfa: *link = 0; return AP_W_MAKE(AP_K_QUEUED, 0, 1);
	default:   *link = value(b, count); return AP_W_MAKE(AP_K_FREE, 0, 0);
	}
}

static void check_lease(const struct asyncpool *pool, const struct asyncpool_lease *l,
			const char *base, uint32_t count)
{
	const char *p = asyncpool_span_ptr(l->span);

	if (l->buffer_index >= count)
		fuzz_fail("lease index out of range", l->buffer_index);
	if (l->span.offset != (size_t)l->buffer_index * BUFFER_SIZE ||
	    l->span.length != BUFFER_SIZE || l->span.region != asyncpool_region(pool))
		fuzz_fail("lease span is not its buffer", l->buffer_index);
	if (p < base || p + BUFFER_SIZE > base + (size_t)count * BUFFER_SIZE)
		fuzz_fail("lease outside the slab", (long)(p - base));
}

static void check_zero(const struct asyncpool_lease *l)
{
	static const struct asyncpool_lease zero;

	if (memcmp(l, &zero, sizeof(zero)))
		fuzz_fail("a failed acquire left the lease set", 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct asyncpool_proactor *p;
	struct asyncpool_region *r;
	struct asyncpool *pool;
	struct asyncpool_lease held[MAX_HELD];
	struct asyncpool_stats st;
	uint32_t count, nheld = 0;
	const char *base;
	size_t pos;
	int rc;

	if (size < 3)
		return 0;
	count = (data[0] & 15u) + 1;
	if (size < 3 + count)
		return 0;

	if (asyncpool_proactor_create_memory(&p))
		fuzz_fail("proactor", 0);
	if (new_region(p, BUFFER_SIZE, count, ASYNCPOOL_ACCESS_READ, &r))
		fuzz_fail("region", 0);
	if (asyncpool_create(r, &pool))
		fuzz_fail("create", 0);
	base = asyncpool_region_base(r);
	asyncpool_region_unref(r);

	/* The fuzzed state, as another process could have left it. */
	atomic_store(&pool->fl.line->head,
		     AP_HEAD_MAKE(value(data[1], count), (uint32_t)data[2] << 24 | 0xfffffeu));
	for (uint32_t i = 0; i < count; i++) {
		uint32_t link;

		atomic_store(&pool->fl.state[i], word(data[3 + i], count, &link));
		atomic_store(&pool->fl.link[i], link);
	}

	for (pos = 3 + count; pos < size; pos++) {
		uint8_t op = data[pos] & 3, arg = data[pos] >> 2;
		struct asyncpool_lease l;
		size_t avail;

		switch (op) {
		case 0: /* acquire */
			memset(&l, 0xa5, sizeof(l));
			rc = asyncpool_acquire(pool, &l);
			if (rc == 0) {
				check_lease(pool, &l, base, count);
				if (nheld < MAX_HELD)
					held[nheld++] = l;
			} else if (rc == -ENOBUFS || rc == -EUCLEAN) {
				check_zero(&l);
			} else {
				fuzz_fail("acquire: undocumented errno", rc);
			}
			break;
		case 1: /* release a held lease, through the pool or the lease */
			if (!nheld)
				break;
			l = held[arg % nheld];
			nheld--;
			held[arg % (nheld + 1)] = held[nheld];
			if (arg & 32) {
				asyncpool_lease_release(&l);
				break;
			}
			rc = ap_fl_release(&pool->fl, l.buffer_index, l.generation);
			if (rc != 0 && rc != -EALREADY && rc != -EUCLEAN)
				fuzz_fail("release: undocumented errno", rc);
			break;
		case 2: /* release any index: double and out-of-range releases */
			rc = ap_fl_release(&pool->fl, value(arg, count), 0);
			if (value(arg, count) >= count ? rc != -EINVAL :
			    (rc != 0 && rc != -EALREADY && rc != -EUCLEAN))
				fuzz_fail("release index: wrong errno", rc);
			break;
		case 3: /* observe */
			avail = asyncpool_available(pool);
			if (avail > count)
				fuzz_fail("available > capacity", (long)avail);
			st.size = sizeof(st);
			if (asyncpool_stats(pool, &st) || st.capacity != count || st.available > count)
				fuzz_fail("stats", 0);
			break;
		}
	}

	/* Leave a consistent list so that destroy frees everything. */
	ap_layout_init(pool->storage, count, BUFFER_SIZE, false, 0, 0);
	if (asyncpool_destroy(pool))
		fuzz_fail("destroy", 0);
	if (asyncpool_proactor_destroy(p))
		fuzz_fail("proactor destroy", 0);
	return 0;
}
