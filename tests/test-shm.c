/* SPDX-License-Identifier: MIT */
/*
 * Shared memory: sealed memfds (a peer process cannot resize them),
 * open_fd checks, named objects (mode whatever the umask, -EEXIST,
 * -ENOENT, bad names), fd passing, and no /dev/shm leftovers.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <asyncpool.h>
#include "tap.h"
#include "shared-common.h"

static void close_null(void *arg)
{
	(void)arg;
	asyncpool_shm_close(NULL);
}

static void test_create(void)
{
	struct asyncpool_shm shm, huge;
	int seals;

	memset(&shm, 0x55, sizeof(shm));
	is_int(asyncpool_shm_create(0, 0, &shm), -EINVAL, "create: size 0");
	ok(shm.base == NULL && shm.size == 0 && shm.fd == -1, "create: out cleared on failure");
	is_int(asyncpool_shm_create(4096, 0x80, &shm), -EINVAL, "create: unknown flag");
	is_int(asyncpool_shm_create(4096, 0, NULL), -EINVAL, "create: NULL out");
	is_int(asyncpool_shm_create(SIZE_MAX, 0, &shm), -EOVERFLOW, "create: size beyond off_t");

	is_int(asyncpool_shm_create(10000, 0, &shm), 0, "create: 10000 bytes");
	is_int(shm.size, 10000, "create: size as asked");
	ok(shm.base != NULL && shm.fd >= 0, "create: mapped, with an fd");
	ok(fcntl(shm.fd, F_GETFD) & FD_CLOEXEC, "create: the fd is close-on-exec");
	seals = fcntl(shm.fd, F_GET_SEALS);
	is_int(seals, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL, "create: sealed against shrink, grow and more seals");
	is_int(ftruncate(shm.fd, 4096) < 0 ? errno : 0, EPERM, "create: ftruncate smaller fails here too");
	memset(shm.base, 0xab, shm.size);
	asyncpool_shm_close(&shm);
	ok(shm.base == NULL && shm.size == 0 && shm.fd == -1, "close: struct cleared");
	asyncpool_shm_close(&shm);
	ok(shm.base == NULL && shm.size == 0 && shm.fd == -1, "close: twice is harmless, the struct stays cleared");
	ok(tap_survives(close_null, NULL), "close: NULL is harmless");

	is_int(asyncpool_shm_create(100000, ASYNCPOOL_SHM_HUGE_PREFER, &huge), 0,
	       "create: huge pages preferred (falls back without them)");
	ok(huge.size >= 100000, "create huge: at least the size asked (%zu)", huge.size);
	((char *)huge.base)[huge.size - 1] = 1;
	asyncpool_shm_close(&huge);
}

static void test_peer_truncate(void)
{
	struct asyncpool_shm shm;
	int sock, res[3] = { -1, -1, -1 };
	pid_t pid;
	struct stat st;

	if (asyncpool_shm_create(8192, 0, &shm))
		bail_out("shm_create");
	pid = spawn_peer(&sock, "truncate", NULL);
	if (pid < 0)
		bail_out("spawn");
	is_int(asyncpool_shm_send_fd(sock, shm.fd), 0, "send_fd to a peer process");
	ok(read_full(sock, res, sizeof(res)) == 0, "the peer answered");
	is_int(res[0], EPERM, "peer: ftruncate to 0 fails with EPERM");
	is_int(res[1], EPERM, "peer: ftruncate larger fails with EPERM");
	is_int(res[2], EPERM, "peer: adding a seal fails with EPERM");
	is_int(wait_peer(pid), 0, "peer exited 0");
	close(sock);
	fstat(shm.fd, &st);
	is_int(st.st_size, 8192, "the size is unchanged");
	((volatile char *)shm.base)[8191] = 1;
	asyncpool_shm_close(&shm);
}

static void test_open_fd(void)
{
	struct asyncpool_shm a, b;
	int fd, pfd[2], before;

	if (asyncpool_shm_create(4096, 0, &a))
		bail_out("shm_create");
	is_int(asyncpool_shm_open_fd(a.fd, &b), 0, "open_fd: a sealed memfd");
	ok(b.fd != a.fd && (fcntl(b.fd, F_GETFD) & FD_CLOEXEC), "open_fd: a close-on-exec duplicate");
	is_int(b.size, 4096, "open_fd: size from fstat");
	((char *)a.base)[17] = 42;
	is_int(((char *)b.base)[17], 42, "open_fd: the same memory");
	asyncpool_shm_close(&b);
	ok(fcntl(a.fd, F_GETFD) >= 0, "close of the opened one leaves the given fd open");
	asyncpool_shm_close(&a);

	memset(&b, 0x55, sizeof(b));
	is_int(asyncpool_shm_open_fd(-1, &b), -EBADF, "open_fd: -1");
	ok(b.base == NULL && b.fd == -1, "open_fd: out cleared on failure");
	is_int(asyncpool_shm_open_fd(0, NULL), -EINVAL, "open_fd: NULL out");

	fd = memfd_create("unsealed", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	ftruncate(fd, 4096);
	before = count_fds();
	is_int(asyncpool_shm_open_fd(fd, &b), -EPERM, "open_fd: memfd without the shrink seal");
	is_int(count_fds(), before, "open_fd: no fd leaked on failure");
	fcntl(fd, F_ADD_SEALS, F_SEAL_GROW);
	is_int(asyncpool_shm_open_fd(fd, &b), -EPERM, "open_fd: memfd sealed against grow only");
	close(fd);
	fd = memfd_create("nosealing", MFD_CLOEXEC);
	ftruncate(fd, 4096);
	is_int(asyncpool_shm_open_fd(fd, &b), -EPERM, "open_fd: memfd that cannot be sealed");
	close(fd);

	fd = memfd_create("empty", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW);
	is_int(asyncpool_shm_open_fd(fd, &b), -EINVAL, "open_fd: a sealed empty memfd is too small");
	close(fd);

	if (pipe2(pfd, O_CLOEXEC))
		bail_out("pipe");
	is_int(asyncpool_shm_open_fd(pfd[0], &b), -EINVAL, "open_fd: a pipe");
	close(pfd[0]);
	close(pfd[1]);
	is_int(asyncpool_shm_open_fd(pfd[0], &b), -EBADF, "open_fd: a closed fd");
}

static mode_t mode_of(int fd)
{
	struct stat st;

	return fstat(fd, &st) ? (mode_t)-1 : (st.st_mode & 07777);
}

static void test_named(void)
{
	static const mode_t masks[] = { 0, 022, 077 };
	struct asyncpool_shm a, b;
	char name[128], other[128], longname[NAME_MAX + 3];
	const char *bad[] = { "", "/", "noslash", "/a/b", "//", "/x/" };
	mode_t old;
	int fd;

	test_shm_name(name, sizeof(name), "named");
	test_shm_name(other, sizeof(other), "squat");
	old = umask(0);
	for (size_t i = 0; i < sizeof(masks) / sizeof(masks[0]); i++) {
		umask(masks[i]);
		is_int(asyncpool_shm_create_named(name, 4096, 0, &a), 0,
		       "create_named under umask %03o", (unsigned)masks[i]);
		is_int(mode_of(a.fd), 0600, "mode 0600 under umask %03o", (unsigned)masks[i]);
		ok(fcntl(a.fd, F_GETFD) & FD_CLOEXEC, "create_named: close-on-exec");
		asyncpool_shm_close(&a);
		is_int(asyncpool_shm_unlink_named(name), 0, "unlink_named");
	}
	umask(077);
	is_int(asyncpool_shm_create_named(name, 4096, 0640, &a), 0, "create_named with mode 0640");
	is_int(mode_of(a.fd), 0640, "mode 0640 under umask 077");
	is_int(asyncpool_shm_create_named(name, 4096, 0, &b), -EEXIST, "create_named: taken name");
	is_int(asyncpool_shm_open_named(name, &b), 0, "open_named");
	is_int(b.size, 4096, "open_named: size");
	((char *)a.base)[4095] = 7;
	is_int(((char *)b.base)[4095], 7, "open_named: the same memory");
	asyncpool_shm_close(&b);
	asyncpool_shm_close(&a);
	is_int(asyncpool_shm_unlink_named(name), 0, "unlink_named");
	umask(old);

	/* Someone else holds the name: we must not take it over. */
	fd = shm_open(other, O_RDWR | O_CREAT | O_EXCL, 0666);
	ok(fd >= 0, "a squatter creates the name first");
	is_int(asyncpool_shm_create_named(other, 4096, 0, &a), -EEXIST, "create_named: squatted name");
	ok(a.base == NULL && a.fd == -1, "create_named: out cleared on failure");
	is_int(mode_of(fd), 0666 & ~old, "the squatter's object is unchanged");
	close(fd);
	shm_unlink(other);

	is_int(asyncpool_shm_open_named(name, &a), -ENOENT, "open_named: missing");
	is_int(asyncpool_shm_unlink_named(name), -ENOENT, "unlink_named: missing");
	is_int(asyncpool_shm_create_named(name, 0, 0, &a), -EINVAL, "create_named: size 0");
	is_int(asyncpool_shm_create_named(name, 4096, 01777, &a), -EINVAL, "create_named: mode beyond 0777");
	is_int(asyncpool_shm_open_named(name, &a), -ENOENT, "create_named: nothing left after the errors");
	is_int(asyncpool_shm_create_named(name, 4096, 0, NULL), -EINVAL, "create_named: NULL out");

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		is_int(asyncpool_shm_create_named(bad[i], 4096, 0, &a), -EINVAL, "create_named: bad name '%s'", bad[i]);
		is_int(asyncpool_shm_open_named(bad[i], &a), -EINVAL, "open_named: bad name '%s'", bad[i]);
		is_int(asyncpool_shm_unlink_named(bad[i]), -EINVAL, "unlink_named: bad name '%s'", bad[i]);
	}
	is_int(asyncpool_shm_create_named(NULL, 4096, 0, &a), -EINVAL, "create_named: NULL name");
	is_int(asyncpool_shm_open_named(NULL, &a), -EINVAL, "open_named: NULL name");
	is_int(asyncpool_shm_unlink_named(NULL), -EINVAL, "unlink_named: NULL name");
	longname[0] = '/';
	memset(longname + 1, 'x', NAME_MAX + 1);
	longname[NAME_MAX + 2] = 0;
	is_int(asyncpool_shm_create_named(longname, 4096, 0, &a), -EINVAL, "create_named: name longer than NAME_MAX");
	longname[NAME_MAX + 1] = 0;
	is_int(asyncpool_shm_create_named(longname, 4096, 0, &a), 0, "create_named: name of NAME_MAX");
	asyncpool_shm_close(&a);
	is_int(asyncpool_shm_unlink_named(longname), 0, "unlink_named: name of NAME_MAX");
}

