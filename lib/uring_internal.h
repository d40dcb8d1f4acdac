/* SPDX-License-Identifier: MIT */
/*
 * What the files of the io_uring proactor share (built with liburing
 * only): the kernel's limits, a proactor's state (one ring, struct
 * ur_proactor), a region's registration on it (struct ur_region), and
 * how a registration's error is told.  proactor_uring.c makes and frees
 * them; uring_recv.c registers a provided-buffer ring on the ring.
 */
#ifndef ASYNCPOOL_URING_INTERNAL_H
#define ASYNCPOOL_URING_INTERNAL_H

#include "internal.h"
#include "uring_compat.h"
#include "self_pid.h"

#include <stdlib.h>
#include <unistd.h>

/* The kernel's limits (IORING_MAX_REG_BUFFERS, SZ_1G, 1 << 15). */
#define AP_UR_SLOTS		16384u
#define AP_UR_MAX_FIXED		(1ul << 30)
#define AP_UR_MAX_RING		32768u
#define AP_UR_BGIDS		65536u
/* End of a list of ids (buffers, free handles). */
#define AP_UR_NONE		UINT32_MAX

/* A WRITE region's provided-buffer ring (uring_recv.c). */
struct ur_recv;

/* A region's registration; kept past the region while it is deferred. */
struct ur_region {
	bool fixed;                     /* has a run of table slots */
	bool cloned;                    /* its pages came from the anchor */
	uint32_t first, n;              /* its slots */
	struct ur_recv *recv;           /* or a buffer ring */
	struct asyncpool_slab *slab;    /* a reference while deferred */
	struct ur_region *next;         /* on the deferred list */
};

struct ur_proactor {
	struct io_uring *ring;
	pid_t pid;                      /* the creator: only it touches the ring */
	pid_t owner;                    /* the creating thread */
	uint32_t features;
	pthread_mutex_t lock;           /* everything below */
	bool table;                     /* our sparse table is registered */
	uint64_t slots[AP_UR_SLOTS / 64];       /* 1: slot filled on this ring */
	uint64_t bgids[AP_UR_BGIDS / 64];       /* 1: group id taken */
	uint32_t bgid_next;
	struct ur_region *deferred;
	uint32_t ndeferred;
	uint64_t deferred_done;
	uint64_t unregister_failures;
};

static inline struct ur_proactor *ur_of(struct asyncpool_proactor *p)
{
	return p->backend;
}

/* In a child after fork(), the ring is the parent's: hands off. */
static inline bool ur_foreign(const struct ur_proactor *u)
{
	return ap_self_pid() != u->pid;   /* no system call a call: self_pid.c */
}

/* A kernel that does not know a registration opcode answers -EINVAL. */
static inline int ur_feature_err(int rc)
{
	return rc == -EINVAL ? -EOPNOTSUPP : rc;
}

/* Fold what the kernel says about a registration into the documented set. */
static inline int ur_reg_err(int rc)
{
	switch (rc) {
	case 0:
	case -ENOMEM:           /* RLIMIT_MEMLOCK, or kernel memory */
	case -EPERM:
	case -ENOSYS:
	case -EOPNOTSUPP:       /* memory the kernel will not pin */
	case -EEXIST:           /* IORING_SETUP_SINGLE_ISSUER, another thread */
	case -ENOBUFS:
		return rc;
	case -EACCES:           /* restricted ring */
		return -EPERM;
	default:                /* -EFAULT: memory that cannot be pinned, ... */
		return -EINVAL;
	}
}

/* Is ring a ring that takes our registrations?  0, or the kernel's answer. */
static inline int ur_probe(struct io_uring *ring)
{
	struct io_uring_probe *probe;
	int rc;

	probe = calloc(1, sizeof(*probe) + 256 * sizeof(struct io_uring_probe_op));
	if (!probe)
		return -ENOMEM;
	rc = io_uring_register_probe(ring, probe, 256);
	free(probe);
	return rc;
}

#endif /* ASYNCPOOL_URING_INTERNAL_H */
