/* SPDX-License-Identifier: MIT */
/*
 * What Debian 12's liburing 2.3 and kernel headers lack for
 * IORING_OP_FUTEX_WAIT (Linux 6.7), defined only where missing
 * (include it after liburing.h).  The
 * kernel's io_uring/futex.c reads: addr the futex, addr2 the value,
 * addr3 the bitset mask, fd the futex2 flags; len, the op flags,
 * buf_index and file_index must be zero.
 */
#ifndef ASYNCPOOL_URING_FUTEX_H
#define ASYNCPOOL_URING_FUTEX_H

/* Newer headers have it in an enum, which #ifndef cannot see: our own name. */
#define AP_IORING_OP_FUTEX_WAIT 51
#ifndef FUTEX2_SIZE_U32
#define FUTEX2_SIZE_U32 0x02
#endif
#ifndef FUTEX2_PRIVATE
#define FUTEX2_PRIVATE 128      /* FUTEX_PRIVATE_FLAG */
#endif
#ifndef FUTEX_BITSET_MATCH_ANY
#define FUTEX_BITSET_MATCH_ANY 0xffffffff
#endif

#endif /* ASYNCPOOL_URING_FUTEX_H */
