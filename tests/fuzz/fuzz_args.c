/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: the struct-size and count arguments of the public API
 * (issue 14, findings 5 and 6).
 *
 *   op 0..3  asyncpool_slab_create, asyncpool_create_opts,
 *            asyncpool_shared_create, asyncpool_stats: a struct whose size
 *            field is the fuzzed value and whose other bytes come from
 *            the input.  A size beyond 4096 must be -E2BIG with nothing
 *            read or written beyond the struct this build knows (the
 *            struct then ends at a PROT_NONE page); up to 4096 the bytes
 *            up to size are readable and nothing past them; a non-zero
 *            byte beyond the known struct is -EINVAL.
 *   op 4     asyncpool_acquire_bulk(pool or NULL, leases, n): n beyond the
 *            capacity, or no pool, is -EINVAL with the array untouched;
 *            otherwise n distinct leases, released again.
 *   op 5     asyncpool_release_bulk(leases, n) over copies of acquired
 *            leases, duplicates, cleared leases and out-of-range indices:
 *            afterwards every buffer is free once and the pool checks.
 *   op 6     asyncpool_set_cache(pool, n): 0 up to the bound, else -EINVAL.
 *
 * Input: byte 0 the op, bytes 1-8 the value (size or n, little-endian),
 * byte 9 bit 0 the cached pool, bit 1 a NULL pool, byte 10 the room of
 * the lease array (1..32), the rest the struct's bytes after its size
 * field (ops 0-3) or the recipe of the released array (op 5: one byte per
 * entry: 0-63 a copy of acquired lease b % k, 64-127 a cleared lease,
 * 128-255 a copy with an index out of range).
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <asyncpool.h>

#define CAP 16
#define CACHE 4
#define ROOM_MAX 32
#define STRUCT_MAX 4096

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_fail(const char *what, long long value)
{
	fprintf(stderr, "fuzz_args: %s (%lld)\n", what, value);
	abort();
}

/* ---- state kept across inputs ---- */

static struct asyncpool_region *region;
static struct asyncpool *uncached, *cached;
static unsigned char *window;   /* STRUCT_MAX bytes, a PROT_NONE page after */
static size_t window_len;

