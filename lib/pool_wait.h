/* SPDX-License-Identifier: MIT */
/*
 * pool_wait.c: the waits for a buffer, above the pool (the protocol of
 * the wait word they sleep on: wait_word.h).
 */
#ifndef ASYNCPOOL_POOL_WAIT_H
#define ASYNCPOOL_POOL_WAIT_H

#include "wait_word.h"

/*
 * A holder that dies wakes nobody: waits on a pool with attachments
 * sleep at most this long at a time (pool_wait.c), and so do the waits
 * of a channel (channel.c), whose peer may die.
 */
#define AP_WAIT_SLICE_MS 50
#ifdef ASYNCPOOL_TEST_HOOKS
/* pool_wait.c: the slice of the test-hook build, in ms (0: the above). */
extern _Atomic uint32_t ap_test_hook_slice_ms;
#endif
/*
 * channel.c: a channel wait finds its peer alive (an fcntl(2) on the
 * peer's lock) at most once this long while it lives; shorter than a
 * slice, so a wait still notices a death within a slice.
 */
#define AP_PEER_LIVE_MS 10
_Static_assert(AP_PEER_LIVE_MS < AP_WAIT_SLICE_MS, "a slice asks the peer again");
#ifdef ASYNCPOOL_TEST_HOOKS
/* channel.c: the test-hook build's period (0: the above), and the looks made. */
extern _Atomic uint32_t ap_test_hook_peer_live_ms;
extern _Atomic uint32_t ap_test_hook_peer_checks;
#endif

/* pool_wait.c: the end of the next sleep, deadline or (sliced) a slice sooner. */
const struct timespec *ap_sleep_until(bool sliced, const struct timespec *deadline,
				      struct timespec *slice);
/*
 * pool_wait.c: whether a wait interrupted by a signal goes on: every
 * handler this thread could have run has SA_RESTART (asked before the
 * wait and after the interruption, asyncpool_acquire_wait(3)).
 */
bool ap_handlers_restart(void);

struct io_uring_sqe;
/*
 * pool_wait.c: fill sqe with an IORING_OP_FUTEX_WAIT on word for value v;
 * -EOPNOTSUPP where the kernel (or the build) lacks it.
 */
int ap_prep_futex_wait(struct io_uring_sqe *sqe, _Atomic uint32_t *word, uint32_t v,
		       bool shared);

#endif /* ASYNCPOOL_POOL_WAIT_H */
