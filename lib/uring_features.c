/* SPDX-License-Identifier: MIT */
/*
 * What the kernel's io_uring can do (ASYNCPOOL_URING_*), found once per
 * process on a scratch ring: bundles, the head of a provided-buffer ring
 * (IORING_REGISTER_PBUF_STATUS), incremental consumption, and cloning
 * buffers into a ring that has a table, the entries after the range kept
 * (what the anchor ring of uring_slots.c relies on).
 *
 * ASYNCPOOL_URING_DISABLE=clone,pbuf_status,bundle,incremental in the
 * environment turns features off, so that tests can exercise the paths
 * taken on older kernels.
 */
#include "internal.h"
#include "uring_features.h"

#ifdef HAVE_LIBURING
#include "uring_compat.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

static pthread_once_t g_probe_once = PTHREAD_ONCE_INIT;
static uint32_t g_kernel_features;

/*
 * Does IORING_REGISTER_CLONE_BUFFERS clone a range into a ring that has
 * a table, keeping the entries after the range?  Kernels of 6.13 without
 * the fix "io_uring/rsrc: ... copy original dst nodes from after the
 * cloned range" (io_uring/rsrc.c, io_clone_buffers()) dropped them; we
 * find out with a WRITE_FIXED to /dev/null from each slot.
 */
static bool probe_clone(struct io_uring *src)
{
	struct ap_uring_clone_buffers cb;
	struct io_uring dst;
	struct iovec iov;
	char *mem;
	bool ok = false;
	int fd;

	fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	mem = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED) {
		close(fd);
		return false;
	}
	memset(mem, 0, 8192);
	if (io_uring_queue_init(2, &dst, 0)) {
		munmap(mem, 8192);
		close(fd);
		return false;
	}
	iov.iov_base = mem;
	iov.iov_len = 4096;
	if (io_uring_register_buffers(src, &iov, 1) || io_uring_register_buffers_sparse(&dst, 2))
		goto out;
	iov.iov_base = mem + 4096;
	if (io_uring_register_buffers_update_tag(&dst, 1, &iov, NULL, 1) != 1)
		goto out;
	memset(&cb, 0, sizeof(cb));
	cb.src_fd = (uint32_t)src->ring_fd;
	cb.flags = IORING_REGISTER_DST_REPLACE;
	cb.nr = 1;
	if (ap_uring_register(dst.ring_fd, AP_IORING_REGISTER_CLONE_BUFFERS, &cb, 1))
		goto out;
	ok = true;
	for (int slot = 0; slot < 2 && ok; slot++) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&dst);
		struct io_uring_cqe *cqe;

		io_uring_prep_write_fixed(sqe, fd, mem + 4096 * slot, 64, 0, slot);
		if (io_uring_submit_and_wait(&dst, 1) != 1 || io_uring_wait_cqe(&dst, &cqe)) {
			ok = false;
			break;
		}
		ok = cqe->res == 64;
		io_uring_cqe_seen(&dst, cqe);
	}
out:
	/* Unregister before exit: a ring's teardown is asynchronous, and its
	 * pinned pages would stay charged (VmPin) for a while. */
	io_uring_unregister_buffers(&dst);
	io_uring_queue_exit(&dst);
	io_uring_unregister_buffers(src);
	munmap(mem, 8192);
	close(fd);
	return ok;
}

/* What this kernel can do, found once per process on a scratch ring. */
static void probe_kernel(void)
{
	struct io_uring_params prm;
	struct ap_uring_buf_status st;
	struct ap_uring_buf_reg reg;
	struct io_uring ring;
	uint32_t f = 0;
	void *page;

	memset(&prm, 0, sizeof(prm));
	if (io_uring_queue_init_params(2, &ring, &prm))
		return;
	if (prm.features & IORING_FEAT_RECVSEND_BUNDLE)
		f |= ASYNCPOOL_URING_BUNDLE;
	/* io_register_pbuf_status(): -ENOENT for a group that is not there;
	 * a kernel without the opcode answers -EINVAL. */
	memset(&st, 0, sizeof(st));
	if (ap_uring_register(ring.ring_fd, AP_IORING_REGISTER_PBUF_STATUS, &st, 1) == -ENOENT)
		f |= ASYNCPOOL_URING_PBUF_STATUS;
	/* A kernel without IOU_PBUF_RING_INC refuses the flag with -EINVAL. */
	page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (page != MAP_FAILED) {
		memset(&reg, 0, sizeof(reg));
		reg.ring_addr = (uintptr_t)page;
		reg.ring_entries = 1;
		reg.flags = IOU_PBUF_RING_INC;
		if (ap_uring_register(ring.ring_fd, AP_IORING_REGISTER_PBUF_RING, &reg, 1) == 0) {
			f |= ASYNCPOOL_URING_INCREMENTAL;
			ap_uring_register(ring.ring_fd, AP_IORING_UNREGISTER_PBUF_RING, &reg, 1);
		}
		munmap(page, 4096);
	}
	if (probe_clone(&ring))
		f |= ASYNCPOOL_URING_CLONE_BUFFERS;
	io_uring_queue_exit(&ring);
	g_kernel_features = f;
}

/* Features turned off by ASYNCPOOL_URING_DISABLE (for tests). */
static uint32_t env_disabled(void)
{
	static const struct { const char *name; uint32_t bit; } names[] = {
		{ "clone", ASYNCPOOL_URING_CLONE_BUFFERS },
		{ "pbuf_status", ASYNCPOOL_URING_PBUF_STATUS },
		{ "bundle", ASYNCPOOL_URING_BUNDLE },
		{ "incremental", ASYNCPOOL_URING_INCREMENTAL },
	};
	const char *s = getenv("ASYNCPOOL_URING_DISABLE");
	uint32_t off = 0;

	while (s && *s) {
		size_t len = strcspn(s, ",");

		for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
			if (strlen(names[i].name) == len && !strncmp(s, names[i].name, len))
				off |= names[i].bit;
		s += len;
		if (*s == ',')
			s++;
	}
	return off;
}

uint32_t ap_ur_features(void)
{
	pthread_once(&g_probe_once, probe_kernel);
	return g_kernel_features & ~env_disabled();
}
#endif
