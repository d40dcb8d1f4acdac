/* SPDX-License-Identifier: MIT */
/*
 * The io_uring proactor.  It borrows a ring that the caller set up and
 * registers memory on it; it never submits I/O.
 *
 * READ regions (and READ|WRITE regions) become fixed buffers.  A slab
 * takes one run of fixed-table slots for the whole process (first fit
 * in a process-wide map, uring_slots.c), the same run on every ring it is registered
 * with, so that a lease's fixed index is valid on each of them and one
 * pool serves a ring per thread.  Where the kernel can clone buffers
 * (IORING_REGISTER_CLONE_BUFFERS with offsets, 6.13), the pages are
 * pinned once, into a private "anchor" ring that no thread owns, and
 * cloned from it into each ring: memlock is charged once.  Elsewhere
 * each ring pins the same pages into the same slots.
 *
 * WRITE regions become provided-buffer rings, one buffer group per
 * region (uring_recv.c): completions turn into leases, and releasing
 * one puts its buffer back on the ring from any thread.
 *
 * Rings with IORING_SETUP_SINGLE_ISSUER accept registrations only from
 * their owner thread (the one that created the proactor): an
 * unregistration due on another thread waits for
 * asyncpool_proactor_run_deferred().  After fork(), the child shares
 * the parent's rings: it never registers, unregisters or changes them.
 *
 * The kernel's features are probed once per process (uring_features.c;
 * ASYNCPOOL_URING_DISABLE in the environment of create turns some off).
 *
 * Built without liburing, create refuses with -EOPNOTSUPP so that the
 * ABI is the same in every build.
 *
 * The files: this one is the proactor (create, register, unregister,
 * the deferred list, stats, destroy) and each ring's fixed-buffer
 * table; uring_slots.c the process-wide slot map and the anchor ring;
 * uring_recv.c the provided-buffer rings, and uring_handles.c what
 * their leases name; uring_features.c the kernel probe; uring_internal.h
 * the state they share.
 */
#include "internal.h"

#ifndef HAVE_LIBURING
AP_EXPORT int asyncpool_proactor_create_uring(struct io_uring *ring, uint32_t flags,
					      struct asyncpool_proactor **out)
{
	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!ring || flags)
		return -EINVAL;
	return -EOPNOTSUPP;
}
#else
#include "uring_internal.h"
#include "uring_bitmap.h"
#include "uring_features.h"
#include "uring_recv.h"
#include "uring_slots.h"

#include <stdlib.h>
#include <sys/uio.h>
#include <unistd.h>

static pid_t ap_gettid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

/* A SINGLE_ISSUER ring takes registrations from its owner only. */
static bool ur_must_defer(const struct ur_proactor *u)
{
	return (u->features & ASYNCPOOL_URING_SINGLE_ISSUER) && ap_gettid() != u->owner;
}

static int register_fixed(struct ur_proactor *u, struct asyncpool_region *r,
			  struct ur_region *ur)
{
	struct ur_run *run = NULL;
	struct iovec *iov;
	bool fresh;
	int rc = 0;

	/* The kernel's limits, checked before any system call. */
	if (r->buffer_size > AP_UR_MAX_FIXED || r->buffer_count > AP_UR_SLOTS)
		return -EINVAL;
	iov = malloc(sizeof(*iov) * r->buffer_count);
	if (!iov)
		return -ENOMEM;
	for (uint32_t i = 0; i < r->buffer_count; i++) {
		iov[i].iov_base = r->base + (size_t)i * r->buffer_size;
		iov[i].iov_len = r->buffer_size;
	}

