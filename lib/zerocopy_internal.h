/* SPDX-License-Identifier: MIT */
/*
 * The socket backend's state; not installed.  Tests of the test-hook
 * build read it (tests/hooks.h).
 */
#ifndef ASYNCPOOL_ZEROCOPY_INTERNAL_H
#define ASYNCPOOL_ZEROCOPY_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/socket.h>

#include <asyncpool.h>

/* The byte of a socket that asyncpool_zc_open() locks (a POSIX record
 * lock) between its look at SO_ZEROCOPY and its set. */
#define AP_ZC_CLAIM_BYTE ((off_t)1 << 30)

/* A ring slot whose send was reported complete. */
#define AP_ZC_DONE UINT32_MAX
/* The end of the free list of records. */
#define AP_ZC_NONE UINT32_MAX

/*
 * One lease the backend tracks: from its first send until the kernel
 * reported every send of it complete and the caller handed it over.
 */
struct ap_zc_rec {
	struct asyncpool_lease lease;
	uint32_t pending;       /* its sequence numbers not yet complete */
	uint32_t next_free;     /* free list, when !used */
	bool     used;
	bool     held;          /* the caller still holds it (KEEP, short send) */
};

struct asyncpool_zc {
	int      fd;            /* our own dup of the caller's socket */
	pid_t    pid;           /* the process that opened it (zc_forked()) */
	uint32_t flags;         /* ASYNCPOOL_ZC_COPY, _NO_FALLBACK */
	uint32_t fallback_after;
	bool     zerocopy;      /* sending with MSG_ZEROCOPY now */
	bool     fell_back;
	bool     dgram;         /* SOCK_DGRAM: a failed send may have taken a number */
	uint32_t lost;          /* failed sends that may have taken one, past head */
	uint64_t copied_run;    /* copied completions in a row */
	/*
	 * The sequence numbers the kernel gave our sends, [tail, head), in
	 * a ring of cap slots: each the record of the lease it sent, or
	 * AP_ZC_DONE.  The kernel's counter (sk_zckey) is a u32 from 0 that
	 * counts every MSG_ZEROCOPY send that took data; ours follows it.
	 */
	uint32_t tail, head, cap;
	uint32_t *ring;
	struct ap_zc_rec *recs;
	uint32_t nrecs, free_rec, leases_out;
	uint32_t nheld;         /* records the caller still holds: the scan's bound */
	struct asyncpool_zc_stats st;
};

/* Complete [lo, hi] as a notification from the error queue would. */
int ap_zc_complete(struct asyncpool_zc *zs, uint32_t lo, uint32_t hi, bool copied);

#ifdef ASYNCPOOL_TEST_HOOKS
/* When set, called instead of sendmsg(2): bytes sent or -1 with errno. */
extern ssize_t (*ap_zc_test_sendmsg)(int fd, const struct msghdr *msg, int flags);
/* When set, called instead of recvmsg(2) of the error queue. */
extern ssize_t (*ap_zc_test_recvmsg)(int fd, struct msghdr *msg, int flags);
#endif

#endif