static void test_fd_passing(void)
{
	struct asyncpool_shm shm;
	struct stat s1, s2;
	int sv[2], fd = -5, before;
	char byte = 'x';

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		bail_out("socketpair");
	if (asyncpool_shm_create(4096, 0, &shm))
		bail_out("shm_create");
	is_int(asyncpool_shm_send_fd(sv[0], shm.fd), 0, "send_fd");
	is_int(asyncpool_shm_recv_fd(sv[1], &fd), 0, "recv_fd");
	fstat(shm.fd, &s1);
	fstat(fd, &s2);
	ok(fd >= 0 && s1.st_ino == s2.st_ino && s1.st_dev == s2.st_dev, "recv_fd: the same file");
	ok(fcntl(fd, F_GETFD) & FD_CLOEXEC, "recv_fd: close-on-exec");
	close(fd);

	/* A message without an fd. */
	write(sv[0], &byte, 1);
	is_int(asyncpool_shm_recv_fd(sv[1], &fd), -EBADMSG, "recv_fd: a message without an fd");
	is_int(fd, -1, "recv_fd: fd_out is -1 on failure");

	/* Two fds in one message: both closed, -EBADMSG. */
	{
		int two[2] = { shm.fd, shm.fd };
		struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
		union { struct cmsghdr a; char b[CMSG_SPACE(sizeof(two))]; } u;
		struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
				    .msg_control = u.b, .msg_controllen = sizeof(u.b) };
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);

		memset(&u, 0, sizeof(u));
		c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(two));
		memcpy(CMSG_DATA(c), two, sizeof(two));
		sendmsg(sv[0], &m, 0);
		before = count_fds();
		is_int(asyncpool_shm_recv_fd(sv[1], &fd), -EBADMSG, "recv_fd: two fds in one message");
		is_int(count_fds(), before, "recv_fd: the extra fds are closed");
	}
	is_int(asyncpool_shm_recv_fd(sv[1], NULL), -EINVAL, "recv_fd: NULL fd_out");
	is_int(asyncpool_shm_recv_fd(-1, &fd), -EBADF, "recv_fd: bad socket");
	is_int(asyncpool_shm_send_fd(sv[0], -1), -EBADF, "send_fd: bad fd");
	is_int(asyncpool_shm_send_fd(-1, shm.fd), -EBADF, "send_fd: bad socket");
	close(sv[0]);
	is_int(asyncpool_shm_recv_fd(sv[1], &fd), -ECONNRESET, "recv_fd: the peer closed");
	close(sv[1]);
	asyncpool_shm_close(&shm);
}

static void test_leftovers(void)
{
	char prefix[64];
	DIR *d = opendir("/dev/shm");
	struct dirent *e;
	int left = 0;

	snprintf(prefix, sizeof(prefix), "asyncpool-test-%ld-", (long)getpid());
	if (!d) {
		skip(1, "no /dev/shm");
		return;
	}
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, prefix, strlen(prefix))) {
			diag("left over: /dev/shm/%s", e->d_name);
			left++;
		}
	closedir(d);
	is_int(left, 0, "no /dev/shm leftovers");
}

int main(void)
{
	test_create();
	test_peer_truncate();
	test_open_fd();
	test_named();
	test_fd_passing();
	test_leftovers();
	return done_testing();
}
