/* SPDX-License-Identifier: MIT */
/*
 * A shared pool in one object.  The shared memory holds the pool layout
 * and then, from the first 4096-byte boundary after it, the buffers:
 *
 *   0                          pool layout (storage_size bytes)
 *   align_up(storage_size, 4096)  buffer_count x buffer_size bytes
 *
 * A peer learns the geometry from the header, which it validates like
 * asyncpool_open_shared() does, before it maps a slab over the buffers.
 *
 * The buffers are registered with the caller's proactor (an io_uring
 * one gives the pool's leases fixed indices), or with a memory proactor
 * of our own.  The slab owns the mapping: it is unmapped with the last
 * reference to the slab, so that a region the caller registered from
 * it stays valid after asyncpool_shared_close().
 */
#include "pool_internal.h"
#include "pool_check.h"

#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define AP_SHARED_FLAGS (ASYNCPOOL_SHARED_HUGE_PREFER | ASYNCPOOL_SHARED_CHANNEL_DROP)

/* The smallest options struct this library accepts: the first version's. */
#define SHARED_OPTS_V1 (offsetof(struct asyncpool_shared_options, reserved) + sizeof(uint32_t))

struct asyncpool_shared {
	struct asyncpool_shm shm;
	struct asyncpool_proactor *proactor;    /* ours, or NULL */
	struct asyncpool_region *region;
	struct asyncpool *pool;
	struct asyncpool_slab *slab;            /* set: it owns the mapping */
};

/* The slab's destroy: unmap (the fd is the bundle's, closed at close). */
static void bundle_unmap(void *ctx)
{
	struct asyncpool_shm *map = ctx;

	asyncpool_shm_close(map);
	free(map);
}

/* Bytes before the buffers, and all the bytes, of count x bs and channels x capacity. */
static int bundle_geometry(uint32_t count, size_t bs, uint32_t channels, uint32_t capacity,
			   size_t *buffers_off, size_t *total)
{
	uint64_t off, all;

	if (count == 0 || count > ASYNCPOOL_MAX_BUFFERS || !ap_channels_ok(channels, capacity))
		return -EINVAL;
	if (!ap_bundle_geometry(count, bs, channels, capacity, &off, &all) || all > SIZE_MAX)
		return -EOVERFLOW;
	*buffers_off = (size_t)off;
	*total = (size_t)all;
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
	if (sp->slab) {
		if (sp->shm.fd >= 0)
			close(sp->shm.fd);
		asyncpool_slab_unref(sp->slab);
	} else {
		asyncpool_shm_close(&sp->shm);
	}
	free(sp);
}

/* Slab, region and pool over sp->shm, whose geometry has been checked. */
static int bundle_build(struct asyncpool_shared *sp, struct asyncpool_proactor *p,
			uint32_t count, size_t bs, uint32_t channels, uint32_t capacity,
			uint32_t chan_flags, size_t buffers_off, bool create, bool reclaim)
{
	struct asyncpool_shm *map;
	size_t storage;
	int rc;

	rc = ap_layout_size(count, true, channels, capacity, &storage);
	if (rc)
		return rc;
	map = malloc(sizeof(*map));
	if (!map)
		return -ENOMEM;
	*map = sp->shm;
	map->fd = -1;
	rc = asyncpool_slab_wrap((char *)sp->shm.base + buffers_off, bs, count,
				 bundle_unmap, map, &sp->slab);
	if (rc) {
		free(map);
		return rc;
	}
	if (!p) {
		rc = asyncpool_proactor_create_memory(&sp->proactor);
		if (rc)
			return rc;
		p = sp->proactor;
	}
	rc = asyncpool_proactor_register_slab(p, sp->slab, ASYNCPOOL_ACCESS_READ, &sp->region);
	if (rc)
		return rc;
	if (create)
		rc = ap_create_shared(sp->shm.base, storage, sp->region, channels, capacity,
				      chan_flags, &sp->pool);
	else
		rc = asyncpool_open_shared(sp->shm.base, storage, sp->region, &sp->pool);
	if (rc)
		return rc;
	/* An attachment of our own (attach.c), then what the dead left. */
	rc = ap_attach(sp->pool, sp->shm.fd);
	if (rc)
		return rc;
	if (reclaim)
		(void)ap_reclaim(sp->pool);
	return 0;
}

AP_EXPORT int asyncpool_shared_create(const struct asyncpool_shared_options *opts,
				      struct asyncpool_shared **out)
{
	return asyncpool_shared_create_proactor(opts, NULL, out);
}

