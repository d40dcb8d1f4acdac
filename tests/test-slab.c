/* SPDX-License-Identifier: MIT */
/* Slabs: options, errors, geometry, huge pages, NUMA, wrapping, refs. */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <asyncpool.h>
#include "tap.h"
#include "testutil.h"

static struct asyncpool_slab_options opts(size_t bs, uint32_t n, int node, uint32_t flags)
{
	struct asyncpool_slab_options o;

	slab_options(&o, bs, n);
	o.numa_node = node;
	o.flags = flags;
	return o;
}

static long meminfo(const char *key)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[128];
	long v = -1;
	size_t k = strlen(key);

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, k) && line[k] == ':')
			v = strtol(line + k + 1, NULL, 10);
	fclose(f);
	return v;
}

static int destroyed;

static void unref_null(void *arg)
{
	(void)arg;
	asyncpool_slab_unref(NULL);
}
static void on_destroy(void *ctx)
{
	destroyed++;
	is_int((intptr_t)ctx, 42, "wrap: destroy gets its context");
}

static void test_errors(void)
{
	struct asyncpool_slab *s = (void *)1;
	struct asyncpool_slab_options o;
	struct {
		struct asyncpool_slab_options o;
		uint64_t future;
	} big;

	is_int(asyncpool_slab_create(NULL, &s), -EINVAL, "create: NULL options");
	ok(s == NULL, "create: out is NULL after a failure");
	o = opts(64, 1, -1, 0);
	is_int(asyncpool_slab_create(&o, NULL), -EINVAL, "create: NULL out");
	o = opts(0, 1, -1, 0);
	is_int(asyncpool_slab_create(&o, &s), -EINVAL, "create: zero buffer_size");
	o = opts(64, 0, -1, 0);
	is_int(asyncpool_slab_create(&o, &s), -EINVAL, "create: zero buffer_count");
	o = opts(100, 4, -1, 0);
	is_int(asyncpool_slab_create(&o, &s), -EINVAL, "create: buffer_size not a multiple of 64");
	o = opts((SIZE_MAX / 2) & ~(size_t)63, 4, -1, 0);
	is_int(asyncpool_slab_create(&o, &s), -EOVERFLOW, "create: size * count overflows");
	/* (2^62 + 64) x 4 wraps to 256 bytes: a slab of 256 bytes would
	 * claim 4 buffers of 4 EiB. */
	o = opts(((size_t)1 << 62) + 64, 4, -1, 0);
	is_int(asyncpool_slab_create(&o, &s), -EOVERFLOW, "create: size * count wraps to a small size");
	o = opts(SIZE_MAX & ~(size_t)63, 1, -1, 0);
	is_int(asyncpool_slab_create(&o, &s), -EOVERFLOW, "create: rounding to pages overflows");
	o = opts(64, 1, -1, 1u << 20);
	is_int(asyncpool_slab_create(&o, &s), -EINVAL, "create: unknown flag");
	o = opts(64, 1, -1, ASYNCPOOL_SLAB_HUGE_PREFER | ASYNCPOOL_SLAB_HUGE_REQUIRE);
	is_int(asyncpool_slab_create(&o, &s), -EINVAL, "create: huge prefer and require together");
	o = opts(64, 1, -1, 0);
	o.reserved = 1;
	is_int(asyncpool_slab_create(&o, &s), -EINVAL, "create: reserved field not zero");
	o = opts(64, 1, -1, 0);
	o.size = offsetof(struct asyncpool_slab_options, numa_node);
	is_int(asyncpool_slab_create(&o, &s), -EINVAL, "create: options size too small");
	o = opts(64, 1, -2, 0);
	is_int(asyncpool_slab_create(&o, &s), -EINVAL, "create: numa_node -2");
	o = opts(64, 1, 1023, 0);
	is_int(asyncpool_slab_create(&o, &s), -EINVAL, "create: numa node 1023 does not exist");
	o = opts(64, 1, 1 << 20, 0);
	is_int(asyncpool_slab_create(&o, &s), -EINVAL, "create: numa node 2^20 does not exist");

	memset(&big, 0, sizeof(big));
	big.o = opts(64, 2, -1, 0);
	big.o.size = sizeof(big);
	big.future = 7;
	is_int(asyncpool_slab_create(&big.o, &s), -EINVAL, "create: unknown non-zero tail of a larger struct");
	big.future = 0;
	is_int(asyncpool_slab_create(&big.o, &s), 0, "create: larger struct with a zero tail");
	asyncpool_slab_unref(s);

	is_int(asyncpool_slab_wrap(NULL, 64, 1, NULL, NULL, &s), -EINVAL, "wrap: NULL base");
	is_int(asyncpool_slab_wrap((void *)0x1001, 64, 1, NULL, NULL, &s), -EINVAL, "wrap: misaligned base");
	is_int(asyncpool_slab_wrap((void *)0x1000, 0, 1, NULL, NULL, &s), -EINVAL, "wrap: zero buffer_size");
	is_int(asyncpool_slab_wrap((void *)0x1000, 64, 0, NULL, NULL, &s), -EINVAL, "wrap: zero buffer_count");
	is_int(asyncpool_slab_wrap((void *)0x1000, SIZE_MAX & ~(size_t)63, 2, NULL, NULL, &s),
	       -EOVERFLOW, "wrap: size overflow");
	is_int(asyncpool_slab_wrap((void *)0x1000, ((size_t)1 << 62) + 64, 4, NULL, NULL, &s),
	       -EOVERFLOW, "wrap: size * count wraps to a small size");
	is_int(asyncpool_slab_wrap((void *)(UINTPTR_MAX & ~(uintptr_t)63), 64, 2, NULL, NULL, &s),
	       -EOVERFLOW, "wrap: an end past the top of the address space");
	is_int(asyncpool_slab_wrap((void *)0x1000, 64, 1, NULL, NULL, NULL), -EINVAL, "wrap: NULL out");

	ok(asyncpool_slab_base(NULL) == NULL && asyncpool_slab_buffer_size(NULL) == 0 &&
	   asyncpool_slab_buffer_count(NULL) == 0 && asyncpool_slab_length(NULL) == 0 &&
	   asyncpool_slab_page_size(NULL) == 0, "accessors of NULL are NULL or zero");
	ok(asyncpool_slab_ref(NULL) == NULL, "ref(NULL) is NULL");
	ok(tap_survives(unref_null, NULL), "unref(NULL) is harmless");
}

