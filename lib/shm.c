/* SPDX-License-Identifier: MIT */
/*
 * Shared memory for cross-process pools: an anonymous memfd, sealed
 * against shrink and grow and passed by fd over a Unix socket, or a
 * named POSIX shared memory object.
 *
 * A mapping of a file that a peer can shrink is a SIGBUS waiting to
 * happen, so an fd is only mapped when it carries F_SEAL_SHRINK, and a
 * name only when no other user can write its object (a peer of the
 * same uid can still truncate it: names are for peers trusted as
 * oneself).  Creation reserves every page (fallocate), so that a full
 * tmpfs says ENOSPC then, not SIGBUS later.
 */
#include "internal.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define SHM_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)
/* Seals that forbid a writable shared mapping. */
#define SHM_WRITE_SEALS (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE)
#define SHM_OPEN_FD_FLAGS ASYNCPOOL_SHM_OPEN_UNSEALED
#define SHM_OPEN_NAMED_FLAGS ASYNCPOOL_SHM_OPEN_OTHER_WRITERS
/* The huge page size when the kernel does not tell us. */
#define SHM_HUGE_DEFAULT (2u << 20)

static void shm_clear(struct asyncpool_shm *shm)
{
	shm->base = NULL;
	shm->size = 0;
	shm->fd = -1;
}

/* Map size bytes of fd shared and fill out; the fd stays open on failure. */
static int shm_mmap(int fd, size_t size, struct asyncpool_shm *out)
{
	void *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	if (base == MAP_FAILED)
		return -errno;
	out->base = base;
	out->size = size;
	out->fd = fd;
	return 0;
}

/*
 * Allocate every page of the first size bytes of fd now, so that a full
 * tmpfs (or no memory) fails here instead of with SIGBUS at the first
 * touch of a page that cannot be had.
 */
static int shm_reserve(int fd, size_t size)
{
	int rc;

	do
		rc = fallocate(fd, 0, 0, (off_t)size);
	while (rc < 0 && errno == EINTR);
	if (rc == 0)
		return 0;
	return errno == EFBIG ? -EOVERFLOW : -errno;
}

/* Give a new object its size, with every page reserved. */
static int shm_resize(int fd, size_t size)
{
	if (ftruncate(fd, (off_t)size) < 0)
		return errno == EFBIG ? -EOVERFLOW : -errno;
	return shm_reserve(fd, size);
}

/* A named object that only the caller's effective uid can write. */
static int shm_check_owner(const struct stat *st)
{
	if (st->st_uid != geteuid() || (st->st_mode & (S_IWGRP | S_IWOTH)))
		return -EPERM;
	return 0;
}

/*
 * The seals of an fd that we map: it must carry F_SEAL_SHRINK (a file
 * that cannot be sealed, a regular file on disk, does not) unless the
 * caller accepts an unsealed one, and no write seal (a pool is written).
 */
static int shm_check_seals(int fd, uint32_t flags)
{
	int seals = fcntl(fd, F_GET_SEALS);

	/* F_GET_SEALS fails with EINVAL on files that cannot be sealed. */
	if (seals < 0)
		seals = 0;
	if (seals & SHM_WRITE_SEALS)
		return -EACCES;
	if (!(seals & F_SEAL_SHRINK) && !(flags & ASYNCPOOL_SHM_OPEN_UNSEALED))
		return -EPERM;
	return 0;
}

/*
 * Map all of fd, which this function now owns (closed on failure).
 * An fd (named false) must pass shm_check_seals(); a named object,
 * which can never be sealed, shm_check_owner() instead.
 */
static int shm_map(int fd, bool named, uint32_t flags, struct asyncpool_shm *out)
{
	struct stat st;
	int rc;

	if (fstat(fd, &st) < 0) {
		rc = -errno;
		goto fail;
	}
	if (!S_ISREG(st.st_mode) || st.st_size <= 0) {
		rc = -EINVAL;
		goto fail;
	}
	if ((uintmax_t)st.st_size > SIZE_MAX) {
		rc = -EOVERFLOW;
		goto fail;
	}
	if (named)
		rc = (flags & ASYNCPOOL_SHM_OPEN_OTHER_WRITERS) ? 0 : shm_check_owner(&st);
	else
		rc = shm_check_seals(fd, flags);
	if (rc)
		goto fail;
	rc = shm_mmap(fd, (size_t)st.st_size, out);
	if (rc == 0)
		return 0;
fail:
	close(fd);
	return rc;
}