/* Copy the caller's options in and check them; the layout's geometry. */
static int options_in(struct asyncpool_shared_options *o,
		      const struct asyncpool_shared_options *opts, size_t *off, size_t *total)
{
	int rc = ap_opts_copy(o, sizeof(*o), opts, SHARED_OPTS_V1);

	if (rc)
		return rc;
	if (o->reserved || (o->flags & ~AP_SHARED_FLAGS) || (o->mode & ~0777u))
		return -EINVAL;
	if (!o->name && o->mode)
		return -EINVAL;
	if (o->name && (o->flags & ASYNCPOOL_SHARED_HUGE_PREFER))
		return -EINVAL;
	if (o->buffer_size == 0 || o->buffer_size % AP_BUFFER_ALIGN)
		return -EINVAL;
	/* An item's span is 32-bit offset and length (pool_layout.h). */
	if (o->channels && o->buffer_size > UINT32_MAX)
		return -EINVAL;
	if (!o->channels && (o->flags & ASYNCPOOL_SHARED_CHANNEL_DROP))
		return -EINVAL;
	return bundle_geometry(o->buffer_count, o->buffer_size, o->channels,
			       o->channel_capacity, off, total);
}

/* A new shared pool of checked options o, its layout at 0 and its
 * buffers at off, total bytes in all. */
static int bundle_create(const struct asyncpool_shared_options *o, size_t off, size_t total,
			 struct asyncpool_proactor *p, struct asyncpool_shared **out)
{
	struct asyncpool_shared *sp = calloc(1, sizeof(*sp));
	int rc;

	if (!sp)
		return -ENOMEM;
	sp->shm.fd = -1;
	if (o->name)
		rc = asyncpool_shm_create_named(o->name, total, (mode_t)o->mode, &sp->shm);
	else
		rc = asyncpool_shm_create(total, (o->flags & ASYNCPOOL_SHARED_HUGE_PREFER) ?
					  ASYNCPOOL_SHM_HUGE_PREFER : 0, &sp->shm);
	if (rc) {
		free(sp);
		return rc;
	}
	rc = bundle_build(sp, p, o->buffer_count, o->buffer_size, o->channels,
			  o->channel_capacity,
			  (o->flags & ASYNCPOOL_SHARED_CHANNEL_DROP) ? AP_POOL_F_CHAN_DROP : 0, off,
			  true, false);
	if (rc) {
		bundle_free(sp);
		if (o->name)
			asyncpool_shm_unlink_named(o->name);
		return rc;
	}
	*out = sp;
	return 0;
}

AP_EXPORT int asyncpool_shared_create_proactor(const struct asyncpool_shared_options *opts,
					       struct asyncpool_proactor *p,
					       struct asyncpool_shared **out)
{
	struct asyncpool_shared_options o;
	size_t off, total;
	int rc;

	if (!out)
		return -EINVAL;
	*out = NULL;
	rc = options_in(&o, opts, &off, &total);
	if (rc == 0)
		rc = bundle_create(&o, off, total, p, out);
	return rc;
}

/* Open the pool in sp->shm, which a peer made: trust nothing in it. */
static int bundle_open(struct asyncpool_shared *sp, struct asyncpool_proactor *p, bool reclaim)
{
	struct ap_pool_header hdr;
	size_t off, total;
	int rc;

	rc = ap_header_check(sp->shm.base, sp->shm.size, true, &hdr);
	if (rc)
		return rc;
	if (hdr.buffer_size > SIZE_MAX)
		return -EBADMSG;
	rc = bundle_geometry(hdr.buffer_count, (size_t)hdr.buffer_size, hdr.channel_count,
			     hdr.channel_capacity, &off, &total);
	if (rc || total > sp->shm.size)
		return -EBADMSG;
	return bundle_build(sp, p, hdr.buffer_count, (size_t)hdr.buffer_size, hdr.channel_count,
			    hdr.channel_capacity, 0, off, false, reclaim);
}

/* The smallest open options struct this library accepts: up to proactor. */
#define OPEN_OPTS_V1 (offsetof(struct asyncpool_shared_open_options, reserved))

/* Open the object of checked options o and build the handle over it. */
static int bundle_open_checked(const struct asyncpool_shared_open_options *o,
			       struct asyncpool_shared **out)
{
	uint32_t shm_flags = o->flags & ~ASYNCPOOL_SHARED_OPEN_NO_RECLAIM;
	struct asyncpool_shared *sp;
	int rc;