	pthread_mutex_lock(&ap_ur_lock);
	pthread_mutex_lock(&u->lock);
	if (!u->table) {
		rc = io_uring_register_buffers_sparse(u->ring, AP_UR_SLOTS);
		/* -EBUSY: the caller registered a table of its own. */
		if (rc == -EBUSY)
			rc = -EEXIST;
		rc = ur_reg_err(ur_feature_err(rc));
		u->table = rc == 0;
	}
	pthread_mutex_unlock(&u->lock);
	fresh = !r->slab->uring_run;
	if (!rc)
		rc = ap_ur_run_get(u->features & ASYNCPOOL_URING_CLONE_BUFFERS, r->slab, iov, &run);
	/* The same slab twice on one ring would share (and clear) slots. */
	if (!rc && bits_any(u->slots, run->first, run->n))
		rc = -EEXIST;
	if (!rc) {
		run->users++;
		ur->cloned = false;
		if (run->anchored && run->pid == getpid()) {
			rc = ap_ur_clone_run(u->ring, run);
			ur->cloned = rc == 0;
			/* A refused clone (a ring of another user, ...): pin. */
			if (rc && rc != -EEXIST && rc != -ENOMEM)
				rc = 0;
		}
		if (!rc && !ur->cloned)
			rc = ap_ur_slots_fill(u->ring, run->first, iov, run->n);
		if (rc == -EUCLEAN) {
			/* Slots we cannot clear stay taken rather than dirty. */
			bits_set(u->slots, run->first, run->n, true);
			rc = -EINVAL;
		} else if (rc) {
			ap_ur_run_put(r->slab);
			run = NULL;
		}
	} else if (run && fresh) {
		run->users++;
		ap_ur_run_put(r->slab);
	}
	if (!rc) {
		pthread_mutex_lock(&u->lock);
		bits_set(u->slots, run->first, run->n, true);
		pthread_mutex_unlock(&u->lock);
	}
	pthread_mutex_unlock(&ap_ur_lock);
	free(iov);
	if (rc)
		return ur_reg_err(rc);
	ur->fixed = true;
	ur->first = run->first;
	ur->n = run->n;
	return 0;
}

static int uring_register(struct asyncpool_proactor *p, struct asyncpool_region *r)
{
	struct ur_proactor *u = ur_of(p);
	struct ur_region *ur;
	int rc;

	/* A child's ring is its parent's: it registers nothing there. */
	if (ur_foreign(u))
		return -EPERM;
	ur = calloc(1, sizeof(*ur));
	if (!ur)
		return -ENOMEM;
	/* READ|WRITE: fixed buffers serve read_fixed and write_fixed alike. */
	if (r->access & ASYNCPOOL_ACCESS_READ)
		rc = register_fixed(u, r, ur);
	else
		rc = ap_ur_recv_register(u, r, ur);
	if (rc) {
		free(ur);
		return rc;
	}
	r->backend = ur;
	return 0;
}

/* Undo a registration on the ring; 0, or the kernel's error (nothing freed). */
static int unregister_now(struct ur_proactor *u, struct ur_region *ur, struct asyncpool_slab *slab)
{
	int rc;

	if (ur->fixed) {
		rc = ap_ur_slots_clear(u->ring, ur->first, ur->n);
		if (rc)
			return rc;
		pthread_mutex_lock(&ap_ur_lock);
		pthread_mutex_lock(&u->lock);
		bits_set(u->slots, ur->first, ur->n, false);
		pthread_mutex_unlock(&u->lock);
		ap_ur_run_put(slab);
		pthread_mutex_unlock(&ap_ur_lock);
		return 0;
	} else {
		return ap_ur_recv_unregister(u, ur->recv);
	}
}

/* In a child: forget a registration of the parent's ring, touching nothing. */
static void unregister_forget(struct ur_proactor *u, struct ur_region *ur,
			      struct asyncpool_slab *slab)
{
	if (ur->fixed) {
		pthread_mutex_lock(&ap_ur_lock);
		pthread_mutex_lock(&u->lock);
		bits_set(u->slots, ur->first, ur->n, false);
		pthread_mutex_unlock(&u->lock);
		ap_ur_run_put(slab);          /* ap_ur_run_put() clears nothing of another pid */
		pthread_mutex_unlock(&ap_ur_lock);
	} else {
		ap_ur_recv_free(ur->recv); /* our copy of the ring memory */
	}
}

