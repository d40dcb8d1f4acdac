/* SPDX-License-Identifier: MIT */
/*
 * pool_wait.c: the waits for a buffer, above the pool (the protocol of
 * the wait word they sleep on: wait_word.h).
 */
#ifndef ASYNCPOOL_POOL_WAIT_H
#define ASYNCPOOL_POOL_WAIT_H

#include "wait_word.h"

struct io_uring_sqe;
/*
 * pool_wait.c: fill sqe with an IORING_OP_FUTEX_WAIT on word for value v;
 * -EOPNOTSUPP where the kernel (or the build) lacks it.
 */
int ap_prep_futex_wait(struct io_uring_sqe *sqe, _Atomic uint32_t *word, uint32_t v,
		       bool shared);

#endif /* ASYNCPOOL_POOL_WAIT_H */
