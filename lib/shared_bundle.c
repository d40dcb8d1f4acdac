/* SPDX-License-Identifier: MIT */
/*
 * A shared pool in one object.  The shared memory holds the pool layout
 * and then, from the first 4096-byte boundary after it, the buffers:
 *
 *   0                          pool layout v1 (storage_size bytes)
 *   align_up(storage_size, 4096)  buffer_count x buffer_size bytes
 *
 * A peer learns the geometry from the header, which it validates like
 * asyncpool_open_shared() does, before it maps a slab over the buffers.
 */
#include "pool.h"
#include "pool_check.h"

#include <stdlib.h>
#include <sys/mman.h>

/* Where the buffers start: fixed, not the page size of this machine. */
#define AP_SHARED_BUFFER_ALIGN 4096u
#define AP_SHARED_FLAGS ASYNCPOOL_SHARED_HUGE_PREFER
/* The largest options size read (a page, as copy_struct_from_user). */
#define AP_SHARED_OPTS_MAX 4096u

struct asyncpool_shared {
	struct asyncpool_shm shm;
	struct asyncpool_proactor *proactor;
	struct asyncpool_region *region;
	struct asyncpool *pool;
};

/* Bytes before the buffers, and all the bytes, of count x bs. */
static int bundle_geometry(uint32_t count, size_t bs, size_t *buffers_off, size_t *total)
{
	size_t storage, bytes;
	int rc = ap_layout_size(count, true, &storage);

	if (rc)
		return rc;
	*buffers_off = ap_align_up(storage, AP_SHARED_BUFFER_ALIGN);
	if (__builtin_mul_overflow(bs, (size_t)count, &bytes) ||
	    __builtin_add_overflow(*buffers_off, bytes, total))
		return -EOVERFLOW;
	return 0;
}

/* Free the parts in the order they depend on each other; shm last. */
static void bundle_free(struct asyncpool_shared *sp)
{
	if (sp->pool)
		asyncpool_destroy(sp->pool);
	asyncpool_region_unref(sp->region);
	if (sp->proactor)
		asyncpool_proactor_destroy(sp->proactor);
	asyncpool_shm_close(&sp->shm);
	free(sp);
}

/* Slab, region and pool over sp->shm, whose geometry has been checked. */
static int bundle_build(struct asyncpool_shared *sp, uint32_t count, size_t bs,
			size_t buffers_off, bool create)
{
	struct asyncpool_slab *slab;
	size_t storage;
	int rc;

	rc = ap_layout_size(count, true, &storage);
	if (rc)
		return rc;
	rc = asyncpool_slab_wrap((char *)sp->shm.base + buffers_off, bs, count,
				 NULL, NULL, &slab);
	if (rc)
		return rc;
	rc = asyncpool_proactor_create_memory(&sp->proactor);
	if (rc) {
		asyncpool_slab_unref(slab);
		return rc;
	}
	rc = asyncpool_proactor_register_slab(sp->proactor, slab, ASYNCPOOL_ACCESS_READ,
					      &sp->region);
	asyncpool_slab_unref(slab);
	if (rc)
		return rc;
	if (create)
		return asyncpool_create_shared(sp->shm.base, storage, sp->region, &sp->pool);
	return asyncpool_open_shared(sp->shm.base, storage, sp->region, &sp->pool);
}