static void setup_once(void)
{
	struct asyncpool_slab_options so;
	struct asyncpool_options po;
	struct asyncpool_proactor *p;
	struct asyncpool_slab *slab;
	long ps = sysconf(_SC_PAGESIZE);
	size_t page = ps > 0 ? (size_t)ps : 4096;
	unsigned char *map;

	if (window)
		return;
	window_len = (STRUCT_MAX + page - 1) / page * page;
	map = mmap(NULL, window_len + page, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (map == MAP_FAILED || mprotect(map + window_len, page, PROT_NONE))
		fuzz_fail("guard page", 0);
	window = map;

	memset(&so, 0, sizeof(so));
	so.size = sizeof(so);
	so.buffer_size = 64;
	so.buffer_count = CAP;
	so.numa_node = -1;
	memset(&po, 0, sizeof(po));
	po.size = sizeof(po);
	po.cache_size = CACHE;
	if (asyncpool_proactor_create_memory(&p) || asyncpool_slab_create(&so, &slab) ||
	    asyncpool_proactor_register_slab(p, slab, ASYNCPOOL_ACCESS_READ, &region) ||
	    asyncpool_create(region, &uncached) || asyncpool_create_opts(region, &po, &cached))
		fuzz_fail("setup", 0);
	asyncpool_slab_unref(slab);
}

/* len bytes that end at the guard page, filled with fill. */
static void *at_guard(size_t len, int fill)
{
	memset(window, fill, window_len);
	return window + window_len - len;
}

/* Every buffer free once, the freelist consistent. */
static void pool_whole(struct asyncpool *pool)
{
	int rc;

	if (pool == cached && (rc = asyncpool_cache_flush(pool)))
		fuzz_fail("cache_flush", rc);
	if (asyncpool_available(pool) != CAP)
		fuzz_fail("a buffer was lost or linked twice: available",
			  (long long)asyncpool_available(pool));
	if ((rc = asyncpool_check(pool)))
		fuzz_fail("check", rc);
}

/* ---- ops 0-3: struct sizes ---- */

static bool any_nonzero(const unsigned char *p, size_t from, size_t to)
{
	for (size_t i = from; i < to; i++)
		if (p[i])
			return true;
	return false;
}

/*
 * Lay out a struct of `known` bytes whose size field says `value`: the
 * input's bytes after the size field, zeros after them.  Beyond 4096 the
 * struct ends at the guard page; else its first min(value, 4096) bytes
 * do (rounded up to 16, the struct's alignment), so that reading past
 * what size allows faults.
 */
static unsigned char *lay_struct(size_t known, uint64_t value, const uint8_t *body, size_t len,
				 bool *tail_nonzero)
{
	size_t span = value > STRUCT_MAX ? known : (value > known ? (size_t)value : known);
	unsigned char *s;

	span = (span + 15) & ~(size_t)15;       /* the struct's alignment */
	s = at_guard(span, 0);

	if (len > span - sizeof(size_t))
		len = span - sizeof(size_t);
	memcpy(s + sizeof(size_t), body, len);
	memcpy(s, &(size_t){ (size_t)value }, sizeof(size_t));
	*tail_nonzero = value > known && value <= STRUCT_MAX && any_nonzero(s, known, (size_t)value);
	return s;
}

static void check_size_rc(const char *fn, uint64_t value, bool tail_nonzero, int rc)
{
	if (value > STRUCT_MAX && rc != -E2BIG)
		fuzz_fail(fn, rc);                      /* must be -E2BIG */
	if (value <= STRUCT_MAX && rc == -E2BIG)
		fuzz_fail(fn, rc);                      /* E2BIG only beyond 4096 */
	if (tail_nonzero && rc != -EINVAL)
		fuzz_fail(fn, rc);                      /* unknown non-zero bytes */
	if (value < sizeof(size_t) && rc != -EINVAL)
		fuzz_fail(fn, rc);                      /* not even the size field */
}

static void op_slab(uint64_t value, const uint8_t *body, size_t len)
{
	bool tail;
	struct asyncpool_slab_options *o = (void *)lay_struct(sizeof(*o), value, body, len, &tail);
	struct asyncpool_slab *slab;
	int rc;

	/* small geometry: the size handling is the point, not the memory */
	o->buffer_size = (size_t)64 << (o->buffer_size & 3);
	o->buffer_count = 1 + (o->buffer_count & 15);
	rc = asyncpool_slab_create(o, &slab);
	check_size_rc("slab_create", value, tail, rc);
	if (rc == 0)
		asyncpool_slab_unref(slab);
}

static void op_opts(uint64_t value, const uint8_t *body, size_t len)
{
	bool tail;
	struct asyncpool_options *o = (void *)lay_struct(sizeof(*o), value, body, len, &tail);
	struct asyncpool *pool;
	int rc = asyncpool_create_opts(region, o, &pool);

	check_size_rc("create_opts", value, tail, rc);
	if (rc == 0 && (rc = asyncpool_destroy(pool)))
		fuzz_fail("destroy", rc);
}

static void op_shared(uint64_t value, const uint8_t *body, size_t len)
{
	bool tail;
	struct asyncpool_shared_options *o = (void *)lay_struct(sizeof(*o), value, body, len, &tail);
	struct asyncpool_shared *sp;
	int rc;

	o->buffer_size = (size_t)64 << (o->buffer_size & 3);
	o->buffer_count = 1 + (o->buffer_count & 15);
	o->name = NULL;         /* a pointer: not the fuzzer's to choose */
	rc = asyncpool_shared_create(o, &sp);
	check_size_rc("shared_create", value, tail, rc);
	if (rc == 0)
		asyncpool_shared_close(sp);
}

static void op_stats(uint64_t value, const uint8_t *body, size_t len)
{
	bool tail;
	struct asyncpool_stats *s = (void *)lay_struct(sizeof(*s), value, body, len, &tail);
	unsigned char before[sizeof(*s)];
	int rc;

	memcpy(before, s, sizeof(before));
	rc = asyncpool_stats(uncached, s);
	check_size_rc("stats", value, false, rc);
	if (rc && memcmp(before, s, sizeof(before)))
		fuzz_fail("stats refused but wrote", rc);
	if (rc == 0 && s->capacity != CAP)
		fuzz_fail("stats capacity", s->capacity);
}

/* ---- ops 4-6: counts ---- */

static void op_acquire_bulk(struct asyncpool *pool, bool null_pool, uint64_t value,
			    unsigned int room)
{
	unsigned int n = (unsigned int)value;
	struct asyncpool_lease *l = at_guard(room * sizeof(*l), 0xa5);
	unsigned char before[ROOM_MAX * sizeof(*l)];
	bool seen[CAP] = { false };
	int rc;

	if (!null_pool && n <= CAP && n > room)
		return;         /* a valid n that the array cannot hold: the caller's bug */
	memcpy(before, l, room * sizeof(*l));
	rc = asyncpool_acquire_bulk(null_pool ? NULL : pool, l, n);
	if (null_pool || n > CAP) {
		if (rc != -EINVAL)
			fuzz_fail("acquire_bulk: bad n or pool, not EINVAL", rc);
		if (memcmp(before, l, room * sizeof(*l)))
			fuzz_fail("acquire_bulk: refused but wrote", n);
		return;
	}
	if (rc)
		fuzz_fail("acquire_bulk", rc);  /* CAP free: never empty here */
	for (unsigned int j = 0; j < n; j++) {
		uint32_t i = l[j].buffer_index;

		if (i >= CAP || seen[i] || !asyncpool_lease_held(&l[j]))
			fuzz_fail("acquire_bulk: a bad or repeated lease", i);
		seen[i] = true;
	}
	asyncpool_release_bulk(l, n);
	pool_whole(pool);
}

static void op_release_bulk(struct asyncpool *pool, uint64_t value, unsigned int room,
			    const uint8_t *recipe, size_t len)
{
	struct asyncpool_lease held[ROOM_MAX], *arr;
	unsigned int k = (unsigned int)(value % (room + 1));
	unsigned int m = len < room ? (unsigned int)len : room;
	int rc;

	if (k > CAP)
		k = CAP;
	if (k && (rc = asyncpool_acquire_bulk(pool, held, k)))
		fuzz_fail("acquire_bulk for release_bulk", rc);
	arr = at_guard(room * sizeof(*arr), 0);
	for (unsigned int j = 0; j < m; j++) {
		uint8_t b = recipe[j];

		if (b < 64 && k) {
			arr[j] = held[b % k];
		} else if (b >= 128 && k) {
			arr[j] = held[b % k];
			arr[j].buffer_index = CAP + b;  /* out of range */
		} else {
			memset(&arr[j], 0, sizeof(arr[j]));
		}
	}
	asyncpool_release_bulk(arr, m);
	for (unsigned int j = 0; j < m; j++)
		if (asyncpool_lease_held(&arr[j]))
			fuzz_fail("release_bulk left a lease held", j);
	/* the originals: released already by a copy, or now (a second
	 * release of a buffer is refused, never linked twice) */
	for (unsigned int j = 0; j < k; j++)
		asyncpool_lease_release(&held[j]);
	pool_whole(pool);
}

static void op_set_cache(uint64_t value)
{
	uint32_t n = (uint32_t)value;
	struct asyncpool *pool;
	int rc;

	if (asyncpool_create(region, &pool))
		fuzz_fail("create", 0);
	rc = asyncpool_set_cache(pool, n);
	if (n > CAP || n > ASYNCPOOL_CACHE_MAX ? rc != -EINVAL : rc != 0)
		fuzz_fail("set_cache", rc);
	if ((rc = asyncpool_destroy(pool)))
		fuzz_fail("destroy", rc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t value = 0;
	struct asyncpool *pool;
	unsigned int room;
	uint8_t op, flags;

	if (size < 11)
		return 0;
	setup_once();
	op = data[0];
	for (int i = 0; i < 8; i++)
		value |= (uint64_t)data[1 + i] << (8 * i);
	flags = data[9];
	pool = (flags & 1) ? cached : uncached;
	room = 1 + data[10] % ROOM_MAX;
	data += 11;
	size -= 11;
	switch (op % 7) {
	case 0: op_slab(value, data, size); break;
	case 1: op_opts(value, data, size); break;
	case 2: op_shared(value, data, size); break;
	case 3: op_stats(value, data, size); break;
	case 4: op_acquire_bulk(pool, flags & 2, value, room); break;
	case 5: op_release_bulk(pool, value, room, data, size); break;
	case 6: op_set_cache(value); break;
	}
	return 0;
}
