/* SPDX-License-Identifier: MIT */
/*
 * Shared memory is reserved when it is created (issue 14, finding 4): a
 * pool larger than the free space of its tmpfs must fail at creation
 * with -ENOSPC, not kill the process with SIGBUS when its buffers are
 * written.
 *   - every kind of object has all its blocks allocated on return
 *     (st_blocks), memfds and named objects alike;
 *   - in a private mount namespace with a 1 MiB tmpfs on /dev/shm (needs
 *     root: skipped otherwise), a 4 MiB named pool fails with -ENOSPC
 *     and leaves no name, a pool that fits is written whole, and a
 *     second one that no longer fits fails too.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <asyncpool.h>
#include "tap.h"
#include "testutil.h"
#include "shared-common.h"

#define MIB (1024 * 1024)

static long long allocated(int fd)
{
	struct stat st;

	return fstat(fd, &st) ? -1 : (long long)st.st_blocks * 512;
}

static int shared_pool(const char *name, uint32_t count, size_t bs,
		       struct asyncpool_shared **sp)
{
	struct asyncpool_shared_options o;

	memset(&o, 0, sizeof(o));
	o.size = sizeof(o);
	o.buffer_size = bs;
	o.buffer_count = count;
	o.name = name;
	return asyncpool_shared_create(&o, sp);
}

static void test_blocks(void)
{
	struct asyncpool_shm shm;
	struct asyncpool_shared *sp;
	char name[128];

	test_shm_name(name, sizeof(name), "reserve");
	if (asyncpool_shm_create(MIB, 0, &shm))
		bail_out("shm_create");
	ok(allocated(shm.fd) >= MIB, "shm_create: 1 MiB memfd, every block allocated (%lld bytes)",
	   allocated(shm.fd));
	asyncpool_shm_close(&shm);

	if (asyncpool_shm_create_named(name, MIB, 0, &shm))
		bail_out("shm_create_named");
	ok(allocated(shm.fd) >= MIB, "shm_create_named: 1 MiB, every block allocated (%lld bytes)",
	   allocated(shm.fd));
	asyncpool_shm_close(&shm);
	asyncpool_shm_unlink_named(name);

	if (shared_pool(NULL, 64, 16384, &sp))
		bail_out("shared_create");
	ok(allocated(asyncpool_shared_fd(sp)) >= (long long)asyncpool_shared_shm(sp)->size,
	   "shared_create (memfd): every block allocated");
	asyncpool_shared_close(sp);

	if (shared_pool(name, 64, 16384, &sp))
		bail_out("shared_create named");
	ok(allocated(asyncpool_shared_fd(sp)) >= (long long)asyncpool_shared_shm(sp)->size,
	   "shared_create (named): every block allocated");
	asyncpool_shared_close(sp);
	asyncpool_shm_unlink_named(name);
}

/* What the child in the small tmpfs saw. */
enum { R_BIG, R_BIG_LEFT, R_SHM_BIG, R_FITS, R_WROTE, R_SECOND, R_SECOND_LEFT, R_COUNT };

static void small_tmpfs_child(int out)
{
	struct asyncpool_shared *sp, *again;
	struct asyncpool_shm shm;
	char name[128], second[128];
	int r[R_COUNT];

	for (int i = 0; i < R_COUNT; i++)
		r[i] = -9999;
	test_shm_name(name, sizeof(name), "small-tmpfs");
	test_shm_name(second, sizeof(second), "small-tmpfs-2");
	/* 64 buffers of 64 KiB: 4 MiB in a 1 MiB tmpfs */
	r[R_BIG] = shared_pool(name, 64, 65536, &sp);
	if (r[R_BIG] == 0)
		memset(asyncpool_region_base(asyncpool_shared_region(sp)), 1, 64 * 65536);
	r[R_BIG_LEFT] = asyncpool_shm_open_named(name, &shm);
	r[R_SHM_BIG] = asyncpool_shm_create_named(name, 4 * MIB, 0, &shm);
	/* 8 x 64 KiB fits; write every byte of it */
	r[R_FITS] = shared_pool(name, 8, 65536, &sp);
	if (r[R_FITS] == 0) {
		memset(asyncpool_region_base(asyncpool_shared_region(sp)), 2, 8 * 65536);
		r[R_WROTE] = 0;
		/* another 8 x 64 KiB is more than what is left */
		r[R_SECOND] = shared_pool(second, 8, 65536, &again);
		if (r[R_SECOND] == 0)
			memset(asyncpool_region_base(asyncpool_shared_region(again)), 3, 8 * 65536);
		r[R_SECOND_LEFT] = asyncpool_shm_open_named(second, &shm);
	}
	write_full(out, r, sizeof(r));
	_exit(0);
}

static void test_small_tmpfs(void)
{
	int pfd[2], r[R_COUNT], st;
	pid_t pid;

	if (geteuid() != 0) {
		skip(8, "not root: cannot mount a small tmpfs on /dev/shm");
		return;
	}
	if (pipe2(pfd, O_CLOEXEC))
		bail_out("pipe");
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		bail_out("fork");
	if (pid == 0) {
		close(pfd[0]);
		if (unshare(CLONE_NEWNS) ||
		    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
		    mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=1777"))
			_exit(100);
		small_tmpfs_child(pfd[1]);
	}
	close(pfd[1]);
	memset(r, 0, sizeof(r));
	if (read_full(pfd[0], r, sizeof(r)) != 0) {
		close(pfd[0]);
		st = wait_peer(pid);
		if (st == 100) {
			skip(8, "cannot mount a tmpfs in a new mount namespace here");
			return;
		}
		ok(0, "the child in a 1 MiB tmpfs reported (it exited %d%s)", st,
		   st == 128 + SIGBUS ? ": SIGBUS" : "");
		skip(7, "no report");
		return;
	}
	close(pfd[0]);
	is_int(wait_peer(pid), 0, "the child in a 1 MiB tmpfs exited 0 (no SIGBUS)");
	is_int(r[R_BIG], -ENOSPC, "shared_create: 4 MiB named pool in a 1 MiB tmpfs: ENOSPC");
	is_int(r[R_BIG_LEFT], -ENOENT, "  no name left behind");
	is_int(r[R_SHM_BIG], -ENOSPC, "shm_create_named: 4 MiB in a 1 MiB tmpfs: ENOSPC");
	is_int(r[R_FITS], 0, "shared_create: 512 KiB of buffers fit");
	is_int(r[R_WROTE], 0, "  every buffer written");
	is_int(r[R_SECOND], -ENOSPC, "shared_create: another 512 KiB no longer fits: ENOSPC");
	is_int(r[R_SECOND_LEFT], -ENOENT, "  no name left behind");
}

int main(void)
{
	test_blocks();
	test_small_tmpfs();
	return done_testing();
}
