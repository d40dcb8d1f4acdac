/* SPDX-License-Identifier: MIT */
/*
 * The socket backend (since 1.2): leases sent with MSG_ZEROCOPY and
 * released when the socket's error queue reports their sends complete,
 * for machines where io_uring is refused (seccomp profiles of container
 * runtimes, kernel.io_uring_disabled).  Driven by the caller's event
 * loop: asyncpool_zc_reap() when poll or epoll reports POLLERR/EPOLLERR.
 * And asyncpool_backend_probe(): which backend this process can use.
 */
#ifndef ASYNCPOOL_ZEROCOPY_H
#define ASYNCPOOL_ZEROCOPY_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct asyncpool;
struct asyncpool_lease;
struct asyncpool_zc;            /* one socket with the backend */

/* Backends, in struct asyncpool_backend_info.backends. */
#define ASYNCPOOL_BACKEND_MEMORY        (1u << 0) /* always: plain memory, copying I/O */
#define ASYNCPOOL_BACKEND_URING         (1u << 1) /* io_uring_setup() works */
#define ASYNCPOOL_BACKEND_ZEROCOPY_TCP  (1u << 2) /* SO_ZEROCOPY on TCP (Linux 4.14) */
#define ASYNCPOOL_BACKEND_ZEROCOPY_UDP  (1u << 3) /* SO_ZEROCOPY on UDP (Linux 5.0) */

/*
 * What asyncpool_backend_probe() found.  Extensible: set size to
 * sizeof(struct asyncpool_backend_info) before the call.
 */
struct asyncpool_backend_info {
	size_t   size;              /* sizeof(struct asyncpool_backend_info) */
	uint32_t backends;          /* ASYNCPOOL_BACKEND_* that work here */
	uint32_t best;              /* the one to use: _URING, _ZEROCOPY_TCP or _MEMORY */
	int32_t  uring_error;       /* 0, or what io_uring_setup() answered (-EPERM, -ENOSYS) */
	int32_t  uring_disabled;    /* kernel.io_uring_disabled (0, 1, 2); -1 if absent */
	int32_t  zerocopy_error;    /* 0, or what setsockopt(SO_ZEROCOPY) on TCP answered */
	int32_t  reserved;
};

int asyncpool_backend_probe(struct asyncpool_backend_info *out);

/* Flags of struct asyncpool_zc_options. */
#define ASYNCPOOL_ZC_COPY        (1u << 0) /* never MSG_ZEROCOPY: copying send() */
#define ASYNCPOOL_ZC_NO_FALLBACK (1u << 1) /* keep MSG_ZEROCOPY however much the kernel copies */

/* The default of fallback_after: copied completions in a row. */
#define ASYNCPOOL_ZC_FALLBACK_AFTER 64u

/*
 * Options for asyncpool_zc_open().  Extensible: zero the whole struct,
 * set size to sizeof(struct asyncpool_zc_options), then the fields you
 * need.  Fields beyond size that this build does not know must be zero.
 */
struct asyncpool_zc_options {
	size_t   size;              /* sizeof(struct asyncpool_zc_options) */
	uint32_t flags;             /* ASYNCPOOL_ZC_COPY, _NO_FALLBACK */
	uint32_t fallback_after;    /* completions in a row the kernel copied before
				       the socket sends by copying; 0: the default */
	uint64_t reserved[4];       /* must be zero */
};

/* Flags of asyncpool_zc_send(). */
#define ASYNCPOOL_ZC_KEEP (1u << 0) /* the caller keeps the lease after a whole send */

/* Flags of struct asyncpool_zc_stats. */
#define ASYNCPOOL_ZC_ZEROCOPY  (1u << 0) /* the socket sends with MSG_ZEROCOPY now */
#define ASYNCPOOL_ZC_FELL_BACK (1u << 1) /* the kernel kept copying: it sends by copying */

/*
 * Counters of a socket, for asyncpool_zc_stats().  Extensible: set size
 * to sizeof(struct asyncpool_zc_stats) before the call.
 */
struct asyncpool_zc_stats {
	size_t   size;              /* sizeof(struct asyncpool_zc_stats) */
	uint32_t flags;             /* ASYNCPOOL_ZC_ZEROCOPY, _FELL_BACK */
	uint32_t leases_out;        /* leases held until the kernel is done with them */
	uint64_t sends;             /* MSG_ZEROCOPY sends that took data (sequence numbers) */
	uint64_t copy_sends;        /* sends without MSG_ZEROCOPY */
	uint64_t pending;           /* sequence numbers not yet reported complete */
	uint64_t completions;       /* sequence numbers reported complete */
	uint64_t copied;            /* of them, in a range with SO_EE_CODE_ZEROCOPY_COPIED */
	uint64_t notifications;     /* completion ranges read from the error queue */
	uint64_t enobufs;           /* sendmsg() answers ENOBUFS */
	uint64_t enobufs_copies;    /* sends that copied as nothing was left to wait for */
	uint64_t failed;            /* sends that failed (no sequence number used) */
	uint64_t bad_ranges;        /* ranges naming no outstanding sequence number */
	uint64_t other;             /* error-queue messages not from MSG_ZEROCOPY */
};

int asyncpool_zc_open(int fd, const struct asyncpool_zc_options *opts,
		      struct asyncpool_zc **out);
int asyncpool_zc_send(struct asyncpool_zc *zs, struct asyncpool_lease *lease,
		      size_t offset, size_t length, int msg_flags, uint32_t flags);
int asyncpool_zc_release(struct asyncpool_zc *zs, struct asyncpool_lease *lease);
int asyncpool_zc_reap(struct asyncpool_zc *zs);
int asyncpool_zc_wait(struct asyncpool_zc *zs, int64_t timeout_ns);
int asyncpool_zc_close(struct asyncpool_zc *zs, int64_t timeout_ns);
int asyncpool_zc_fd(const struct asyncpool_zc *zs);
int asyncpool_zc_stats(const struct asyncpool_zc *zs, struct asyncpool_zc_stats *out);
/* Receive into a lease of pool: its length, 0 at end of stream, or -errno. */
int asyncpool_zc_recv(struct asyncpool *pool, int fd, int msg_flags,
		      struct asyncpool_lease *out);

#ifdef __cplusplus
}
#endif

#endif /* ASYNCPOOL_ZEROCOPY_H */
