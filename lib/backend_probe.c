/* SPDX-License-Identifier: MIT */
/*
 * Which backend this process can use: io_uring where io_uring_setup()
 * works; where it is refused (a seccomp profile answers EPERM, a kernel
 * without it ENOSYS, kernel.io_uring_disabled EPERM), MSG_ZEROCOPY
 * sockets where SO_ZEROCOPY is taken; plain memory always.
 */
#include "internal.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SO_ZEROCOPY
#define SO_ZEROCOPY 60
#endif
#define AP_KERNEL_ENOTSUPP 524

#define BACKEND_INFO_V1 sizeof(struct asyncpool_backend_info)

/* 0 if a ring of one entry can be set up, else -errno.  No liburing:
 * the probe must work in a build without it, as the answer is the
 * kernel's and the seccomp filter's, not the library's. */
static int probe_uring(void)
{
#ifdef __NR_io_uring_setup
	/* struct io_uring_params: 120 bytes, all zero asks for defaults. */
	uint64_t params[15];
	long fd;

	memset(params, 0, sizeof(params));
	fd = syscall(__NR_io_uring_setup, 1u, params);
	if (fd < 0)
		return -errno;
	close((int)fd);
	return 0;
#else
	return -ENOSYS;
#endif
}

/* kernel.io_uring_disabled (Linux 6.6): 0, 1, 2; -1 where absent. */
static int uring_disabled(void)
{
	char buf[16];
	ssize_t n;
	int fd = open("/proc/sys/kernel/io_uring_disabled", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0 || buf[0] < '0' || buf[0] > '9')
		return -1;
	return buf[0] - '0';
}

/* 0 if SO_ZEROCOPY is taken on a fresh socket of this type, else -errno. */
static int probe_zerocopy(int type)
{
	int one = 1, rc = 0;
	int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	if (setsockopt(fd, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof(one)))
		rc = errno == ENOPROTOOPT || errno == AP_KERNEL_ENOTSUPP ? -EOPNOTSUPP : -errno;
	close(fd);
	return rc;
}

AP_EXPORT int asyncpool_backend_probe(struct asyncpool_backend_info *out)
{
	struct asyncpool_backend_info b;
	size_t given;

	if (!out)
		return -EINVAL;
	given = out->size;
	if (given < BACKEND_INFO_V1)
		return -EINVAL;
	if (given > AP_STRUCT_SIZE_MAX)
		return -E2BIG;
	memset(&b, 0, sizeof(b));
	b.backends = ASYNCPOOL_BACKEND_MEMORY;
	b.uring_error = probe_uring();
	b.uring_disabled = uring_disabled();
	b.zerocopy_error = probe_zerocopy(SOCK_STREAM);
#ifdef HAVE_LIBURING
	if (!b.uring_error)
		b.backends |= ASYNCPOOL_BACKEND_URING;
#endif
	/* Built without liburing, the kernel's answer stays in uring_error,
	 * but asyncpool_proactor_create_uring() refuses: not a backend. */
	if (!b.zerocopy_error)
		b.backends |= ASYNCPOOL_BACKEND_ZEROCOPY_TCP;
	if (!probe_zerocopy(SOCK_DGRAM))
		b.backends |= ASYNCPOOL_BACKEND_ZEROCOPY_UDP;
	b.best = (b.backends & ASYNCPOOL_BACKEND_URING) ? ASYNCPOOL_BACKEND_URING :
		 (b.backends & ASYNCPOOL_BACKEND_ZEROCOPY_TCP) ? ASYNCPOOL_BACKEND_ZEROCOPY_TCP :
		 ASYNCPOOL_BACKEND_MEMORY;
	b.size = given;
	memcpy(out, &b, given < sizeof(b) ? given : sizeof(b));
	if (given > sizeof(b))
		memset((char *)out + sizeof(b), 0, given - sizeof(b));
	return 0;
}