	sp = calloc(1, sizeof(*sp));
	if (!sp)
		return -ENOMEM;
	sp->shm.fd = -1;
	rc = o->name ? asyncpool_shm_open_named_flags(o->name, shm_flags, &sp->shm) :
		       asyncpool_shm_open_fd_flags(o->fd, shm_flags, &sp->shm);
	if (rc) {
		free(sp);
		return rc;
	}
	rc = bundle_open(sp, o->proactor, !(o->flags & ASYNCPOOL_SHARED_OPEN_NO_RECLAIM));
	if (rc) {
		bundle_free(sp);
		return rc;
	}
	*out = sp;
	return 0;
}

AP_EXPORT int asyncpool_shared_open(const struct asyncpool_shared_open_options *opts,
				    struct asyncpool_shared **out)
{
	struct asyncpool_shared_open_options o;
	int rc;

	if (!out)
		return -EINVAL;
	*out = NULL;
	rc = ap_opts_copy(&o, sizeof(o), opts, OPEN_OPTS_V1);
	if (rc)
		return rc;
	for (size_t i = 0; i < sizeof(o.reserved) / sizeof(o.reserved[0]); i++)
		if (o.reserved[i])
			return -EINVAL;
	/* Exactly one of the two: an fd of 0 is a real fd, so a caller
	 * that zeroed the struct and set a name must also set fd to -1. */
	if ((o.fd >= 0) == (o.name != NULL))
		return -EINVAL;
	/* The flags that apply to the kind of object (shm.c checks its own
	 * again; this keeps the wrong one from reaching the wrong call). */
	if (o.flags & ~(ASYNCPOOL_SHARED_OPEN_NO_RECLAIM |
			(o.name ? ASYNCPOOL_SHM_OPEN_OTHER_WRITERS : ASYNCPOOL_SHM_OPEN_UNSEALED)))
		return -EINVAL;
	return bundle_open_checked(&o, out);
}

/* The six open calls of 1.0 and 1.1: asyncpool_shared_open() with one
 * or two of its options set. */
static int bundle_open_common(int fd, const char *name, uint32_t flags,
			      struct asyncpool_proactor *p, struct asyncpool_shared **out)
{
	struct asyncpool_shared_open_options o;

	memset(&o, 0, sizeof(o));
	o.size = sizeof(o);
	o.fd = name ? -1 : fd;
	o.name = name;
	o.flags = flags;
	o.proactor = p;
	return asyncpool_shared_open(&o, out);
}

/* An fd: a negative one is -EBADF here, as in 1.0 (asyncpool_shared_open()
 * cannot tell it from "no fd" and says -EINVAL). */
static int bundle_open_fd(int fd, uint32_t flags, struct asyncpool_proactor *p,
			  struct asyncpool_shared **out)
{
	if (fd < 0) {
		if (!out)
			return -EINVAL;
		*out = NULL;
		if (flags & ~(ASYNCPOOL_SHARED_OPEN_NO_RECLAIM | ASYNCPOOL_SHM_OPEN_UNSEALED))
			return -EINVAL;
		return -EBADF;
	}
	return bundle_open_common(fd, NULL, flags, p, out);
}

/* A name, or -EINVAL with *out cleared. */
static int bundle_open_named(const char *name, uint32_t flags, struct asyncpool_proactor *p,
			     struct asyncpool_shared **out)
{
	if (!name) {
		if (out)
			*out = NULL;
		return -EINVAL;
	}
	return bundle_open_common(-1, name, flags, p, out);
}

AP_EXPORT int asyncpool_shared_open_fd(int fd, struct asyncpool_shared **out)
{
	return bundle_open_fd(fd, 0, NULL, out);
}

AP_EXPORT int asyncpool_shared_open_named(const char *name, struct asyncpool_shared **out)
{
	return bundle_open_named(name, 0, NULL, out);
}

AP_EXPORT int asyncpool_shared_open_fd_flags(int fd, uint32_t flags,
					     struct asyncpool_shared **out)
{
	return bundle_open_fd(fd, flags, NULL, out);
}

AP_EXPORT int asyncpool_shared_open_named_flags(const char *name, uint32_t flags,
						struct asyncpool_shared **out)
{
	return bundle_open_named(name, flags, NULL, out);
}

AP_EXPORT int asyncpool_shared_open_fd_proactor(int fd, struct asyncpool_proactor *p,
						struct asyncpool_shared **out)
{
	return bundle_open_fd(fd, 0, p, out);
}

AP_EXPORT int asyncpool_shared_open_named_proactor(const char *name, struct asyncpool_proactor *p,
						   struct asyncpool_shared **out)
{
	return bundle_open_named(name, 0, p, out);
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
