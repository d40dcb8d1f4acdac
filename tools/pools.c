/* SPDX-License-Identifier: MIT */
/*
 * The pools and regions that the subcommands make for themselves: a
 * memory-proactor pool, a prefaulted region, a shared pool in one
 * MAP_SHARED mapping.
 */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include <asyncpool.h>
#include "tool.h"

int tool_memory_pool(struct asyncpool_proactor **p, struct asyncpool **pool,
		     size_t size, uint32_t count, uint32_t cache, bool populate)
{
	struct asyncpool_slab_options o;
	struct asyncpool_options po;
	struct asyncpool_slab *s;
	struct asyncpool_region *r;
	int rc;

	memset(&o, 0, sizeof(o));
	o.size = sizeof(o);
	o.buffer_size = size;
	o.buffer_count = count;
	o.numa_node = -1;
	o.flags = populate ? ASYNCPOOL_SLAB_POPULATE : 0;
	memset(&po, 0, sizeof(po));
	po.size = sizeof(po);
	po.cache_size = cache;
	rc = asyncpool_proactor_create_memory(p);
	if (rc)
		return rc;
	rc = asyncpool_slab_create(&o, &s);
	if (rc)
		goto fail_p;
	rc = asyncpool_proactor_register_slab(*p, s, ASYNCPOOL_ACCESS_READ, &r);
	asyncpool_slab_unref(s);
	if (rc)
		goto fail_p;
	rc = cache == TOOL_POOL_DEFAULT ? asyncpool_create(r, pool) :
					  asyncpool_create_opts(r, &po, pool);
	asyncpool_region_unref(r);
	if (rc)
		goto fail_p;
	return 0;
fail_p:
	asyncpool_proactor_destroy(*p);
	*p = NULL;
	return rc;
}

void tool_memory_pool_free(struct asyncpool_proactor *p, struct asyncpool *pool)
{
	asyncpool_destroy(pool);
	asyncpool_proactor_destroy(p);
}

struct asyncpool_region *tool_region(struct asyncpool_proactor *p, size_t size, uint32_t count,
				     uint32_t access, int *rc)
{
	struct asyncpool_slab_options o;
	struct asyncpool_slab *s;
	struct asyncpool_region *r = NULL;

	memset(&o, 0, sizeof(o));
	o.size = sizeof(o);
	o.buffer_size = size;
	o.buffer_count = count;
	o.numa_node = -1;
	o.flags = ASYNCPOOL_SLAB_POPULATE;
	*rc = asyncpool_slab_create(&o, &s);
	if (*rc)
		return NULL;
	*rc = asyncpool_proactor_register_slab(p, s, access, &r);
	asyncpool_slab_unref(s);
	return r;
}

static void no_destroy(void *ctx)
{
	(void)ctx;
}

int tool_shared_pool(struct tool_shared_pool *t, size_t head, uint32_t count)
{
	size_t bufs = ((size_t)count * 64 + 4095) & ~(size_t)4095;
	int rc;

	memset(t, 0, sizeof(*t));
	t->mem = MAP_FAILED;
	rc = asyncpool_shared_storage_size(count, &t->layout);
	if (rc)
		return rc;
	t->layout = (t->layout + 4095) & ~(size_t)4095;
	t->total = head + t->layout + bufs;
	t->mem = mmap(NULL, t->total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (t->mem == MAP_FAILED)
		return -ENOMEM;
	t->layout_mem = t->mem + head;
	if ((rc = asyncpool_proactor_create_memory(&t->p)) ||
	    (rc = asyncpool_slab_wrap(t->mem + head + t->layout, 64, count, no_destroy, NULL,
				      &t->slab)) ||
	    (rc = asyncpool_proactor_register_slab(t->p, t->slab, ASYNCPOOL_ACCESS_READ, &t->r)) ||
	    (rc = asyncpool_create_shared(t->layout_mem, t->layout, t->r, &t->pool)))
		return rc;
	return 0;
}

void tool_shared_pool_free(struct tool_shared_pool *t)
{
	if (t->pool)
		asyncpool_destroy(t->pool);
	if (t->r)
		asyncpool_region_unref(t->r);
	if (t->slab)
		asyncpool_slab_unref(t->slab);
	if (t->p)
		asyncpool_proactor_destroy(t->p);
	if (t->mem != MAP_FAILED)
		munmap(t->mem, t->total);
}