static void test_geometry(void)
{
	struct asyncpool_slab_options o = opts(4096, 33, -1, ASYNCPOOL_SLAB_POPULATE);
	struct asyncpool_slab *s = NULL;
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	unsigned char *b;

	is_int(asyncpool_slab_create(&o, &s), 0, "create 33 x 4096, populated");
	b = asyncpool_slab_base(s);
	ok(b && ((uintptr_t)b % page) == 0, "base is page aligned");
	is_int(asyncpool_slab_buffer_size(s), 4096, "buffer_size");
	is_int(asyncpool_slab_buffer_count(s), 33, "buffer_count");
	is_int(asyncpool_slab_length(s), 33 * 4096, "length");
	is_int(asyncpool_slab_page_size(s), page, "page size is the system's");
	memset(b, 0xa5, 33 * 4096);
	ok(b[33 * 4096 - 1] == 0xa5, "the whole length is writable");
	ok(asyncpool_slab_ref(s) == s, "ref returns the slab");
	asyncpool_slab_unref(s);
	ok(b[0] == 0xa5, "memory stays while a reference is held");
	asyncpool_slab_unref(s);

	o = opts(192, 5, -1, 0);
	is_int(asyncpool_slab_create(&o, &s), 0, "create 5 x 192");
	ok(((uintptr_t)asyncpool_slab_base(s) + 192) % 64 == 0, "buffers are 64-byte aligned");
	asyncpool_slab_unref(s);
}

