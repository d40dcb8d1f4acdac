/* SPDX-License-Identifier: MIT */
/*
 * A shared pool in one object: shared memory holding the pool layout
 * and the buffers, a slab over the buffers, a memory-proactor region
 * and the pool.  One process creates it and passes its fd (or its name)
 * to the others, which open it.  Untrusted peers get the fd of an
 * anonymous (sealed) one; a name is for peers trusted as yourself.
 */
#ifndef ASYNCPOOL_SHARED_H
#define ASYNCPOOL_SHARED_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct asyncpool;
struct asyncpool_region;
struct asyncpool_shm;
struct asyncpool_shared;
struct asyncpool_proactor;

/* Flags of struct asyncpool_shared_options. */
#define ASYNCPOOL_SHARED_HUGE_PREFER (1u << 0) /* huge pages if any (anonymous only) */
/* Since 1.10: a dead receiver's items go back to the pool (1.4's rule). */
#define ASYNCPOOL_SHARED_CHANNEL_DROP (1u << 1)

/*
 * Options for asyncpool_shared_create().  Extensible: zero the whole
 * struct, set size to sizeof(struct asyncpool_shared_options), then the
 * fields you need.  Fields beyond size that this build does not know
 * must be zero.
 */
struct asyncpool_shared_options {
	size_t      size;               /* sizeof(struct asyncpool_shared_options) */
	size_t      buffer_size;        /* bytes per buffer, a multiple of 64 */
	uint32_t    buffer_count;       /* buffers, > 0 */
	uint32_t    flags;              /* ASYNCPOOL_SHARED_* */
	const char *name;               /* NULL: anonymous memfd; "/name": named */
	uint32_t    mode;               /* of a named object; 0: 0600 */
	uint32_t    reserved;           /* must be zero */
	/* Since 1.4: channels (asyncpool_channel_open(3)); 0: none. */
	uint32_t    channels;           /* channels, at most 1024 */
	uint32_t    channel_capacity;   /* entries per channel, a power of two <= 65536 */
};

int  asyncpool_shared_create(const struct asyncpool_shared_options *opts,
			     struct asyncpool_shared **out);
int  asyncpool_shared_open_fd(int fd, struct asyncpool_shared **out);
int  asyncpool_shared_open_named(const char *name, struct asyncpool_shared **out);
void asyncpool_shared_close(struct asyncpool_shared *sp);
/* The same, with the buffers registered on the caller's proactor (each
 * process its own ring): the pool's leases then have fixed indices. */
int  asyncpool_shared_create_proactor(const struct asyncpool_shared_options *opts,
				      struct asyncpool_proactor *p,
				      struct asyncpool_shared **out);
int  asyncpool_shared_open_fd_proactor(int fd, struct asyncpool_proactor *p,
				       struct asyncpool_shared **out);
int  asyncpool_shared_open_named_proactor(const char *name, struct asyncpool_proactor *p,
					  struct asyncpool_shared **out);
/*
 * flags: ASYNCPOOL_SHM_OPEN_UNSEALED (fd) or _OTHER_WRITERS (named), see
 * shm.h, and ASYNCPOOL_SHARED_OPEN_NO_RECLAIM.
 */
/* Open without the reclaim an open runs by itself (asyncpool_reclaim(3)). */
#define ASYNCPOOL_SHARED_OPEN_NO_RECLAIM (1u << 16)
int  asyncpool_shared_open_fd_flags(int fd, uint32_t flags, struct asyncpool_shared **out);
int  asyncpool_shared_open_named_flags(const char *name, uint32_t flags,
				       struct asyncpool_shared **out);

/*
 * Options for asyncpool_shared_open() (since 1.2), the one open call:
 * the six asyncpool_shared_open_* calls above are wrappers of it.
 * Extensible: zero the whole struct, set size to
 * sizeof(struct asyncpool_shared_open_options), then the fields you need.
 * Exactly one of fd (>= 0) and name: set fd to -1 to open by name.
 */
struct asyncpool_shared_open_options {
	size_t      size;               /* sizeof(struct asyncpool_shared_open_options) */
	int         fd;                 /* the object's fd (duplicated), or -1 */
	const char *name;               /* "/name" of a named object, or NULL */
	uint32_t    flags;              /* ASYNCPOOL_SHM_OPEN_*, _SHARED_OPEN_NO_RECLAIM */
	struct asyncpool_proactor *proactor; /* register the buffers here; NULL: none */
	uint64_t    reserved[4];        /* must be zero */
};
int  asyncpool_shared_open(const struct asyncpool_shared_open_options *opts,
			   struct asyncpool_shared **out);

struct asyncpool        *asyncpool_shared_pool(const struct asyncpool_shared *sp);
struct asyncpool_region *asyncpool_shared_region(const struct asyncpool_shared *sp);
int                      asyncpool_shared_fd(const struct asyncpool_shared *sp);
const struct asyncpool_shm *asyncpool_shared_shm(const struct asyncpool_shared *sp);

#ifdef __cplusplus
}
#endif

#endif /* ASYNCPOOL_SHARED_H */