/* The huge page size of a hugetlb memfd: its block size. */
static size_t huge_size(int fd)
{
	struct stat st;

	if (fstat(fd, &st) == 0 && st.st_blksize > 0 &&
	    !((size_t)st.st_blksize & ((size_t)st.st_blksize - 1)))
		return (size_t)st.st_blksize;
	return SHM_HUGE_DEFAULT;
}

static int shm_try_create(size_t size, bool huge, struct asyncpool_shm *out)
{
	unsigned int mfd = MFD_CLOEXEC | MFD_ALLOW_SEALING;
	int fd, rc;

	if (huge)
		mfd |= MFD_HUGETLB;
	fd = memfd_create("asyncpool", mfd);
	if (fd < 0)
		return -errno;
	/*
	 * A memfd is made with mode 0777: a process of another user given
	 * a read-only fd could open /proc/self/fd/N read-write and map it
	 * writable.  0600: only our user can reopen it (asyncpool-shared(7),
	 * "What a descriptor gives").
	 */
	if (fchmod(fd, 0600) < 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	if (huge) {
		size_t page = huge_size(fd);

		if (size > SIZE_MAX - page) {
			close(fd);
			return -EOVERFLOW;
		}
		size = ap_align_up(size, page);
	}
	rc = (uint64_t)size > INT64_MAX ? -EOVERFLOW : shm_resize(fd, size);
	if (rc == 0 && fcntl(fd, F_ADD_SEALS, SHM_SEALS) < 0)
		rc = -errno;
	if (rc == 0)
		rc = shm_mmap(fd, size, out);
	if (rc)
		close(fd);
	return rc;
}

AP_EXPORT int asyncpool_shm_create(size_t size, uint32_t flags, struct asyncpool_shm *out)
{
	int rc;

	if (!out)
		return -EINVAL;
	shm_clear(out);
	if (size == 0 || (flags & ~ASYNCPOOL_SHM_HUGE_PREFER))
		return -EINVAL;
	if (flags & ASYNCPOOL_SHM_HUGE_PREFER) {
		/* No huge pages reserved, or none left: normal pages. */
		rc = shm_try_create(size, true, out);
		if (rc != -ENOMEM && rc != -EINVAL && rc != -ENOSPC && rc != -EOPNOTSUPP)
			return rc;
	}
	rc = shm_try_create(size, false, out);
	return rc == -ENOSPC ? -ENOMEM : rc;
}

AP_EXPORT int asyncpool_shm_open_fd_flags(int fd, uint32_t flags, struct asyncpool_shm *out)
{
	int own;

	if (!out)
		return -EINVAL;
	shm_clear(out);
	if (flags & ~SHM_OPEN_FD_FLAGS)
		return -EINVAL;
	if (fd < 0)
		return -EBADF;
	own = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (own < 0)
		return -errno;
	return shm_map(own, false, flags, out);
}

AP_EXPORT int asyncpool_shm_open_fd(int fd, struct asyncpool_shm *out)
{
	return asyncpool_shm_open_fd_flags(fd, 0, out);
}

/*
 * "/name": one leading slash, no other, not empty, at most NAME_MAX,
 * and not "/." or "/.." (the directory of the objects, and its parent).
 */
static int check_name(const char *name)
{
	size_t len;

	if (!name || name[0] != '/')
		return -EINVAL;
	len = strnlen(name + 1, NAME_MAX + 1);
	if (len == 0 || len > NAME_MAX || memchr(name + 1, '/', len))
		return -EINVAL;
	if (!strcmp(name, "/.") || !strcmp(name, "/.."))
		return -EINVAL;
	return 0;
}

AP_EXPORT int asyncpool_shm_create_named(const char *name, size_t size, mode_t mode,
					 struct asyncpool_shm *out)
{
	int fd, rc;

	if (!out)
		return -EINVAL;
	shm_clear(out);
	rc = check_name(name);
	if (rc)
		return rc;
	if (size == 0 || (mode & ~(mode_t)0777))
		return -EINVAL;
	if ((uint64_t)size > INT64_MAX)
		return -EOVERFLOW;
	if (mode == 0)
		mode = 0600;
	/* Created with at most the asked mode (the umask only removes
	 * bits), then set to exactly it. */
	fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, mode);
	if (fd < 0)
		return -errno;
	rc = fchmod(fd, mode) < 0 ? -errno : shm_resize(fd, size);
	if (rc == 0)
		rc = shm_mmap(fd, size, out);
	if (rc) {
		shm_unlink(name);
		close(fd);
	}
	return rc;
}