static void test_huge(void)
{
	struct asyncpool_slab_options o = opts(4096, 16, -1, ASYNCPOOL_SLAB_HUGE_REQUIRE);
	struct asyncpool_slab *s = NULL;
	long huge_free = meminfo("HugePages_Free");
	long huge_kb = meminfo("Hugepagesize");
	int rc = asyncpool_slab_create(&o, &s);

	if (huge_free == 0) {
		is_int(rc, -ENOMEM, "huge pages required, none reserved: -ENOMEM");
		ok(s == NULL, "huge pages required: no slab");
	} else {
		is_int(rc, 0, "huge pages required, %ld reserved: created", huge_free);
		is_int(asyncpool_slab_page_size(s), huge_kb * 1024, "page size is the huge page size");
		asyncpool_slab_unref(s);
	}

	o = opts(4096, 16, -1, ASYNCPOOL_SLAB_HUGE_PREFER | ASYNCPOOL_SLAB_POPULATE);
	is_int(asyncpool_slab_create(&o, &s), 0, "huge pages preferred: created");
	if (huge_free == 0)
		is_int(asyncpool_slab_page_size(s), sysconf(_SC_PAGESIZE),
		       "huge pages preferred, none reserved: normal pages");
	else
		is_int(asyncpool_slab_page_size(s), huge_kb * 1024, "huge pages preferred: huge pages");
	memset(asyncpool_slab_base(s), 1, asyncpool_slab_length(s));
	asyncpool_slab_unref(s);
}

static void test_numa_mlock(void)
{
	struct asyncpool_slab_options o = opts(4096, 8, 0, ASYNCPOOL_SLAB_POPULATE);
	struct asyncpool_slab *s = NULL;
	int rc;

	rc = asyncpool_slab_create(&o, &s);
	if (rc == -EOPNOTSUPP || rc == -EPERM) {
		skip(1, "mbind refused here (%d)", rc);
	} else {
		is_int(rc, 0, "bound to NUMA node 0");
		asyncpool_slab_unref(s);
	}

	o = opts(4096, 8, -1, ASYNCPOOL_SLAB_MLOCK);
	rc = asyncpool_slab_create(&o, &s);
	is_int(rc, 0, "mlock of 32 KiB");
	if (!rc && tap_sanitizer()) {
		skip(1, "%s intercepts mlock() and locks nothing", tap_sanitizer());
		asyncpool_slab_unref(s);
	} else if (!rc) {
		unsigned char vec[8];

		ok(mincore(asyncpool_slab_base(s), 8 * 4096, vec) == 0 && (vec[0] & 1) && (vec[7] & 1),
		   "locked pages are resident");
		asyncpool_slab_unref(s);
	}
}

static void test_wrap(void)
{
	void *mem = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct asyncpool_slab *s = NULL;

	is_int(asyncpool_slab_wrap(mem, 1024, 64, on_destroy, (void *)(intptr_t)42, &s), 0, "wrap 64 x 1024");
	ok(asyncpool_slab_base(s) == mem, "wrap: base is the caller's");
	is_int(asyncpool_slab_length(s), 65536, "wrap: length");
	asyncpool_slab_ref(s);
	asyncpool_slab_unref(s);
	is_int(destroyed, 0, "wrap: destroy not called while referenced");
	asyncpool_slab_unref(s);
	is_int(destroyed, 1, "wrap: destroy called once on the last unref");
	munmap(mem, 1 << 16);

	is_int(asyncpool_slab_wrap((void *)0x10000, 64, 1, NULL, NULL, &s), 0, "wrap: no destroy callback");
	asyncpool_slab_unref(s);
}

int main(void)
{
	test_errors();
	test_geometry();
	test_huge();
	test_numa_mlock();
	test_wrap();
	return done_testing();
}