AP_EXPORT int asyncpool_shared_create(const struct asyncpool_shared_options *opts,
				      struct asyncpool_shared **out)
{
	struct asyncpool_shared_options o;
	struct asyncpool_shared *sp;
	size_t off, total;
	int rc;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!opts || opts->size < sizeof(o))
		return -EINVAL;
	if (opts->size > AP_SHARED_OPTS_MAX)
		return -E2BIG;
	if (opts->size > sizeof(o) && !ap_tail_is_zero(opts, sizeof(o), opts->size))
		return -EINVAL;
	memcpy(&o, opts, sizeof(o));
	if (o.reserved || (o.flags & ~AP_SHARED_FLAGS) || (o.mode & ~0777u))
		return -EINVAL;
	if (!o.name && o.mode)
		return -EINVAL;
	if (o.name && (o.flags & ASYNCPOOL_SHARED_HUGE_PREFER))
		return -EINVAL;
	if (o.buffer_size == 0 || o.buffer_size % AP_BUFFER_ALIGN)
		return -EINVAL;
	rc = bundle_geometry(o.buffer_count, o.buffer_size, &off, &total);
	if (rc)
		return rc;
	sp = calloc(1, sizeof(*sp));
	if (!sp)
		return -ENOMEM;
	sp->shm.fd = -1;
	if (o.name)
		rc = asyncpool_shm_create_named(o.name, total, (mode_t)o.mode, &sp->shm);
	else
		rc = asyncpool_shm_create(total, (o.flags & ASYNCPOOL_SHARED_HUGE_PREFER) ?
					  ASYNCPOOL_SHM_HUGE_PREFER : 0, &sp->shm);
	if (rc) {
		free(sp);
		return rc;
	}
	rc = bundle_build(sp, o.buffer_count, o.buffer_size, off, true);
	if (rc) {
		bundle_free(sp);
		if (o.name)
			asyncpool_shm_unlink_named(o.name);
		return rc;
	}
	*out = sp;
	return 0;
}

/* Open the pool in sp->shm, which a peer made: trust nothing in it. */
static int bundle_open(struct asyncpool_shared *sp)
{
	struct ap_pool_header hdr;
	size_t off, total;
	int rc;

	rc = ap_header_check(sp->shm.base, sp->shm.size, true, &hdr);
	if (rc)
		return rc;
	if (hdr.buffer_size > SIZE_MAX)
		return -EBADMSG;
	rc = bundle_geometry(hdr.buffer_count, (size_t)hdr.buffer_size, &off, &total);
	if (rc || total > sp->shm.size)
		return -EBADMSG;
	return bundle_build(sp, hdr.buffer_count, (size_t)hdr.buffer_size, off, false);
}

static int bundle_open_common(int fd, const char *name, uint32_t flags,
			      struct asyncpool_shared **out)
{
	struct asyncpool_shared *sp;
	int rc;

	if (!out)
		return -EINVAL;
	*out = NULL;
	sp = calloc(1, sizeof(*sp));
	if (!sp)
		return -ENOMEM;
	sp->shm.fd = -1;
	rc = name ? asyncpool_shm_open_named_flags(name, flags, &sp->shm) :
		    asyncpool_shm_open_fd_flags(fd, flags, &sp->shm);
	if (rc) {
		free(sp);
		return rc;
	}
	rc = bundle_open(sp);
	if (rc) {
		bundle_free(sp);
		return rc;
	}
	*out = sp;
	return 0;
}

AP_EXPORT int asyncpool_shared_open_fd_flags(int fd, uint32_t flags,
					     struct asyncpool_shared **out)
{
	return bundle_open_common(fd, NULL, flags, out);
}

AP_EXPORT int asyncpool_shared_open_fd(int fd, struct asyncpool_shared **out)
{
	return bundle_open_common(fd, NULL, 0, out);
}

AP_EXPORT int asyncpool_shared_open_named_flags(const char *name, uint32_t flags,
						struct asyncpool_shared **out)
{
	if (!name) {
		if (out)
			*out = NULL;
		return -EINVAL;
	}
	return bundle_open_common(-1, name, flags, out);
}

AP_EXPORT int asyncpool_shared_open_named(const char *name, struct asyncpool_shared **out)
{
	return asyncpool_shared_open_named_flags(name, 0, out);
}

AP_EXPORT void asyncpool_shared_close(struct asyncpool_shared *sp)
{
	if (sp)
		bundle_free(sp);
}

AP_EXPORT struct asyncpool *asyncpool_shared_pool(const struct asyncpool_shared *sp)
{
	return sp ? sp->pool : NULL;
}

AP_EXPORT struct asyncpool_region *asyncpool_shared_region(const struct asyncpool_shared *sp)
{
	return sp ? sp->region : NULL;
}

AP_EXPORT int asyncpool_shared_fd(const struct asyncpool_shared *sp)
{
	return sp ? sp->shm.fd : -EINVAL;
}

AP_EXPORT const struct asyncpool_shm *asyncpool_shared_shm(const struct asyncpool_shared *sp)
{
	return sp ? &sp->shm : NULL;
}
