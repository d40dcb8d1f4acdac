/* SPDX-License-Identifier: MIT */
/*
 * Slabs: buffer_count x buffer_size bytes of page-aligned memory, on a
 * NUMA node, in huge pages, locked or prefaulted as asked.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef MPOL_BIND
#define MPOL_BIND 2
#endif
#ifndef MPOL_MF_STRICT
#define MPOL_MF_STRICT (1 << 0)
#endif
#ifndef MAP_HUGETLB
#define MAP_HUGETLB 0x40000
#endif
/* mbind takes a bitmask; nodes beyond this are refused as not existing. */
#define AP_MAX_NUMA_NODES 1024

#define SLAB_FLAGS (ASYNCPOOL_SLAB_HUGE_PREFER | ASYNCPOOL_SLAB_HUGE_REQUIRE | \
		    ASYNCPOOL_SLAB_MLOCK | ASYNCPOOL_SLAB_POPULATE)
/* The smallest options struct this library accepts: version 1, up to flags. */
#define SLAB_OPTS_V1 (offsetof(struct asyncpool_slab_options, flags) + sizeof(uint32_t))

static size_t system_page_size(void)
{
	long ps = sysconf(_SC_PAGESIZE);

	return ps > 0 ? (size_t)ps : 4096;
}

/* The default huge page size, from /proc/meminfo; 2 MiB if unreadable. */
static size_t huge_page_size(void)
{
	FILE *f = fopen("/proc/meminfo", "re");
	char line[128];
	size_t kb = 2048;

	if (!f)
		return kb * 1024;
	while (fgets(line, sizeof(line), f)) {
		unsigned long v;

		if (sscanf(line, "Hugepagesize: %lu kB", &v) == 1) {
			kb = v;
			break;
		}
	}
	fclose(f);
	return kb * 1024;
}

static bool numa_node_exists(int node)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/sys/devices/system/node/node%d", node);
	if (stat(path, &st) == 0)
		return true;
	/* Without sysfs (or NUMA support) there is exactly one node: 0. */
	if (stat("/sys/devices/system/node", &st) != 0)
		return node == 0;
	return false;
}

static int bind_to_node(void *base, size_t len, int node)
{
	unsigned long mask[AP_MAX_NUMA_NODES / (8 * sizeof(unsigned long))] = { 0 };
	const size_t bits = 8 * sizeof(unsigned long);

	mask[node / bits] |= 1ul << (node % bits);
	if (syscall(SYS_mbind, base, len, MPOL_BIND, mask,
		    (unsigned long)AP_MAX_NUMA_NODES + 1, MPOL_MF_STRICT) == 0)
		return 0;
	switch (errno) {
	case EINVAL:
		return -EINVAL;
	case ENOSYS:
		return -EOPNOTSUPP;
	case EPERM:
		return -EPERM;
	default:
		return -ENOMEM;
	}
}

/* Touch every page so that it is allocated now, on the bound node. */
static void prefault(void *base, size_t len, size_t page)
{
	volatile char *p = base;

	for (size_t off = 0; off < len; off += page)
		p[off] = 0;
}

/* length bytes of private anonymous memory in whole pages of page bytes. */
static int map_anonymous(size_t length, size_t page, int extra_flags, void **base,
			 size_t *map_length)
{
	if (length > SIZE_MAX - page)
		return -EOVERFLOW;
	*map_length = ap_align_up(length, page);
	*base = mmap(NULL, *map_length, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | extra_flags, -1, 0);
	return *base == MAP_FAILED ? -ENOMEM : 0;
}

static int check_geometry(size_t buffer_size, uint32_t buffer_count, size_t *length)
{
	if (buffer_size == 0 || buffer_count == 0)
		return -EINVAL;
	if (buffer_size % AP_BUFFER_ALIGN)
		return -EINVAL;
	if (__builtin_mul_overflow(buffer_size, (size_t)buffer_count, length))
		return -EOVERFLOW;
	return 0;
}

/* A slab of buffer_count x buffer_size at base (length bytes, in pages of
 * page bytes) with one reference, or NULL without memory. */
static struct asyncpool_slab *slab_new(void *base, size_t buffer_size, uint32_t buffer_count,
				       size_t length, size_t page)
{
	struct asyncpool_slab *slab = calloc(1, sizeof(*slab));

	if (slab) {
		atomic_init(&slab->refs, 1);
		slab->base = base;
		slab->buffer_size = buffer_size;
		slab->buffer_count = buffer_count;
		slab->length = length;
		slab->page_size = page;
	}
	return slab;
}