static void defer(struct ur_proactor *u, struct ur_region *ur, struct asyncpool_slab *slab)
{
	ur->slab = asyncpool_slab_ref(slab);
	pthread_mutex_lock(&u->lock);
	ur->next = u->deferred;
	u->deferred = ur;
	u->ndeferred++;
	pthread_mutex_unlock(&u->lock);
}

static void uring_unregister(struct asyncpool_proactor *p, struct asyncpool_region *r)
{
	struct ur_proactor *u = ur_of(p);
	struct ur_region *ur = r->backend;
	int rc;

	/* From here on, a copy of one of its leases finds no region. */
	if (ur->recv)
		ap_ur_recv_retire(ur->recv);
	if (ur_foreign(u)) {
		unregister_forget(u, ur, r->slab);
		free(ur);
		return;
	}
	if (ur_must_defer(u)) {
		defer(u, ur, r->slab);
		return;
	}
	rc = unregister_now(u, ur, r->slab);
	if (rc == -EEXIST) {            /* the kernel says: not the owner */
		defer(u, ur, r->slab);
		return;
	}
	if (rc) {
		/* The kernel still uses it: keep its memory and its slots
		 * (the run keeps this ring's use), and say so. */
		pthread_mutex_lock(&u->lock);
		u->unregister_failures++;
		pthread_mutex_unlock(&u->lock);
	}
	free(ur);
}

static int uring_run_deferred(struct asyncpool_proactor *p)
{
	struct ur_proactor *u = ur_of(p);
	struct ur_region *list, *keep = NULL;
	int done = 0, err = 0;
	uint32_t kept = 0;

	if (ur_foreign(u))
		return 0;
	if (ur_must_defer(u))
		return -EEXIST;
	pthread_mutex_lock(&u->lock);
	list = u->deferred;
	u->deferred = NULL;
	u->ndeferred = 0;
	pthread_mutex_unlock(&u->lock);
	while (list) {
		struct ur_region *ur = list;
		int rc;

		list = ur->next;
		rc = unregister_now(u, ur, ur->slab);
		if (rc) {
			ur->next = keep;
			keep = ur;
			kept++;
			if (!err)
				err = ur_reg_err(rc);
			continue;
		}
		asyncpool_slab_unref(ur->slab);
		free(ur);
		done++;
	}
	pthread_mutex_lock(&u->lock);
	u->deferred_done += (uint64_t)done;
	u->unregister_failures += kept;
	while (keep) {
		struct ur_region *ur = keep;

		keep = ur->next;
		ur->next = u->deferred;
		u->deferred = ur;
		u->ndeferred++;
	}
	pthread_mutex_unlock(&u->lock);
	return err ? err : done;
}

static int uring_fixed_index(const struct asyncpool_region *r, uint32_t buffer_index)
{
	const struct ur_region *ur = r->backend;

	return ur->fixed ? (int)(ur->first + buffer_index) : -EINVAL;
}

static int uring_buffer_group(const struct asyncpool_region *r)
{
	const struct ur_region *ur = r->backend;

	return ur->recv ? ap_ur_recv_group(ur->recv) : -EINVAL;
}

static void uring_region_stats(const struct asyncpool_region *r, struct asyncpool_region_stats *st)
{
	const struct ur_region *ur = r->backend;

	if (ur->cloned)
		st->flags |= ASYNCPOOL_REGION_CLONED;
	if (ur->recv)
		ap_ur_recv_stats(ur_of(r->proactor), ur->recv, st);
}