AP_EXPORT int asyncpool_shm_open_named_flags(const char *name, uint32_t flags,
					     struct asyncpool_shm *out)
{
	int fd, rc;

	if (!out)
		return -EINVAL;
	shm_clear(out);
	if (flags & ~SHM_OPEN_NAMED_FLAGS)
		return -EINVAL;
	rc = check_name(name);
	if (rc)
		return rc;
	fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	return shm_map(fd, true, flags, out);
}

AP_EXPORT int asyncpool_shm_open_named(const char *name, struct asyncpool_shm *out)
{
	return asyncpool_shm_open_named_flags(name, 0, out);
}

AP_EXPORT int asyncpool_shm_unlink_named(const char *name)
{
	int rc = check_name(name);

	if (rc)
		return rc;
	return shm_unlink(name) < 0 ? -errno : 0;
}

AP_EXPORT void asyncpool_shm_close(struct asyncpool_shm *shm)
{
	/* A live shm always has a base: a zeroed or closed one is left alone,
	 * so that its fd 0 or -1 is never closed. */
	if (!shm || !shm->base)
		return;
	munmap(shm->base, shm->size);
	if (shm->fd >= 0)
		close(shm->fd);
	shm_clear(shm);
}

/* Room for a few fds, so that extra ones are received and closed. */
#define RECV_MAX_FDS 16

/* The one-byte message that carries a descriptor (SCM_RIGHTS). */
struct fd_msg {
	struct msghdr msg;
	struct iovec iov;
	char byte;
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(RECV_MAX_FDS * sizeof(int))];
	} u;
};

/* Zero m, then point it at its byte and at room for nfds descriptors. */
static void fd_msg_init(struct fd_msg *m, unsigned int nfds)
{
	memset(m, 0, sizeof(*m));
	m->iov.iov_base = &m->byte;
	m->iov.iov_len = 1;
	m->msg.msg_iov = &m->iov;
	m->msg.msg_iovlen = 1;
	m->msg.msg_control = m->u.buf;
	m->msg.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
}

AP_EXPORT int asyncpool_shm_send_fd(int sock, int fd)
{
	struct fd_msg m;
	struct cmsghdr *c;
	ssize_t n;

	if (sock < 0 || fd < 0)
		return -EBADF;
	fd_msg_init(&m, 1);
	m.byte = 'F';
	c = CMSG_FIRSTHDR(&m.msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	do
		n = sendmsg(sock, &m.msg, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	return n == 1 ? 0 : -EIO;
}

AP_EXPORT int asyncpool_shm_recv_fd(int sock, int *fd_out)
{
	struct fd_msg m;
	int fds[RECV_MAX_FDS];
	unsigned int nfds = 0;
	ssize_t n;

	if (!fd_out)
		return -EINVAL;
	*fd_out = -1;
	if (sock < 0)
		return -EBADF;
	fd_msg_init(&m, RECV_MAX_FDS);
	do
		n = recvmsg(sock, &m.msg, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m.msg); c; c = CMSG_NXTHDR(&m.msg, c)) {
		size_t len;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
		    c->cmsg_len < CMSG_LEN(0))
			continue;
		len = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < len && nfds < RECV_MAX_FDS; i++)
			memcpy(&fds[nfds++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
	}
	if (n == 0 && nfds == 0)
		return -ECONNRESET;
	if (nfds != 1 || (m.msg.msg_flags & MSG_CTRUNC)) {
		for (unsigned int i = 0; i < nfds; i++)
			close(fds[i]);
		return -EBADMSG;
	}
	*fd_out = fds[0];
	return 0;
}