AP_EXPORT int asyncpool_slab_create(const struct asyncpool_slab_options *opts,
				    struct asyncpool_slab **out)
{
	struct asyncpool_slab_options o;
	struct asyncpool_slab *slab;
	size_t length, map_length, page;
	void *base = MAP_FAILED;
	int rc;

	if (!out)
		return -EINVAL;
	*out = NULL;
	rc = ap_opts_copy(&o, sizeof(o), opts, SLAB_OPTS_V1);
	if (rc)
		return rc;
	if (o.reserved || (o.flags & ~SLAB_FLAGS))
		return -EINVAL;
	if ((o.flags & ASYNCPOOL_SLAB_HUGE_PREFER) && (o.flags & ASYNCPOOL_SLAB_HUGE_REQUIRE))
		return -EINVAL;
	if (o.numa_node < -1)
		return -EINVAL;
	if (o.numa_node >= AP_MAX_NUMA_NODES || (o.numa_node >= 0 && !numa_node_exists(o.numa_node)))
		return -EINVAL;
	rc = check_geometry(o.buffer_size, o.buffer_count, &length);
	if (rc)
		return rc;

	if (o.flags & (ASYNCPOOL_SLAB_HUGE_PREFER | ASYNCPOOL_SLAB_HUGE_REQUIRE)) {
		page = huge_page_size();
		rc = map_anonymous(length, page, MAP_HUGETLB, &base, &map_length);
		if (rc == -EOVERFLOW || (rc && (o.flags & ASYNCPOOL_SLAB_HUGE_REQUIRE)))
			return rc;
	}
	if (base == MAP_FAILED) {
		page = system_page_size();
		rc = map_anonymous(length, page, 0, &base, &map_length);
		if (rc)
			return rc;
#ifdef MADV_HUGEPAGE
		/* Preferred but not reserved: let THP back it where it can. */
		if (o.flags & ASYNCPOOL_SLAB_HUGE_PREFER)
			(void)madvise(base, map_length, MADV_HUGEPAGE);
#endif
	}

	if (o.numa_node >= 0) {
		rc = bind_to_node(base, map_length, o.numa_node);
		if (rc)
			goto fail;
	}
	if (o.flags & ASYNCPOOL_SLAB_MLOCK) {
		if (mlock(base, map_length) != 0) {
			rc = -ENOMEM;
			goto fail;
		}
	} else if (o.flags & ASYNCPOOL_SLAB_POPULATE) {
		prefault(base, map_length, page);
	}

	slab = slab_new(base, o.buffer_size, o.buffer_count, length, page);
	if (!slab) {
		rc = -ENOMEM;
		goto fail;
	}
	slab->map_length = map_length;
	*out = slab;
	return 0;
fail:
	munmap(base, map_length);
	return rc;
}

AP_EXPORT int asyncpool_slab_wrap(void *base, size_t buffer_size, uint32_t buffer_count,
				  void (*destroy)(void *ctx), void *ctx,
				  struct asyncpool_slab **out)
{
	struct asyncpool_slab *slab;
	size_t length;
	int rc;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!base || ((uintptr_t)base % AP_BUFFER_ALIGN))
		return -EINVAL;
	rc = check_geometry(buffer_size, buffer_count, &length);
	if (rc)
		return rc;
	if (length > UINTPTR_MAX - (uintptr_t)base)
		return -EOVERFLOW;
	slab = slab_new(base, buffer_size, buffer_count, length, system_page_size());
	if (!slab)
		return -ENOMEM;
	slab->destroy = destroy;
	slab->destroy_ctx = ctx;
	*out = slab;
	return 0;
}

AP_EXPORT struct asyncpool_slab *asyncpool_slab_ref(struct asyncpool_slab *slab)
{
	if (slab)
		atomic_fetch_add_explicit(&slab->refs, 1, memory_order_relaxed);
	return slab;
}

AP_EXPORT void asyncpool_slab_unref(struct asyncpool_slab *slab)
{
	if (!slab || atomic_fetch_sub_explicit(&slab->refs, 1, memory_order_acq_rel) != 1)
		return;
	if (slab->map_length)
		munmap(slab->base, slab->map_length);
	else if (slab->destroy)
		slab->destroy(slab->destroy_ctx);
	free(slab);
}

AP_ACCESSOR(void *, asyncpool_slab_base, struct asyncpool_slab, base, NULL)

AP_ACCESSOR(size_t, asyncpool_slab_buffer_size, struct asyncpool_slab, buffer_size, 0)

AP_ACCESSOR(uint32_t, asyncpool_slab_buffer_count, struct asyncpool_slab, buffer_count, 0)

AP_ACCESSOR(size_t, asyncpool_slab_length, struct asyncpool_slab, length, 0)

AP_ACCESSOR(size_t, asyncpool_slab_page_size, struct asyncpool_slab, page_size, 0)