static void uring_proactor_stats(struct asyncpool_proactor *p, struct asyncpool_proactor_stats *st)
{
	struct ur_proactor *u = ur_of(p);

	pthread_mutex_lock(&u->lock);
	st->features = u->features;
	st->deferred = u->ndeferred;
	st->deferred_done = u->deferred_done;
	st->unregister_failures = u->unregister_failures;
	pthread_mutex_unlock(&u->lock);
	st->unregister_failures += ap_ur_anchor_failures();
	st->stale_releases = ap_ur_stale_releases();
}

static int uring_destroy(struct asyncpool_proactor *p)
{
	struct ur_proactor *u = ur_of(p);

	if (ur_foreign(u)) {
		/* A child frees its copy; the parent's ring stays as it is. */
		while (u->deferred) {
			struct ur_region *ur = u->deferred;

			u->deferred = ur->next;
			unregister_forget(u, ur, ur->slab);
			asyncpool_slab_unref(ur->slab);
			free(ur);
		}
	} else {
		if (u->deferred) {
			int rc = uring_run_deferred(p);

			if (rc < 0)
				return rc;
		}
		if (u->table) {
			int rc = io_uring_unregister_buffers(u->ring);

			/* -ENXIO: the caller unregistered the table already. */
			if (rc && rc != -ENXIO) {
				pthread_mutex_lock(&u->lock);
				u->unregister_failures++;
				pthread_mutex_unlock(&u->lock);
				return ur_reg_err(rc);
			}
			u->table = false;
		}
	}
	pthread_mutex_destroy(&u->lock);
	free(u);
	return 0;
}

static const struct proactor_ops uring_ops = {
	.register_region = uring_register,
	.unregister_region = uring_unregister,
	.fixed_index = uring_fixed_index,
	.buffer_group = uring_buffer_group,
	.recv = ap_ur_recv,
	.region_wait = ap_ur_region_wait,
	.region_prep_wait = ap_ur_region_prep_wait,
	.region_stats = uring_region_stats,
	.proactor_stats = uring_proactor_stats,
	.run_deferred = uring_run_deferred,
	.destroy = uring_destroy,
};

/* Is this a live ring, and does the kernel let us register on it? */
static int ur_check_ring(struct io_uring *ring)
{
	int rc;

	/* Kernels since 6.x take fd -1 for "no ring" registrations. */
	if (ring->ring_fd < 0)
		return -EINVAL;
	rc = ur_probe(ring);
	switch (rc) {
	case 0:
		return 0;
	case -EBADF:            /* not an open file */
	case -EOPNOTSUPP:       /* an open file, not a ring */
		return -EINVAL;
	case -EACCES:           /* registration restricted on this ring */
		return -EPERM;
	case -EINVAL:           /* a kernel before probing (5.6) */
		return -EOPNOTSUPP;
	case -ENOMEM:
	case -EPERM:
	case -ENOSYS:
	case -EEXIST:           /* IORING_SETUP_SINGLE_ISSUER, another thread */
		return rc;
	default:
		return -EINVAL;
	}
}

AP_EXPORT int asyncpool_proactor_create_uring(struct io_uring *ring, uint32_t flags,
					      struct asyncpool_proactor **out)
{
	struct ur_proactor *u;
	uint32_t features;
	int rc;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!ring || flags)
		return -EINVAL;
	rc = ur_check_ring(ring);
	if (rc)
		return rc;
	ap_ur_slots_init();
	features = ap_ur_features();
	u = calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	u->ring = ring;
	u->pid = ap_self_pid();
	u->owner = ap_gettid();
	u->features = features;
	if (!(ring->features & IORING_FEAT_RECVSEND_BUNDLE))
		u->features &= ~ASYNCPOOL_URING_BUNDLE;
	if (ring->flags & IORING_SETUP_SINGLE_ISSUER)
		u->features |= ASYNCPOOL_URING_SINGLE_ISSUER;
	pthread_mutex_init(&u->lock, NULL);
	rc = ap_proactor_new(&uring_ops, u, out);
	if (rc) {
		pthread_mutex_destroy(&u->lock);
		free(u);
	}
	return rc;
}
#endif
