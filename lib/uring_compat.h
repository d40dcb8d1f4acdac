/* SPDX-License-Identifier: MIT */
/*
 * Kernel io_uring constants newer than the liburing we may build with
 * (Debian 12 ships liburing 2.3).  Each is guarded so that a newer
 * liburing's own definition wins; the values are the kernel's uapi
 * (include/uapi/linux/io_uring.h) and never change once released.
 * We call io_uring_register(2) directly where liburing has no wrapper,
 * and probe every feature at run time (uring_features.c).
 */
#ifndef ASYNCPOOL_URING_COMPAT_H
#define ASYNCPOOL_URING_COMPAT_H

#include <liburing.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef IORING_SETUP_SINGLE_ISSUER
#define IORING_SETUP_SINGLE_ISSUER	(1U << 12)   /* 6.0 */
#endif
#ifndef IORING_SETUP_DEFER_TASKRUN
#define IORING_SETUP_DEFER_TASKRUN	(1U << 13)   /* 6.1 */
#endif
#ifndef IORING_FEAT_RECVSEND_BUNDLE
#define IORING_FEAT_RECVSEND_BUNDLE	(1U << 14)   /* 6.10 */
#endif
#ifndef IORING_RECVSEND_BUNDLE
#define IORING_RECVSEND_BUNDLE		(1U << 4)    /* sqe->ioprio, 6.10 */
#endif
#ifndef IORING_CQE_F_BUF_MORE
#define IORING_CQE_F_BUF_MORE		(1U << 4)    /* 6.12 */
#endif
#ifndef IOU_PBUF_RING_INC
#define IOU_PBUF_RING_INC		2            /* io_uring_buf_reg.flags, 6.12 */
#endif

/* Register opcodes, by number (an enum in the uapi header: no #ifdef). */
#define AP_IORING_REGISTER_PBUF_RING		22   /* 5.19 */
#define AP_IORING_UNREGISTER_PBUF_RING		23
#define AP_IORING_REGISTER_PBUF_STATUS		26   /* 6.8 */
#define AP_IORING_REGISTER_CLONE_BUFFERS	30   /* 6.12 */
#ifndef IORING_REGISTER_SRC_REGISTERED
#define IORING_REGISTER_SRC_REGISTERED		(1U << 0)
#endif
#ifndef IORING_REGISTER_DST_REPLACE
#define IORING_REGISTER_DST_REPLACE		(1U << 1)    /* 6.13 */
#endif

/* The kernel's struct io_uring_clone_buffers (6.12; offsets in 6.13). */
struct ap_uring_clone_buffers {
	uint32_t src_fd;
	uint32_t flags;
	uint32_t src_off;
	uint32_t dst_off;
	uint32_t nr;
	uint32_t pad[3];
};

/* The kernel's struct io_uring_buf_reg, with the flags of 6.12. */
struct ap_uring_buf_reg {
	uint64_t ring_addr;
	uint32_t ring_entries;
	uint16_t bgid;
	uint16_t flags;
	uint64_t resv[3];
};

/* The kernel's struct io_uring_buf_status (6.8). */
struct ap_uring_buf_status {
	uint32_t buf_group;
	uint32_t head;          /* out: the kernel's head of the ring */
	uint32_t resv[8];
};

/* io_uring_register(2) without liburing: 0 or a negative errno. */
static inline int ap_uring_register(int fd, unsigned int opcode, void *arg,
				    unsigned int nr_args)
{
	long rc = syscall(__NR_io_uring_register, fd, opcode, arg, nr_args);

	return rc < 0 ? -errno : (int)rc;
}

#endif /* ASYNCPOOL_URING_COMPAT_H */
